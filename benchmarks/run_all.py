"""Run every benchmark, then print one table of all results and the book's execution cost.

    .venv/bin/python benchmarks/run_all.py            # run every bench_*.py, then report
    .venv/bin/python benchmarks/run_all.py --report   # only report what results/ holds
    .venv/bin/python benchmarks/run_all.py --quick    # every script at toy sizes (a smoke run)

Each ``bench_<name>.py`` writes ``results/<name>.json`` (see common.py). The book's cost is
read from jupyter-book's execution cache (``_build/.jupyter_cache``, filled by
``make book``): the wall time of each chapter notebook and the total. The combined table
goes to stdout and to ``results/summary.md``; every result together, with the book's cost,
goes to ``benchmarks/results.json`` (named after the results folder, which
``$FGCLIP_BENCH_RESULTS`` can move: ``<folder>.json`` next to it). ``--quick`` runs each
script with the tiny arguments in ``QUICK_ARGS``: its numbers mean nothing, it only shows
that every script runs; the test suite runs it into a temporary folder.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from common import RESULTS_DIR
from fgclip.fileio import atomic_write_json, atomic_write_text

HERE = Path(__file__).resolve().parent
CACHE = HERE.parent / "_build" / ".jupyter_cache"
QUICK_ARGS = {  # smoke-run sizes: a few steps of each script, numbers without meaning
    "bench_clip4dm.py": ["--pairs", "4", "--repeats", "1"],
    "bench_ddp.py": ["--steps", "2", "--batch-size", "16"],
    "bench_for.py": ["--images", "8", "--maps", "4", "--paper-maps", "7", "--paper-images", "1", "--warmup", "0",
                     "--repeats", "1", "--sizes", "1000", "2000"],
    "bench_heads.py": ["--images", "32", "--epochs", "1", "--repeats", "1"],
    "bench_train.py": ["--steps", "1", "--rounds", "1", "--batch-size", "8", "--skip-compile"],
    "bench_train_convergence.py": ["--n-train", "64", "--epochs", "1", "--batch-size", "32", "--threads", "1",
                                   "--warmup-steps", "1", "--log-every", "1", "--n-val", "64", "--n-test", "64",
                                   "--seeds", "0"],
}


def run_benchmarks(quick: bool) -> list[str]:
    """Run each bench_*.py in its own process (so peak memory is per benchmark)."""
    scripts = sorted(HERE.glob("bench_*.py"))
    if quick and {s.name for s in scripts} != set(QUICK_ARGS):
        raise RuntimeError(f"QUICK_ARGS must name exactly the scripts {sorted(s.name for s in scripts)}")
    failed = []
    for script in scripts:
        print(f"== {script.name}", flush=True)
        args = QUICK_ARGS[script.name] if quick else []
        if subprocess.run([sys.executable, str(script), *args], cwd=HERE.parent).returncode != 0:
            failed.append(script.name)
    return failed


def book_cost() -> list[tuple[str, float]]:
    """(notebook, seconds) of the last successful execution of each cached notebook."""
    if not CACHE.is_dir():
        return []
    from jupyter_cache import get_cache
    rows = []
    for record in get_cache(CACHE).list_cache_records():
        seconds = record.data.get("execution_seconds")
        if seconds is not None:
            rows.append((Path(record.uri).name, float(seconds)))
    return sorted(rows)


def bench_results() -> dict[str, dict]:
    """The bench_*.py results in RESULTS_DIR (their files carry "benchmark" and "rows"), by file
    stem; other JSON there (the GPU pretraining sweeps of pretrain_sweep.py) is listed apart."""
    out = {}
    for path in sorted(RESULTS_DIR.glob("*.json")):
        res = json.loads(path.read_text())
        if "benchmark" in res and "rows" in res:
            out[path.stem] = res
    return out


def summary() -> str:
    lines = ["| benchmark | what | metric | value |", "|---|---|---|---|"]
    benches = bench_results()
    for res in benches.values():
        for row in res["rows"]:
            lines.append(f"| {res['benchmark']} | {row['name']} | {row['metric']} | "
                         f"{row['value']:,.4g} {row['unit']} |")
        for name, ratio in res.get("ratios", {}).items():
            lines.append(f"| {res['benchmark']} | **{name}** | ratio | **{ratio:.2f}x** |")
        if "peak_rss_mb" in res:
            lines.append(f"| {res['benchmark']} | whole run | peak RSS | {res['peak_rss_mb']:,.0f} MB |")
    cost = book_cost()
    if cost:
        lines += ["", "| book chapter (one torch thread, beside another chapter) | execution wall time |", "|---|---|"]
        lines += [f"| {name} | {sec / 60:.1f} min ({sec:.0f} s) |" for name, sec in cost]
        # make book runs two chapters at a time (fgclip.book_cache): the build takes about the
        # longer lane, not this sum
        lines.append(f"| **sum** (two run at a time) | **{sum(s for _, s in cost) / 60:.1f} min** |")
    others = sorted(p.stem for p in RESULTS_DIR.glob("*.json") if p.stem not in benches)
    if others:
        lines += ["", f"Also in {RESULTS_DIR.name}/ (not bench_*.py results): {', '.join(others)}."]
    machines = {res["machine"] for res in benches.values()}
    dates = {res["date"] for res in benches.values()}
    lines += ["", f"Measured on: {'; '.join(sorted(machines))} ({', '.join(sorted(dates))})."]
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--report", action="store_true", help="only summarise existing results")
    p.add_argument("--quick", action="store_true", help="smoke run: every script at tiny sizes")
    a = p.parse_args()
    failed = [] if a.report else run_benchmarks(a.quick)
    text = summary()
    atomic_write_text(RESULTS_DIR / "summary.md", text)
    combined = {path.stem: json.loads(path.read_text()) for path in sorted(RESULTS_DIR.glob("*.json"))}
    combined["book_cost_s"] = dict(book_cost())
    atomic_write_json(RESULTS_DIR.with_name(RESULTS_DIR.name + ".json"), combined, indent=2)
    print(text)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
