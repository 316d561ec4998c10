"""Plots and widgets, in one style (seaborn theme set once by set_style)."""
from .heatmaps import overlay_heatmap
from .scenes import center_density, plot_history, show_scenes
from .style import COLUMN_WIDTH, set_style
from .widgets import InteractiveFigure, static_widgets

__all__ = ["COLUMN_WIDTH", "InteractiveFigure", "center_density", "overlay_heatmap",
           "plot_history", "set_style", "show_scenes", "static_widgets"]
