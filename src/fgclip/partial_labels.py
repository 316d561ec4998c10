"""The partial-label protocol: seeded masks of known labels per proportion, saved with a run.

Each (image, category) entry is known with probability ``proportion``, as in the
HCP-MLR-PL protocol; unknown entries become -1 in the training targets. One uniform draw
u_{ic} ~ U(0, 1) per entry (seeded) serves every proportion, entry known iff u_{ic} < ρ,
so the masks are nested: what is known at 10% is also known at 30%, 50%, ...
"""
from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np

from .fileio import atomic_write_bytes

UNKNOWN = -1  # the target of an entry whose label is not known (1: positive, 0: negative)


def known_masks(shape: tuple[int, int], proportions: list[float], seed: int
                ) -> dict[float, np.ndarray]:
    """Boolean (N, C) known-label masks, one per proportion ρ in (0, 1], nested in ρ: Eq.
    (eq-partial-labels) of chapter 4, K_ρ = {(i, c) : u_ic < ρ} with u_ic ~ U(0, 1) seeded."""
    for rho in proportions:
        if not 0 < rho <= 1:
            raise ValueError(f"proportions must lie in (0, 1], got {rho}")
    u = np.random.default_rng(seed).random(shape)  # (N, C)
    return {float(rho): u < rho for rho in proportions}


def partial_targets(labels: np.ndarray, known: np.ndarray) -> np.ndarray:
    """Targets in {1, 0, -1}: the full 0/1 labels where known, -1 (unknown) elsewhere."""
    if labels.shape != known.shape:
        raise ValueError(f"labels {labels.shape} and known mask {known.shape} differ in shape")
    return np.where(known, labels.astype(np.int64), UNKNOWN)


def save_masks(path: str | os.PathLike, masks: dict[float, np.ndarray], seed: int) -> Path:
    """Write the masks atomically as ``.npz`` (keys ``known_<ρ>`` and ``seed``)."""
    buf = io.BytesIO()
    np.savez_compressed(buf, seed=np.int64(seed),
                        **{f"known_{rho:g}": m for rho, m in masks.items()})
    return atomic_write_bytes(path, buf.getvalue())


def load_masks(path: str | os.PathLike) -> tuple[dict[float, np.ndarray], int]:
    """The masks and the seed written by :func:`save_masks`."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"mask file not found: {path}")
    with np.load(path) as data:
        if "seed" not in data:
            raise KeyError(f"{path} has no field 'seed'")
        masks = {float(k[len("known_"):]): data[k] for k in data.files if k.startswith("known_")}
        return masks, int(data["seed"])
