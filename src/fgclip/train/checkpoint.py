"""Atomic checkpoints: a reader never sees a half-written file, even after a kill."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..fileio import atomic_write_stream


def save_atomic(obj: Any, path: str | Path) -> Path:
    """torch.save streamed through :func:`fgclip.fileio.atomic_write_stream` (fsync'd) onto ``path``."""
    return atomic_write_stream(path, lambda f: torch.save(obj, f), durable=True)


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    return torch.load(path, map_location="cpu", weights_only=False)
