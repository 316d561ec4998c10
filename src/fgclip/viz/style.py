"""One plotting style for the whole book, set once."""
from __future__ import annotations

import matplotlib.pyplot as plt
import seaborn as sns

COLUMN_WIDTH = 7.0  # inches: the book's text column
PALETTE = "deep"  # seaborn's palette: the theme's colour cycle and every figure's fixed colours


def set_style() -> None:
    sns.set_theme(context="notebook", style="whitegrid", palette=PALETTE)
    plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 150, "axes.titlesize": 10,
                         "figure.figsize": (COLUMN_WIDTH, COLUMN_WIDTH * 0.5)})
