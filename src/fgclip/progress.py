"""What a run shows while it works: text progress bars inside the library's loops, and a line
per cell while papermill executes a chapter for the runner.

Bars are off in CI and tests (``CI=true`` or ``TESTING`` set), so the rendered book, which
``make book`` builds with ``CI=true``, shows none.

Kernels say nothing about their transport: the runner's are encrypted (:func:`kernel_config`),
and every other kernel of the project's venv drops ipykernel's plaintext notice on loopback
(:func:`quiet_loopback_kernels`, which the venv's IPython configuration calls).
"""
from __future__ import annotations

import ipaddress
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, TextIO

from tqdm.std import tqdm

NOT_A_TERMINAL_INTERVAL = 2.0  # seconds between redraws where stderr is a kernel's stream or a file


def progress_disabled() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes") or "TESTING" in os.environ


def progress(iterable=None, **kwargs):
    """A text progress bar on stderr (tqdm's plain one), never a widget: a notebook that
    papermill or the runner executes has no frontend to draw a widget, and its saved copy
    would keep a frozen "0%" one. Where stderr is not a terminal (a kernel, a log file) the
    bar redraws at most every NOT_A_TERMINAL_INTERVAL seconds, so a saved notebook keeps a
    few redraws per bar rather than thousands."""
    kwargs.setdefault("disable", progress_disabled())
    if not getattr(sys.stderr, "isatty", lambda: False)():
        kwargs.setdefault("mininterval", NOT_A_TERMINAL_INTERVAL)
    return tqdm(iterable, **kwargs)


def _duration(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole} s" if whole < 60 else f"{whole // 60} min {whole % 60:02d} s"


class CellProgress:
    """One line per code cell as it starts, ``ch3: cell 12/31, 48 s: <its first line>`` (the
    time since the run began), and ``ch3: 31 cells in 5 min 02 s`` at the end; on ``stream``
    (stderr when None, looked up on each line). :meth:`start` is nbclient's ``on_cell_start``
    hook, which also sees the markdown and empty cells that it does not execute."""

    def __init__(self, label: str, total: int, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.label, self.total, self.stream, self.clock = label, total, stream, clock
        self.began, self.count = clock(), 0

    def start(self, cell: Any, cell_index: int | None = None, **_: Any) -> None:
        source = cell.get("source", "")
        if cell.get("cell_type") != "code" or not source.strip():
            return
        self.count += 1
        first = next(line.strip() for line in source.splitlines() if line.strip())
        first = first if len(first) <= 60 else first[:57] + "..."
        self._say(f"cell {self.count}/{self.total}, {_duration(self.clock() - self.began)}: {first}")

    def finish(self) -> None:
        self._say(f"{self.count} cells in {_duration(self.clock() - self.began)}")

    def _say(self, text: str) -> None:
        print(f"{self.label}: {text}", file=self.stream or sys.stderr, flush=True)


def kernel_config():
    """nbclient's configuration for a run: jupyter_client provisions CurveZMQ keys for a kernel
    whose kernelspec declares it takes them (ipykernel's does), so the kernel's channels are
    encrypted and ipykernel no longer logs "Kernel is running over TCP without encryption" on
    every run. A jupyter_client without the ``transport_encryption`` setting gets none."""
    from jupyter_client.manager import KernelManager
    from traitlets.config import Config

    if "transport_encryption" not in KernelManager.class_trait_names():
        return Config()
    return Config({"KernelManager": {"transport_encryption": "auto"}})


PLAINTEXT_NOTICE = "Kernel is running over TCP without encryption"


class LoopbackPlaintextFilter(logging.Filter):
    """Drops ipykernel's "Kernel is running over TCP without encryption" notice, that one log
    record only, and only while the kernel listens on a loopback address (where reading its
    traffic takes root, who can read its connection file anyway); every other record passes,
    and so does the notice for a kernel on any other address. ``ip`` gives the kernel's address
    (the running IPKernelApp's ``ip`` when None)."""

    def __init__(self, ip: Callable[[], str] | None = None):
        super().__init__()
        self.ip = ip or _kernel_ip

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(PLAINTEXT_NOTICE):
            return True
        try:
            return not ipaddress.ip_address(self.ip()).is_loopback
        except ValueError:  # a host name, or no address yet: keep the notice
            return True


def _kernel_ip() -> str:
    from ipykernel.kernelapp import IPKernelApp

    return IPKernelApp.instance().ip if IPKernelApp.initialized() else ""


def quiet_loopback_kernels() -> None:
    """What the kernel configuration that ``make`` writes to ``.venv/etc/ipython/`` calls, so
    that every kernel of the project's venv, whoever starts it (plain papermill, myst-nb's
    nbclient in ``make book``, nbval in ``make test``, Jupyter), drops the notice on loopback.
    The runner encrypts instead (:func:`kernel_config`); the others create their kernel
    managers without reading any Jupyter configuration file, so they cannot be told to."""
    logger = logging.getLogger("IPKernelApp")
    if not any(isinstance(f, LoopbackPlaintextFilter) for f in logger.filters):
        logger.addFilter(LoopbackPlaintextFilter())


def run_notebook(notebook: Path, output: Path, parameters: dict[str, Any], *, label: str, cwd: Path,
                 env: dict[str, str] | None = None, show_cells: bool = True, **papermill_kwargs: Any) -> None:
    """Execute ``notebook`` into ``output`` with papermill, in the folder ``cwd``.

    ``env`` is set in this process's environment, which the kernel inherits, for the run
    only. With ``show_cells`` a :class:`CellProgress` line goes to stderr as each code cell
    starts (papermill adds one code cell, the injected parameters, when given any)."""
    import nbformat
    import papermill

    cells = nbformat.read(notebook, as_version=4).cells
    code = sum(c.cell_type == "code" and bool(c.source.strip()) for c in cells)
    injected = bool(parameters) and not any("injected-parameters" in c.metadata.get("tags", []) for c in cells)
    lines = CellProgress(label, code + injected)
    hooks = {"on_cell_start": lines.start} if show_cells else {}
    saved = {key: os.environ.get(key) for key in env or {}}
    os.environ.update(env or {})
    try:
        papermill.execute_notebook(str(notebook), str(output), parameters=parameters, cwd=str(cwd),
                                   progress_bar=False, config=kernel_config(), **hooks, **papermill_kwargs)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    if show_cells:
        lines.finish()
