"""Chapter 1's per-seed floor findings: a seed below the random point or its own seed's
caption-blind saliency is named, with its untrained heads and its validation loss."""
import numpy as np
import pytest

from fgclip.studies.maximage import seeds as msd


def _scores(main_rows):
    k = 10
    return {"main": np.array([[1.0] * r + [0.0] * (k - r) for r in main_rows]),
            "random point": np.full((3, k), 0.2),
            "caption-blind saliency": np.array([[1.0] * 3 + [0.0] * 7] * 3),
            "untrained heads": np.array([[1.0] * 5 + [0.0] * 5, [0.0] * k, [1.0] * k])}


def test_a_collapsed_seed_is_named_with_its_floors_and_cause():
    curves = [{"arm": "main", "lr": 1e-3, "chosen_periods": 2,
               "seeds": {0: {"val": [3.0, 2.0]}, 1: {"val": [3.0, 2.9]}, 2: {"val": [3.0, 2.1]}}}]
    rows = msd.below_floor(_scores([6, 1, 2]), [0, 1, 2], ["main"])
    assert [(r["seed"], len(r["floors"])) for r in rows] == [(1, 2), (2, 1)]  # 0.1 < 0.2 and 0.3; 0.2 < 0.3 only
    found = msd.seed_findings(_scores([6, 1, 2]), [0, 1, 2], ["main"], curves)
    assert len(found) == 1 and found[0].startswith("main: seed 1 (0.100; below random point at 0.200 and caption-blind saliency of seed 1 at 0.300")
    assert ("its untrained heads 0.000; validation loss 2.900, other seeds 2.000-2.100; an outlier (at least the margin 0.05 "
            "below its arm's typical seed against every floor it is below: its other seeds clear random point by 0.200 at the "
            "median, gaps +0.000 to +0.400): its validation loss is above every other seed's (median 2.050): the retrieval loss "
            "itself ranks it last), seed 2 (0.200;") in found[0]
    flat = msd.seed_findings(_scores([6, 1, 2]), [0, 1, 2], ["main"], curves, flat={"main": 2.9})[0]
    assert "gaps +0.000 to +0.400): its heads learned no ranking (above); its validation loss is above" in flat


def test_an_arms_own_saliency_is_its_floor_and_a_known_cause_is_said():
    own = {"main": np.array([[1.0] * 7 + [0.0] * 3] * 3)}  # main's own saliency, 0.7 on every seed
    rows = msd.below_floor(_scores([6, 5, 8]), [0, 1, 2], ["main"], own=own)
    assert [(r["seed"], r["floors"], r["saliency"]) for r in rows] == [(0, ["its own caption-blind saliency"], 0.7),
                                                                        (1, ["its own caption-blind saliency"], 0.7)]
    found = msd.seed_findings(_scores([6, 5, 8]), [0, 1, 2], ["main"], own=own, causes={"main": "shuffled, by construction"})
    assert found[0].startswith("main (shuffled, by construction): seed 0 (0.600; below its own caption-blind saliency at 0.700")


def test_no_seed_below_the_floors_says_so_and_bad_input_is_named():
    assert msd.seed_findings(_scores([6, 5, 4]), [0, 1, 2], ["main"])[0].startswith("no seed of 1 arms")
    with pytest.raises(KeyError, match="nope"):
        msd.below_floor(_scores([6, 5, 4]), [0, 1, 2], ["nope"])
    with pytest.raises(ValueError, match="seed rows"):
        msd.below_floor(_scores([6, 5, 4]), [0, 1], ["main"])


def _corpus():
    from pathlib import Path

    from fgclip.studies.maximage.data import Corpus, PhraseItem

    a, b, tiny = (0.0, 0.0, 20.0, 20.0), (20.0, 20.0, 40.0, 40.0), (38.0, 0.0, 40.0, 2.0)
    phrases = [PhraseItem(0, 0, (0, 2), "a star", [a], False), PhraseItem(0, 0, (3, 5), "a moon", [b], True),
               PhraseItem(0, 0, (6, 8), "a dot", [tiny], False)]
    return Corpus([Path("0.jpg")], [(40, 40)], [["a", "star", "and", "a", "moon", "and", "a", "dot"]], [0], phrases,
                  [[a, b, tiny]])


def test_selectivity_pairs_both_kept_and_the_object_pointer_floor_on_them():
    from types import SimpleNamespace

    from fgclip.studies.maximage import evaluation as ev
    from fgclip.studies.maximage.heads import two_object_pairs

    data = SimpleNamespace(corpus=_corpus())
    keep = ev.evaluated(data, 0.05, "hull")
    assert keep.tolist() == [True, True, False]  # the dot covers 0.25% of the image
    pairs = ev.kept_pairs(two_object_pairs(data.corpus), keep)
    assert pairs == [(0, 1)]
    # each box holds the centre of its own object only, one of the image's three: E = 1/3 per phrase
    np.testing.assert_allclose(ev.object_pointer_pairs(data, pairs), [1 / 9])
    with pytest.raises(ValueError, match="keep"):
        ev.kept_pairs([(0, 5)], keep)


def test_the_bias_figure_draws_every_seed():
    import matplotlib

    matplotlib.use("Agg")
    import pandas as pd

    from fgclip.studies.maximage import figures as mfig

    t = pd.DataFrame({"train_bias": [0.0, 0.0, 0.9, 0.9], "seed": [0, 1, 0, 1], "model": [0.2, 0.6, 0.5, 0.5],
                      "centre-cell share on bias-0 test": [0.1] * 4})
    fig = mfig.plot_bias_seeds(t)
    ax = fig.axes[0]
    assert [ln.get_label() for ln in ax.get_lines()] == ["model"]
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), [0.4, 0.5])
    assert len(ax.collections) == 1 and ax.collections[0].get_offsets().shape == (4, 2)
    with pytest.raises(KeyError, match="seed"):
        mfig.bias_means(t.drop(columns="seed"))


def test_off_objects_tells_background_from_another_object():
    from types import SimpleNamespace

    from fgclip.studies.maximage import evaluation as ev

    data, keep = SimpleNamespace(corpus=_corpus()), np.array([True, True, False])
    points = [(30.0, 5.0), (10.0, 10.0), (0.0, 0.0)]  # star: background; moon: on the star (another object)
    np.testing.assert_array_equal(ev.off_objects(points, data, keep), [1.0, 0.0])
    np.testing.assert_array_equal(ev.hits(points, data, keep), [0.0, 0.0])  # both miss their own phrase


def test_seed_findings_add_the_off_object_share_and_the_reading_correlates():
    scores = _scores([6, 1, 2])
    off = {"main": np.array([[0.0] * 10, [1.0] * 8 + [0.0] * 2, [1.0] * 3 + [0.0] * 7])}
    found = msd.seed_findings(scores, [0, 1, 2], ["main"], off=off)
    assert "seed 1 (0.100; below random point at 0.200 and caption-blind saliency of seed 1 at 0.300; its untrained " \
           "heads 0.000; 80% of its points off every object, its seeds above the floors 0%; an outlier" in found[0]
    assert "gaps +0.000 to +0.400): its points settle on background (why is not read)), seed 2" in found[0]
    assert "settles on background" not in msd.seed_findings(scores, [0, 1, 2], ["main"], off=off, by=0.9)[0]
    reading = msd.off_object_reading(scores, off, ["main"])
    acc, offs = [0.6, 0.1, 0.2], [0.0, 0.8, 0.3]
    assert [r["accuracy"] for r in reading["seeds"]] == pytest.approx(acc)
    assert [r["other object"] for r in reading["seeds"]] == pytest.approx([0.4, 0.1, 0.5])
    assert reading["correlation with accuracy"]["off objects"] == pytest.approx(np.corrcoef(acc, offs)[0, 1])
    text = msd.off_object_sentence(reading)
    assert text.startswith(f"over the 3 trained seeds of the arms, a seed's pointing accuracy correlates at r = "
                           f"{np.corrcoef(acc, offs)[0, 1]:+.2f} with the share of its points off every object (0%-80%)")


def test_a_seed_at_the_flat_loss_is_said_to_have_collapsed_and_one_below_it_is_not():
    """The hardest-negative triplet's loss of heads that score every pair alike is alpha
    (ArmSet.flat_losses); a named seed whose validation loss sits there learned no ranking."""
    from dataclasses import replace

    from fgclip.studies.maximage.arms import chapter_arms
    from fgclip.studies.maximage.heads import TrainConfig

    arms = chapter_arms(replace(TrainConfig(), margin=0.2))
    assert arms.flat_losses() == {"triplet (hardest)": 0.2}  # exact for one negative per anchor, not for N-Pair
    curves = [{"arm": "main", "lr": 1e-3, "chosen_periods": 1,
               "seeds": {0: {"val": [0.05]}, 1: {"val": [0.201]}, 2: {"val": [0.12]}}}]
    found = msd.seed_findings(_scores([6, 1, 2]), [0, 1, 2], ["main"], curves, flat={"main": 0.2})[0]
    seed1, seed2 = found.split("seed 2 (")
    assert "its heads collapsed" in seed1 and "its heads collapsed" not in seed2  # 0.201 is at alpha, 0.12 is not
    assert "its heads collapsed" not in msd.seed_findings(_scores([6, 1, 2]), [0, 1, 2], ["main"], curves)[0]


def test_a_range_of_one_value_is_printed_once():
    assert msd.span([0.3, 0.3]) == "30%" and msd.span([0.11, 0.44]) == "11%-44%"
    off = {"main": np.array([[0.0] * 10, [1.0] * 10, [1.0] * 10])}  # seed 0 is the only one above the floors
    found = msd.seed_findings(_scores([6, 1, 2]), [0, 1, 2], ["main"], off=off)[0]
    assert "its seeds above the floors 0%;" in found and "0%-0%" not in found
    none_up = msd.seed_findings(_scores([1, 1, 2]), [0, 1, 2], ["main"], off=off)[0]
    assert "no seed of its arm above the floors" in none_up


def test_a_seed_a_margin_below_its_arms_typical_seed_is_an_outlier_and_otherwise_its_arm_is_read():
    floor = [0.3] * 5
    out = msd.floor_cause([0.32, 0.1, 0.31, 0.28, 0.33], {"f": floor}, 1, margin=0.05)  # 0.1 among 0.28-0.33
    assert out["cause"] == "outlier" and out["others range"] == pytest.approx([-0.02, 0.03])
    assert out["others over it"] == pytest.approx(0.015)  # the median of the other seeds' gaps
    said = msd.cause_clause(out, 0.05, "m")
    assert said.startswith("an outlier (at least the margin 0.05 below its arm's typical seed against every floor")
    assert said.endswith("its other seeds clear f by 0.015 at the median, gaps -0.020 to +0.030): m")
    ref = msd.floor_cause([0.6, 0.61, 0.62, 0.6, 0.1], {"f": [0.575] * 5}, 4, margin=0.05)  # four of five clear it
    assert ref["cause"] == "outlier"
    pair = [0.133, 0.014, 0.396, 0.008, 0.409]  # two low seeds do not hide each other: the median is the yardstick
    assert [msd.floor_cause(pair, {"r": [0.101] * 5}, k, 0.05)["cause"] for k in (1, 3)] == ["outlier", "outlier"]
    arm = msd.floor_cause([0.32, 0.27, 0.31, 0.28, 0.26], {"f": floor}, 1, margin=0.05)  # the arm sits at its floor
    assert arm["cause"] == "the arm as trained" and arm["others over it"] == pytest.approx(-0.0075)
    said = msd.cause_clause(arm, 0.05, caveat="lr at the grid's largest end")
    assert "sit 0.007 below f on average" in said and "the arm clears it by less than the margin 0.05" in said
    assert "the arm's selection: lr at the grid's largest end" in said and said.endswith("no mechanism of its own read")
    assert "a control (shuffled)" in msd.cause_clause(arm, 0.05, caveat="x", control="shuffled")
    spread = msd.floor_cause([0.28, 0.27, 0.30, 0.32, 0.60], {"f": floor}, 1, margin=0.05)  # the arm clears it on average; 0.27 is typical
    assert spread["cause"] == "the arm's spread" and "seed-to-seed spread" in msd.cause_clause(spread, 0.05)
    # against every floor it is below: typical against the shared floor, so no outlier for its own high saliency
    two = msd.floor_cause([0.434, 0.403, 0.428, 0.481, 0.412], {"centre": [0.592] * 5, "own": [0.42, 0.431, 0.507, 0.47, 0.434]},
                          2, margin=0.05)
    assert two["cause"] == "the arm as trained" and two["floor"] == "own"  # the floor its typical seeds clear most decides
    assert msd.floor_cause([0.1], {"f": [0.3]}, 0, 0.05)["cause"] == "not read"
    with pytest.raises(ValueError, match="below none"):
        msd.floor_cause([0.32, 0.1], {"f": [0.3, 0.3]}, 0, 0.05)
    rows = msd.below_floor(_scores([3, 1, 2]), [0, 1, 2], ["main"], margin=0.05, causes={"main": "shuffled"})
    # seed 1 lies 0.2 below its saliency, but its arm's typical seed is itself below that floor: the arm's, no outlier
    assert [(r["cause"], r["known"]) for r in rows] == [("the arm as trained", "shuffled")] * 2
    collapsed = [0.004, 0.15, 0.027, 0.022, 0.12]  # most seeds below the random point: every low one is the arm's
    assert {msd.floor_cause(collapsed, {"r": [0.101] * 5}, k, 0.05)["cause"] for k in (0, 2, 3)} == {"the arm as trained"}
    # the triplet of the build of 12-06: seed 2 clears the random point and falls below its own saliency only, while
    # the arm's typical seed is below the random point: the arm fails, so no seed of it is an outlier, on any floor
    triplet, own = [0.153, 0.027, 0.119, 0.004, 0.022], [0.187, 0.003, 0.210, 0.003, 0.003]
    reading = msd.floor_cause(triplet, {"r": [0.101] * 5, "own": own}, 2, 0.05)
    assert reading["cause"] == "the arm as trained" and reading["others median"] == pytest.approx(0.010)


def test_an_outlier_whose_own_saliency_fails_with_it_is_said_to_miss_without_the_caption():
    scores = _scores([6, 1, 6])
    own = {"main": np.array([[1.0] * 5 + [0.0] * 5, [0.0] * 2 + [0.0] * 8, [1.0] * 5 + [0.0] * 5])}  # seed 1's own: 0.0
    found = msd.seed_findings(scores, [0, 1, 2], ["main"], own=own)[0]
    assert "its own caption-blind saliency failed with it (0.000, its arm's other seeds 0.500-0.500)" in found
    own["main"][1, :5] = 1.0  # 0.5: as its arm's other seeds
    assert "failed with it" not in msd.seed_findings(scores, [0, 1, 2], ["main"], own=own)[0]


def test_an_outlier_on_background_that_ranks_as_well_is_read_as_a_solution_the_loss_does_not_tell_apart():
    off = {"main": np.array([[0.0] * 10, [1.0] * 8 + [0.0] * 2, [0.0] * 10])}
    curves = [{"arm": "main", "chosen_periods": 1, "seeds": {0: {"val": [2.0]}, 1: {"val": [2.05]}, 2: {"val": [2.1]}}}]
    found = msd.seed_findings(_scores([6, 1, 6]), [0, 1, 2], ["main"], curves, off=off)[0]
    assert ("its points settle on background (why is not read); it ranks as well as its arm's typical seed (validation loss "
            "at or below their median, 2.050), so the retrieval loss did not prefer") in found
    curves[0]["seeds"][1]["val"] = [2.5]  # it ranks worse: no such reading
    assert "ranks as well" not in msd.seed_findings(_scores([6, 1, 6]), [0, 1, 2], ["main"], curves, off=off)[0]


def test_an_outliers_loss_is_read_against_its_arms_typical_seed_not_only_its_worst():
    rest = [2.0, 2.1, 2.3, 2.9]  # median 2.2
    assert msd.loss_rank(2.15, rest, False).startswith("it ranks as well as its arm's typical seed")
    assert "did not prefer" in msd.loss_rank(2.2, rest, True) and "did not prefer" not in msd.loss_rank(2.2, rest, False)
    assert "ranks it lower, not last" in msd.loss_rank(2.5, rest, True)  # worse than typical, better than the worst:
    assert "did not prefer" not in msd.loss_rank(2.5, rest, True)  # no longer read as 'ranks as well'
    assert "ranks it last" in msd.loss_rank(3.0, rest, True)


def test_a_low_seeds_collapse_diagnostics_are_set_beside_its_arms_seeds_above_the_floors():
    diag = {0: {"word pairs on one cell": 0.2, "dead hidden units": 0.0}, 1: {"word pairs on one cell": 0.9, "dead hidden units": 0.01},
            2: {"word pairs on one cell": 0.25, "dead hidden units": 0.0}}
    words, found = msd.diagnostics_beside(1, diag, {1}, 0.05)
    assert words == ("on the validation images word pairs on one cell 90% (its arm's seeds above the floors 20%-25%), "
                     "dead hidden units 1% (its arm's seeds above the floors 0%)")
    assert found == ["word pairs on one cell 90% on the validation images, beyond every seed of its arm above the floors"]
    diag[1]["word pairs on one cell"] = 0.27  # within the margin of the others: nothing sets it apart, and it is said
    assert msd.diagnostics_beside(1, diag, {1}, 0.05)[1] == [
        "neither word pairs on one cell nor dead hidden units sets it apart from its arm's seeds above the floors"]
    assert msd.diagnostics_beside(5, diag, {1}, 0.05) == ("", [])  # not recorded: nothing said
    curves = [{"arm": "main", "chosen_periods": 1, "seeds": {s: {"val": [2.0], "diagnostics": d} for s, d in diag.items()}}]
    assert msd.arm_diagnostics(curves, "main") == diag and msd.arm_diagnostics(curves, "other") == {}
    found = msd.seed_findings(_scores([6, 1, 6]), [0, 1, 2], ["main"], curves)[0]
    assert "on the validation images word pairs on one cell 27% (its arm's seeds above the floors 20%-25%)" in found
    assert "neither word pairs on one cell nor dead hidden units sets it apart" in found
