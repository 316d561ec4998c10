"""CLIP4DM vs leave-one-word-out: pairs per second on the same model and the same batch.

    .venv/bin/python benchmarks/bench_clip4dm.py [--model toy-vit] [--pretrained toy]
        [--pairs 128] [--repeats 3] [--device cpu]

CLIP4DM needs one forward and one backward pass per pair; the ablation baseline needs one
text forward pass per word plus one for the full caption. Both score the same toy FOIL
captions against the same images, after one warm-up call each; the best of ``--repeats``
timings is kept. Each method's floating-point work is counted once with torch's
``FlopCounterMode`` (matrix products and attention, forward and backward), so the result
also holds the speed ratio the FLOPs allow (leave-one-word-out's FLOPs over CLIP4DM's) and
the GFLOP/s each method reaches: a CLIP4DM ratio below the FLOP ratio is overhead (attention
capture, the backward pass's memory traffic), not work. Writes
benchmarks/results/clip4dm.json. A benchmark: it asserts nothing.
"""
from __future__ import annotations

import argparse
import sys
import numpy as np
import torch

from common import machine, peak_rss_mb, write_benchmark
from fgclip.methods.clip4dm import AttributionConfig
from fgclip.models import create_clip, images_to_tensor
from fgclip.studies.clip4dm.speed import pairs_per_second
from fgclip.toyworld import ToyWorldConfig, generate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="toy-vit")
    ap.add_argument("--pretrained", default="toy")
    ap.add_argument("--pairs", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    clip = create_clip(args.model, pretrained=args.pretrained, device=args.device)
    scenes = generate(ToyWorldConfig(), args.pairs, seed=args.seed, split="test")
    pairs = [(s, f) for s in scenes for f in s.foils][:args.pairs]
    images = images_to_tensor(torch.from_numpy(np.stack([s.image for s, _ in pairs])), clip)
    captions = [f.text for _, f in pairs]
    n_words = float(np.mean([len(c.split()) for c in captions]))
    cfg = AttributionConfig(layers=(-2, -1))
    measured = pairs_per_second(clip, images, captions, cfg, device=args.device, repeats=args.repeats)
    rates, work = measured["pairs/s"], measured["GFLOP/pair"]
    ratio = rates["CLIP4DM"] / rates["leave-one-word-out"]
    flop_ratio = work["leave-one-word-out"] / work["CLIP4DM"]
    rows = [{"name": k, "metric": "throughput", "value": v, "unit": "pairs/s"} for k, v in rates.items()]
    rows += [{"name": k, "metric": "work", "value": v, "unit": "GFLOP/pair"} for k, v in work.items()]
    rows += [{"name": k, "metric": "achieved", "value": v, "unit": "GFLOP/s"}
             for k, v in measured["GFLOP/s"].items()]
    path = write_benchmark("clip4dm", rows, {"CLIP4DM / leave-one-word-out": ratio,
                                             "FLOP ratio (leave-one-word-out / CLIP4DM work)": flop_ratio},
                           " ".join([sys.executable.split("/")[-1]] + sys.argv),
                           extra={"model": args.model, "pairs": len(captions),
                                  "mean_words_per_caption": n_words, "seed": args.seed})
    print(f"{machine()}\n" + "\n".join(f"{k:>20}: {v:8.1f} pairs/s" for k, v in rates.items()) +
          f"\n{'ratio':>20}: {ratio:8.2f}  (the FLOPs allow {flop_ratio:.2f}: "
          + ", ".join(f"{k} {work[k]:.3f} GFLOP/pair at {work[k] * rates[k]:.1f} GFLOP/s" for k in rates)
          + f")\n{'':>20}  ({len(captions)} pairs, {n_words:.1f} words each, "
          f"peak RSS {peak_rss_mb():.0f} MB)\nwrote {path}")


if __name__ == "__main__":
    main()
