"""Every chapter leaves machine-readable results with its verdicts.

- statically: each chapter's notebook writes its results through `write_results(...,
  chapter="<key>")` with a "verdicts" entry, so `make book` (which sets
  FGCLIP_RESULTS_DIR) leaves `_build/results/<key>.json`;
- after `make book` (skipped before, saying why): each of those files is strict JSON, and
  chapters 1-4 hold a non-empty verdicts list whose records carry the protocol's fields,
  each side taken over at least three independent replicates (seeds, or seeds x folds where
  the bootstrap resamples folds, one trained head each), with a verdict that follows from its
  own interval and margin.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fgclip.verdicts import A_BETTER, B_BETTER, CANNOT_TELL, EQUIVALENT

REPO = Path(__file__).resolve().parents[1]
CHAPTERS = sorted(p.stem for p in (REPO / "notebooks").glob("ch*_*.py"))
RESULTS = REPO / "_build" / "results"
FIELDS = ("claim", "arms", "difference", "ci_low", "ci_high", "n_seeds", "n_units", "unit", "cluster_unit", "margin",
          "verdict")


def key(name: str) -> str:
    return name.split("_")[0]


@pytest.mark.parametrize("name", CHAPTERS)
def test_chapter_writes_its_results_with_verdicts(name):
    source = (REPO / "notebooks" / f"{name}.py").read_text()
    assert re.search(rf'write_results\(.*?chapter="{key(name)}"', source, re.S), \
        f"{name} must call write_results(..., chapter=\"{key(name)}\")"
    studies = [REPO / "src" / "fgclip" / "studies" / pkg for pkg in set(re.findall(r"fgclip\.studies\.(\w+)", source))]
    record = source + "".join(p.read_text() for d in studies if d.is_dir() for p in d.glob("*.py"))
    assert '"verdicts"' in record, f"{name} must write a 'verdicts' list (in the notebook or its studies package)"


def _built(name: str) -> dict:
    path = RESULTS / f"{key(name)}.json"
    if not path.is_file():
        pytest.skip(f"{path} not there: run `make book` first")
    return json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"{path}: {c} in JSON"))


def _replicates(r: dict) -> int:
    """Independent trained replicates behind a verdict: its seeds, times its folds when the
    bootstrap resamples folds (each fold and seed trains its own head)."""
    by_fold = str(r.get("cluster_unit", "")).startswith("folds")
    return r["n_seeds"] * (r["n_clusters"] if by_fold else 1)


def test_replicates_count_folds_only_where_folds_are_resampled():
    base = {"n_seeds": 2, "n_clusters": 8}
    assert _replicates({**base, "cluster_unit": "folds (one trained head each)"}) == 16
    assert _replicates({**base, "cluster_unit": "images"}) == 2


@pytest.mark.parametrize("name", [n for n in CHAPTERS if key(n) != "ch0"])
def test_built_results_hold_verdicts_over_three_seeds(name):
    data = _built(name)
    records = data.get("verdicts")
    assert records, f"{key(name)}.json has no verdicts"
    for r in records:
        missing = [f for f in FIELDS if f not in r]
        assert not missing, f"{key(name)}: verdict {r.get('claim')!r} lacks {missing}"
        assert r["verdict"] in (A_BETTER, B_BETTER, EQUIVALENT, CANNOT_TELL)
        assert r["ci_low"] <= r["difference"] <= r["ci_high"], r["claim"]
        if r["verdict"] != CANNOT_TELL:
            replicates = _replicates(r)
            assert replicates >= 3, f"{key(name)}: {r['claim']!r} takes a side on {replicates} replicate(s)"
        if r["verdict"] == EQUIVALENT:
            assert r["margin"] and -r["margin"] <= r["ci_low"] and r["ci_high"] <= r["margin"], r["claim"]
        if r["verdict"] in (A_BETTER, B_BETTER):
            higher = r.get("higher_is_better", True)
            above = r["ci_low"] > 0
            assert (r["verdict"] == A_BETTER) == (above == higher), r["claim"]


def _nested_verdicts(o, path: str = ""):
    """Every verdict record anywhere in a results file (controls and diagnostics included)."""
    if isinstance(o, dict):
        if "verdict" in o and "ci_low" in o:
            yield path, o
        for k, v in o.items():
            yield from _nested_verdicts(v, f"{path}/{k}")
    elif isinstance(o, list):
        for i, v in enumerate(o):
            yield from _nested_verdicts(v, f"{path}[{i}]")


@pytest.mark.parametrize("name", [n for n in CHAPTERS if key(n) != "ch0"])
def test_every_verdict_record_names_its_cluster_unit_and_margin(name):
    found = list(_nested_verdicts(_built(name)))
    assert found, f"{key(name)}.json holds no verdict record"
    bad = [p for p, r in found if not r.get("cluster_unit") or r.get("margin") is None]
    assert not bad, f"{key(name)}: verdict records without a cluster unit or margin at {bad[:5]}"


def test_the_nested_walk_finds_a_record_without_a_margin():
    record = {"controls": [{"test": {"verdict": "cannot tell", "ci_low": 0, "cluster_unit": "images", "margin": None}}]}
    assert [p for p, r in _nested_verdicts(record) if r.get("margin") is None] == ["/controls[0]/test"]


def test_chapter1_records_its_selectivity_pairs_and_the_floor_on_them():
    """Issue 31: the selectivity floor is the object pointer on the very pairs the model is
    scored on, and the record lets a reader check it (the pairs, the floor per pair)."""
    name = next(c for c in CHAPTERS if key(c) == "ch1")
    sel = _built(name)["selectivity"]
    assert len(sel["phrase_pairs"]) == sel["n_pairs"] == len(sel["object_pointer_per_pair"]) > 0
    assert all(len(p) == 2 and p[0] != p[1] for p in sel["phrase_pairs"])
    assert abs(sum(sel["object_pointer_per_pair"]) / sel["n_pairs"] - sel["object_pointer_floor"]) < 1e-9
