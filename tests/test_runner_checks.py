"""`python -m fgclip run` refuses bad parameters before any cell runs, reads YAML 1.2
numbers and negative values, prints the resolved set with --check, and renders widgets
statically (a papermill run has no frontend)."""
import subprocess
import sys

import pytest
import torch

from fgclip.__main__ import main, split_param_pairs
from fgclip.runner import ParameterError, parse_value, resolved_parameters, run_chapter, validate


@pytest.mark.parametrize("text, value", [("1e-3", 1e-3), ("-5e-5", -5e-5), ("3", 3), ("0.5", 0.5),
                                         ("true", True), ("cuda", "cuda"), ("[1, 2]", [1, 2])])
def test_values_are_yaml_1_2(text, value):
    parsed = parse_value(text)
    assert parsed == value and type(parsed) is type(value)


def test_negative_values_survive_the_command_line():
    rest, pairs = split_param_pairs(["run", "ch2", "-p", "epsilon", "-5e-5", "--check"])
    assert rest == ["run", "ch2", "--check"] and pairs == [("epsilon", "-5e-5")]
    with pytest.raises(ParameterError, match="NAME and a VALUE"):
        split_param_pairs(["run", "ch2", "-p", "epsilon"])


def test_check_prints_every_resolved_parameter_and_runs_nothing(capsys, tmp_path):
    assert main(["run", "ch0", "--check", "-p", "seed", "3", "--runs-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "seed: 3" in out and "n_images: 1000" in out
    assert not any(tmp_path.iterdir())


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
@pytest.mark.parametrize("params, match", [
    ({"device": "cuda"}, "'device'.*no CUDA device"),
    ({"device": "gpu"}, "'device'.*not a device"),
    ({"model": "ViT-B32", "pretrained": "none"}, "'model'.*did you mean ViT-B-32"),
    ({"model": "ViT-B-32"}, "'pretrained'.*'toy' weights exist only"),
    ({"model": "ViT-B-32", "pretrained": "laion9"}, "'pretrained'.*neither a weights file nor a tag"),
    ({"data_root": None}, "'data_root': a value is required"),
])
def test_refusals_name_the_parameter(params, match):
    with pytest.raises(ParameterError, match=match):
        validate("ch0", params)


def test_device_auto_resolves_to_what_is_there():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolved_parameters("ch0", {"device": "auto"})["device"] == expected


def test_a_refusal_comes_before_any_output_folder(tmp_path):
    with pytest.raises(ParameterError):
        run_chapter("ch0", {"model": "no-such-clip"}, runs_dir=tmp_path)
    assert not any(tmp_path.iterdir())
    run = subprocess.run([sys.executable, "-m", "fgclip", "run", "ch0", "-p", "model", "no-such-clip",
                          "--runs-dir", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "parameter 'model'" in run.stderr and "Traceback" not in run.stderr


def _notebook(tmp_path, source):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source, metadata={"tags": ["parameters"]})]
    path = tmp_path / "chx_test.ipynb"
    nbformat.write(nb, path)
    return path


def test_ranges_are_read_from_the_end_of_each_comment(tmp_path):
    from fgclip.runner import _check_range, chapter_defaults, chapter_ranges

    path = _notebook(tmp_path, 'n_images: int = 100  # scenes [> 0]\n'
                               'lr: float = 1e-3  # step size, e.g. 1e-3 [> 0]\n'
                               'proportions: list = [0.1, 0.5]  # known labels [non-empty; each 0 to 1]\n'
                               'seed = 0  # no range\n')
    assert chapter_defaults(path) == {"n_images": 100, "lr": 1e-3, "proportions": [0.1, 0.5], "seed": 0}
    ranges = chapter_ranges(path)
    assert ranges == {"n_images": ["> 0"], "lr": ["> 0"], "proportions": ["non-empty", "each 0 to 1"]}
    for name, bad, match in (("n_images", -5, "must be > 0"), ("proportions", [], "must not be empty"),
                             ("proportions", [0.5, 1.5], r"between 0 and 1 \(each value\)")):
        with pytest.raises(ParameterError, match=match):
            _check_range(name, bad, ranges[name])
    with pytest.raises(ParameterError, match="unreadable range"):
        chapter_ranges(_notebook(tmp_path, "x = 1  # [sometimes]\n"))


def test_a_rerun_with_another_seed_or_size_gets_other_data(tmp_path):
    """The toy export is keyed by seed and size: no silent reuse of the first export."""
    import json

    data = tmp_path / "data"
    data.mkdir()
    # stage off: the stage's oracle and probes train on scenes of their own, not on this export
    outs = [run_chapter("ch0", {"data_root": str(data), "n_images": n, "seed": seed, "stage": False},
                        runs_dir=tmp_path / "runs")
            for n, seed in ((12, 0), (12, 1), (16, 0))]
    exports = sorted(p for p in data.iterdir() if p.name.startswith("toy-"))
    assert len(exports) == 3
    recorded = sorted((json.loads((p / "toy-export.json").read_text())["seed"],
                       json.loads((p / "toy-export.json").read_text())["n_images"]) for p in exports)
    assert recorded == [(0, 12), (0, 16), (1, 12)]
    results = [json.loads((o / "results.json").read_text()) for o in outs]
    assert [(r["seed"], r["n_images"]) for r in results] == [(0, 12), (1, 12), (0, 16)]


CHAPTERS = sorted(p.stem.split("_")[0] for p in __import__("fgclip.runner").runner.NOTEBOOKS.glob("ch*_*.ipynb"))


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_papermill_sees_every_parameter_with_its_type(chapter):
    """Plain papermill (`papermill --help-notebook`) reads the same parameters as the runner."""
    import nbformat
    from papermill.inspection import _infer_parameters

    from fgclip.runner import chapter_defaults, chapter_notebook, chapter_ranges

    path = chapter_notebook(chapter)
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        cell.metadata.setdefault("tags", [])
    seen = {p.name: p for p in _infer_parameters(nb)}
    defaults = chapter_defaults(path)
    assert sorted(seen) == sorted(defaults), f"papermill misses {sorted(set(defaults) - set(seen))}"
    untyped = [n for n, p in seen.items() if p.inferred_type_name in ("None", "")]
    assert not untyped, f"{chapter}: parameters without a type annotation: {untyped}"
    for name, rules in chapter_ranges(path).items():  # the defaults obey their own ranges
        validate(chapter, {name: defaults[name]})
