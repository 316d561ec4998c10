"""Where the project's own files live: the committed checkpoints and the chapter notebooks.

An editable install (``pip install -e .``, what ``make`` does) imports the package from the
checkout, so the checkout is two folders above this file. A regular install puts the
package in site-packages, away from ``checkpoints/`` and ``notebooks/``, and carries its
own copy of what the runner needs in ``fgclip/_home`` (the chapters, their parameter sets
and the toy checkpoints; ``setup.py`` copies them in when the wheel is built). The home is
``$FGCLIP_HOME`` when set; else the checkout, the current folder or the first parent that
holds both folders; else that installed copy.
"""
from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "FGCLIP_HOME"
MARKERS = ("checkpoints", "notebooks")
INSTALLED_HOME = Path(__file__).resolve().parent / "_home"  # only in a regular install


def _is_home(path: Path) -> bool:
    return all((path / m).is_dir() for m in MARKERS)


def is_installed_home(home: Path) -> bool:
    """Whether ``home`` is the copy a regular install carries (a folder inside site-packages,
    where a chapter should not write its data)."""
    return Path(home).resolve() == INSTALLED_HOME


def project_home() -> Path:
    """The folder that holds ``checkpoints/`` and ``notebooks/``; a clear error if none does."""
    explicit = os.environ.get(HOME_ENV)
    if explicit:
        home = Path(explicit).expanduser().resolve()
        if not _is_home(home):
            raise FileNotFoundError(f"${HOME_ENV}={explicit} does not hold {' and '.join(MARKERS)}/")
        return home
    checkout = Path(__file__).resolve().parents[2]
    for candidate in (checkout, Path.cwd(), *Path.cwd().parents, INSTALLED_HOME):
        if _is_home(candidate):
            return candidate
    raise FileNotFoundError(
        f"cannot find the fgclip project folder ({' and '.join(MARKERS)}/): run from inside a "
        f"clone of the repository, set ${HOME_ENV} to it, or reinstall the package (a regular "
        f"install carries its own copy in {INSTALLED_HOME})")
