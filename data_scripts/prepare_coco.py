"""Check an official COCO download (2014 or 2017) in the layout chapters 3 and 4 read.

    python data_scripts/prepare_coco.py --root /data/coco --splits train2017 val2017
    python data_scripts/prepare_coco.py --root /data/coco --splits train2014 val2014 --no-captions

The layout is COCO's own: annotations/instances_<split>.json (and captions_<split>.json)
from annotations_trainval20XX.zip, images in <split>/ from <split>.zip. Prints every path
that is there and every one that is missing; exits 1 when something is missing.
"""
from __future__ import annotations

import argparse
import sys

from fgclip.datasets.prepare import check_coco


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", required=True, help="the folder holding annotations/ and the image folders")
    p.add_argument("--splits", nargs="+", default=["train2017", "val2017"])
    p.add_argument("--no-captions", dest="captions", action="store_false",
                   help="do not require captions_<split>.json (chapters 3 and 4 need instances only)")
    a = p.parse_args(argv)
    report = check_coco(a.root, a.splits, captions=a.captions)
    print(report.text())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
