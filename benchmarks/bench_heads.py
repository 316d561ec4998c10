"""The chapters' head-training loops, fp32 against ``precision='auto'``: does the default pay there?

    .venv/bin/python benchmarks/bench_heads.py [--images 600] [--epochs 2] [--repeats 3] [--with-bf16]

Chapters 1, 3 and 4 train small heads on frozen features computed once; each loop takes a
``precision`` field (``"auto"``, ``"fp32"`` or ``"bf16"``) and uses fused AdamW. This
script builds each chapter's features with the default toy CLIP (random weights: speed
does not depend on them) at the chapter's default batch size, then trains the head
``--epochs`` epochs in fp32 and in auto (bf16 where the CPU has avx512_bf16/AMX, else fp32:
then the two arms run the same code and their ratio shows the noise), ``--repeats`` times,
alternating. ``--with-bf16`` adds forced bf16 where auto chose fp32 (emulated: slow).
Reports steps/s (median), the ratio to fp32 and the final-epoch loss of each, which must
agree. Writes ``benchmarks/results/heads.json``, with what auto chose.
A benchmark, not a test: nothing here asserts a speed.
"""
from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time
from typing import Callable

import numpy as np
import torch

from common import write_benchmark
from fgclip.evaluation import encode_texts
from fgclip.models import create_clip
from fgclip.precision import resolve_precision
from fgclip.toyworld import SHAPES, ToyWorldConfig, generate


def maximage_loop(images: np.ndarray, captions: list[list[str]], seed: int) -> tuple[Callable, int]:
    """Chapter 1: MaxImage heads, N-Pair loss, batch 64, one caption per image."""
    from fgclip.studies.maximage.data import image_features, word_features
    from fgclip.studies.maximage.heads import TrainConfig, train_heads

    clip = create_clip("toy-vit", pretrained=None)
    img = image_features(clip, images)  # (N, D, h, w)
    words, mask = word_features(clip, captions)  # (N, L, Dt), (N, L)
    owner = list(range(len(images)))

    def run(precision: str, epochs: int) -> float:
        cfg = TrainConfig(epochs=epochs, batch_size=64, seed=seed, precision=precision)
        return train_heads(img, words, mask, owner, cfg)[1][-1]["loss"]
    return run, epochs_steps(len(images), 64)


def sumclip_loop(images: np.ndarray, labels: list[list[int]], seed: int) -> tuple[Callable, int]:
    """Chapter 3: SUM-CLIP head (10 queries, 1 decoder layer), set losses, batch 128."""
    from fgclip.methods.sumclip import SumClipHead
    from fgclip.studies.for_retrieval.head import HeadTrainConfig, encode_frozen, train_head

    clip = create_clip("toy-rn", pretrained=None)
    memory = encode_frozen(clip, images).memory
    names = list(SHAPES)
    text = encode_texts(clip, [f"a {n}" for n in names]).cpu()  # (C, D)
    targets = [torch.tensor(sorted(set(t)), dtype=torch.long) for t in labels]
    scale = float(clip.model.logit_scale.detach().exp())

    def run(precision: str, epochs: int) -> float:
        torch.manual_seed(seed)
        head = SumClipHead(clip.model.visual.attnpool, 10, 1, 128)
        cfg = HeadTrainConfig(epochs=epochs, batch_size=128, seed=seed, precision=precision)
        return train_head(head, memory, targets, targets, text, text, scale, cfg)[-1]["loss"]
    return run, epochs_steps(len(images), 128)


def decoupling_loop(images: np.ndarray, labels: list[list[int]], seed: int) -> tuple[Callable, int]:
    """Chapter 4: semantic decoupling + CoOp prompts ("full"), P-ASL, batch 128."""
    from fgclip.models import encode_image_dense, images_to_tensor
    from fgclip.studies.decoupling.heads import FitConfig, fit, make_head

    clip = create_clip("toy-rn", pretrained=None)
    with torch.no_grad():
        out = encode_image_dense(clip.model, images_to_tensor(torch.from_numpy(images), clip))
    dense, pooled = out.dense.float(), out.pooled.float()  # (N, D, h, w), (N, D)
    names = list(SHAPES)
    words = encode_texts(clip, names).cpu()  # (C, D) word vectors x_c
    targets = np.zeros((len(images), len(names)), dtype=np.int64)
    for i, t in enumerate(labels):
        targets[i, t] = 1

    def run(precision: str, epochs: int) -> float:
        head = make_head("full", clip.model, clip.tokenizer, names, words, "a", 0.07, 32, seed=seed)
        cfg = FitConfig(epochs=epochs, batch_size=128, lr=0.01, seed=seed, precision=precision)
        return fit(head, dense, pooled, targets, cfg)[-1]["loss"]
    return run, epochs_steps(len(images), 128)


def epochs_steps(n: int, batch: int) -> int:
    return -(-n // batch)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--images", type=int, default=600)
    p.add_argument("--epochs", type=int, default=2, help="epochs per timed run")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--with-bf16", action="store_true", help="also force bf16 where auto chose fp32 (slow)")
    a = p.parse_args()
    auto, _ = resolve_precision("auto", "cpu")
    precisions = ["fp32", "auto"] + (["bf16"] if a.with_bf16 and auto == "fp32" else [])
    name = {"fp32": "fp32", "auto": f"auto -> {auto}", "bf16": "bf16 (forced)"}
    torch.set_num_threads(a.threads)
    scenes = generate(ToyWorldConfig(), a.images, seed=a.seed, split="train")
    images = np.stack([s.image for s in scenes])
    names = list(SHAPES)
    labels = [sorted({names.index(o.category) for o in s.objects}) for s in scenes]
    loops = {"ch1 MaxImage heads": maximage_loop(images, [s.captions[0].text.split() for s in scenes], a.seed),
             "ch3 SUM-CLIP head": sumclip_loop(images, labels, a.seed),
             "ch4 decoupling + prompts": decoupling_loop(images, labels, a.seed)}
    rows, ratios = [], {}
    for label, (run, steps_per_epoch) in loops.items():
        for precision in precisions:
            run(precision, 1)  # warm-up
        speed: dict[str, list[float]] = {q: [] for q in precisions}
        final: dict[str, float] = {}
        for _ in range(a.repeats):
            for precision in precisions:
                t0 = time.perf_counter()
                final[precision] = run(precision, a.epochs)
                speed[precision].append(a.epochs * steps_per_epoch / (time.perf_counter() - t0))
        for precision in precisions:
            rows += [{"name": f"{label}, {name[precision]}", "metric": "training", "unit": "steps/s",
                      "value": statistics.median(speed[precision])},
                     {"name": f"{label}, {name[precision]}", "metric": f"loss after {a.epochs} epochs",
                      "unit": "", "value": final[precision]}]
            if precision != "fp32":
                ratios[f"{label}: {name[precision]} / fp32 steps/s"] = (statistics.median(speed[precision])
                                                                       / statistics.median(speed["fp32"]))
        print(f"{label:<26} " + "  ".join(f"{name[q]} {statistics.median(speed[q]):7.1f} steps/s (loss {final[q]:.4f})"
                                          for q in precisions), flush=True)
    out = write_benchmark("heads", rows, ratios, "python " + shlex.join(sys.argv),
                          extra={"images": a.images, "epochs": a.epochs, "seed": a.seed, "arms": name})
    print(f"-> {out}")


if __name__ == "__main__":
    main()
