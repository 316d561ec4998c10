"""data_scripts/prepare_*.py: they find a complete layout complete, name what is missing,
and build the layouts the chapters read (checked by reading them back)."""
import subprocess
import sys
from pathlib import Path

import pytest

from fgclip.datasets import read_coco_split, read_flickr30k_entities, read_voc
from fgclip.datasets.prepare import (check_coco, check_voc, prepare_class_names,
                                     prepare_flickr30k_entities, vocabulary_overlap)
from fgclip.toyworld import ToyWorldConfig, generate
from fgclip.toyworld.export import export_coco, export_flickr30k_entities, export_voc

REPO = Path(__file__).resolve().parents[1]
WORLD = ToyWorldConfig()


def script(name: str, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "data_scripts" / name), *map(str, args)],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def scenes():
    return generate(WORLD, 4, seed=0, split="val")  # exported under the name val2017


def test_coco_layout_complete_then_missing(tmp_path, scenes):
    export_coco(scenes, tmp_path, "val2017", WORLD, 0)
    report = check_coco(tmp_path, ["val2017"])
    assert report.ok, report.text()
    assert len(read_coco_split(tmp_path, "val2017")) == 4
    victim = next((tmp_path / "val2017").iterdir())
    victim.unlink()
    report = check_coco(tmp_path, ["val2017"])
    assert not report.ok and "3 of 4 present" in report.text() and victim.name in report.text()
    run = script("prepare_coco.py", "--root", tmp_path, "--splits", "val2017", "train2017")
    assert run.returncode == 1
    assert "MISSING  instances of train2017" in run.stdout


def test_voc_layout_is_checked_per_listed_id(tmp_path, scenes):
    export_voc(scenes, tmp_path, "test")
    assert check_voc(tmp_path, ["test"]).ok
    assert len(read_voc(tmp_path, "test")) == 4
    run = script("prepare_voc.py", "--root", tmp_path, "--splits", "test", "trainval")
    assert run.returncode == 1 and "MISSING  image list of trainval" in run.stdout


def test_flickr30k_entities_is_linked_from_its_two_downloads(tmp_path):
    scenes = generate(WORLD, 3, seed=0, split="test")
    export_flickr30k_entities(scenes, tmp_path / "download", "test")
    annotations = tmp_path / "annotations"  # as annotations.zip unpacks
    annotations.mkdir()
    for name in ("Annotations", "Sentences", "test.txt"):
        (tmp_path / "download" / name).rename(annotations / name)
    report = prepare_flickr30k_entities(annotations, tmp_path / "download" / "flickr30k-images",
                                        tmp_path / "out", ["test"])
    assert report.ok, report.text()
    assert len(read_flickr30k_entities(tmp_path / "out", "test")) == 3
    # rerunning keeps the links; a missing photo is named
    next((tmp_path / "download" / "flickr30k-images").iterdir()).unlink()
    run = script("prepare_flickr30k_entities.py", "--annotations", annotations, "--images",
                 tmp_path / "download" / "flickr30k-images", "--out", tmp_path / "out", "--splits", "test")
    assert run.returncode == 1 and "photos of test (2 of 3 present" in run.stdout


def test_class_names_keep_the_first_lemma_and_never_add_names(tmp_path):
    lemmas = tmp_path / "lemmas.txt"
    lemmas.write_text("dog, domestic dog, Canis familiaris\nteddy_bear, teddy\n\nDog, hound\ncat\n")
    names = prepare_class_names(lemmas, tmp_path / "names.txt")
    assert names == ["dog", "teddy bear", "cat"]
    assert (tmp_path / "names.txt").read_text() == "dog\nteddy bear\ncat\n"
    assert vocabulary_overlap(names, ["cat", "airplane", "Teddy Bear"]) == ["cat", "Teddy Bear"]
    run = script("prepare_imagenet21k_names.py", "--lemmas", lemmas, "--out", tmp_path / "n2.txt",
                 "--report-categories", "airplane", "cat")
    assert run.returncode == 0 and "holds 1 of 2 categories: cat" in run.stdout
    (tmp_path / "empty.txt").write_text("\n, x\n")
    with pytest.raises(ValueError, match="empty first lemma"):
        prepare_class_names(tmp_path / "empty.txt", tmp_path / "n3.txt")


def test_voc2012_and_readable_names(tmp_path, scenes):
    from fgclip.datasets import read_detection_split, readable_class_name
    from fgclip.datasets.samples import photo_crops, write_voc

    write_voc(tmp_path / "VOCdevkit", "val", photo_crops(3, 0), 0, 1)
    (tmp_path / "VOCdevkit" / "VOC2007").rename(tmp_path / "VOCdevkit" / "VOC2012")
    paths, objects, sizes = read_detection_split(tmp_path / "VOCdevkit", "val", "voc", year="VOC2012")
    assert len(paths) == 3 and all(h != w for h, w in sizes)
    names = {n for objs in objects for n, _ in objs}
    assert "pottedplant" in names and readable_class_name("pottedplant") == "potted plant"
    assert readable_class_name("dog") == "dog"


def test_foil_v1_files_are_laid_out_with_a_seeded_val_split(tmp_path):
    from fgclip.datasets import read_foil_split
    from fgclip.datasets.prepare import prepare_foil
    from fgclip.datasets.samples import build_real_layouts

    layouts = build_real_layouts(tmp_path / "real", n_images=8)
    coco, download = layouts["coco"], layouts["foil_download"]
    counts = prepare_foil(download / "foilv1.0_train_2017.json", coco / "train2014", tmp_path / "foil",
                          "train", val_fraction=0.5, seed=0)
    assert counts == {"train": 2, "val": 2}
    again = prepare_foil(download / "foilv1.0_train_2017.json", coco / "train2014", tmp_path / "foil2",
                         "train", val_fraction=0.5, seed=0)
    read = lambda root, s: sorted(p.image_id for p in read_foil_split(root, s).pairs)
    assert read(tmp_path / "foil", "val") == read(tmp_path / "foil2", "val")  # seeded
    assert not set(read(tmp_path / "foil", "val")) & set(read(tmp_path / "foil", "train"))
    run = script("prepare_foil.py", "--foil", download / "foilv1.0_test_2017.json", "--coco-images",
                 coco / "val2014", "--out", tmp_path / "foil", "--split", "test")
    assert run.returncode == 0, run.stderr
    assert "foil_test.json: 4 images, 4 (original, foil) pairs" in run.stdout
    pair = read_foil_split(tmp_path / "foil", "test").pairs[0]
    assert pair.image_path.is_file() and pair.original != pair.foiled
