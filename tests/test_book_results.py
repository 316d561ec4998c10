"""Every chapter leaves machine-readable results with its verdicts.

- statically: each chapter's notebook writes its results through `write_results(...,
  chapter="<key>")` with a "verdicts" entry, so `make book` (which sets
  FGCLIP_RESULTS_DIR) leaves `_build/results/<key>.json`;
- after `make book` (skipped before, saying why): each of those files is strict JSON, and
  chapters 1-4 hold a non-empty verdicts list whose records carry the protocol's fields,
  each over at least three seeds, with a verdict that follows from its own interval.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fgclip.verdicts import A_BETTER, B_BETTER, CANNOT_TELL

REPO = Path(__file__).resolve().parents[1]
CHAPTERS = sorted(p.stem for p in (REPO / "notebooks").glob("ch*_*.py"))
RESULTS = REPO / "_build" / "results"
FIELDS = ("claim", "arms", "difference", "ci_low", "ci_high", "n_seeds", "n_units", "unit", "verdict")


def key(name: str) -> str:
    return name.split("_")[0]


@pytest.mark.parametrize("name", CHAPTERS)
def test_chapter_writes_its_results_with_verdicts(name):
    source = (REPO / "notebooks" / f"{name}.py").read_text()
    assert re.search(rf'write_results\(.*?chapter="{key(name)}"', source, re.S), \
        f"{name} must call write_results(..., chapter=\"{key(name)}\")"
    assert '"verdicts"' in source, f"{name} must write a 'verdicts' list"


def _built(name: str) -> dict:
    path = RESULTS / f"{key(name)}.json"
    if not path.is_file():
        pytest.skip(f"{path} not there: run `make book` first")
    return json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"{path}: {c} in JSON"))


@pytest.mark.parametrize("name", [n for n in CHAPTERS if key(n) != "ch0"])
def test_built_results_hold_verdicts_over_three_seeds(name):
    data = _built(name)
    records = data.get("verdicts")
    assert records, f"{key(name)}.json has no verdicts"
    for r in records:
        missing = [f for f in FIELDS if f not in r]
        assert not missing, f"{key(name)}: verdict {r.get('claim')!r} lacks {missing}"
        assert r["verdict"] in (A_BETTER, B_BETTER, CANNOT_TELL)
        assert r["ci_low"] <= r["difference"] <= r["ci_high"], r["claim"]
        if r["verdict"] != CANNOT_TELL:
            assert r["n_seeds"] >= 3, f"{key(name)}: {r['claim']!r} takes a side on {r['n_seeds']} seed(s)"
            higher = r.get("higher_is_better", True)
            above = r["ci_low"] > 0
            assert (r["verdict"] == A_BETTER) == (above == higher), r["claim"]
