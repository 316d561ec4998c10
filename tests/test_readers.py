"""Real-format readers on hand-written fixtures, and every bad-input case raising
DatasetFormatError with the file and the line or field in its message."""
import json
import pickle
import re
import shutil
from pathlib import Path

import pytest

from fgclip.datasets import (DatasetFormatError, foil_position, parse_sentence, read_annotation,
                             read_coco, read_coco_split, read_flickr30k_entities, read_foil,
                             read_sentences, read_voc, read_voc_annotation, voc_to_xyxy,
                             xyxy_to_voc)

FIX = Path(__file__).parent / "fixtures"
approx = pytest.approx


def copy_fixture(name: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIX / name, tmp_path / name))


def edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


# ------------------------------------------------------------------------ COCO fixture
def test_coco_fixture_boxes_categories_and_captions():
    recs = read_coco_split(FIX / "coco", "val2017", check_images=False)
    assert [r.image_id for r in recs] == [397133, 37777]
    a, b = recs
    assert (a.width, a.height, a.file_name) == (640, 427, "000000397133.jpg")
    assert a.image_path == FIX / "coco" / "val2017" / "000000397133.jpg"
    assert a.category_names == ["person", "bottle"]
    assert a.boxes[0] == approx((388.66, 69.92, 498.07, 347.54))
    assert a.boxes[1] == approx((217.62, 240.54, 256.61, 298.29))
    assert a.captions == ["A man is in a kitchen making pizzas.",
                          "Man in apron standing on front of oven with pans and bakeware"]
    assert b.labels == {"dining table", "person"}
    assert b.boxes[0] == approx((0.0, 135.8, 351.0, 230.0))
    assert [o.iscrowd for o in b.objects] == [False, True]
    assert b.objects[1].annotation_id == 900100037777 and b.objects[1].area == 1200.0


def test_coco_without_captions_file():
    recs = read_coco(FIX / "coco/annotations/instances_val2017.json", FIX / "coco/val2017",
                     check_images=False)
    assert all(r.captions == [] for r in recs) and len(recs[0].objects) == 2


def coco_copy(tmp_path: Path) -> Path:
    return copy_fixture("coco", tmp_path) / "annotations" / "instances_val2017.json"


def test_coco_missing_file(tmp_path):
    with pytest.raises(DatasetFormatError, match=r"instances_nosuch\.json: missing"):
        read_coco_split(tmp_path, "nosuch", check_images=False)


def test_coco_missing_image_file_when_checked():
    with pytest.raises(DatasetFormatError,
                       match=r"instances_val2017\.json \[images\[0\]\.file_name\]: image file "
                             r"not found: .*000000397133\.jpg"):
        read_coco_split(FIX / "coco", "val2017")


@pytest.mark.parametrize("change, field, message", [
    (lambda d: d["annotations"][1].update(category_id=90), r"annotations\[1\]\.category_id",
     "category id 90 not in categories"),
    (lambda d: d["annotations"][0]["bbox"].__setitem__(2, "109"), r"annotations\[0\]\.bbox\[2\]",
     "not a number"),
    (lambda d: d["annotations"][0].update(bbox=[600.0, 10.0, 100.0, 10.0]),
     r"annotations\[0\]\.bbox", "outside the 640x427 image"),
    (lambda d: d["annotations"][2].update(bbox=[5.0, 5.0, 0.0, 10.0]), r"annotations\[2\]\.bbox",
     "empty box"),
    (lambda d: d["annotations"][3].pop("bbox"), r"annotations\[3\]\.bbox", "missing field"),
    (lambda d: d["annotations"][0].update(image_id=5), r"annotations\[0\]\.image_id",
     "image id 5 not in images"),
    (lambda d: d["images"][1].pop("width"), r"images\[1\]\.width", "missing field"),
    (lambda d: d.pop("categories"), r"categories", "missing or not a list"),
])
def test_coco_bad_instances(tmp_path, change, field, message):
    path = coco_copy(tmp_path)
    edit_json(path, change)
    pattern = rf"instances_val2017\.json \[{field}\]: .*{message}"
    with pytest.raises(DatasetFormatError, match=pattern):
        read_coco_split(path.parent.parent, "val2017", check_images=False)


def test_coco_invalid_json_names_the_line(tmp_path):
    path = coco_copy(tmp_path)
    lines = path.read_text().splitlines()
    assert '"id": 397133},' in lines[3]
    lines[3] = lines[3].replace('"id": 397133},', '"id": 397133,')  # drop a closing brace
    path.write_text("\n".join(lines))
    with pytest.raises(DatasetFormatError, match=r"instances_val2017\.json:\d+: invalid JSON") as e:
        read_coco_split(path.parent.parent, "val2017", check_images=False)
    assert e.value.line in (4, 5)  # the broken line or the next one


def test_coco_caption_of_unknown_image(tmp_path):
    path = coco_copy(tmp_path).parent / "captions_val2017.json"
    edit_json(path, lambda d: d["annotations"][2].update(image_id=1))
    with pytest.raises(DatasetFormatError,
                       match=r"captions_val2017\.json \[annotations\[2\]\.image_id\]"):
        read_coco_split(path.parent.parent, "val2017", check_images=False)


def test_box_within_tolerance_is_clipped_beyond_it_raises(tmp_path):
    path = coco_copy(tmp_path)
    edit_json(path, lambda d: d["annotations"][0].update(bbox=[388.0, 69.0, 252.5, 10.0]))
    rec = read_coco_split(path.parent.parent, "val2017", check_images=False)[0]
    assert rec.boxes[0] == approx((388.0, 69.0, 640.0, 79.0))  # 0.5 px over: clipped
    with pytest.raises(DatasetFormatError, match="outside"):
        read_coco_split(path.parent.parent, "val2017", check_images=False, box_tolerance=0.0)


# ----------------------------------------------------------- Flickr30K Entities fixture
def test_flickr_fixture_phrases_and_boxes():
    (rec,) = read_flickr30k_entities(FIX / "flickr30k_entities", "test", check_images=False)
    assert (rec.image_id, rec.width, rec.height) == ("1000092795", 500, 375)
    assert rec.image_path.name == "1000092795.jpg"
    s0, s1, s2 = rec.sentences
    assert s0.text == "A man in a blue shirt is standing on a ladder cleaning windows ."
    got = [(p.text, p.first_word, p.entity_id, p.types) for p in s0.phrases]
    assert got == [("A man", 0, 18, ("people",)), ("a blue shirt", 3, 19, ("clothing",)),
                   ("a ladder", 9, 20, ("other",)), ("windows", 12, 21, ("other",))]
    assert s0.phrases[0].boxes == [(23.0, 16.0, 131.0, 320.0)]  # 1-based inclusive -> edges
    assert s0.phrases[3].boxes == [(299.0, 0.0, 500.0, 150.0)]
    guys, hair, hands, yard = s1.phrases
    assert guys.text == "Two young guys" and guys.box_status == "box"
    assert guys.boxes == [(23.0, 16.0, 131.0, 320.0), (199.0, 39.0, 330.0, 375.0)]
    assert (hair.box_status, hair.boxes, hair.first_word) == ("nobox", [], 4)
    assert (hands.first_word, hands.boxes) == (8, [(59.0, 149.0, 100.0, 190.0)])
    assert (yard.text, yard.box_status, yard.boxes) == ("the yard", "scene", [])
    worker, something, wall = s2.phrases
    assert worker.types == ("people", "other") and worker.boxes == s0.phrases[0].boxes
    assert (something.entity_id, something.box_status, something.boxes) == (0, "notvisual", [])
    assert (wall.text, wall.first_word, wall.box_status, wall.boxes) == ("a wall", 5, "missing", [])


def test_flickr_annotation_entity_sets():
    ann = read_annotation(FIX / "flickr30k_entities/Annotations/1000092795.xml")
    assert ann.no_box == {23} and ann.scene == {25} and ann.filename == "1000092795.jpg"
    assert sorted(ann.boxes) == [18, 19, 20, 21, 22, 24] and len(ann.boxes[22]) == 2


def test_parse_sentence_alone_is_unresolved():
    s = parse_sentence("[/EN#5/animals A dog] runs")
    assert s.text == "A dog runs" and s.phrases[0].box_status == "unresolved"
    assert s.phrases[0].last_word == 1


@pytest.mark.parametrize("line, message", [
    ("[/EN#18/people A man in a shirt .", "phrase not closed"),
    ("A man] in a shirt .", r"'man\]' closes no phrase"),
    ("[/EN#18/people A [/EN#19/clothing shirt] ]", "opens a phrase inside a phrase"),
    ("[/EN#18/people A man]] .", "stray bracket"),
    ("[/EN18/people A man] .", "bad entity tag"),
    ("[/EN#x1/people A man] .", "bad entity tag"),
    ("[/EN#18 A man] .", "bad entity tag"),
    ("[/EN#18/people] is here", "empty phrase"),
    ("", "empty sentence"),
])
def test_flickr_malformed_sentence_line(tmp_path, line, message):
    path = tmp_path / "Sentences" / "7.txt"
    path.parent.mkdir()
    path.write_text("[/EN#1/people A woman] sings .\n" + line + "\n")
    with pytest.raises(DatasetFormatError, match=rf"7\.txt:2: .*{message}"):
        read_sentences(path)


def flickr_copy(tmp_path: Path) -> Path:
    return copy_fixture("flickr30k_entities", tmp_path) / "Annotations" / "1000092795.xml"


@pytest.mark.parametrize("old, new, field, message", [
    ("<name>19</name>", "", r"object\[2\]/name", "missing field"),
    ("<name>19</name>", "<name>nineteen</name>", r"object\[2\]/name\[0\]", "not a non-negative"),
    ("<xmin>40</xmin>", "<xmin>4O</xmin>", r"object\[2\]/bndbox/xmin", "not a number"),
    ("<ymin>90</ymin>", "", r"object\[2\]/bndbox/ymin", "missing or empty field"),
    ("<xmax>120</xmax>", "<xmax>520</xmax>", r"object\[2\]/bndbox", "outside the 500x375"),
    ("<xmax>120</xmax>", "<xmax>30</xmax>", r"object\[2\]/bndbox", "empty box"),
    ("<nobndbox>1</nobndbox>", "", r"object\[6\]/bndbox", "neither nobndbox nor scene"),
    ("<height>375</height>", "", r"size/height", "missing or empty field"),
])
def test_flickr_bad_annotation(tmp_path, old, new, field, message):
    path = flickr_copy(tmp_path)
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(DatasetFormatError, match=rf"1000092795\.xml \[{field}\]: .*{message}"):
        read_flickr30k_entities(path.parent.parent, "test", check_images=False)


def test_flickr_missing_sentences_file_and_malformed_xml(tmp_path):
    path = flickr_copy(tmp_path)
    (path.parent.parent / "Sentences" / "1000092795.txt").unlink()
    with pytest.raises(DatasetFormatError, match=r"Sentences/1000092795\.txt: missing"):
        read_flickr30k_entities(path.parent.parent, "test", check_images=False)
    path.write_text(path.read_text().replace("</object>", "", 1))
    with pytest.raises(DatasetFormatError, match=r"1000092795\.xml:\d+: not well-formed XML"):
        read_annotation(path)


def test_flickr_blank_split_line(tmp_path):
    root = copy_fixture("flickr30k_entities", tmp_path)
    (root / "test.txt").write_text("1000092795\n\n")
    with pytest.raises(DatasetFormatError, match=r"test\.txt:2: blank line"):
        read_flickr30k_entities(root, "test", check_images=False)


# ------------------------------------------------------------------------ FOIL fixture
def test_foil_fixture_pairs_and_positions():
    split = read_foil(FIX / "foil/foilv1.0_test_2017.json", FIX / "coco_images",
                      check_images=False)
    got = [(p.foil_id, p.foil_annotation_id, p.original_annotation_id, p.word_index, p.foil_span,
            p.target_span, p.target_word, p.foil_word) for p in split.pairs]
    # (foil_id, foil entry, shared caption id, ...): grouped by the caption id, as real FOIL is
    assert got == [(2000002, 2000002, 787980, 4, "motorcycle", "bike", "bike", "motorcycle"),
                   (2000003, 2000003, 787980, 4, "horse", "bike", "bike", "horse"),
                   (2000005, 2000005, 103427, 1, "teddy bear", "cat", "cat", "teddy bear")]
    p = split.pairs[0]
    assert p.original == "A man riding a bike down the street."
    assert p.foiled.split()[p.word_index] == "motorcycle" and p.foil_type is None
    assert p.image_path == FIX / "coco_images" / "COCO_val2014_000000057870.jpg"
    assert split.originals_without_foil == [104560]


def test_foil_position_spans():
    assert foil_position("a b c d", "a b x d") == (2, 3, 3)
    assert foil_position("a cat sat", "a teddy bear sat") == (1, 2, 3)
    with pytest.raises(ValueError, match="equals"):
        foil_position("a b", "a  b")


def foil_copy(tmp_path: Path) -> Path:
    return copy_fixture("foil", tmp_path) / "foilv1.0_test_2017.json"


@pytest.mark.parametrize("change, field, message", [
    (lambda d: d["annotations"][4].update(id=555), r"annotations\[4\]\.id",
     "has no original caption .* with its id 555"),
    (lambda d: d["annotations"].pop(0), r"annotations\[0\]\.id",
     "has no original caption .* with its id 787980"),
    (lambda d: d["annotations"][2].update(foil_id=2000002), r"annotations\[2\]\.foil_id",
     "foil_id 2000002 is used twice"),
    (lambda d: d["annotations"][4].update(caption="A cat sitting on a chair."),
     r"annotations\[4\]\.caption", "equals its original"),
    (lambda d: d["annotations"][4].update(image_id=57870), r"annotations\[4\]\.image_id",
     "foil is on image 57870"),
    (lambda d: d["annotations"][1].update(foil="true"), r"annotations\[1\]\.foil", "expected bool"),
    (lambda d: d["annotations"][2].pop("foil_word"), r"annotations\[2\]\.foil_word",
     "missing field"),
    (lambda d: d["annotations"][0].update(image_id=3), r"annotations\[0\]\.image_id",
     "image id 3 not in images"),
])
def test_foil_bad_input(tmp_path, change, field, message):
    path = foil_copy(tmp_path)
    edit_json(path, change)
    pattern = rf"foilv1\.0_test_2017\.json \[{field}\]: .*{message}"
    with pytest.raises(DatasetFormatError, match=pattern):
        read_foil(path, tmp_path, check_images=False)


def test_foil_missing_file(tmp_path):
    with pytest.raises(DatasetFormatError, match=r"foil_val\.json: missing FOIL file"):
        read_foil(tmp_path / "foil_val.json", tmp_path)


# ------------------------------------------------------------------------- VOC fixture
def test_voc_fixture_objects():
    recs = read_voc(FIX / "voc", "val", check_images=False)
    assert [r.image_id for r in recs] == ["000005", "000007"]
    a, b = recs
    assert (a.width, a.height, a.depth) == (500, 375, 3)
    assert [(o.name, o.pose, o.truncated, o.difficult, o.occluded) for o in a.objects] == [
        ("chair", "Rear", False, False, None), ("chair", "Unspecified", True, True, None)]
    assert a.objects[0].box == (262.0, 210.0, 324.0, 339.0)
    assert a.objects[1].box == (0.0, 179.0, 60.0, 375.0)  # xmin=1 is the first pixel column
    assert a.labels == {"chair"} and a.image_path.name == "000005.jpg"
    assert b.objects[0].box == (140.5, 49.0, 500.0, 330.0) and b.objects[0].occluded is True


def test_voc_pixel_convention():
    assert voc_to_xyxy(1, 1, 1, 1) == (0.0, 0.0, 1.0, 1.0)  # one pixel: xmin == xmax legal
    assert xyxy_to_voc((0.0, 0.0, 64.0, 10.0)) == (1, 1, 64, 10)


def voc_copy(tmp_path: Path) -> Path:
    return copy_fixture("voc", tmp_path) / "VOC2007" / "Annotations" / "000005.xml"


@pytest.mark.parametrize("old, new, field, message", [
    ("<name>chair</name>", "", r"object\[0\]/name", "missing or empty field"),
    ("<xmin>263</xmin>", "<xmin>two</xmin>", r"object\[0\]/bndbox/xmin", "not a number"),
    ("<ymax>339</ymax>", "", r"object\[0\]/bndbox/ymax", "missing or empty field"),
    ("<xmax>324</xmax>", "<xmax>560</xmax>", r"object\[0\]/bndbox", "outside the 500x375"),
    ("<ymin>211</ymin>", "<ymin>-20</ymin>", r"object\[0\]/bndbox", "outside"),
    ("<xmax>324</xmax>", "<xmax>261</xmax>", r"object\[0\]/bndbox", "empty box"),
    ("<difficult>0</difficult>", "<difficult>2</difficult>", r"object\[0\]/difficult",
     "expected 0 or 1"),
    ("<width>500</width>", "<width>5e</width>", r"size/width", "not a number"),
])
def test_voc_bad_annotation(tmp_path, old, new, field, message):
    path = voc_copy(tmp_path)
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(DatasetFormatError, match=rf"000005\.xml \[{field}\]: .*{message}"):
        read_voc_annotation(path, path.parent, check_images=False)


def test_voc_missing_bndbox_and_missing_files(tmp_path):
    path = voc_copy(tmp_path)
    text = path.read_text()
    start, end = text.index("<bndbox>"), text.index("</bndbox>") + len("</bndbox>")
    path.write_text(text[:start] + text[end:])
    with pytest.raises(DatasetFormatError, match=r"000005\.xml \[object\[0\]/bndbox\]: missing"):
        read_voc_annotation(path, path.parent, check_images=False)
    path.unlink()
    with pytest.raises(DatasetFormatError, match=r"000005\.xml: missing annotation XML file"):
        read_voc(path.parent.parent.parent, "val", check_images=False)
    with pytest.raises(DatasetFormatError, match=r"Main/test\.txt: missing image set list"):
        read_voc(path.parent.parent.parent, "test")


def test_error_message_fields_and_pickling():
    err = DatasetFormatError("a/b.txt", "bad thing", line=3, field="x")
    assert str(err) == "a/b.txt:3 [x]: bad thing" and isinstance(err, ValueError)
    again = pickle.loads(pickle.dumps(err))
    assert (str(again), again.line, again.field) == (str(err), 3, "x")
    assert re.match(r"a/b\.txt:3", str(again))


def test_scale_boxes_follows_a_stretch_resize():
    from fgclip.datasets.boxes import scale_boxes

    # a 300 x 600 (H x W) photo stretched to 224 x 224: x scales by 224/600, y by 224/300
    assert scale_boxes([(60.0, 30.0, 600.0, 300.0)], (300, 600), (224, 224))[0] == approx(
        (22.4, 22.4, 224.0, 224.0))
    assert scale_boxes([], (10, 10), (5, 5)) == []
    with pytest.raises(ValueError, match="from_hw"):
        scale_boxes([(0, 0, 1, 1)], (0, 10), (5, 5))
