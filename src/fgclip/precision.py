"""Numeric precision: ``auto`` (the default) picks bf16 where the device runs it natively,
fp32 elsewhere; ``fp32`` is the reference; ``bf16`` forces bf16 autocast.

Why a choice at all: bf16 autocast pays only where the hardware multiplies bf16 natively.
On a CPU with ``avx512_bf16`` (AMD Zen 4, Intel Cooper Lake and later) or AMX (Intel
Sapphire Rapids) a bf16 matrix product ran 2.4x to 4x faster than fp32 on this project's
machines; on an AVX2-only CPU (AMD Zen 3) torch emulates it and it ran about 57x
*slower* (0.9 against 51.5 GFLOP/s), which made a bf16 default 19x slower than fp32.
:func:`resolve_precision` holds the one decision; everything else asks it.
"""
from __future__ import annotations

import contextlib
import functools
import warnings
from pathlib import Path

import torch

PRECISIONS = ("auto", "fp32", "bf16")
NATIVE_BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")  # /proc/cpuinfo flags (x86)
EMULATED_BF16_SLOWDOWN = "about 57x slower matrix products than fp32 (measured on an AVX2-only AMD Zen 3)"
_ANNOUNCED: set[tuple[str, str]] = set()  # (requested, device type) already printed / warned


def check_precision(precision: str) -> str:
    """``precision`` itself if it is one of :data:`PRECISIONS`; a ValueError naming it if not."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    return precision


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags from /proc/cpuinfo (first processor); empty where there is none."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):  # x86 / ARM spelling
            return frozenset(value.split())
    return frozenset()


def cuda_bf16_native(device: torch.device) -> tuple[bool, str]:
    """(native bf16?, the GPU's name and compute capability): native from capability 8.0 (Ampere)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    major, minor = torch.cuda.get_device_capability(index)
    return major >= 8, f"{torch.cuda.get_device_name(index)} (compute capability {major}.{minor})"


def cpu_capability() -> dict[str, object]:
    """What the benchmarks record: torch's CPU kernel level and the native bf16 flags found."""
    return {"torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "native_bf16_flags": [f for f in NATIVE_BF16_CPU_FLAGS if f in cpu_flags()]}


def native_bf16(device: torch.device | str) -> tuple[bool, str]:
    """Whether ``device`` runs bf16 matrix products natively, and the evidence, in words.

    CPU: one of :data:`NATIVE_BF16_CPU_FLAGS` among the CPU's flags (read, never inferred
    from the vendor: one "AMD EPYC" has them, another does not). CUDA: compute capability
    >= 8.0. Any other device type: no rule here, so not native.
    """
    device = torch.device(device)
    if device.type == "cpu":
        found = [f for f in NATIVE_BF16_CPU_FLAGS if f in cpu_flags()]
        level = torch.backends.cpu.get_cpu_capability()
        if found:
            return True, f"the CPU has {'+'.join(found)} (torch CPU capability {level})"
        return False, (f"the CPU has neither {' nor '.join(NATIVE_BF16_CPU_FLAGS)} "
                       f"(torch CPU capability {level}): bf16 would be emulated")
    if device.type == "cuda":
        ok, name = cuda_bf16_native(device)
        return ok, f"{name} {'supports' if ok else 'lacks'} native bf16"
    return False, f"no native-bf16 rule for device type {device.type!r}"


def resolve_precision(precision: str, device: torch.device | str,
                      announce: bool = False) -> tuple[str, str]:
    """(chosen, reason): ``'fp32'`` or ``'bf16'`` for a requested ``precision`` on ``device``.

    auto -> bf16 if :func:`native_bf16` else fp32; fp32 and bf16 are kept as asked. An
    explicit bf16 on a device without native bf16 still runs, with a RuntimeWarning that
    names the expected slowdown. ``announce`` prints what ``auto`` chose (once per process
    and device type); the warning is likewise given once.
    """
    check_precision(precision)
    device = torch.device(device)
    if precision == "fp32":
        return "fp32", "fp32 was asked for (the reference)"
    native, why = native_bf16(device)
    key = (precision, device.type)
    if precision == "bf16":
        if not native and key not in _ANNOUNCED:
            _ANNOUNCED.add(key)
            slow = EMULATED_BF16_SLOWDOWN if device.type == "cpu" else "possibly much slower than fp32"
            warnings.warn(f"precision='bf16' on a device without native bf16: {why}; expect {slow}. "
                          "precision='auto' would choose fp32 here.", RuntimeWarning, stacklevel=3)
        return "bf16", f"bf16 was asked for; {why}"
    chosen = "bf16" if native else "fp32"
    reason = f"auto chose {chosen}: {why}"
    if announce and key not in _ANNOUNCED:
        _ANNOUNCED.add(key)
        print(f"precision: {reason}", flush=True)
    return chosen, reason


def autocast_context(device: torch.device, precision: str):
    """bf16 autocast when ``precision`` resolves to bf16 (:func:`resolve_precision`); else a no-op."""
    chosen, _ = resolve_precision(precision, device, announce=True)
    if chosen == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)
