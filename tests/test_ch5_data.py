"""Chapter 5's shared split: a tiny toy export (8 train / 6 test images at the world's 64 px)
read back through the real COCO and FOIL readers must equal the generator's own scenes, be
exported once, and its frozen toy-rn features must be computed once and cover the image."""
import json
import shutil

import numpy as np
import pytest
import torch
from PIL import Image

from fgclip.datasets import DatasetFormatError
from fgclip.evaluation import encode_texts
from fgclip.methods.sumclip import attend
from fgclip.models import create_clip
from fgclip.studies.crosspaper import data as d
from fgclip.toyworld import SHAPES, ToyWorldConfig, generate
from fgclip.toyworld.cache import COMPLETE

WORLD, SEED, SIZES = ToyWorldConfig(), 0, {"train": 8, "test": 6}


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return d.shared_root(tmp_path_factory.mktemp("ch5"), WORLD, SEED, SIZES)


@pytest.fixture(scope="module")
def clip():
    return create_clip("toy-rn", "toy")


@pytest.mark.parametrize("split", list(SIZES))
def test_labels_boxes_and_captions_are_the_scenes_own(root, split):
    scenes, s = generate(WORLD, SIZES[split], seed=SEED, split=split), d.read_shared(root, split)
    assert s.categories == tuple(SHAPES) and len(s) == len(scenes) == s.labels.shape[0]
    assert s.image_ids == tuple(sc.image_id for sc in scenes) and set(s.hws) == {(64, 64)}
    expected = np.array([[c in sc.labels for c in SHAPES] for sc in scenes], dtype=np.int64)  # (N, C)
    np.testing.assert_array_equal(s.labels, expected)
    for got, sc in zip(s.boxes, scenes):
        want = {}
        for o in sc.objects:
            want.setdefault(o.category, []).append(tuple(float(v) for v in o.box))
        assert {c: sorted(b) for c, b in got.items()} == {c: sorted(b) for c, b in want.items()}
    assert s.captions == tuple(tuple(c.text for c in sc.captions) for sc in scenes)  # COCO captions round trip


@pytest.mark.parametrize("split", list(SIZES))
def test_foil_items_are_the_generators_foils(root, split):
    scenes, s = generate(WORLD, SIZES[split], seed=SEED, split=split), d.read_shared(root, split)
    want = [(i, sc.captions[f.caption_index].text, f.text, f.word_index, f.target_word, f.foil_word, f.foil_type)
            for i, sc in enumerate(scenes) for f in sc.foils]
    got = [(f.image, f.original, f.foil, f.word_index, f.true_word, f.foil_word, f.foil_type) for f in s.foils]
    assert got == want and len(got) > len(scenes)  # the index derived by the reader = the generator's
    for f in s.foils:
        assert f.words[f.word_index] == f.foil_word and f.original.split()[f.word_index] == f.true_word
        assert f.categories == tuple(w if w in SHAPES else None for w in f.words)
    np.testing.assert_array_equal(s.foil_targets, [f.word_index for f in s.foils])


def test_word_categories_on_hand_checked_items(root):
    first = d.read_shared(root, "test").foils[0]  # checked by hand for seed 0
    assert first.foil == "a large purple checker to the right of a large orange semicircle"
    assert (first.word_index, first.true_word, first.foil_word) == (11, "corner", "semicircle")
    assert first.categories == (None,) * 3 + ("checker",) + (None,) * 7 + ("semicircle",)
    words = "A teddy bear, near a Dog and two dogs.".split()  # longest name first, case and punctuation off
    assert d.word_categories(words, ["dog", "bear", "teddy bear"]) == (
        None, "teddy bear", "teddy bear", None, None, "dog", None, None, None)


def test_the_export_is_made_once(tmp_path, monkeypatch):
    calls = []
    real = d.export_all
    monkeypatch.setattr(d, "export_all", lambda *a, **k: calls.append(a) or real(*a, **k))
    first = d.shared_root(tmp_path, WORLD, SEED, SIZES)
    stamp = (first / COMPLETE).stat().st_mtime_ns, (first / "coco/annotations/instances_train.json").stat().st_mtime_ns
    assert d.shared_root(tmp_path, WORLD, SEED, SIZES) == first and len(calls) == 1
    assert ((first / COMPLETE).stat().st_mtime_ns, (first / "coco/annotations/instances_train.json").stat().st_mtime_ns) == stamp
    assert d.shared_root(first, WORLD, SEED, SIZES) == first and len(calls) == 1  # an export read as it is
    assert json.loads((first / COMPLETE).read_text())["formats"] == ["coco", "flickr30k_entities", "foil", "voc"]
    assert d.shared_root(tmp_path, WORLD, SEED + 1, SIZES) != first and len(calls) == 2


def test_bad_inputs_name_their_parameter(root, tmp_path, clip):
    for sizes in ({}, {"train": 0}, {"train": 2.0}):
        with pytest.raises(ValueError, match="'sizes'"):
            d.shared_root(tmp_path / "a", WORLD, SEED, sizes)
    with pytest.raises(ValueError, match="'sizes'.*dev"):
        d.shared_root(tmp_path / "a", WORLD, SEED, {"dev": 3})
    with pytest.raises(ValueError, match="'seed'"):
        d.shared_root(tmp_path / "a", WORLD, "0", SIZES)
    partial = tmp_path / "partial"
    shutil.copytree(root / "coco", partial / "coco")  # COCO but no FOIL
    with pytest.raises(ValueError, match="'data_root'.*foil_train.json"):
        d.shared_root(partial, WORLD, SEED, SIZES)
    with pytest.raises(ValueError, match="'n'.*6 images"):
        d.read_shared(root, "test", 7)
    with pytest.raises(ValueError, match="'n'"):
        d.read_shared(root, "test", -1)
    with pytest.raises(ValueError, match="'split'"):
        d.read_shared(root, "val")
    split = d.read_shared(root, "train", 2)
    with pytest.raises(ValueError, match="'batch_size'"):
        d.encode_shared(clip, split, tmp_path, batch_size=0)
    with pytest.raises(ValueError, match="'device'"):
        d.encode_shared(clip, split, tmp_path, device="meta")
    with pytest.raises(ValueError, match="'prompt'"):
        d.name_embeddings(clip, ["circle"], "a photo")
    with pytest.raises(ValueError, match="'names'"):
        d.name_embeddings(clip, ["circle", "circle"])


def test_a_foil_image_outside_the_coco_split_is_refused(root, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(root / "coco", bad / "coco")
    shutil.copytree(root / "foil", bad / "foil")
    path = bad / "foil" / "foil_test.json"
    foil = json.loads(path.read_text())
    old = foil["images"][0]["id"]
    foil["images"][0]["id"] = 999
    for a in foil["annotations"]:
        a["image_id"] = 999 if a["image_id"] == old else a["image_id"]
    path.write_text(json.dumps(foil))
    with pytest.raises(DatasetFormatError, match=r"foil_test\.json.*\[999\].*instances_test\.json"):
        d.read_shared(bad, "test")


def test_features_are_cached_square_and_rebuild_the_pool(root, tmp_path, clip, monkeypatch):
    calls = []
    real = d._encode
    monkeypatch.setattr(d, "_encode", lambda clip, paths, *a: calls.append(len(paths)) or real(clip, paths, *a))
    split = d.read_shared(root, "train")
    f = d.encode_shared(clip, split, tmp_path, batch_size=3)
    again = d.encode_shared(clip, split, tmp_path)
    assert calls == [8] and again.path == f.path and torch.equal(again.dense, f.dense)
    assert tuple(f.dense.shape) == (8, 128, 4, 4) and tuple(f.pooled.shape) == (8, 128)
    assert tuple(f.feature_map.shape) == (8, 1024, 4, 4) and f.dense.dtype == torch.float32
    assert f.grid == (clip.image_size // 32,) * 2  # ModifiedResNet: stride 32 over the whole square input
    assert d.encode_shared(clip, d.read_shared(root, "train", 5), tmp_path).path != f.path and calls == [8, 5]
    # the transform stretches the whole image (no crop): a 64 x 32 image's red left quarter stays on the left
    t = d.square_transform(clip.preprocess)
    img = np.zeros((32, 64, 3), np.uint8)
    img[:, :16, 0] = 255
    x = t(Image.fromarray(img))  # (3, S, S)
    assert tuple(x.shape) == (3, 128, 128) and x[0, :, :24].mean() > 1.5 and x[0, :, 40:].mean() < 0
    with torch.no_grad():
        inputs = torch.stack([t(Image.open(p).convert("RGB")) for p in split.paths])
        torch.testing.assert_close(f.pooled, clip.model.encode_image(inputs), rtol=1e-4, atol=1e-5)
        m = f.memory(clip)  # the pooling with its own mean token, from the cached map, is CLIP's pooled
        pooled, _ = attend(clip.model.visual.attnpool, m.q_mean[:, None], m.k_mean[:, None], m.v_mean[:, None],
                           m.k_map, m.v_map)
    torch.testing.assert_close(pooled[:, 0], f.pooled, rtol=1e-4, atol=1e-5)
    names = d.name_embeddings(clip, ["circle", "square"])
    assert tuple(names.shape) == (2, 128)
    torch.testing.assert_close(names, encode_texts(clip, ["a circle", "a square"]))
