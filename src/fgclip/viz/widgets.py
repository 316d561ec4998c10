"""One widget pattern for the whole book: ipywidgets controls that redraw a matplotlib figure.

A chapter writes a pure function ``draw(**values) -> Figure`` and a dict of controls;
:class:`InteractiveFigure` wires them together. In Jupyter or Colab, ``show()`` displays
the live controls above an output area that is redrawn on every change. In the rendered
book there is no kernel behind the page, so when the environment variable
``FGCLIP_STATIC_WIDGETS`` is set (``make book`` and ``make test`` set it) ``show()``
displays the figure at the controls' default values instead, and says so.
"""
from __future__ import annotations

import os
from typing import Any, Callable

import ipywidgets as widgets
import matplotlib.pyplot as plt
from IPython.display import Markdown, display

STATIC_ENV = "FGCLIP_STATIC_WIDGETS"


def static_widgets() -> bool:
    """True when widgets must render as static figures (the book build, CI)."""
    return os.environ.get(STATIC_ENV, "").lower() not in ("", "0", "false", "no")


class InteractiveFigure:
    """Controls -> ``draw(**values)`` -> a Figure shown in an output area.

    ``figure`` is the last drawn Figure and ``n_draws`` counts redraws, so tests can set a
    control's ``value`` and check that the figure changed.
    """

    def __init__(self, draw: Callable[..., plt.Figure], controls: dict[str, widgets.ValueWidget]):
        if not controls:
            raise ValueError("InteractiveFigure needs at least one control")
        for name, control in controls.items():
            if not hasattr(control, "value"):
                raise TypeError(f"control {name!r} is a {type(control).__name__}, not a value widget")
        self.draw = draw
        self.controls = controls
        self.output = widgets.Output()
        self.figure: plt.Figure | None = None
        self.n_draws = 0
        for control in controls.values():
            control.observe(self.redraw, names="value")

    def values(self) -> dict[str, Any]:
        return {name: control.value for name, control in self.controls.items()}

    def redraw(self, change: dict | None = None) -> plt.Figure:
        """Draw with the current values, replacing the previous figure (closed to free it)."""
        figure = self.draw(**self.values())
        if self.figure is not None and self.figure is not figure:
            plt.close(self.figure)
        self.figure, self.n_draws = figure, self.n_draws + 1
        if change is not None:  # an interactive change: show the new figure in the output area
            self.output.clear_output(wait=True)
            with self.output:
                display(figure)
        return figure

    def widget(self) -> widgets.Widget:
        """The live widget: the controls above the output area (drawn once at start)."""
        self.output.clear_output()
        figure = self.redraw()
        with self.output:
            display(figure)
        plt.close(figure)  # displayed in the output area; do not show it a second time
        return widgets.VBox([widgets.HBox(list(self.controls.values())), self.output])

    def show(self) -> None:
        """Live controls in a kernel; the default-value figure in the static book."""
        if static_widgets():
            names = ", ".join(f"{k} = {v!r}" for k, v in self.values().items())
            display(Markdown(f"*Interactive in Jupyter or Colab; shown here at {names}.*"))
            figure = self.redraw()
            display(figure)
            plt.close(figure)
        else:
            display(self.widget())
