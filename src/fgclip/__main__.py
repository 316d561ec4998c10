"""Command line: ``python -m fgclip run CHAPTER [-f PARAMS.yaml] [-p NAME VALUE ...]``."""
from __future__ import annotations

import argparse
import sys

from .runner import PARAMS_DIR, ParameterError, load_param_file, parse_value, run_chapter


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fgclip")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="execute a chapter with papermill into runs/<chapter>/<timestamp>/")
    r.add_argument("chapter", help="ch0, ch1, ...")
    r.add_argument("-f", "--file", action="append", default=[],
                   help=f"YAML parameter set, e.g. {PARAMS_DIR.name}/ch0/cpu-small.yaml (or just cpu-small)")
    r.add_argument("-p", "--param", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    r.add_argument("--runs-dir", default="runs")
    a = p.parse_args(argv)
    params: dict = {}
    try:
        for f in a.file:
            path = PARAMS_DIR / a.chapter / f"{f}.yaml" if "/" not in f and not f.endswith(".yaml") else f
            params.update(load_param_file(path))
        params.update({name: parse_value(value) for name, value in a.param})
        out = run_chapter(a.chapter, params, a.runs_dir)
    except ParameterError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
