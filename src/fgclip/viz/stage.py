"""Chapter 0's figures: what the stage can show, and how each trained reader was chosen."""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .style import COLUMN_WIDTH


def plot_ceiling(table: pd.DataFrame, tasks: Sequence[str], targets: dict[str, float] | None = None) -> plt.Figure:
    """One panel per task: the score of every reader (oracle, then per model its linear probe
    and zero-shot), with the stage's target for that task as a dashed line where it has one.
    ``table``: rows {reader, model, <task>: score}."""
    fig, axes = plt.subplots(1, len(tasks), figsize=(COLUMN_WIDTH, COLUMN_WIDTH * 0.42), sharey=True)
    labels = [f"{r}\n{m}" if r != "oracle" else "oracle" for r, m in zip(table["reader"], table["model"])]
    colours = {"oracle": "0.35", "linear probe": "tab:blue", "zero-shot": "tab:orange"}
    for ax, task in zip(np.atleast_1d(axes), tasks):
        values = table[task].to_numpy(dtype=float)
        ax.bar(range(len(values)), np.nan_to_num(values), color=[colours.get(r, "0.6") for r in table["reader"]])
        for i, v in enumerate(values):
            ax.text(i, (0 if np.isnan(v) else v) + 0.02, "-" if np.isnan(v) else f"{v:.2f}", ha="center", fontsize=6)
        if targets and task in targets:
            ax.axhline(targets[task], ls="--", lw=1, color="k")
        ax.set_xticks(range(len(values)), labels, rotation=90, fontsize=6)
        ax.set_title(task, fontsize=7)
        ax.set_ylim(0, 1.08)
    np.atleast_1d(axes)[0].set_ylabel("score on held-out scenes")
    fig.tight_layout()
    return fig


def plot_selection_curves(selections: Sequence, title: str = "validation curves of every trained reader") -> plt.Figure:
    """One panel per arm: the mean validation curve of each learning rate over the selection
    seeds, the chosen (lr, epoch) marked; an arm whose best epoch is the budget's last is
    titled 'not converged'."""
    n = len(selections)
    cols = min(n, 3)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(COLUMN_WIDTH, 2.1 * rows), squeeze=False)
    for ax, sel in zip(axes.flat, selections):
        for lr in sel.curves:
            curve = sel.mean_curve(lr)
            ax.plot(range(1, len(curve) + 1), curve, marker=".", lw=1, label=f"lr {lr:g}")
        ax.plot([sel.epochs], [sel.score], "k*", ms=9)
        ax.set_title(sel.arm + ("" if sel.converged else " (not converged)"), fontsize=7)
        ax.set_xlabel("epoch", fontsize=7)
        ax.tick_params(labelsize=6)
        ax.legend(fontsize=5)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.suptitle(title, fontsize=8)
    fig.tight_layout()
    return fig
