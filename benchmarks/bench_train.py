"""Toy-CLIP training speed: the fp32 reference loop against the fast path, piece by piece.

    .venv/bin/python benchmarks/bench_train.py [--steps 6] [--chunks 3] [--repeats 2]

Every configuration runs in its own process (the allocator setting is process-wide, and
compiled code must not leak between runs), on real toy-world batches, and the processes
take turns: ``--repeats`` rounds over all configurations, so a slow minute on a shared
machine hits every configuration alike. A configuration's speed is the median over its
rounds of the median over ``--chunks`` timed chunks of ``--steps`` steps. The matmul peak
is measured in the same run. Writes ``benchmarks/results/train.json``. A benchmark, not a
test: nothing here asserts a speed.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from common import peak_rss_mb, write_benchmark

# (label, precision, attention, compile, keep freed memory): each row adds one piece
CONFIGS = [
    ("fp32 reference (open_clip as is)", "fp32", "sdpa", False, False),
    ("bf16 autocast", "bf16", "sdpa", False, False),
    ("bf16 + explicit attention", "bf16", "explicit", False, False),
    ("bf16 + explicit attention + allocator", "bf16", "explicit", False, True),
    ("fast path: bf16 + explicit attention + allocator + torch.compile", "bf16", "explicit", True, True),
    ("fp32 + allocator + torch.compile (all but bf16)", "fp32", "sdpa", True, True),
]
REFERENCE, FAST = CONFIGS[0][0], CONFIGS[4][0]


def matmul_gflops(dtype: torch.dtype, n: int = 2048, reps: int = 10) -> float:
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * n**3 * reps / (time.perf_counter() - t0) / 1e9


def toy_batch(batch: int, seed: int):
    """One batch of real toy-world images and full captions, as the pretraining loop feeds it."""
    from fgclip.models import create_clip, images_to_tensor
    from fgclip.toyworld import ToyWorldConfig
    from fgclip.train.toy_data import build_caption_cache

    clip = create_clip("toy-vit", pretrained=None)
    data = build_caption_cache(ToyWorldConfig(), batch, seed, "train", clip.tokenizer, "data/cache")
    return images_to_tensor(data.images, clip), data.tokens[:, 0]


def train_flops_per_image(images: torch.Tensor, texts: torch.Tensor) -> float:
    """Forward FLOPs counted by torch's FlopCounterMode, times 3 for forward + backward."""
    from torch.utils.flop_counter import FlopCounterMode

    from fgclip.models import create_clip
    model = create_clip("toy-vit", pretrained=None).model
    with FlopCounterMode(display=False) as counter:
        model(images[:8], texts[:8])
    return 3 * counter.get_total_flops() / 8


def worker(spec: dict) -> dict:
    """Time one configuration in this process; returns its numbers."""
    from open_clip.loss import ClipLoss

    from fgclip.models import create_clip
    from fgclip.train.fast import contrastive_step, keep_freed_memory, make_optimizer, prepare_model

    torch.set_num_threads(spec["threads"])
    if spec["allocator"] and not keep_freed_memory():
        raise RuntimeError("keep_freed_memory() is not available on this libc")
    images, texts = toy_batch(spec["batch"], spec["seed"])
    torch.manual_seed(spec["seed"])
    model = create_clip("toy-vit", pretrained=None).model.train()
    step_model = prepare_model(model, spec["attention"], spec["compile"])
    opt = make_optimizer(model, 1e-4, 0.1, torch.device("cpu"))
    loss_fn, cpu = ClipLoss(), torch.device("cpu")
    t0 = time.perf_counter()
    for _ in range(2):  # warm-up (and compilation)
        loss = contrastive_step(step_model, loss_fn, opt, images, texts, cpu, spec["precision"])
    loss.item()
    warmup_s = time.perf_counter() - t0
    speeds = []
    for _ in range(spec["chunks"]):
        t0 = time.perf_counter()
        for _ in range(spec["steps"]):
            loss = contrastive_step(step_model, loss_fn, opt, images, texts, cpu, spec["precision"])
        loss.item()  # wait for the last step before stopping the clock
        speeds.append(spec["steps"] * spec["batch"] / (time.perf_counter() - t0))
    return {"images_per_s": statistics.median(speeds), "chunks": speeds,
            "warmup_s": warmup_s, "peak_rss_mb": peak_rss_mb()}


def run_config(config: tuple, a: argparse.Namespace) -> dict:
    label, precision, attention, compile_model, allocator = config
    spec = {"precision": precision, "attention": attention, "compile": compile_model,
            "allocator": allocator, "batch": a.batch_size, "seed": a.seed, "steps": a.steps,
            "chunks": a.chunks, "threads": a.threads}
    out = subprocess.run([sys.executable, __file__, "--worker", json.dumps(spec)],
                         capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    if out.returncode != 0:
        raise RuntimeError(f"configuration {label!r} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=6, help="steps per timed chunk")
    p.add_argument("--chunks", type=int, default=3, help="timed chunks per process")
    p.add_argument("--repeats", type=int, default=2, help="rounds over all configurations")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        print(json.dumps(worker(json.loads(a.worker))))
        return
    torch.set_num_threads(a.threads)
    peak32, peak16 = matmul_gflops(torch.float32), matmul_gflops(torch.bfloat16)
    images, texts = toy_batch(8, a.seed)
    flops = train_flops_per_image(images, texts)
    runs: dict[str, list[dict]] = {c[0]: [] for c in CONFIGS}
    for r in range(a.repeats):
        for config in CONFIGS:
            runs[config[0]].append(run_config(config, a))
            print(f"round {r + 1}: {config[0]:<66} {runs[config[0]][-1]['images_per_s']:7.1f} img/s",
                  flush=True)
    speed = {label: statistics.median(x["images_per_s"] for x in rs) for label, rs in runs.items()}
    rows = [{"name": "matmul 2048x2048 fp32", "metric": "peak", "value": peak32, "unit": "GFLOP/s"},
            {"name": "matmul 2048x2048 bf16", "metric": "peak", "value": peak16, "unit": "GFLOP/s"}]
    for label, precision, *_ in CONFIGS:
        peak = peak32 if precision == "fp32" else peak16
        rows += [{"name": label, "metric": "throughput", "value": speed[label], "unit": "images/s"},
                 {"name": label, "metric": f"share of {precision} matmul peak",
                  "value": 100 * speed[label] * flops / 1e9 / peak, "unit": "%"},
                 {"name": label, "metric": "first 2 steps (incl. compile)",
                  "value": statistics.median(x["warmup_s"] for x in runs[label]), "unit": "s"},
                 {"name": label, "metric": "peak RSS",
                  "value": max(x["peak_rss_mb"] for x in runs[label]), "unit": "MB"}]
    ratios = {f"{label} / fp32 reference": speed[label] / speed[REFERENCE]
              for label, *_ in CONFIGS[1:]}
    command = (f"python benchmarks/bench_train.py --steps {a.steps} --chunks {a.chunks} "
               f"--repeats {a.repeats} --batch-size {a.batch_size}")
    out = write_benchmark("train", rows, ratios, command,
                          extra={"train_gflop_per_image": flops / 1e9, "batch_size": a.batch_size,
                                 "seed": a.seed, "threads": a.threads, "fast_path": FAST,
                                 "runs": runs})
    print(f"matmul peak  fp32 {peak32:6.0f} GFLOP/s   bf16 {peak16:6.0f} GFLOP/s")
    for label, *_ in CONFIGS:
        print(f"{label:<66} {speed[label]:7.1f} img/s  {speed[label] / speed[REFERENCE]:5.2f}x")
    print(f"-> {out}")


if __name__ == "__main__":
    main()
