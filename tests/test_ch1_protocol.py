"""Chapter 1's protocol pieces: caption-blind floors, false-negative masks, equal-step
training, the dot score, the hull filter, truncation of long captions, the planted arms."""
from pathlib import Path

import numpy as np
import pytest
import torch

from fgclip import verdicts
from fgclip.losses.ranking import npair_loss, same_text_mask, triplet_loss
from fgclip.methods.maximage import MaxImageHeads, phrase_map
from fgclip.metrics.pointing import box_coverage, hull_coverage, phrase_pointing
from fgclip.studies.maximage import evaluation as ev, grounding as mg
from fgclip.studies.maximage.data import Corpus, PhraseItem, Split, WordBank, subset_split, text_ids
from fgclip.studies.maximage.heads import TrainConfig, phrase_heats, project_images, train_heads

S = torch.tensor([[0.9, 0.5, 0.1],
                  [0.6, 0.4, 0.3],
                  [0.2, 0.8, 0.7]])


def test_same_text_mask_removes_exactly_the_false_negatives():
    same = same_text_mask(torch.tensor([5, 7, 5]))
    assert same.tolist() == [[False, False, True], [False, False, False], [True, False, False]]
    # with captions 0 and 2 reading the same, the loss is the one of the 2x2 problems left
    sub_rows = npair_loss(S, 1.0, same)
    by_hand = 0.0
    for i, negs in ((0, [1]), (1, [0, 2]), (2, [1])):
        row = sum(float(np.exp(S[i, j] - S[i, i])) for j in negs)
        col = sum(float(np.exp(S[j, i] - S[i, i])) for j in negs)
        by_hand += np.log1p(row) + np.log1p(col)
    assert sub_rows.item() == pytest.approx(float(by_hand) / 6, rel=1e-5)
    assert npair_loss(S, 1.0, torch.zeros(3, 3, dtype=torch.bool)).item() == \
        pytest.approx(npair_loss(S, 1.0).item())
    # hardest triplet: image 2's hardest negative was caption 1 (0.8) either way; image 0's
    # candidates shrink to caption 1; an anchor with no negative left contributes 0
    all_same = same_text_mask(torch.tensor([1, 1, 1]))
    assert triplet_loss(S, 0.2, "hardest", all_same).item() == 0.0
    assert triplet_loss(S, 0.2, "semi-hard", all_same).item() == 0.0
    with pytest.raises(ValueError, match="same"):
        npair_loss(S, 1.0, torch.zeros(2, 2, dtype=torch.bool))


def test_text_ids_ignore_case():
    assert text_ids([["A", "star"], ["a", "star"], ["a", "moon"]]) == [0, 0, 1]


def _planted(n, k, seed):
    g = torch.Generator().manual_seed(seed)
    img = torch.nn.functional.normalize(torch.randn(n, 8, 4, 4, generator=g), dim=1)
    labels = torch.randint(k, (n,), generator=g)
    words = torch.nn.functional.one_hot(labels, k).float()[:, None, :]
    return img, words, torch.ones(n, 1, dtype=torch.bool), labels


def test_equal_steps_masking_and_dot_score_train():
    img, words, mask, labels = _planted(40, 4, 0)
    cfg = TrainConfig(epochs=50, batch_size=8, embed_dim=8, steps=7)
    heads, history = train_heads(img, words, mask, list(range(40)), cfg)
    assert len(history) == 2  # 5 batches per pass: 7 steps need 2 passes
    dot = TrainConfig(epochs=1, batch_size=8, embed_dim=8, score="dot", mask_same_text=True)
    heads, history = train_heads(img, words, mask, list(range(40)), dot, labels.tolist())
    assert heads.score == "dot" and all(np.isfinite(h["loss"]) for h in history)
    v = project_images(heads, img)
    assert not torch.allclose(v.norm(dim=1), torch.ones(1))  # raw dot products, Eq. (1)
    with pytest.raises(ValueError, match="caption_text"):
        train_heads(img, words, mask, list(range(40)), TrainConfig(mask_same_text=True))
    with pytest.raises(ValueError, match="score"):
        MaxImageHeads(8, 4, 8, score="l1")


def _split():
    # image 0 (40x40): objects A (0,0,10,10), B (20,20,40,40); image 1: one object C
    a, b, c = (0.0, 0.0, 10.0, 10.0), (20.0, 20.0, 40.0, 40.0), (5.0, 5.0, 35.0, 35.0)
    phrases = [PhraseItem(0, 0, (0, 2), "a star", [a], False),
               PhraseItem(0, 0, (3, 5), "a moon", [b], True),
               PhraseItem(1, 1, (0, 2), "a ring", [c], True)]
    corpus = Corpus([Path("x"), Path("y")], [(40, 40), (40, 40)],
                    [["a", "star", "and", "a", "moon"], ["a", "ring"]], [0, 1], phrases,
                    [[a, b], [c]])
    g = torch.Generator().manual_seed(0)
    words = torch.randn(2, 5, 6, generator=g)
    mask = torch.tensor([[True] * 5, [True, True, False, False, False]])
    return Split(corpus, np.zeros((2, 40, 40, 3), np.uint8), torch.randn(2, 8, 4, 4, generator=g),
                 WordBank.from_dense(words, mask), [0, 1])


def test_caption_blind_floors_by_hand():
    data = _split()
    keep = ev.evaluated(data, 0.05, "hull")
    assert keep.tolist() == [True, True, True]
    # phrase 0: object centres (5,5) in A, (30,30) not: 1/2; phrase 1 likewise; image 1: 1
    assert ev.object_pointer_expectation(data, keep).tolist() == [0.5, 0.5, 1.0]
    assert ev.random_point_expectation(data, keep) == pytest.approx([100 / 1600, 400 / 1600, 900 / 1600])
    assert ev.hits(ev.centre_points(data), data, keep).tolist() == [0.0, 1.0, 1.0]
    draws = np.mean([ev.hits(ev.object_pointer_points(data, s), data, keep) for s in range(400)], axis=0)
    assert draws == pytest.approx([0.5, 0.5, 1.0], abs=0.08)
    # centre cells of a 4x4 grid on 40x40: cells with centres at 15 or 25 on both axes
    share = ev.in_centre_cells([(15.0, 25.0), (5.0, 25.0), (20.0, 20.0)], [(40, 40)] * 3, (4, 4))
    assert share.tolist() == [1.0, 0.0, 1.0]


def test_saliency_is_caption_blind_and_heats_match_phrase_map():
    data = _split()
    torch.manual_seed(0)
    heads = MaxImageHeads(8, 6, 8)
    pts = ev.saliency_points(heads, project_images(heads, data.img), data)
    assert pts[0] == pts[1]  # same image, same point, whatever the phrase
    v = project_images(heads, data.img)
    for mode in ("vector", "maps"):
        heats = phrase_heats(heads, v, data.words, data.corpus, mode)
        for k, ph in enumerate(data.corpus.phrases):
            ref = phrase_map(heads, v[ph.image], data.words.caption(ph.caption)[ph.words[0]:ph.words[1]], mode)
            torch.testing.assert_close(heats[k], ref, rtol=1e-4, atol=1e-5)


def test_subset_split_reindexes_captions_and_phrases():
    data = _split()
    sub = subset_split(data, [1])
    assert sub.corpus.caption_image == [0] and sub.corpus.captions == [["a", "ring"]]
    assert [(p.caption, p.image, p.text) for p in sub.corpus.phrases] == [(0, 0, "a ring")]
    assert sub.img.shape[0] == 1 and len(sub.words) == 1 and sub.corpus.objects == [data.corpus.objects[1]]


def test_hull_filter_keeps_what_the_union_skips():
    boxes = [(0.0, 0.0, 4.0, 4.0), (16.0, 16.0, 20.0, 20.0)]  # two 4x4 corners of a 20x20 image
    assert box_coverage(boxes, (20, 20)) == pytest.approx(32 / 400)
    assert hull_coverage(boxes, (20, 20)) == pytest.approx(1.0)
    big = [(0.0, 0.0, 20.0, 10.0)]
    args = ([(1.0, 1.0), (1.0, 1.0)], [boxes, big], [(20, 20)] * 2)
    union = phrase_pointing(*args, min_box_area=0.1)
    hull = phrase_pointing(*args, min_box_area=0.1, area_rule="hull")
    assert union.hits == [None, True] and hull.hits == [True, True]
    with pytest.raises(ValueError, match="area_rule"):
        phrase_pointing(*args, area_rule="convex")


def _judge(arms: dict, n_images: int = 250) -> ev.ArmJudge:
    n = next(iter(arms.values())).shape[1]
    return ev.ArmJudge(arms, {"all": np.ones(n, bool)}, np.arange(n) % n_images, seed=0, margin=0.05)


def _plant(x: np.ndarray, rate: float, seed: int = 1) -> np.ndarray:
    """x with a share ``rate`` of its (seed, unit) cells set to a hit: a planted effect of known size."""
    return np.where(np.random.default_rng(seed).random(x.shape) < rate, 1.0, x)


def test_grounding_controls_pass_and_each_fails_on_purpose():
    rng = np.random.default_rng(0)
    model = (rng.random((5, 1000)) < 0.5).astype(float)  # 5 seeds x 1000 phrases in 250 images
    pointer = np.full((5, 1000), 0.5)
    shuffled = (rng.random((5, 1000)) < 0.4).astype(float)
    arms = {"model": model, "pointer": pointer, "planted": ev.planted_effect_scores(model, pointer, 0.05), "shuffled": shuffled,
            "saliency": shuffled.copy()}
    f = ev.grounding_falsification(_judge(arms), "model", "pointer", "planted", "shuffled", "saliency")
    assert f.positive.verdict == verdicts.A_BETTER and f.negative.verdict == verdicts.EQUIVALENT
    assert f.controls_pass and f.conclusion == f.test.outcome
    assert f.negative.margin == 0.05 and f.negative.cluster_unit == "images"
    # planted effect removed: the positive control cannot fire, and the test cannot decide
    arms["planted"] = model
    f = ev.grounding_falsification(_judge(arms), "model", "pointer", "planted", "shuffled", "saliency")
    assert not f.positive_passed and f.negative_passed and f.conclusion == verdicts.CANNOT_DECIDE
    # a grounding effect planted into the negative arm: it is no longer equivalent to its floor
    arms["planted"], arms["shuffled"] = ev.planted_effect_scores(model, pointer, 0.05), _plant(shuffled, 0.3)
    f = ev.grounding_falsification(_judge(arms), "model", "pointer", "planted", "shuffled", "saliency")
    assert f.positive_passed and not f.negative_passed and f.conclusion == verdicts.CANNOT_DECIDE
    power = mg.power_check(f.test, 0.05)
    assert power["target"] == pytest.approx(max(abs(f.test.difference), 0.05) / 2)
    assert power["met"] == (power["half_width"] <= power["target"])
    v_seed = np.var(f.test.seed_differences, ddof=1) / 5
    v_image = max((power["half_width"] / 1.96) ** 2 - v_seed, 0.0)
    room = (0.05 / 1.96) ** 2 - v_image
    assert power["seeds_for_margin"] == (int(np.ceil(v_seed * 5 / room)) if room > 0 else None)
    assert ("seeds would put it at the margin" in power["sentence"]) == (power["seeds_for_margin"] is not None)
    assert "needed would put" not in power["sentence"]
    assert power["image_part"] == pytest.approx(1.96 * np.sqrt(v_image))
    # an effect of exactly the margin's size planted into the negative arm is caught too, not only a large one
    arms["shuffled"] = ev.planted_effect_scores(shuffled, arms["saliency"], 0.05)
    f = ev.grounding_falsification(_judge(arms), "model", "pointer", "planted", "shuffled", "saliency")
    assert f.negative.difference == pytest.approx(0.05, abs=1e-9) and not f.negative_passed


def test_planted_effect_control_has_the_tests_noise_and_fails_when_the_test_is_weak():
    """The positive control fires when the test's own noise can resolve the margin, and fails
    when the seeds spread too much; planting a share of hits into a model far below the
    pointer (the earlier design) cannot fire even with quiet seeds."""
    rng = np.random.default_rng(3)
    images = np.arange(1000) % 250
    pointer = np.full((5, 1000), 0.6)
    quiet = (rng.random((5, 1000)) < 0.3).astype(float)  # far below the pointer, seeds alike
    judge = lambda x: verdicts.compare(x, pointer, claim="c", arms=("p", "b"), unit="phrases",  # noqa: E731
                                       clusters=images, seed=0, margin=0.05)
    test, planted = judge(quiet), judge(ev.planted_effect_scores(quiet, pointer, 0.05))
    assert planted.difference == pytest.approx(0.05)
    assert planted.ci_high - planted.ci_low == pytest.approx(test.ci_high - test.ci_low)
    assert planted.seed_differences == pytest.approx([d - test.difference + 0.05 for d in test.seed_differences])
    assert planted.verdict == verdicts.A_BETTER
    assert judge(_plant(quiet, 0.25)).verdict == verdicts.B_BETTER  # 0.3 + 0.25 * 0.7 < 0.6
    spread = quiet + np.array([[-0.2], [0.1], [0.25], [-0.15], [0.0]])  # seed means scattered by +-0.2
    assert judge(ev.planted_effect_scores(spread, pointer, 0.05)).verdict == verdicts.CANNOT_TELL
    with pytest.raises(ValueError, match="effect"):
        ev.planted_effect_scores(quiet, pointer, 0.0)
    with pytest.raises(ValueError, match="shape"):
        ev.planted_effect_scores(quiet, pointer[:, :10], 0.05)


def test_centre_prior_controls_pass_and_each_fails_on_purpose():
    from fgclip.studies.maximage import bias as mb
    from fgclip.studies.maximage.bias import centre_prior_falsification

    rng = np.random.default_rng(0)
    zero = (rng.random((5, 1000)) < 0.1).astype(float)  # share of argmaxes in the centre cells
    images = np.arange(1000) % 250
    biased = (rng.random((5, 1000)) < 0.1).astype(float)  # trained at a bias, no prior learned
    planted = ev.planted_effect_scores(biased, zero, 0.05)  # the biased arm's shares, 0.05 above
    f = centre_prior_falsification(biased, zero, planted, zero.copy(), images, 0.05, seed=0)
    assert f.positive_passed and f.negative_passed and f.test.verdict == verdicts.EQUIVALENT
    hi = f"{f.test.ci_high:.3f}"
    assert "No centre prior detected" in mb.centre_prior_sentence(f) and f"above {hi} is excluded" in \
        mb.centre_prior_sentence(f) and "margin (0.05) is excluded too" in mb.centre_prior_sentence(f)
    assert not centre_prior_falsification(biased, zero, zero, zero, images, 0.05, seed=0).positive_passed
    g = centre_prior_falsification(biased, zero, planted, _plant(zero, 0.3, seed=2), images, 0.05, seed=0)
    assert g.positive_passed and not g.negative_passed and g.conclusion == verdicts.CANNOT_DECIDE
    assert "cannot decide" in mb.centre_prior_sentence(g) and "No centre prior" not in mb.centre_prior_sentence(g)
    # a real excess planted into the biased arm: detected, and no bound is claimed
    h = centre_prior_falsification(_plant(biased, 0.3, seed=4), zero, planted, zero.copy(), images, 0.05, seed=0)
    assert h.test.verdict == verdicts.A_BETTER and "No centre prior" not in mb.centre_prior_sentence(h)
    # a positive control that cannot fire: the sentence gives its half-width against the margin
    k = centre_prior_falsification(biased, zero, zero, zero.copy(), images, 0.05, seed=0)
    half = (k.positive.ci_high - k.positive.ci_low) / 2
    assert f"half-width {half:.3f}; it would need one below the margin (0.05)" in mb.centre_prior_sentence(k)
    assert "half-width" not in mb.centre_prior_sentence(f).split("The interval")[0]
    # the dot-score arm's test: its label opens every arm and claim, so the two tests never share a name
    d = centre_prior_falsification(biased, zero, planted, zero.copy(), images, 0.05, seed=0, label="N-Pair, dot score, ")
    assert all(v.claim.startswith("N-Pair, dot score, ") and all(a.startswith("N-Pair, dot score, ") for a in v.arms)
               for v in (d.test, d.positive, d.negative))
    assert d.test.difference == f.test.difference and f.test.arms[0] == "trained at bias 0.9"


def test_batch_size_verdicts_pair_the_largest_with_the_smallest_batch():
    rng = np.random.default_rng(1)
    images = np.arange(60) % 20
    judge = ev.ArmJudge({}, {}, images, seed=0, margin=0.05)
    x = {8: (rng.random((3, 60)) < 0.3).astype(float), 64: (rng.random((3, 60)) < 0.9).astype(float)}
    table, vs = ev.batch_size_verdicts(judge, x, {k: 1 - v for k, v in x.items()}, [0, 1, 2])
    assert len(table) == 6 and table.query("batch_size == 8 and seed == 1").pointing.item() == x[8][1].mean()
    assert table.query("batch_size == 8 and seed == 1")["off objects"].item() == pytest.approx(1 - x[8][1].mean())
    assert vs[0].arms == ("B=64", "B=8") and vs[0].verdict == verdicts.A_BETTER
    assert abs(vs[0].difference - (x[64].mean() - x[8].mean())) < 1e-12
    assert ev.batch_size_verdicts(judge, {64: x[64]}, None, [0, 1, 2])[1] == []
    with_sal, _ = ev.batch_size_verdicts(judge, x, None, [0, 1, 2], {k: 0 * v for k, v in x.items()})
    assert with_sal["caption-blind saliency"].tolist() == [0.0] * len(with_sal)


def test_shuffled_links():
    perm = ev.shuffled_caption_image([0, 0, 1, 1, 2], seed=0)
    assert sorted(perm) == [0, 0, 1, 1, 2]


def test_long_and_cased_captions_are_cut_and_counted(tmp_path):
    from fgclip.models import create_clip
    from fgclip.studies.maximage.data import word_features

    clip = create_clip("toy-vit", pretrained="toy")
    long = ("A man in a blue shirt " * 20).split()
    feats, mask = word_features(clip, [long, ["A", "Red", "star"]], "contextual",
                                too_long="truncate")
    kept = mask.sum(dim=1).tolist()
    assert kept[1] == 3 and 0 < kept[0] < len(long)
    with pytest.raises(ValueError, match="longer than the text context"):
        word_features(clip, [long], "contextual")
    low, _ = word_features(clip, [["a", "red", "star"]], "contextual")
    torch.testing.assert_close(feats[1, :3], low[0, :3])  # the tokenizer lowercases


def test_widget_takes_cased_choices_and_cut_captions():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fgclip.viz.localization import caption_map_widget

    seen = []

    def maps(i, words):
        return torch.rand(min(len(words), 4), 8, 8)

    def boxes(i, words):
        seen.append(words)
        return [[] for _ in words]

    w = caption_map_widget(np.zeros((1, 64, 64, 3), np.uint8), [(0, "A Man in a blue shirt")],
                           maps, boxes)
    w.redraw()
    assert seen == [["A", "Man", "in", "a"]]  # case kept, cut to the maps' length
    plt.close("all")


def test_floor_scores_word_boxes_and_bias_records_shapes():
    from fgclip.studies.maximage.heads import word_boxes

    data = _split()
    keep = ev.evaluated(data, 0.05, "hull")
    torch.manual_seed(0)
    heads = [MaxImageHeads(8, 6, 8) for _ in range(2)]
    floors = ev.floor_scores(data, keep, [0, 1], heads)
    assert all(x.shape == (2, 3) for x in floors.values())
    assert floors["object pointer"][1].tolist() == [0.5, 0.5, 1.0]
    assert ev.kept_images(data, keep).tolist() == [0, 0, 1]
    assert ev.non_centre(data, keep).tolist() == [True, False, False]
    assert floors["centre point"][0][ev.non_centre(data, keep)].sum() == 0  # same closed edges as the hit rule
    rows, on_zero, share, pts = ev.bias_records(0.0, [0, 1], heads, data, keep, data, keep, "vector")
    assert len(rows) == 2 and on_zero.shape == share.shape == (2, 3) and len(pts) == 2
    assert rows[0]["object pointer"] == pytest.approx(2 / 3)
    assert [r["caption-blind saliency"] for r in rows] == pytest.approx(ev.saliency_scores(heads, data, keep).mean(axis=1))
    assert word_boxes(data.corpus, 0, 5) == [[(0.0, 0.0, 10.0, 10.0)]] * 2 + [[]] + \
        [[(20.0, 20.0, 40.0, 40.0)]] * 2
    h, w = data.corpus.image_hw[data.corpus.caption_image[0]]
    drawn = word_boxes(data.corpus, 0, 5, to_hw=(2 * h, w // 2))  # a stretched image array
    assert drawn[0] == [pytest.approx((0.0, 0.0, 10.0 * (w // 2) / w, 20.0))] and drawn[2] == []


def test_word_bank_is_ragged_and_pads_each_batch_to_its_own_longest_caption():
    from fgclip.models import create_clip
    from fgclip.studies.maximage.data import word_features

    clip = create_clip("toy-vit", pretrained="toy")
    caps = [["a", "red", "star"], ["a", "blue", "moon", "above", "a", "star"], ["a", "red", "star"], ["ring"]]
    dense, mask = word_features(clip, caps, "contextual")
    bank = word_features(clip, caps, "contextual", ragged=True)
    assert bank.lengths.tolist() == [3, 6, 3, 1] and bank.dim == dense.shape[2]
    assert len(bank.rows) == 10  # equal captions share their rows: 3 + 6 + 1, not 13
    assert bank.starts[0] == bank.starts[2]
    feats, m = bank.padded([0, 3])  # (2, 3, Dt): padded to this batch's longest caption only
    assert feats.shape[:2] == (2, 3) and m.tolist() == [[True] * 3, [True, False, False]]
    torch.testing.assert_close(feats[m], dense[[0, 3]][mask[[0, 3]]])
    assert float(feats[1, 1:].abs().sum()) == 0.0  # padding is zero
    for c in range(4):
        torch.testing.assert_close(bank.caption(c), dense[c, :len(caps[c])])
    again = WordBank.from_dense(dense, mask)
    torch.testing.assert_close(again.padded(range(4))[0], dense)
    caption, rows = bank[[1, 3]].words_in_order()
    assert caption.tolist() == [0] * 6 + [1] and torch.equal(bank.rows[rows][-1], bank.caption(3)[0])
    with pytest.raises(ValueError, match="WordBank needs"):
        WordBank(torch.zeros(3, 2), torch.zeros(2, dtype=torch.long), torch.zeros(3, dtype=torch.long))


def test_flickr_data_root_is_keyed_by_world_seed_and_size(tmp_path):
    import json
    from dataclasses import replace

    from fgclip.toyworld import ToyWorldConfig
    from fgclip.studies.maximage.data import flickr_data_root

    world = ToyWorldConfig()
    a = flickr_data_root(tmp_path, world, 0, {"train": 3, "test": 2})
    assert flickr_data_root(tmp_path, world, 0, {"train": 3, "test": 2}) == a  # made once
    b = flickr_data_root(tmp_path, world, 1, {"train": 3, "test": 2})
    c = flickr_data_root(tmp_path, world, 0, {"train": 4, "test": 2})
    d = flickr_data_root(tmp_path, replace(world, center_bias=0.9), 0, {"train": 3, "test": 2})
    assert len({a, b, c, d}) == 4 and all(p.parent == tmp_path for p in (a, b, c, d))
    assert json.loads((b / "toyworld.json").read_text())["seed"] == 1
    assert len((c / "train.txt").read_text().split()) == 4
    sentences = lambda p: [f.read_text() for f in sorted((p / "Sentences").iterdir())]
    assert sentences(a) != sentences(b)  # another seed, other scenes
    before = sorted(p.relative_to(a) for p in a.rglob("*"))
    assert flickr_data_root(a, world, 5, {"train": 3, "test": 2}) == a  # holds the dataset: read as is
    assert sorted(p.relative_to(a) for p in a.rglob("*")) == before
