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


def test_the_plaintext_notice_is_dropped_on_loopback_only():
    import inspect
    import logging

    from ipykernel.kernelapp import IPKernelApp

    from fgclip.progress import PLAINTEXT_NOTICE, LoopbackPlaintextFilter

    assert PLAINTEXT_NOTICE in inspect.getsource(IPKernelApp.init_sockets)  # still ipykernel's words

    def record(msg):
        return logging.LogRecord("IPKernelApp", logging.WARNING, __file__, 1, msg, None, None)

    notice = record(PLAINTEXT_NOTICE + ". All communication ... is sent in plain text")
    assert not LoopbackPlaintextFilter(lambda: "127.0.0.1").filter(notice)
    assert not LoopbackPlaintextFilter(lambda: "::1").filter(notice)
    assert LoopbackPlaintextFilter(lambda: "10.1.2.3").filter(notice)  # a kernel others can reach
    assert LoopbackPlaintextFilter(lambda: "").filter(notice)
    assert LoopbackPlaintextFilter(lambda: "127.0.0.1").filter(record("Kernel died"))


def test_kernels_of_the_venv_run_by_papermill_or_nbclient_show_no_plaintext_notice(tmp_path):
    """The file `make` writes to the venv's etc/ipython, given to the kernels through a profile
    (IPython reads both), silences plain papermill and nbclient (what myst-nb runs in make
    book). nbval sends its kernel's stderr to /dev/null, so it never shows the notice."""
    import subprocess
    import sys
    from pathlib import Path

    from IPython.core.application import ENV_CONFIG_DIRS

    from fgclip.progress import PLAINTEXT_NOTICE

    assert str(Path(sys.prefix) / "etc" / "ipython") in ENV_CONFIG_DIRS
    root = Path(__file__).resolve().parents[1]
    venv = tmp_path / "venv"
    (venv / ".installed").parent.mkdir()
    (venv / ".installed").touch()  # make's venv stamp: make writes the kernel config only
    config = venv / "etc" / "ipython" / "ipython_kernel_config.py"
    subprocess.run(["make", "-s", "-C", str(root), f"VENV={venv}", str(config)], check=True)
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / config.name).write_text(config.read_text())

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, tmp_path / "one.ipynb")
    env = {**__import__("os").environ, "IPYTHONDIR": str(tmp_path / "ipython")}
    papermill = [str(Path(sys.executable).parent / "papermill"), "one.ipynb", "out.ipynb"]
    nbclient = [sys.executable, "-c", "import nbclient, nbformat; "
                "nbclient.execute(nbformat.read('one.ipynb', as_version=4))"]
    for command in (papermill, nbclient):
        run = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        assert PLAINTEXT_NOTICE not in run.stderr, command[0]
