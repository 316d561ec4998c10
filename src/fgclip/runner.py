"""Rerun a chapter with parameters: validate them first, then execute it with papermill.

``python -m fgclip run ch0 -p epochs 1 -f notebooks/params/ch0/cpu-small.yaml`` writes
``runs/ch0/<timestamp>/`` with the executed notebook, ``params.yaml`` and the chapter's
``results.json``. Papermill alone only warns about an unknown parameter; here an unknown name,
a wrong type, a missing ``data_root`` or missing weights stop the run before any work, naming
the parameter. The same rules run in each chapter's cell after ``parameters``
(:func:`check_injected`), so plain papermill gets them too (bar unknown names).
"""
from __future__ import annotations

import ast
import datetime as dt
import json
import os
import re
from pathlib import Path
from typing import Any

import nbformat
import yaml

from .fileio import atomic_write_text
from .paths import is_installed_home, project_home
from .precision import PRECISIONS
from .progress import run_notebook
from .train.selection import RULES as SELECTION_RULES

STATIC_ENV = "FGCLIP_STATIC_WIDGETS"  # read by fgclip.viz.widgets (not imported: it pulls in matplotlib)

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


def _parameters_source(notebook: Path) -> str:
    nb = nbformat.read(notebook, as_version=4)
    cells = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1:
        raise ParameterError(f"{notebook}: expected one cell tagged 'parameters', found {len(cells)}")
    return cells[0].source


def chapter_defaults(notebook: Path) -> dict[str, Any]:
    """Names and literal default values of the cell tagged ``parameters`` (``x = 1`` or ``x: int = 1``)."""
    defaults = {}
    for node in ast.parse(_parameters_source(notebook)).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            defaults[node.targets[0].id] = ast.literal_eval(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            defaults[node.target.id] = ast.literal_eval(node.value)
    return defaults


# A range declared at the end of a parameter's comment, read by the runner:
#   [> 0]  [at least 1]  [0 to 1]  [non-empty]  [each > 0]  [each 0 to 1]  (joined by ';' in one [...])
# (no '=' anywhere: papermill's parameter parser skips any line with a second '=')
RANGE_RE = re.compile(r"\[([^\[\]]*)\]\s*$")
_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_RULE = re.compile(rf"^(?P<each>each )?(?:(?P<op>>|at least) ?(?P<bound>{_NUM})|(?P<lo>{_NUM}) to (?P<hi>{_NUM}))$")


def chapter_ranges(notebook: Path) -> dict[str, list[str]]:
    """Each parameter's declared range rules, from the ``[...]`` that ends its comment."""
    import io
    import tokenize

    source = _parameters_source(notebook)
    comments = {tok.start[0]: tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline)
                if tok.type == tokenize.COMMENT}
    ranges = {}
    for node in ast.parse(source).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        match = RANGE_RE.search(comments.get(node.end_lineno, "")) if isinstance(target, ast.Name) else None
        if match:
            rules = [r.strip() for r in match.group(1).split(";") if r.strip()]
            bad = [r for r in rules if r != "non-empty" and not _RULE.match(r)]
            if bad:
                raise ParameterError(f"{notebook.name}: parameter {target.id!r} declares an unreadable range {bad}")
            ranges[target.id] = rules
    return ranges


def _check_range(name: str, value: Any, rules: list[str]) -> None:
    for rule in rules:
        if rule == "non-empty":
            if not value:
                raise ParameterError(f"parameter {name!r} must not be empty, got {value!r}")
            continue
        m = _RULE.match(rule)
        values = list(value) if m["each"] and isinstance(value, (list, tuple)) else [value]
        for v in values:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise ParameterError(f"parameter {name!r} expects numbers ({rule}), got {v!r}")
            if m["op"]:
                ok = v > float(m["bound"]) if m["op"] == ">" else v >= float(m["bound"])  # "at least"
            else:
                ok = float(m["lo"]) <= v <= float(m["hi"])
            if not ok:
                want = f"{m['op']} {m['bound']}" if m["op"] else f"between {m['lo']} and {m['hi']}"
                raise ParameterError(f"parameter {name!r} must be {want}"
                                     f"{' (each value)' if m['each'] else ''}, got {value!r}")


# parameters whose null means something (pretrained: null is 'none'); any other non-null default needs a value of its type
NULLABLE = ("pretrained",)


def _check_type(name: str, value: Any, default: Any) -> Any:
    if default is None or value is None and name in NULLABLE:
        return value
    if value is None:
        raise ParameterError(f"parameter {name!r}: a value is required (default {default!r}), got null")
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


def validate(chapter: str, params: dict[str, Any], on_this_machine: bool = True) -> dict[str, Any]:
    """Checked parameters; raises ParameterError naming the first bad one.

    ``on_this_machine=False`` checks a set meant for another machine (a GPU's
    ``gpu-full``): names, types, ranges and models, but not the device or the paths.
    """
    return _check_params(chapter, params, chapter_defaults(chapter_notebook(chapter)), on_this_machine)


def check_injected(chapter: str, namespace: dict[str, Any]) -> None:
    """The runner's checks, run inside the chapter on the values papermill injected.

    The cell after ``parameters`` calls ``check_injected("chN", globals())``, so plain
    papermill, Colab and nbval get what ``python -m fgclip run`` gets. Papermill's ``-p``
    passes ``false``, ``1e-3`` or ``[8]`` as strings where it does not recognise them; a
    string given to a parameter whose default is not a string is read as YAML 1.2, as the
    runner reads ``-p``. Then every parameter is checked as :func:`validate` checks it and
    the checked values (floats from ints, ``device: auto`` resolved) are written back into
    ``namespace``; a bad value stops the chapter here with the runner's message.
    """
    namespace.update(injected_values(chapter, namespace))


def injected_values(chapter: str, namespace: dict[str, Any]) -> dict[str, Any]:
    """Every parameter of ``chapter`` in ``namespace``, coerced and checked (:func:`check_injected`); raises ParameterError."""
    defaults = chapter_defaults(chapter_notebook(chapter))
    values = {}
    for name, default in defaults.items():
        if name not in namespace:
            continue
        value = namespace[name]
        if isinstance(value, str) and default is not None and not isinstance(default, str):
            value = parse_value(value)  # papermill -p tune_epsilon false: the string 'false'
        values[name] = value
    # the chapter runs in its own folder: a relative default path is relative to it
    return _check_params(chapter, values, defaults, base=Path.cwd())


def _check_params(chapter: str, params: dict[str, Any], defaults: dict[str, Any],
                  on_this_machine: bool = True, base: Path = NOTEBOOKS) -> dict[str, Any]:
    """``base``: where a default relative path is read from (the chapter's folder); any other is read from the cwd."""
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ParameterError(f"{chapter}: unknown parameter(s) {', '.join(map(repr, unknown))}; "
                             f"accepted: {', '.join(sorted(defaults))}")
    checked = {k: _check_type(k, v, defaults[k]) for k, v in params.items()}
    ranges = chapter_ranges(chapter_notebook(chapter))
    for key, value in checked.items():
        if key in ranges and value is not None:
            _check_range(key, value, ranges[key])
    # the default data_root (relative to notebooks/) is exported on first use; any other must already exist
    if on_this_machine and "data_root" in checked and checked["data_root"] != defaults.get("data_root") \
            and not Path(checked["data_root"]).expanduser().exists():
        raise ParameterError(f"parameter 'data_root': folder {checked['data_root']!r} does not exist")
    for key, allowed, note in (("precision", PRECISIONS, " ('auto': bf16 where the device runs it natively, else fp32)"),
                               ("selection_rule", SELECTION_RULES, "")):
        if key in checked and checked[key] not in allowed:
            raise ParameterError(f"parameter {key!r}: expects one of {allowed}{note}, got {checked[key]!r}")
    pretrained = checked.get("pretrained")
    if on_this_machine and isinstance(pretrained, str) \
            and pretrained.endswith((".pt", ".pth", ".bin", ".safetensors")) and not Path(pretrained).expanduser().is_file():
        raise ParameterError(f"parameter 'pretrained': weights file {pretrained!r} not found")
    if "device" in checked and on_this_machine:
        checked["device"] = _check_device(checked["device"])
    if "model" in checked or "pretrained" in checked:
        _check_model(checked.get("model", defaults.get("model")), checked.get("pretrained", defaults.get("pretrained")),
                     on_this_machine)
    for key in ("vocabulary_file", "glove_path"):  # optional text files: empty, or a file that is there
        if on_this_machine and checked.get(key) and not Path(checked[key]).expanduser().is_file():
            raise ParameterError(f"parameter {key!r}: file {checked[key]!r} not found")
    if chapter in CHAPTER_RULES:
        def where(key: str) -> Path:  # a path parameter as the chapter will read it
            value = merged[key]
            return Path(os.path.normpath(base / value)) if value == defaults.get(key) else Path(value).expanduser()

        merged = {**defaults, **checked}
        CHAPTER_RULES[chapter](merged, where, on_this_machine)
    return checked


def _ch0_rules(p: dict[str, Any], where, on_this_machine: bool) -> None:
    if p["oracle"] not in ("committed", "train"):
        raise ParameterError(f"parameter 'oracle': expects 'committed' or 'train', got {p['oracle']!r}")


def _ch1_rules(p: dict[str, Any], where, on_this_machine: bool) -> None:
    sizes = p["batch_sizes"]
    if len(set(sizes)) != len(sizes) or len(sizes) == 1:
        raise ParameterError(f"parameter 'batch_sizes': each batch size once, at least two (or [] to skip the comparison), got {sizes!r}")
    if 0 < p["long_epochs"] <= p["epochs"]:
        raise ParameterError(f"parameter 'long_epochs': 0 (no budget check) or more than epochs={p['epochs']}, got {p['long_epochs']}")
    if p["bias_init"] not in ("select", "default", "zero") or (p["bias_init"] == "select" and not p["init_census_seeds"]):
        raise ParameterError(f"parameter 'bias_init': expects 'default', 'zero' or 'select' (the census on validation, which "
                             f"needs init_census_seeds > 0), got {p['bias_init']!r} with init_census_seeds={p['init_census_seeds']}")


def _ch2_rules(p: dict[str, Any], where, on_this_machine: bool) -> None:
    if p["n_scenes"] != 0 or not on_this_machine:
        return
    root = where("data_root")  # n_scenes 0: real FOIL, data_root/foil_<split>.json as it is
    missing = [f"foil_{s}.json" for s in (p["val_split"], p["test_split"]) if not (root / f"foil_{s}.json").is_file()]
    if missing:
        raise ParameterError(f"parameter 'n_scenes': 0 reads real FOIL files, but {str(root)!r} has no "
                             f"{' or '.join(missing)}; use n_scenes > 0 for the toy world (scenes per split "
                             "and draw), or a data_root that holds foil_<val_split>.json and foil_<test_split>.json")


def _ch3_rules(p: dict[str, Any], where, on_this_machine: bool) -> None:
    if not on_this_machine or p["vocabulary_file"]:
        return  # a given vocabulary_file was checked above
    root = where("data_root")  # read as it is when it holds both splits (fdata.coco_root)
    splits = (p["train_split"], p["eval_split"])
    real = all((root / "annotations" / f"instances_{s}.json").is_file() for s in splits) \
        and not (root / "toyworld.json").is_file()
    if real:
        raise ParameterError(f"parameter 'vocabulary_file': data_root {str(root)!r} is real data (COCO "
                             "annotations, no toyworld.json), which needs a text file with one open-vocabulary "
                             "name per line (data_scripts/prepare_imagenet21k_names.py writes one); got none")


# rules that tie one chapter's parameters together: (parameters with defaults filled in,
# where(key) -> the path the chapter reads, on_this_machine) -> None or ParameterError
CHAPTER_RULES = {"ch0": _ch0_rules, "ch1": _ch1_rules, "ch2": _ch2_rules, "ch3": _ch3_rules}


def _check_device(device: str) -> str:
    """'auto' -> 'cuda' when a GPU is there, else 'cpu'; 'cuda[:i]' only where CUDA is."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        kind = torch.device(device).type
    except RuntimeError as err:
        raise ParameterError(f"parameter 'device': {device!r} is not a device ({err})") from None
    if kind == "cuda" and not torch.cuda.is_available():
        raise ParameterError(f"parameter 'device': {device!r} asked for, but this machine has no CUDA "
                             "device (use 'cpu', or 'auto' to take a GPU only where there is one)")
    if kind == "mps" and not torch.backends.mps.is_available():
        raise ParameterError(f"parameter 'device': {device!r} asked for, but MPS is not available here")
    return device


def _check_model(model: str | None, pretrained: str | None, on_this_machine: bool = True) -> None:
    """A known architecture, and a pretrained value it can take, before any work.

    A weights file is checked only ``on_this_machine``; for a set meant for another
    machine any value that looks like a path is taken as one."""
    if model is None:
        return
    from .models.factory import NO_WEIGHTS, TOY_MODELS, check_model_name

    try:
        check_model_name(model)
    except ValueError as err:
        raise ParameterError(str(err)) from None
    if pretrained in NO_WEIGHTS or pretrained == "toy" and model in TOY_MODELS:
        return
    if pretrained == "toy":
        raise ParameterError(f"parameter 'pretrained': 'toy' weights exist only for {', '.join(TOY_MODELS)}, "
                             f"not {model!r}; use 'none', an open_clip tag or a weights file")
    if Path(str(pretrained)).expanduser().is_file() or not on_this_machine and _looks_like_path(pretrained):
        return
    if model in TOY_MODELS:
        raise ParameterError(f"parameter 'pretrained': {pretrained!r} is neither 'toy' (the committed "
                             f"checkpoint of {model!r}), 'none' (random weights) nor a weights file")
    import open_clip

    tags = open_clip.list_pretrained_tags_by_model(model)
    if pretrained not in tags:
        raise ParameterError(f"parameter 'pretrained': {pretrained!r} is neither a weights file nor a "
                             f"tag of {model!r} (tags: {', '.join(tags) or 'none'}; or 'none' for random weights)")


def _looks_like_path(value: Any) -> bool:
    return isinstance(value, str) and ("/" in value or value.endswith((".pt", ".pth", ".bin", ".safetensors")))


class _Yaml12Loader(yaml.SafeLoader):
    """YAML 1.2's core schema on top of PyYAML, which reads YAML 1.1.

    Under 1.1 ``yes``/``no``/``on``/``off`` are booleans, ``1e-3`` (no dot) is a string,
    ``010`` is octal and ``1_000`` an int; under 1.2 the first and last are strings, ``1e-3``
    is a float and ``010`` is ten. Only ``true``/``false`` (any of three casings) are booleans.
    """


_Yaml12Loader.yaml_implicit_resolvers = {}  # start empty: none of PyYAML's 1.1 resolvers
for _tag, _pattern, _first in (
        ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
        ("null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
        ("int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
        ("float", r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                  r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$", "-+0123456789."),
):
    _Yaml12Loader.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(_pattern), list(_first))


def _yaml12_int(loader: yaml.SafeLoader, node: yaml.Node) -> int:
    text = loader.construct_scalar(node)
    if text.startswith(("0o", "0x")):
        return int(text[2:], 8 if text[1] == "o" else 16)
    return int(text, 10)  # a leading zero is decimal in 1.2 (PyYAML would read 010 as octal)


_Yaml12Loader.add_constructor("tag:yaml.org,2002:int", _yaml12_int)


def parse_value(text: str) -> Any:
    """A -p value as YAML 1.2 (so 3 is int, 0.5 and 1e-3 float, true bool, cuda str)."""
    return yaml.load(text, Loader=_Yaml12Loader)


def load_param_file(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise ParameterError(f"parameter file not found: {path}")
    data = yaml.load(path.read_text(), Loader=_Yaml12Loader) or {}
    if not isinstance(data, dict):
        raise ParameterError(f"{path}: expected a mapping of parameter names to values")
    return data


def resolved_parameters(chapter: str, params: dict[str, Any]) -> dict[str, Any]:
    """Every parameter the chapter will run with: its defaults updated by the checked ``params``."""
    defaults = chapter_defaults(chapter_notebook(chapter))
    return {**defaults, **_check_params(chapter, params, defaults)}


def run_chapter(chapter: str, params: dict[str, Any], runs_dir: str | Path = REPO_ROOT / "runs",
                kernel: str = "python3", live_widgets: bool = False, log_output: bool = False,
                show_cells: bool = True) -> Path:
    """Validate, then execute the chapter into runs/<chapter>/<timestamp>/.

    Widgets render as static figures unless ``live_widgets``: a papermill run has no
    frontend, and a live widget cell can leave nbclient waiting on an idle kernel.
    ``log_output`` streams the cells' output while they run (long GPU runs); ``show_cells``
    prints a line on stderr as each cell starts (:class:`fgclip.progress.CellProgress`).
    The chapter runs in its own folder; from a regular install's copy, in
    ``<runs_dir>/notebooks``, so that its relative folders (``../data/chN``) land in ``runs_dir``.
    """
    notebook = chapter_notebook(chapter)
    defaults = chapter_defaults(notebook)
    work = Path(runs_dir).resolve() / "notebooks" if is_installed_home(notebook.parents[1]) else notebook.parent
    checked = _check_params(chapter, params, defaults, base=work)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    out = Path(runs_dir) / chapter / stamp
    out.mkdir(parents=True)
    work.mkdir(exist_ok=True)
    checked["results_path"] = str((out / "results.json").resolve())
    for key in ("data_root", "pretrained", "vocabulary_file", "glove_path", "cache_dir"):  # the caller's paths
        if checked.get(key) == defaults.get(key):
            continue  # a default stays relative to the notebook
        if isinstance(checked.get(key), str) and Path(checked[key]).expanduser().exists():
            checked[key] = str(Path(checked[key]).expanduser().resolve())
    atomic_write_text(out / "params.yaml", yaml.safe_dump(checked, sort_keys=True))
    run_notebook(notebook, out / notebook.name, checked, label=chapter, cwd=work, kernel_name=kernel,
                 env={} if live_widgets else {STATIC_ENV: "1"}, show_cells=show_cells, log_output=log_output)
    if not (out / "results.json").is_file():
        raise RuntimeError(f"{notebook.name} ran but wrote no results.json to {out}")
    json.loads((out / "results.json").read_text())  # a chapter must write valid JSON
    return out
