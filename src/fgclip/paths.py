"""Where the project's own files live: the committed checkpoints and the chapter notebooks.

An editable install (``pip install -e .``, what ``make`` does) imports the package from the
checkout, so the checkout is two folders above this file. A regular install puts the
package in site-packages, away from ``checkpoints/`` and ``notebooks/``; then the home is
``$FGCLIP_HOME`` when set, else the current folder or the first parent that holds both.
"""
from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "FGCLIP_HOME"
MARKERS = ("checkpoints", "notebooks")


def _is_home(path: Path) -> bool:
    return all((path / m).is_dir() for m in MARKERS)


def project_home() -> Path:
    """The folder that holds ``checkpoints/`` and ``notebooks/``; a clear error if none does."""
    explicit = os.environ.get(HOME_ENV)
    if explicit:
        home = Path(explicit).expanduser().resolve()
        if not _is_home(home):
            raise FileNotFoundError(f"${HOME_ENV}={explicit} does not hold {' and '.join(MARKERS)}/")
        return home
    checkout = Path(__file__).resolve().parents[2]
    for candidate in (checkout, Path.cwd(), *Path.cwd().parents):
        if _is_home(candidate):
            return candidate
    raise FileNotFoundError(
        f"cannot find the fgclip project folder ({' and '.join(MARKERS)}/): run from inside a "
        f"clone of the repository or set ${HOME_ENV} to it")
