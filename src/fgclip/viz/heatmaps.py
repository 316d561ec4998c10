"""Heatmap overlays: a score map stretched over its image, with boxes, a point and a colorbar.

Every chapter that shows "where" (word maps, attention maps, query regions) draws it
with :func:`overlay_heatmap`, so all heatmaps in the book share one look.
"""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.image import AxesImage

Box = tuple[float, float, float, float]


def _as_array(heat: np.ndarray | torch.Tensor) -> np.ndarray:
    if isinstance(heat, torch.Tensor):
        heat = heat.detach().float().cpu().numpy()
    heat = np.asarray(heat, dtype=np.float64)
    if heat.ndim != 2:
        raise ValueError(f"heat must be a 2-D (h, w) map, got shape {heat.shape}")
    return heat


def overlay_heatmap(ax: plt.Axes, image: np.ndarray, heat: np.ndarray | torch.Tensor, *,
                    boxes: Sequence[Box] = (), point: tuple[float, float] | None = None,
                    alpha: float = 0.55, cmap: str = "inferno", colorbar: bool = True,
                    vmin: float | None = None, vmax: float | None = None,
                    title: str | None = None, label: str = "score") -> AxesImage:
    """Draw ``image`` (H, W, 3) uint8 with the (h, w) map ``heat`` stretched over it.

    Cell (i, j) of the map covers pixels [j W/w, (j+1) W/w) x [i H/h, (i+1) H/h), the
    same convention as :func:`fgclip.metrics.pointing.argmax_point`. Boxes are
    (x0, y0, x1, y1) in pixel edges; ``point`` is (x, y) in pixels.
    """
    if image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"image must be (H, W, 3), got shape {image.shape}")
    heat = _as_array(heat)
    h_img, w_img = image.shape[:2]
    ax.imshow(image, extent=(0, w_img, h_img, 0), interpolation="nearest")
    im = ax.imshow(heat, extent=(0, w_img, h_img, 0), alpha=alpha, cmap=cmap, vmin=vmin,
                   vmax=vmax, interpolation="bilinear")
    for x0, y0, x1, y1 in boxes:
        ax.add_patch(plt.Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, ec="white", lw=1.2))
    if point is not None:
        ax.plot([point[0]], [point[1]], marker="x", color="cyan", markersize=8, mew=2)
    ax.set_xlim(0, w_img), ax.set_ylim(h_img, 0)
    ax.set_xticks([]), ax.set_yticks([])
    ax.grid(False)
    if title is not None:
        ax.set_title(title, fontsize=8)
    if colorbar:
        cbar = ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.03)
        cbar.set_label(label, fontsize=7)
        cbar.ax.tick_params(labelsize=6)
    return im
