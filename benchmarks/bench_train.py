"""Toy-CLIP training speed: fp32 reference vs the bf16 fast path, against the matmul peak.

    .venv/bin/python benchmarks/bench_train.py [--steps 12] [--batch-size 256]

Prints a table and writes benchmarks/results/train.json (machine, date, numbers). A
benchmark, not a test: nothing here asserts a speed.
"""
from __future__ import annotations

import argparse
import time

import torch
from open_clip.loss import ClipLoss

from fgclip.models import create_clip
from fgclip.train.fast import contrastive_step, make_optimizer

from common import write_benchmark


def matmul_gflops(dtype: torch.dtype, n: int = 2048, reps: int = 10) -> float:
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * n**3 * reps / (time.perf_counter() - t0) / 1e9


def train_flops_per_image(model: torch.nn.Module, x: torch.Tensor, t: torch.Tensor) -> float:
    """Forward FLOPs counted by torch's FlopCounterMode, times 3 for forward + backward."""
    from torch.utils.flop_counter import FlopCounterMode
    with FlopCounterMode(display=False) as counter:
        model(x[:8], t[:8])
    return 3 * counter.get_total_flops() / 8


def images_per_second(precision: str, steps: int, batch: int, seed: int) -> float:
    torch.manual_seed(seed)
    clip = create_clip("toy-vit", pretrained=None)
    model = clip.model.train()
    opt = make_optimizer(model, 1e-4, 0.1, torch.device("cpu"))
    loss_fn = ClipLoss()
    x = torch.randn(batch, 3, 64, 64)
    t = torch.randint(1, 49406, (batch, 32))
    cpu = torch.device("cpu")
    contrastive_step(model, loss_fn, opt, x, t, cpu, precision)  # warm-up
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = contrastive_step(model, loss_fn, opt, x, t, cpu, precision)
    loss.item()  # wait for the last step before stopping the clock
    return steps * batch / (time.perf_counter() - t0)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    peak32, peak16 = matmul_gflops(torch.float32), matmul_gflops(torch.bfloat16)
    clip = create_clip("toy-vit", pretrained=None)
    flops = train_flops_per_image(clip.model, torch.randn(8, 3, 64, 64), torch.randint(1, 49406, (8, 32)))
    ref = images_per_second("fp32", a.steps, a.batch_size, a.seed)
    fast = images_per_second("bf16", a.steps, a.batch_size, a.seed)
    rows = [
        {"name": "matmul 2048x2048 fp32", "metric": "peak", "value": peak32, "unit": "GFLOP/s"},
        {"name": "matmul 2048x2048 bf16", "metric": "peak", "value": peak16, "unit": "GFLOP/s"},
        {"name": "toy-CLIP train fp32 reference", "metric": "throughput", "value": ref, "unit": "images/s"},
        {"name": "toy-CLIP train bf16 fast path", "metric": "throughput", "value": fast, "unit": "images/s"},
        {"name": "toy-CLIP train fp32 reference", "metric": "share of fp32 peak",
         "value": 100 * ref * flops / 1e9 / peak32, "unit": "%"},
        {"name": "toy-CLIP train bf16 fast path", "metric": "share of bf16 peak",
         "value": 100 * fast * flops / 1e9 / peak16, "unit": "%"},
    ]
    out = write_benchmark("train", rows, {"fast path / fp32 reference": fast / ref},
                          f"python benchmarks/bench_train.py --steps {a.steps} --batch-size {a.batch_size}",
                          extra={"train_gflop_per_image": flops / 1e9, "batch_size": a.batch_size,
                                 "steps": a.steps, "seed": a.seed})
    print(f"matmul peak        fp32 {peak32:8.0f} GFLOP/s   bf16 {peak16:8.0f} GFLOP/s")
    print(f"toy-CLIP train     fp32 {ref:8.0f} img/s       bf16 {fast:8.0f} img/s   ratio {fast / ref:.2f}x")
    print(f"-> {out}")


if __name__ == "__main__":
    main()
