"""Lay out an official FOIL-COCO file as chapter 2 reads it.

    python data_scripts/prepare_foil.py --foil foilv1.0_train_2017.json \
        --coco-images /data/coco/train2014 --out /data/foil --split train --val-fraction 0.1
    python data_scripts/prepare_foil.py --foil foilv1.0_test_2017.json \
        --coco-images /data/coco/val2014 --out /data/foil --split test

Writes <out>/foil_<split>.json and links <out>/<split> to the COCO image folder (FOIL's
train file uses COCO train2014, its test file val2014). --val-fraction carves a seeded
validation split, by image, out of the file (for choosing the threshold), written as
<out>/foil_val.json. The result is read back through the chapter's reader.
"""
from __future__ import annotations

import argparse
import sys

from fgclip.datasets import read_foil_split
from fgclip.datasets.prepare import prepare_foil


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--foil", required=True, help="an official FOIL JSON file")
    p.add_argument("--coco-images", required=True, help="the COCO image folder its images come from")
    p.add_argument("--out", required=True)
    p.add_argument("--split", required=True, help="name of the split to write (train, test, ...)")
    p.add_argument("--val-fraction", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    counts = prepare_foil(a.foil, a.coco_images, a.out, a.split, a.val_fraction, seed=a.seed)
    for split, n_images in counts.items():
        pairs = read_foil_split(a.out, split).pairs
        print(f"{a.out}/foil_{split}.json: {n_images} images, {len(pairs)} (original, foil) pairs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
