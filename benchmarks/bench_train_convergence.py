"""Does the default path train the same toy CLIP? Two whole pretraining runs, same seed and epochs.

    .venv/bin/python benchmarks/bench_train_convergence.py [--n-train 20000] [--epochs 3] [--seeds 0 1]

Runs ``data_scripts/pretrain_toy_clip.py`` twice per seed, one run after the other: the
fp32 reference (open_clip's attention, default allocator, no compile) and the default
command (``--precision auto``, which is bf16 autocast where the CPU has avx512_bf16/AMX and
fp32 elsewhere, explicit attention, allocator; what auto chose is recorded). Same data, seed, batch,
schedule and epochs. Reports each run's wall time (compilation included), its steady
images/s (the logged rates after the first log interval) and held-out retrieval R@1 on
1,000 validation scenes, evaluated twice: as the run evaluates itself (in its own
precision) and both trained models in fp32, then the ratios and R@1 differences. Writes
``benchmarks/results/train_convergence.json``. The default schedule (3 epochs of 20k) is a
shorter run than the committed checkpoint's 10 epochs, to keep each fp32 run near 10
minutes; two seeds show how far apart two fp32 runs land, the yardstick for the default path's
difference.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from common import write_benchmark

ROOT = Path(__file__).resolve().parents[1]
PATHS = {
    "fp32 reference": ["--precision", "fp32", "--attention", "sdpa", "--no-compile",
                       "--no-keep-freed-memory"],
    "default path": [],  # the default command: precision auto, explicit attention, allocator
}


def fp32_metrics(ckpt: dict, n_val: int, seed: int) -> dict:
    """The trained model's held-out metrics evaluated in fp32 with open_clip's attention.

    Each run also evaluates itself in its own precision (``metrics``); evaluating both runs
    the same way isolates what training changed from what bf16 inference changes.
    """
    from fgclip.evaluation import retrieval_metrics
    from fgclip.models import create_clip
    from fgclip.toyworld import ToyWorldConfig

    clip = create_clip("toy-vit", pretrained=None)
    clip.model.load_state_dict(ckpt["state_dict"])
    clip.model.eval()
    return retrieval_metrics(clip, ToyWorldConfig(), n=n_val, seed=seed, split="val", precision="fp32")


def pretrain(args: list[str], out_dir: Path, n_val: int, seed: int) -> dict:
    """One pretraining run in its own process; returns wall time, metrics and history."""
    cmd = [sys.executable, str(ROOT / "data_scripts" / "pretrain_toy_clip.py"), "--out-dir", str(out_dir),
           *args]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"pretraining failed ({' '.join(cmd)}):\n{done.stderr[-3000:]}")
    metrics = json.loads((out_dir / "metrics.json").read_text())["val"]  # {"val": ..., "test": ...}
    ckpt = torch.load(out_dir / "last.pt", map_location="cpu", weights_only=False)
    precision = ckpt.get("precision", {})
    history = ckpt["history"]
    rates = [h["images_per_s"] for h in history if "images_per_s" in h]
    if not rates:
        raise RuntimeError(f"{out_dir}: no throughput was logged; lower --log-every below the run's step count")
    return {"wall_s": wall, "metrics": metrics, "fp32_metrics": fp32_metrics(ckpt, n_val, seed),
            "steady_images_per_s": statistics.median(rates[1:] or rates),
            "first_interval_images_per_s": rates[0], "command": " ".join(cmd[1:]),
            "precision": precision}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n-train", type=int, default=20_000)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--warmup-steps", type=int, default=50)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--log-every", type=int, default=20, help="steps between logged throughputs")
    p.add_argument("--n-val", type=int, default=1000, help="held-out scenes for R@1")
    p.add_argument("--n-test", type=int, default=1000, help="test scenes of each finished model's metrics")
    a = p.parse_args()
    common = ["--n-train", str(a.n_train), "--epochs", str(a.epochs), "--batch-size", str(a.batch_size),
              "--warmup-steps", str(a.warmup_steps), "--threads", str(a.threads), "--log-every", str(a.log_every),
              "--n-val", str(a.n_val), "--n-test", str(a.n_test),
              "--ckpt-every", "100000"]
    runs: dict[str, dict[int, dict]] = {name: {} for name in PATHS}
    with tempfile.TemporaryDirectory(prefix="bench-convergence-") as tmp:
        for seed in a.seeds:
            for name, flags in PATHS.items():
                out = Path(tmp) / f"{name.replace(' ', '-')}-seed{seed}"
                runs[name][seed] = pretrain([*common, "--seed", str(seed), *flags], out, a.n_val, seed)
                r = runs[name][seed]
                print(f"seed {seed} {name:<15} wall {r['wall_s']:6.0f} s  steady {r['steady_images_per_s']:6.1f} img/s"
                      f"  i2t R@1 {r['metrics']['i2t_R@1']:.3f}  t2i R@1 {r['metrics']['t2i_R@1']:.3f}"
                      f"  (fp32 eval {r['fp32_metrics']['i2t_R@1']:.3f} / {r['fp32_metrics']['t2i_R@1']:.3f})",
                      flush=True)
    for seed, r in runs["fp32 reference"].items():  # the same model, evaluated the same way twice
        for k in ("i2t_R@1", "t2i_R@1"):
            if abs(r["metrics"][k] - r["fp32_metrics"][k]) > 1.0 / a.n_val:
                raise RuntimeError(f"seed {seed}: the fp32 re-evaluation disagrees with the run's own "
                                   f"({k}: {r['fp32_metrics'][k]} vs {r['metrics'][k]})")
    rows, ratios = [], {}
    for seed in a.seeds:
        ref, fast = runs["fp32 reference"][seed], runs["default path"][seed]
        for name, r in (("fp32 reference", ref), ("default path", fast)):
            rows += [{"name": f"{name}, seed {seed}", "metric": "wall time (incl. compile)", "value": r["wall_s"], "unit": "s"},
                     {"name": f"{name}, seed {seed}", "metric": "steady throughput", "value": r["steady_images_per_s"], "unit": "images/s"},
                     {"name": f"{name}, seed {seed}", "metric": "held-out i2t R@1", "value": r["metrics"]["i2t_R@1"], "unit": ""},
                     {"name": f"{name}, seed {seed}", "metric": "held-out t2i R@1", "value": r["metrics"]["t2i_R@1"], "unit": ""},
                     {"name": f"{name}, seed {seed}", "metric": "held-out i2t R@1, fp32 eval", "value": r["fp32_metrics"]["i2t_R@1"], "unit": ""},
                     {"name": f"{name}, seed {seed}", "metric": "held-out t2i R@1, fp32 eval", "value": r["fp32_metrics"]["t2i_R@1"], "unit": ""}]
        for k in ("i2t_R@1", "t2i_R@1"):
            rows.append({"name": f"default path minus fp32 reference, seed {seed}", "metric": f"held-out {k}",
                         "value": fast["metrics"][k] - ref["metrics"][k], "unit": ""})
            rows.append({"name": f"default path minus fp32 reference, seed {seed}", "metric": f"held-out {k}, fp32 eval",
                         "value": fast["fp32_metrics"][k] - ref["fp32_metrics"][k], "unit": ""})
        ratios[f"default / fp32 wall time speed-up, seed {seed}"] = ref["wall_s"] / fast["wall_s"]
        ratios[f"default / fp32 steady images/s, seed {seed}"] = fast["steady_images_per_s"] / ref["steady_images_per_s"]
    command = (f"python benchmarks/bench_train_convergence.py --n-train {a.n_train} --epochs {a.epochs} "
               f"--n-val {a.n_val} --n-test {a.n_test} --seeds {' '.join(map(str, a.seeds))}")
    out = write_benchmark("train_convergence", rows, ratios, command,
                          extra={"runs": {n: {str(s): r for s, r in rr.items()} for n, rr in runs.items()},
                                 "flags": PATHS})
    for name, value in ratios.items():
        print(f"{name:<45} {value:.2f}x")
    print(f"-> {out}")


if __name__ == "__main__":
    main()
