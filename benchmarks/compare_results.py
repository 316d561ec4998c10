"""Compare two builds' chapter results, value by value: a refactor must not change a number.

    .venv/bin/python benchmarks/compare_results.py BASE_DIR NEW_DIR [--ignore PATTERN ...]

Reads every ``<chapter>.json`` of either folder (``make book`` writes them to
``_build/results/``) and prints, per chapter, ``identical`` or each key path whose value
differs (``verdicts[3].ci_high: 0.125 -> 0.126``), comparing floats exactly as JSON stores
them. Only wall-clock measurements are left out, by the key-path patterns of IGNORED
(fnmatch, matched against the whole path; ``--ignore`` adds more); every ignored path
that was present is listed. Exits 1 when a chapter differs or is missing on one side.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import sys
from pathlib import Path
from typing import Any, Iterator

IGNORED = (
    "wall_s",  # the chapter's wall time (chapters 2 and 3)
    "train_s",  # chapter 3's training time
    "speed_pairs_per_s.pairs/s.*",  # chapter 2's timed throughput (its GFLOP/pair are compared)
    "speed_pairs_per_s.GFLOP/s.*",  # GFLOP/pair times the timed pairs/s
)


def flatten(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(key path, leaf value) of a JSON document: ``a.b[2].c``; empty containers are leaves."""
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from flatten(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            yield from flatten(v, f"{path}[{i}]")
    else:
        yield path, value


def compare(base: Any, new: Any, ignored=IGNORED) -> tuple[list[str], list[str]]:
    """(differences as 'path: base -> new', the ignored paths present) of two documents."""
    a, b = dict(flatten(base)), dict(flatten(new))
    skip = lambda p: any(fnmatch.fnmatchcase(p, pat) for pat in ignored)  # noqa: E731
    missing = object()
    diffs = [f"{p}: {a.get(p, '(absent)')!r} -> {b.get(p, '(absent)')!r}"
             for p in sorted(set(a) | set(b)) if not skip(p) and a.get(p, missing) != b.get(p, missing)]
    return diffs, sorted(p for p in set(a) | set(b) if skip(p))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--ignore", action="append", default=[], metavar="PATTERN",
                    help="another key-path pattern to leave out (fnmatch), besides the wall-clock ones")
    ap.add_argument("--show", type=int, default=20, help="differences printed per chapter")
    args = ap.parse_args(argv)
    chapters = sorted({p.stem for d in (args.base, args.new) for p in d.glob("*.json")})
    if not chapters:
        print(f"no <chapter>.json in {args.base} or {args.new}")
        return 1
    ignored = IGNORED + tuple(args.ignore)
    print(f"ignored key paths (wall clock): {', '.join(ignored)}")
    failed = False
    for ch in chapters:
        fa, fb = args.base / f"{ch}.json", args.new / f"{ch}.json"
        if not (fa.is_file() and fb.is_file()):
            print(f"{ch}: only in {fa.parent if fa.is_file() else fb.parent}")
            failed = True
            continue
        diffs, skipped = compare(json.loads(fa.read_text()), json.loads(fb.read_text()), ignored)
        note = f" (ignored: {', '.join(skipped)})" if skipped else ""
        if diffs:
            failed = True
            print(f"{ch}: {len(diffs)} differing key paths{note}")
            for d in diffs[:args.show]:
                print(f"  {d}")
            if len(diffs) > args.show:
                print(f"  ... and {len(diffs) - args.show} more")
        else:
            print(f"{ch}: identical{note}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
