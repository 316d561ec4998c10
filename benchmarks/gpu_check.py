"""The prepared GPU check: every chapter's gpu-full set at reduced sizes, on CUDA, with real
open_clip architectures at random weights, on the real-layout sample datasets.

    python benchmarks/gpu_check.py [--out benchmarks/results/gpu_check.json] [--device cuda]

Each chapter runs through `python -m fgclip run`'s runner with its gpu-full parameters,
the data roots pointed at small datasets in the real layouts made of real photos
(`fgclip.datasets.samples`), `pretrained: none` (nothing can be downloaded on the lent
machine either) and the sizes below. It prints and records each chapter's wall time and
the peak GPU memory in use while it ran (nvidia-smi, polled every 0.2 s, since the chapter
runs in its own kernel process). Meant to finish within 10 minutes on one GPU.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from fgclip.datasets.prepare import prepare_class_names, prepare_foil  # noqa: E402
from fgclip.datasets.samples import build_real_layouts  # noqa: E402
from fgclip.fileio import atomic_write_json  # noqa: E402
from fgclip.runner import PARAMS_DIR, chapter_defaults, chapter_notebook, load_param_file, run_chapter  # noqa: E402

# Reduced sizes: enough for every code path, small enough for the 10-minute budget.
N_IMAGES = 40  # sample photos per dataset, half per split: enough for a validation part with positives
SMALL = {"n_seeds": 2, "n_images": 6, "n_val": 6, "max_epochs": 2, "patience": 1, "n_train": 20, "n_test": 20, "n_eval": 20, "epochs": 2,
         "n_folds": 2, "max_pairs": 8, "batch_size": 8, "proportions": [0.5], "label_fractions": [0.5],
         "query_counts": [], "batch_sizes": [], "bias_levels": [], "planted_n": [20, 20],
         "init_census_seeds": 2, "grounding_seeds": 2, "long_epochs": 4}


def plan(layouts: dict[str, Path], work: Path, device: str) -> dict[str, dict]:
    """Each chapter's parameters: gpu-full, real data roots, random weights, small sizes."""
    foil = work / "foil"
    download = layouts["foil_download"]
    prepare_foil(download / "foilv1.0_train_2017.json", layouts["coco"] / "train2014", foil, "train",
                 val_fraction=0.5, seed=0)
    prepare_foil(download / "foilv1.0_test_2017.json", layouts["coco"] / "val2014", foil, "test")
    names = work / "class_names.txt"
    prepare_class_names(layouts["imagenet21k_lemmas"], names)
    roots = {"ch0": {"data_root": layouts["coco"], "split": "val2017"},
             "ch1": {"data_root": layouts["flickr30k_entities"]},
             "ch2": {"data_root": foil},
             "ch3": {"data_root": layouts["coco"], "vocabulary_file": names, "novel_categories": ["dog", "chair"],
                     "base_categories": ["person", "car", "bottle", "teddy bear"]},
             # ch4: half the 20 training photos for validation (gpu-full's 0.1 leaves 2, too few to hold a
             # known positive at every proportion, which the chapter refuses by val_fraction)
             "ch4": {"data_root": layouts["coco"], "cache_dir": work / "cache-ch4", "val_fraction": 0.5}}
    plans = {}
    for chapter, extra in roots.items():
        defaults = chapter_defaults(chapter_notebook(chapter))
        params = load_param_file(PARAMS_DIR / chapter / "gpu-full.yaml")
        params.update({k: v for k, v in SMALL.items() if k in defaults})
        params.update({k: str(v) if isinstance(v, Path) else v for k, v in extra.items() if k in defaults})
        if str(params.get("model", "")).startswith("toy-"):
            params["pretrained"] = "toy"
        else:
            params["pretrained"] = "none"
        params["device"] = device
        plans[chapter] = params
    return plans


def peak_gpu_memory(stop: threading.Event, peak: list[float]) -> None:
    while not stop.is_set():
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, timeout=5).stdout
            peak[0] = max(peak[0], max(float(x) for x in out.split()))
        except (OSError, ValueError, subprocess.SubprocessError):
            pass
        stop.wait(0.2)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "gpu_check.json"))
    p.add_argument("--device", default="cuda")
    p.add_argument("--chapters", nargs="*", default=["ch0", "ch1", "ch2", "ch3", "ch4"])
    a = p.parse_args(argv)
    import torch

    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu_check: no CUDA device on this machine; nothing was checked", file=sys.stderr)
        return 2
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        plans = plan(build_real_layouts(work / "real", n_images=N_IMAGES), work, a.device)
        for chapter in a.chapters:
            stop, peak = threading.Event(), [0.0]
            watcher = threading.Thread(target=peak_gpu_memory, args=(stop, peak), daemon=True)
            watcher.start()
            start = time.perf_counter()
            try:
                run_chapter(chapter, plans[chapter], runs_dir=work / "runs")
                status = "ok"
            except Exception as err:  # record and go on: the point is to see every chapter
                status = f"failed: {type(err).__name__}: {str(err)[-500:]}"
            stop.set()
            watcher.join()
            rows[chapter] = {"status": status, "wall_s": round(time.perf_counter() - start, 1),
                             "peak_gpu_mib": peak[0], "params": {k: str(v) for k, v in plans[chapter].items()}}
            print(f"{chapter}: {status.splitlines()[0]}, {rows[chapter]['wall_s']} s, "
                  f"peak GPU memory {peak[0]:.0f} MiB", flush=True)
    device = torch.cuda.get_device_name(0) if a.device.startswith("cuda") else a.device
    atomic_write_json(a.out, {"device": device, "chapters": rows}, indent=2)
    return 0 if all(r["status"] == "ok" for r in rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
