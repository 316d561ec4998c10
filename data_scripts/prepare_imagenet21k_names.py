"""Write the open vocabulary of chapter 3: one class name per line.

    python data_scripts/prepare_imagenet21k_names.py --lemmas imagenet21k_wordnet_lemmas.txt \
        --out /data/imagenet21k/class_names.txt --report-categories airplane bus cat

--lemmas is ImageNet-21K's list of synonym sets, one class per line ('dog, domestic dog,
Canis familiaris'); the first lemma of each line is kept. Nothing is appended: the
evaluation categories are never added to the vocabulary. --report-categories prints which
of them the vocabulary already holds.
"""
from __future__ import annotations

import argparse
import sys

from fgclip.datasets.prepare import prepare_class_names, vocabulary_overlap


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lemmas", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--report-categories", nargs="*", default=[])
    a = p.parse_args(argv)
    names = prepare_class_names(a.lemmas, a.out)
    print(f"{a.out}: {len(names)} class names")
    if a.report_categories:
        have = vocabulary_overlap(names, a.report_categories)
        print(f"the vocabulary holds {len(have)} of {len(a.report_categories)} categories: {', '.join(have) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
