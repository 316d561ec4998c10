"""Progress bars that stay quiet in CI and tests (CI=true or TESTING set)."""
from __future__ import annotations

import os

from tqdm.auto import tqdm


def progress_disabled() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes") or "TESTING" in os.environ


def progress(iterable=None, **kwargs):
    kwargs.setdefault("disable", progress_disabled())
    return tqdm(iterable, **kwargs)
