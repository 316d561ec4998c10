"""Validation curves of several toy-CLIP pretraining recipes, run side by side.

Each recipe is a set of `PretrainConfig` overrides; each runs in its own process with
`--eval-every-epoch`, so its checkpoint's history holds the held-out (validation split)
retrieval and zero-shot numbers after every epoch. The sweep is how the recipe of the
committed toy CLIPs was chosen (never on a chapter's test split):

    python benchmarks/pretrain_sweep.py --grid stage --device cuda --out runs/sweep --deadline-s 420

renders every training set once with all cores, starts every recipe, stops them at the
deadline, and writes `<out>/sweep.json`: per recipe its overrides and validation curve.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from fgclip.models import create_clip  # noqa: E402
from fgclip.toyworld import ToyWorldConfig  # noqa: E402
from fgclip.train import PretrainConfig  # noqa: E402
from fgclip.train.checkpoint import load_checkpoint  # noqa: E402
from fgclip.train.toy_data import build_caption_cache  # noqa: E402

COMMON = {"batch_size": 256, "weight_decay": 0.1, "warmup_steps": 300, "log_every": 50, "ckpt_every": 50,
          "eval_every_epoch": True}
GRIDS = {
    "stage": {  # 400k samples fit 2 hours of the 2-core CPU; 800k shows the trend beyond
        "vit-keep-40k": {"model": "toy-vit", "false_negatives": "keep", "n_train": 40_000, "epochs": 10},
        "vit-mask-40k": {"model": "toy-vit", "n_train": 40_000, "epochs": 10},
        "vit-mask-100k": {"model": "toy-vit", "n_train": 100_000, "epochs": 4},
        "vit-mask-100k-lr2e-3": {"model": "toy-vit", "n_train": 100_000, "epochs": 4, "lr": 2e-3},
        "vit-mask-100k-x8": {"model": "toy-vit", "n_train": 100_000, "epochs": 8},
        "rn-keep-40k": {"model": "toy-rn", "false_negatives": "keep", "n_train": 40_000, "epochs": 10},
        "rn-mask-40k": {"model": "toy-rn", "n_train": 40_000, "epochs": 10},
        "rn-mask-100k": {"model": "toy-rn", "n_train": 100_000, "epochs": 4},
        "rn-mask-100k-x8": {"model": "toy-rn", "n_train": 100_000, "epochs": 8},
    },
    "vit": {  # the ViT at the 400k-600k samples a 2-hour CPU run allows: schedule, batch, decay
        "vit-lr5e-4": {"model": "toy-vit", "n_train": 40_000, "epochs": 10, "lr": 5e-4},
        "vit-b128-lr5e-4": {"model": "toy-vit", "n_train": 40_000, "epochs": 10, "lr": 5e-4, "batch_size": 128},
        "vit-b128-lr1e-3": {"model": "toy-vit", "n_train": 40_000, "epochs": 10, "batch_size": 128},
        "vit-wd0.02": {"model": "toy-vit", "n_train": 40_000, "epochs": 10, "weight_decay": 0.02},
        "vit-full0.2": {"model": "toy-vit", "n_train": 40_000, "epochs": 10, "full_caption_weight": 0.2},
        "vit-60k-x10": {"model": "toy-vit", "n_train": 60_000, "epochs": 10},
    },
    "tiny": {  # the script's own check on a CPU: two recipes, a few steps
        "vit": {"model": "toy-vit", "n_train": 64, "epochs": 2, "batch_size": 32, "n_val": 40},
        "rn": {"model": "toy-rn", "n_train": 64, "epochs": 2, "batch_size": 32, "n_val": 40},
    },
}


def recipe(name: str, overrides: dict, out: Path, device: str) -> PretrainConfig:
    return PretrainConfig(**{**COMMON, **overrides, "out_dir": str(out / name), "device": device,
                             "cache_dir": str(out / "cache")})


def run_one(cfg_json: str) -> None:
    from fgclip.train import train
    train(PretrainConfig(**json.loads(cfg_json)))


def collect(name: str, cfg: PretrainConfig, overrides: dict) -> dict:
    ckpt = Path(cfg.out_dir) / "last.pt"
    history = load_checkpoint(ckpt)["history"] if ckpt.is_file() else []
    return {"recipe": name, "overrides": overrides, "config": vars(cfg) | {"world": cfg.world},
            "val_curve": [h for h in history if "epoch" in h],
            "loss_curve": [h for h in history if "loss" in h], "finished": (Path(cfg.out_dir) / "metrics.json").is_file()}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--grid", choices=sorted(GRIDS), default="stage")
    p.add_argument("--only", nargs="*", default=None, help="run only these recipes of the grid")
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", default="runs/sweep")
    p.add_argument("--deadline-s", type=float, default=3600.0, help="stop every run after this many seconds")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes that render the data")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)  # internal: run one recipe's JSON config
    a = p.parse_args(argv)
    if a.one is not None:
        return run_one(a.one)
    out = Path(a.out)
    grid = {k: v for k, v in GRIDS[a.grid].items() if a.only is None or k in a.only}
    cfgs = {name: recipe(name, o, out, a.device) for name, o in grid.items()}
    t0 = time.time()
    for key in sorted({(c.model, c.n_train, c.seed) for c in cfgs.values()}, key=str):
        model, n_train, seed = key  # one render per (tokenizer, world, size): every model shares the tokenizer
        tok = create_clip(model, pretrained=None).tokenizer
        build_caption_cache(ToyWorldConfig(), n_train, seed, "train", tok, out / "cache", workers=a.workers)
    print(f"data rendered in {time.time() - t0:.0f} s", flush=True)
    threads = max(1, (os.cpu_count() or 1) // len(cfgs))
    procs = {}
    for name, cfg in cfgs.items():
        cfg.threads = threads
        blob = json.dumps(vars(cfg))
        log = open(out / f"{name}.log", "w")
        procs[name] = subprocess.Popen([sys.executable, __file__, "--one", blob], stdout=log, stderr=subprocess.STDOUT,
                                       env={**os.environ, "CI": "true"})
    deadline = time.time() + a.deadline_s
    while time.time() < deadline and any(pr.poll() is None for pr in procs.values()):
        time.sleep(5)
    for pr in procs.values():
        if pr.poll() is None:
            pr.terminate()
    for pr in procs.values():
        pr.wait()
    result = {"grid": a.grid, "device": a.device, "torch": torch.__version__, "wall_s": time.time() - t0,
              "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
              "runs": [collect(n, cfgs[n], grid[n]) for n in cfgs]}
    (out / "sweep.json").write_text(json.dumps(result, indent=1, default=str))
    for r in result["runs"]:
        last = r["val_curve"][-1] if r["val_curve"] else {}
        print(r["recipe"], "epochs", len(r["val_curve"]), {k: round(v, 3) for k, v in last.items() if isinstance(v, float)})


if __name__ == "__main__":
    main()
