"""Small datasets in the real datasets' own layouts, made from real photos.

No dataset can be downloaded here, but a few real photographs ship with installed packages
(matplotlib's sample data, scikit-learn's sample images). :func:`build_real_layouts` cuts
them into crops of varied size and aspect ratio and writes COCO 2017 (non-contiguous
category ids, cased captions, one caption longer than CLIP's context), Pascal VOC 2007 (raw
class names such as ``pottedplant``, difficult objects), Flickr30K Entities and FOIL v1.0
(an original and its foils sharing the COCO caption ``id``), plus an ImageNet-21K-style
lemma list. Boxes are drawn at random: these files test that a chapter reads real formats
and real photos end to end, not what it finds in them.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from PIL import Image

from ..fileio import atomic_write_json, atomic_write_text

# COCO's own ids for these names (a subset, so the ids are not contiguous)
COCO_CATEGORIES = {1: "person", 3: "car", 18: "dog", 44: "bottle", 62: "chair", 88: "teddy bear"}
VOC_NAMES = ("person", "pottedplant", "diningtable", "dog", "tvmonitor")
LONG_CAPTION = ("A person " + "standing very still and looking at something far away " * 8).strip() + "."
CAPTIONS = ("A person standing next to a red car.", "Two dogs sitting on a wooden chair.",
            "A teddy bear and a bottle on the table.", "A man in a blue shirt near a chair.")
FOILS = (("car", "bus"), ("dogs", "cats"), ("teddy bear", "cat"), ("chair", "sofa"))


def sample_photos() -> list[Image.Image]:
    """The real RGB photographs that ship with matplotlib and scikit-learn."""
    import matplotlib.cbook
    import sklearn.datasets

    photos = []
    with matplotlib.cbook.get_sample_data("grace_hopper.jpg") as f:
        photos.append(Image.open(f).convert("RGB"))
    folder = Path(sklearn.datasets.__file__).parent / "images"
    photos += [Image.open(folder / n).convert("RGB") for n in ("china.jpg", "flower.jpg")]
    return photos


def photo_crops(n: int, seed: int) -> list[Image.Image]:
    """``n`` crops of the sample photos, 40-100% of each side, so sizes and aspects vary."""
    rng = np.random.default_rng(seed)
    photos = sample_photos()
    crops = []
    for i in range(n):
        photo = photos[i % len(photos)]
        w, h = photo.size
        cw, ch = int(w * rng.uniform(0.4, 1.0)), int(h * rng.uniform(0.4, 1.0))
        x0, y0 = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
        crops.append(photo.crop((x0, y0, x0 + cw, y0 + ch)))
    return crops


def _box(rng: np.random.Generator, w: int, h: int) -> tuple[int, int, int, int]:
    """A random box (x0, y0, x1, y1) in integer pixels, at least a tenth of each side."""
    bw, bh = int(w * rng.uniform(0.15, 0.7)), int(h * rng.uniform(0.15, 0.7))
    x0, y0 = int(rng.integers(0, w - bw)), int(rng.integers(0, h - bh))
    return x0, y0, x0 + bw, y0 + bh


def _save(image: Image.Image, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, quality=90)


def write_coco(root: Path, split: str, crops: list[Image.Image], seed: int, first_id: int) -> list[int]:
    """COCO instances and captions for ``split``; returns the image ids."""
    rng = np.random.default_rng(seed)
    images, anns, caps = [], [], []
    for k, crop in enumerate(crops):
        image_id = first_id + k
        name = f"COCO_{split}_{image_id:012d}.jpg" if "2014" in split else f"{image_id:012d}.jpg"
        _save(crop, root / split / name)
        w, h = crop.size
        images.append({"id": image_id, "file_name": name, "width": w, "height": h})
        for _ in range(1 + k % 3):
            x0, y0, x1, y1 = _box(rng, w, h)
            cat = int(rng.choice(list(COCO_CATEGORIES)))
            anns.append({"id": len(anns) + 1, "image_id": image_id, "category_id": cat,
                         "bbox": [x0, y0, x1 - x0, y1 - y0], "area": float((x1 - x0) * (y1 - y0)),
                         "iscrowd": 0, "segmentation": []})
        texts = [CAPTIONS[k % len(CAPTIONS)], CAPTIONS[(k + 1) % len(CAPTIONS)]]
        if k == 0:
            texts.append(LONG_CAPTION)
        caps += [{"id": 1000 * image_id + j, "image_id": image_id, "caption": t} for j, t in enumerate(texts)]
    categories = [{"id": i, "name": n, "supercategory": "thing"} for i, n in COCO_CATEGORIES.items()]
    base = {"info": {"description": "fgclip sample in COCO format, real photos, random boxes"},
            "licenses": [], "images": images, "categories": categories}
    atomic_write_json(root / "annotations" / f"instances_{split}.json", {**base, "annotations": anns})
    atomic_write_json(root / "annotations" / f"captions_{split}.json", {**base, "annotations": caps})
    return [im["id"] for im in images]


def write_voc(root: Path, split: str, crops: list[Image.Image], seed: int, first_id: int) -> None:
    """``VOCdevkit/VOC2007`` XML (1-based inclusive pixels), JPEGs and the split list."""
    rng = np.random.default_rng(seed)
    base = root / "VOC2007"
    ids = []
    for k, crop in enumerate(crops):
        image_id = f"{first_id + k:06d}"
        ids.append(image_id)
        _save(crop, base / "JPEGImages" / f"{image_id}.jpg")
        w, h = crop.size
        objects = []
        for j in range(1 + k % 3):
            x0, y0, x1, y1 = _box(rng, w, h)
            objects.append(f"<object><name>{VOC_NAMES[(k + j) % len(VOC_NAMES)]}</name><pose>Unspecified</pose>"
                           f"<truncated>0</truncated><difficult>{int(j == 2)}</difficult><bndbox>"
                           f"<xmin>{x0 + 1}</xmin><ymin>{y0 + 1}</ymin><xmax>{x1}</xmax><ymax>{y1}</ymax>"
                           "</bndbox></object>")
        atomic_write_text(base / "Annotations" / f"{image_id}.xml",
                          f"<annotation><folder>VOC2007</folder><filename>{image_id}.jpg</filename>"
                          f"<size><width>{w}</width><height>{h}</height><depth>3</depth></size>"
                          f"<segmented>0</segmented>{''.join(objects)}</annotation>\n")
    atomic_write_text(base / "ImageSets" / "Main" / f"{split}.txt", "".join(f"{i}\n" for i in ids))


FLICKR_SENTENCES = (
    ("[/EN#{a}/people A man] in [/EN#{b}/clothing a blue shirt] stands near [/EN#{c}/other a wall] .", 3),
    ("[/EN#{a}/people Two young guys] look at [/EN#{b}/other the camera] while [/EN#{c}/scene the sun] sets .", 3),
    ("[/EN#{a}/people Someone] is " + "walking slowly along the long quiet road " * 11 + "with [/EN#{b}/animals a dog] .", 2),
)


def write_flickr30k_entities(root: Path, split: str, crops: list[Image.Image], seed: int,
                             first_id: int) -> None:
    """Sentences with entity brackets, box XML per entity, photos and the split list."""
    rng = np.random.default_rng(seed)
    ids = []
    for k, crop in enumerate(crops):
        image_id = str(first_id + k)
        ids.append(image_id)
        _save(crop, root / "flickr30k-images" / f"{image_id}.jpg")
        w, h = crop.size
        entity = 10 * k + 1
        lines, objects = [], []
        for template, n_entities in FLICKR_SENTENCES[: 2 + (k == 0)]:
            ents = list(range(entity, entity + n_entities))
            entity += n_entities
            lines.append(template.format(**dict(zip("abc", ents))))
            for e in ents:
                x0, y0, x1, y1 = _box(rng, w, h)
                objects.append(f"<object><name>{e}</name><bndbox><xmin>{x0 + 1}</xmin><ymin>{y0 + 1}</ymin>"
                               f"<xmax>{x1}</xmax><ymax>{y1}</ymax></bndbox></object>")
        atomic_write_text(root / "Sentences" / f"{image_id}.txt", "\n".join(lines) + "\n")
        atomic_write_text(root / "Annotations" / f"{image_id}.xml",
                          f"<annotation><filename>{image_id}.jpg</filename><size><width>{w}</width>"
                          f"<height>{h}</height><depth>3</depth></size>{''.join(objects)}</annotation>\n")
    atomic_write_text(root / f"{split}.txt", "".join(f"{i}\n" for i in ids))


def write_foil(path: Path, coco_root: Path, split: str) -> None:
    """FOIL v1.0 JSON over a COCO 2014 split: one original per image and its foils, all
    sharing the original's COCO caption ``id``; ``foil_id`` unique per entry."""
    import json

    captions = json.loads((coco_root / "annotations" / f"captions_{split}.json").read_text())
    anns, foil_id = [], 1
    for k, image in enumerate(captions["images"]):
        text = CAPTIONS[k % len(CAPTIONS)]
        target, word = FOILS[k % len(FOILS)]
        entries = [(False, text, "ORIG", "ORIG"), (True, text.replace(target, word, 1), target, word)]
        for is_foil, caption, t, f in entries:
            anns.append({"id": 1000 * image["id"], "image_id": image["id"], "caption": caption,
                         "foil": is_foil, "target_word": t, "foil_word": f, "foil_id": foil_id})
            foil_id += 1
    atomic_write_json(path, {"info": {"description": "fgclip sample in FOIL v1.0 format"},
                             "images": captions["images"], "annotations": anns})


def build_real_layouts(out: str | os.PathLike, n_images: int = 12, seed: int = 0) -> dict[str, Path]:
    """Every real layout the chapters read, under ``out``; returns each dataset's root."""
    if n_images < 4:
        raise ValueError(f"n_images must be >= 4 (two splits of two), got {n_images}")
    out = Path(out)
    crops = photo_crops(n_images, seed)
    half = n_images // 2
    coco = out / "coco"
    write_coco(coco, "train2017", crops[:half], seed, 1)
    write_coco(coco, "val2017", crops[half:], seed + 1, 500_000)
    write_coco(coco, "train2014", crops[:half], seed + 2, 1)
    write_coco(coco, "val2014", crops[half:], seed + 3, 500_000)
    voc = out / "VOCdevkit"
    write_voc(voc, "trainval", crops[:half], seed, 1)
    write_voc(voc, "test", crops[half:], seed + 1, 5000)
    flickr = out / "flickr30k_entities"
    write_flickr30k_entities(flickr, "train", crops[:half], seed, 1000)
    write_flickr30k_entities(flickr, "test", crops[half:], seed + 1, 9000)
    foil_dir = out / "foil_download"
    write_foil(foil_dir / "foilv1.0_train_2017.json", coco, "train2014")
    write_foil(foil_dir / "foilv1.0_test_2017.json", coco, "val2014")
    lemmas = out / "imagenet21k" / "imagenet21k_wordnet_lemmas.txt"
    atomic_write_text(lemmas, "".join(f"{n}, {n}s\n" for n in ("person", "dog", "car", "bus",
                                                                  "cat", "sofa", "tree", "kite")))
    return {"coco": coco, "voc": voc, "flickr30k_entities": flickr, "foil_download": foil_dir,
            "imagenet21k_lemmas": lemmas}
