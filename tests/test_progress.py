"""fgclip.progress: text bars outside the book and none in it; the runner's line per cell."""
import io

import nbformat
import tqdm.std

from fgclip.progress import CellProgress, progress


def test_a_text_bar_outside_the_book_and_none_in_it(monkeypatch):
    for name in ("CI", "TESTING"):
        monkeypatch.delenv(name, raising=False)
    bar = progress(range(3), file=io.StringIO())
    assert type(bar) is tqdm.std.tqdm and not bar.disable  # tqdm's plain text bar, not a widget
    assert list(bar) == [0, 1, 2] and "3/3" in bar.fp.getvalue()
    monkeypatch.setenv("CI", "true")  # how make book builds the book
    assert progress(range(3)).disable


def test_cell_lines_count_code_cells_and_say_how_long(monkeypatch):
    times = iter([0.0, 48.2, 179.6, 301.6])
    stream = io.StringIO()
    lines = CellProgress("ch3", total=2, stream=stream, clock=lambda: next(times))
    lines.start(nbformat.v4.new_code_cell("# one\nx = 1"), cell_index=0)
    lines.start(nbformat.v4.new_markdown_cell("# not run"), cell_index=1)
    lines.start(nbformat.v4.new_code_cell("  \n"), cell_index=2)  # empty: nbclient skips it
    lines.start(nbformat.v4.new_code_cell("y = " + "1 + " * 30 + "1"), cell_index=3)
    lines.finish()
    assert stream.getvalue().splitlines() == [
        "ch3: cell 1/2, 48 s: # one",
        "ch3: cell 2/2, 3 min 00 s: y = 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1...",
        "ch3: 2 cells in 5 min 02 s",
    ]
