"""Check an official Pascal VOC download in the layout chapter 4 reads.

    python data_scripts/prepare_voc.py --root /data/VOCdevkit --year VOC2007 --splits trainval test

The layout is the VOCdevkit's own (VOCtrainval_06-Nov-2007.tar and VOCtest_06-Nov-2007.tar
unpack into it): <year>/ImageSets/Main/<split>.txt, <year>/Annotations/<id>.xml and
<year>/JPEGImages/<id>.jpg. Prints what is there and what is missing; exits 1 when
something is missing.
"""
from __future__ import annotations

import argparse
import sys

from fgclip.datasets.prepare import check_voc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", required=True, help="the VOCdevkit folder")
    p.add_argument("--year", default="VOC2007", help="VOC2007 or VOC2012")
    p.add_argument("--splits", nargs="+", default=["trainval", "test"])
    a = p.parse_args(argv)
    report = check_voc(a.root, a.splits, year=a.year)
    print(report.text())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
