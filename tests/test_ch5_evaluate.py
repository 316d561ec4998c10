"""Chapter 5's table, read unit by unit: a hand-made bench whose answers are known, then one
tiny real split (24 training images, 8 of them validation; 10 test images; 2 epochs; 2 seeds) on
which every method and every reference is scored.

The hand-made bench: four 64 x 64 images (maps on a 4 x 4 grid of 16 px cells), categories
circle, square, star and heart (heart never drawn):

* image 0: circle (0, 0, 32, 32) and square (32, 32, 64, 64), apart;
* image 1: circle (0, 0, 40, 40) and square (20, 20, 64, 64), overlapping;
* image 2: two circles (0, 0, 16, 16), (48, 0, 64, 16) and a square (0, 48, 16, 64);
* image 3: a star (16, 16, 48, 48) alone.
"""
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from PIL import Image

from fgclip.methods.clip4dm import Attributions
from fgclip.models import create_clip
from fgclip.studies.crosspaper import adapters as ad
from fgclip.studies.crosspaper import evaluate as ev
from fgclip.studies.crosspaper import judge as jd
from fgclip.studies.crosspaper import train as tr
from fgclip.studies.crosspaper.data import (FoilItem, SharedSplit, encode_shared, name_embeddings, read_shared,
                                            shared_root, word_categories)
from fgclip.studies.crosspaper.tasks import NameMaps, NameScores, WordScores
from fgclip.toyworld import ToyWorldConfig
from fgclip.viz.crosspaper import plot_method_maps

CATS = ("circle", "square", "star", "heart")
BOXES = ({"circle": ((0, 0, 32, 32),), "square": ((32, 32, 64, 64),)},
         {"circle": ((0, 0, 40, 40),), "square": ((20, 20, 64, 64),)},
         {"circle": ((0, 0, 16, 16), (48, 0, 64, 16)), "square": ((0, 48, 16, 64),)},
         {"star": ((16, 16, 48, 48),)})
# E[hit] of the centre of a uniformly drawn object: image 0 each centre in its own box only; image 1
# centres (20, 20), (42, 42): the circle box holds the first, the square box both; image 2 centres
# (8, 8), (56, 8), (8, 56): two of three in a circle box, one in the square's; image 3 one object
OBJECT_POINTER = [0.5, 0.5, 0.5, 1.0, 2 / 3, 1 / 3, 1.0]


def foil(image: int, original: str, foiled: str, j: int) -> FoilItem:
    return FoilItem(image, original, foiled, j, original.split()[j], foiled.split()[j], "shape",
                    word_categories(foiled.split(), CATS))


FOILS = (foil(0, "a red circle on the left", "a red square on the left", 2),  # content: red square left
         foil(1, "a circle in the left", "a circle on the left", 2),  # the replaced word 'on' is a stop word
         foil(2, "two shapes on a gray background", "three shapes on a gray background", 0),  # names nothing
         foil(3, "A heart.", "A star.", 1))  # 'A' a stop word once lower-cased: one content word
RANDOM_WORD = [1 / 3, 0.0, 1.0]  # the three kept captions


@pytest.fixture(scope="module")
def split():
    labels = np.array([[c in b for c in CATS] for b in BOXES], dtype=np.int64)
    return SharedSplit(Path("hand"), "test", (10, 11, 12, 13), tuple(Path(f"{i}.png") for i in range(4)),
                       ((64, 64),) * 4, CATS, labels, BOXES, (("a scene",),) * 4, FOILS)


@pytest.fixture(scope="module")
def bench(split):
    kept = tuple(f for f in FOILS if any(f.categories))
    return ev.Bench(split, None, None, tuple(tuple(b) for b in BOXES), kept, 1)


def peak(x: float, y: float) -> np.ndarray:
    """A 4 x 4 map whose only maximum is the cell holding pixel (x, y)."""
    m = np.zeros((4, 4))
    m[int(y // 16), int(x // 16)] = 1.0
    return m


def maps_at(points) -> list[NameMaps]:
    """One NameMaps per image: each name's map peaks at its point."""
    return [NameMaps(tuple(p), np.stack([peak(*xy) for xy in p.values()])) for p in points]


INSIDE = ({"circle": (16, 16), "square": (48, 48)}, {"circle": (20, 20), "square": (42, 42)},
          {"circle": (8, 8), "square": (8, 56)}, {"star": (32, 32)})
OUTSIDE = ({"circle": (56, 56), "square": (8, 8)}, {"circle": (56, 56), "square": (8, 8)},
           {"circle": (8, 56), "square": (56, 56)}, {"star": (8, 8)})


# ----------------------------------------------------------------------- the hand-made bench
def test_pointing_hits_inside_and_misses_outside(bench):
    """A map peaking inside the name's box hits (1), outside misses (0), trial by trial."""
    np.testing.assert_array_equal(ev.score_pointing(maps_at(INSIDE), bench), np.ones(7))
    np.testing.assert_array_equal(ev.score_pointing(maps_at(OUTSIDE), bench), np.zeros(7))
    mixed = maps_at(INSIDE[:2] + OUTSIDE[2:])
    np.testing.assert_array_equal(ev.score_pointing(mixed, bench), [1, 1, 1, 1, 0, 0, 0])


def test_pointing_refuses_maps_of_other_names(bench):
    """A NameMaps whose names (or their order) differ from the bench's queried names raises."""
    swapped = maps_at(({"square": (48, 48), "circle": (16, 16)},) + INSIDE[1:])
    with pytest.raises(ValueError, match="bench queries"):
        ev.score_pointing(swapped, bench)
    missing = maps_at(({"circle": (16, 16)},) + INSIDE[1:])
    with pytest.raises(ValueError, match="bench queries"):
        ev.score_pointing(missing, bench)


def test_clusters_are_images_for_pointing_and_misalignment_only(bench):
    """A trial's or caption's cluster is its image; categories stand alone (None)."""
    np.testing.assert_array_equal(bench.clusters("pointing"), [0, 0, 1, 1, 2, 2, 3])
    np.testing.assert_array_equal(bench.clusters("misalignment"), [0, 1, 3])
    assert bench.clusters("presence") is None and bench.clusters("retrieval") is None


def test_object_pointer_is_the_hand_computed_expectation(bench):
    """(1/|O_i|) sum_o hit(centre(o), B_{i,c}): 1/2 apart, 1/2 and 1 overlapping, 2/3 and 1/3 with three objects."""
    np.testing.assert_allclose(ev.object_pointer_hits(bench), OBJECT_POINTER)


def test_random_content_word_hits_one_over_the_content_words(bench):
    """1/|content words| when the foil word is a content word, 0 when it is a stop word; the stop
    words are compared lower-cased and without punctuation ('A' is one)."""
    np.testing.assert_allclose(ev.random_word_hits(bench), RANDOM_WORD)


def test_score_words_picks_the_lowest_word(bench):
    """hat j = argmin: 1 where the replaced word scores lowest, 0 where another word does."""
    right = [WordScores(f.words, np.where(np.arange(len(f.words)) == f.word_index, -1.0, 0.0)) for f in bench.foils]
    wrong = [WordScores(f.words, np.where(np.arange(len(f.words)) == f.word_index, 1.0, 0.0)) for f in bench.foils]
    np.testing.assert_array_equal(ev.score_words(right, bench, 0), [1, 1, 1])
    np.testing.assert_array_equal(ev.score_words(wrong, bench, 0), [0, 0, 0])


def test_score_words_breaks_ties_with_the_seeded_generator(bench):
    """40 captions whose replaced word ties with one other: picks drawn by default_rng(seed), the
    same for one seed, not the same for another, neither always the first word nor never."""
    items = tuple(replace(bench.foils[0], word_index=0) for _ in range(40))
    tied = replace(bench, foils=items)
    words = [WordScores(f.words, [0.0, 0.0] + [1.0] * (len(f.words) - 2)) for f in items]
    hits = {s: ev.score_words(words, tied, s) for s in (0, 1)}
    for s, h in hits.items():
        rng = np.random.default_rng(s)
        np.testing.assert_array_equal(h, [float(rng.choice([0, 1]) == 0) for _ in items])
        np.testing.assert_array_equal(ev.score_words(words, tied, s), h)
        assert 0 < h.mean() < 1
    assert not np.array_equal(hits[0], hits[1])


def test_score_names_ap_in_the_benchs_order_nan_without_positives(bench):
    """Scores that rank every positive first give AP 1 (presence and AP@50 alike), whatever the
    columns' order; reversed circle scores give (1/2 + 2/3 + 3/4) / 3; heart has no positive: NaN."""
    labels = bench.test.labels.astype(float)  # (4, 4)
    order = [3, 1, 0, 2]  # the scores' own column order: heart, square, circle, star
    perfect = NameScores(tuple(CATS[k] for k in order), labels[:, order] + 0.01 * np.arange(4)[:, None])
    for task in ("presence", "retrieval"):
        ap = ev.score_names(perfect, bench, task)
        np.testing.assert_allclose(ap[:3], 1.0)
        assert np.isnan(ap[3])
    circle = labels.copy()
    circle[:, 0] = [0.0, 1.0, 2.0, 3.0]  # the negative image (3) first
    ap = ev.score_names(NameScores(CATS, circle), bench, "presence")
    assert ap[0] == pytest.approx((1 / 2 + 2 / 3 + 3 / 4) / 3)


def test_cell_reasons_are_exactly_the_two_empty_cells():
    """clip4dm x presence / retrieval: the adapters' reason; every other cell (CLIP4DM's pointing
    through the pooling's relevance among them) is filled."""
    for task in ("presence", "retrieval"):
        assert ev.cell_reason("clip4dm", task) == ad.NOT_APPLICABLE[("clip4dm", task)]
    empty = {(m, t) for m in ad.METHODS for t in ad.TASKS if ev.cell_reason(m, t) is not None}
    assert empty == {("clip4dm", "presence"), ("clip4dm", "retrieval")}


def test_figure_picks_images_with_two_categories_and_refuses_too_few(bench):
    """The first n images with objects of two categories, each with its first name; fewer raise."""
    assert ev.figure_picks(bench, 3) == [(0, "circle"), (1, "circle"), (2, "circle")]
    assert ev.figure_picks(bench, 1) == [(0, "circle")]
    with pytest.raises(ValueError, match="3 images with two categories.*needs 4"):
        ev.figure_picks(bench)


def test_clip4dm_reads_each_captions_own_attributions_when_two_share_a_text(split):
    """Two kept FOIL captions with one text on two images: each is scored with its own row of
    w_j (image 0's finds the replaced word, image 1's picks the last), not the other's."""
    same = tuple(foil(i, "a red circle on the left", "a red square on the left", 2) for i in (0, 1))
    b = ev.Bench(replace(split, foils=same), SimpleNamespace(grid=(2, 2)), None, tuple(tuple(x) for x in BOXES), same, 0)
    att = Attributions([list(same[0].words)] * 2, [np.array([0, 0, -1, 0, 0, 0.]), np.array([0, 0, 0, 0, 0, -1.])],
                       np.zeros(2), [np.arange(6)] * 2)
    out = SimpleNamespace(attributions=att, captions=[f.foil for f in same], image_emb=torch.randn(4, 8),
                          name_text=torch.randn(4, 8), names=CATS, relevance=torch.zeros(len(BOXES), len(CATS), 5))
    scores = ev.method_scores(tr.MethodRun("clip4dm", (0, 1), [out, out], None, 0.0), None, b)
    np.testing.assert_array_equal(scores["misalignment"], [[1, 0], [1, 0]])
    assert set(scores) == {"pointing", "misalignment"}


HIT = ({"circle": (8, 8), "square": (56, 56)}, {"circle": (8, 8), "square": (56, 56)},
       {"circle": (8, 8), "square": (8, 56)}, {"star": (32, 32)})  # a point in one of the name's boxes
MISS = ({"circle": (56, 56), "square": (8, 8)}, {"circle": (56, 56), "square": (8, 8)},
        {"circle": (8, 56), "square": (8, 8)}, {"star": (8, 8)})  # a point in none of them


@pytest.mark.parametrize("points, want", [(HIT, 1.0), (MISS, 0.0)], ids=["peaks in the boxes", "peaks elsewhere"])
def test_clip4dm_pointing_reads_each_names_own_relevance(split, points, want):
    """relevance (N, C, 1 + 16) peaking, for each (image, name), at a known cell: each trial reads its
    own image's row and its own name's column (mean token at index 0 dropped), so every trial hits
    when the peaks lie in the name's boxes and none does when they lie outside."""
    same = tuple(foil(i, "a red circle on the left", "a red square on the left", 2) for i in (0, 1))
    b = ev.Bench(replace(split, foils=same), SimpleNamespace(grid=(4, 4)), None, tuple(tuple(x) for x in BOXES), same, 0)
    rel = torch.zeros(len(BOXES), len(CATS), 17)
    for i, named in enumerate(points):
        for name, (x, y) in named.items():
            rel[i, CATS.index(name), 1 + int(y // 16) * 4 + int(x // 16)] = 1.0
    rel[:, :, 0] = 5.0  # the mean token's value, larger than any cell's: it must not be read
    att = Attributions([list(same[0].words)] * 2, [np.zeros(6)] * 2, np.zeros(2), [np.arange(6)] * 2)
    out = SimpleNamespace(attributions=att, captions=[f.foil for f in same], names=CATS, relevance=rel)
    scores = ev.method_scores(tr.MethodRun("clip4dm", (0, 1), [out, out], None, 0.0), None, b)
    assert scores["pointing"].shape == (2, n_units(b, "pointing")) and (scores["pointing"] == want).all()


@pytest.fixture(scope="module")
def clip():
    return create_clip("toy-rn", "toy")


def test_make_bench_keeps_the_foils_whose_replaced_word_names_a_category(clip, split):
    """Captions replacing 'on' (a category named elsewhere) or 'two' are dropped (counted: 2); the
    names' texts are 'a {name}'."""
    b = ev.make_bench(clip, split, None)
    assert b.foils == (FOILS[0], FOILS[3]) and b.n_foils_dropped == 2
    assert b.queried == (("circle", "square"),) * 3 + (("star",),) and b.categories == list(CATS)
    torch.testing.assert_close(b.name_text, name_embeddings(clip, CATS))


def test_make_bench_refuses_an_image_without_a_box_or_a_split_without_usable_foils(split):
    """An image with no object box raises naming the test split and the image; so does a split
    whose FOIL captions name no category (the clip is never reached)."""
    with pytest.raises(ValueError, match=r"test split .* images \[12\] have no object box"):
        ev.make_bench(None, replace(split, boxes=BOXES[:2] + ({},) + BOXES[3:]), None)
    with pytest.raises(ValueError, match="test split hand: no FOIL caption replaces a category's name"):
        ev.make_bench(None, replace(split, foils=(FOILS[2],)), None)


# --------------------------------------------------------------------- a tiny real split
SIZES, N_VAL, SEEDS, EPOCHS = {"train": 24, "test": 10}, 8, (0, 1), 2


@pytest.fixture(scope="module")
def world(tmp_path_factory, clip):
    root = shared_root(tmp_path_factory.mktemp("ch5eval"), ToyWorldConfig(), 0, SIZES)
    test = read_shared(root, "test")
    stage = tr.make_stage(clip, root, SIZES["train"], N_VAL, root / "cache")
    feats = encode_shared(clip, test, root / "cache")
    return root, stage, ev.make_bench(clip, test, feats)


@pytest.fixture(scope="module")
def runs(world):
    root, stage, bench = world
    out = {"decoupling": tr.train_decoupling(stage, SEEDS, epochs=EPOCHS),
           "sumclip": tr.train_sumclip(stage, SEEDS, epochs=EPOCHS, k_candidates=(1, 2)),
           "maximage": tr.train_maximage(stage, root, SIZES["test"], SEEDS, epochs=EPOCHS)}
    for p in stage.clip.model.parameters():  # frozen in place, as chapter 4's prompt learner leaves it
        p.requires_grad_(False)
    out["clip4dm"] = tr.clip4dm_outputs(stage, bench.test, bench.feats, SEEDS)
    return out


def n_units(bench, task: str) -> int:
    return {"pointing": sum(map(len, bench.queried)), "misalignment": len(bench.foils)}.get(task, len(bench.categories))


@pytest.mark.parametrize("method", ad.METHODS)
def test_method_scores_fill_every_askable_cell_with_seeds_by_units(runs, world, clip, method):
    """(S, U) per task the method can be asked, U the bench's units; values in [0, 1], NaN only in
    the AP of categories without a positive image."""
    bench = world[2]
    scores = ev.method_scores(runs[method], clip, bench)
    assert set(scores) == {t for t in ad.TASKS if ev.cell_reason(method, t) is None}
    no_positive = bench.test.labels.sum(axis=0) == 0
    assert no_positive.any() and not no_positive.all()
    for task, s in scores.items():
        assert s.shape == (len(SEEDS), n_units(bench, task)), task
        nan = np.isnan(s)
        if task in ("presence", "retrieval"):  # AP of a category without a positive image: NaN
            np.testing.assert_array_equal(nan, np.broadcast_to(no_positive, s.shape))
        else:
            assert not nan.any(), task
        assert ((s[~nan] >= 0) & (s[~nan] <= 1)).all(), task
    # every kept caption replaces a category's name, the only words decoupling scores
    assert all(f.categories[f.word_index] is not None for f in bench.foils)


def test_maximage_refuses_test_features_of_other_images(runs, world, clip):
    """MaxImage's own test features must be the bench's images, in order (else: train it with n_test)."""
    run, ctx = runs["maximage"], runs["maximage"].context
    shuffled = SimpleNamespace(test=SimpleNamespace(img=ctx.test.img, corpus=SimpleNamespace(
        image_paths=list(reversed(ctx.test.corpus.image_paths)))))
    other = tr.MethodRun("maximage", run.seeds, run.modules, run.record, 0.0, shuffled)
    with pytest.raises(ValueError, match="n_test = 10"):
        ev.method_scores(other, clip, world[2])


def test_reference_scores_fill_every_reading_and_baseline(world, clip):
    """Every CLIP reading and cheap baseline on its task, (S, U); the references that draw nothing
    repeat one row; the object pointer and random word are their exact expectations."""
    _, stage, bench = world
    ref, probe = ev.reference_scores(clip, stage, bench, SEEDS, cluster_k=2)
    assert probe is not None
    expected = {name: set() for table in (jd.CLIP_READING, jd.BASELINE, ev.READINGS) for name in
                ([*table.values()] if table is not ev.READINGS else [n for ns in table.values() for n in ns])}
    for table in (jd.CLIP_READING, jd.BASELINE):
        for task, name in table.items():
            expected[name].add(task)
    for task, names in ev.READINGS.items():
        for name in names:
            expected[name].add(task)
    for name, tasks in expected.items():
        assert set(ref[name]) == tasks, name
        for task in tasks:
            s = ref[name][task]
            assert s.shape == (len(SEEDS), n_units(bench, task)), name
            assert np.nanmin(s) >= 0 and np.nanmax(s) <= 1, name
    readings = ev.choose_readings(stage, bench.name_text, 2, SEEDS[0])
    for task, r in readings.items():
        assert r["chosen"] in ev.READINGS[task] and set(r["validation"]) == set(ev.READINGS[task])
        assert r["validation"][r["chosen"]] == max(r["validation"].values())
    assert set(ref["centre"]) == {"pointing"} and ref["centre"]["pointing"].shape == (2, n_units(bench, "pointing"))
    for name in ("CLIP dense similarity", "centre", "object pointer", "random content word", "zero-shot",
                 "linear probe", "CLIP global", "CLIP dense max"):
        for s in ref[name].values():
            np.testing.assert_array_equal(s[0], s[1])
    np.testing.assert_allclose(ref["object pointer"]["pointing"][0], ev.object_pointer_hits(bench))
    np.testing.assert_allclose(ref["random content word"]["misalignment"][0], ev.random_word_hits(bench))


def test_example_maps_and_their_figure(runs, world, clip):
    """One (h, w) map per pick for every method, CLIP dense similarity beside; the figure has one
    row per pick and one column per arm, and a column of None (a '-' cell) is drawn blank with its reason."""
    bench = world[2]
    picks = ev.figure_picks(bench, 2)
    maps = ev.example_maps(runs, clip, bench, picks)
    assert list(maps) == list(runs) + ["CLIP dense similarity"]
    for arm, ms in maps.items():
        assert len(ms) == 2 and all(m.ndim == 2 and np.isfinite(m).all() for m in ms), arm
    assert all(m.shape == bench.feats.grid for arm in ("decoupling", "sumclip", "clip4dm", "CLIP dense similarity")
               for m in maps[arm])
    images = [np.asarray(Image.open(bench.test.paths[i]).convert("RGB")) for i, _ in picks]
    reason = "no map here"
    fig = plot_method_maps(images, [n for _, n in picks], [bench.test.boxes[i][n] for i, n in picks],
                           {**maps, "blank": [None, None]}, {"blank": reason})
    try:
        assert len(fig.axes) == 2 * (len(maps) + 1)
        assert [ax.get_title() for ax in fig.axes[:len(maps) + 1]] == [*maps, "blank"]
        blank = fig.axes[len(maps)]
        assert not blank.axison and [t.get_text() for t in blank.texts] == [reason]
        assert [fig.axes[r * (len(maps) + 1)].get_ylabel() for r in range(2)] == [n for _, n in picks]
    finally:
        plt.close(fig)


def test_category_word_reading_picks_the_named_category_the_image_scores_lowest(clip, split):
    """score_j = S[i, c(j)] for words naming a category, +inf elsewhere; a random category word hits
    1 / |category words| (every kept foil's wrong word names one)."""
    b = ev.make_bench(clip, split, None)
    words = ev.category_word_scores(NameScores(CATS, np.arange(16.0).reshape(4, 4)), b)
    assert [w.words for w in words] == [f.words for f in b.foils]
    square, star = CATS.index("square"), CATS.index("star")
    assert words[0].scores.tolist() == [np.inf, np.inf, 0 * 4 + square, np.inf, np.inf, np.inf]
    assert words[1].scores.tolist() == [np.inf, 3 * 4 + star]
    np.testing.assert_array_equal(ev.random_category_word_hits(b), [1.0, 1.0])
