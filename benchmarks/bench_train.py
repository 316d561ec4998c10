"""Toy-CLIP training speed: fp32 reference vs the bf16 fast path, against the matmul peak.

    .venv/bin/python benchmarks/bench_train.py [--steps 12] [--batch-size 256]

Prints a table and writes benchmarks/results.json (machine, date, numbers). A benchmark,
not a test: nothing here asserts a speed.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import resource
import time
from pathlib import Path

import torch
from open_clip.loss import ClipLoss

from fgclip.models import create_clip
from fgclip.train.fast import contrastive_step, make_optimizer

OUT = Path(__file__).with_name("results.json")


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
    rows = {
        "matmul_peak_gflops": {"fp32": peak32, "bf16": peak16},
        "toy_clip_train": {
            "images_per_s": {"fp32_reference": ref, "bf16_fast": fast},
            "speedup_fast_over_reference": fast / ref,
            "achieved_gflops": {"fp32_reference": ref * flops / 1e9, "bf16_fast": fast * flops / 1e9},
            "share_of_peak": {"fp32_reference": ref * flops / 1e9 / peak32,
                              "bf16_fast": fast * flops / 1e9 / peak16},
            "train_gflop_per_image": flops / 1e9, "batch_size": a.batch_size, "steps": a.steps,
        },
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "machine": f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads",
        "date": dt.date.today().isoformat(), "torch": torch.__version__, "seed": a.seed,
    }
    tmp = OUT.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(rows, indent=2))
    tmp.replace(OUT)
    tr = rows["toy_clip_train"]
    print(f"matmul peak        fp32 {peak32:8.0f} GFLOP/s   bf16 {peak16:8.0f} GFLOP/s")
    print(f"toy-CLIP train     fp32 {ref:8.0f} img/s       bf16 {fast:8.0f} img/s   ratio {fast / ref:.2f}x")
    print(f"share of peak      fp32 {tr['share_of_peak']['fp32_reference']:8.1%}             "
          f"bf16 {tr['share_of_peak']['bf16_fast']:8.1%}")
    print(f"peak RSS {rows['peak_rss_mib']:.0f} MiB -> {OUT}")


if __name__ == "__main__":
    main()
