"""The prepared GPU check builds a valid parameter set for every chapter (it can only run
where a GPU is lent; here its plan is checked and its refusal without CUDA)."""
import subprocess
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import gpu_check  # noqa: E402
from fgclip.datasets.samples import build_real_layouts  # noqa: E402
from fgclip.runner import validate  # noqa: E402


def test_every_chapter_gets_a_valid_small_real_data_plan(tmp_path):
    plans = gpu_check.plan(build_real_layouts(tmp_path / "real", n_images=8), tmp_path, "cuda")
    assert sorted(plans) == ["ch0", "ch1", "ch2", "ch3", "ch4"]
    for chapter, params in plans.items():
        assert params["device"] == "cuda" and params["pretrained"] in ("none", "toy")
        assert str(tmp_path) in params["data_root"]
        validate(chapter, params, on_this_machine=False)


def test_without_cuda_it_says_so():
    if torch.cuda.is_available():
        return
    run = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_check.py")], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 2 and "no CUDA device" in run.stderr
