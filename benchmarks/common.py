"""What every benchmark script shares: the machine's description, peak memory, the output file.

Each script ``benchmarks/bench_<name>.py`` measures in one process and writes
``benchmarks/results/<name>.json`` (or ``$FGCLIP_BENCH_RESULTS/<name>.json``) through
:func:`write_benchmark`;
``benchmarks/run_all.py`` runs them all and prints one table. Benchmarks measure; they
assert nothing about speed.
"""
from __future__ import annotations

import datetime as dt
import os
import platform
import resource
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from fgclip.fileio import atomic_write_json  # noqa: E402

# FGCLIP_BENCH_RESULTS redirects every result file (the smoke test writes to a temp folder)
RESULTS_DIR = Path(os.environ.get("FGCLIP_BENCH_RESULTS", Path(__file__).with_name("results")))


def machine() -> str:
    """CPU model, cores and torch threads (or the GPU when one is used)."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = f", {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""
    return f"{cpu}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads{gpu}"


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write_benchmark(name: str, rows: list[dict[str, Any]], ratios: dict[str, float],
                    command: str, extra: dict[str, Any] | None = None) -> Path:
    """Write ``results/<name>.json``; each row is {"name", "metric", "value", "unit", ...}."""
    for i, row in enumerate(rows):
        missing = {"name", "metric", "value", "unit"} - set(row)
        if missing:
            raise ValueError(f"benchmark {name!r}: row {i} lacks {sorted(missing)}")
    payload = {"benchmark": name, "date": dt.date.today().isoformat(), "machine": machine(),
               "torch": torch.__version__, "command": command, "rows": rows, "ratios": ratios,
               "peak_rss_mb": peak_rss_mb(), **(extra or {})}
    return atomic_write_json(RESULTS_DIR / f"{name}.json", payload, indent=2)
