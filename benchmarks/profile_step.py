"""Where a toy-CLIP training step spends its time: torch.profiler over a few steps.

    .venv/bin/python benchmarks/profile_step.py [--precision auto] [--attention explicit]

Prints the operators with the most self time, the share of the step spent in matrix
products (aten::mm, addmm, bmm) and the speed those products reach, against the matmul
peak measured in the same run: if the products already run near the peak, the step can get
little faster than its matrix products allow. A diagnostic, not part of ``run_all.py``.
"""
from __future__ import annotations

import argparse
import time

import torch
from torch.profiler import ProfilerActivity, profile

from bench_train import matmul_gflops, toy_batch, train_flops_per_image

MATMULS = ("aten::mm", "aten::addmm", "aten::bmm")


def main() -> None:
    from open_clip.loss import ClipLoss

    from fgclip.models import create_clip
    from fgclip.precision import PRECISIONS, resolve_precision
    from fgclip.train.fast import (ATTENTION_IMPLS, contrastive_step, keep_freed_memory, make_optimizer,
                                   prepare_model)

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--precision", default="auto", choices=PRECISIONS)
    p.add_argument("--attention", default="explicit", choices=ATTENTION_IMPLS)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    keep_freed_memory()
    images, texts = toy_batch(a.batch_size, a.seed)
    torch.manual_seed(a.seed)
    model = create_clip("toy-vit", pretrained=None).model.train()
    step_model = prepare_model(model, a.attention, compile_model=False)
    opt = make_optimizer(model, 1e-4, 0.1, torch.device("cpu"))
    loss_fn, cpu = ClipLoss(), torch.device("cpu")
    for _ in range(2):  # warm-up
        contrastive_step(step_model, loss_fn, opt, images, texts, cpu, a.precision).item()
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(a.steps):
            contrastive_step(step_model, loss_fn, opt, images, texts, cpu, a.precision).item()
    wall = time.perf_counter() - t0  # includes the profiler's own overhead
    events = prof.key_averages()
    print(events.table(sort_by="self_cpu_time_total", row_limit=15))
    total = sum(e.self_cpu_time_total for e in events)  # microseconds
    matmul = sum(e.self_cpu_time_total for e in events if e.key in MATMULS)
    flops = train_flops_per_image(images, texts) * a.batch_size * a.steps
    chosen, _ = resolve_precision(a.precision, cpu)
    peak = matmul_gflops(torch.float32 if chosen == "fp32" else torch.bfloat16)
    achieved = flops / (matmul * 1e-6) / 1e9
    print(f"{a.precision}, {a.attention} attention, batch {a.batch_size}: "
          f"{a.batch_size * a.steps / wall:.1f} images/s under the profiler")
    print(f"matrix products: {100 * matmul / total:.0f}% of the step's self time, "
          f"{achieved:.0f} GFLOP/s = {100 * achieved / peak:.0f}% of the {peak:.0f} GFLOP/s matmul peak")


if __name__ == "__main__":
    main()
