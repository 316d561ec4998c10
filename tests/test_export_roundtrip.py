"""Toy world -> real-format files -> real-format readers gives back the toy ground truth."""
import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from fgclip.datasets import (read_coco_split, read_flickr30k_entities, read_foil_split, read_voc,
                             xyxy_to_voc)
from fgclip.fileio import atomic_write_text
from fgclip.toyworld import Caption, Phrase, Scene, ToyObject, ToyWorldConfig, generate
from fgclip.toyworld.export import (COCO_CATEGORIES, config_from_dict, default_category_split,
                                    export_all, export_flickr30k_entities, export_voc,
                                    load_toyworld_meta, write_toyworld_meta)

CFG = ToyWorldConfig(image_size=64)
SEED = 11
N = {"train": 20, "val": 3}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("toy")
    out = export_all(CFG, root, SEED, N)
    scenes = {split: generate(CFG, n, seed=SEED, split=split) for split, n in N.items()}
    return out, scenes


def test_export_writes_every_format_and_no_temp_files(exported):
    out, _ = exported
    assert set(out) == {"coco", "flickr30k_entities", "foil", "voc"}
    files = [p for folder in out.values() for p in folder.rglob("*") if p.is_file()]
    assert not [p for p in files if p.name.endswith(".tmp")]
    assert sum(p.suffix == ".png" for p in files) == 4 * sum(N.values())


def test_coco_roundtrip(exported):
    out, scenes = exported
    recs = read_coco_split(out["coco"], "train")
    assert [r.image_id for r in recs] == [s.image_id for s in scenes["train"]]
    for rec, scene in zip(recs, scenes["train"]):
        assert rec.boxes == [o.box for o in scene.objects]
        assert rec.category_names == [o.category for o in scene.objects]
        assert rec.labels == scene.labels
        assert rec.captions == [c.text for c in scene.captions]
        assert [o.category_id for o in rec.objects] == [
            COCO_CATEGORIES.index(o.category) + 1 for o in scene.objects]
    assert np.array_equal(np.asarray(Image.open(recs[0].image_path)), scenes["train"][0].image)


def test_coco_categories_are_fixed_and_one_based(exported):
    out, _ = exported
    data = json.loads((out["coco"] / "annotations" / "instances_train.json").read_text())
    assert [c["id"] for c in data["categories"]] == list(range(1, len(COCO_CATEGORIES) + 1))
    assert [c["name"] for c in data["categories"]] == list(COCO_CATEGORIES)
    assert {c["supercategory"] for c in data["categories"]} == {"shape"}
    assert {a["iscrowd"] for a in data["annotations"]} == {0}


def test_flickr_roundtrip_phrases_and_boxes(exported):
    out, scenes = exported
    recs = read_flickr30k_entities(out["flickr30k_entities"], "train")
    assert [r.image_id for r in recs] == [str(s.image_id) for s in scenes["train"]]
    n_phrases = 0
    for rec, scene in zip(recs, scenes["train"]):
        assert [s.text for s in rec.sentences] == [c.text for c in scene.captions]
        for sent, cap in zip(rec.sentences, scene.captions):
            assert [(p.text, p.first_word) for p in sent.phrases] == [
                (p.text, p.first_word) for p in cap.phrases]
            for got, want in zip(sent.phrases, cap.phrases):
                assert got.entity_id == want.object_ids[0] + 1 and got.types == ("shape",)
                assert got.boxes == [scene.objects[want.object_ids[0]].box]
                assert got.box_status == "box"
                n_phrases += 1
    assert n_phrases > 40


def test_foil_roundtrip_positions_and_words(exported):
    out, scenes = exported
    split = read_foil_split(out["foil"], "val")
    want = [(s.image_id, s.captions[f.caption_index].text, f)
            for s in scenes["val"] for f in s.foils]
    assert len(split.pairs) == len(want) and split.originals_without_foil == []
    for pair, (image_id, original, foil) in zip(split.pairs, want):
        assert (pair.image_id, pair.original, pair.foiled) == (image_id, original, foil.text)
        assert (pair.word_index, pair.target_word, pair.foil_word, pair.foil_type) == (
            foil.word_index, foil.target_word, foil.foil_word, foil.foil_type)
        assert (pair.target_span, pair.foil_span) == (foil.target_word, foil.foil_word)
    assert len({p.foil_id for p in split.pairs}) == len(split.pairs)


def test_foil_originals_are_marked_orig(exported):
    out, _ = exported
    anns = json.loads((out["foil"] / "foil_train.json").read_text())["annotations"]
    originals = [a for a in anns if not a["foil"]]
    foils = [a for a in anns if a["foil"]]
    assert {(a["target_word"], a["foil_word"]) for a in originals} == {("ORIG", "ORIG")}
    # FOIL v1.0: one original per caption id, its foils share that id; foil_id is unique
    assert len({a["id"] for a in originals}) == len(originals)
    assert {a["id"] for a in foils} <= {a["id"] for a in originals}
    assert len({a["foil_id"] for a in anns}) == len(anns)


def test_voc_roundtrip_and_trainval(exported):
    out, scenes = exported
    recs = read_voc(out["voc"], "train")
    for rec, scene in zip(recs, scenes["train"]):
        assert int(rec.image_id) == scene.image_id and rec.labels == scene.labels
        assert [(o.name, o.box) for o in rec.objects] == [
            (o.category, o.box) for o in scene.objects]
        assert [o.occluded for o in rec.objects] == [o.visible_fraction < 1 for o in scene.objects]
        assert not any(o.truncated or o.difficult for o in rec.objects)
    trainval = read_voc(out["voc"], "trainval")
    assert len(trainval) == N["train"] + N["val"]


def test_voc_xml_uses_one_based_inclusive_pixels(tmp_path):
    obj = ToyObject(0, "square", "red", "small", (0.5, 0.5), 1.0, (0.0, 0.0, 1.0, 1.0), 1.0)
    scene = Scene(7, np.zeros((16, 16, 3), np.uint8), [obj])
    export_voc([scene], tmp_path, "val")
    xml = (tmp_path / "VOC2007/Annotations/000007.xml").read_text()
    assert "<xmin>1</xmin>" in xml and "<xmax>1</xmax>" in xml  # one pixel at the corner
    assert read_voc(tmp_path, "val")[0].objects[0].box == (0.0, 0.0, 1.0, 1.0)
    assert xyxy_to_voc(obj.box) == (1, 1, 1, 1)


def test_flickr_group_phrase_gets_its_own_entity_with_every_box(tmp_path):
    objs = [ToyObject(k, "circle", "red", "small", (4.0 + 8 * k, 4.0), 3.0,
                      (1.0 + 8 * k, 1.0, 8.0 + 8 * k, 8.0), 1.0) for k in range(2)]
    cap = Caption("two red circles", "group", [Phrase("two red circles", 0, [0, 1], "circle")])
    export_flickr30k_entities([Scene(3, np.zeros((16, 16, 3), np.uint8), objs, [cap])],
                              tmp_path, "test")
    assert (tmp_path / "Sentences/3.txt").read_text() == "[/EN#3/shape two red circles]\n"
    (rec,) = read_flickr30k_entities(tmp_path, "test")
    (phrase,) = rec.sentences[0].phrases
    assert phrase.entity_id == 3 and phrase.boxes == [objs[0].box, objs[1].box]


def test_toyworld_meta_roundtrip_and_guard(exported, tmp_path):
    out, _ = exported
    meta = load_toyworld_meta(out["coco"])
    assert meta["seed"] == SEED and config_from_dict(meta["config"]) == CFG
    split = default_category_split(CFG)
    assert meta["category_split"] == {"base": list(split.base), "novel": list(split.novel)}
    assert meta["open_vocabulary"][:len(CFG.categories)] == list(CFG.categories)
    assert load_toyworld_meta(tmp_path) is None  # real data: no meta, and that is fine
    write_toyworld_meta(tmp_path, CFG, SEED)
    with pytest.raises(ValueError, match="another toy world"):
        write_toyworld_meta(tmp_path, CFG, SEED + 1)


def test_atomic_write_keeps_old_file_when_replace_fails(tmp_path, monkeypatch):
    path = atomic_write_text(tmp_path / "a.txt", "old")

    def boom(src, dst):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_text(path, "new")
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_cli_exports_with_knobs(tmp_path):
    script = Path(__file__).parents[1] / "data_scripts" / "export_toyworld.py"
    spec = importlib.util.spec_from_file_location("export_toyworld", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = mod.main(["--root", str(tmp_path), "--n-train", "2", "--n-val", "0", "--n-test", "1",
                    "--formats", "coco,voc", "--center-bias", "0.9", "--image-size", "32",
                    "--max-objects", "2"])
    assert set(out) == {"coco", "voc"}
    cfg = config_from_dict(load_toyworld_meta(tmp_path / "coco")["config"])
    assert (cfg.center_bias, cfg.image_size, cfg.max_objects) == (0.9, 32, 2)
    recs = read_coco_split(tmp_path / "coco", "test")
    assert len(recs) == 1 and recs[0].width == 32
    assert not (tmp_path / "coco/annotations/instances_val.json").exists()
    with pytest.raises(SystemExit):
        mod.parse_args(["--root", str(tmp_path), "--formats", "coco,kitti"])


def test_detection_split_reads_both_formats_alike(exported):
    from fgclip.datasets import read_detection_split
    out, scenes = exported
    coco = read_detection_split(out["coco"], "train", "coco")
    voc = read_detection_split(out["voc"], "train", "voc")
    want = [[(o.category, o.box) for o in s.objects] for s in scenes["train"]]
    assert coco[1] == want and voc[1] == want
    assert coco[2] == voc[2] == [(CFG.image_size, CFG.image_size)] * N["train"]
    assert all(Path(p).is_file() for p in coco[0] + voc[0])
    with pytest.raises(ValueError, match="data_format"):
        read_detection_split(out["coco"], "train", "kitti")


def test_foil_caption_rows_list_each_foil_then_each_original_once(exported):
    from fgclip.datasets import foil_caption_rows
    out, _ = exported
    split = read_foil_split(out["foil"], "val")
    rows = foil_caption_rows(split)
    foils = [r for r in rows if r["foil_type"] != "original"]
    originals = [r for r in rows if r["foil_type"] == "original"]
    assert [r["caption"] for r in foils] == [p.foiled for p in split.pairs]
    assert [r["target"] for r in foils] == [p.word_index for p in split.pairs]
    assert len(originals) == len({p.original_annotation_id for p in split.pairs})
    assert all(r["target"] is None for r in originals)
    assert rows[:len(foils)] == foils  # foils first
    assert len([r for r in foil_caption_rows(split, max_pairs=2) if r["foil_type"] != "original"]) == 2
    with pytest.raises(ValueError, match="max_pairs"):
        foil_caption_rows(split, max_pairs=-1)


def test_load_image_batch_dedupes_and_matches_open_clip_preprocess(exported):
    import torch
    from fgclip.models import create_clip, load_image_batch
    out, _ = exported
    paths = sorted(str(p) for p in (out["coco"] / "train").glob("*"))[:3]
    clip = create_clip("toy-vit", pretrained=None)
    raw, tensor, index = load_image_batch([paths[1], paths[0], paths[1], paths[2]], clip)
    assert index == [1, 0, 1, 2] and tensor.shape == (3, 3, 64, 64) and raw[0].dtype == np.uint8
    want = torch.stack([clip.preprocess(Image.open(p).convert("RGB")) for p in paths])
    torch.testing.assert_close(tensor, want, atol=1e-5, rtol=1e-5)  # same size: no resize at all
    with pytest.raises(FileNotFoundError, match="missing.png"):
        load_image_batch([str(out["coco"] / "missing.png")], clip)


def test_encode_image_paths_matches_one_batch_of_all_images(exported):
    import torch
    from fgclip.models import create_clip, encode_image_paths, load_image_batch
    out, _ = exported
    paths = sorted(str(p) for p in (out["coco"] / "train").glob("*"))[:3]
    clip = create_clip("toy-vit", pretrained=None)
    asked = [paths[2], paths[0], paths[2], paths[1]]
    feats, index = encode_image_paths(clip, asked, batch_size=2)  # two batches of pixels
    _, tensor, want_index = load_image_batch(asked, clip)
    with torch.no_grad():
        want = clip.model.encode_image(tensor)
    assert index == want_index == [2, 0, 2, 1] and feats.shape == want.shape
    torch.testing.assert_close(feats, want, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="no image paths"):
        encode_image_paths(clip, [])


def test_atomic_write_stream_leaves_nothing_when_the_writer_fails(tmp_path):
    from fgclip.fileio import atomic_write_stream

    path = atomic_write_stream(tmp_path / "a.bin", lambda f: f.write(b"old"))

    def half(f):
        f.write(b"half")
        raise RuntimeError("killed while writing")
    with pytest.raises(RuntimeError, match="killed"):
        atomic_write_stream(path, half)
    assert path.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["a.bin"]
