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
A_A_SEEDS = fp.a_a_seeds(SEEDS)


def _rows(effects: dict[str, float], noise: float = 0.003) -> pd.DataFrame:
    """Synthetic per-category AP rows: each arm = a shared per-category base + its effect + small noise."""
    rng = np.random.default_rng(0)
    base = dict(zip(CATEGORIES, rng.uniform(0.2, 0.6, len(CATEGORIES))))
    rows = []
    for f, novel in enumerate(FOLDS):
        for arm, eff in effects.items():
            for s in A_A_SEEDS if arm == ff.A_A else SEEDS:  # the A/A arm's runs have seeds of their own
                rows += [{"arm": arm, "fold": f, "seed": s, "category": c, "role": "novel" if c in novel else "base",
                          "AP": base[c] + eff + rng.normal(0, noise)} for c in CATEGORIES]
    return pd.DataFrame(rows)


def _controls(effects):
    rows = _rows(effects)
    v = lambda a, b, sa=None: fp.fold_verdict(rows, a, b, "claim", FOLDS, CATEGORIES, SEEDS, "AP", 0.02, seeds_a=sa)  # noqa: E731
    return verdicts.falsify(v(ff.FOR, ff.SUPERVISED), v(ff.PLANTED, ff.SUPERVISED), v(ff.A_A, ff.SUPERVISED, A_A_SEEDS))


def test_a_a_seeds_are_as_many_and_disjoint():
    assert fp.a_a_seeds([0, 1]) == [2, 3] and fp.a_a_seeds([5, 7, 6]) == [8, 9, 10]


def test_a_a_verdict_reads_its_own_seeds_paired_in_order():
    rows = _rows({ff.SUPERVISED: 0.0, ff.A_A: 0.0})
    rows.loc[(rows["arm"] == ff.A_A) & (rows["seed"] == A_A_SEEDS[1]), "AP"] += 0.3  # the second A/A seed only
    v = fp.fold_verdict(rows, ff.A_A, ff.SUPERVISED, "c", FOLDS, CATEGORIES, SEEDS, "AP", 0.02, seeds_a=A_A_SEEDS)
    assert v.n_seeds == 2 and v.difference == pytest.approx(0.15, abs=0.01)
    with pytest.raises(ValueError, match=r"no rows for seed\(s\) \[0, 1\]"):  # read at the chapter's seeds
        fp.fold_verdict(rows, ff.A_A, ff.SUPERVISED, "c", FOLDS, CATEGORIES, SEEDS, "AP", 0.02)


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
    fals = _controls({ff.FOR: 0.1, ff.SUPERVISED: 0.0, ff.PLANTED: 0.2, ff.A_A: 0.0})
    assert fals.controls_pass and fals.test.verdict == verdicts.A_BETTER and fals.conclusion == fals.test.outcome


def test_positive_control_fails_when_the_planted_effect_is_removed():
    fals = _controls({ff.FOR: 0.1, ff.SUPERVISED: 0.0, ff.PLANTED: 0.0, ff.A_A: 0.0})
    assert not fals.positive_passed and fals.conclusion == verdicts.CANNOT_DECIDE


def test_negative_control_fails_when_an_effect_is_planted_in_it():
    fals = _controls({ff.FOR: 0.1, ff.SUPERVISED: 0.0, ff.PLANTED: 0.2, ff.A_A: 0.1})
    assert fals.positive_passed and not fals.negative_passed and fals.conclusion == verdicts.CANNOT_DECIDE


def test_power_check_compares_the_half_width_with_half_the_larger_of_effect_and_margin():
    rows = _rows({ff.FOR: 0.1, ff.SUPERVISED: 0.0})
    v = fp.fold_verdict(rows, ff.FOR, ff.SUPERVISED, "claim", FOLDS, CATEGORIES, SEEDS, "AP", 0.02)
    check = fp.power_check(v, 0.02)
    assert check["target"] == pytest.approx(0.5 * abs(v.difference))
    assert check["half_width"] == pytest.approx((v.ci_high - v.ci_low) / 2) and check["met"]
    assert "met" in fp.power_sentence(check)
