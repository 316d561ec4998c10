"""Lay out Flickr30K Entities as chapter 1 reads it, and check it.

    python data_scripts/prepare_flickr30k_entities.py --annotations ~/flickr30k_entities \
        --images ~/flickr30k-images --out /data/flickr30k_entities

--annotations is the unzipped annotations.zip of the Flickr30K Entities repository
(Annotations/, Sentences/, train.txt, val.txt, test.txt); --images the Flickr30K photo
folder (obtained separately from its authors). Both are linked into --out, then every
listed image's XML, sentences and photo are checked. Exits 1 when something is missing.
"""
from __future__ import annotations

import argparse
import sys

from fgclip.datasets.prepare import prepare_flickr30k_entities


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--annotations", required=True)
    p.add_argument("--images", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--splits", nargs="+", default=["train", "val", "test"])
    a = p.parse_args(argv)
    report = prepare_flickr30k_entities(a.annotations, a.images, a.out, a.splits)
    print(report.text())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
