"""How chapter 1's heads start (fgclip.studies.maximage.init_census): the zero-bias start, the
census that chooses it on the validation loss, and the clear errors for a bad choice."""
from dataclasses import replace

import numpy as np

from fgclip.studies.maximage import grounding as mg
import pytest
import torch

from fgclip.runner import ParameterError, validate
from fgclip.studies.maximage import arms as ma
from fgclip.studies.maximage import init_census as mic
from fgclip.studies.maximage.heads import TrainConfig, caption_word_maps, make_heads, project_images
from test_ch1_arms import _split


def test_zero_start_keeps_the_seeded_weights_and_zeroes_every_bias():
    default, zero = make_heads(8, 6, 8, 3), make_heads(8, 6, 8, 3, bias_init="zero")
    for (name, a), (_, b) in zip(default.named_parameters(), zero.named_parameters()):
        if name.endswith("bias"):
            assert torch.count_nonzero(b) == 0 and torch.count_nonzero(a) > 0, name
        else:
            assert torch.equal(a, b), name
    with pytest.raises(ValueError, match="bias_init must be one of"):
        make_heads(8, 6, 8, 3, bias_init="zeros")


def test_a_shared_bias_makes_the_untrained_map_caption_blind():
    """Inputs that carry nothing shared (zero-mean noise) and a large shared output bias: every
    word's map then peaks where the image's cells align with that one vector, so the word pairs
    of a caption agree far more often than with the biases at zero."""
    data, cfg = _split(n_images=16), TrainConfig(embed_dim=8)
    zero = mic.untrained_agreement(data, cfg, [0, 1, 2], "zero")
    heads = make_heads(8, 6, 8, 0)
    with torch.no_grad():
        heads.text[2].bias.mul_(50.0)  # the shared vector dominates every word's t
    v = project_images(heads, data.img)
    peaks = [caption_word_maps(heads, v, data.words, i, i, 5).flatten(1).argmax(dim=1) for i in range(16)]
    blind = np.mean([float((p[:, None] == p[None, :]).float().sum() - 5) / 20 for p in peaks])
    assert blind > 0.9 and zero < 0.6, (blind, zero)


def test_choose_init_takes_the_lower_mean_loss_and_keeps_the_first_on_a_tie():
    assert mic.choose_init({"default": [2.8, 2.9], "zero": [2.7, 2.75]}) == "zero"
    assert mic.choose_init({"default": [2.7, 2.9], "zero": [2.9, 2.7]}) == "default"
    with pytest.raises(ValueError, match="at least one census seed"):
        mic.choose_init({"default": [], "zero": [1.0]})


def test_census_trains_each_start_stops_each_seed_at_its_lowest_validation_loss():
    fit, val = _split(n_images=12, seed=0), _split(n_images=8, seed=1)
    data = ma.Splits(fit, val, val)
    cfg = TrainConfig(batch_size=4, embed_dim=8, mask_same_text=True)
    census = mic.run_init_census(data, cfg, 0.01, [5, 6], 3, 2, 0.0, "hull")
    run = ma.train_stacks(fit, val, replace(cfg, bias_init="zero", lr=0.01), [0.01], [5, 6], 3, 2)
    assert census.val_loss["zero"] == [min(run.curves[(0.01, s)]) for s in (5, 6)]
    assert census.best_period["zero"] == [int(np.argmin(run.curves[(0.01, s)])) + 1 for s in (5, 6)]
    assert census.chosen == mic.choose_init(census.val_loss)
    assert set(census.val_pointing) == {"default", "zero"} and all(0 <= a <= 1 for v in census.val_pointing.values() for a in v)
    assert census.below_pointer("zero") == sum(a < census.pointer for a in census.val_pointing["zero"])
    assert census.to_dict()["chosen"] == census.chosen and "bias start chosen" in census.sentence()


def test_a_bad_bias_start_is_named_before_anything_trains():
    assert mic.resolve_bias_init("zero", None) == "zero"
    with pytest.raises(ValueError, match="parameter 'bias_init'"):
        mic.resolve_bias_init("select", None)
    with pytest.raises(ValueError, match="parameter 'bias_init'"):
        mic.resolve_bias_init("zeros", None)
    with pytest.raises(ParameterError, match="bias_init"):
        validate("ch1", {"bias_init": "zeros"})
    with pytest.raises(ParameterError, match="init_census_seeds > 0"):
        validate("ch1", {"bias_init": "select", "init_census_seeds": 0})
    assert validate("ch1", {"bias_init": "zero", "init_census_seeds": 0})["bias_init"] == "zero"


def test_train_more_trains_fresh_seeds_at_the_arms_chosen_point():
    """The grounding test's extra seeds: each is the head train_selected gives a seed outside
    its selection (same lr, same periods), and an arm without a selection is refused."""
    from fgclip.train.selection import SelectionGrid

    fit, val = _split(n_images=12, seed=0), _split(n_images=8, seed=1)
    data, cfg = ma.Splits(fit, val, val), TrainConfig(batch_size=4, embed_dim=8, mask_same_text=True)
    arm, log = ma.Arm("N-Pair MaxImage", cfg), []
    grid = SelectionGrid(lrs=(0.003, 0.01, 0.03), seeds=(0, 1), epochs=3, higher_is_better=False)
    selected = ma.train_logged(arm, data, grid, [0, 1, 2], 2, log)
    more = ma.train_more(arm, data, log, [2], 2)
    assert all(torch.equal(a, b) for a, b in zip(selected[2].state_dict().values(), more[0].state_dict().values()))
    assert ma.train_more(arm, data, log, [], 2) == []
    with pytest.raises(ValueError, match="no selection for arm"):
        ma.train_more(ma.Arm("triplet", cfg), data, log, [2], 2)


def test_train_longer_holds_the_lr_and_stops_at_the_best_mean_validation_period():
    """The budget check: the arm's lr, a longer budget, the period of lowest mean validation
    loss over the selection seeds before an early stop; its selection says whether that period is late; the same
    run's snapshots at the arm's own period are the heads train_selected and train_more give."""
    from fgclip.studies.maximage.replicas import train_stacks
    from fgclip.train.selection import SelectionGrid, stop_epoch

    fit, val = _split(n_images=12, seed=0), _split(n_images=8, seed=1)
    data, cfg = ma.Splits(fit, val, val), TrainConfig(batch_size=4, embed_dim=8, mask_same_text=True)
    arm, log, curves = ma.Arm("N-Pair MaxImage", cfg), [], []
    grid = SelectionGrid(lrs=(0.003, 0.01, 0.03), seeds=(0, 1), epochs=3, higher_is_better=False)
    selected = ma.train_logged(arm, data, grid, [0, 1], 2, log, curves)
    more = ma.train_more(arm, data, log, [2], 2)
    longer = ma.train_longer(arm, data, grid, log, [0, 1, 2], 2, 8, curves)
    long = log[-1]
    assert long.arm == "N-Pair MaxImage, 8 periods" and long.lr == log[0].lr and long.budget == 8 and long.seeds == (0, 1)
    run = train_stacks(fit, val, replace(cfg, lr=long.lr), [long.lr], [0, 1, 2], 8, 2, keep_states=True)
    mean = np.mean([run.curves[(long.lr, s)] for s in (0, 1)], axis=0)
    stop = stop_epoch(-mean, 2)  # the early stopper with a quarter of the 8 periods as patience
    assert long.epochs == int(np.argmin(mean[:stop])) + 1 and long.converged == (long.epochs <= 6)
    assert long.rule == "early-stop"

    def same(xs, ys) -> bool:
        return len(xs) == len(ys) and all(torch.equal(a, b) for h, e in zip(xs, ys)
                                          for a, b in zip(h.state_dict().values(), e.state_dict().values()))
    assert same(longer.heads, run.heads(long.lr, long.epochs)) and (longer.chosen, longer.budget_chosen) == (long.epochs, log[0].epochs)
    assert same(longer.at_budget, selected + more)  # the snapshot at the arm's own period: no second training
    assert [c["arm"] for c in curves] == ["N-Pair MaxImage", "N-Pair MaxImage, 8 periods", "N-Pair MaxImage, more seeds"]
    from fgclip.studies.maximage.init_census import seed_diagnostics
    want = seed_diagnostics(selected, val)  # train_logged records each seed's collapse diagnostics on the validation images
    assert [curves[0]["seeds"][s]["diagnostics"] for s in (0, 1)] == [{n: float(x[k]) for n, x in want.items()} for k in (0, 1)]
    assert list(curves[2]["seeds"]) == [2] and curves[2]["chosen_periods"] == log[0].epochs
    assert len(curves[2]["seeds"][2]["val"]) == log[0].epochs and curves[1]["seeds"][2]["selection"] is False
    with pytest.raises(ValueError, match="more periods than the budget"):
        ma.train_longer(arm, data, grid, log, [0], 2, 3)
    with pytest.raises(ValueError, match="no selection for arm"):
        ma.train_longer(ma.Arm("triplet", cfg), data, grid, log, [0], 2, 8)


def _judge(model_shift: float, noise: float, seed: int = 0):
    from fgclip.studies.maximage import evaluation as ev

    rng = np.random.default_rng(seed)
    n_seeds, n_units = 8, 400
    pointer = np.tile(rng.uniform(0.3, 0.8, n_units), (n_seeds, 1))
    model = np.clip(pointer + model_shift + noise * rng.normal(size=(n_seeds, 1)) + 0.05 * rng.normal(size=pointer.shape), 0, 1)
    shuffled = rng.uniform(0, 1, (n_seeds, n_units))
    scores = {"model": model, "pointer": pointer, "planted": ev.planted_effect_scores(model, pointer, 0.05),
              "shuffled": shuffled, "saliency": shuffled.copy()}
    judge = ev.ArmJudge(scores, {"all": np.ones(n_units, bool)}, np.arange(n_units) // 4, 0, 0.05)
    return ev.grounding_falsification(judge, "model", "pointer", "planted", "shuffled", "saliency")


def test_grounding_sentence_bounds_the_advantage_only_when_both_controls_pass():
    from fgclip.studies.maximage import evaluation as ev

    quiet = _judge(model_shift=-0.01, noise=0.005)  # controls pass, no advantage
    assert quiet.controls_pass and quiet.test.verdict != "A better"
    text = mg.grounding_sentence(quiet)
    assert f"any advantage above {max(quiet.test.ci_high, 0):.3f} is excluded" in text
    assert ("does not beat pointer by the margin" in text) == (quiet.test.ci_high <= 0.05)
    assert text.startswith(f"model vs pointer, {quiet.test.difference:+.3f}")
    noisy = _judge(model_shift=-0.01, noise=0.3)  # the planted effect drowns: the test cannot decide
    assert not noisy.positive_passed
    assert "excluded" not in mg.grounding_sentence(noisy) and "The test:" in mg.grounding_sentence(noisy)


def test_every_grounding_seed_below_a_floor_is_named_with_its_off_object_share():
    from fgclip.studies.maximage import seeds as msd

    hits = np.array([[1, 1, 0, 1], [0, 0, 0, 1], [1, 0, 1, 1]], float)  # seed 11 at 0.25
    off = np.array([[0, 0, 1, 0], [1, 1, 1, 0], [0, 1, 0, 0]], float)
    sal = np.array([[0, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0]], float)  # seed 11's own saliency 0.5
    centre = np.full((3, 4), 0.3)
    rows, text = msd.seeds_below_sentence("arm", [10, 11, 12], hits, off, {"centre point": centre, "saliency": sal})
    assert [r["seed"] for r in rows] == [11] and rows[0]["off objects"] == 0.75
    assert rows[0]["floors"] == {"centre point": 0.3, "saliency": 0.5}
    assert "1 of the 3 seeds of arm below a floor: seed 11 (0.250, below centre point 0.300 and saliency 0.500" in text
    assert "the seeds above the floors 25% off" in text and "seed 11 settles on background" in text
    assert rows[0]["settles on background"] and rows[0]["cause"] == "outlier"
    assert "an outlier (at least the margin 0.05 below its arm's typical seed against every floor it is below: its other " \
           "seeds clear saliency by 0.500 at the median, gaps +0.500 to +0.500): its points settle on background " \
           "(why is not read))" in text
    _, text = msd.seeds_below_sentence("arm", [10, 11, 12], hits, off[[1, 0, 2]], {"centre point": centre})
    assert "): no mechanism read)" in text and "settles on" not in text
    rows, text = msd.seeds_below_sentence("arm", [10, 11, 12], hits, off, {"centre point": np.full((3, 4), 0.8)})
    assert [r["cause"] for r in rows] == ["the arm as trained"] * 3  # its typical seed is below the floor too: the arm's
    assert text.count("cause: the arm as trained, not the seed") == 3
    # 50 points further off than the others: settles at a margin of 0.05, not at one of 0.6
    assert "settles on background" not in msd.seeds_below_sentence("arm", [10, 11, 12], hits, off, {"c": centre}, by=0.6)[1]
    curves = [{"arm": "arm", "chosen_periods": 2, "seeds": {"10": {"val": [3.0, 2.0]}, "11": {"val": [3.0, 2.5]}}},
              {"arm": "arm, more seeds", "chosen_periods": 2, "seeds": {"12": {"val": [3.0, 2.1]}}}]
    rows, text = msd.seeds_below_sentence("arm", [10, 11, 12], hits, off, {"c": centre}, curves=curves)
    assert rows[0]["validation loss"] == 2.5 and "validation loss 2.500" in text
    assert "(validation loss 2.000-2.100)" in text
    none, text = msd.seeds_below_sentence("arm", [10, 12], hits[[0, 2]], off[[0, 2]], {"saliency": sal[[0, 2]]})
    assert none == [] and text.startswith("none of the 2 seeds")
    with pytest.raises(ValueError, match="one row per seed"):
        msd.seeds_below_sentence("arm", [10, 11], hits, off, {"saliency": sal})


def test_a_detected_centre_prior_is_named_a_prior_not_a_merit():
    from fgclip import verdicts
    from fgclip.studies.maximage import bias as mb

    rng = np.random.default_rng(0)
    base = rng.uniform(0, 1, (6, 300)) < 0.1
    biased = base + 0.2  # centre shares well above the bias-0 model's
    v = lambda a, b: verdicts.compare(a, b, claim="c", arms=("trained at bias 0.9", "trained at bias 0.0"),  # noqa: E731
                                      unit="phrases", clusters=np.arange(300) // 3, cluster_unit="images", margin=0.05)
    f = verdicts.falsify(v(biased, base), v(base + 0.2, base), v(base.astype(float), base.astype(float) + 1e-3))
    assert f.controls_pass and f.test.verdict == verdicts.A_BETTER
    text = mb.centre_prior_sentence(f)
    assert "**centre prior detected**" in text and "better**" not in text and "at least the margin" in text


def test_table_seeds_below_a_floor_without_an_arm_are_named_without_a_cause():
    import matplotlib
    matplotlib.use("Agg")
    from fgclip.studies.maximage import seeds as msd
    from fgclip.viz.selection import plot_seed_curves

    rows = [{"train_bias": 0.0, "seed": 4, "model": 0.2, "centre point": 0.3},
            {"train_bias": 0.9, "seed": 4, "model": 0.5, "centre point": 0.3}]
    out, text = msd.records_below(rows, "bias {train_bias} seed {seed}", "model", {"centre point": "centre point",
                                                                                     "random point": 0.1})
    assert out == [{"seed of": "bias 0.0 seed 4", "value": 0.2, "floors": {"centre point": 0.3}}]
    assert text == "1 below a floor: bias 0.0 seed 4 (0.200, below centre point 0.300); where their points land was not read"
    assert msd.records_below(rows[1:], "{seed}", "model", {"c": "centre point"})[1] == "no seed is below c"
    rec = {"arm": "a", "lr": 0.1, "chosen_periods": 2, "seeds": {"0": {"val": [3.0, 2.0, 2.5]}, "7": {"val": [3.0, 2.9, 2.8]}}}
    fig = plot_seed_curves([rec], highlight=[7])
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["seed 7"]


def test_bias_and_batch_seeds_are_read_against_their_own_floors():
    from fgclip.studies.maximage import seeds as msd

    import pandas as pd
    from fgclip.studies.maximage.bias import BiasSweep

    def sweep_of(rows, rep=None):
        return BiasSweep(pd.DataFrame(rows), {}, {}, None, None, [], None, None if rep is None else pd.DataFrame(rep))
    sal = "caption-blind saliency"
    sweep = sweep_of([{"train_bias": 0.0, "seed": 4, "model": 0.2, "centre point": 0.3, sal: 0.1}],
                     [{"train_bias": 0.0, "seed": 9, "model": 0.35, "centre point": 0.3, sal: 0.4}])  # the replicate's seed 9
    dot = sweep_of([{"train_bias": 0.0, "seed": 4, "model": 0.017, "centre point": 0.3, sal: 0.01}])
    batch = [{"batch_size": 8, "seed": 4, "pointing": 0.031, sal: 0.2}, {"batch_size": 64, "seed": 4, "pointing": 0.5, sal: 0.6}]
    rows, text = msd.bias_and_batch_below(sweep, dot, batch, centre=0.41, random=0.1)
    assert [r["seed of"] for r in rows] == ["bias 0.0 seed 4", "bias 0.0, fresh seeds seed 9", "bias 0.0, dot score seed 4",
                                            "B=8 seed 4", "B=64 seed 4"]
    assert rows[1]["floors"] == {"its own caption-blind saliency": 0.4}  # above its world's centre point, below its own saliency
    assert rows[3]["floors"] == {"centre point": 0.41, "random point": 0.1, "its own caption-blind saliency": 0.2}
    assert rows[4]["floors"] == {"its own caption-blind saliency": 0.6}
    assert text.startswith("seeds of the centre-bias arms: 3 below a floor") and "; of the batch-size arms: 2 below" in text
    rows, _ = msd.bias_and_batch_below(None, None, [{k: v for k, v in r.items() if k != sal} for r in batch], 0.41, 0.1)
    assert [r["floors"] for r in rows] == [{"centre point": 0.41, "random point": 0.1}]  # no saliency column: that floor is not read


def test_table_seeds_below_get_their_arms_off_object_reading_when_it_was_read():
    from fgclip.studies.maximage import seeds as msd

    batch = [{"batch_size": 8, "seed": s, "pointing": p, "off objects": o}
             for s, p, o in ((0, 0.5, 0.2), (1, 0.03, 0.9), (2, 0.45, 0.25))]
    rows, text = msd.records_below(batch, "B={batch_size} seed {seed}", "pointing", {"centre point": 0.41}, "B={batch_size}")
    assert [r["seed of"] for r in rows] == ["B=8 seed 1"] and rows[0]["off objects"] == 0.9
    assert "90% of its points off every object, its arm's seeds above the floors 20%-25%; an outlier (at least the margin " \
           "0.05 below its arm's typical seed against every floor it is below: its other seeds clear centre point by 0.065 " \
           "at the median, gaps +0.040 to +0.090): its points settle on background (why is not read))" in text
    assert rows[0]["cause"] == "outlier"
    rows, text = msd.records_below(batch, "B={batch_size} seed {seed}", "pointing", {"centre point": 0.41}, "B={batch_size}",
                                   val={"B=8": {0: 2.0, 1: 2.05, 2: 2.1}})
    assert rows[0]["validation loss"] == 2.05
    assert ("; validation loss 2.050, its arm's other seeds 2.000-2.100: it ranks as well as its arm's typical seed (validation "
            "loss at or below their median, 2.050), so the retrieval loss did not prefer its arm's solution to this one on "
            "background)") in text
    assert rows[0]["settles on background"] and "why it does is not established here" in text
    batch.append({"batch_size": 8, "seed": 3, "pointing": 0.3, "off objects": 0.1})  # low, yet less off than seed 0
    rows, text = msd.records_below(batch, "B={batch_size} seed {seed}", "pointing", {"centre point": 0.41}, "B={batch_size}")
    assert [r["settles on background"] for r in rows] == [True, False]  # read seed by seed, not all-or-nothing per arm
    assert [r["cause"] for r in rows] == ["outlier", "outlier"]  # both a margin below the arm's typical seed (median +0.040)
    batch[0]["pointing"], batch[-1]["pointing"] = 0.43, 0.405  # seed 3 typical, in an arm whose typical seeds clear it by 0.030
    rows, text = msd.records_below(batch, "B={batch_size} seed {seed}", "pointing", {"centre point": 0.41}, "B={batch_size}",
                                   caveats={"B=8": "lr at the grid's smallest end"})
    assert [r["cause"] for r in rows] == ["outlier", "the arm as trained"]
    assert "B=8 seed 3 (0.405, below centre point 0.410; 10% of its points off every object, its arm's seeds above the " \
           "floors 20%-25%; cause: the arm as trained, not the seed (its arm's typical other seeds clear centre point by " \
           "0.030 on average (+0.020 at the median), gaps -0.380 to +0.040; the arm clears it by less than the margin 0.05; the arm's selection: " \
           "lr at the grid's smallest end, so its design and its training cannot be told apart here); no mechanism of its " \
           "own read)" in text


def _shifted(seed: int, arm: str):
    """v(shift, name): a verdict of ``arm`` against ``name`` on pointing scores moved by ``shift``
    over a common base (5 seeds, 200 phrases in 40 images), margin 0.05."""
    from fgclip import verdicts

    rng = np.random.default_rng(seed)
    base = rng.uniform(0.3, 0.7, (5, 200))

    def v(shift: float, name: str) -> verdicts.Verdict:
        return verdicts.compare(np.clip(base + shift + 0.01 * rng.normal(size=base.shape), 0, 1), base, claim="c",
                                arms=(arm, name), unit="phrases", clusters=np.arange(200) % 40, seed=0, margin=0.05)
    return v


def test_budget_sentence_reads_the_longer_run_against_the_main_arm_first():
    from fgclip import verdicts

    v = _shifted(0, "long")
    test = verdicts.falsify(v(0.1, "object pointer"), v(0.15, "object pointer"), v(0.0, "saliency"))
    better = mg.budget_sentence(v(0.2, "main"), test, 18)
    assert "more training raises pointing" in better and "still learning at the book's budget of 18 periods" in better
    assert f"The grounding test of the longer run: {mg.grounding_sentence(test)} Its power check:" in better
    assert "gives the same pointing within the margin" in mg.budget_sentence(v(0.0, "main"), test, 18)
    assert "Together: with more training long beats object pointer" in better and "Its power check: half-width" in better  # both controls pass, the test fires
    undecided = verdicts.falsify(v(0.1, "o"), v(0.0, "o"), v(0.0, "s"))  # the planted control does not fire
    assert "stays open here: the bound at the book's budget is of heads still learning" in mg.budget_sentence(v(0.2, "main"), undecided, 18)
    assert "still learning" not in mg.budget_sentence(v(0.02, "main"), undecided, 18).split("Together:")[1]
    moved = mg.budget_sentence(v(0.2, "main"), test, 18, ([0, 1], np.array([0.5, 0.44]), np.array([0.5, 0.36])))
    assert "seed 1 moves 0.440 -> 0.360, so where a seed ends is not fixed by its start alone" in moved
    still = mg.budget_sentence(v(0.2, "main"), test, 18, ([0, 1], np.array([0.5, 0.44]), np.array([0.5, 0.44])))
    assert "no seed moves: rounding changed nothing here" in still and "not fixed by its start" not in still
    assert mg.budget_sentence(None, None, 18) == "not run with these parameters"


def test_word_agreement_matches_the_census_measure_and_reads_a_collapse():
    """The all-captions-at-once measure equals a caption-by-caption count over each caption's
    word maps (caption_word_maps), and untrained_agreement is its mean over the seeds' starts;
    heads whose word branch outputs one vector for every word put every pair on one cell
    (1.0); dead units count hidden units never positive."""
    data = _split(n_images=8, seed=0)
    cfg = TrainConfig(embed_dim=8)

    def by_caption(heads) -> float:
        v, shares = project_images(heads, data.img), []
        for c, image in enumerate(data.corpus.caption_image):
            n = len(data.corpus.captions[c])
            peak = caption_word_maps(heads, v, data.words, image, c, n).flatten(1).argmax(dim=1)
            shares.append(float(((peak[:, None] == peak[None, :]).float().sum() - n) / (n * (n - 1))))
        return float(np.mean(shares))
    starts = [make_heads(data.img.shape[1], data.words.dim, 8, s, "cosine", "default") for s in (0, 1)]
    for heads in starts:
        assert mic.word_agreement(heads, data) == pytest.approx(by_caption(heads))
    assert mic.untrained_agreement(data, cfg, [0, 1], "default") == pytest.approx(np.mean([by_caption(h) for h in starts]))
    collapsed = make_heads(data.img.shape[1], data.words.dim, 8, 0, "cosine", "zero")
    with torch.no_grad():
        collapsed.text[2].weight.zero_()
        collapsed.text[2].bias.fill_(1.0)  # every word the same vector: one map for all
    assert mic.word_agreement(collapsed, data) == 1.0
    with torch.no_grad():
        collapsed.image[0].bias.fill_(-1e6)  # every image unit's pre-activation negative
    assert mic.dead_units(collapsed, data) == pytest.approx(0.5)  # image units dead, word units not
    diag = mic.seed_diagnostics([collapsed, make_heads(data.img.shape[1], data.words.dim, 8, 1)], data)
    assert diag["word pairs on one cell"][0] == 1.0 and diag["dead hidden units"].shape == (2,)


def test_seeds_below_get_the_diagnostics_beside_the_seeds_above_the_floors():
    from fgclip.studies.maximage import seeds as msd

    hits = np.array([[1, 1, 0, 1], [0, 0, 0, 1], [1, 0, 1, 1]], float)  # seed 11 below the centre point
    off = np.zeros((3, 4))
    rows, text = msd.seeds_below_sentence("arm", [10, 11, 12], hits, off, {"centre point": np.full((3, 4), 0.3)},
                                          diagnostics={"word pairs on one cell": np.array([0.2, 0.9, 0.3])})
    assert rows[0]["word pairs on one cell"] == 0.9
    assert "word pairs on one cell 90% (seeds above the floors 20%-30%); an outlier" in text
    assert "gaps +0.450 to +0.450): word pairs on one cell 90%, beyond every seed above the floors)" in text
    assert rows[0]["cause"] == "outlier"
    _, text = msd.seeds_below_sentence("arm", [10, 11, 12], hits, off, {"centre point": np.full((3, 4), 0.3)},
                                       diagnostics={"word pairs on one cell": np.array([0.2, 0.33, 0.3])})
    # 3 points above the others is within the share margin: no mechanism, and the chapter says what was ruled out
    assert "): neither word pairs on one cell sets it apart from the seeds above the floors)" in text


def test_bias_and_batch_seeds_carry_their_selections_caveats():
    from fgclip.studies.maximage import seeds as msd

    import pandas as pd
    from fgclip.studies.maximage.bias import BiasSweep

    def sweep_of(rows):
        return BiasSweep(pd.DataFrame(rows), {}, {}, None, None, [], None, None)
    rows = [{"train_bias": 0.9, "seed": s, "model": m, "centre point": 0.6} for s, m in ((0, 0.55), (1, 0.57), (2, 0.58))]
    caveats = {"trained at bias 0.9": "lr at the grid's largest end", "N-Pair, dot score, trained at bias 0.9": "dot's caveat"}
    _, text = msd.bias_and_batch_below(sweep_of(rows), sweep_of(rows), [], 0.41, 0.1, caveats=caveats)
    assert text.count("the arm's selection: lr at the grid's largest end") == 3  # the cosine sweep's three seeds
    assert text.count("the arm's selection: dot's caveat") == 3  # the dot sweep's, found under its own selection name


def test_the_grounding_item_says_when_the_budget_check_reverses_it():
    """The box's grounding item at the book's budget: when more training raised pointing and the
    longer run's test (controls passing) concludes otherwise, it says so first, with that
    conclusion; when it agrees, or without a budget check, it does not claim a reversal."""
    from fgclip import verdicts

    v = _shifted(1, "main")
    at_budget = verdicts.falsify(v(0.0, "object pointer"), v(0.1, "object pointer"), v(0.0, "saliency"))
    longer = verdicts.falsify(v(0.1, "object pointer"), v(0.15, "object pointer"), v(0.0, "saliency"))
    assert at_budget.conclusion == "equivalent within ±0.05" and longer.conclusion == "main better"
    text = mg.grounding_at_budget(at_budget, 18, v(0.2, "main at its budget"), longer)
    assert "the budget check reverses what they conclude" in text and "concludes **main better**" in text
    assert text.endswith(mg.grounding_sentence(at_budget))
    same = mg.grounding_at_budget(at_budget, 18, v(0.2, "main at its budget"), at_budget)
    assert "reverses" not in same and same.endswith(mg.grounding_sentence(at_budget))
    flat = mg.grounding_at_budget(at_budget, 18, v(0.0, "main at its budget"), longer)  # more training changed nothing
    assert "reverses" not in flat
    assert mg.grounding_at_budget(at_budget, 18) == f"The heads at the book's budget of 18 periods: {mg.grounding_sentence(at_budget)}"
