"""How a chapter reports: library code on the page, seed tables, the closing findings, results.json,
and the paths it prints (:func:`shown`)."""
from __future__ import annotations

import inspect
import os
import re
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pandas as pd
from IPython.display import Markdown

from .fileio import atomic_write_json
from .stats import mean_std


def show_source(*functions: Callable) -> Markdown:
    """The library's own source of ``functions``, shown on the page as one Python code block.

    A chapter shows the function that computes an equation right under it, so the reader
    sees the code that runs, not a copy of it that could drift.
    """
    if not functions:
        raise ValueError("show_source needs at least one function")
    blocks = [inspect.getsource(f).rstrip() for f in functions]
    return Markdown("```python\n" + "\n\n\n".join(blocks) + "\n```")


def shown(path: str | Path, parts: int = 2) -> str:
    """A path as a chapter prints it, without where the machine keeps it: a relative path (or
    a name such as ``"openai"``) as given; an absolute one relative to the current folder when
    it lies under that folder's parent (``../data/ch0``, seen from ``notebooks/``); else
    ``.../`` and its last ``parts`` parts. The runner passes every path parameter absolute."""
    text = str(path)
    if not os.path.isabs(text):
        return text
    absolute, here = Path(os.path.normpath(text)), Path.cwd()
    if here.parent != Path(here.anchor) and (absolute == here.parent or here.parent in absolute.parents):
        return os.path.relpath(absolute, here)
    tail = absolute.parts[1:][-parts:]
    return str(Path("...", *tail)) if tail else text


GLUE_KEY = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def glue_findings(chapter: str, findings: Mapping[str, str]) -> dict[str, str]:
    """Glue each finding (Markdown built from the run) as ``<chapter>-<key>`` for the
    chapter's closing prose, which cites them with {glue:md}`<chapter>-<key>` roles.

    Where myst-nb is not installed (Colab without the book tools) nothing is glued; the
    chapter then shows the same findings as a plain box (:func:`found_box`). Returns the
    glued names.
    """
    bad = [k for k in findings if not GLUE_KEY.match(k)]
    if bad:
        raise ValueError(f"finding keys must be lower-case words joined by '-', got {bad}")
    names = {f"{chapter}-{k}": text for k, text in findings.items()}
    try:
        from myst_nb import glue
    except ImportError:
        return names
    for name, text in names.items():
        glue(name, Markdown(text), display=False)
    return names


def seed_table(df: pd.DataFrame, by: Sequence[str], metrics: Sequence[str],
               seed_col: str = "seed", digits: int = 3) -> pd.DataFrame:
    """One row per group of ``by``: each metric as 'mean ± std' over the seeds, and n_seeds."""
    missing = [c for c in (*by, *metrics, seed_col) if c not in df.columns]
    if missing:
        raise KeyError(f"seed_table: columns {missing} not in the frame ({list(df.columns)})")
    grouped = df.groupby(list(by), sort=False)
    out = grouped[list(metrics)].agg(lambda s: mean_std(s, digits))
    out["n_seeds"] = grouped[seed_col].nunique()
    return out


def found_box(title: str, bullets: Sequence[str]) -> Markdown:
    """The chapter's closing admonition; bullets are Markdown strings built from the run."""
    if not bullets:
        raise ValueError("found_box needs at least one finding")
    body = "\n".join(f"- {b}" for b in bullets)
    return Markdown(f"```{{admonition}} {title}\n:class: tip\n{body}\n```\n")


RESULTS_DIR_ENV = "FGCLIP_RESULTS_DIR"  # set by `make book`: the chapters write <dir>/<chapter>.json


def _json_safe(obj: Any) -> Any:
    """Verdicts and falsifications as their records; numpy scalars as Python numbers."""
    if hasattr(obj, "to_dict") and callable(obj.to_dict) and not isinstance(obj, pd.DataFrame):
        return _json_safe(obj.to_dict())
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if hasattr(obj, "item") and getattr(obj, "ndim", 1) == 0:
        return _json_safe(obj.item())
    if isinstance(obj, float) and obj != obj:
        return None  # strict JSON has no NaN
    return obj


def results_destination(results_path: str, chapter: str | None) -> Path | None:
    """``results_path`` when set (``python -m fgclip run``), else $FGCLIP_RESULTS_DIR/<chapter>.json."""
    if results_path:
        return Path(results_path)
    directory = os.environ.get(RESULTS_DIR_ENV)
    if directory and chapter:
        return Path(directory) / f"{chapter}.json"
    return None


def write_results(results_path: str, payload: dict[str, Any], chapter: str | None = None) -> Path | None:
    """Write the chapter's results as strict JSON; returns where, or None when nowhere is set.

    Verdict objects (``fgclip.verdicts``) anywhere in ``payload`` are written as records.
    """
    destination = results_destination(results_path, chapter)
    if destination is None:
        return None
    atomic_write_json(destination, _json_safe(payload), indent=2)
    return destination
