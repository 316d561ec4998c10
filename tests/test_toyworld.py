from dataclasses import replace

import numpy as np
import pytest

from fgclip.toyworld import (COLORS, COUNT_WORDS, RELATIONS, SHAPES, ToyWorldConfig, category_split,
                             generate, make_scene, open_vocabulary)


def test_at_least_12_shapes_and_8_colors():
    assert len(SHAPES) >= 12 and len(COLORS) >= 8


def test_same_seed_same_scene_and_different_seed_differs():
    cfg = ToyWorldConfig()
    a, b = make_scene(cfg, 3, "train", 7), make_scene(cfg, 3, "train", 7)
    assert np.array_equal(a.image, b.image)
    assert [c.text for c in a.captions] == [c.text for c in b.captions]
    c = make_scene(cfg, 4, "train", 7)
    assert not np.array_equal(a.image, c.image)


def test_splits_have_disjoint_ids():
    cfg = ToyWorldConfig()
    ids = {split: {s.image_id for s in generate(cfg, 5, 0, split)} for split in ("train", "val", "test")}
    assert not ids["train"] & ids["val"] and not ids["val"] & ids["test"]


def test_scene_contents_are_consistent():
    cfg = ToyWorldConfig(image_size=64, max_objects=3)
    for scene in generate(cfg, 50, seed=1):
        assert scene.image.shape == (64, 64, 3) and scene.image.dtype == np.uint8
        assert 1 <= len(scene.objects) <= 3
        assert len(scene.captions) == cfg.captions_per_image
        for obj in scene.objects:
            x0, y0, x1, y1 = obj.box
            assert 0 <= x0 < x1 <= 64 and 0 <= y0 < y1 <= 64
            assert 0 < obj.visible_fraction <= 1
            # the box's pixels carry the object's colour (times a brightness in [0.85, 1])
            patch = scene.image[int(y0):int(y1), int(x0):int(x1)].astype(int)
            rgb = np.array(COLORS[obj.color])
            dist = np.abs(patch - rgb).sum(-1)
            assert dist.min() <= 0.15 * rgb.sum() + 3
        full = scene.captions[0]
        assert len(full.phrases) == len(scene.objects)
        for cap in scene.captions:
            words = cap.text.split()
            for ph in cap.phrases:
                assert " ".join(words[ph.first_word:ph.last_word + 1]) == ph.text
                obj = scene.objects[ph.object_ids[0]]
                assert ph.category == obj.category and words[ph.last_word] == obj.category


def test_foils_replace_exactly_one_word_with_a_wrong_one():
    cfg = ToyWorldConfig()
    types = set()
    for scene in generate(cfg, 60, seed=2):
        for foil in scene.foils:
            orig = scene.captions[foil.caption_index].text.split()
            new = foil.text.split()
            diff = [i for i, (a, b) in enumerate(zip(orig, new)) if a != b]
            assert len(orig) == len(new) and diff == [foil.word_index]
            assert orig[foil.word_index] == foil.target_word and new[foil.word_index] == foil.foil_word
            types.add(foil.foil_type)
            if foil.foil_type == "shape":
                assert foil.foil_word not in scene.labels
            if foil.foil_type == "relation":
                assert RELATIONS[foil.target_word] == foil.foil_word
            if foil.foil_type == "count":
                assert foil.foil_word in COUNT_WORDS
    assert types == {"shape", "color", "relation", "count"}


def test_center_bias_pulls_objects_to_the_center():
    def mean_distance(bias):
        cfg = ToyWorldConfig(center_bias=bias, min_objects=1, max_objects=1)
        d = [np.hypot(*(np.array(s.objects[0].center) - 32)) for s in generate(cfg, 200, seed=0)]
        return float(np.mean(d))
    strong, half, none = mean_distance(1.0), mean_distance(0.5), mean_distance(0.0)
    # full bias: centres ~ N(32, sigma^2 I), whose distance to the centre is Rayleigh(sigma)
    sigma = ToyWorldConfig().center_sigma * 64
    assert strong == pytest.approx(sigma * np.sqrt(np.pi / 2), rel=0.15)
    assert strong < half < none


def test_occlusion_knob():
    no_occ = ToyWorldConfig(max_overlap=0.0, max_objects=4, min_objects=4)
    assert all(o.visible_fraction == 1.0 for s in generate(no_occ, 30, 0) for o in s.objects)
    occ = replace(no_occ, max_overlap=0.6)
    assert any(o.visible_fraction < 1.0 for s in generate(occ, 30, 0) for o in s.objects)


def test_distractors_add_gray_pixels_but_no_objects():
    cfg = ToyWorldConfig(distractors=3, clutter=0.0)
    a, b = make_scene(replace(cfg, distractors=0), 0, "train", 0), make_scene(cfg, 0, "train", 0)
    assert len(a.objects) == len(b.objects) and not np.array_equal(a.image, b.image)


def test_category_split_and_open_vocabulary():
    split = category_split(n_novel=4, seed=0)
    assert len(split.novel) == 4 and set(split.base) | set(split.novel) == set(SHAPES)
    assert not set(split.base) & set(split.novel)
    assert category_split(n_novel=4, seed=0) == split
    vocab = open_vocabulary()
    assert vocab[:len(SHAPES)] == list(SHAPES) and len(vocab) > 100 and len(set(vocab)) == len(vocab)


@pytest.mark.parametrize("field,value", [("center_bias", 1.5), ("min_objects", 0),
                                         ("size_range", (0.3, 0.1)), ("categories", ("blob",))])
def test_bad_config_names_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        ToyWorldConfig(**{field: value})


def test_bad_split_is_named():
    with pytest.raises(ValueError, match="split"):
        make_scene(ToyWorldConfig(), 0, "training", 0)


def test_phrases_link_every_object_they_describe():
    cfg = ToyWorldConfig(categories=("circle", "square"), colors=("red", "blue"),
                         min_objects=3, max_objects=3)
    scenes = generate(cfg, 40, seed=0)  # few categories and colours: many twins, no crash
    for scene in scenes:
        for cap in scene.captions:
            for ph in cap.phrases:
                objs = [scene.objects[i] for i in ph.object_ids]
                assert all(o.category == ph.category for o in objs)
                described = [o for o in scene.objects if o.category == ph.category
                             and (o.color in ph.text.split() or cap.kind == "name")]
                if cap.kind == "name":
                    assert len(objs) == len(described)
    assert any(len(ph.object_ids) > 1 for s in scenes for c in s.captions for ph in c.phrases)


def test_count_foils_stay_plural_and_in_range():
    cfg = ToyWorldConfig(max_objects=3)
    for scene in generate(cfg, 80, seed=3):
        for foil in scene.foils:
            if foil.foil_type == "count":
                assert foil.foil_word in ("two", "three") and len(scene.objects) >= 2


def test_cooccur_pairs_always_appear_together_and_default_draws_as_before():
    pairs = (("circle", "star"), ("square", "ring"))
    cfg = ToyWorldConfig(cooccur=pairs)
    scenes = generate(cfg, 60, seed=0)
    held = [s.labels for s in scenes]
    for a, b in pairs:
        assert any(a in h for h in held)  # the pair is drawn at all
        assert all((a in h) == (b in h) for h in held)  # one member present <=> the other
    assert all(len(o.category) and o.visible_fraction > 0 for s in scenes for o in s.objects)
    # default off: the dict (cache keys) and the draws of a world without pairs are unchanged
    plain = ToyWorldConfig()
    assert "cooccur" not in plain.to_dict() and cfg.to_dict()["cooccur"] == pairs
    assert np.array_equal(make_scene(plain, 0, "train", 5).image, make_scene(ToyWorldConfig(cooccur=()), 0, "train", 5).image)
    assert cfg.partner("star") == "circle" and cfg.partner("heart") is None
    assert ToyWorldConfig(cooccur=[["circle", "star"]]).cooccur == (("circle", "star"),)  # JSON lists
    off = generate(plain, 60, seed=0)  # without the option the pair is broken somewhere
    assert any(("circle" in s.labels) != ("star" in s.labels) for s in off)


@pytest.mark.parametrize("pairs", [(("circle", "circle"),), (("circle", "star"), ("star", "ring")),
                                   (("circle", "no-such-shape"),), (("circle",),)])
def test_bad_cooccur_is_named(pairs):
    with pytest.raises(ValueError, match="cooccur"):
        ToyWorldConfig(cooccur=pairs)
