"""Plots and widgets, in one style (seaborn theme set once by set_style)."""
from .scenes import center_density, plot_history, show_scenes
from .style import COLUMN_WIDTH, set_style

__all__ = ["COLUMN_WIDTH", "center_density", "plot_history", "set_style", "show_scenes"]
