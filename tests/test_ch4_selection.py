"""Chapter 4's runs trained side by side and chosen on validation; its controls can fail.

- one member of a stacked run takes exactly the steps a lone run takes
  (:mod:`fgclip.studies.decoupling.stacked` against :func:`~fgclip.studies.decoupling.heads.fit`);
- a run continued from its end (parameters, AdamW moments, batch order) takes the steps of a
  longer run from the start (the convergence check's continuation);
- :func:`~fgclip.studies.decoupling.sweep.select_and_evaluate` chooses on validation curves only
  and reads the grid's own runs at the chosen epoch;
- the falsification's controls fail on purpose: the plant removed from the planted control's
  features (positive control),
  a real difference planted into the A/A comparison (negative control);
- the power check is a record, never an assertion.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from fgclip import verdicts
from fgclip.methods.decoupling import MultiLabelCLIPHead, SemanticDecoupling
from fgclip.studies.decoupling import arms as darms, comparisons as dcmp, controls as dctl, sweep as dsweep
from fgclip.studies.decoupling.features import Features
from fgclip.studies.decoupling.heads import FitConfig, fit
from fgclip.studies.decoupling.stacked import Member, continue_members, train_members, trainable
from fgclip.train.selection import SelectionGrid

C, D, H = 6, 8, 2


def _world(n=120, seed=0):
    """Synthetic dense maps (n, D, H, H) and pooled features whose first C dims carry the labels."""
    g = torch.Generator().manual_seed(seed)
    y = (torch.rand(n, C, generator=g) < 0.35).long()
    pooled = torch.randn(n, D, generator=g) * 0.5
    pooled[:, :C] += 2.0 * y
    dense = pooled[:, :, None, None].expand(n, D, H, H) + 0.1 * torch.randn(n, D, H, H, generator=g)
    return Features(dense.contiguous(), pooled), y.numpy()


def _make(variant: str, scoring: str, sd: int):
    """A head of the chapter's kind for the synthetic world (``make_head`` without a CLIP)."""
    torch.manual_seed(sd)
    g = torch.Generator().manual_seed(123)
    words, text = torch.randn(C, 4, generator=g), torch.randn(C, D, generator=g)
    if variant == "linear probe":
        from fgclip.methods.decoupling import LinearProbe
        return LinearProbe(D, C)
    if variant == "zero-shot":
        return MultiLabelCLIPHead(words, text, None, None, 0.1, scoring)
    # no text encoder here: an arm with prompts is a stand-in, decoupling of another rank
    rank = 4 if variant in ("decoupling only", "full") else 2
    return MultiLabelCLIPHead(words, text, None, SemanticDecoupling(D, 4, rank, rank), 0.1, scoring)


def _targets(y, rho, sd):
    rng = np.random.default_rng([sd, int(rho * 100)])
    return np.where(rng.random(y.shape) < rho, y, -1)


@pytest.mark.parametrize("variant,scoring", [("full", "sigmoid+affine"), ("decoupling only", "softmax"),
                                             ("linear probe", "sigmoid")])
def test_a_stacked_member_takes_the_steps_of_a_lone_run(variant, scoring):
    feats, y = _world()
    fit_f, val_f = Features(feats.dense[:80], feats.pooled[:80]), Features(feats.dense[80:], feats.pooled[80:])
    cfg = FitConfig(batch_size=32, gamma_pos=1.0, gamma_neg=2.0)
    members = [Member(0.01, 3, 0.5), Member(0.05, 4, 0.5)]
    tg = lambda m: (_targets(y, m.rho, m.seed)[:80], _targets(y, m.rho, m.seed)[80:])  # noqa: E731
    runs = train_members(lambda sd: _make(variant, scoring, sd), members, tg, fit_f, val_f, cfg, 3)
    assert runs.curves.shape == (2, 3) and len(runs.states[0]) == 3
    for m, member in enumerate(members):
        alone = _make(variant, scoring, member.seed)
        fit(alone, fit_f.dense, fit_f.pooled, tg(member)[0],
            FitConfig(**{**cfg.__dict__, "lr": member.lr, "seed": member.seed, "epochs": 3}))
        # compare what the heads say, not every parameter: the biases of P and w_a shift all
        # attention logits alike, so the softmax over positions ignores them; their gradient is
        # zero up to float noise, whose sign Adam turns into whole steps that differ between runs
        with torch.no_grad():
            torch.testing.assert_close(runs.heads[m](val_f.dense, val_f.pooled).scores,
                                       alone(val_f.dense, val_f.pooled).scores, rtol=1e-3, atol=1e-4)
        for name, p in trainable(alone).items():
            if not name.endswith(("P.bias", "w_a.bias")):
                torch.testing.assert_close(trainable(runs.heads[m])[name], p, rtol=1e-3, atol=1e-4)


class _Trainer(darms.Trainer):
    """A Trainer on the synthetic world (no frozen CLIP)."""


def test_select_and_evaluate_reads_the_grid_runs_at_the_chosen_epoch():
    feats, y = _world(160)
    fit_f, val_f = Features(feats.dense[:100], feats.pooled[:100]), Features(feats.dense[100:130], feats.pooled[100:130])
    test_f = Features(feats.dense[130:], feats.pooled[130:])
    trainer = _Trainer(_make, fit_f, val_f, test_f, FitConfig(batch_size=50))
    targets = {(sd, rho): _targets(y[:130], rho, sd) for sd in (0, 1, 2) for rho in (0.3, 0.7)}
    split = lambda m: (targets[m.seed, m.rho][:100], targets[m.seed, m.rho][100:130])  # noqa: E731
    grid = SelectionGrid(lrs=(0.003, 0.03, 0.3), seeds=(0, 1), epochs=4)
    sel, preds, head, _ = dsweep.select_and_evaluate(trainer, darms.FULL_AFFINE, grid, 0.7, [0.3, 0.7], [0, 1, 2], split)
    assert sel.lr in grid.lrs and 1 <= sel.epochs <= 4 and set(sel.curves) == set(grid.lrs)
    assert set(preds) == {(rho, sd) for rho in (0.3, 0.7) for sd in (0, 1, 2)}
    mean = np.mean(sel.curves[sel.lr], axis=0)
    assert sel.score == pytest.approx(mean[sel.epochs - 1]) and sel.score == pytest.approx(
        max(np.mean(c, axis=0).max() for c in sel.curves.values()))
    assert preds[0.7, 0].scores.shape == (30, C) and head is not None


def test_negative_control_fails_when_an_effect_is_planted_into_the_a_a_comparison():
    rng = np.random.default_rng(0)
    base = 0.6 + rng.normal(0, 0.05, (1, 32))
    ap = {(darms.FULL, 0.5, "p"): base + rng.normal(0, 0.005, (4, 32))}
    assert dcmp.a_a_verdict(ap, 0.5, seed=0, margin=0.02).verdict == verdicts.EQUIVALENT
    planted = ap[darms.FULL, 0.5, "p"].copy()
    planted[1::2] -= 0.05  # the seeds dealt to set B are worse: no longer A/A
    bad = dcmp.a_a_verdict({(darms.FULL, 0.5, "p"): planted}, 0.5, seed=0, margin=0.02)
    assert bad.verdict == verdicts.A_BETTER
    pos = dcmp.compare_categories(base - 0.1 + rng.normal(0, 0.005, (4, 32)), base + rng.normal(0, 0.005, (4, 32)),
                                  "planted", ("softmax", "sigmoid"), 0, 0.02)
    assert pos.verdict == verdicts.B_BETTER
    test = pos
    assert verdicts.falsify(test, pos, dcmp.a_a_verdict(ap, 0.5, 0, 0.02), verdicts.B_BETTER).controls_pass
    failed = verdicts.falsify(test, pos, bad, verdicts.B_BETTER)
    assert not failed.negative_passed and failed.conclusion == verdicts.CANNOT_DECIDE


def _null_planted_data(n: int = 160, seed: int = 0):
    """A DetectionData-like world for :func:`~fgclip.studies.decoupling.planted.planted_control`:
    categories in pairs (2k, 2k+1) that always co-occur, and features that carry nothing of them."""
    from types import SimpleNamespace

    from fgclip.studies.decoupling.planted import PlantedWorld
    rng = np.random.default_rng(seed)
    pairs = rng.random((2 * n, C // 2)) < 0.35
    pairs[np.arange(2 * n), rng.integers(C // 2, size=2 * n)] = True  # at least one pair per image
    y = np.repeat(pairs, 2, axis=1).astype(np.int64)  # (2n, C): both members or neither
    pooled = torch.randn(2 * n, D, generator=torch.Generator().manual_seed(seed)) * 0.5
    dense = pooled[:, :, None, None].expand(2 * n, D, H, H).contiguous()
    feats = {"train": Features(dense[:n], pooled[:n]), "test": Features(dense[n:], pooled[n:])}
    data = SimpleNamespace(labels={"train": y[:n], "test": y[n:]}, class_names=[f"c{k}" for k in range(C)],
                           root=Path("toy-null"))
    return PlantedWorld(data, feats, tuple((f"c{2 * k}", f"c{2 * k + 1}") for k in range(C // 2)))


def _crowded_planted_data(n: int = 160, seed: int = 0, crowded: bool = True, signal: float = 0.5,
                          background: float = 3.0):
    """A planted world (pairs (2k, 2k+1) that always co-occur) whose features carry each category:
    its own dimension c raised by ``signal`` when present, under noise of sd 0.5 on every dimension and a
    constant ``background`` on the last dimension (the common component of CLIP-like features,
    which keeps the cosine's norm nearly the same however many categories an image holds).
    ``crowded``: half the images hold every pair, the other half exactly one; else every image
    holds exactly one pair."""
    from types import SimpleNamespace

    from fgclip.studies.decoupling.planted import PlantedWorld
    rng = np.random.default_rng(seed)
    pairs = np.zeros((2 * n, C // 2), dtype=bool)
    pairs[np.arange(2 * n), rng.integers(C // 2, size=2 * n)] = True  # one pair per image
    if crowded:
        pairs[rng.random(2 * n) < 0.5] = True  # ... or all of them
    y = np.repeat(pairs, 2, axis=1).astype(np.int64)  # (2n, C): both members or neither
    g = torch.Generator().manual_seed(seed)
    pooled = torch.randn(2 * n, D, generator=g) * 0.5
    pooled[:, :C] += signal * torch.as_tensor(y, dtype=torch.float32)
    pooled[:, -1] += background
    dense = pooled[:, :, None, None].expand(2 * n, D, H, H) + 0.1 * torch.randn(2 * n, D, H, H, generator=g)
    dense = dense.contiguous()
    feats = {"train": Features(dense[:n], pooled[:n]), "test": Features(dense[n:], pooled[n:])}
    data = SimpleNamespace(labels={"train": y[:n], "test": y[n:]}, class_names=[f"c{k}" for k in range(C)],
                           root=Path("toy-crowded" if crowded else "toy-one-pair"))
    return PlantedWorld(data, feats, tuple((f"c{2 * k}", f"c{2 * k + 1}") for k in range(C // 2)))


def _make_aligned(variant: str, scoring: str, sd: int):
    """:func:`_make` with category c's text feature on feature dimension c: a CLIP whose text of
    c points where the images of c do (the chapter's heads, nothing else changed)."""
    head = _make(variant, scoring, sd)
    if isinstance(head, MultiLabelCLIPHead):
        head.text_features.copy_(torch.eye(C, D))
    return head


def test_planted_control_runs_the_protocol_and_fails_when_the_plant_is_removed():
    """The planted control through the chapter's protocol (grid, stacked runs, every seed at the
    chosen lr and epochs, the verdict of arms[0] - arms[1]); on features that carry no label
    information nothing can fire, so the falsification it feeds cannot decide."""
    from fgclip.studies.decoupling import planted as dplant
    grid = SelectionGrid(lrs=(0.01, 0.03, 0.1), seeds=(0, 1), epochs=2)
    cfg = FitConfig(batch_size=64)
    world = _null_planted_data()
    asked = []
    run = dplant.planted_control(lambda names: asked.append(names) or _make, world, cfg, grid, 0.5, [0, 1, 2], 0.25,
                                 0, 0.02, check_epochs=1)
    assert asked == [world.data.class_names]  # the heads are built for the world's own categories
    assert set(run.ap) == {darms.FULL, darms.FULL_AFFINE} and all(a.shape == (3, C) for a in run.ap.values())
    assert all(s.budget == 2 for s in run.selections.values()) and run.sizes == {"fit": 120, "validation": 40,
                                                                                   "test": 160}
    assert run.verdict.n_seeds == 3 and run.verdict.margin == 0.02 and run.verdict.arms == ("softmax (paper)",
                                                                                         "sigmoid+affine")
    assert run.verdict.verdict != verdicts.B_BETTER  # removed: the positive control does not fire
    quiet = verdicts.falsify(run.verdict, run.verdict, dcmp.a_a_verdict({(darms.FULL, 0.5, "p"): np.full((4, C), 0.5)},
                                                                        0.5, 0, 0.02), verdicts.B_BETTER)
    assert not quiet.positive_passed and quiet.conclusion == verdicts.CANNOT_DECIDE
    rec = run.record()
    assert rec["pairs"][0] == ["c0", "c1"] and set(rec["arms"]) == {darms.FULL.name, darms.FULL_AFFINE.name}
    assert "3 pairs that always co-occur" in run.summary() and rec["labels per image"] >= 2
    assert dplant.cooccur_pairs(list("abcde"), 0) == dplant.cooccur_pairs(list("abcde"), 0)
    assert len({c for p in dplant.cooccur_pairs(list("abcde"), 0) for c in p}) == 4  # odd: one left unpaired
    assert dplant.planted_sizes([0, 50], 600, 500) == {"train": 600, "test": 50}
    with pytest.raises(ValueError, match="planted_n"):
        dplant.planted_sizes([0, 0], 0, 500)  # a real run reading a whole split must name the planted sizes


def test_planted_control_fires_when_the_softmax_must_lose():
    """The positive control can fire: the same pipeline as above, only the world differs. Each
    category's feature carries its label with a limited signal, and images hold either one pair
    or all three. The softmax ranks a category by s_c - logsumexp(s), and the logsumexp of an
    image holding six categories is larger than that of one holding two, so a present category
    on a crowded image falls towards (and below) an absent one on a sparse image; a per-category
    sigmoid ranks by s_c alone and is not pulled down. The same features with exactly one pair
    per image (no crowding) must not fire: the verdict answers the planted mechanism, not the
    features or the head."""
    from fgclip.studies.decoupling import planted as dplant
    grid = SelectionGrid(lrs=(0.03, 0.1, 0.3), seeds=(0, 1), epochs=3)
    cfg = FitConfig(batch_size=16)
    runs = {crowded: dplant.planted_control(lambda names: _make_aligned, _crowded_planted_data(crowded=crowded), cfg,
                                            grid, 0.5, [0, 1, 2], 0.25, 0, 0.02)
            for crowded in (True, False)}
    y = runs[True].world.data.labels["train"]
    assert set((y == 1).sum(1)) == {2, C}  # crowded: one pair or all of them
    assert set((runs[False].world.data.labels["train"] == 1).sum(1)) == {2}
    fired = runs[True].verdict
    assert fired.verdict == verdicts.B_BETTER and fired.arms == ("softmax (paper)", "sigmoid+affine")
    # difference = softmax - sigmoid mAP: the sigmoid clearly ahead (-0.053, [-0.072, -0.034]
    # at world seed 0; between -0.045 and -0.062 at world seeds 0-5, every interval below 0)
    assert fired.difference < -0.03 and fired.ci_high < 0 and fired.mean_b > fired.mean_a + 0.03
    quiet = runs[False].verdict
    # one pair per image: no verdict for the sigmoid (+0.013, [-0.026, 0.052] at world seed 0;
    # seeds 0-5 between -0.012 and +0.029, once 'A better' by a hair, never 'B better')
    assert quiet.verdict != verdicts.B_BETTER and quiet.ci_high > 0
    assert fired.difference < quiet.difference - 0.03


def test_power_check_is_a_record():
    v = dcmp.compare_categories(np.full((2, 8), 0.5) + np.linspace(0, 0.01, 8), np.full((2, 8), 0.5),
                                "c", ("a", "b"), 0, 0.02)
    rec = dcmp.power_check(v, 0.02)
    assert rec["target"] == pytest.approx(0.5 * max(abs(v.difference), 0.02))
    assert rec["met"] == (rec["half_width"] <= rec["target"])


def test_a_a_control_on_two_disjoint_sets_of_three_seeds():
    assert dsweep.a_a_seed_sets([0, 1, 2, 3], 3) == ([0, 1, 2, 3, 4, 5], [4, 5])
    assert dsweep.a_a_seed_sets([0, 1, 2, 3, 4, 5, 6], 3) == ([0, 1, 2, 3, 4, 5], [])
    with pytest.raises(ValueError, match="a_a_seeds"):
        dsweep.a_a_seed_sets([0, 1], 1)
    rng = np.random.default_rng(1)
    base = 0.6 + rng.normal(0, 0.05, (1, 32))
    ap, more = {(darms.FULL, 0.5, "p"): base + rng.normal(0, 0.005, (4, 32))}, base + rng.normal(0, 0.005, (2, 32))
    v = dcmp.a_a_verdict(ap, 0.5, 0, 0.02, more=more, per_side=3)
    assert v.n_seeds == 3 and v.verdict == verdicts.EQUIVALENT
    worse_b = np.concatenate([ap[darms.FULL, 0.5, "p"], more])
    worse_b[1::2] -= 0.05  # rows 1, 3, 5: the seeds dealt to set B
    assert dcmp.a_a_verdict({(darms.FULL, 0.5, "p"): worse_b[:4]}, 0.5, 0, 0.02, more=worse_b[4:],
                            per_side=3).verdict != verdicts.EQUIVALENT  # set B worse
    with pytest.raises(ValueError, match="A/A"):
        dcmp.a_a_verdict(ap, 0.5, 0, 0.02, per_side=3)  # 4 seeds cannot make 3 + 3


def test_unvalidated_runs_take_the_same_steps_and_record_no_curves():
    feats, y = _world(100)
    fit_f, val_f = Features(feats.dense[:70], feats.pooled[:70]), Features(feats.dense[70:], feats.pooled[70:])
    tg = lambda m: (_targets(y, m.rho, m.seed)[:70], _targets(y, m.rho, m.seed)[70:])  # noqa: E731
    members, cfg = [Member(0.05, 0, 0.5), Member(0.05, 1, 0.5)], FitConfig(batch_size=35)
    make = lambda sd: _make("full", "softmax", sd)  # noqa: E731
    with_val = train_members(make, members, tg, fit_f, val_f, cfg, 2)
    without = train_members(make, members, tg, fit_f, val_f, cfg, 2, validate=False)
    assert with_val.curves.shape == (2, 2) and without.curves.shape == (2, 0) and without.states == [[], []]
    for a, b in zip(with_val.heads, without.heads):
        for name, p in trainable(a).items():
            torch.testing.assert_close(trainable(b)[name], p)


@pytest.mark.parametrize("variant,scoring", [("full", "sigmoid+affine"), ("linear probe", "sigmoid")])
def test_a_continued_run_takes_the_steps_of_a_longer_run(variant, scoring):
    """Parameters, AdamW moments and batch order carried over: 2 + 2 epochs equal 4 from the start,
    for a subset of the members (the others of the 2-epoch run untouched)."""
    feats, y = _world(100)
    fit_f, val_f = Features(feats.dense[:70], feats.pooled[:70]), Features(feats.dense[70:], feats.pooled[70:])
    tg = lambda m: (_targets(y, m.rho, m.seed)[:70], _targets(y, m.rho, m.seed)[70:])  # noqa: E731
    members, cfg = [Member(0.05, 0, 0.5), Member(0.01, 1, 0.5), Member(0.05, 2, 0.5)], FitConfig(batch_size=32)
    make = lambda sd: _make(variant, scoring, sd)  # noqa: E731
    short = train_members(make, members, tg, fit_f, val_f, cfg, 2)
    more, restored = continue_members(short, [0, 2], tg, fit_f, val_f, cfg, 2)
    longer = train_members(make, [members[0], members[2]], tg, fit_f, val_f, cfg, 4)
    assert restored < 1e-6 and more.curves.shape == (2, 2)
    np.testing.assert_allclose(more.curves, longer.curves[:, 2:], atol=1e-6)
    for a, b in zip(more.heads, longer.heads):
        for name, p in trainable(b).items():
            torch.testing.assert_close(trainable(a)[name], p, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="validated"):  # an unvalidated run kept no end state
        continue_members(train_members(make, members[:1], tg, fit_f, val_f, cfg, 1, validate=False), [0], tg,
                         fit_f, val_f, cfg, 1)


def test_convergence_check_repeats_the_grid_and_reads_the_longer_curve():
    feats, y = _world(140)
    fit_f, val_f = Features(feats.dense[:90], feats.pooled[:90]), Features(feats.dense[90:], feats.pooled[90:])
    trainer = _Trainer(_make, fit_f, val_f, val_f, FitConfig(batch_size=45))
    targets = {(sd, 0.5): _targets(y, 0.5, sd) for sd in (0, 1)}
    split = lambda m: (targets[m.seed, m.rho][:90], targets[m.seed, m.rho][90:])  # noqa: E731
    grid = SelectionGrid(lrs=(0.001, 0.003, 0.01), seeds=(0, 1), epochs=1)  # one epoch: chosen at its end
    sel, _, _, check = dsweep.select_and_evaluate(trainer, darms.FULL, grid, 0.5, [0.5], [0, 1], split, 3)
    assert not sel.converged
    assert check["horizon"] == 4 and len(check["mean curve"]) == 4 and check["rerun deviation"] < 1e-4
    # continued from the grid's end, the check reads what training 4 epochs from the start reads
    longer = trainer.train_members(darms.FULL, [Member(sel.lr, sd, 0.5) for sd in (0, 1)], split, 4)
    np.testing.assert_allclose(check["mean curve"], longer.curves.mean(axis=0), atol=1e-6)
    from fgclip.train.selection import stop_epoch  # the selection's own rule over the longer horizon
    curve = np.asarray(check["mean curve"])
    assert check["best epoch"] == int(np.argmax(curve[:stop_epoch(curve, sel.patience)])) + 1
    assert check["rule"] == f"early stop, patience {sel.patience}"
    assert check["converged"] == (check["best epoch"] <= sel.epochs)
    assert dsweep.converged_cell(sel, check).startswith("yes" if check["converged"] else "NO")
    assert dsweep.converged_cell(sel, None) == "NO"
    # a check whose longer curve keeps rising reads as not converged, one that peaked as converged
    assert dsweep.converged_cell(sel, {**check, "best epoch": 4, "converged": False}) == "NO (to epoch 4: best at 4)"
    assert dsweep.converged_cell(sel, {**check, "best epoch": 1, "converged": True}) == "yes (to epoch 4: best at 1)"


def test_selection_table_names_the_rule_the_grid_chose_by():
    from fgclip.studies.decoupling.sweep import selection_table
    from fgclip.train.selection import Selection, SelectionGrid
    sel = {"full": Selection(arm="full", lr=1e-3, epochs=2, score=0.5, curves={1e-3: [[0.4, 0.5]]}, seeds=(0, 1), budget=8)}
    stop, budget = (selection_table(sel, SelectionGrid(lrs=(1e-3, 3e-3, 1e-2), epochs=8, rule=r), "val")["criterion"][0]
                    for r in ("early-stop", "budget"))
    assert stop.startswith("eq-selection-stop:") and stop.endswith("before an early stop")
    assert budget == "eq-selection: best mean validation mAP on p (known entries)"


def test_the_scoring_verdicts_name_an_under_trained_control_and_a_silent_agreement():
    """The findings box: a sigmoid control still improving at the budget's end gets a caveat (its
    verdicts describe it at this budget, not the scoring rule); three 'cannot tell' that agree say
    so; a converged control adds nothing."""
    from fgclip.studies.decoupling import findings as dfind
    from fgclip.verdicts import compare
    rng = np.random.default_rng(0)
    a, b = rng.normal(0.5, 0.1, (4, 16)), rng.normal(0.5, 0.1, (4, 16))
    v = compare(a, b, claim="scoring", arms=("softmax (paper)", "sigmoid+bias"), unit="categories", margin=0.02)
    test_v = {(darms.FULL_BIAS, 0.5): v, (darms.FULL_AFFINE, 0.5): v}
    late = {"arm": darms.FULL_BIAS.name, "horizon": 16, "best epoch": 16, "chosen": 12, "converged": False}
    said = dfind.control_caveat(test_v, {darms.FULL_BIAS: late})
    assert darms.FULL_BIAS.name in said and "under-trained at this budget" in said and "sigmoid+affine" in said
    assert dfind.control_caveat(test_v, {darms.FULL_BIAS: {**late, "converged": True}}) == ""
    assert dfind.control_caveat(test_v, {}) == ""
    assert v.verdict == "cannot tell"
    assert dfind.same_clause([v, v]).endswith("says nothing about the scoring rule")
    sided = compare(a + 0.5, b, claim="scoring", arms=("softmax (paper)", "sigmoid+bias"), unit="categories", margin=0.02)
    assert "says nothing" not in dfind.same_clause([sided, sided])


def test_ranking_split_compares_the_softmax_ranked_by_s_with_the_affine_sigmoid():
    from fgclip.studies.decoupling.comparisons import ranking_split_verdicts
    rng = np.random.default_rng(1)
    ap = {(arm, rho, kind): rng.uniform(0.3, 0.9, (4, 16)) for arm in darms.FULL_RULES for rho in (0.1, 0.5)
          for kind in ("p", "s")}
    ap[darms.FULL, 0.5, "s"] = ap[darms.FULL_AFFINE, 0.5, "p"] + 0.1  # planted: ranked by s, the softmax ahead
    out = ranking_split_verdicts(ap, [0.1, 0.5], 0, 0.02)
    assert list(out) == [0.1, 0.5]
    assert out[0.5].arms == ("softmax-trained, ranked by s", "sigmoid+affine") and out[0.5].verdict == "A better"
    assert abs(out[0.5].difference - 0.1) < 1e-9
