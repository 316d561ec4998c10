"""The selection figure every chapter draws: per arm, each lr's mean validation curve, each
selection seed's own curve beside it, the choice marked."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from fgclip.train.selection import SelectionGrid, select_lr_epochs  # noqa: E402
from fgclip.viz.selection import plot_selection_curves  # noqa: E402


def test_every_seed_curve_is_drawn_beside_its_lrs_mean():
    grid = SelectionGrid(lrs=(0.001, 0.01, 0.1), seeds=(0, 1), epochs=4)
    sel = select_lr_epochs("arm", lambda lr, s, e: [lr * (k + 1) + 0.01 * s for k in range(e)], grid)
    fig = plot_selection_curves([sel])
    ax = fig.axes[0]
    seeds = [line for line in ax.lines if line.get_gid() == "seed curve"]
    assert len(seeds) == 6  # 3 lrs x 2 seeds
    assert list(seeds[1].get_ydata()) == pytest.approx(sel.curves[0.001][1])
    means = [line for line in ax.lines if line.get_label().startswith("lr ")]
    assert [m.get_color() for m in means] == [seeds[0].get_color(), seeds[2].get_color(), seeds[4].get_color()]
    assert "not converged" in ax.get_title()  # the best epoch is the budget's last
    plt.close(fig)
