"""Toy-world exports as a cache keyed by what made them.

A chapter's default ``data_root`` is a cache folder, not one dataset: each combination of
world configuration, seed, sizes and formats gets its own subfolder ``toy-<digest>/``, so
a rerun with another seed or size gets other data instead of silently reusing (or
truncating) the first export. A ``data_root`` that already holds a dataset (a user's real
COCO, VOC, Flickr30K or FOIL root, or any export) is used as it is, and nothing is ever
written next to it.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

from ..fileio import atomic_write_json

COMPLETE = "toy-export.json"  # written last: a folder without it is an interrupted export


def cache_key(**what: Any) -> str:
    """A short digest of everything that determines an export (JSON-serialisable values)."""
    text = json.dumps(what, sort_keys=True, default=lambda o: o.to_dict() if hasattr(o, "to_dict") else str(o))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def toy_export(data_root: str | Path, holds_dataset: Callable[[Path], bool],
               export: Callable[[Path], None], **what: Any) -> Path:
    """The folder a chapter reads: ``data_root`` itself when it holds a dataset, else the
    toy export of ``what`` under ``data_root/toy-<digest>/``, made once.

    ``export(folder)`` writes the toy world into an empty folder; it runs in a temporary
    sibling that is renamed into place only when complete, with ``toy-export.json``
    recording ``what``.
    """
    root = Path(data_root)
    if holds_dataset(root):
        return root
    target = root / f"toy-{cache_key(**what)}"
    if (target / COMPLETE).is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=root, prefix=".partial-"))
    try:
        export(work)
        atomic_write_json(work / COMPLETE, json.loads(json.dumps(what, default=lambda o: o.to_dict()
                                                              if hasattr(o, "to_dict") else str(o))), indent=1)
        if (target / COMPLETE).is_file():  # a concurrent run finished the same export first
            shutil.rmtree(work)
            return target
        if target.exists():  # an interrupted earlier export without its record
            shutil.rmtree(target)
        try:
            work.rename(target)
        except OSError:
            if not (target / COMPLETE).is_file():
                raise
            shutil.rmtree(work)  # lost the race to a concurrent run: its export is the same
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return target
