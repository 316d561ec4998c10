"""Object retrieval, shown: the top-k images for a typed name, with the matching query's region.

For a name with text embedding t, the index returns the k images with the highest
max_i <t, e_i>; on each image the heatmap is the attention of the winning query i* over
the feature map (its share on itself, the token t_i*, is given in the title). Annotated
boxes are drawn in the shown image's pixels: a box of an image of size (H, W) shown
resized to (H', W') is scaled by (W'/W, H'/H) (:func:`boxes_on_images`).
"""
from __future__ import annotations

from typing import Callable, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch

from ..datasets.boxes import Box, scale_boxes
from ..index import EmbeddingIndex
from .heatmaps import overlay_heatmap
from .style import COLUMN_WIDTH


def boxes_on_images(boxes: Sequence[Sequence[Box]], box_sizes: Sequence[tuple[int, int]],
                    images: np.ndarray | Sequence[np.ndarray]) -> list[list[Box]]:
    """Each image's boxes, given in the pixels of its original (H, W) = ``box_sizes[i]``,
    in the pixels of ``images[i]`` (H', W', 3): x scaled by W'/W, y by H'/H."""
    if not len(boxes) == len(box_sizes) == len(images):
        raise ValueError(f"boxes ({len(boxes)}), box_sizes ({len(box_sizes)}) and images ({len(images)}) "
                         "must have one entry per image")
    return [scale_boxes(list(b), tuple(hw), tuple(img.shape[:2])) for b, hw, img in zip(boxes, box_sizes, images)]


def make_retrieval_draw(encode_text: Callable[[str], torch.Tensor], embeddings: torch.Tensor,
                        attention: torch.Tensor, images: np.ndarray, grid: tuple[int, int],
                        labels: Sequence[set[str]] | None = None,
                        boxes: Sequence[Sequence[Box]] | None = None,
                        box_sizes: Sequence[tuple[int, int]] | None = None,
                        ) -> Callable[..., plt.Figure]:
    """A ``draw(name, k)`` for :class:`fgclip.viz.widgets.InteractiveFigure`.

    encode_text: name -> (D,) normalised text embedding; embeddings (I, N, D); attention
    (I, N, 1 + h*w) from the SUM-CLIP head; images uint8 (I, H, W, 3); labels (optional):
    the category names in each image, to mark hits and misses; boxes (optional): each
    image's boxes (x0, y0, x1, y1) in the pixels of its original size, box_sizes[i] = (H, W)
    (needed with boxes), drawn scaled to the shown image.
    """
    if embeddings.shape[:2] != attention.shape[:2] or len(images) != len(embeddings):
        raise ValueError(f"embeddings {tuple(embeddings.shape)}, attention {tuple(attention.shape)} "
                         f"and {len(images)} images do not line up")
    if attention.shape[2] != 1 + grid[0] * grid[1]:
        raise ValueError(f"attention covers {attention.shape[2] - 1} positions, grid {grid} has "
                         f"{grid[0] * grid[1]}")
    if boxes is not None and box_sizes is None:
        raise ValueError("box_sizes: the (height, width) each image's boxes are measured in is needed with boxes")
    shown = boxes_on_images(boxes, box_sizes, images) if boxes is not None else None
    index = EmbeddingIndex(embeddings.numpy())

    def draw(name: str, k: int = 5) -> plt.Figure:
        name = name.strip()
        fig, axes = plt.subplots(1, k, figsize=(COLUMN_WIDTH, COLUMN_WIDTH / k * 1.25),
                                 squeeze=False)
        if not name:
            fig.suptitle("type an object name", fontsize=9)
            for ax in axes[0]:
                ax.axis("off")
            return fig
        t = encode_text(name)  # (D,)
        scores, ids = index.search(t[None].numpy(), k)
        for ax, score, i in zip(axes[0], scores[0], ids[0]):
            best = int((embeddings[i] @ t).argmax())  # the winning query i*
            heat = attention[i, best, 1:].reshape(grid)
            mark = ""
            if labels is not None:
                mark = " hit" if name in labels[i] else " miss"
            overlay_heatmap(ax, images[i], heat, boxes=shown[i] if shown is not None else (),
                            colorbar=False, vmin=0, label="attention",
                            title=f"{score:.2f}{mark}\nq{best}, self {attention[i, best, 0]:.2f}")
        fig.suptitle(f"top {k} images for '{name}' (score = max over embeddings)", fontsize=9)
        fig.tight_layout()
        return fig

    return draw
