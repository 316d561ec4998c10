"""Chapter 3's data: the toy export as a keyed cache, real roots read as they are, the
vocabulary file checked up front, boxes drawn in the shown image's pixels, and a real
run described in its own counts (no toy wording)."""
import json

import matplotlib
import numpy as np
import pytest
import torch

matplotlib.use("Agg")

from fgclip.datasets import read_coco_split  # noqa: E402
from fgclip.runner import ParameterError  # noqa: E402
from fgclip.studies.for_retrieval.data import (coco_root, data_facts, data_sentence, open_vocabulary)
from fgclip.toyworld import ToyWorldConfig  # noqa: E402
from fgclip.toyworld.cache import COMPLETE  # noqa: E402
from fgclip.toyworld.export import load_toyworld_meta  # noqa: E402
import fgclip.viz.retrieval as retrieval  # noqa: E402

from conftest import run_through_runner  # noqa: E402


def _tree(root):
    return sorted((str(p.relative_to(root)), p.stat().st_mtime_ns) for p in root.rglob("*"))


def _first_image(root, split):
    return read_coco_split(root, split, captions=False)[0].image_path.read_bytes()


def test_toy_export_is_keyed_by_seed_and_size(tmp_path):
    world = ToyWorldConfig()
    r0 = coco_root(tmp_path, {"train": 4, "test": 3}, world, seed=0)
    r1 = coco_root(tmp_path, {"train": 4, "test": 3}, world, seed=1)
    r_big = coco_root(tmp_path, {"train": 6, "test": 3}, world, seed=0)
    assert len({r0, r1, r_big}) == 3
    assert all(r.parent == tmp_path and r.name.startswith("toy-") for r in (r0, r1, r_big))
    assert [load_toyworld_meta(r)["seed"] for r in (r0, r1, r_big)] == [0, 1, 0]
    assert json.loads((r1 / COMPLETE).read_text())["seed"] == 1
    assert _first_image(r0, "train") != _first_image(r1, "train")  # another seed, other images
    assert [len(read_coco_split(r_big, s, captions=False)) for s in ("train", "test")] == [6, 3]
    before = _tree(r0)
    assert coco_root(tmp_path, {"train": 4, "test": 3}, world, seed=0) == r0 and _tree(r0) == before  # reused
    assert not (tmp_path / "annotations").exists()  # nothing flat in data_root
    with pytest.raises(ValueError, match="differ"):
        coco_root(tmp_path, {"train": 4}, world, seed=0)


def test_a_real_root_is_read_as_it_is_and_never_written_into(layouts):
    root = layouts["coco"]
    before = _tree(root)
    assert coco_root(root, {"train2017": 5, "val2017": 5}, ToyWorldConfig(), seed=3) == root
    with pytest.raises(ValueError, match="train_split"):  # the toy defaults on a real root
        coco_root(root, {"train": 5, "test": 5}, ToyWorldConfig(), seed=0)
    assert _tree(root) == before


def test_open_vocabulary_names_the_parameter(tmp_path):
    assert open_vocabulary({"open_vocabulary": ["a", "b"]}, "") == ["a", "b"]
    for bad in ("", str(tmp_path), str(tmp_path / "missing.txt")):
        with pytest.raises(ValueError, match="vocabulary_file.*prepare_imagenet21k_names"):
            open_vocabulary(None, bad)
    (tmp_path / "names.txt").write_text("dog\n\n cat \n")
    assert open_vocabulary(None, str(tmp_path / "names.txt")) == ["dog", "cat"]
    (tmp_path / "empty.txt").write_text("\n")
    with pytest.raises(ValueError, match="vocabulary_file"):
        open_vocabulary(None, str(tmp_path / "empty.txt"))


def test_data_facts_state_the_runs_own_counts():
    toy = data_facts(True, list("abcdef"), [["a", "b"], ["c", "d"], ["e", "f"]], ["a", "c", "x"], (4, 4))
    real = data_facts(False, ["dog", "cat", "car"], [["cat", "dog"]], ["dog", "tree"], (7, 9))
    assert toy["novel_per_fold"] == [2, 2, 2] and toy["novel_in_vocabulary"] == 2 and toy["grid"] == [4, 4]
    assert real["novel_per_fold"] == [2] and real["novel_in_vocabulary"] == 1 and real["vocabulary_size"] == 2
    assert "lower bound" in real["precision_against"] and "toy" not in data_sentence(real)
    assert "7x9" in data_sentence(real) and "one novel split of 2" in data_sentence(real)
    assert "3 rotated novel folds of 2, 2, 2" in data_sentence(toy) and "complete" in data_sentence(toy)


def test_widget_draws_boxes_in_the_shown_images_pixels(monkeypatch):
    drawn = []
    monkeypatch.setattr(retrieval, "overlay_heatmap", lambda ax, image, heat, boxes=(), **kw: drawn.append(
        (image.shape[:2], list(boxes))))
    emb = torch.nn.functional.normalize(torch.randn(3, 2, 4, generator=torch.Generator().manual_seed(0)), dim=-1)
    attn = torch.softmax(torch.randn(3, 2, 5), -1)
    images = np.zeros((3, 16, 32, 3), np.uint8)  # shown at (H', W') = (16, 32)
    boxes = [[(0.0, 0.0, 128.0, 32.0)], [(64.0, 8.0, 96.0, 16.0)], []]  # in the original (H, W) = (32, 128)
    draw = retrieval.make_retrieval_draw(lambda n: emb[0, 0], emb, attn, images, (2, 2), boxes=boxes,
                                         box_sizes=[(32, 128)] * 3)
    draw("x", k=3)
    by_shape = {tuple(b[0]) if b else () for _, b in drawn}
    assert by_shape == {(0.0, 0.0, 32.0, 16.0), (16.0, 4.0, 24.0, 8.0), ()}  # x * 32/128, y * 16/32
    assert all(hw == (16, 32) for hw, _ in drawn)
    with pytest.raises(ValueError, match="box_sizes"):
        retrieval.make_retrieval_draw(lambda n: emb[0, 0], emb, attn, images, (2, 2), boxes=boxes)


def test_real_coco_without_vocabulary_file_fails_early_naming_it(plans, tmp_path):
    params = {k: v for k, v in plans["ch3"].items() if k != "vocabulary_file"}
    with pytest.raises(ParameterError, match="'vocabulary_file'.*prepare_imagenet21k_names") as err:
        run_through_runner("ch3", params, tmp_path)  # refused by the runner's checks, before any cell runs
    assert "real data" in str(err.value)
    assert not any(tmp_path.rglob("*.ipynb"))  # nothing was started

