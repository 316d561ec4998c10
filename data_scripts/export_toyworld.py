"""Export the toy world in the real datasets' file formats (COCO, Flickr30K Entities,
FOIL-COCO, Pascal VOC), one folder per format under --root.

    python data_scripts/export_toyworld.py --root data/toyworld --n-train 2000 --n-val 200
    python data_scripts/export_toyworld.py --root data/cb --center-bias 0.9 --formats coco,voc
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from fgclip.toyworld import ToyWorldConfig
from fgclip.toyworld.export import FORMATS, export_all


def _formats(text: str) -> tuple[str, ...]:
    names = tuple(f.strip() for f in text.split(",") if f.strip())
    bad = [f for f in names if f not in FORMATS]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"formats must be a comma list of {', '.join(FORMATS)}")
    return names


def parse_args(argv: list[str]) -> argparse.Namespace:
    d = ToyWorldConfig()
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", required=True, help="output folder (one subfolder per format)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n-train", type=int, default=1000)
    p.add_argument("--n-val", type=int, default=200)
    p.add_argument("--n-test", type=int, default=200)
    p.add_argument("--formats", type=_formats, default=FORMATS,
                   help=f"comma list of {','.join(FORMATS)}")
    p.add_argument("--image-size", type=int, default=d.image_size)
    p.add_argument("--min-objects", type=int, default=d.min_objects)
    p.add_argument("--max-objects", type=int, default=d.max_objects)
    p.add_argument("--center-bias", type=float, default=d.center_bias)
    p.add_argument("--max-overlap", type=float, default=d.max_overlap)
    p.add_argument("--clutter", type=float, default=d.clutter)
    p.add_argument("--distractors", type=int, default=d.distractors)
    p.add_argument("--captions-per-image", type=int, default=d.captions_per_image)
    return p.parse_args(argv)


def config_from_args(a: argparse.Namespace) -> ToyWorldConfig:
    return replace(ToyWorldConfig(), image_size=a.image_size, min_objects=a.min_objects,
                   max_objects=a.max_objects, center_bias=a.center_bias,
                   max_overlap=a.max_overlap, clutter=a.clutter, distractors=a.distractors,
                   captions_per_image=a.captions_per_image)


def main(argv: list[str] | None = None) -> dict[str, str]:
    a = parse_args(sys.argv[1:] if argv is None else argv)
    sizes = (("train", a.n_train), ("val", a.n_val), ("test", a.n_test))
    splits = {s: n for s, n in sizes if n > 0}
    out = export_all(config_from_args(a), a.root, a.seed, splits, a.formats)
    result = {fmt: str(path) for fmt, path in out.items()}
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
