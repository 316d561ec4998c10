"""Chapters on real data: small datasets in the real layouts, made of real photos (non-square,
of varied sizes; `fgclip.datasets.samples`), run end to end through `python -m fgclip run`
with a real open_clip architecture at random weights (the weights cannot be downloaded
here). Each run must read what the files hold."""
import json
import os
from pathlib import Path

import pytest

from fgclip.datasets import read_coco_split
from fgclip.runner import run_chapter

from conftest import N_REAL_IMAGES as N_IMAGES
from conftest import run_through_runner as run


def test_the_sample_layouts_hold_real_photos_of_varied_shape(layouts):
    records = read_coco_split(layouts["coco"], "val2017")
    sizes = {(r.width, r.height) for r in records}
    assert len(records) == N_IMAGES // 2 and len(sizes) == len(records)
    assert all(w != h for w, h in sizes)
    ids = {o.category_id for r in records for o in r.objects}
    assert ids - {1, 2, 3, 4, 5, 6}, "COCO's category ids are not contiguous"


def test_ch0_on_real_coco_with_a_real_architecture(layouts, tmp_path):
    results = run("ch0", {"data_root": str(layouts["coco"]), "split": "val2017",
                          "model": "ViT-B-32", "pretrained": "none", "n_images": 100}, tmp_path)
    assert results["n_images"] == N_IMAGES // 2  # every image of the split, no more
    metrics = results["metrics"]["ViT-B-32 (none)"]
    assert 0.0 <= metrics["i2t_R@1"] <= 1.0 and metrics["i2t_R@10"] == 1.0  # 6 candidates


def test_ch2_on_real_foil_with_a_real_architecture(plans, tmp_path):
    results = run("ch2", plans["ch2"], tmp_path)
    n_seeds, max_pairs = plans["ch2"]["n_seeds"], plans["ch2"]["max_pairs"]
    # FOIL's test file holds one foil per image of val2014 (20); each draw samples max_pairs
    assert results["n_test_foils"] == n_seeds * min(max_pairs, 20)
    assert results["verdicts"] and results["model"] == "ViT-B-32"


def test_ch3_on_real_coco_with_a_real_architecture(plans, tmp_path):
    params = plans["ch3"]
    results = run("ch3", params, tmp_path)
    assert results["n_eval"] == 20 and results["n_train"] + results["n_val"] == 20
    assert results["verdicts"]
    # every sentence about the data comes from the data: no toy-world wording on real COCO
    facts, found = results["data"], results["found"]
    names = [v.strip() for v in open(params["vocabulary_file"]).read().splitlines() if v.strip()]
    assert facts["data"].startswith("real") and "lower bound" in facts["precision_against"]
    assert facts["novel_per_fold"] == [len(params["novel_categories"])]
    assert facts["novel_in_vocabulary"] == sum(c in names for c in params["novel_categories"])
    assert facts["vocabulary_size"] == len(names)
    h, w = facts["grid"]
    assert f"{h}x{w}" in found[0] and f"{facts['vocabulary_size']}-name" in found[0]
    assert not any("toy" in b.lower() for b in found)
    assert any(facts["precision_against"] in b for b in found)  # the τ bullet's precision is qualified


def test_ch1_on_real_flickr30k_entities_with_a_real_architecture(plans, tmp_path):
    """Cased captions, one caption longer than the text context (cut, its late phrase dropped
    and counted), the word-map figures and the "Try it" widget cell on real photos."""
    params = plans["ch1"]
    results = run("ch1", params, tmp_path)
    n_split = 20  # gpu_check.N_IMAGES // 2 photos per split
    assert results["n_images"] == {"fit": n_split - params["n_val"], "val": params["n_val"], "test": n_split}
    assert results["n_test_captions"] == 2 * n_split + 1  # the split's first image has the long caption
    assert results["truncated_captions"] == 1 and results["dropped_phrases"] == 1
    assert results["data_root"] == params["data_root"]  # read as it is: no toy export beside it
    assert sorted(p.name for p in Path(params["data_root"]).iterdir()) == [
        "Annotations", "Sentences", "flickr30k-images", "test.txt", "train.txt"]
    assert results["verdicts"] and results["bias_sweep"] == []
