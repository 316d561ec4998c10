"""Chapters on real data: small datasets in the real layouts, made of real photos (non-square,
of varied sizes; `fgclip.datasets.samples`), run end to end through `python -m fgclip run`
with a real open_clip architecture at random weights (the weights cannot be downloaded
here) and with the book's toy CLIP. Each run must read what the files hold."""
from pathlib import Path

import pytest

from fgclip.datasets import read_coco_split
from fgclip.runner import chapter_defaults, chapter_notebook

from conftest import N_REAL_IMAGES as N_IMAGES
from conftest import run_through_runner as run


def test_the_sample_layouts_hold_real_photos_of_varied_shape(layouts):
    records = read_coco_split(layouts["coco"], "val2017")
    sizes = {(r.width, r.height) for r in records}
    assert len(records) == N_IMAGES // 2 and len(sizes) == len(records)
    assert all(w != h for w, h in sizes)
    ids = {o.category_id for r in records for o in r.objects}
    assert ids - {1, 2, 3, 4, 5, 6}, "COCO's category ids are not contiguous"


def check_ch0(params, results):
    assert results["n_images"] == 20  # every image of the split (n_images asks for more), no more
    model = f"{params['model']} ({params['pretrained']})"
    metrics = results["metrics"][model]
    assert 0.0 <= metrics["i2t_R@1"] <= metrics["i2t_R@10"] <= 1.0
    # real photos: retrieval only, no toy shape score computed on generated scenes
    assert all(not any("shape" in k for k in row) for row in results["metrics"].values())
    # a random-init row only where it is other weights than the model's: none with pretrained none
    assert set(results["metrics"]) == {model} | (set() if params["pretrained"] == "none" else {"random init"})
    assert "random init" not in results["metrics"] or results["metrics"]["random init"] != metrics
    records = read_coco_split(params["data_root"], params["split"])[:results["n_images"]]
    assert results["categories"] == sorted({o.category for r in records for o in r.objects})


def check_ch0_page(params, results, page):
    """What the executed chapter shows on real data: the annotations' categories, not the toy
    vocabulary; a box that names the real photos' count and no toy quantity."""
    assert "base categories" not in page and "open vocabulary" not in page
    assert f"categories annotated in these 20 images: {len(results['categories'])} (" in page
    box = page[page.index("What we found"):]
    assert "shape classification reaches" not in box and "scene" not in box
    assert f"among {results['n_images']} for" in box and "of the real photos of val2017" in box
    assert "Skipped on real data: zero-shot shape classification and the stage" in box
    assert ("random init gets" in box) == (params["pretrained"] != "none")


def executed_outputs(folder: Path) -> str:
    """The text every output of the one notebook executed under ``folder`` shows."""
    import nbformat

    (path,) = folder.rglob("*.ipynb")
    texts = []
    for cell in nbformat.read(path, as_version=4).cells:
        for out in cell.get("outputs", []):
            texts.append(out.get("text", ""))
            texts += [out.get("data", {}).get(kind, "") for kind in ("text/markdown", "text/plain")]
    return "\n".join(t if isinstance(t, str) else "".join(t) for t in texts)


def check_ch1(params, results):
    """Cased captions, one caption longer than the text context (cut, its late phrase dropped
    and counted), the word-map figures and the "Try it" widget cell on real photos."""
    n_split = 20  # gpu_check.N_IMAGES // 2 photos per split
    assert results["n_images"] == {"fit": n_split - params["n_val"], "val": params["n_val"], "test": n_split}
    assert results["n_test_captions"] == 2 * n_split + 1  # the split's first image has the long caption
    assert results["truncated_captions"] == 1 and results["dropped_phrases"] == 1
    assert results["data_root"] == params["data_root"]  # read as it is: no toy export beside it
    assert sorted(p.name for p in Path(params["data_root"]).iterdir()) == [
        "Annotations", "Sentences", "flickr30k-images", "test.txt", "train.txt"]
    assert results["verdicts"] and results["bias_sweep"] == []


def check_ch2(params, results):
    # FOIL's test file holds one foil per image of val2014 (20); each draw samples max_pairs
    assert results["n_test_foils"] == params["n_seeds"] * min(params["max_pairs"], 20)
    assert results["verdicts"] and results["model"] == params["model"]


def check_ch3(params, results):
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


def check_ch4(params, results):
    root, train, test = Path(params["data_root"]), params["train_split"], params["test_split"]
    records = {s: read_coco_split(root, s, captions=False) for s in (train, test)}
    want = {s: params[n] or len(records[s]) for s, n in ((train, "n_train"), (test, "n_test"))}
    assert results["n_train"] == want[train] and results["n_test"] == want[test]
    assert results["n_fit"] + results["n_val"] == want[train]
    present = sorted({o.category for rs in records.values() for r in rs for o in r.objects})
    if want[train] == len(records[train]) and want[test] == len(records[test]):
        assert results["categories"] == present  # every image read: every category the files hold
    else:
        assert set(results["categories"]) <= set(present)
    assert results["model"] == params["model"] and results["seeds"] == [0, 1][:params["n_seeds"]]
    assert results["verdicts"] and results["controls"]


CHECKS = {"ch0": check_ch0, "ch1": check_ch1, "ch2": check_ch2, "ch3": check_ch3, "ch4": check_ch4}
# On top of the gpu-full parameters at gpu_check's reduced sizes, what each run changes to fit a
# 2-core CPU. ch4: every code path (six variants, the selection grid, planted controls, the A/A
# control, pointing) still runs, with two epochs, two seeds (two a side in the A/A control), a small
# rank and larger batches, and a convergence check of one epoch past the budget (gpu-full's five
# would train every arm, all chosen within them, to seven epochs: most of the run).
# ch3: the same folds, arms and controls with a narrower, shallower decoder of fewer queries.
CPU = {"ch0": {"n_images": 100}, "ch3": {"n_queries": 8, "n_layers": 1, "d_model": 64},
       "ch4": {"epochs": 2, "check_epochs": 1, "n_seeds": 2, "selection_seeds": 2, "a_a_seeds": 2, "batch_size": 32,
               "rank": 32}}


@pytest.mark.parametrize("clip", ["real architecture", "toy CLIP"])
@pytest.mark.parametrize("chapter", sorted(CHECKS))
def test_chapter_on_real_data(chapter, clip, plans, tmp_path):
    """A real architecture at random weights (ViT-B-32 for chapters 0-2, the gpu-full ResNet
    for 3-4) or the book's committed toy CLIP, on the same real-layout data."""
    params = {**plans[chapter], **CPU.get(chapter, {})}
    if chapter == "ch0":  # its gpu-full set pretrains the toy CLIP; read the photos with ViT-B-32 instead
        params = {k: params[k] for k in ("data_root", "split", "n_images", "device")} | {
            "model": "ViT-B-32", "pretrained": "none"}
    if clip == "toy CLIP":
        defaults = chapter_defaults(chapter_notebook(chapter))
        params.update(model=defaults["model"], pretrained=defaults["pretrained"])
    results = run(chapter, params, tmp_path)
    CHECKS[chapter](params, results)
    if chapter == "ch0":
        check_ch0_page(params, results, executed_outputs(tmp_path / chapter))
