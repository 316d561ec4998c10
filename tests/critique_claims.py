"""What the critique-page tests of chapters 1, 2 and 4 share: finding a claim's phrase on the
page, every form in which a page may print a record's numbers, the check of one claim, and the
checkpoint record a page's stage note reads."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable


def checkpoint_test_record(model: str) -> dict:
    """The held-out record the critique pages' stage notes read: the ``test`` block of
    checkpoints/<model>.metrics.json."""
    return json.loads((Path(__file__).resolve().parents[1] / "checkpoints" / f"{model}.metrics.json").read_text())["test"]


def sentence_of(text: str, phrase: str) -> bool:
    """The page (whitespace normalised) holds the regex ``phrase``, case-insensitive."""
    return re.search(phrase, " ".join(text.split()), flags=re.I) is not None


def printed_numbers(*records, percent: Callable[[float], int] | None = None) -> set[str]:
    """Every number of the records as a page may print it: integers; floats at 1-3 decimals
    (signs dropped too); with ``percent``, shares in [0, 1] as whole per cents."""
    out: set[str] = set()

    def walk(x):
        if isinstance(x, bool) or x is None:
            return
        if isinstance(x, (int, float)):
            out.update({f"{v:g}" for v in (x, abs(x))} | {f"{v:.{k}f}" for v in (x, abs(x)) for k in (1, 2, 3)})
            if float(x).is_integer():
                out.add(str(int(x)))
            elif percent is not None and 0 <= x <= 1:
                out.add(f"{percent(x)}%")
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    for record in records:
        walk(record)
    return out


def claim_check(claims, prefix: str):
    """The check of the one claim whose phrase starts with ``prefix``."""
    (check,) = [c for p, c in claims if p.startswith(prefix)]
    return check
