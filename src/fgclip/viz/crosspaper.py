"""Chapter 5's figure: the same images, every arm's map for the same object name, side by side."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from .heatmaps import overlay_heatmap
from .style import COLUMN_WIDTH

Box = tuple[float, float, float, float]


def plot_method_maps(images: Sequence[np.ndarray], names: Sequence[str], boxes: Sequence[Sequence[Box]],
                     maps: Mapping[str, Sequence[np.ndarray | None]], reasons: Mapping[str, str] = {}) -> plt.Figure:
    """One row per image (its name and the name's boxes), one column per arm: the arm's (h, w)
    map over the image, each map scaled to its own range (the pointing rule reads only its
    argmax); a column of None is drawn blank with its short reason."""
    n, arms = len(images), list(maps)
    if not n or len(names) != n or len(boxes) != n or any(len(m) != n for m in maps.values()):
        raise ValueError(f"need one name, boxes and map per image ({n}) in every arm")
    fig, axes = plt.subplots(n, len(arms), figsize=(COLUMN_WIDTH, 1.25 * n + 0.4), squeeze=False,
                             gridspec_kw={"wspace": 0.05, "hspace": 0.1})
    for r, (image, name, bx) in enumerate(zip(images, names, boxes)):
        for c, arm in enumerate(arms):
            ax, heat = axes[r, c], maps[arm][r]
            if heat is None:
                ax.axis("off")
                ax.text(0.5, 0.5, reasons.get(arm, "-"), ha="center", va="center", fontsize=5,
                        transform=ax.transAxes)
            else:
                overlay_heatmap(ax, image, heat, boxes=bx, colorbar=False)
            if r == 0:
                ax.set_title(arm, fontsize=6)
        axes[r, 0].set_ylabel(name, fontsize=6)
    fig.subplots_adjust(left=0.05, right=0.99, top=0.93, bottom=0.01)
    return fig
