"""Chapter 4's findings: every clause follows the record it is made from, including a sign
flip across proportions, the planted control fired or not, and the gradient reading."""
import numpy as np
import pandas as pd
import pytest

from fgclip import verdicts
from fgclip.studies.decoupling import arms as darms, findings as dfind
from fgclip.train.selection import Selection


def _v(shift: float, seed: int = 0) -> verdicts.Verdict:
    """A verdict whose difference A - B is about ``shift`` (4 seeds x 16 categories)."""
    rng = np.random.default_rng(seed)
    b = 0.5 + rng.normal(0, 0.02, (4, 16))
    return verdicts.compare(b + shift + rng.normal(0, 0.002, (4, 16)), b, claim="c", arms=("a", "b"),
                            unit="categories", cluster_unit="categories", seed=0, margin=0.02)


def _grads(unknown_up: float) -> pd.DataFrame:
    row = {"known positive": 1e-3, "known negative": 3e-5, "unknown": 2e-5, "known positive up": 1.0,
           "known positive down": 0.0, "known negative up": 0.0, "known negative down": 0.5, "unknown up": unknown_up,
           "unknown down": 1 - unknown_up, "negatives under m": 0.54, "negatives, own terms deleted": 2.9e-5,
           "coupling share": 0.97, "m": 0.05}
    sig = {**row, "unknown": 0.0, "unknown up": 0.0, "unknown down": 0.0, "coupling share": 0.0}
    return pd.DataFrame({"softmax": row, "sigmoid+affine": sig}).T


def _check(best: int) -> dict:
    """A convergence check of the full model chosen at epoch 8 of 8, trained on to 12."""
    return {"arm": darms.FULL.name, "lr": 0.01, "chosen": 8, "budget": 8, "horizon": 12, "best epoch": best,
            "converged": best <= 8, "mean curve": [0.5] * 12, "rerun deviation": 0.0}


def _planted(shift: float, best: int = 8):
    """A planted-control run: softmax minus sigmoid+affine ``shift``; the sigmoid checked, best at ``best``."""
    from types import SimpleNamespace
    sel = Selection("s", 0.01, 8, 0.8, {0.01: [[0.5] * 8] * 2}, (0, 1), 12, True)
    check = {**_check(best), "arm": darms.FULL_AFFINE.name, "budget": 12, "horizon": 16, "converged": best <= 8}
    return SimpleNamespace(verdict=_v(shift), selections={darms.FULL: sel, darms.FULL_AFFINE: sel},
                           checks={darms.FULL: None, darms.FULL_AFFINE: check})


def _findings(affine_shifts=(-0.1, 0.1, 0.1), planted_shift=-0.07, unknown_up=0.34, converged=False,
              check=None, a_a=None, planted_best=8):
    rhos = (0.1, 0.5, 0.9)
    test_v = {(darms.FULL_AFFINE, r): _v(s, i) for i, (r, s) in enumerate(zip(rhos, affine_shifts))}
    sel = Selection("full", 0.01, 8 if not converged else 3, 0.8, {0.01: [[0.5 + 0.01 * e for e in range(8)]] * 2},
                    (0, 1), 8, converged)
    zs = {"verdicts": [_v(-0.05), _v(0.0), _v(0.05)], "known": list(rhos), "prompt drift": 0.012, "context tokens": 1,
          "start": {"untrained": 0.44, "zero-shot": 0.69, "known": 0.5},
          "convergence": {"lr": 0.01, "epochs": sel.epochs, "budget": 8, "converged": converged,
                          "val first epoch": 0.5, "val chosen epoch": 0.57, "check": check}}
    a_a = _v(0.0) if a_a is None else a_a
    fals = verdicts.falsify(test_v[darms.FULL_AFFINE, 0.5], _v(-0.1), a_a, verdicts.B_BETTER)
    planted = _planted(planted_shift, planted_best)
    return dfind.chapter_findings([_v(0.0)] * 6, _v(0.2), _grads(unknown_up), test_v, fals, a_a,
                                  verdicts.power_check(_v(0.1), 0.02), {darms.FULL: sel}, "data", planted, zs,
                                  {} if check is None else {darms.FULL: check})


def test_each_clause_follows_its_record():
    f = _findings()
    assert f["same-across-proportions"].startswith("not the same") and "changes sign" in f["same-across-proportions"]
    p = f["planted"]
    assert "-0.070" in p and "as predicted, the softmax lost: the control fired" in p
    assert "full, sigmoid+affine lr 0.01, 8 of 12 epochs, converged (trained on to epoch 16: best at 8)" in p
    assert "on the planted world" not in f["falsification"]  # its sigmoid converged
    late = _findings(planted_best=16)
    assert "full, sigmoid+affine on the planted world was still improving (trained on to epoch 16" in late["falsification"]
    quiet = _findings(planted_shift=0.07)["planted"]  # the softmax better where it was predicted to lose
    assert "+0.070" in quiet and "predicted: b better; it did not fire (a better)" in quiet and "fired:" not in quiet
    g = f["unknown-gradients"]
    assert "34% of them pushed up and 66% down" in g and "54% of the known negatives" in g
    assert "97% of their gradient remains" in g and "exactly 0" in g and "m = 0.05" in g
    z = f["full-zero-shot-diagnosis"]
    assert z.count("known:") == 3 and "below zero-shot's 0.690" in z and "not converged" in z and "0.012" in z and "M = 1 context" in z
    assert f["not-converged"] == f"{darms.FULL.name} (not checked beyond the budget)"


@pytest.mark.parametrize("best,word", [(8, "converged at its choice"), (12, "still improving")])
def test_convergence_clauses_read_the_check(best, word):
    f = _findings(check=_check(best))
    assert word in f["not-converged"] and f"best at epoch {best}" in f["not-converged"] and "epoch 12" in f["not-converged"]
    assert word.split(",")[0] in f["full-zero-shot-diagnosis"] and f"best at epoch {best}" in f["full-zero-shot-diagnosis"]
    # a comparison whose arm was still improving says it holds at this budget, not at convergence
    assert ("At this budget, not at convergence" in f["falsification"]) == (best > 8)
    early = _findings(converged=True, check={**_check(3), "chosen": 3, "best epoch": 3, "converged": True})
    assert "converged at its choice" in early["not-converged"]  # chosen near the end, checked


def test_a_a_clause_states_the_spread_and_the_four_seed_half_width():
    rng = np.random.default_rng(1)
    a = 0.5 + rng.normal(0, 0.02, (10, 16))
    for noise, word in ((0.002, "within"), (0.03, "wider than")):
        b = a + rng.normal(0, noise, (10, 1))  # per-seed offsets: the between-seed spread
        v = verdicts.compare(a, b, claim="A/A", arms=("A", "B"), unit="categories", cluster_unit="categories",
                             seed=0, margin=0.02)
        clause = _findings(a_a=v)["a-a"]
        sd = np.std(v.seed_differences, ddof=1)
        assert f"{sd:.3f}" in clause and f"{word} the margin 0.02" in clause and "at 4 seeds a side" in clause
        assert f"{3.182 * sd / 2:.3f}" in clause or f"{3.1824 * sd / 2:.3f}" in clause


@pytest.mark.parametrize("flip", [False, True])
def test_clauses_change_with_the_record(flip):
    f = _findings(affine_shifts=(0.1, 0.1, 0.1), planted_shift=0.005, unknown_up=0.0, converged=True)
    assert f["same-across-proportions"].startswith("the same") and "changes sign" not in f["same-across-proportions"]
    assert "it did not fire" in f["planted"]
    assert "all of them pushed down" in f["unknown-gradients"]
    assert "before the budget's end" in f["full-zero-shot-diagnosis"] and f["not-converged"] == "none"
    if flip:  # one proportion's difference flips sign: the clause must say so
        f = _findings(affine_shifts=(0.1, -0.1, 0.1), converged=True)
        assert "changes sign" in f["same-across-proportions"]


def test_full_vs_zero_shot_record():
    from types import SimpleNamespace

    import torch

    from fgclip.studies.decoupling import comparisons as dcmp

    rng, rhos = np.random.default_rng(0), [0.1, 0.5, 0.9]
    zs = 0.6 + rng.normal(0, 0.02, (1, 16)).repeat(4, 0)
    ap = {(darms.FULL, r, "p"): zs - 0.1 + rng.normal(0, 0.003, (4, 16)) for r in rhos}
    ap |= {(darms.ZERO_SHOT, r, "p"): zs for r in rhos} | {(darms.UNTRAINED, r, "p"): zs - 0.2 for r in rhos}
    text = torch.randn(16, 8)
    sel = Selection("full", 0.01, 8, 0.7, {0.01: [[0.4 + 0.03 * e for e in range(8)]] * 2}, (0, 1), 8, False)
    sweep = SimpleNamespace(ap=ap, selections={darms.FULL: sel}, heads={darms.FULL: SimpleNamespace(text_features=text)})
    d = dcmp.full_vs_zero_shot(sweep, rhos, 0, 0.02, text)
    assert [v.verdict for v in d["verdicts"]] == [verdicts.B_BETTER] * 3  # zero-shot better, as planted
    assert d["prompt drift"] == pytest.approx(0.0, abs=1e-6) and d["start"]["untrained"] == pytest.approx(zs.mean() - 0.2)
    assert d["convergence"]["val first epoch"] == pytest.approx(0.4) and not d["convergence"]["converged"]
    assert d["context tokens"] == 0  # a head without a prompt learner
    assert d["validation curves"] is None and d["decoupling only verdicts"] == []  # the sweep has no such arm
    ap |= {(darms.DECOUPLING_ONLY, r, "p"): zs + 0.05 for r in rhos}
    dec = dcmp.full_vs_zero_shot(sweep, rhos, 0, 0.02, text)
    assert [v.verdict for v in dec["decoupling only verdicts"]] == [verdicts.A_BETTER] * 3
    assert "Decoupling only (no learned prompts) against zero-shot: 10% known: decoupling only" in dfind.zero_shot_clause(dec)
    zs_text = dfind.zero_shot_clause(d)
    assert "Untrained (no label has been seen yet), it starts at mAP" in zs_text and "trained at lr" not in zs_text
    rec = {"arm": "full", "lr": 0.01, "budget": 8, "chosen": 8, "seeds": [0, 1], "zero-shot": 0.6, "untrained": 0.4,
           "per known": [{"known": 0.1, "mean curve": [0.5] * 8, "best epoch": 1, "best": 0.5, "at chosen": 0.5,
                          "median known positives": 3.0}]}
    d = dcmp.full_vs_zero_shot(sweep, rhos, 0, 0.02, text, {"full": rec, "other": {**rec, "arm": "other"}})
    zs_text = dfind.zero_shot_clause(d)
    assert zs_text.count("trained at lr 0.01") == 2 and ". full, trained at lr" in zs_text and ". other, " in zs_text


def test_planted_clause_names_the_crowding_it_plants_too():
    run = _planted(-0.07)
    assert "crowded" not in dfind.planted_clause(run)  # no reference: no claim about crowding
    run.reference_labels, run.labels_per_image = 1.98, lambda: 3.91
    text = dfind.planted_clause(run)
    assert "its images hold 3.91 categories on average against 1.98 in the chapter's world" in text
    assert "reads the two together" in text
