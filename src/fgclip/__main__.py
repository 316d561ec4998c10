"""Command line: ``python -m fgclip run CHAPTER [-f PARAMS.yaml] [-p NAME VALUE ...] [--check]``
and ``python -m fgclip replicate [--seed S]`` (every chapter again at a disjoint seed, its verdicts
beside the book's; exit status 1 when a verdict reverses).

``-p`` values are YAML 1.2 (``1e-3`` is a float, ``true`` a bool) and may start with a
minus sign (``-p epsilon -5e-5``). ``--check`` validates and prints every parameter the
chapter would run with, and runs nothing. A run prints a line on stderr as each cell starts
(``--quiet``: none). The console script ``fgclip`` is the same command. ``--help`` needs no
project folder; the runner is imported only once the arguments parse.
"""
from __future__ import annotations

import argparse
import json
import sys

import yaml

from .paths import project_home

PARAM_FLAGS = ("-p", "--param")


def split_param_pairs(argv: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Take every ``-p NAME VALUE`` out of ``argv`` before argparse, which would read a
    value such as ``-5e-5`` as an option."""
    rest, pairs, i = [], [], 0
    while i < len(argv):
        if argv[i] in PARAM_FLAGS:
            if len(argv) - i < 3:
                from .runner import ParameterError

                raise ParameterError(f"{argv[i]} needs a NAME and a VALUE")
            pairs.append((argv[i + 1], argv[i + 2]))
            i += 3
        else:
            rest.append(argv[i])
            i += 1
    return rest, pairs


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fgclip" if sys.argv[0].endswith("fgclip") else "python -m fgclip")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="execute a chapter with papermill into runs/<chapter>/<timestamp>/")
    r.add_argument("chapter", help="ch0, ch1, ...")
    r.add_argument("-f", "--file", action="append", default=[],
                   help="YAML parameter set, e.g. notebooks/params/ch0/cpu-small.yaml (or just cpu-small)")
    r.add_argument("-p", "--param", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                   help="one parameter, its value read as YAML 1.2")
    r.add_argument("--runs-dir", default="runs")
    r.add_argument("--check", action="store_true", help="validate and print the parameters; run nothing")
    r.add_argument("--log-output", action="store_true", help="stream the cells' output while they run")
    r.add_argument("--quiet", action="store_true", help="no line on stderr as each cell starts")
    r.add_argument("--live-widgets", action="store_true",
                   help="take the widgets' live path (only with a frontend attached)")
    rep = sub.add_parser("replicate", help="rerun every chapter at a disjoint seed and compare its verdicts")
    rep.add_argument("--seed", type=int, default=None, help="the replicate's base seed (default: 1000)")
    rep.add_argument("--book", default="_build/results", help="the book's results (make book)")
    rep.add_argument("--runs-dir", default="runs/replicate")
    rep.add_argument("--page", default="book/replication_last.md", help="the table the book's page includes")
    rep.add_argument("--chapters", nargs="*", default=None, help="default: every chapter")
    rep.add_argument("--jobs", type=int, default=1, help="chapters run side by side (give each one thread)")
    aa = sub.add_parser("ch3-a-a", help="chapter 3's A/A at a size the book cannot pay for, to book/ch3_a_a_last.md")
    aa.add_argument("--per-side", type=int, default=20, help="A/A seeds a side (the chapter's a_a_seeds)")
    aa.add_argument("--runs-dir", default="runs/ch3-a-a")
    aa.add_argument("--seed", type=int, default=0, help="the chapter's seed (data, folds and both sides' seeds)")
    aa.add_argument("--results", default="", help="an existing ch3 results.json instead of a new run")
    aa.add_argument("--commit", default="", help="with --results: the commit it ran at (default: HEAD)")
    aa.add_argument("--page", default="book/ch3_a_a_last.md", help="the page; its record goes beside it as .json")
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        rest, pairs = split_param_pairs(sys.argv[1:] if argv is None else list(argv))
    except ValueError as err:  # the runner's ParameterError
        print(f"error: {err}", file=sys.stderr)
        return 2
    a = _parser().parse_args(rest)  # --help and usage errors exit here
    try:
        project_home()  # a missing project folder is named at once, before the runner imports torch
        from .runner import (PARAMS_DIR, ParameterError, load_param_file, parse_value, resolved_parameters,
                             run_chapter)
    except FileNotFoundError as err:  # no project folder (fgclip.paths.project_home)
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        if a.command == "replicate":
            return _replicate(a)
        if a.command == "ch3-a-a":
            return _ch3_a_a(a)
        params: dict = {}
        for f in a.file:
            path = PARAMS_DIR / a.chapter / f"{f}.yaml" if "/" not in f and not f.endswith(".yaml") else f
            params.update(load_param_file(path))
        params.update({name: parse_value(value) for name, value in pairs})
        if a.check:
            print(yaml.safe_dump(resolved_parameters(a.chapter, params), sort_keys=True), end="")
            return 0
        out = run_chapter(a.chapter, params, a.runs_dir, live_widgets=a.live_widgets,
                          log_output=a.log_output, show_cells=not a.quiet)
    except ParameterError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(out)
    return 0


def _replicate(a: argparse.Namespace) -> int:
    from pathlib import Path

    from .replication import REPLICATE_SEED, replicate
    from .runner import REPO_ROOT

    chapters = a.chapters or sorted(p.stem.split("_")[0] for p in (REPO_ROOT / "notebooks").glob("ch*_*.py"))
    result = replicate(chapters, Path(a.book), Path(a.runs_dir), REPLICATE_SEED if a.seed is None else a.seed,
                       Path(a.page) if a.page else None, a.jobs)
    print(json.dumps(result["counts"]))
    for row in result["rows"]:
        if row["status"] == "reversed":
            print(f"REVERSED: {row['chapter']}: {row['claim']} ({row['arms']}): {row['book']} -> {row['replicate']}")
    return 1 if result["counts"]["reversed"] else 0


def _ch3_a_a(a: argparse.Namespace) -> int:
    import datetime as dt
    from pathlib import Path

    from .fileio import atomic_write_json, atomic_write_text
    from .replication import head_commit
    from .studies.for_retrieval.a_a_scale import a_a_markdown, a_a_record

    if a.per_side < 1:
        print(f"error: --per-side must be at least 1, got {a.per_side}", file=sys.stderr)
        return 2
    path = Path(a.results) if a.results else run_chapter_results("ch3", {"a_a_seeds": a.per_side, "seed": a.seed},
                                                                        a.runs_dir)
    results = json.loads(path.read_text())
    meta = {"date": dt.date.fromtimestamp(path.stat().st_mtime).isoformat(),  # the run's day, not today's
            "commit": a.commit or head_commit(),
            "command": f"python -m fgclip run ch3 -p a_a_seeds {len(results['a_a_seeds']['side A'])}"
                       + (f" -p seed {results['seeds'][0]}" if results.get("seeds", [0])[0] != 0 else "")}
    record = a_a_record(results, meta)
    page = Path(a.page)
    atomic_write_json(page.with_suffix(".json"), record, indent=1)
    atomic_write_text(page, a_a_markdown(record))
    print(f"{page}: {record['verdict']['outcome']}")
    return 0


def run_chapter_results(chapter: str, params: dict, runs_dir: str):
    """Run ``chapter`` with ``params`` (:func:`fgclip.runner.run_chapter`): its results.json."""
    from .runner import run_chapter

    return run_chapter(chapter, params, runs_dir) / "results.json"


if __name__ == "__main__":
    sys.exit(main())
