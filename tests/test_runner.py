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
