"""File helpers shared by the readers: required files, id lists and image lookup."""
from __future__ import annotations

import os
from pathlib import Path

from .errors import DatasetFormatError


def require_file(path: str | os.PathLike, what: str = "file") -> Path:
    """Return ``path`` as a Path, or raise DatasetFormatError when it is not an existing file."""
    path = Path(path)
    if not path.is_file():
        raise DatasetFormatError(path, f"missing {what}")
    return path


def read_id_list(path: str | os.PathLike, what: str = "id list") -> list[str]:
    """First whitespace column of every line (a VOC image set, a Flickr split list).

    A blank line is an error rather than being skipped.
    """
    path = require_file(path, what)
    ids = []
    for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        parts = line.split()
        if not parts:
            raise DatasetFormatError(path, "blank line", line=line_no)
        ids.append(parts[0])
    return ids


def find_image(image_dir: Path, image_id: str, filename: str | None, check: bool,
               source: Path, field: str) -> Path:
    """``image_dir/filename`` if given, else ``<image_id>.jpg`` or ``.png``, whichever exists.

    With ``check`` a missing image raises DatasetFormatError naming ``source`` and ``field``;
    without it the first candidate is returned unchecked.
    """
    candidates = [image_dir / filename] if filename else [
        image_dir / f"{image_id}{ext}" for ext in (".jpg", ".png")]
    for c in candidates:
        if c.is_file():
            return c
    if check:
        raise DatasetFormatError(source, f"image file not found: {candidates[0]}", field=field)
    return candidates[0]
