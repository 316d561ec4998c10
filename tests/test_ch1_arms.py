"""Chapter 1's arms, verdict helper, parse-mode choice, centre-bias sweep and split figures:
the library code the chapter calls instead of writing it inline."""
from dataclasses import FrozenInstanceError, fields
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from fgclip import verdicts  # noqa: E402
from fgclip.studies.maximage import arms as ma, bias as mb, evaluation as ev  # noqa: E402
from fgclip.studies.maximage.data import Corpus, PhraseItem, Split, WordBank  # noqa: E402
from fgclip.studies.maximage.heads import TrainConfig, make_heads  # noqa: E402


def _split(n_images: int = 8, seed: int = 0) -> Split:
    """n 40x40 images, each with two objects (top-left A, bottom-right B) and one caption of
    5 words naming both ("a star and a moon"); random 8x4x4 features, 6-d word features."""
    a, b = (0.0, 0.0, 10.0, 10.0), (20.0, 20.0, 40.0, 40.0)
    phrases = [p for i in range(n_images) for p in (PhraseItem(i, i, (0, 2), "a star", [a], False),
                                                     PhraseItem(i, i, (3, 5), "a moon", [b], True))]
    corpus = Corpus([Path(f"{i}.jpg") for i in range(n_images)], [(40, 40)] * n_images,
                    [["a", "star", "and", "a", "moon"]] * n_images, list(range(n_images)), phrases,
                    [[a, b]] * n_images)
    g = torch.Generator().manual_seed(seed)
    words = torch.randn(n_images, 5, 6, generator=g)
    return Split(corpus, np.zeros((n_images, 40, 40, 3), np.uint8), torch.randn(n_images, 8, 4, 4, generator=g),
                 WordBank.from_dense(words, torch.ones(n_images, 5, dtype=torch.bool)), list(range(n_images)))


def _params(heads) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in heads.parameters()])


BASE = TrainConfig(epochs=2, batch_size=4, embed_dim=8, mask_same_text=True)


def test_each_variant_changes_one_field_of_the_base_config():
    arms = ma.chapter_arms(BASE)
    assert [a.name for a in arms.all()] == [
        "N-Pair MaxImage", "triplet (hardest)", "N-Pair average pooling", "N-Pair, same-text negatives kept",
        "N-Pair, dot score", "N-Pair, shuffled captions", "untrained heads"]
    for arm in arms.variants:
        changed = [f.name for f in fields(TrainConfig) if getattr(arm.cfg, f.name) != getattr(BASE, f.name)]
        assert len(changed) == 1, (arm.name, changed)
    assert arms.main.cfg == arms.shuffled.cfg == arms.untrained.cfg == BASE
    assert len({a: 0 for a in arms.all()}) == 7  # hashable: the chapter keys heads by arm
    with pytest.raises(FrozenInstanceError):
        BASE.seed = 3
    assert ma.arm_table(arms.all())["captions"].tolist().count("shuffled") == 1


def test_train_arm_is_seeded_and_its_controls_differ_from_the_main_arm():
    data, arms = _split(), ma.chapter_arms(BASE)
    main = ma.train_arm(arms.main, data, [0, 1])
    again = ma.train_arm(arms.main, data, [0, 1])
    assert len(main) == 2 and torch.equal(_params(main[0]), _params(again[0]))
    assert not torch.equal(_params(main[0]), _params(main[1]))
    untrained = ma.train_arm(arms.untrained, data, [1])[0]
    assert torch.equal(_params(untrained), _params(make_heads(8, 6, 8, 1)))
    shuffled = ma.train_arm(arms.shuffled, data, [0])[0]
    assert not torch.equal(_params(shuffled), _params(main[0]))  # other caption -> image links


def test_load_splits_holds_out_the_last_training_images(tmp_path):
    from fgclip.models import create_clip
    from fgclip.toyworld import ToyWorldConfig, generate
    from fgclip.toyworld.export import export_flickr30k_entities

    for split, n in (("train", 6), ("test", 3)):
        export_flickr30k_entities(generate(ToyWorldConfig(), n, seed=0, split=split), tmp_path, split)
    clip = create_clip("toy-vit", pretrained="toy")
    data = ma.load_splits(clip, tmp_path, "train", "test", 6, 2, 3, "contextual")
    assert data.sizes() == {"fit": 4, "val": 2, "test": 3}
    assert data.val.corpus.image_paths == ma.load_splits(clip, tmp_path, "train", "test", 6, 2, 1,
                                                         "contextual").val.corpus.image_paths
    with pytest.raises(ValueError, match="n_val=5"):
        ma.load_splits(clip, tmp_path, "train", "test", 6, 5, 3, "contextual")
    # the figures on a split: one panel per word, and a widget that redraws
    from fgclip.studies.maximage.heads import project_images
    from fgclip.studies.maximage.figures import plot_caption_maps, split_caption_widget

    heads = make_heads(data.test.img.shape[1], data.test.words.dim, 8, 0)
    v = project_images(heads, data.test.img)
    fig = plot_caption_maps(heads, v, data.test, 0)
    assert len([ax for ax in fig.axes if ax.get_title()]) == len(data.test.corpus.captions[0])
    w = split_caption_widget(clip, heads, v, data.test, [0, 1], "contextual")
    w.redraw()
    w.controls["typed"].value = "a red star"
    assert w.n_draws == 2 and "a red star" in w.figure.texts[0].get_text()
    plt.close("all")


def test_arm_judge_is_verdicts_compare_on_a_stratum():
    rng = np.random.default_rng(0)
    a, b = rng.random((3, 40)), rng.random((3, 40)) * 0.5
    images, half = np.repeat(np.arange(20), 2), np.arange(40) < 20
    judge = ev.ArmJudge({"A": a, "B": b}, {"all": np.ones(40, bool), "half": half}, images, seed=0, margin=0.05)
    v = judge("A", "B", "A vs B", "half")
    ref = verdicts.compare(a[:, half], b[:, half], claim="A vs B (half phrases)", arms=("A", "B"),
                           unit="phrases", clusters=images[half], cluster_unit="images", seed=0, margin=0.05)
    assert v == ref and judge("A", "B", "A vs B").claim == "A vs B"
    assert v.to_dict()["cluster_unit"] == "images" and v.to_dict()["margin"] == 0.05
    assert judge.paired("A", "B", "c", a, b, images, unit="pairs").unit == "pairs"


def test_parse_choice_selectivity_and_planted_effect_on_a_hand_made_split():
    data = _split(4)
    keep = ev.evaluated(data, 0.05, "hull")
    heads = [make_heads(8, 6, 8, s) for s in (0, 1)]
    parse, acc = ev.choose_parse_mode(heads, data, ["vector", "maps"], 0.05, "hull")
    assert parse == max(acc, key=acc.get) and set(acc) == {"vector", "maps"}
    with pytest.raises(ValueError, match="parse_modes"):
        ev.choose_parse_mode(heads, data, [], 0.05, "hull")
    pairs = [(2 * i, 2 * i + 1) for i in range(4)]
    assert ev.selectivity_scores(heads, data, pairs).shape == (2, 4)
    assert ev.pair_images(data, pairs).tolist() == [0, 1, 2, 3]
    # the planted arm is the model's own scores moved by one constant: mean = pointer's + effect
    model, pointer = ev.arm_scores(heads, data, keep), np.tile(ev.object_pointer_expectation(data, keep), (2, 1))
    planted = ev.planted_effect_scores(model, pointer, 0.05)
    assert planted.mean() == pytest.approx(pointer.mean() + 0.05)
    assert np.allclose(planted - model, planted[0, 0] - model[0, 0])
    frame = ev.seed_frame({"x": np.array([[1.0, 0.0] * 4, [1.0] * 8])}, [0, 1],
                          {"all": np.ones(8, bool), "odd": np.arange(8) % 2 == 1})
    assert frame[["all", "odd"]].values.tolist() == [[0.5, 0.0], [1.0, 1.0]]


def test_centre_bias_sweep_and_its_verdicts():
    worlds = {0.0: _split(6, 0), 0.5: _split(6, 1)}
    heads = {0.0: [make_heads(8, 6, 8, s) for s in (0, 1, 2, 3)],  # seeds 2, 3: the fresh-seed replicate
             0.5: [make_heads(8, 6, 8, s) for s in (0, 1)]}
    sweep = mb.centre_bias_sweep([0.5, 0.0], lambda b: (worlds[b], heads[b]), [0, 1], 0.05, "hull", "vector")
    assert sweep.table["train_bias"].tolist() == [0.0, 0.0, 0.5, 0.5]  # sorted: bias 0 first
    assert sweep.zero is worlds[0.0] and sweep.on_zero[0.5].shape == sweep.share_zero[0.0].shape == (2, 12)
    assert sweep.replicate_share.shape == (2, 12)
    rep = sweep.replicate_table  # the replicate's own pointing, floors and centre share, at seeds 2 and 3
    assert rep["seed"].tolist() == mb.replicate_seeds([0, 1]) == [2, 3]
    assert np.allclose(rep["centre-cell share on bias-0 test"], sweep.replicate_share.mean(axis=1))
    assert {"model", "caption-blind saliency", "off objects", "centre point"} <= set(rep.columns)
    with pytest.raises(ValueError, match="expected 2 or 4"):
        mb.centre_bias_sweep([0.0], lambda b: (worlds[b], heads[b][:3]), [0, 1], 0.05, "hull", "vector")
    cross, test = mb.bias_verdicts(sweep, seed=0, margin=0.05, share_margin=0.05)
    assert [v.arms for v in cross] == [("trained at bias 0.5", "trained at bias 0.0")]
    assert test.test.arms == ("trained at bias 0.5", "trained at bias 0.0") and test.positive.claim == "planted centre prior"
    assert test.positive.arms[0] == "trained at bias 0.5, re-centred a margin above bias 0.0"  # what the plant is made of
    assert test.negative.arms == ("bias 0, fresh seeds", "trained at bias 0.0") and test.negative.margin == 0.05
    with pytest.raises(ValueError, match="0.0"):
        mb.centre_bias_sweep([0.5], lambda b: (worlds[b], heads[b]), [0, 1], 0.05, "hull", "vector")
    empty = mb.centre_bias_sweep([], None, [0, 1], 0.05, "hull", "vector")
    with pytest.raises(ValueError, match="did not run"):
        mb.bias_verdicts(empty, seed=0, margin=0.05, share_margin=0.05)


def test_train_selected_chooses_on_validation_and_trains_fresh_seeds_at_the_choice():
    from fgclip.train.selection import SelectionGrid

    data = ma.Splits(_split(8, 0), _split(4, 1), _split(4, 2))
    arms = ma.chapter_arms(BASE)
    grid = SelectionGrid(lrs=(1e-3, 3e-3, 1e-2), seeds=(0, 1), epochs=3, higher_is_better=False)
    period = ma.pass_steps(data, 4)
    assert period == 2
    heads, sel, rec = ma.train_selected(arms.main, data, grid, [0, 1, 2], period)
    assert rec["arm"] == sel.arm and rec["lr"] == sel.lr and rec["chosen_periods"] == sel.epochs
    assert [len(rec["seeds"][s]["val"]) for s in (0, 1, 2)] == [3, 3, sel.epochs]  # fresh seeds: curves too
    assert all(len(c["train"]) == len(c["val"]) for c in rec["seeds"].values())
    assert [c["selection"] for c in rec["seeds"].values()] == [True, True, False]
    # a fresh seed follows the run it would have had as a selection seed (no head, lr or batches carried over)
    from fgclip.studies.maximage import replicas as rp
    as_sel = rp.train_stacks(data.fit, data.val, BASE, grid.lrs, (0, 2), sel.epochs, period)
    np.testing.assert_allclose(as_sel.curves[(sel.lr, 2)], rec["seeds"][2]["val"], rtol=1e-3)
    torch.testing.assert_close(_params(as_sel.heads(sel.lr)[1]), _params(heads[2]), rtol=1e-3, atol=1e-4)
    assert len(heads) == 3 and sel.arm == "N-Pair MaxImage" and sel.lr in grid.lrs and 1 <= sel.epochs <= 3
    assert set(sel.curves) == set(grid.lrs) and all(len(c) == 2 and len(c[0]) == 3 for c in sel.curves.values())
    assert sel.score == pytest.approx(min(np.mean(c, axis=0).min() for c in sel.curves.values()))
    assert not torch.equal(_params(heads[0]), _params(heads[2]))
    untrained, none, no_curves = ma.train_selected(arms.untrained, data, grid, [1], period)
    assert none is None and no_curves is None and torch.equal(_params(untrained[0]), _params(make_heads(8, 6, 8, 1)))
    table = ma.selection_table("vector", {"vector": 0.5}, 4, BASE, 0.05, "hull", 0.25, [sel], period)
    assert table["hyperparameter"].tolist()[0] == "lr, periods: N-Pair MaxImage"
    with pytest.raises(ValueError, match="higher_is_better"):
        ma.train_selected(arms.main, data, SelectionGrid(seeds=(0, 1), epochs=2), [0, 1], period)


def test_stacked_replicas_follow_the_run_each_would_take_alone():
    from dataclasses import replace

    from fgclip.studies.maximage import replicas as rp
    from fgclip.studies.maximage.heads import train_heads

    data = _split(8, 0)
    cfg = replace(BASE, loss="triplet-hardest", mask_same_text=False)
    run = rp.train_stacks(data, None, cfg, [1e-3, 1e-2], [0, 1], 2, rp.steps_per_pass(8, 4))
    for j, s in enumerate((0, 1)):
        alone, _ = train_heads(data.img, data.words, None, data.corpus.caption_image, replace(cfg, seed=s, lr=1e-2))
        for a, b in zip(alone.state_dict().values(), run.heads(1e-2)[j].state_dict().values()):
            torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4)


def test_convergence_sentence_names_late_arms_with_their_last_third_drop():
    from fgclip.train.selection import Selection

    flat = Selection("flat", 0.01, 6, 1.0, {0.01: [[2.0, 1.5, 1.2, 1.0, 1.0, 0.99], [2.0, 1.5, 1.2, 1.0, 1.0, 0.99]]},
                     (0, 1), 6, converged=False)
    falling = Selection("falling", 0.01, 6, 1.0, {0.01: [[4.0, 3.0, 2.0, 2.0, 1.5, 1.0]]}, (0,), 6, converged=False)
    done = Selection("done", 0.01, 3, 1.0, {0.01: [[3.0, 2.0, 1.0, 1.5, 1.6, 1.7]]}, (0,), 6)
    text = ma.convergence_sentence([flat, None, falling, done], 6)
    # last third of 6 periods = 2: flat 1.0 -> 0.99 (1.0%), falling 2.0 -> 1.0 (50.0%)
    assert text.split("; lr at an end")[0] == ("not converged within the budget (6 periods unless said): flat (down 1.0% over the last 2 periods), "
                    "falling (down 50.0% over the last 2 periods) (of 3 trained arms)")
    assert ma.convergence_sentence([done], 6).endswith(": none (of 1 trained arms); lr at an end of the grid, so a value "
                                                       "beyond it might have done better: none")
    edge = Selection("edge", 0.03, 3, 1.0, {0.03: [[3.0, 2.0, 1.0, 1.5, 1.6, 1.7]]}, (0,), 6, lr_edge="largest")
    assert ma.convergence_sentence([done, edge], 6).endswith("might have done better: edge (0.03, the largest)")
    with pytest.raises(ValueError, match="budget"):
        ma.convergence_sentence([done], 1)


def test_stacks_in_chunks_join_into_the_run_of_one_stack():
    from dataclasses import replace

    from fgclip.studies.maximage import replicas as rp

    data = _split(8, 0)
    cfg = replace(BASE, loss="triplet-hardest", mask_same_text=False)
    args = (data, data, cfg, [1e-3, 1e-2], [0, 1, 2], 3, rp.steps_per_pass(8, 4))
    whole = rp.train_stacks(*args, keep_states=True, stack_size=3)
    parts = rp.train_stacks(*args, keep_states=True, stack_size=2)  # chunks (0, 1) and (2,)
    assert parts.seeds == whole.seeds == (0, 1, 2) and parts.curves.keys() == whole.curves.keys()
    for key in whole.curves:
        np.testing.assert_allclose(parts.curves[key], whole.curves[key], rtol=1e-4)
        np.testing.assert_allclose(parts.train_curves[key], whole.train_curves[key], rtol=1e-4)
    for period in (2, None):
        for a, b in zip(parts.heads(1e-2, period), whole.heads(1e-2, period)):
            for x, y in zip(a.state_dict().values(), b.state_dict().values()):
                torch.testing.assert_close(x, y, rtol=1e-3, atol=1e-5)
    assert [r["loss"] for r in parts.history] == pytest.approx([r["loss"] for r in whole.history], rel=1e-4)
    with pytest.raises(ValueError, match="stack_size"):
        rp.train_stacks(*args, stack_size=0)
