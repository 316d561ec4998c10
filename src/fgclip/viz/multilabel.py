"""Figures for multi-label recognition: mAP against the known-label proportion, and one
image's per-category scores with each category's attention map."""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .heatmaps import overlay_heatmap
from .style import COLUMN_WIDTH


def plot_map_vs_proportion(table: pd.DataFrame, title: str | None = None) -> plt.Figure:
    """``table``: rows = variants, columns = known-label proportions (0..1), values = mAP."""
    if table.empty:
        raise ValueError("plot_map_vs_proportion: empty table")
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH, COLUMN_WIDTH * 0.62))
    x = np.asarray(table.columns, dtype=float) * 100
    for variant, row in table.iterrows():
        ax.plot(x, row.to_numpy(dtype=float), marker="o", label=str(variant))
    ax.set_xlabel("known labels in training (%)")
    ax.set_ylabel("test mAP (macro)")
    ax.set_xticks(x)
    ax.legend(fontsize=7, frameon=False)
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig


def plot_proportion_curves(curves: list[dict], title: str | None = None) -> plt.Figure:
    """``curves``: :func:`~fgclip.studies.decoupling.sweep.proportion_curves` records, one panel
    each (shared y): one mean validation curve per known-label proportion, zero-shot and the
    arm untrained as horizontal lines, the arm's chosen epoch as a vertical one."""
    if not curves or not all(c.get("per known") for c in curves):
        raise ValueError("plot_proportion_curves: needs records with curves ('per known')")
    fig, axes = plt.subplots(1, len(curves), figsize=(COLUMN_WIDTH * 1.5, COLUMN_WIDTH * 0.5), sharey=True,
                             squeeze=False)
    for ax, rec in zip(axes[0], curves):
        for row in rec["per known"]:
            y = np.asarray(row["mean curve"], dtype=float)
            ax.plot(np.arange(1, len(y) + 1), y, marker="o", markersize=3, label=f"{row['known']:.0%} known")
        ax.axhline(rec["zero-shot"], color="0.3", linestyle="--", linewidth=1, label="zero-shot")
        ax.axhline(rec["untrained"], color="0.6", linestyle=":", linewidth=1, label="untrained")
        ax.axvline(rec["chosen"], color="0.8", linewidth=1, label="chosen epoch")
        ax.set_title(f"{rec['arm']}, lr {rec['lr']:g}", fontsize=8)
        ax.set_xlabel("epoch")
    axes[0, 0].set_ylabel("validation mAP (full labels)")
    axes[0, -1].legend(fontsize=6, frameon=False)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def draw_prediction(image: np.ndarray, scores: np.ndarray, attention: np.ndarray | None,
                    class_names: Sequence[str], present: Sequence[str],
                    boxes: dict[str, list], title: str = "") -> plt.Figure:
    """Bar chart of the C scores (present categories in a second colour) and, when given,
    the (C, h, w) attention maps over the image, each with its category's boxes."""
    c = len(class_names)
    if scores.shape != (c,) or (attention is not None and attention.shape[0] != c):
        raise ValueError(f"expected scores ({c},) and attention ({c}, h, w); got "
                         f"{scores.shape} and {None if attention is None else attention.shape}")
    n_cols = 6
    n_rows = 1 if attention is None else 1 + int(np.ceil(c / n_cols))
    fig = plt.figure(figsize=(COLUMN_WIDTH * 1.6, 1.7 * n_rows + 0.6))
    grid = fig.add_gridspec(n_rows, n_cols)
    ax = fig.add_subplot(grid[0, :])
    colors = ["tab:orange" if n in present else "tab:blue" for n in class_names]
    ax.bar(range(c), scores, color=colors)
    ax.set_xticks(range(c), class_names, rotation=60, fontsize=6)
    ax.set_ylabel("score s_c", fontsize=7)
    ax.set_title(title + "  (orange: present)", fontsize=8)
    if attention is not None:
        for k, name in enumerate(class_names):
            a = fig.add_subplot(grid[1 + k // n_cols, k % n_cols])
            overlay_heatmap(a, image, attention[k], boxes=boxes.get(name, []), colorbar=False,
                            title=name, vmin=0.0, vmax=float(attention.max()))
    fig.tight_layout()
    return fig


def draw_image_file_prediction(image_path, scores: np.ndarray, attention: np.ndarray | None,
                               objects: Sequence[tuple[str, tuple]], class_names: Sequence[str],
                               title: str = "") -> plt.Figure:
    """:func:`draw_prediction` for one image file and its [(category, box)] objects: the
    present categories and each one's boxes are read off ``objects``."""
    from PIL import Image

    present = sorted({c for c, _ in objects})
    boxes = {c: [b for n, b in objects if n == c] for c in present}
    image = np.asarray(Image.open(image_path).convert("RGB"))
    return draw_prediction(image, scores, attention, class_names, present, boxes, title=title)
