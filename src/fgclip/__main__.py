"""Command line: ``python -m fgclip run CHAPTER [-f PARAMS.yaml] [-p NAME VALUE ...] [--check]``.

``-p`` values are YAML 1.2 (``1e-3`` is a float, ``true`` a bool) and may start with a
minus sign (``-p epsilon -5e-5``). ``--check`` validates and prints every parameter the
chapter would run with, and runs nothing.
"""
from __future__ import annotations

import argparse
import sys

import yaml

from .runner import (PARAMS_DIR, ParameterError, load_param_file, parse_value, resolved_parameters,
                     run_chapter)

PARAM_FLAGS = ("-p", "--param")


def split_param_pairs(argv: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Take every ``-p NAME VALUE`` out of ``argv`` before argparse, which would read a
    value such as ``-5e-5`` as an option."""
    rest, pairs, i = [], [], 0
    while i < len(argv):
        if argv[i] in PARAM_FLAGS:
            if len(argv) - i < 3:
                raise ParameterError(f"{argv[i]} needs a NAME and a VALUE")
            pairs.append((argv[i + 1], argv[i + 2]))
            i += 3
        else:
            rest.append(argv[i])
            i += 1
    return rest, pairs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fgclip")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="execute a chapter with papermill into runs/<chapter>/<timestamp>/")
    r.add_argument("chapter", help="ch0, ch1, ...")
    r.add_argument("-f", "--file", action="append", default=[],
                   help=f"YAML parameter set, e.g. {PARAMS_DIR.name}/ch0/cpu-small.yaml (or just cpu-small)")
    r.add_argument("-p", "--param", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                   help="one parameter, its value read as YAML 1.2")
    r.add_argument("--runs-dir", default="runs")
    r.add_argument("--check", action="store_true", help="validate and print the parameters; run nothing")
    r.add_argument("--log-output", action="store_true", help="stream the cells' output while they run")
    r.add_argument("--live-widgets", action="store_true",
                   help="take the widgets' live path (only with a frontend attached)")
    try:
        rest, pairs = split_param_pairs(sys.argv[1:] if argv is None else list(argv))
        a = p.parse_args(rest)
        params: dict = {}
        for f in a.file:
            path = PARAMS_DIR / a.chapter / f"{f}.yaml" if "/" not in f and not f.endswith(".yaml") else f
            params.update(load_param_file(path))
        params.update({name: parse_value(value) for name, value in pairs})
        if a.check:
            print(yaml.safe_dump(resolved_parameters(a.chapter, params), sort_keys=True), end="")
            return 0
        out = run_chapter(a.chapter, params, a.runs_dir, live_widgets=a.live_widgets,
                          log_output=a.log_output)
    except ParameterError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
