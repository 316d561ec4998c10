"""The VOC reader against torchvision's VOCDetection on the sample VOC2007 layout (issue 35,
item 9): the same images in list order, the same sizes, and per object the same name, pose,
flags and box, ours in continuous pixels, torchvision's the XML's 1-based inclusive text.

Where the two part, and why fgclip.datasets.voc stays: VOCDetection wants the folder that
holds ``VOCdevkit/VOC2007`` (a toy export has ``<root>/VOC2007``), only VOC's own years and
the splits train/trainval/val/test, opens every image it is asked for, returns the XML as
nested strings (a missing field is a KeyError later, an unknown flag value passes), and takes
the image name from the id, not from ``filename``.
"""
import shutil
from pathlib import Path

import pytest
from PIL import Image

from fgclip.datasets import read_voc, voc_to_xyxy

VOCDetection = pytest.importorskip("torchvision.datasets").VOCDetection
FIX = Path(__file__).parent / "fixtures" / "voc"


def test_read_voc_matches_torchvision_vocdetection(tmp_path):
    devkit = tmp_path / "VOCdevkit"
    shutil.copytree(FIX, devkit)
    ours = read_voc(devkit, "val", check_images=False)
    (devkit / "VOC2007" / "JPEGImages").mkdir()
    for r in ours:  # VOCDetection opens each image; a blank one of the annotated size will do
        Image.new("RGB", (r.width, r.height)).save(r.image_path)
    theirs = VOCDetection(str(tmp_path), year="2007", image_set="val")

    assert len(theirs) == len(ours) == 2
    for record, (image, target) in zip(ours, theirs):
        ann = target["annotation"]
        assert image.size == (record.width, record.height) and Path(ann["filename"]).stem == record.image_id
        assert tuple(int(ann["size"][k]) for k in ("width", "height", "depth")) == \
            (record.width, record.height, record.depth)
        assert len(ann["object"]) == len(record.objects)
        for obj, ref in zip(record.objects, ann["object"]):
            raw = tuple(float(ref["bndbox"][k]) for k in ("xmin", "ymin", "xmax", "ymax"))
            assert obj.box == voc_to_xyxy(*raw)  # VOC's first pixel column 1 is our x = 0
            assert (obj.name, obj.pose) == (ref["name"], ref["pose"])
            assert (obj.truncated, obj.difficult) == (ref["truncated"] == "1", ref["difficult"] == "1")
            assert obj.occluded == (ref["occluded"] == "1" if "occluded" in ref else None)
    assert any(o.difficult for r in ours for o in r.objects) and any(o.occluded for r in ours for o in r.objects)
