"""Chapter 4's data: the toy export is a cache keyed by what made it, a real root is read as it
is (never written to), n_train / n_test take effect on real splits, the feature cache notices
a rewritten image (the end-to-end run on real COCO photos is in test_real_layouts.py)."""
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from fgclip.datasets import read_coco_split
from fgclip.studies.decoupling.data import prepare_data, subsample
from fgclip.studies.decoupling.features import cached_features
from fgclip.toyworld import ToyWorldConfig, generate
from fgclip.toyworld.export import export_coco, export_voc, write_toyworld_meta


NAMES = {"train": "n_train", "test": "n_test"}


def _snapshot(root: Path) -> dict[str, str]:
    """Every file under root: relative path -> SHA-1 of its bytes."""
    return {str(p.relative_to(root)): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _toy(root, n_train, n_test, seed):
    return prepare_data(root, "coco", {"train": n_train, "test": n_test}, seed, size_names=NAMES)


def test_toy_export_is_keyed_by_seed_and_sizes(tmp_path):
    a, data_a, _, labels_a = _toy(tmp_path, 6, 4, 0)
    before = _snapshot(a)
    again, _, _, _ = _toy(tmp_path, 6, 4, 0)
    b, data_b, _, _ = _toy(tmp_path, 6, 4, 1)
    c, data_c, _, labels_c = _toy(tmp_path, 8, 4, 0)
    assert again == a and _snapshot(a) == before  # made once, then reused untouched
    assert len({a, b, c}) == 3
    assert all(p.parent == tmp_path and p.name.startswith("toy-") for p in (a, b, c))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (a, b, c))  # nothing else
    for folder, seed in ((a, 0), (b, 1), (c, 0)):
        assert json.loads((folder / "toyworld.json").read_text())["seed"] == seed
    first = lambda data: data["train"][0][0].read_bytes()  # noqa: E731
    assert first(data_a) != first(data_b)  # another seed: other images
    assert len(labels_a["train"]) == 6 and len(labels_c["train"]) == 8 and len(labels_c["test"]) == 4


def test_an_old_export_directly_in_the_root_is_read_as_it_is(tmp_path):
    world = ToyWorldConfig()
    for split, n in (("train", 5), ("test", 3)):
        scenes = generate(world, n, seed=0, split=split)
        export_coco(scenes, tmp_path, split, world, 0)
        export_voc(scenes, tmp_path, split)
    write_toyworld_meta(tmp_path, world, 0)
    before = _snapshot(tmp_path)
    folder, _, _, labels = _toy(tmp_path, 5, 3, 0)
    assert folder == tmp_path and _snapshot(tmp_path) == before
    assert len(labels["train"]) == 5 and len(labels["test"]) == 3
    with pytest.raises(ValueError, match=r"n_train=6 .*'train' holds only 5"):
        _toy(tmp_path, 6, 3, 0)


def test_a_real_root_is_left_byte_identical(layouts):
    root = layouts["coco"]
    before = _snapshot(root)
    folder, data, names, labels = prepare_data(root, "coco", {"train2014": 0, "val2014": 0}, 0,
                                               size_names={"train2014": "n_train", "val2014": "n_test"})
    assert folder == root and _snapshot(root) == before
    records = read_coco_split(root, "train2014", captions=False)
    assert [p.name for p in data["train2014"][0]] == [r.file_name for r in records]  # 0: the whole split
    assert names == sorted({o.category for s in ("train2014", "val2014")
                            for r in read_coco_split(root, s, captions=False) for o in r.objects})
    assert labels["val2014"].shape == (len(read_coco_split(root, "val2014", captions=False)), len(names))


def test_n_train_and_n_test_take_effect_on_a_real_split(layouts):
    root, sizes = layouts["coco"], {"train2014": "n_train", "val2014": "n_test"}
    n_split = len(read_coco_split(root, "train2014", captions=False))
    def prep(n_tr, n_te, seed):
        return prepare_data(root, "coco", {"train2014": n_tr, "val2014": n_te}, seed, size_names=sizes)

    _, data, _, labels = prep(n_split - 2, 3, 0)
    files = [p.name for p in data["train2014"][0]]
    assert len(files) == len(labels["train2014"]) == n_split - 2 and len(labels["val2014"]) == 3
    assert files == sorted(files) and len(set(files)) == len(files)  # a subset, in file order
    assert [p.name for p in prep(n_split - 2, 3, 0)[1]["train2014"][0]] == files  # seeded
    draws = {tuple(p.name for p in prep(n_split - 2, 3, s)[1]["train2014"][0]) for s in range(6)}
    assert len(draws) > 1  # the draw follows the seed
    with pytest.raises(ValueError, match=rf"n_train={n_split + 1} .*'train2014' holds only {n_split}"):
        prep(n_split + 1, 3, 0)
    with pytest.raises(ValueError, match=r"n_test=99 .*'val2014'"):
        prep(0, 99, 0)


def test_toy_export_needs_positive_sizes_and_subsample_rules(tmp_path):
    with pytest.raises(ValueError, match="n_test must be > 0"):
        _toy(tmp_path / "zero", 4, 0, 0)
    assert not (tmp_path / "zero").exists() or not any(
        p.name.startswith("toy-") for p in (tmp_path / "zero").iterdir())
    np.testing.assert_array_equal(subsample(5, 0, 0, "a", "n"), np.arange(5))
    assert not np.array_equal(subsample(100, 10, 0, "train", "n"), subsample(100, 10, 0, "test", "n"))


def test_feature_cache_recomputes_when_an_image_is_rewritten(layouts, tmp_path):
    photos = sorted((layouts["coco"] / "train2014").glob("*.jpg"))[:4]
    folder = tmp_path / "images"
    folder.mkdir()
    paths = [folder / f"{k}.jpg" for k in range(3)]
    for src, dst in zip(photos, paths):
        shutil.copy(src, dst)
    calls = []

    def encode(ps):
        calls.append(len(ps))
        return torch.zeros(len(ps), 2, 1, 1), torch.zeros(len(ps), 2)

    cache = tmp_path / "cache" / "feats.pt"
    cached_features(cache, paths, encode)
    cached_features(cache, paths, encode)
    assert calls == [3]  # same files, same sizes and times: reused
    shutil.copy(photos[3], paths[1])  # another photo at the same path
    cached_features(cache, paths, encode)
    assert calls == [3, 3]  # recomputed
    cached_features(cache, paths, encode)
    assert calls == [3, 3]


def test_square_features_point_into_the_original_image():
    """The map of a square-resized image, stretched back over the original (argmax_point,
    as the pointing game and overlay_heatmap do), lands on the object in original pixels."""
    from PIL import Image
    from torchvision import transforms as T

    from fgclip.metrics.pointing import argmax_point
    from fgclip.studies.decoupling.features import square_transform

    image = Image.new("RGB", (120, 40))  # W x H, far from square
    box = (90, 20, 120, 40)  # the bottom-right quarter (x0, y0, x1, y1) is bright
    image.paste((255, 255, 255), box)
    x = square_transform(T.Compose([T.Resize(16), T.CenterCrop(16), T.ToTensor()]))(image)  # (3, 16, 16)
    heat = torch.nn.functional.avg_pool2d(x.mean(0, keepdim=True), 4)[0]  # a (4, 4) map
    px, py = argmax_point(heat, (40, 120))
    assert box[0] <= px <= box[2] and box[1] <= py <= box[3]



def test_a_validation_split_without_known_positives_is_refused_naming_val_fraction():
    from fgclip.studies.decoupling.data import check_validation_positives, split_validation

    labels = np.zeros((40, 4), dtype=np.int64)
    labels[np.arange(40), np.arange(40) % 4] = 1  # one positive per image, 10 per category
    fit_idx, val_idx = split_validation(40, 0.05, 0)  # 2 validation images: 2 positives in all
    with pytest.raises(ValueError, match="val_fraction.*10% known"):
        check_validation_positives(labels, [0.1, 0.5], list(range(6)), val_idx)
    check_validation_positives(labels, [0.9], [0], np.arange(40))  # 40 positives at 90%: fine


def test_feature_cache_key_follows_the_weights():
    import torch

    from fgclip.studies.decoupling.features import feature_cache_path, weights_digest

    a, b = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    assert weights_digest(a) != weights_digest(b)  # two random initialisations
    assert weights_digest(torch.nn.BatchNorm1d(2).to(torch.bfloat16))  # 0-dim buffers and bf16 too
    b.load_state_dict(a.state_dict())
    assert weights_digest(a) == weights_digest(b)
    path = lambda w: feature_cache_path("/c", "m", "none", "/d", "voc", "trainval", "T", w)  # noqa: E731
    assert path(weights_digest(a)) != path(weights_digest(torch.nn.Linear(3, 2)))


def test_real_voc_layout_at_10_percent_known_runs_or_is_refused_before_any_work(layouts, tmp_path):
    """The chapter on the real VOC 2007 layout (real photos) at 10% known with gpu-full's
    val_fraction: it either runs to its results, or stops before any image is encoded with an
    error that names val_fraction (the refusal comes right after the labels are read)."""
    from conftest import run_through_runner

    cache = tmp_path / "cache"
    params = {"data_root": str(layouts["voc"]), "data_format": "voc", "train_split": "trainval", "test_split": "test",
              "n_train": 0, "n_test": 0, "proportions": [0.1], "val_fraction": 0.1, "planted_n": [8, 8],
              "cache_dir": str(cache), "n_seeds": 2, "a_a_seeds": 2, "epochs": 1, "check_epochs": 0}
    try:
        results = run_through_runner("ch4", params, tmp_path / "runs")
    except Exception as err:  # papermill's error carries the cell's exception and message
        assert "val_fraction" in str(err) and "known positive" in str(err), str(err)[-2000:]
        print("refused:", str(err).strip().splitlines()[-1][:300])
        assert not list(cache.rglob("*.pt")), "features were encoded before the refusal"
    else:
        assert results["n_val"] >= 1 and results["verdicts"]
