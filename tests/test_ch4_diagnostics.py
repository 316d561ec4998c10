"""Chapter 4's diagnostics and the A/A control's seed sets.

- :func:`~fgclip.studies.decoupling.sweep.proportion_curves` trains the arm's selection seeds at
  every ρ on the fit split and reads every epoch on the validation split's *full* labels; its
  clause and figure state what the record holds;
- the A/A control deals its seeds alternately to the two sets, so a difference planted into one
  set is found and one spread over both sets is not.
"""
from __future__ import annotations

import matplotlib
import numpy as np
import pytest
import torch

matplotlib.use("Agg")

from fgclip import verdicts  # noqa: E402
from fgclip.methods.decoupling import MultiLabelCLIPHead, SemanticDecoupling  # noqa: E402
from fgclip.studies.decoupling import arms as darms, comparisons as dcmp, findings as dfind, sweep as dsweep  # noqa: E402
from fgclip.studies.decoupling.features import Features  # noqa: E402
from fgclip.studies.decoupling.heads import FitConfig  # noqa: E402
from fgclip.train.selection import Selection  # noqa: E402
from fgclip.viz import multilabel as mlviz  # noqa: E402

C, D, H = 6, 8, 2


def _world(n: int, seed: int):
    """Dense maps (n, D, H, H) and pooled features whose first C dims carry the labels; every image
    holds a category. Weaker than test_ch4_selection's world (signal 1.5, not 2.0) on purpose: there
    an untrained head already scores about 0.97, leaving a curve no room to rise."""
    g = torch.Generator().manual_seed(seed)
    y = (torch.rand(n, C, generator=g) < 0.35).long()
    y[torch.arange(n), torch.randint(C, (n,), generator=g)] = 1  # every image holds a category
    pooled = torch.randn(n, D, generator=g) * 0.5
    pooled[:, :C] += 1.5 * y
    dense = pooled[:, :, None, None].expand(n, D, H, H) + 0.1 * torch.randn(n, D, H, H, generator=g)
    return Features(dense.contiguous(), pooled), y.numpy()


def _make(variant: str, scoring: str, sd: int):
    torch.manual_seed(sd)
    g = torch.Generator().manual_seed(7)
    words, text = torch.randn(C, 4, generator=g), torch.eye(C, D)  # text c = the dimension carrying label c
    decoupling = None if variant == "zero-shot" else SemanticDecoupling(D, 4, 4, 4)
    return MultiLabelCLIPHead(words, text, None, decoupling, 0.2, scoring)


def test_proportion_curves_read_every_rho_on_the_full_validation_labels():
    feats, y = _world(200, 0)
    fit_idx, val_idx = np.arange(150), np.arange(150, 200)
    proportions, seeds = [0.1, 0.5, 0.9], (0, 1)
    rng = np.random.default_rng(0)
    u = {sd: rng.random(y.shape) for sd in seeds}
    targets = {(sd, r): np.where(u[sd] < r, y, -1) for sd in seeds for r in proportions}
    trainer = darms.Trainer(_make, feats.subset(fit_idx), feats.subset(val_idx), feats, FitConfig(batch_size=32))
    sel = Selection(darms.FULL.name, 0.03, 2, 0.5, {0.03: [[0.5] * 4] * 2}, seeds, 4, True)
    zs = _make("zero-shot", "softmax", 0)
    c = dsweep.proportion_curves(trainer, darms.FULL, sel, proportions, targets, fit_idx, val_idx, y[val_idx], zs)
    assert [r["known"] for r in c["per known"]] == proportions and c["budget"] == 4 and c["seeds"] == [0, 1]
    for r in c["per known"]:
        assert len(r["mean curve"]) == 4 and r["best"] == pytest.approx(max(r["mean curve"]))
        assert r["at chosen"] == pytest.approx(r["mean curve"][1])
        assert r["mean curve"][r["best epoch"] - 1] == pytest.approx(r["best"])
    # the known positives follow the masks: more known, more positives to fit
    kp = [r["median known positives"] for r in c["per known"]]
    assert kp[0] < kp[1] < kp[2]
    assert kp[0] == pytest.approx(np.median([np.median((targets[sd, 0.1][fit_idx] == 1).sum(0)) for sd in seeds]))
    # the references are the heads' own validation mAP on the full labels
    from fgclip.metrics.multilabel import known_map
    from fgclip.studies.decoupling.heads import predict
    assert c["zero-shot"] == pytest.approx(known_map(predict(zs, *feats.subset(val_idx)).log_p, y[val_idx]))
    # with 90% of the labels the run learns: its curve passes the untrained start
    assert c["per known"][2]["best"] > c["untrained"]
    fig = mlviz.plot_proportion_curves([c, c], "t")
    assert len(fig.axes) == 2 and len(fig.axes[0].lines) == 3 + 3  # a curve per ρ, zero-shot, untrained, chosen epoch
    assert fig.axes[0].get_title() == f"{darms.FULL.name}, lr 0.03"
    with pytest.raises(ValueError, match="per known"):
        mlviz.plot_proportion_curves([{"per known": []}])


def test_curves_clause_states_the_record():
    rec = {"arm": "full", "lr": 0.01, "budget": 4, "chosen": 3, "seeds": [0, 1], "zero-shot": 0.6, "untrained": 0.4, "per known": [
        {"known": 0.1, "mean curve": [0.45, 0.5, 0.48, 0.47], "best epoch": 2, "best": 0.5, "at chosen": 0.48,
         "median known positives": 3.0},
        {"known": 0.5, "mean curve": [0.5, 0.58, 0.62, 0.63], "best epoch": 4, "best": 0.63, "at chosen": 0.62,
         "median known positives": 15.0}]}
    text = dfind.curves_clause(rec)
    assert text.startswith("full, trained at lr 0.01") and "zero-shot scores 0.600 and this arm untrained 0.400" in text
    assert ("at 10% known (median category: 3 known positives to fit) it peaks at epoch 2 with 0.500, falling after "
            "its peak to 0.480 at the chosen epoch and never reaches zero-shot") in text
    assert "at 50% known (median category: 15 known positives to fit) it peaks at epoch 4 with 0.630 and passes " \
           "zero-shot from epoch 3" in text


def _ap(rows: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return 0.6 + rng.normal(0, 0.05, (1, 32)) + rng.normal(0, 0.005, (rows, 32))


def test_a_a_sets_alternate_so_a_planted_set_is_found():
    ap = _ap(4)
    assert dcmp.a_a_verdict({(darms.FULL, 0.5, "p"): ap}, 0.5, 0, 0.02).verdict == verdicts.EQUIVALENT
    odd = ap.copy()
    odd[1::2] -= 0.05  # the seeds dealt to set B are worse: no longer A/A
    assert dcmp.a_a_verdict({(darms.FULL, 0.5, "p"): odd}, 0.5, 0, 0.02).verdict == verdicts.A_BETTER
    late = ap.copy()
    late[2:] -= 0.05  # the later seeds worse: shared by both sets, so it cancels in the pairs
    v = dcmp.a_a_verdict({(darms.FULL, 0.5, "p"): late}, 0.5, 0, 0.02)
    assert v.verdict == verdicts.EQUIVALENT and v.n_seeds == 2
    more = _ap(6, 1)[:2]
    v = dcmp.a_a_verdict({(darms.FULL, 0.5, "p"): ap}, 0.5, 0, 0.02, more=more, per_side=3)
    assert v.n_seeds == 3 and v.mean_a == pytest.approx(np.concatenate([ap, more])[0::2].mean())
    assert dsweep.a_a_seed_sets([0, 1, 2, 3], 3) == ([0, 1, 2, 3, 4, 5], [4, 5])


def test_ablation_verdicts_per_proportion_flag_a_sign_change():
    rng, rhos = np.random.default_rng(2), [0.1, 0.5, 0.9]
    base = 0.6 + rng.normal(0, 0.05, (1, 32))
    noise = lambda: rng.normal(0, 0.004, (4, 32))  # noqa: E731
    ap = {(darms.FULL, r, "p"): base + noise() for r in rhos}
    ap |= {(darms.DECOUPLING_ONLY, r, "p"): base + d + noise() for r, d in zip(rhos, (0.1, 0.0, -0.05))}
    ap |= {(darms.PROMPTS_ONLY, r, "p"): base + 0.05 + noise() for r in rhos}
    abl = dcmp.ablation_verdicts(ap, rhos, 0, 0.02)
    assert list(abl) == [(a, r) for a in (darms.DECOUPLING_ONLY, darms.PROMPTS_ONLY) for r in rhos]
    assert [abl[darms.DECOUPLING_ONLY, r].verdict for r in rhos] == [verdicts.B_BETTER, verdicts.EQUIVALENT,
                                                                     verdicts.A_BETTER]
    text = dfind.ablation_clause(abl)
    first, second = text.split("; against ")
    assert first.startswith("against decoupling only: 10% known") and first.endswith("changes sign across the proportions")
    assert second.startswith("prompts only") and "changes sign" not in second


def test_a_a_seeds_for_the_spread_and_margin():
    from scipy import stats
    n = dcmp.a_a_seeds_for(0.024, 0.02)
    half = lambda k: stats.t.ppf(0.975, k - 1) * 0.024 / np.sqrt(k)  # noqa: E731
    assert half(n) <= 0.01 < half(n - 1) and n == 25
    assert dcmp.a_a_seeds_for(0.015, 0.02) < n  # a smaller spread needs fewer seeds
    with pytest.raises(ValueError, match="a_a_seeds_for"):
        dcmp.a_a_seeds_for(1.0, 0.02, most=10)


def test_trained_gradients_read_the_heads_as_given_and_the_clause_states_them():
    from fgclip.studies.decoupling import controls as dctl
    feats, y = _world(64, 3)
    t = np.where(np.random.default_rng(0).random(y.shape) < 0.5, y, -1)
    heads = {r: _make("full", r, 0) for r in ("softmax", "sigmoid+affine")}
    heads["sigmoid+affine"].calibrate(feats.dense, feats.pooled, 0.3)
    cfg = FitConfig(batch_size=32)
    tr = dctl.trained_gradients(heads, feats.dense, feats.pooled, t, cfg)
    with torch.no_grad():
        s = heads["softmax"](feats.dense[:32], feats.pooled[:32]).scores
    assert tr.loc["softmax"].to_dict() == pytest.approx(dctl.score_gradients(s, t[:32], "softmax"))
    assert tr.loc["sigmoid+affine", "unknown"] == 0.0
    init = tr.copy()
    init.loc["softmax", "negatives under m"] = 0.9
    text = dfind.trained_gradient_clause(tr, init)
    assert f"the softmax has {tr.loc['softmax', 'negatives under m']:.0%} of the known negatives" in text
    assert "(90% at initialisation; the sigmoids: sigmoid+affine" in text
