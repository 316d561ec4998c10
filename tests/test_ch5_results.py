"""Chapter 5's page against its record (after `make book`; skipped before, saying why).

The record `_build/results/ch5.json` must hold the table (arm x task x seed) and a transfer
test for every filled cell, each read through its planted controls; the closing sentences on
the page must say what those tests concluded, and the '-' cells must be exactly the adapters'
and the stage's reasons.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fgclip.studies.crosspaper.adapters import EXTENSIONS, METHODS, TASKS
from fgclip.studies.crosspaper.evaluate import OWN_TASK, cell_reason
from fgclip.studies.crosspaper.judge import BASELINE, CELL_REFERENCES, CLIP_READING, KIND, kind

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "_build" / "results" / "ch5.json"
PAGE = REPO / "_build" / "html" / "notebooks" / "ch5_crosspaper.html"


@pytest.fixture(scope="module")
def record() -> dict:
    if not RESULTS.is_file():
        pytest.skip(f"{RESULTS} not there: run `make book` first")
    return json.loads(RESULTS.read_text())


def reading(record: dict, task: str) -> str:
    """The frozen CLIP's reading a task is judged against: chosen on validation for presence and
    retrieval (the best validation score of the candidates), the fixed one otherwise."""
    chosen = record["readings"].get(task)
    if chosen is None:
        return CLIP_READING[task]
    assert chosen["validation"][chosen["chosen"]] == max(chosen["validation"].values())
    return chosen["chosen"]


def test_the_table_holds_every_filled_cell_per_seed(record):
    seeds, per_seed = record["seeds"], record["per_seed"]
    for method in METHODS:
        for task in TASKS:
            filled = cell_reason(method, task) is None
            assert (task in per_seed[method]) == filled, (method, task)
            if filled:
                assert len(per_seed[method][task]) == len(seeds)
                assert all(0.0 <= x <= 1.0 for x in per_seed[method][task])
    for task in TASKS:
        for ref in (reading(record, task), BASELINE[task]):
            assert len(per_seed[ref][task]) == len(seeds), (ref, task)
    assert set(record["not_applicable"]) == {f"{m} x {t}" for m in METHODS for t in TASKS if cell_reason(m, t)}


def test_every_filled_cell_has_a_transfer_test_read_through_its_controls(record):
    tests = {(f["test"]["arms"][0], f["test"]["claim"].rsplit(" on ", 1)[1]): f for f in record["transfer"]}
    expected = {(m, t) for m in METHODS for t in TASKS if cell_reason(m, t) is None}
    assert set(tests) == expected
    for (method, task), f in tests.items():
        assert f["test"]["arms"][1] == CELL_REFERENCES.get((method, task), (reading(record, task),))[0]
        assert f["positive_control"]["margin"] == f["negative_control"]["margin"] == record["margins"][task]
        assert f["negative_control"]["arms"] == [f"{method}, even seeds", f"{method}, odd seeds"]
        passed = f["positive_passed"] and f["negative_passed"]
        assert f["controls_pass"] == passed
        assert f["negative_passed"] == (f["negative_control"]["verdict"] == "equivalent")
        assert (f["conclusion"] == "the test cannot decide here") == (not passed)
        cell_mean = sum(record["per_seed"][method][task]) / len(record["seeds"])
        assert abs(f["test"]["mean_a"] - cell_mean) < 1e-9


def test_the_closing_sentences_say_what_the_tests_concluded(record):
    tests = {(f["test"]["arms"][0], f["test"]["claim"].rsplit(" on ", 1)[1]): f for f in record["transfer"]}
    for method in METHODS:
        sentence = record["findings"][method]
        for task in TASKS:
            f = tests.get((method, task))
            if f is None:
                assert f"{task}: '-'" in sentence, (method, task)
            elif f["controls_pass"]:
                assert f"{f['test']['difference']:+.3f}" in sentence and f["conclusion"] in sentence, (method, task)
            else:
                assert "cannot decide" in sentence
        rec = record["record"][method]
        assert rec["own task"] == OWN_TASK[method]
        assert set(rec["extensions"]) == {t for t in TASKS if (method, t) in EXTENSIONS and (method, t) in tests}
        for task in rec["extensions"]:  # named as the book's extension where it is said, never as the paper's
            assert EXTENSIONS[method, task] in sentence and "extension" in tests[method, task]["test"]["claim"]
        better = [t for t in TASKS if (method, t) in tests and tests[method, t]["controls_pass"]
                  and tests[method, t]["test"]["verdict"] == "A better" and t != OWN_TASK[method]
                  and (method, t) not in EXTENSIONS]  # the book's extension counts for nothing
        assert sorted(rec["better"]) == sorted(better)
        assert rec["transfers"] == any(kind(method, t) != KIND[OWN_TASK[method]] for t in better)


def test_the_page_shows_the_findings(record):
    if not PAGE.is_file():
        pytest.skip(f"{PAGE} not there: run `make book` first")
    text = re.sub(r"\s+", " ", PAGE.read_text(errors="replace"))
    for key in METHODS:
        intervals = re.findall(r"[+-]\d\.\d{3} \[[+-]\d\.\d{3}, [+-]\d\.\d{3}\]", record["findings"][key])
        assert intervals, f"the finding of {key} states no interval"
        missing = [i for i in intervals if i not in text]
        assert not missing, f"the page lacks {key}'s intervals {missing}"
