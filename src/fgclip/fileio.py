"""Atomic file writes: a reader never sees a half-written file.

Every writer puts its bytes in a temporary file in the destination's own directory and
then renames it over the destination with :func:`os.replace`, which is atomic on POSIX
and Windows when both paths are on the same file system (same directory guarantees that).
"""
from __future__ import annotations

import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any, BinaryIO, Callable

import numpy as np
from PIL import Image


def atomic_write_bytes(path: str | os.PathLike, data: bytes, durable: bool = False) -> Path:
    """Write ``data`` to ``path`` atomically, creating parent directories; returns the path.

    ``durable=True`` also fsyncs the file before the rename (slower; only needed to survive
    a power loss, not for atomicity with respect to other readers).
    """
    return atomic_write_stream(path, lambda f: f.write(data), durable)


def atomic_write_stream(path: str | os.PathLike, write: Callable[[BinaryIO], Any],
                        durable: bool = False) -> Path:
    """Atomically write what ``write(file)`` writes into an open binary file: streamed to
    the temporary file, never held in memory as a whole (e.g. ``torch.save(obj, f)`` of a
    cache of several GB). Otherwise as :func:`atomic_write_bytes`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600 files; outputs are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write UTF-8 text atomically (newlines are written as given, never translated)."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj: Any, indent: int | None = None) -> Path:
    """Write ``obj`` as JSON atomically."""
    return atomic_write_text(path, json.dumps(obj, indent=indent) + "\n")


def atomic_write_png(path: str | os.PathLike, image: np.ndarray) -> Path:
    """Encode an (H, W, 3) uint8 array as PNG with PIL and write it atomically."""
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"expected an (H, W, 3) uint8 image, got {image.dtype} {image.shape}")
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image)).save(buf, format="PNG")
    return atomic_write_bytes(path, buf.getvalue())
