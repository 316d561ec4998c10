"""How every trained arm was chosen: its validation curves (fgclip.train.selection)."""
from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt

from .style import COLUMN_WIDTH


def plot_selection_curves(selections: Sequence, title: str = "validation curves of every trained reader") -> plt.Figure:
    """One panel per arm: the mean validation curve of each learning rate over the selection
    seeds (each seed's own curve thin beside it), the chosen (lr, epoch) marked; an arm whose best epoch lies within the budget's last
    P (:attr:`~fgclip.train.selection.Selection.patience`) is titled 'not converged', one whose
    lr is at an end of the grid 'lr at edge'."""
    n = len(selections)
    cols = min(n, 3)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(COLUMN_WIDTH, 2.1 * rows), squeeze=False)
    for ax, sel in zip(axes.flat, selections):
        for lr in sel.curves:
            curve = sel.mean_curve(lr)
            (line,) = ax.plot(range(1, len(curve) + 1), curve, marker=".", lw=1, label=f"lr {lr:g}")
            for seed_curve in sel.curves[lr] if len(sel.curves[lr]) > 1 else []:  # each seed thin, in its lr's colour
                ax.plot(range(1, len(seed_curve) + 1), seed_curve, lw=0.5, alpha=0.45, color=line.get_color(), gid="seed curve")
        ax.plot([sel.epochs], [sel.score], "k*", ms=9)
        flags = ([] if sel.converged else ["not converged"]) + (["lr at edge"] if getattr(sel, "lr_edge", "") else [])
        ax.set_title(sel.arm + (f" ({', '.join(flags)})" if flags else ""), fontsize=7)
        ax.set_xlabel("epoch", fontsize=7)
        ax.tick_params(labelsize=6)
        ax.legend(fontsize=5)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.suptitle(title, fontsize=8)
    fig.tight_layout()
    return fig


def plot_seed_curves(records: Sequence[dict], highlight: Sequence[int] = (),
                     title: str = "every seed's validation loss") -> plt.Figure:
    """The validation loss per period of every seed in curve ``records`` (the format of
    :func:`fgclip.studies.maximage.arms.train_selected`'s, several records of one arm drawn
    together), each seed's chosen period marked; the seeds in ``highlight`` drawn in colour
    and labelled, the others grey."""
    fig, ax = plt.subplots(figsize=(COLUMN_WIDTH, 2.6))
    for rec in records:
        k = rec["chosen_periods"]
        for s, c in rec["seeds"].items():
            val, hot = c["val"], int(s) in set(highlight)
            ax.plot(range(1, len(val) + 1), val, lw=1.2 if hot else 0.6, color=None if hot else "0.7",
                    label=f"seed {s}" if hot else None, zorder=3 if hot else 1)
            if len(val) >= k:
                ax.plot([k], [val[k - 1]], "k.", ms=3, zorder=4)
    ax.set_xlabel("period", fontsize=7)
    ax.set_ylabel("validation loss", fontsize=7)
    ax.tick_params(labelsize=6)
    if highlight:
        ax.legend(fontsize=6)
    ax.set_title(title, fontsize=8)
    fig.tight_layout()
    return fig
