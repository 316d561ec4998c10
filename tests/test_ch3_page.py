"""Chapter 3's page helpers: the global slot's share, the forgetting sentence, the teacher arms'
labels and the chapter's verdict list, the A/A control among them."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch

from fgclip.studies.for_retrieval import folds as ff, page, protocol as fp
from fgclip.train.selection import Selection
from fgclip.verdicts import A_BETTER, B_BETTER, CANNOT_TELL, EQUIVALENT, Verdict


def _verdict(outcome: str, arms=("supervised only", "CLIP global")) -> Verdict:
    return Verdict("c", arms, 0.5, 0.5, 0.0, -0.1, 0.1, 0.95, 2, 8, 2, "units", "folds", 2, outcome, margin=0.02)


def test_global_slot_share_counts_the_pairs_the_global_slot_wins():
    text = torch.tensor([[1.0, 0.0]])  # one query
    emb = torch.tensor([[[0.9, 0.1], [0.5, 0.5]],  # image 0: the global slot (first) wins
                        [[0.1, 0.9], [0.8, 0.2]]])  # image 1: the learned slot wins
    assert ff.global_slot_share(text, emb) == 0.5
    assert ff.global_slot_share(text, emb[:1]) == 1.0
    with pytest.raises(ValueError, match="S >= 2"):
        ff.global_slot_share(text, emb[:, :1])


def test_global_slot_diagnostic_by_hand_and_refuses_raw_lengths():
    text = torch.tensor([[1.0, 0.0], [0.0, 1.0]])  # two queries
    emb = torch.tensor([[[0.8, 0.6], [0.6, -0.8]],  # image 0: the global slot (first) wins both queries
                        [[0.6, 0.8], [1.0, 0.0]],  # image 1: the learned slot wins query 0, the global query 1
                        [[0.28, 0.96], [-1.0, 0.0]]])  # image 2: the global slot wins both
    relevant = torch.tensor([[True, False, False], [False, True, False]])
    d = ff.global_slot_diagnostic(text, emb, relevant)
    assert d["share"] == pytest.approx(5 / 6) and d["learned_wins"] == 1 and d["pairs"] == 6 and d["queries"] == 2
    # query 0: the global order 0 > 1 > 2 becomes 1 > 0 > 2, so its relevant image 0 drops to second
    assert d["queries_reordered"] == 1 and d["queries_ap_changed"] == 1
    assert d["cos_global"] == pytest.approx(4.04 / 6) and d["cos_best_learned"] == pytest.approx(-0.2 / 6)
    assert d["cos_best_learned"] < d["cos_global"]
    raw = emb.clone()
    raw[:, 0] *= 40.0  # CLIP's unnormalised global embedding: it would win every pair by its length
    with pytest.raises(ValueError, match="L2-normalised"):
        ff.global_slot_diagnostic(text, raw, relevant)


def _slot(share=1.0, wins=0, reordered=0, changed=0):
    return {"share": share, "learned_wins": wins, "pairs": 100, "queries": 4, "queries_reordered": reordered,
            "queries_ap_changed": changed, "cos_global": 0.3, "cos_best_learned": 0.1}


def test_global_slot_sentence_drops_the_arm_only_when_no_ap_changes():
    text, drop = page.global_slot_sentence([_slot(), _slot()])
    assert drop and "identity" in text and "1.0000 at its lowest" in text and "the AP of 0" in text
    text, drop = page.global_slot_sentence([_slot(), _slot(0.99, 3, 1, 0)])  # a reordering that no AP sees
    assert drop and "0.9900" in text and "in 3 of 200" in text and "in 1 of the 8 (query, run) rankings" in text
    text, drop = page.global_slot_sentence([_slot(), _slot(0.99, 1, 1, 1)])
    assert not drop and "only through those 1 rankings" in text and "0.300" in text and "0.100" in text
    with pytest.raises(ValueError, match="empty"):
        page.global_slot_sentence([])
    with pytest.raises(ValueError, match="queries_ap_changed"):
        page.global_slot_sentence([{"share": 1.0}])


def test_forgetting_sentence_follows_the_verdicts():
    sel = Selection("supervised only", 3e-3, 1, 0.5, {3e-3: [[0.5]]}, (0, 1), 6)
    same = _verdict(EQUIVALENT, page.GAIN_ARMS)
    text = page.forgetting_sentence(_verdict(CANNOT_TELL), _verdict(CANNOT_TELL), _verdict(A_BETTER),
                                    _verdict(A_BETTER), same, sel)
    assert text.startswith("Forgetting was not shown here") and "1 of 6 epochs" in text and "lr 0.003" in text
    assert "not distinguishable at this size from CLIP's own embedding" in text and "above the head's" in text
    assert "gained alike" in text and "+0.000 [-0.100, +0.100]" in text and "within ±0.02" in text
    text = page.forgetting_sentence(_verdict(B_BETTER), _verdict(A_BETTER), _verdict(EQUIVALENT),
                                    _verdict(A_BETTER), same, sel)
    assert text.startswith("Forgetting was shown here") and "fell below CLIP's own embedding" in text
    assert "the head's own start" not in text.split("fell below")[1]
    # below CLIP on the base categories too, above its own start: a weaker embedding, not forgetting
    text = page.forgetting_sentence(_verdict(B_BETTER), _verdict(B_BETTER), _verdict(A_BETTER), _verdict(A_BETTER),
                                    _verdict(A_BETTER, page.GAIN_ARMS), sel)
    assert text.startswith("Forgetting was not shown here") and "weaker embedding" in text
    assert "below it on the base ones" in text and "learned the labels it was taught more" in text
    text = page.forgetting_sentence(_verdict(B_BETTER), _verdict(B_BETTER), _verdict(A_BETTER), _verdict(A_BETTER),
                                    _verdict(CANNOT_TELL, page.GAIN_ARMS), sel)
    assert "cannot be told at this size" in text and "gained alike" not in text
    text = page.forgetting_sentence(_verdict(B_BETTER), _verdict(B_BETTER), _verdict(B_BETTER), _verdict(A_BETTER),
                                    same, sel)
    assert text.startswith("Forgetting was shown here") and "fell below the head's own start" in text


def test_gain_verdict_pairs_the_base_and_novel_gains_of_each_fold_and_seed():
    folds, cats, seeds = [["a", "b"], ["c", "d"], ["e", "f"]], list("abcdef"), [0, 1]
    # the untrained start scores 0.2 everywhere; training adds 0.3 to the fold's base categories
    # and `novel_gain` to its novel ones (category "f" has no relevant image: NaN, skipped)
    def rows(novel_gain):
        out = []
        for f, fold in enumerate(folds):
            for s in seeds:
                for c in cats:
                    role = "novel" if c in fold else "base"
                    ap = float("nan") if c == "f" else 0.2
                    out += [{"arm": ff.UNTRAINED, "fold": f, "seed": s, "category": c, "role": role, "AP": ap},
                            {"arm": ff.SUPERVISED, "fold": f, "seed": s, "category": c, "role": role,
                             "AP": ap + (novel_gain + 0.001 * s if role == "novel" else 0.3)}]
        return pd.DataFrame(out)
    v = page.gain_verdict(rows(0.3), ff.SUPERVISED, ff.UNTRAINED, folds, seeds, "AP", 0.02, 0)
    assert v.arms == page.GAIN_ARMS and v.n_units == 3 and v.verdict == EQUIVALENT
    assert v.difference == pytest.approx(-0.0005) and v.mean_a == pytest.approx(0.3)
    v = page.gain_verdict(rows(0.1), ff.SUPERVISED, ff.UNTRAINED, folds, seeds, "AP", 0.02, 0)
    assert v.verdict == A_BETTER and v.difference == pytest.approx(0.1995)
    with pytest.raises(ValueError, match="no rows for arm"):
        page.gain_verdict(rows(0.3), ff.SUPERVISED, "nobody", folds, seeds, "AP", 0.02, 0)


def test_underpowered_sentence_names_the_failing_verdicts_and_the_cost():
    ok = {"claim": "a vs b", "half_width": 0.01, "target": 0.02, "met": True}
    low = {"claim": "c vs d", "half_width": 0.08, "target": 0.01, "met": False}
    folds, cats = [["a", "b"], ["c", "d"]], ["a", "b", "c", "d"]
    text = page.underpowered_sentence([ok, low], low, folds, cats, 100.0)
    assert text.startswith("1 of the 2 verdicts are under-powered") and "c vs d (half-width 0.080, target 0.010)" in text
    assert "a vs b" not in text and "about 64 times as many folds" in text and "1.8 h" in text
    assert "at most 2 times as many folds" in text and "about 0.057" in text
    assert text.endswith("above the target of 0.010, so more folds alone cannot meet it: more seeds or more "
                         "categories would be needed.")
    near = {"claim": "c vs d", "half_width": 0.021, "target": 0.01, "met": False}  # 4.4x the folds, 2x at most
    text = page.underpowered_sentence([near], near, folds * 4, cats * 4, 100.0)  # 8 folds of 16 categories
    assert "about 4.4 times as many folds" in text and "at most 2 times" in text and "cannot meet it" in text
    assert "about 4.4 times as many categories" in page.underpowered_sentence([near], near, [cats], cats, 100.0)
    far = page.underpowered_sentence([near], near, [["a"]] * 2, ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"], 100.0)
    assert "at most 5 times" in far and far.endswith("within the target, but not affordable in this chapter's budget.")
    assert page.underpowered_sentence([ok], ok, folds, cats, 100.0) == "All 1 verdicts meet that rule."
    assert page.underpowered_sentence([low], low, [cats], cats, 100.0).endswith(
        "about 64 times as many categories (at the 1/√n rate); one fixed split cannot rotate.")
    with pytest.raises(ValueError, match="empty"):
        page.underpowered_sentence([], ok, folds, cats, 100.0)


def test_teacher_arm_labels_by_hand():
    truth = torch.tensor([[True, False, True], [False, True, False]])
    scores = torch.tensor([[0.9, 0.8, 0.1], [0.7, 0.6, 0.05]])
    assert [t.tolist() for t in ff.planted_labels(truth)] == [[0, 2], [1]]
    assert [t.tolist() for t in ff.oracle_labels(scores, truth, 0.5)] == [[0], [1]]  # 1 and 0 were wrong
    table = ff.teacher_examples(["a", "b", "c"], {"oracle": ff.oracle_labels(scores, truth, 0.95)}, n=2)
    assert table["oracle"].tolist() == ["-", "-"]


AA = fp.a_a_seeds([0, 1], (0, 1), 2)  # the A/A's sides: [0, 1] and [2, 3]


def _seeds(arm: str, seeds: list[int]) -> list[int]:
    """The seeds an arm's rows carry: the A/A control's are its own."""
    return AA.b if arm == ff.A_A_B else seeds


def test_chapter_verdicts_leave_out_a_dropped_arm():
    rng = np.random.default_rng(0)
    folds, cats, seeds = [["a", "b"], ["c", "d"]], ["a", "b", "c", "d"], [0, 1]
    arms = [ff.FOR, ff.CLUSTER, ff.GLOBAL, ff.SUPERVISED, ff.UNTRAINED, ff.PLANTED, ff.A_A, ff.A_A_B, ff.GLOBAL_SLOT]
    rows = pd.DataFrame([{"arm": a, "fold": f, "seed": s, "category": c, "role": "novel" if c in fold else "base",
                          "AP": rng.uniform()} for a in arms for f, fold in enumerate(folds) for s in _seeds(a, seeds) for c in cats])
    kept = page.chapter_verdicts(rows, folds, cats, seeds, AA, ["AP"], "AP", 0.02, 0)
    dropped = page.chapter_verdicts(rows, folds, cats, seeds, AA, ["AP"], "AP", 0.02, 0, drop=[ff.GLOBAL_SLOT])
    assert (ff.GLOBAL_SLOT, ff.GLOBAL) in {v.arms for v in kept.all}
    assert ff.GLOBAL_SLOT not in {a for v in dropped.all for a in v.arms}
    assert len(kept.all) == len(dropped.all) + 2 and dropped.by_arms(ff.FOR, ff.SUPERVISED) is dropped.repair


def test_findings_take_the_global_slot_sentence_as_made():
    rng = np.random.default_rng(1)
    folds, cats, seeds = [["a", "b"], ["c", "d"]], ["a", "b", "c", "d"], [0, 1]
    arms = [ff.FOR, ff.CLUSTER, ff.GLOBAL, ff.SUPERVISED, ff.UNTRAINED, ff.PLANTED, ff.A_A, ff.A_A_B, ff.PAPER,
            ff.NAMES_REMOVED, ff.ORACLE, ff.SCALED_TAU]
    rows = pd.DataFrame([{"arm": a, "fold": f, "seed": s, "category": c, "role": "novel" if c in fold else "base",
                          "AP": rng.uniform()} for a in arms for f, fold in enumerate(folds) for s in _seeds(a, seeds) for c in cats])
    cv = page.chapter_verdicts(rows, folds, cats, seeds, AA, ["AP"], "AP", 0.02, 0)
    sel = {ff.FOR: Selection(ff.FOR, 1e-3, 2, 0.5, {1e-3: [[0.4, 0.5]]}, (0, 1), 6)}
    power = {"half_width": 0.1, "target": 0.01, "n_seeds": 2, "n_clusters": 2, "met": False}
    fals = type("F", (), {"conclusion": "the test cannot decide here"})()
    out = page.findings(cv, fals, power, sel, 0.02, folds, seeds, {"global-slot": "Share 0.99.", "underpowered": "U."})
    assert out["global-slot"] == "Share 0.99." and out["underpowered"] == "U." and out["seeds"] == "2 folds x seeds [0, 1]"
    assert out["specific"] == cv.specific.brief() and out["paper-global"] == cv.by_arms(ff.PAPER, ff.GLOBAL).brief()
    one = page.chapter_verdicts(rows[rows["fold"] == 0], folds[:1], cats, seeds, AA, ["AP"], "AP", 0.02, 0)
    out = page.findings(one, fals, power, sel, 0.02, folds[:1], seeds, {})
    assert out["specific"].startswith("not tested (one fixed split")


def test_schedule_caveat_names_the_flagged_arms_of_the_falsification():
    def sel(arm, lr, epochs, converged=True, edge=""):
        return Selection(arm, lr, epochs, 0.5, {1e-3: [[0.5]], 3e-3: [[0.5]], 1e-2: [[0.5]]}, (0, 1), 6,
                         converged=converged, lr_edge=edge)
    ok = {"a": sel("a", 3e-3, 2), "b": sel("b", 3e-3, 3)}
    assert page.schedule_caveat(ok, ["a", "b"], "the test") == "No arm the test reads chose a schedule the selection flags."
    mixed = {**ok, "c": sel("c", 1e-3, 6, converged=False, edge="smallest")}
    text = page.schedule_caveat(mixed, ["a", "c"], "the test")
    assert text.startswith("Of the arms the test reads, 1 of 2 chose") and "c (best within the budget's last 1" in text
    assert "lr at the grid's smallest end" in text and "a (" not in text and "budget of 6 epochs" in text
    assert "what the test reads, it reads at this grid" in text and "holds" not in text  # no verdict is implied
    with pytest.raises(ValueError, match="'d'"):
        page.schedule_caveat(mixed, ["a", "d"], "the test")


def test_one_fixed_split_has_no_gain_verdict_and_says_so():
    rng = np.random.default_rng(2)
    folds, cats, seeds = [["a", "b"]], ["a", "b", "c", "d"], [0, 1]
    arms = [ff.FOR, ff.CLUSTER, ff.GLOBAL, ff.SUPERVISED, ff.UNTRAINED, ff.PLANTED, ff.A_A, ff.A_A_B]
    rows = pd.DataFrame([{"arm": a, "fold": 0, "seed": s, "category": c, "role": "novel" if c in folds[0] else "base",
                          "AP": rng.uniform()} for a in arms for s in _seeds(a, seeds) for c in cats])
    cv = page.chapter_verdicts(rows, folds, cats, seeds, AA, ["AP"], "AP", 0.02, 0)
    assert cv.specific is None and None not in cv.all and len(cv.central) == 5
    sel = Selection("supervised only", 3e-3, 1, 0.5, {3e-3: [[0.5]]}, (0, 1), 6)
    assert "too few units to pair" in page.forgetting_sentence(*cv.forgetting, sel)


def test_a_a_sentence_sets_the_a_a_half_width_against_the_differences():
    aa = replace(_verdict(CANNOT_TELL, arms=(ff.A_A_B, ff.A_A)), difference=-0.025, ci_low=-0.08, ci_high=0.03)
    small, big = (replace(_verdict(A_BETTER, arms=(ff.PLANTED, ff.SUPERVISED)), claim=c, difference=d)
                  for c, d in (("planted", 0.05), ("central", 0.09)))
    text = page.a_a_sentence(aa, [small])
    assert "moved supervised only by -0.025 [-0.080, +0.030]: a half-width of 0.055" in text
    assert "planted +0.050 (within it), so at this size it is not shown to exceed what a change of seeds" in text
    both = page.a_a_sentence(aa, [small, big])
    assert "central +0.090 (beyond it)." in both and "shown to exceed" not in both
    two = page.a_a_sentence(aa, [small, replace(small, claim="central", difference=-0.01)])
    assert "so at this size neither is shown to exceed what a change of seeds alone can make." in two
    assert "seeds a side" not in two  # no standard error recorded: no size is estimated
    # the size: se 0.02 at 2 seeds, t at 1.96: 2 x (0.02 x 1.96 / 0.01)^2 = 30.7 -> at least about 31
    sized = page.a_a_sentence(replace(aa, standard_error=0.02), [small])
    assert "would need at least about 31 seeds a side (its standard error, 0.020 at 2" in sized
    assert sized.endswith("That is a bound, not a promise: the sides' choices of schedule do not average out, and the "
                          "folds keep their share (the critique shows three A/As at twenty seeds a side).")
    assert "the two selection seeds of each side stay two)" in sized
    assert "the four selection seeds of each side stay four)" in page.a_a_sentence(
        replace(aa, standard_error=0.02), [small], selection_seeds=4)
