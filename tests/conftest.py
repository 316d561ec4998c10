import os

os.environ.setdefault("TESTING", "1")  # progress bars off
if os.environ.get("PYTEST_XDIST_WORKER"):  # one of `make test`'s parallel workers: a core each
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = "1"  # kernels and subprocesses too
    import torch

    torch.set_num_threads(1)


import pytest  # noqa: E402

N_REAL_IMAGES = 12  # real-photo sample datasets for the ch0 real-layout test: six per split


@pytest.fixture(scope="session")
def layouts(tmp_path_factory):
    """Small datasets in the real layouts made of real photos (fgclip.datasets.samples)."""
    from fgclip.datasets.samples import build_real_layouts

    return build_real_layouts(tmp_path_factory.mktemp("real"), n_images=N_REAL_IMAGES, seed=0)


@pytest.fixture(scope="session")
def plans(tmp_path_factory):
    """Each chapter's gpu-full parameters on real-layout data at the GPU check's reduced sizes,
    with real architectures at random weights, on the CPU (benchmarks/gpu_check.plan)."""
    import sys
    from pathlib import Path

    from fgclip.datasets.samples import build_real_layouts

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import gpu_check

    work = tmp_path_factory.mktemp("plans")
    layouts = build_real_layouts(work / "real", n_images=gpu_check.N_IMAGES, seed=0)
    plans = gpu_check.plan(layouts, work, "cpu")
    for params in plans.values():
        params.pop("precision", None)  # the chapter's own default (auto) on this machine
    return plans


def run_through_runner(chapter: str, params: dict, tmp_path) -> dict:
    """Run a chapter with ``python -m fgclip run``'s runner and return its results.json.
    FGCLIP_STATIC_WIDGETS is unset first: the runner itself must make widgets static."""
    import json

    from fgclip.runner import run_chapter

    os.environ.pop("FGCLIP_STATIC_WIDGETS", None)
    out = run_chapter(chapter, params, runs_dir=tmp_path)
    return json.loads((out / "results.json").read_text())


def resolve_dotted(dotted: str):
    """The object a dotted name (module path, then attributes) names, or None: how the tests
    check that a reference in prose or a docstring (``fgclip.train.loop.train_loop``) exists."""
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr, None)
        return obj
    return None
