"""Do the book's verdicts replicate? Every chapter rerun at a disjoint base seed (fresh toy data,
fresh training seeds), its verdicts set beside the book's, claim by claim.

A claim is matched by its text and its two arms; every verdict record of a chapter's results
counts, the nested ones too (controls, falsifications, diagnostics). Between the book's verdict v and the
replicate's v' the status is

* ``same``: v' = v;
* ``weakened``: the two differ but do not name opposite winners (a side against 'cannot
  tell' or 'equivalent', or 'equivalent' against 'cannot tell');
* ``reversed``: one says A better and the other B better: a failing check;
* ``missing``: the claim is in one run only (a comparison a chapter makes only where it can).

``python -m fgclip replicate`` runs the chapters, writes the comparison next to the runs and
``book/replication_last.md``, which the book's page "Do the verdicts replicate?" includes, with
its record beside it (``.json``). Run on some chapters only (``--chapters``), it replaces those
chapters' rows and keeps the others', each under the date and commit of its own run.
"""
from __future__ import annotations

import datetime as dt
import json
import subprocess
from pathlib import Path
from typing import Iterable

from .fileio import atomic_write_json, atomic_write_text
from .verdicts import A_BETTER, B_BETTER

STATUSES = ("same", "weakened", "reversed", "missing")
REPLICATE_SEED = 1000  # chapters use seed .. seed + n_seeds - 1 and split keys of their own: far from 0


def claim_key(record: dict) -> tuple[str, str, str]:
    return record["claim"], record["arms"][0], record["arms"][1]


def status(book: str | None, replicate: str | None) -> str:
    if book is None or replicate is None:
        return "missing"
    if book == replicate:
        return "same"
    return "reversed" if {book, replicate} == {A_BETTER, B_BETTER} else "weakened"


def compare_chapter(chapter: str, book: Iterable[dict], replicate: Iterable[dict]) -> list[dict]:
    """One row per claim of either run: the chapter, the claim, both verdicts and the status."""
    b = {claim_key(r): r for r in book}
    r = {claim_key(x): x for x in replicate}
    rows = []
    for key in list(b) + [k for k in r if k not in b]:
        vb, vr = b.get(key), r.get(key)
        rows.append({"chapter": chapter, "claim": key[0], "arms": f"{key[1]} vs {key[2]}",
                     "book": vb["outcome"] if vb else "-", "replicate": vr["outcome"] if vr else "-",
                     "status": status(vb and vb["verdict"], vr and vr["verdict"])})
    return rows


def counts(rows: list[dict]) -> dict[str, int]:
    return {s: sum(row["status"] == s for row in rows) for s in STATUSES}


def _when(meta: dict) -> str:
    return f"{meta['date']}, commit `{meta['commit']}`"


def markdown(rows: list[dict], meta: dict | list[dict]) -> str:
    """The page's included table: when, at which commit and seeds, the counts, then every claim.
    ``meta`` is one run's, or a list of runs' (each with its ``chapters``) when the chapters of
    the table were last replicated at different commits (:func:`merge_with_page`)."""
    runs = meta if isinstance(meta, list) else [meta]
    when = (f"Last run: {_when(runs[0])}" if len(runs) == 1 else
            "Last runs: " + "; ".join(f"{', '.join(m['chapters'])} on {_when(m)}" for m in runs))
    c = counts(rows)
    lines = [f"{when}, book at seed {runs[0]['book_seed']}, "
             f"replicate at seed {runs[0]['replicate_seed']}. Claims: {c['same']} same, {c['weakened']} weakened, "
             f"**{c['reversed']} reversed**, {c['missing']} in one run only.", "",
             "| chapter | claim | arms | book | replicate | status |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['chapter']} | {r['claim']} | {r['arms']} | {r['book']} | {r['replicate']} | {r['status']} |"
              for r in rows]
    return "\n".join(lines) + "\n"


def merge_with_page(rows: list[dict], meta: dict, page: Path) -> tuple[list[dict], list[dict]]:
    """This run's rows and meta joined with the page's record (``page`` with suffix .json) for
    the chapters this run did not replicate: a chapter's rows always come from its latest run,
    and each run keeps its date and commit. Returns (rows in chapter order, runs)."""
    ran = meta["chapters"]  # this run's chapters, sorted (every row's chapter among them)
    runs, kept = [meta], []
    sidecar = page.with_suffix(".json")
    if sidecar.is_file():
        old = json.loads(sidecar.read_text())
        if not isinstance(old, dict) or "runs" not in old or "rows" not in old:
            raise ValueError(f"{sidecar}: expected fields 'runs' and 'rows' (a replication page's record)")
        kept = [r for r in old["rows"] if r["chapter"] not in ran]
        for m in old["runs"]:
            rest = [ch for ch in m["chapters"] if ch not in ran]
            if rest:
                runs.append({**m, "chapters": rest})
    runs.sort(key=lambda m: m["chapters"][0])
    return sorted(rows + kept, key=lambda r: r["chapter"]), runs


def verdict_records(record, where: str = "") -> list[tuple[str, dict]]:
    """Every verdict record (a dict with a claim, arms and a verdict) anywhere in a chapter's
    results, with its path: the top-level list and those nested in the controls, the
    falsifications and the diagnostics, which the replication must check as well."""
    if isinstance(record, dict):
        own = [(where, record)] if {"claim", "arms", "verdict"} <= record.keys() else []
        return own + [r for k, v in record.items() for r in verdict_records(v, f"{where}.{k}" if where else k)]
    if isinstance(record, list):
        return [r for i, v in enumerate(record) for r in verdict_records(v, f"{where}[{i}]")]
    return []


def unique_verdicts(found: list[tuple[str, dict]], source: str) -> list[dict]:
    """One record per claim key; the same key at two paths must be the same verdict (a control
    repeats a headline), else the chapter names two comparisons alike: a clear error."""
    seen: dict[tuple[str, str, str], tuple[str, dict]] = {}
    for path, rec in found:
        key = claim_key(rec)
        if key in seen:
            first_path, first = seen[key]
            if (first["verdict"], first["difference"]) != (rec["verdict"], rec["difference"]):
                raise ValueError(f"{source}: two different verdicts share the claim {key[0]!r} ({key[1]} vs "
                                 f"{key[2]}) at {first_path} and {path}; name them apart")
            continue
        seen[key] = (path, rec)
    return [rec for _, rec in seen.values()]


def head_commit() -> str:
    """The short hash of the checked-out commit, or "unknown" outside a git checkout."""
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip() or "unknown"


def with_role(record: dict, roles: dict[str, dict]) -> dict:
    """A record whose claim names a choice the run made on its own data (chapter 5's CLIP reading,
    chosen on validation) under the run-independent claim and arms the chapter's ``claim_roles``
    gives it ('claim<TAB>arm A<TAB>arm B' -> {"claim", "arms"}), what the run compared kept in
    ``as_run``; any other record as it is."""
    role = roles.get("\t".join((record["claim"], *record["arms"])))
    if role is None:
        return record
    return {**record, "claim": role["claim"], "arms": list(role["arms"]),
            "as_run": f"{record['arms'][0]} vs {record['arms'][1]}"}


def load_verdicts(results_dir: Path, chapter: str) -> list[dict]:
    path = results_dir / f"{chapter}.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no results for {chapter} (run `make book` first)")
    results = json.loads(path.read_text())
    roles = results.get("claim_roles", {})
    return unique_verdicts([(where, with_role(r, roles)) for where, r in verdict_records(results)], str(path))


def replicate(chapters: list[str], book_dir: Path, runs_dir: Path, seed: int = REPLICATE_SEED,
              page: Path | None = None, jobs: int = 1) -> dict:
    """Run every chapter at ``seed`` (its default parameters otherwise), ``jobs`` at a time in
    their own processes (give each one thread, as ``make replicate`` does), and compare its
    verdicts with those in ``book_dir``; write ``comparison.json`` under ``runs_dir`` and the
    page table. The book's results are read first, so a missing one stops before any run."""
    from concurrent.futures import ProcessPoolExecutor

    from .runner import run_chapter

    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    book = {ch: load_verdicts(book_dir, ch) for ch in chapters}
    if jobs == 1:
        outs = {ch: Path(run_chapter(ch, {"seed": seed}, runs_dir)) for ch in chapters}
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            runs = {ch: pool.submit(run_chapter, ch, {"seed": seed}, runs_dir) for ch in chapters}
            outs = {ch: Path(run.result()) for ch, run in runs.items()}
    rows = []
    for ch in sorted(chapters):  # run in any order (the longest first), listed in the book's
        rows += compare_chapter(ch, book[ch], load_verdicts(outs[ch], "results"))
    meta = {"date": dt.date.today().isoformat(), "commit": head_commit(), "book_seed": 0, "replicate_seed": seed,
            "chapters": sorted(chapters)}
    result = {"meta": meta, "counts": counts(rows), "rows": rows}
    atomic_write_json(runs_dir / "comparison.json", result, indent=1)
    if page is not None:  # the chapters not run keep their rows from the page's last record
        all_rows, runs = merge_with_page(rows, meta, page)
        if any(m["replicate_seed"] != seed for m in runs):
            raise ValueError(f"{page.with_suffix('.json')}: replicated at another seed than {seed}; rerun every chapter")
        atomic_write_json(page.with_suffix(".json"), {"runs": runs, "rows": all_rows}, indent=1)
        atomic_write_text(page, markdown(all_rows, runs))
    return result
