"""The verdict forest plot: every comparison of a chapter in one figure.

One row per :class:`~fgclip.verdicts.Verdict`, top to bottom in the order given, labelled by
its claim and arms: the difference mean(A) - mean(B) as a dot and its interval as a bar, coloured by the outcome, a
vertical line at zero and, when an equivalence margin is given, the band [-margin, +margin]
shaded (a difference whose whole interval lies inside it is too small to matter).
"""
from __future__ import annotations

import textwrap
from typing import Sequence

import matplotlib.pyplot as plt
import seaborn as sns

from ..verdicts import A_BETTER, B_BETTER, CANNOT_TELL, Verdict
from .style import COLUMN_WIDTH, PALETTE

EQUIVALENT = "equivalent"  # the outcome of an equivalence test, drawn here once verdicts can say it
_DEEP = sns.color_palette(PALETTE)
OUTCOME_COLOURS = {A_BETTER: _DEEP[0], B_BETTER: _DEEP[1], CANNOT_TELL: _DEEP[7], EQUIVALENT: _DEEP[2]}
LABEL_WIDTH = 60  # characters per line of a row's label, at most two lines


def row_label(verdict: Verdict) -> str:
    """A row's label: the claim, followed by "A vs B" unless the claim names both arms,
    wrapped to two lines of :data:`LABEL_WIDTH` characters (cut with " …" beyond)."""
    a, b = verdict.arms
    text = verdict.claim if a in verdict.claim and b in verdict.claim else f"{verdict.claim}: {a} vs {b}"
    return textwrap.fill(text, LABEL_WIDTH, max_lines=2, placeholder=" …")


def outcome_colour(verdict: Verdict):
    """The RGB colour of a verdict's outcome (:data:`OUTCOME_COLOURS`); an unknown outcome raises."""
    if verdict.verdict not in OUTCOME_COLOURS:
        raise ValueError(f"verdict {verdict.claim!r} has outcome {verdict.verdict!r}, not one of "
                         f"{list(OUTCOME_COLOURS)}")
    return OUTCOME_COLOURS[verdict.verdict]


def forest_plot(verdicts: Sequence[Verdict], ax: plt.Axes | None = None, margin: float | None = None,
                title: str | None = None) -> plt.Figure:
    """Draw one row per verdict (:func:`row_label` on the axis; A - B and its interval, coloured by
    outcome, with each seed's own difference as a tick just below it), a line at zero and the equivalence margin [-margin, +margin] shaded when given.
    Returns the figure (a new one sized to the rows unless ``ax`` is given)."""
    verdicts = list(verdicts)
    if not verdicts:
        raise ValueError("forest_plot needs at least one verdict")
    if margin is not None and not margin > 0:
        raise ValueError(f"margin must be > 0 (or None), got {margin}")
    colours = [outcome_colour(v) for v in verdicts]
    if ax is None:
        _, ax = plt.subplots(figsize=(COLUMN_WIDTH, 0.8 + 0.3 * len(verdicts)))
    if margin is not None:
        ax.axvspan(-margin, margin, color=_DEEP[2], alpha=0.12, lw=0, label=f"equivalence margin ±{margin:g}")
    ax.axvline(0.0, color="black", lw=0.8)
    for row, (v, colour) in enumerate(zip(verdicts, colours)):
        err = [[v.difference - v.ci_low], [v.ci_high - v.difference]]
        ax.errorbar(v.difference, row, xerr=err, fmt="o", color=colour, ms=4, capsize=2, lw=1.2)
        if len(v.seed_differences) > 1:  # every seed's own A - B, just below its row: the spread the mean hides
            ax.plot(v.seed_differences, [row + 0.22] * len(v.seed_differences), "|", color=colour, ms=5, alpha=0.7, gid="seed differences")
    ax.set_yticks(range(len(verdicts)), [row_label(v) for v in verdicts], fontsize=7)
    ax.set_ylim(len(verdicts) - 0.5, -0.5)  # the first verdict on top
    levels = sorted({f"{v.confidence:.0%}" for v in verdicts})
    ax.set_xlabel(f"difference A − B with its {' / '.join(levels)} interval")
    shown = [o for o in OUTCOME_COLOURS if any(v.verdict == o for v in verdicts)]
    handles = [plt.Line2D([], [], color=OUTCOME_COLOURS[o], marker="o", ls="-", label=o) for o in shown]
    if margin is not None:
        handles += ax.get_legend_handles_labels()[0]
    ax.legend(handles=handles, fontsize=7, loc="best")
    if title:
        ax.set_title(title)
    ax.figure.tight_layout()
    return ax.figure
