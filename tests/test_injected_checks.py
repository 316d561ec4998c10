"""Issue 35: refusals that come before any work, through `--check` and inside the chapter.

Each chapter's cell after `parameters` calls `fgclip.runner.check_injected`, so a plain
papermill run gets the runner's checks: a YAML string such as 'false' injected by
`papermill -p` becomes the bool it means (YAML 1.2), and a bad value stops the chapter in
that cell with the runner's message. The papermill tests stop right there (a refused value,
or a copy of the chapter cut after the check cell), so no chapter's work is executed.
"""
from __future__ import annotations

import json

import nbformat
import pytest

from fgclip.__main__ import main
from fgclip.runner import NOTEBOOKS, ParameterError, chapter_notebook, injected_values, parse_value, validate

CHECK_CELL = "check_injected("


@pytest.mark.parametrize("text, value", [("no", "no"), ("yes", "yes"), ("off", "off"), ("on", "on"),
                                         ("false", False), ("FALSE", False), ("True", True), ("null", None),
                                         ("010", 10), ("0x1f", 31), ("1_000", "1_000"), ("[8]", [8])])
def test_values_are_yaml_1_2_not_1_1(text, value):
    parsed = parse_value(text)
    assert parsed == value and type(parsed) is type(value)


def _real_coco(root):
    (root / "annotations").mkdir(parents=True)
    for split in ("train", "test"):
        (root / "annotations" / f"instances_{split}.json").write_text("{}")
    return root


def refusals(tmp_path):
    """(chapter, name, text as on the command line, what the message says) for each refusal."""
    empty = tmp_path / "empty"
    empty.mkdir(exist_ok=True)
    real = _real_coco(tmp_path / "coco")
    return [
        ("ch0", {"pretrained": "nosuchtag"}, "'pretrained': 'nosuchtag' is neither 'toy'"),  # toy model
        ("ch4", {"model": "toy-rn", "pretrained": "openai"}, "'pretrained': 'openai' is neither 'toy'"),
        ("ch0", {"n_images": "null"}, "'n_images': a value is required"),
        ("ch0", {"oracle": "pretrained"}, "'oracle': expects 'committed' or 'train'"),
        ("ch1", {"lrs": "~"}, "'lrs': a value is required"),
        ("ch2", {"tune_epsilon": "no"}, "'tune_epsilon' expects bool"),  # YAML 1.2: 'no' is a string
        ("ch1", {"batch_sizes": "[8, 8, 64]"}, "'batch_sizes': each batch size once"),
        ("ch1", {"batch_sizes": "[8]"}, "'batch_sizes': each batch size once, at least two"),
        ("ch1", {"long_epochs": "18"}, "'long_epochs': 0 \\(no budget check\\) or more than epochs=18"),
        ("ch2", {"n_scenes": "0", "data_root": str(empty)}, "'n_scenes': 0 reads real FOIL files"),
        ("ch3", {"data_root": str(real)}, "'vocabulary_file': data_root .* is real data"),
        ("ch3", {"vocabulary_file": str(tmp_path / "no-such-names.txt")}, "'vocabulary_file': file .* not found"),
    ]


def test_each_refusal_names_its_parameter_in_validate_check_and_the_notebook_cell(tmp_path, capsys):
    for chapter, given, match in refusals(tmp_path):
        values = {k: parse_value(v) for k, v in given.items()}
        with pytest.raises(ParameterError, match=match):
            validate(chapter, values)
        argv = ["run", chapter, "--check"] + [x for k, v in given.items() for x in ("-p", k, v)]
        assert main(argv) == 2, given
        assert "error: parameter" in capsys.readouterr().err
        # the notebook's cell gets papermill's strings ('0', '[8]', 'null') and reads them as -p does
        with pytest.raises(ParameterError, match=match):
            injected_values(chapter, given)


def test_what_the_refusals_leave_allowed(tmp_path):
    assert validate("ch0", {"pretrained": None}) == {"pretrained": None}  # null: random weights, like 'none'
    assert validate("ch0", {"oracle": "train"}) == {"oracle": "train"}
    assert validate("ch1", {"batch_sizes": []}) == {"batch_sizes": []}  # [] skips the comparison
    foil = tmp_path / "foil"
    foil.mkdir()
    for split in ("val", "test"):
        (foil / f"foil_{split}.json").write_text("{}")
    assert validate("ch2", {"n_scenes": 0, "data_root": str(foil)})["n_scenes"] == 0  # real FOIL is there
    real = _real_coco(tmp_path / "coco")
    names = tmp_path / "names.txt"
    names.write_text("cat\ndog\n")
    validate("ch3", {"data_root": str(real), "vocabulary_file": str(names)})
    (real / "toyworld.json").write_text("{}")  # an earlier toy export carries its own vocabulary
    validate("ch3", {"data_root": str(real)})
    # a set meant for another machine: a weights path there is taken as one
    validate("ch0", {"pretrained": "/elsewhere/toy-vit.pt"}, on_this_machine=False)


def test_the_cell_reads_papermill_strings_as_the_runner_reads_dash_p():
    got = injected_values("ch2", {"tune_epsilon": "false", "epsilon": "-5e-5", "n_seeds": 2, "device": "auto",
                                  "pretrained": "toy", "unrelated": object()})
    assert got["tune_epsilon"] is False and got["epsilon"] == -5e-5 and got["n_seeds"] == 2
    assert got["device"] in ("cpu", "cuda") and "unrelated" not in got
    assert injected_values("ch2", {"margin_share": 1})["margin_share"] == 1.0  # an int for a float: 1.0
    with pytest.raises(ParameterError, match="'tune_epsilon' expects bool"):
        injected_values("ch2", {"tune_epsilon": "yes"})


@pytest.mark.parametrize("chapter", sorted(p.stem.split("_")[0] for p in NOTEBOOKS.glob("ch*_*.ipynb")))
def test_every_chapter_checks_right_after_its_parameters(chapter):
    nb = nbformat.read(chapter_notebook(chapter), as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    check = nb.cells[at + 1]
    assert check.cell_type == "code" and f'check_injected("{chapter}", globals())' in check.source


def _execute(notebook, parameters, tmp_path):
    import papermill

    out = tmp_path / "out.ipynb"
    try:
        papermill.execute_notebook(str(notebook), str(out), parameters=parameters, cwd=str(NOTEBOOKS),
                                   kernel_name="python3", progress_bar=False)
        error = None
    except papermill.PapermillExecutionError as err:
        error = err
    return nbformat.read(out, as_version=4), error


def test_plain_papermill_false_is_the_bool_false(tmp_path):
    """`papermill -p tune_epsilon false` injects the string 'false': chapter 2 runs with False.
    The chapter is cut after its check cell, with one cell that reports what it holds."""
    nb = nbformat.read(chapter_notebook("ch2"), as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if CHECK_CELL in c.source)
    nb.cells = nb.cells[:at + 1] + [nbformat.v4.new_code_cell(
        'import json; print(json.dumps({"tune_epsilon": [type(tune_epsilon).__name__, tune_epsilon]}))')]
    cut = tmp_path / "ch2_cut.ipynb"
    nbformat.write(nb, cut)
    executed, error = _execute(cut, {"tune_epsilon": "false"}, tmp_path)
    assert error is None
    printed = "".join(o.get("text", "") for o in executed.cells[-1].outputs)
    assert json.loads(printed) == {"tune_epsilon": ["bool", False]}


def test_plain_papermill_stops_a_refused_value_in_the_check_cell(tmp_path):
    """The whole chapter 2 with `-p tune_epsilon no` (a string under YAML 1.2): the check cell
    raises the runner's message and no later cell runs."""
    executed, error = _execute(chapter_notebook("ch2"), {"tune_epsilon": "no"}, tmp_path)
    assert error is not None and error.ename == "ParameterError"
    assert "parameter 'tune_epsilon' expects bool" in error.evalue
    at = next(i for i, c in enumerate(executed.cells) if CHECK_CELL in c.source)
    assert any(o.get("output_type") == "error" for o in executed.cells[at].outputs)
    assert all(c.get("execution_count") is None for c in executed.cells[at + 1:] if c.cell_type == "code")
