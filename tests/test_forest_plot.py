"""The verdict forest plot (fgclip.viz.verdicts): one row per verdict in the order given, its
difference and interval coloured by the outcome, a line at zero, the equivalence margin shaded."""
import dataclasses

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402

from fgclip import verdicts  # noqa: E402
from fgclip.viz import forest_plot  # noqa: E402
from fgclip.viz.verdicts import EQUIVALENT, OUTCOME_COLOURS, row_label  # noqa: E402


def _verdicts() -> list[verdicts.Verdict]:
    """Three comparisons on tiny arrays (3 seeds x 20 units), one of each outcome."""
    rng = np.random.default_rng(0)
    base = rng.normal(0.5, 0.01, (3, 20))
    noise = lambda: rng.normal(0.0, 1.0, (3, 20))  # noqa: E731
    kw = dict(arms=("A", "B"), unit="units", seed=0)
    return [verdicts.compare(base + 0.3, base, claim="A is clearly better", **kw),
            verdicts.compare(base, base + 0.3, claim="B is clearly better", **kw),
            verdicts.compare(base + noise(), base + noise(), claim="noise against noise", **kw)]


def _row_colours(ax) -> list[tuple]:
    return [to_rgb(c.lines[0].get_color()) for c in ax.containers]


def test_one_row_per_verdict_coloured_by_outcome():
    vs = _verdicts()
    assert [v.verdict for v in vs] == [verdicts.A_BETTER, verdicts.B_BETTER, verdicts.CANNOT_TELL]
    fig = forest_plot(vs)
    ax = fig.axes[0]
    assert len(ax.containers) == len(vs) == len(ax.get_yticks())
    assert [t.get_text() for t in ax.get_yticklabels()] == [row_label(v) for v in vs]  # top to bottom
    assert row_label(vs[0]) == "A is clearly better: A vs B"  # the arms, where the claim does not name them
    colours = _row_colours(ax)
    assert colours == [to_rgb(OUTCOME_COLOURS[v.verdict]) for v in vs] and len(set(colours)) == 3
    for c, v in zip(ax.containers, vs):  # the dot at A - B, the bar over the interval
        assert c.lines[0].get_xdata()[0] == pytest.approx(v.difference)
        segment = c.lines[2][0].get_segments()[0]
        assert sorted(segment[:, 0]) == pytest.approx([v.ci_low, v.ci_high])
    assert any(list(line.get_xdata()) == [0, 0] for line in ax.lines)  # the line at zero
    assert not ax.patches  # no margin given, none shaded
    ticks = [line for line in ax.lines if line.get_gid() == "seed differences"]  # each seed's own A - B below its row
    assert [list(t.get_xdata()) for t in ticks] == [pytest.approx(list(v.seed_differences)) for v in vs]
    assert [t.get_ydata()[0] for t in ticks] == pytest.approx([0.22, 1.22, 2.22]) and all(len(v.seed_differences) == 3 for v in vs)
    plt.close(fig)


def test_margin_is_shaded_and_equivalent_gets_its_own_colour():
    vs = _verdicts()
    eq = dataclasses.replace(vs[2], claim="inside the margin", verdict=EQUIVALENT)
    fig, ax = plt.subplots()
    assert forest_plot([*vs, eq], ax=ax, margin=0.1) is fig
    (band,) = ax.patches
    assert (band.get_x(), band.get_x() + band.get_width()) == pytest.approx((-0.1, 0.1))
    colours = _row_colours(ax)
    assert colours[-1] == to_rgb(OUTCOME_COLOURS[EQUIVALENT]) and len(set(colours)) == 4
    plt.close(fig)


def test_a_row_label_names_the_arms_once_and_stays_within_two_lines():
    v = _verdicts()[0]
    named = dataclasses.replace(v, claim="method vs baseline on phrases", arms=("method", "baseline"))
    assert row_label(named) == "method vs baseline on phrases"
    long = dataclasses.replace(v, claim="word " * 60)
    assert row_label(long).count("\n") == 1 and row_label(long).endswith("…")


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="at least one verdict"):
        forest_plot([])
    with pytest.raises(ValueError, match="margin"):
        forest_plot(_verdicts(), margin=0.0)
    with pytest.raises(ValueError, match="'maybe'"):
        forest_plot([dataclasses.replace(_verdicts()[0], verdict="maybe")])
