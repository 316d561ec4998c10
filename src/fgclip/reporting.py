"""How a chapter reports: seed tables, the closing "What we found" box, results.json."""
from __future__ import annotations

from typing import Any, Sequence

import pandas as pd
from IPython.display import Markdown

from .fileio import atomic_write_json
from .stats import mean_std


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


def write_results(results_path: str, payload: dict[str, Any]) -> None:
    """Write the chapter's headline numbers as JSON; nothing to do when no path is set."""
    if results_path:
        atomic_write_json(results_path, payload, indent=2)
