"""Numeric precision: bf16 autocast on CPU or CUDA, fp32 as the reference."""
from __future__ import annotations

import contextlib

import torch

PRECISIONS = ("fp32", "bf16")


def check_precision(precision: str) -> str:
    """``precision`` itself if it is one of :data:`PRECISIONS`; a ValueError naming it if not."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    return precision


def autocast_context(device: torch.device, precision: str):
    """bf16 autocast when precision == 'bf16'; a no-op for 'fp32'."""
    if check_precision(precision) == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
