"""Toy-CLIP training speed: the default path and each piece of it against the fp32 reference.

    .venv/bin/python benchmarks/bench_train.py [--steps 2] [--rounds 4] [--batch-size 256] [--with-bf16]

The arms: the fp32 reference (open_clip as is), the pieces added one at a time in the
precision that ``precision='auto'`` chooses on this machine (bf16 where the CPU has
``avx512_bf16``/AMX, fp32 elsewhere: :func:`fgclip.precision.resolve_precision`), and the
default pretraining command itself (``PretrainConfig()``'s precision, attention, compile and
allocator). On a CPU without native bf16 the bf16 arms are left out, since emulated bf16
runs about 57x slower; ``--with-bf16`` adds them anyway (keep ``--steps 1`` then).

Each arm lives in its own process (the allocator setting is process-wide, compiled code
must not leak), all started and warmed up first and then kept alive; the parent then runs
``--rounds`` rounds, and in each round every arm times one chunk of ``--steps`` steps in
turn (the order rotates each round), so a busy minute on a shared machine hits every arm
alike. An arm's speed is its median over rounds; its ratio to the reference is the median
over rounds of the ratio within a round. The matmul peak is measured in the same run.
Writes ``benchmarks/results/train.json`` with the CPU's capability and what auto chose.
A benchmark, not a test: nothing here asserts a speed.
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

from common import peak_rss_mb, precision_record, write_benchmark

REFERENCE = "fp32 reference (open_clip as is)"


def arms(auto_choice: str, with_bf16: bool, skip_compile: bool = False) -> list[tuple[str, str, str, bool, bool]]:
    """(label, precision, attention, compile, keep freed memory) of every arm: the reference,
    the pieces one by one in the precision auto chose (and in bf16 if ``with_bf16``), the default."""
    from fgclip.train import PretrainConfig
    d = PretrainConfig()
    out = [(REFERENCE, "fp32", "sdpa", False, False)]
    ladders = (["fp32"] if auto_choice == "fp32" else []) + (["bf16"] if auto_choice == "bf16" or with_bf16 else [])
    for p in ladders:  # each row adds one piece
        out += [(f"{p} + explicit attention", p, "explicit", False, False),
                (f"{p} + explicit attention + allocator", p, "explicit", False, True),
                (f"{p} + explicit attention + allocator + torch.compile", p, "explicit", True, True)]
        if p == "bf16":
            out.insert(-3, ("bf16 autocast", "bf16", "sdpa", False, False))
    if skip_compile:
        out = [c for c in out if not c[3]]
    pieces = [d.attention + " attention"] + (["allocator"] if d.keep_freed_memory else []) + \
        (["torch.compile"] if d.compile else [])
    out.append((f"default path: precision {d.precision} -> {auto_choice}, {', '.join(pieces)}",
                d.precision, d.attention, d.compile, d.keep_freed_memory))
    return out


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


def worker(spec: dict) -> None:
    """One arm, kept alive: warm up, then time ``steps`` steps per line "run" read from stdin."""
    from open_clip.loss import ClipLoss

    from fgclip.models import create_clip
    from fgclip.precision import resolve_precision
    from fgclip.train.fast import contrastive_step, keep_freed_memory, make_optimizer, prepare_model

    torch.set_num_threads(spec["threads"])
    if spec["allocator"] and not keep_freed_memory():
        raise RuntimeError("keep_freed_memory() is not available on this libc")
    cpu = torch.device("cpu")
    precision, _ = resolve_precision(spec["precision"], cpu)  # what the pretraining loop does
    images, texts = toy_batch(spec["batch"], spec["seed"])
    torch.manual_seed(spec["seed"])
    model = create_clip("toy-vit", pretrained=None).model.train()
    step_model = prepare_model(model, spec["attention"], spec["compile"])
    opt = make_optimizer(model, 1e-4, 0.1, cpu)
    loss_fn = ClipLoss()

    def steps(n: int) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            loss = contrastive_step(step_model, loss_fn, opt, images, texts, cpu, precision)
        loss.item()  # wait for the last step before stopping the clock
        return time.perf_counter() - t0

    print(json.dumps({"warmup_s": steps(2), "precision": precision}), flush=True)  # incl. compile
    for line in sys.stdin:
        if line.strip() != "run":
            break
        print(json.dumps({"seconds": steps(spec["steps"])}), flush=True)
    print(json.dumps({"peak_rss_mb": peak_rss_mb()}), flush=True)


class Arm:
    """A worker process for one arm, driven line by line."""

    def __init__(self, config: tuple, a: argparse.Namespace):
        self.label, precision, attention, compile_model, allocator = config
        spec = {"precision": precision, "attention": attention, "compile": compile_model,
                "allocator": allocator, "batch": a.batch_size, "seed": a.seed, "steps": a.steps,
                "threads": a.threads}
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker", json.dumps(spec)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     cwd=Path(__file__).resolve().parents[1])
        self.start = self._read()

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            self.proc.kill()
            raise RuntimeError(f"arm {self.label!r} failed (exit {self.proc.wait()}); its stderr is above")
        return json.loads(line)

    def run(self) -> float:
        self.proc.stdin.write("run\n")
        self.proc.stdin.flush()
        return self._read()["seconds"]

    def close(self) -> float:
        self.proc.stdin.write("stop\n")
        self.proc.stdin.flush()
        rss = self._read()["peak_rss_mb"]
        self.proc.wait()
        return rss


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=2, help="steps per timed chunk")
    p.add_argument("--rounds", type=int, default=4, help="rounds; each arm times one chunk per round")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--with-bf16", action="store_true",
                   help="measure the bf16 arms even where bf16 is not native (slow: use --steps 1)")
    p.add_argument("--skip-compile", action="store_true",
                   help="leave out the torch.compile arm (its compilation takes minutes on a busy 2-core CPU)")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        worker(json.loads(a.worker))
        return
    torch.set_num_threads(a.threads)
    record = precision_record()
    native = record["auto"]["chosen"] == "bf16"
    peak32 = matmul_gflops(torch.float32)
    n16 = 2048 if native else 512  # emulated bf16: one 2048 product would take ~20 s
    peak16 = matmul_gflops(torch.bfloat16, n=n16, reps=10 if native else 2)
    images, texts = toy_batch(8, a.seed)
    flops = train_flops_per_image(images, texts)
    configs = arms(record["auto"]["chosen"], a.with_bf16, a.skip_compile)
    live = []
    try:
        for config in configs:  # started one after another, so warm-ups do not overlap
            live.append(Arm(config, a))
            print(f"ready: {config[0]} (first 2 steps {live[-1].start['warmup_s']:.1f} s)", flush=True)
        seconds: dict[str, list[float]] = {arm.label: [] for arm in live}
        for r in range(a.rounds):
            order = live[r % len(live):] + live[:r % len(live)]  # rotate who goes first
            for arm in order:
                seconds[arm.label].append(arm.run())
            print(f"round {r + 1}: " + "  ".join(f"{a.batch_size * a.steps / seconds[x.label][-1]:.1f}"
                                                  for x in live) + " img/s", flush=True)
        rss = {arm.label: arm.close() for arm in live}
    finally:
        for arm in live:
            if arm.proc.poll() is None:
                arm.proc.kill()
    ips = {k: [a.batch_size * a.steps / s for s in v] for k, v in seconds.items()}
    speed = {k: statistics.median(v) for k, v in ips.items()}
    ratio = {k: statistics.median(x / y for x, y in zip(v, ips[REFERENCE])) for k, v in ips.items()}
    rows = [{"name": "matmul 2048x2048 fp32", "metric": "peak", "value": peak32, "unit": "GFLOP/s"},
            {"name": f"matmul {n16}x{n16} bf16", "metric": "peak", "value": peak16, "unit": "GFLOP/s"}]
    for (label, *_), arm in zip(configs, live):
        chosen = arm.start["precision"]
        peak = peak32 if chosen == "fp32" else peak16
        rows += [{"name": label, "metric": "throughput", "value": speed[label], "unit": "images/s"},
                 {"name": label, "metric": f"share of {chosen} matmul peak",
                  "value": 100 * speed[label] * flops / 1e9 / peak, "unit": "%"},
                 {"name": label, "metric": "first 2 steps (incl. compile)", "value": arm.start["warmup_s"],
                  "unit": "s"},
                 {"name": label, "metric": "peak RSS", "value": rss[label], "unit": "MB"}]
    ratios = {f"{label} / fp32 reference": ratio[label] for label, *_ in configs[1:]}
    default = configs[-1][0]
    command = (f"python benchmarks/bench_train.py --steps {a.steps} --rounds {a.rounds} "
               f"--batch-size {a.batch_size}" + (" --with-bf16" if a.with_bf16 else "")
               + (" --skip-compile" if a.skip_compile else ""))
    out = write_benchmark("train", rows, ratios, command,
                          extra={"train_gflop_per_image": flops / 1e9, "batch_size": a.batch_size,
                                 "seed": a.seed, "threads": a.threads, "default_path": default,
                                 "arms": {c[0]: dict(zip(("precision", "attention", "compile", "allocator"),
                                                         c[1:])) for c in configs},
                                 "images_per_s_per_round": ips})
    print(f"{record['auto']['reason']}")
    print(f"matmul peak  fp32 {peak32:6.0f} GFLOP/s   bf16 {peak16:6.1f} GFLOP/s")
    for label, *_ in configs:
        print(f"{label:<72} {speed[label]:7.1f} img/s  {ratio[label]:5.2f}x the reference")
    r = ratio[default]
    print(f"the default path runs at {r:.2f}x the fp32 reference's speed "
          f"({'faster' if r > 1 else 'slower' if r < 1 else 'the same'}) -> {out}")


if __name__ == "__main__":
    main()
