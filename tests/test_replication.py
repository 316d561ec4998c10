"""make replicate's comparison: claims matched by text and arms, statuses, the page table."""
import json
from pathlib import Path

import numpy as np
import pytest

from fgclip import replication
from fgclip.verdicts import compare


def _record(claim, a, b, margin=0.05):
    return compare(a, b, claim=claim, arms=("x", "y"), unit="u", margin=margin).to_dict()


def test_statuses_name_same_weakened_reversed_and_missing():
    rng = np.random.default_rng(0)
    up, down = rng.normal(1, 0.1, (3, 30)), np.zeros((3, 30))
    flat = rng.normal(0, 0.01, (3, 30))
    book = [_record("c1", up, down), _record("c2", up, down), _record("c3", up, down), _record("c4", flat, flat * 0)]
    rep = [_record("c1", up, down), _record("c2", flat, flat * 0), _record("c3", down, up), _record("c5", up, down)]
    rows = replication.compare_chapter("ch9", book, rep)
    got = {r["claim"]: r["status"] for r in rows}
    assert got == {"c1": "same", "c2": "weakened", "c3": "reversed", "c4": "missing", "c5": "missing"}
    assert replication.counts(rows) == {"same": 1, "weakened": 1, "reversed": 1, "missing": 2}
    page = replication.markdown(rows, {"date": "2026-12-04", "commit": "abc", "book_seed": 0, "replicate_seed": 1000})
    assert "**1 reversed**" in page and page.count("| ch9 |") == 5


@pytest.mark.parametrize("book, rep, expected", [("A better", "A better", "same"), ("A better", "cannot tell", "weakened"),
                                                 ("equivalent", "cannot tell", "weakened"),
                                                 ("B better", "A better", "reversed"), (None, "A better", "missing")])
def test_status_table(book, rep, expected):
    assert replication.status(book, rep) == expected


def test_missing_results_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="ch7.json"):
        replication.load_verdicts(tmp_path, "ch7")
    up, down = np.ones((3, 10)), np.zeros((3, 10))
    head, control = _record("headline", up, down), _record("planted", up, down)
    (tmp_path / "ch7.json").write_text(json.dumps({"verdicts": [head],
                                                   "controls": [{"test": head, "positive": control}]}))
    # nested verdicts (a control's) count too; the headline repeated inside the control counts once
    assert replication.load_verdicts(tmp_path, "ch7") == [head, control]


def test_a_claim_naming_a_choice_of_the_run_pairs_by_its_role(tmp_path):
    """Chapter 5 judges presence against the CLIP reading its validation chose: the book chose one
    reading ('x' here), the replicate another ('z'). Through each run's claim_roles both load under
    the role's claim and arms (what was run kept in as_run), and pair as 'same', not 'missing'."""
    up, down = np.ones((3, 10)), np.zeros((3, 10))

    def run(folder: str, reading: str) -> list[dict]:
        rec = compare(up, down, claim=f"m vs {reading} on presence", arms=("m", reading), unit="u", margin=0.05).to_dict()
        roles = {f"m vs {reading} on presence\tm\t{reading}": {"claim": "m vs chosen on presence", "arms": ["m", "chosen"]}}
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "ch5.json").write_text(json.dumps({"verdicts": [rec], "claim_roles": roles}))
        return replication.load_verdicts(tmp_path / folder, "ch5")

    book, rep = run("book", "x"), run("rep", "z")
    assert [(r["claim"], r["arms"], r["as_run"]) for r in book] == [("m vs chosen on presence", ["m", "chosen"], "m vs x")]
    rows = replication.compare_chapter("ch5", book, rep)
    assert [r["status"] for r in rows] == ["same"]


def test_two_different_verdicts_under_one_claim_are_refused(tmp_path):
    up, down = np.ones((3, 10)), np.zeros((3, 10))
    a, b = _record("same words", up, down), _record("same words", down, up)
    (tmp_path / "ch7.json").write_text(json.dumps({"verdicts": [a], "diagnostic": {"verdicts": [b]}}))
    with pytest.raises(ValueError, match="same words.*verdicts\\[0\\].*diagnostic.verdicts\\[0\\]"):
        replication.load_verdicts(tmp_path, "ch7")


def test_replicate_reads_the_book_first_and_lists_chapters_in_order(tmp_path, monkeypatch):
    from fgclip import runner

    up, down = np.ones((3, 10)), np.zeros((3, 10))
    book, runs = tmp_path / "book", tmp_path / "runs"
    book.mkdir()
    ran = []

    def fake_run(chapter, params, runs_dir):  # the replicate at its seed: ch1 reverses, ch0 agrees
        ran.append((chapter, params["seed"]))
        out = Path(runs_dir) / chapter
        out.mkdir(parents=True)
        rec = _record(f"{chapter} claim", down, up) if chapter == "ch1" else _record(f"{chapter} claim", up, down)
        (out / "results.json").write_text(json.dumps({"verdicts": [rec]}))
        return out

    monkeypatch.setattr(runner, "run_chapter", fake_run)
    (book / "ch1.json").write_text(json.dumps({"verdicts": [_record("ch1 claim", up, down)]}))
    with pytest.raises(FileNotFoundError, match="ch0.json"):  # before any chapter runs
        replication.replicate(["ch1", "ch0"], book, runs, seed=7)
    assert ran == []
    (book / "ch0.json").write_text(json.dumps({"verdicts": [_record("ch0 claim", up, down)]}))
    result = replication.replicate(["ch1", "ch0"], book, runs, seed=7, page=tmp_path / "page.md")
    assert ran == [("ch1", 7), ("ch0", 7)]
    assert [r["chapter"] for r in result["rows"]] == ["ch0", "ch1"]
    assert result["counts"] == {"same": 1, "weakened": 0, "reversed": 1, "missing": 0}
    assert "**1 reversed**" in (tmp_path / "page.md").read_text()
    with pytest.raises(ValueError, match="jobs"):
        replication.replicate(["ch0"], book, runs, jobs=0)


def test_a_partial_replicate_replaces_its_chapters_rows_and_keeps_the_others_with_their_commit(tmp_path, monkeypatch):
    from fgclip import runner

    up, down = np.ones((3, 10)), np.zeros((3, 10))
    book, runs, page = tmp_path / "book", tmp_path / "runs", tmp_path / "page.md"
    book.mkdir()
    for ch in ("ch0", "ch1"):
        (book / f"{ch}.json").write_text(json.dumps({"verdicts": [_record(f"{ch} claim", up, down)]}))
    flip = {"ch1": False}

    def fake_run(chapter, params, runs_dir):  # ch1 reverses once flip is set
        out = Path(runs_dir) / f"{chapter}-{len(list(Path(runs_dir).glob('*')) if Path(runs_dir).exists() else [])}"
        out.mkdir(parents=True)
        a, b = (down, up) if chapter == "ch1" and flip["ch1"] else (up, down)
        (out / "results.json").write_text(json.dumps({"verdicts": [_record(f"{chapter} claim", a, b)]}))
        return out

    monkeypatch.setattr(runner, "run_chapter", fake_run)
    monkeypatch.setattr(replication, "head_commit", lambda: "old")
    replication.replicate(["ch0", "ch1"], book, runs, seed=7, page=page)
    assert page.read_text().startswith("Last run: ") and "commit `old`" in page.read_text()
    flip["ch1"] = True
    monkeypatch.setattr(replication, "head_commit", lambda: "new")
    result = replication.replicate(["ch1"], book, runs, seed=7, page=page)
    assert [r["chapter"] for r in result["rows"]] == ["ch1"]  # this run's own comparison
    text = page.read_text()
    assert "Last runs: ch0 on " in text and "commit `old`; ch1 on " in text and "commit `new`" in text
    assert "| ch0 | ch0 claim |" in text and "| ch1 | ch1 claim |" in text and text.count("| ch1 |") == 1
    assert "Claims: 1 same, 0 weakened, **1 reversed**" in text  # ch0's kept row counts, ch1's new one replaced the old
    record = json.loads(page.with_suffix(".json").read_text())
    assert [m["chapters"] for m in record["runs"]] == [["ch0"], ["ch1"]]
    with pytest.raises(ValueError, match="another seed"):  # rows of two replicate seeds never share a table
        replication.replicate(["ch1"], book, runs, seed=8, page=page)
    page.with_suffix(".json").write_text("[]")
    with pytest.raises(ValueError, match="page.json"):
        replication.replicate(["ch1"], book, runs, seed=7, page=page)
