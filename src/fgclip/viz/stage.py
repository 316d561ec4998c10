"""Chapter 0's figures: the shapes, and what the stage can show."""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .style import COLUMN_WIDTH


def plot_ceiling(table: pd.DataFrame, tasks: Sequence[str], targets: dict[str, float] | None = None) -> plt.Figure:
    """One panel per task: the score of every reader (oracle, then per model its linear probes
    and zero-shot), with the stage's target for that task as a dashed line where it has one.
    ``table``: rows {reader, model, <task>: score}."""
    fig, axes = plt.subplots(1, len(tasks), figsize=(COLUMN_WIDTH, COLUMN_WIDTH * 0.42), sharey=True)
    labels = [f"{r}\n{m}" if r != "oracle" else "oracle" for r, m in zip(table["reader"], table["model"])]
    colours = {"oracle": "0.35", "linear probe": "tab:blue", "pooled linear probe": "tab:green", "zero-shot": "tab:orange"}
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


def plot_shapes(categories: Sequence[str], radius: float = 14.0) -> plt.Figure:
    """Every drawable shape's mask at one radius (pixels of a 64 px image), named."""
    from ..toyworld import SHAPES

    cols = 16
    rows = -(-len(categories) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(COLUMN_WIDTH, COLUMN_WIDTH / cols * rows * 1.35), squeeze=False)
    size = int(2 * radius + 6)
    ys, xs = np.mgrid[0:size, 0:size].astype(np.float32) + 0.5
    for ax, name in zip(axes.flat, categories):
        ax.imshow(SHAPES[name]((xs - size / 2) / radius, (ys - size / 2) / radius), cmap="gray_r")
        ax.set_title(name, fontsize=5)
    for ax in axes.flat:
        ax.set_xticks([]), ax.set_yticks([])
    fig.tight_layout(pad=0.2)
    return fig
