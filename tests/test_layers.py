"""The library's layers: every import in ``src/fgclip`` (at module level and inside functions)
goes down the layer order, never up, and never sideways into a room the contract keeps apart;
no module grows past MAX_LINES; every ``fgclip.…`` name a docstring points to exists. The
layer order is the one README's layout table and the book's notation page describe; a new
module must be given a room here."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import resolve_dotted

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "fgclip"
MAX_LINES = 400

# Highest layer first. A module may import its own room and any room of a lower layer. Rooms
# that share a layer are independent of each other, except the pairs in ALLOWED_SIDEWAYS.
# A room is a top-level module or package of fgclip ("train"), or one chapter's study
# ("studies.maximage"); "" is the package root (its __init__: the version).
LAYERS: list[tuple[str, list[str]]] = [
    ("entry points", ["__main__", "runner", "replication", "book_cache", "nbval_stage"]),
    ("cross-paper study", ["studies.crosspaper"]),  # chapter 5 puts the four chapters' methods on one stage
    ("studies", ["studies", "studies.stage", "studies.stage_report", "studies.stage_oracle", "studies.maximage", "studies.clip4dm",
                 "studies.for_retrieval", "studies.decoupling"]),
    ("presentation", ["viz", "reporting"]),
    ("loops and methods", ["train", "methods"]),
    ("evaluation", ["evaluation"]),
    ("components", ["models", "losses", "metrics", "datasets", "toyworld"]),
    ("utilities", ["partial_labels", "verdicts", "index", "stats", "precision", "seeding", "progress",
                   "paths"]),
    ("files", ["fileio", ""]),
]
# the command line is the runner's front end; make replicate runs chapters through the runner
ALLOWED_SIDEWAYS = {("__main__", "runner"), ("__main__", "replication"), ("replication", "runner"),
                    ("nbval_stage", "book_cache"),  # nbval's plugin stages what the book's cache adopts
                    ("studies.stage_report", "studies.stage"),  # chapter 0's report reads its task names
                    ("studies.stage_oracle", "studies.stage")}  # the oracle's checkpoint holds stage's network


def module_names(package: Path) -> dict[str, Path]:
    """Dotted name (``fgclip.x.y``) -> file, for every module and package under ``package``."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = [package.name, *path.relative_to(package).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def room_of(name: str) -> str:
    """The room of a dotted module name: its first part under fgclip, two parts for a study."""
    parts = name.split(".")[1:]
    if parts[:1] == ["studies"] and len(parts) > 1:
        return ".".join(parts[:2])
    return parts[0] if parts else ""


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[int, str]]:
    """(line, imported fgclip module) of every import in the file, nested ones included, once each."""
    top = name.split(".")[0]
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == top]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1] + (node.module.split(".") if node.module else [])
            else:
                base = node.module.split(".")
            if base[0] != top:
                continue
            for alias in node.names:  # ``from pkg import module`` imports the module itself
                sub = ".".join([*base, alias.name])
                out.append((node.lineno, sub if sub in modules else ".".join(base)))
    return sorted(set(out))


def violations(package: Path, layers=LAYERS, allowed=ALLOWED_SIDEWAYS) -> list[str]:
    """Every import that breaks the contract, as '<module>:<line> imports <module>: <why>'; and
    every module without a room."""
    level = {room: k for k, (_, rooms) in enumerate(layers) for room in rooms}
    layer_name = {room: name for name, rooms in layers for room in rooms}
    modules = module_names(package)
    out = []
    for name, path in modules.items():
        src = room_of(name)
        if src not in level:
            out.append(f"{name} has no room in the layer contract (add {src!r} to LAYERS)")
            continue
        for line, target in imports_of(name, path, modules):
            dst = room_of(target)
            if dst == src or dst not in level:
                continue
            where = f"{name}:{line} imports {target}"
            if level[dst] < level[src]:
                out.append(f"{where}: {src} ({layer_name[src]}) may not import the higher layer "
                           f"{dst} ({layer_name[dst]})")
            elif level[dst] == level[src] and (src, dst) not in allowed:
                out.append(f"{where}: {src} and {dst} share the layer {layer_name[src]} and stay "
                           "independent")
    return out


def test_imports_follow_the_layers():
    bad = violations(PACKAGE)
    assert not bad, "\n".join(bad)


def test_every_layer_room_exists():
    rooms = {room_of(n) for n in module_names(PACKAGE)}
    listed = {room for _, rs in LAYERS for room in rs}
    assert listed == rooms, f"listed but absent: {sorted(listed - rooms)}; absent from LAYERS: {sorted(rooms - listed)}"


def _plant(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / "fgclip" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "fgclip"


def test_the_checker_catches_planted_violations(tmp_path):
    """A control that can fail: a tree with one upward import (inside a function), one
    absolute upward import, one sideways import between two studies and one module without a
    room, next to imports the contract allows."""
    package = _plant(tmp_path, {
        "__init__.py": "",
        "fileio.py": "",
        "metrics/__init__.py": "",
        "metrics/multilabel.py": "from ..fileio import x\n\ndef f():\n    from ..studies.maximage import arms\n",
        "losses/__init__.py": "",
        "losses/asymmetric.py": "import numpy\nfrom fgclip.methods import decoupling\n",
        "methods/__init__.py": "",
        "methods/decoupling.py": "from ..losses import asymmetric\n",
        "studies/__init__.py": "",
        "studies/maximage/__init__.py": "",
        "studies/maximage/arms.py": "from ..decoupling import data\nfrom . import heads\n",
        "studies/maximage/heads.py": "from ...methods.decoupling import f\n",
        "studies/decoupling/__init__.py": "",
        "studies/decoupling/data.py": "",
        "gadgets.py": "",
    })
    bad = violations(package)
    assert len(bad) == 4, "\n".join(bad)
    assert any(b.startswith("fgclip.metrics.multilabel:4 imports fgclip.studies.maximage.arms: metrics")
               and "higher layer" in b for b in bad)
    assert any(b.startswith("fgclip.losses.asymmetric:2 imports fgclip.methods.decoupling") for b in bad)
    assert any(b.startswith("fgclip.studies.maximage.arms:1 imports fgclip.studies.decoupling.data")
               and "independent" in b for b in bad)
    assert any(b.startswith("fgclip.gadgets has no room") for b in bad)


def test_no_module_is_too_long():
    long = {str(p.relative_to(ROOT)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them along their seams): {long}"


def test_docstrings_name_code_that_exists():
    """A reference such as :func:`fgclip.studies.maximage.heads.train_heads` or
    ``fgclip.train.loop`` still names something after a module moves."""
    ref = re.compile(r"(?::(?:func|class|mod|meth|data|attr|obj):`~?|``)(fgclip\.[\w.]+)`")
    stale = [f"{p.relative_to(ROOT)}: {m.group(1)}" for p in sorted(PACKAGE.rglob("*.py"))
             for m in ref.finditer(p.read_text()) if resolve_dotted(m.group(1).rstrip(".")) is None]
    assert not stale, "\n".join(stale)
