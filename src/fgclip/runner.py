"""Rerun a chapter with parameters: validate them first, then execute it with papermill.

``python -m fgclip run ch0 -p epochs 1 -f notebooks/params/ch0/cpu-small.yaml`` writes
``runs/ch0/<timestamp>/`` with the executed notebook, ``params.yaml`` and the chapter's
``results.json``. Papermill alone only warns about an unknown parameter; here an unknown
name, a value of the wrong type, a missing ``data_root`` or missing weights stop the run
before any work, with a message naming the parameter.
"""
from __future__ import annotations

import ast
import datetime as dt
import json
from pathlib import Path
from typing import Any

import nbformat
import yaml

from .fileio import atomic_write_text
from .paths import project_home
from .precision import PRECISIONS

REPO_ROOT = project_home()
NOTEBOOKS = REPO_ROOT / "notebooks"
PARAMS_DIR = NOTEBOOKS / "params"


class ParameterError(ValueError):
    """A chapter parameter that the chapter's parameters cell does not accept."""


def chapter_notebook(chapter: str) -> Path:
    matches = sorted(NOTEBOOKS.glob(f"{chapter}_*.ipynb"))
    if len(matches) != 1:
        known = sorted(p.stem.split("_")[0] for p in NOTEBOOKS.glob("ch*_*.ipynb"))
        raise ParameterError(f"unknown chapter {chapter!r}; known chapters: {', '.join(known)}")
    return matches[0]


def chapter_defaults(notebook: Path) -> dict[str, Any]:
    """Names and literal default values of the cell tagged ``parameters``."""
    nb = nbformat.read(notebook, as_version=4)
    cells = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1:
        raise ParameterError(f"{notebook}: expected one cell tagged 'parameters', found {len(cells)}")
    defaults = {}
    for node in ast.parse(cells[0].source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            defaults[node.targets[0].id] = ast.literal_eval(node.value)
    return defaults


def _check_type(name: str, value: Any, default: Any) -> Any:
    if default is None or value is None:
        return value
    if isinstance(default, bool) or isinstance(value, bool):
        ok = isinstance(value, bool) and isinstance(default, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float))
        value = float(value) if ok else value
    else:
        ok = isinstance(value, type(default))
    if not ok:
        raise ParameterError(f"parameter {name!r} expects {type(default).__name__} "
                             f"(default {default!r}), got {type(value).__name__} {value!r}")
    return value


def validate(chapter: str, params: dict[str, Any]) -> dict[str, Any]:
    """Checked parameters; raises ParameterError naming the first bad one."""
    return _check_params(chapter, params, chapter_defaults(chapter_notebook(chapter)))


def _check_params(chapter: str, params: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ParameterError(f"{chapter}: unknown parameter(s) {', '.join(map(repr, unknown))}; "
                             f"accepted: {', '.join(sorted(defaults))}")
    checked = {k: _check_type(k, v, defaults[k]) for k, v in params.items()}
    # the chapter's own default data_root is relative to notebooks/ and the notebook
    # exports the toy world there on first use; any other data_root must already exist
    if "data_root" in checked and checked["data_root"] != defaults.get("data_root") \
            and not Path(checked["data_root"]).expanduser().exists():
        raise ParameterError(f"parameter 'data_root': folder {checked['data_root']!r} does not exist")
    if "precision" in checked and checked["precision"] not in PRECISIONS:
        raise ParameterError(f"parameter 'precision': expects one of {PRECISIONS}, got {checked['precision']!r}")
    pretrained = checked.get("pretrained")
    if isinstance(pretrained, str) and pretrained.endswith((".pt", ".pth", ".bin", ".safetensors")) \
            and not Path(pretrained).expanduser().is_file():
        raise ParameterError(f"parameter 'pretrained': weights file {pretrained!r} not found")
    return checked


def parse_value(text: str) -> Any:
    """A -p value as YAML (so 3 is int, 0.5 float, true bool, cuda str)."""
    return yaml.safe_load(text)


def load_param_file(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise ParameterError(f"parameter file not found: {path}")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ParameterError(f"{path}: expected a mapping of parameter names to values")
    return data


def run_chapter(chapter: str, params: dict[str, Any], runs_dir: str | Path = REPO_ROOT / "runs",
                kernel: str = "python3") -> Path:
    """Validate, then execute the chapter into runs/<chapter>/<timestamp>/."""
    import papermill

    notebook = chapter_notebook(chapter)
    defaults = chapter_defaults(notebook)
    checked = _check_params(chapter, params, defaults)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    out = Path(runs_dir) / chapter / stamp
    out.mkdir(parents=True)
    checked["results_path"] = str((out / "results.json").resolve())
    for key in ("data_root", "pretrained"):  # paths are the caller's, not the notebook folder's
        if checked.get(key) == defaults.get(key):
            continue  # a default stays relative to the notebook
        if isinstance(checked.get(key), str) and Path(checked[key]).expanduser().exists():
            checked[key] = str(Path(checked[key]).expanduser().resolve())
    atomic_write_text(out / "params.yaml", yaml.safe_dump(checked, sort_keys=True))
    papermill.execute_notebook(str(notebook), str(out / notebook.name), parameters=checked,
                               cwd=str(notebook.parent), kernel_name=kernel, progress_bar=False)
    if not (out / "results.json").is_file():
        raise RuntimeError(f"{notebook.name} ran but wrote no results.json to {out}")
    json.loads((out / "results.json").read_text())  # a chapter must write valid JSON
    return out
