"""The verdict protocol: planted effects are found, null effects are not, clusters widen."""
import json
from dataclasses import replace

import numpy as np
import pytest

from fgclip import verdicts
from fgclip.reporting import RESULTS_DIR_ENV, write_results
from fgclip.verdicts import A_BETTER, B_BETTER, CANNOT_DECIDE, CANNOT_TELL, EQUIVALENT, compare, falsify, power_check


def simulate(rng, effect, n_seeds=3, n_clusters=60, per_cluster=4, seed_sd=0.03,
             cluster_sd=0.15, unit_sd=0.2):
    """Paired arms a, b of shape (S, U): b is a baseline, a = b + effect + seed offset + noise.

    Units share a difficulty with their cluster (both arms see it: pairing removes it) and
    the arm difference has a cluster-level part too, so clustering matters for the interval.
    """
    n_units = n_clusters * per_cluster
    clusters = np.repeat(np.arange(n_clusters), per_cluster)
    difficulty = rng.normal(0, 1, n_clusters)[clusters]  # shared by both arms
    cluster_gain = rng.normal(0, cluster_sd, n_clusters)[clusters]  # arm difference per cluster
    b = difficulty + rng.normal(0, 0.1, (n_seeds, n_units))
    seed_offset = rng.normal(0, seed_sd, (n_seeds, 1))
    a = b + effect + cluster_gain + seed_offset + rng.normal(0, unit_sd, (n_seeds, n_units))
    return a, b, clusters


def test_planted_effect_is_found_on_the_right_side():
    rng = np.random.default_rng(0)
    a, b, clusters = simulate(rng, effect=0.15)
    v = compare(a, b, claim="planted", arms=("method", "baseline"), unit="phrases",
                clusters=clusters, cluster_unit="images", seed=1)
    assert v.verdict == A_BETTER and v.winner == "method"
    assert v.ci_low > 0 and v.ci_low < v.difference < v.ci_high
    assert v.difference == pytest.approx(np.mean(a - b))
    swapped = compare(b, a, claim="planted", arms=("baseline", "method"), unit="phrases",
                      clusters=clusters, seed=1)
    assert swapped.verdict == B_BETTER and swapped.winner == "method"
    assert swapped.difference == pytest.approx(-v.difference)


def test_lower_is_better_flips_the_reading_not_the_difference():
    rng = np.random.default_rng(1)
    a, b, clusters = simulate(rng, effect=-0.2)  # a has the lower error
    v = compare(a, b, claim="error", arms=("a", "b"), unit="images", clusters=clusters,
                higher_is_better=False)
    assert v.difference < 0 and v.verdict == A_BETTER


def test_null_effect_with_realistic_seed_spread_says_cannot_tell():
    """No effect, seeds that disagree as much as chapter 3's: 'cannot tell' in >= 90% of runs."""
    rng = np.random.default_rng(2)
    outcomes = []
    for run in range(200):
        a, b, clusters = simulate(rng, effect=0.0, seed_sd=0.05)
        v = compare(a, b, claim="null", arms=("a", "b"), unit="phrases", clusters=clusters,
                    seed=run, n_resamples=400)
        outcomes.append(v.verdict)
    share = np.mean([o == CANNOT_TELL for o in outcomes])
    assert share >= 0.90, f"only {share:.0%} of null runs said 'cannot tell'"


def test_a_percentile_bootstrap_over_three_seeds_would_not_hold():
    """Why the seed level uses Student's t: resampling 3 seeds covers a null far too rarely."""
    rng = np.random.default_rng(3)
    covered_t, covered_percentile = [], []
    for run in range(200):
        a, b, clusters = simulate(rng, effect=0.0, seed_sd=0.05, cluster_sd=0.0, unit_sd=0.05)
        v = compare(a, b, claim="null", arms=("a", "b"), unit="units", clusters=clusters,
                    seed=run, n_resamples=400)
        covered_t.append(v.ci_low <= 0 <= v.ci_high)
        seed_means = (a - b).mean(axis=1)  # the seed level dominates this null
        draws = rng.choice(seed_means, size=(2000, seed_means.size)).mean(axis=1)
        lo, hi = np.quantile(draws, [0.025, 0.975])
        covered_percentile.append(lo <= 0 <= hi)
    assert np.mean(covered_t) >= 0.9
    assert np.mean(covered_percentile) < 0.85


def test_clustered_units_give_wider_intervals_than_iid_units():
    rng = np.random.default_rng(4)
    a, b, clusters = simulate(rng, effect=0.05, seed_sd=0.0, cluster_sd=0.3, unit_sd=0.05,
                              per_cluster=8)
    kw = dict(claim="c", arms=("a", "b"), unit="phrases", seed=0)
    clustered = compare(a, b, clusters=clusters, **kw)
    iid = compare(a, b, **kw)
    assert clustered.n_clusters == 60 and iid.n_clusters == iid.n_units == 480
    assert (clustered.ci_high - clustered.ci_low) > 2 * (iid.ci_high - iid.ci_low)


def test_seeds_that_disagree_in_sign_give_cannot_tell():
    # units agree perfectly within each seed (a unit-only bootstrap would be a point), but
    # one seed of three reverses the sign: the seed level must keep the verdict open
    a = np.array([[1.0] * 50, [1.0] * 50, [-1.0] * 50]) + 0.0
    b = np.zeros_like(a)
    v = compare(a, b, claim="split", arms=("a", "b"), unit="units")
    assert v.seeds_agreeing == 2 and v.verdict == CANNOT_TELL


def test_one_seed_uses_the_unit_level_and_says_so():
    rng = np.random.default_rng(5)
    a = rng.normal(0.5, 0.1, 200)
    v = compare(a, np.zeros(200), claim="one", arms=("a", "b"), unit="captions")
    assert v.n_seeds == 1 and v.verdict == A_BETTER
    assert "1 seed x 200 captions" in v.sentence()


def test_unscored_units_are_allowed_when_both_arms_skip_them():
    a = np.array([[0.5, np.nan, 0.7, 0.6], [np.nan, 0.4, 0.8, 0.6], [0.5, 0.5, np.nan, 0.6]])
    b = np.where(np.isnan(a), np.nan, 0.1)
    v = compare(a, b, claim="folds", arms=("a", "b"), unit="categories")
    assert v.n_units == 4 and v.difference == pytest.approx(np.nanmean(a) - 0.1)
    with pytest.raises(ValueError, match="same places"):
        compare(a, np.full_like(a, 0.1), claim="x", arms=("a", "b"), unit="u")


@pytest.mark.parametrize("kwargs, message", [
    (dict(b=np.zeros((3, 4))), "same shape"),
    (dict(arms=("a", "a")), "two different arms"),
    (dict(confidence=1.5), "confidence"),
    (dict(clusters=[0, 1]), "one label per unit"),
])
def test_bad_input_is_refused_with_its_name(kwargs, message):
    args = dict(a=np.ones((3, 5)), b=np.zeros((3, 5)), claim="x", arms=("a", "b"), unit="u")
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        compare(**args)


def test_identical_arms_give_a_point_interval_and_cannot_tell():
    x = np.arange(12.0).reshape(3, 4)
    v = compare(x, x, claim="same", arms=("a", "b"), unit="u")
    assert (v.difference, v.ci_low, v.ci_high) == (0.0, 0.0, 0.0)
    assert v.verdict == CANNOT_TELL and v.outcome == "cannot tell at this size"


def test_falsify_needs_both_controls():
    rng = np.random.default_rng(6)
    big = compare(rng.normal(1, 0.1, (3, 50)), np.zeros((3, 50)), claim="pos", arms=("a", "b"), unit="u",
                  margin=0.2)
    null = compare(rng.normal(0, 0.1, (3, 50)), rng.normal(0, 0.1, (3, 50)), claim="neg",
                   arms=("a", "b"), unit="u", margin=0.2)
    assert null.verdict == EQUIVALENT
    ok = falsify(big, positive=big, negative=null)
    assert ok.controls_pass and ok.conclusion == "a better"
    broken = falsify(big, positive=null, negative=null)
    assert not broken.controls_pass and broken.conclusion == CANNOT_DECIDE
    leaky = falsify(null, positive=big, negative=big)
    assert leaky.positive_passed and not leaky.negative_passed
    assert "did NOT stay quiet" in leaky.sentence()
    wide = compare(rng.normal(0, 1.0, (3, 50)), rng.normal(0, 1.0, (3, 50)), claim="wide", arms=("a", "b"), unit="u",
                   margin=0.01)
    assert wide.verdict == CANNOT_TELL and (wide.ci_high - wide.ci_low) / 2 > 0.01
    assert "could NOT show equivalence" in falsify(big, big, wide).sentence()
    narrow_miss = compare(rng.normal(0.15, 0.01, (3, 50)), np.zeros((3, 50)), claim="off", arms=("a", "b"),
                          unit="u", margin=0.2)
    narrow_miss = replace(narrow_miss, verdict=CANNOT_TELL, ci_low=-0.05, ci_high=0.25)  # narrower than 2 x margin
    assert "was NOT shown equivalent within ±0.2" in falsify(big, big, narrow_miss).sentence()
    with pytest.raises(ValueError, match="effect"):
        falsify(big, big, null, effect="a wins")


def test_results_json_carries_the_verdict_records(tmp_path, monkeypatch):
    v = compare(np.ones((3, 4)) + np.arange(4) * 0.01, np.zeros((3, 4)), claim="c",
                arms=("m", "base"), unit="images", margin=0.05)
    f = falsify(v, v, v)
    monkeypatch.setenv(RESULTS_DIR_ENV, str(tmp_path))
    path = write_results("", {"verdicts": [v], "controls": [f], "x": np.float32(0.5),
                              "missing": float("nan")}, chapter="ch9")
    assert path == tmp_path / "ch9.json"
    data = json.loads(path.read_text())
    record = data["verdicts"][0]
    for key in ("claim", "arms", "difference", "ci_low", "ci_high", "n_seeds", "n_units",
                "unit", "cluster_unit", "margin", "verdict"):
        assert key in record
    assert record["arms"] == ["m", "base"] and record["verdict"] == A_BETTER
    assert data["controls"][0]["controls_pass"] is False
    assert data["x"] == 0.5 and data["missing"] is None
    explicit = write_results(str(tmp_path / "run.json"), {"verdicts": []}, chapter="ch9")
    assert explicit == tmp_path / "run.json"
    monkeypatch.delenv(RESULTS_DIR_ENV)
    assert write_results("", {"verdicts": []}, chapter="ch9") is None


def test_verdict_table_has_one_row_per_verdict():
    v = compare(np.ones((3, 4)), np.zeros((3, 4)), claim="c", arms=("m", "b"), unit="u")
    table = verdicts.verdict_table([v, v])
    assert len(table) == 2 and table.loc[0, "verdict"] == "m better"


def test_a_negative_control_passes_only_as_equivalent():
    rng = np.random.default_rng(7)
    m = 0.1
    up = compare(rng.normal(1, 0.1, (3, 50)), np.zeros((3, 50)), claim="up", arms=("a", "b"), unit="u", margin=m)
    down = compare(np.zeros((3, 50)), rng.normal(1, 0.1, (3, 50)), claim="down", arms=("a", "b"), unit="u", margin=m)
    flat = compare(rng.normal(0, 0.05, (3, 50)), rng.normal(0, 0.05, (3, 50)), claim="flat", arms=("a", "b"),
                   unit="u", margin=m)
    noisy = compare(rng.normal(0, 1.0, (3, 8)), rng.normal(0, 1.0, (3, 8)), claim="noisy", arms=("a", "b"),
                    unit="u", margin=m)  # a null effect measured too coarsely to say anything
    assert (down.verdict, flat.verdict, noisy.verdict) == (B_BETTER, EQUIVALENT, CANNOT_TELL)
    assert falsify(up, up, flat).controls_pass
    assert not falsify(up, up, noisy).negative_passed  # 'cannot tell' is no longer enough
    assert not falsify(up, up, down).negative_passed and not falsify(up, up, up).negative_passed
    with pytest.raises(ValueError, match="no margin"):
        falsify(up, up, compare(np.zeros((3, 4)), np.zeros((3, 4)), claim="x", arms=("a", "b"), unit="u"))


def test_equivalence_is_the_interval_inside_the_margin_even_when_it_excludes_zero():
    rng = np.random.default_rng(8)
    small = rng.normal(0.01, 0.002, (3, 200))  # a real but negligible difference
    v = compare(small, np.zeros((3, 200)), claim="small", arms=("a", "b"), unit="u", margin=0.05)
    assert v.ci_low > 0 and v.verdict == EQUIVALENT and v.outcome == "equivalent within ±0.05"
    assert compare(small, np.zeros((3, 200)), claim="small", arms=("a", "b"), unit="u").verdict == A_BETTER
    straddles = compare(rng.normal(0.05, 0.05, (3, 40)), np.zeros((3, 40)), claim="s", arms=("a", "b"), unit="u",
                        margin=0.05)
    assert straddles.ci_low < 0.05 < straddles.ci_high and straddles.verdict != EQUIVALENT
    for bad in (0.0, -0.1):
        with pytest.raises(ValueError, match="margin"):
            compare(small, small, claim="x", arms=("a", "b"), unit="u", margin=bad)


def test_power_check_sets_half_the_larger_of_effect_and_margin_as_target():
    rng = np.random.default_rng(0)
    a = 0.5 + 0.01 * rng.standard_normal((3, 40))
    v = compare(a + 0.1, a, claim="c", arms=("x", "y"), unit="u", margin=0.02)
    rec = power_check(v)
    assert rec["target"] == pytest.approx(0.5 * abs(v.difference)) and rec["met"]
    assert rec["half_width"] == pytest.approx((v.ci_high - v.ci_low) / 2)
    wide = power_check(v, margin=1.0)  # an explicit margin overrides the verdict's own
    assert wide["target"] == pytest.approx(0.5) and wide["met"]
    noisy = compare(a + 0.3 * rng.standard_normal((3, 40)), a, claim="c", arms=("x", "y"), unit="u", margin=0.001)
    assert not power_check(noisy)["met"]


def test_an_equivalence_that_excludes_zero_names_the_arm_ahead_and_a_bound_on_the_margin_gets_a_digit():
    from dataclasses import replace

    rng = np.random.default_rng(0)
    a = rng.normal(0.5, 0.02, (5, 400))
    v = compare(a - 0.02, a, claim="c", arms=("new", "old"), unit="units", seed=0, margin=0.05)  # lower by 0.02, tightly
    assert v.verdict == EQUIVALENT and v.ci_high < 0
    assert v.brief().endswith("**equivalent within ±0.05** (old ahead, by less than the margin: the interval excludes 0)")
    assert "(old ahead" in v.sentence()
    flipped = replace(v, higher_is_better=False)  # lower is better: the lower arm is ahead
    assert "(new ahead" in flipped.brief()
    loose = compare(a + rng.normal(0, 0.02, a.shape), a, claim="c", arms=("new", "old"), unit="units", seed=0, margin=0.05)
    assert loose.ci_low < 0 < loose.ci_high and "ahead" not in loose.brief()
    edge = replace(v, ci_low=-0.0203, ci_high=0.04964)  # rounds onto the margin at 3 digits
    assert "[-0.0203, +0.0496]" in edge.brief() and edge.interval() == "[-0.0203, +0.0496]" and "to +0.0496;" in edge.sentence()
    assert "[-0.020, +0.040]" in replace(v, ci_low=-0.0203, ci_high=0.0403).brief()  # away from it: 3 digits


def test_power_check_of_a_negative_control_targets_the_margin():
    def aa(a):
        return compare(np.array(a), np.full(len(a), 0.5), claim="A/A", arms=("B", "A"), unit="units", margin=0.02)

    v = aa([0.50, 0.52, 0.49, 0.51, 0.50, 0.505, 0.495, 0.50])
    as_test, as_null = power_check(v), power_check(v, null=True)
    assert as_null["target"] == 0.02 and as_test["target"] == pytest.approx(0.5 * max(abs(v.difference), 0.02))
    assert as_null["met"] == (v.half_width <= 0.02) and "negative control" in as_null["rule"]
    wide = aa([0.40, 0.60, 0.45, 0.55])
    assert wide.half_width > 0.02 and not power_check(wide, null=True)["met"]


def simulate_nested(rng, seed_sd, n_seeds=6, n_images=60, per_image=3, image_sd=0.3, unit_sd=0.5, sizes=None):
    """A fresh test draw per seed (chapter 2): the difference D[s, u] is NaN outside seed s's own
    units; a per-draw offset (seed_sd), an image part shared by its units, unit noise; true mean 0.
    ``sizes``: images per seed (default ``n_images`` each)."""
    sizes = sizes or [n_images] * n_seeds
    per_seed = [n * per_image for n in sizes]
    diff = np.full((len(sizes), sum(per_seed)), np.nan)
    at = np.cumsum([0] + per_seed)
    for s, n in enumerate(sizes):
        image = rng.normal(0, image_sd, n).repeat(per_image)
        diff[s, at[s]:at[s + 1]] = rng.normal(0, seed_sd) + image + rng.normal(0, unit_sd, per_seed[s])
    clusters = [f"{s}:{i}" for s, n in enumerate(sizes) for i in np.arange(n).repeat(per_image)]
    return diff, np.where(np.isnan(diff), np.nan, 0.0), clusters


def _sum_rule_half(diff, clusters, seed):
    """The crossed rule's half-width (eq-verdict-se, the sum) on a nested design, for comparison."""
    cl, k = verdicts._cluster_index(clusters, diff.shape[1])
    v_unit = verdicts.cluster_bootstrap_var(np.nanmean(diff, axis=0), cl, k, 300, np.random.default_rng(seed))
    v_seed = float(np.nanmean(diff, axis=1).var(ddof=1)) / diff.shape[0]
    return verdicts._crossed_half(v_seed, v_unit, diff.shape[0], k, 0.975)[1]


@pytest.mark.parametrize("seed_sd, sizes", [(0.0, None), (0.05, None), (0.12, None),
                                            (0.05, [20, 40, 80, 120, 160, 180])])
def test_nested_units_cover_the_truth_at_the_nominal_rate(seed_sd, sizes):
    """eq-verdict-se-nested: each unit scored by one seed. The interval covers the true difference
    (0) at about the nominal 95%, with no per-draw effect, a small or a large one, and with draws
    of unequal size (the seed means weighted by their units); never below 0.92 in 400 runs."""
    rng = np.random.default_rng(11)
    covered = []
    for run in range(400):
        a, b, clusters = simulate_nested(rng, seed_sd, sizes=sizes)
        v = compare(a, b, claim="null", arms=("a", "b"), unit="captions", clusters=clusters, seed=run, n_resamples=300)
        assert v.design == "nested"
        covered.append(v.ci_low <= 0.0 <= v.ci_high)
    assert 0.92 <= np.mean(covered) <= 0.99, f"coverage {np.mean(covered):.3f}"


def test_nested_units_are_not_counted_twice():
    """Without a per-draw effect the sum (eq-verdict-se) counts the draws' sampling noise twice: its
    interval is wider than the nested rule's, which is no wider than the larger part's own."""
    rng = np.random.default_rng(3)
    ours, theirs = [], []
    for run in range(60):
        a, b, clusters = simulate_nested(rng, 0.0)
        ours.append(compare(a, b, claim="n", arms=("a", "b"), unit="u", clusters=clusters, seed=run,
                            n_resamples=300).half_width)
        theirs.append(_sum_rule_half(a - b, clusters, run))
    assert np.mean(ours) < 0.95 * np.mean(theirs)


def test_crossed_units_keep_the_sum_and_say_so():
    """Seeds that score the same units stay with eq-verdict-se; one unit scored twice is enough."""
    rng = np.random.default_rng(5)
    a, b, clusters = simulate(rng, effect=0.0)
    v = compare(a, b, claim="c", arms=("a", "b"), unit="phrases", clusters=clusters)
    assert v.design == "crossed"
    diff, _, cl = simulate_nested(rng, 0.02, n_seeds=3)
    diff[1, 0] = diff[0, 0]  # unit 0 now scored by seeds 0 and 1: not nested any more
    base = np.where(np.isnan(diff), np.nan, 0.0)
    assert compare(diff, base, claim="c", arms=("a", "b"), unit="u", clusters=cl).design == "crossed"
