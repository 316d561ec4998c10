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


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo ({} where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    fields = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields


def machine() -> str:
    """CPU model with its family/model numbers and bf16 instructions, cores, torch threads
    (and the GPU when one is used). A cloud "AMD EPYC" can be one of several generations
    whose bf16 matmul speed differs twofold; family and model tell them apart."""
    info = _cpuinfo()
    cpu = info.get("model name") or platform.processor() or platform.machine()
    if "cpu family" in info:
        cpu += f" (family {info['cpu family']} model {info.get('model', '?')})"
    flags = set(info.get("flags", "").split())
    bf16 = [f for f in ("avx512_bf16", "amx_bf16") if f in flags]
    isa = f", {'+'.join(bf16)}" if bf16 else ", no bf16 instructions" if flags else ""
    gpu = f", {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""
    return f"{cpu}{isa}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads{gpu}"


def precision_record() -> dict[str, Any]:
    """The CPU's capability and what ``precision='auto'`` chooses on this machine, and why
    (:func:`fgclip.precision.resolve_precision`, for the CPU and, where there is one, CUDA)."""
    from fgclip.precision import cpu_capability, resolve_precision

    record: dict[str, Any] = {"cpu": cpu_capability()}
    for device in ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",):
        chosen, reason = resolve_precision("auto", device)
        record["auto" if device == "cpu" else "auto_cuda"] = {"chosen": chosen, "reason": reason}
    return record


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write_benchmark(name: str, rows: list[dict[str, Any]], ratios: dict[str, float],
                    command: str, extra: dict[str, Any] | None = None) -> Path:
    """Write ``results/<name>.json``; each row is {"name", "metric", "value", "unit", ...}.

    Every file records the machine, the CPU's capability and what ``precision='auto'``
    chose there (``"precision"``: see :func:`precision_record`)."""
    for i, row in enumerate(rows):
        missing = {"name", "metric", "value", "unit"} - set(row)
        if missing:
            raise ValueError(f"benchmark {name!r}: row {i} lacks {sorted(missing)}")
    payload = {"benchmark": name, "date": dt.date.today().isoformat(), "machine": machine(),
               "torch": torch.__version__, "command": command, "rows": rows, "ratios": ratios,
               "precision": precision_record(), "peak_rss_mb": peak_rss_mb(), **(extra or {})}
    return atomic_write_json(RESULTS_DIR / f"{name}.json", payload, indent=2)
