"""Plots and widgets, in one style (seaborn theme set once by set_style), and the verdict forest plot."""
from .heatmaps import overlay_heatmap
from .scenes import center_density, plot_history, show_scenes
from .style import COLUMN_WIDTH, set_style
from .verdicts import forest_plot
from .widgets import InteractiveFigure, static_widgets

__all__ = ["COLUMN_WIDTH", "InteractiveFigure", "center_density", "forest_plot", "overlay_heatmap",
           "plot_history", "set_style", "show_scenes", "static_widgets"]
