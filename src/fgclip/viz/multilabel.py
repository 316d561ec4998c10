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
