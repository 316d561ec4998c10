"""Chapter 3's verdicts: clustered by the fold's head, judged against the margin, and controls
that fail when they should (planted effect removed, planted effect added)."""
import numpy as np
import pandas as pd
import pytest

from fgclip import verdicts
from fgclip.studies.for_retrieval import folds as ff, protocol as fp

CATEGORIES = [f"c{i:02d}" for i in range(32)]
FOLDS = ff.category_folds(CATEGORIES, 8, seed=0)
SEEDS = [0, 1]
A_A = fp.a_a_seeds(SEEDS, (0, 1), 2)


def _rows(effects: dict[str, float], noise: float = 0.003) -> pd.DataFrame:
    """Synthetic per-category AP rows: each arm = a shared per-category base + its effect + small noise."""
    rng = np.random.default_rng(0)
    base = dict(zip(CATEGORIES, rng.uniform(0.2, 0.6, len(CATEGORIES))))
    rows = []
    for f, novel in enumerate(FOLDS):
        for arm, eff in effects.items():
            for s in A_A.b if arm == ff.A_A_B else SEEDS:  # the A/A's side B has seeds of its own
                rows += [{"arm": arm, "fold": f, "seed": s, "category": c, "role": "novel" if c in novel else "base",
                          "AP": base[c] + eff + rng.normal(0, noise)} for c in CATEGORIES]
    return pd.DataFrame(rows)


def _controls(effects):
    rows = _rows(effects)
    v = lambda a, b, sa=None: fp.fold_verdict(rows, a, b, "claim", FOLDS, CATEGORIES, SEEDS, "AP", 0.02, seeds_a=sa)  # noqa: E731
    return verdicts.falsify(v(ff.FOR, ff.SUPERVISED), v(ff.PLANTED, ff.SUPERVISED), v(ff.A_A_B, ff.A_A, A_A.b))


def test_a_a_sides_share_no_seed_and_mirror_the_chapters_layout():
    two = fp.a_a_seeds([0, 1], (0, 1), 2)
    assert (two.a, two.a_grid, two.b, two.b_grid) == ([0, 1], (0, 1), [2, 3], (2, 3))
    one = fp.a_a_seeds([0], (0, 1), 1)  # one evaluation seed: side B must still avoid the selection seed 1
    assert one.a == [0] and not set(one.b + list(one.b_grid)) & {0, 1} and one.b_grid == (2, 3)
    big = fp.a_a_seeds([5, 6], (5, 6), 4)  # side A: the chapter's seeds, then fresh ones
    assert big.a == [5, 6, 7, 8] and big.b == [9, 10, 11, 12] and big.b_grid == (9, 10)
    assert fp.a_a_seeds([0, 1, 2], (0, 1), 2).a == [0, 1]
    with pytest.raises(ValueError, match="at least 1 seed"):
        fp.a_a_seeds([0, 1], (0, 1), 0)


def test_a_a_verdict_reads_each_sides_seeds_paired_in_order():
    rows = _rows({ff.A_A: 0.0, ff.A_A_B: 0.0})
    rows.loc[(rows["arm"] == ff.A_A_B) & (rows["seed"] == A_A.b[1]), "AP"] += 0.3  # side B's second seed only
    v = fp.fold_verdict(rows, ff.A_A_B, ff.A_A, "c", FOLDS, CATEGORIES, A_A.a, "AP", 0.02, seeds_a=A_A.b)
    assert v.n_seeds == 2 and v.difference == pytest.approx(0.15, abs=0.01)
    with pytest.raises(ValueError, match=r"no rows for seed\(s\) \[0, 1\]"):  # side B read at side A's seeds
        fp.fold_verdict(rows, ff.A_A_B, ff.A_A, "c", FOLDS, CATEGORIES, SEEDS, "AP", 0.02)


def test_verdicts_cluster_by_fold_and_carry_the_margin():
    rows = _rows({ff.FOR: 0.1, ff.SUPERVISED: 0.0})
    v = fp.fold_verdict(rows, ff.FOR, ff.SUPERVISED, "claim", FOLDS, CATEGORIES, SEEDS, "AP", 0.02)
    assert v.n_clusters == 8 and v.cluster_unit.startswith("folds") and v.margin == 0.02
    assert v.n_units == 32 and v.verdict == verdicts.A_BETTER
    base = fp.fold_verdict(rows, ff.FOR, ff.SUPERVISED, "claim", FOLDS, CATEGORIES, SEEDS, "AP", 0.02, role="base")
    assert base.n_units == 8 * 28 and base.n_clusters == 8
    one = fp.fold_verdict(rows[rows["fold"] == 0], ff.FOR, ff.SUPERVISED, "c", FOLDS[:1], CATEGORIES, SEEDS, "AP", 0.02)
    assert one.cluster_unit == "categories" and one.n_units == 4


def test_both_controls_pass_when_planted_right():
    fals = _controls({ff.FOR: 0.1, ff.SUPERVISED: 0.0, ff.PLANTED: 0.2, ff.A_A: 0.0, ff.A_A_B: 0.0})
    assert fals.controls_pass and fals.test.verdict == verdicts.A_BETTER and fals.conclusion == fals.test.outcome


def test_positive_control_fails_when_the_planted_effect_is_removed():
    fals = _controls({ff.FOR: 0.1, ff.SUPERVISED: 0.0, ff.PLANTED: 0.0, ff.A_A: 0.0, ff.A_A_B: 0.0})
    assert not fals.positive_passed and fals.conclusion == verdicts.CANNOT_DECIDE


def test_negative_control_fails_when_an_effect_is_planted_in_it():
    fals = _controls({ff.FOR: 0.1, ff.SUPERVISED: 0.0, ff.PLANTED: 0.2, ff.A_A: 0.0, ff.A_A_B: 0.1})
    assert fals.positive_passed and not fals.negative_passed and fals.conclusion == verdicts.CANNOT_DECIDE


def test_power_check_compares_the_half_width_with_half_the_larger_of_effect_and_margin():
    rows = _rows({ff.FOR: 0.1, ff.SUPERVISED: 0.0})
    v = fp.fold_verdict(rows, ff.FOR, ff.SUPERVISED, "claim", FOLDS, CATEGORIES, SEEDS, "AP", 0.02)
    check = fp.power_check(v, 0.02)
    assert check["target"] == pytest.approx(0.5 * abs(v.difference))
    assert check["half_width"] == pytest.approx((v.ci_high - v.ci_low) / 2) and check["met"]
    assert "met" in fp.power_sentence(check)


def test_selection_rows_say_when_the_epochs_were_bounded_by_an_early_stop():
    from fgclip.train.selection import Selection
    sel = dict(arm="a", lr=1e-3, epochs=2, score=0.5, curves={1e-3: [[0.4, 0.5]]}, seeds=(0, 1), budget=10)
    stop, budget = fp.selection_rows({"a": Selection(**sel, rule="early-stop"), "b": Selection(**sel)})
    assert stop["criterion"] == "base mAP, mean over seeds [0, 1]; epochs up to an early stop (patience 2)"
    assert budget["criterion"] == "base mAP, mean over seeds [0, 1]"


def test_converged_sentence_names_late_edge_and_cut_choices():
    from fgclip.train.selection import Selection
    sel = dict(lr=1e-3, score=0.5, curves={1e-3: [[0.4, 0.5]]}, seeds=(0, 1), budget=8)
    fine = fp.converged_sentence({"a": Selection(arm="a", epochs=2, **sel)})
    assert fine == ("Every trained arm's best validation epoch at its chosen learning rate came at least 2 epochs "
                    "before the budget's end (8).")
    text = fp.converged_sentence({"a": Selection(arm="a", epochs=8, converged=False, **sel),
                                  "b": Selection(arm="b", epochs=2, lr_edge="largest", after_stop="lr 0.003, epoch 8",
                                                 **sel)})
    assert "may not have converged: a." in text and "At the edge of the lr grid: b (largest)." in text
    assert text.endswith("may have cut a slow start, for: b (lr 0.003, epoch 8).")
