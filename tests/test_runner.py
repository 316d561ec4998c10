import json
import subprocess
import sys

import pytest
import yaml

from fgclip.runner import ParameterError, chapter_defaults, chapter_notebook, validate


def test_defaults_come_from_the_parameters_cell():
    d = chapter_defaults(chapter_notebook("ch0"))
    assert d["seed"] == 0 and d["device"] == "cpu" and d["epochs"] == 0 and d["pretrained"] == "toy"


@pytest.mark.parametrize("params,match", [
    ({"epochz": 3}, "unknown parameter.*'epochz'"),
    ({"epochs": "three"}, "'epochs' expects int"),
    ({"seed": 1.5}, "'seed' expects int"),
    ({"data_root": "/no/such/folder"}, "'data_root'.*does not exist"),
    ({"pretrained": "/no/such/weights.pt"}, "'pretrained'.*not found"),
])
def test_bad_parameters_stop_before_any_work(params, match):
    with pytest.raises(ParameterError, match=match):
        validate("ch0", params)


@pytest.mark.parametrize("chapter", ["ch1", "ch3", "ch4"])
def test_head_training_precision_is_a_checked_parameter(chapter):
    # numbers that enter a verdict are computed in fp32 by default, so the book is the same on every CPU
    assert chapter_defaults(chapter_notebook(chapter))["precision"] == "fp32"
    assert validate(chapter, {"precision": "bf16"}) == {"precision": "bf16"}
    with pytest.raises(ParameterError, match="'precision': expects one of"):
        validate(chapter, {"precision": "fp16"})


def test_unknown_chapter_is_named():
    with pytest.raises(ParameterError, match="ch9"):
        chapter_notebook("ch9")


def test_cli_fails_fast_with_a_clear_message(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "fgclip", "run", "ch0", "-p", "epochs", "many",
                           "--runs-dir", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "'epochs' expects int" in proc.stderr
    assert not any(tmp_path.iterdir())  # nothing was started


def test_run_writes_notebook_params_and_results(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "fgclip", "run", "ch0", "-f", "cpu-small",
                           "-p", "n_images", "200", "-p", "stage", "false", "-p", "data_root", str(tmp_path),
                           "--runs-dir", str(tmp_path / "runs")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    [out] = list((tmp_path / "runs" / "ch0").iterdir())
    params = yaml.safe_load((out / "params.yaml").read_text())
    assert params["n_images"] == 200 and params["model"] == "toy-vit"
    results = json.loads((out / "results.json").read_text())
    assert results["n_images"] == 200
    toy = results["metrics"]["toy-vit (toy)"]  # the trained model is named by model and weights
    assert toy["i2t_R@1"] > results["metrics"]["random init"]["i2t_R@1"]
    assert (out / "ch0_toyworld.ipynb").is_file()


def test_the_default_data_root_is_relative_to_the_notebook_and_need_not_exist_yet(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nowhere near notebooks/: ../data/ch0 does not exist from here
    default = chapter_defaults(chapter_notebook("ch0"))["data_root"]
    assert validate("ch0", {"data_root": default}) == {"data_root": default}
    with pytest.raises(ParameterError, match="'data_root'.*does not exist"):
        validate("ch0", {"data_root": "somewhere/else"})


def test_a_run_shows_a_line_per_cell_text_bars_and_no_transport_warning(tmp_path, monkeypatch, capfd):
    """A runner run of a three-cell fake chapter (not a real one): a line on stderr as each code
    cell starts, the library's progress bar saved as text (not a widget) in the run's notebook,
    and no "running over TCP without encryption" from the kernel."""
    import nbformat

    from fgclip import runner

    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "language": "python",
                                                           "display_name": "Python 3"}})
    nb.cells = [nbformat.v4.new_code_cell('results_path = ""', metadata={"tags": ["parameters"]}),
                nbformat.v4.new_markdown_cell("not executed"),
                nbformat.v4.new_code_cell("from fgclip.progress import progress\n"
                                          "for _ in progress(range(3), desc='fake'):\n    pass"),
                nbformat.v4.new_code_cell("import json\nopen(results_path, 'w').write(json.dumps({'ok': 1}))")]
    (tmp_path / "chapters").mkdir()
    nbformat.write(nb, tmp_path / "chapters" / "ch9_fake.ipynb")
    monkeypatch.setattr(runner, "NOTEBOOKS", tmp_path / "chapters")
    for name in ("CI", "TESTING"):  # bars on, as outside the book (the kernel inherits this)
        monkeypatch.delenv(name, raising=False)
    out = runner.run_chapter("ch9", {}, tmp_path / "runs")
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("ch9: ")]
    assert [line.split(",")[0] for line in lines[:4]] == [f"ch9: cell {k}/4" for k in range(1, 5)], err
    assert "from fgclip.progress import progress" in lines[2] and lines[4].startswith("ch9: 4 cells in ")
    assert "without encryption" not in err
    cells = nbformat.read(out / "ch9_fake.ipynb", as_version=4).cells
    [bar] = [c for c in cells if "progress(range(3)" in c.source]
    assert bar.outputs and {(o.output_type, o.get("name")) for o in bar.outputs} == {("stream", "stderr")}
    text = "".join(o.text for o in bar.outputs)  # no widget: stderr text only, ending at the full bar
    assert "fake: 100%" in text and "3/3" in text


def test_ch3_refuses_a_selection_rule_it_does_not_know():
    from fgclip.runner import ParameterError, validate
    with pytest.raises(ParameterError, match="selection_rule.*early-stop.*patience"):
        validate("ch3", {"selection_rule": "patience"})
