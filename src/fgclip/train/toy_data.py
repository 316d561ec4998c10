"""A pre-rendered tensor cache of toy scenes and their tokenized captions.

Rendering and BPE tokenization happen once, off the training hot path; the cache is
keyed by everything that determines it and written atomically.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from ..toyworld import Scene, ToyWorldConfig, generate
from .checkpoint import load_checkpoint, save_atomic


@dataclass
class CaptionedImages:
    images: torch.Tensor  # (N, H, W, 3) uint8
    tokens: torch.Tensor  # (N, K, L) long: K captions per image, L = context length
    kinds: tuple[str, ...]  # the caption kind of each of the K slots
    text_ids: torch.Tensor  # (N, K) long: equal ids <=> the same caption text (false negatives)

    def __len__(self) -> int:
        return self.images.shape[0]


def tokenize_scenes(scenes: list[Scene], tokenizer: Callable) -> tuple[torch.Tensor, tuple[str, ...], torch.Tensor]:
    """(N, K, L) tokens for the K captions of every scene (all scenes share the K kinds), the
    kinds, and (N, K) text ids: two captions share an id exactly when they read the same."""
    kinds = tuple(c.kind for c in scenes[0].captions)
    texts = [c.text for s in scenes for c in s.captions]
    unique = sorted(set(texts))
    table = tokenizer(unique)  # (U, L): the grammar repeats itself, so tokenize each text once
    where = {t: i for i, t in enumerate(unique)}
    rows = torch.tensor([where[t] for t in texts])
    return table[rows].view(len(scenes), len(kinds), -1), kinds, rows.view(len(scenes), len(kinds))


def render_scenes(world: ToyWorldConfig, n: int, seed: int, split: str, workers: int = 1) -> list[Scene]:
    """Scenes 0..n-1 of ``split``, rendered by ``workers`` processes in contiguous chunks
    (every scene has its own RNG stream, so the result does not depend on ``workers``)."""
    if workers <= 1 or n < 2 * workers:
        return generate(world, n, seed=seed, split=split)
    from concurrent.futures import ProcessPoolExecutor

    starts = np.linspace(0, n, workers + 1).astype(int)
    with ProcessPoolExecutor(workers) as pool:
        parts = pool.map(_render_chunk, [(world, int(b - a), seed, split, int(a)) for a, b in zip(starts, starts[1:])])
        return [scene for part in parts for scene in part]


def _render_chunk(args: tuple) -> list[Scene]:
    world, n, seed, split, start = args
    return generate(world, n, seed=seed, split=split, start=start)


def build_caption_cache(world: ToyWorldConfig, n: int, seed: int, split: str,
                        tokenizer: Callable, cache_dir: str | Path | None = None,
                        workers: int = 1) -> CaptionedImages:
    """Render ``n`` scenes of ``split`` (with ``workers`` processes) and tokenize their
    captions; reuse a cached copy."""
    key = json.dumps({"world": world.to_dict(), "n": n, "seed": seed, "split": split, "format": 2,
                      "tok": tokenizer(["a red circle"]).tolist()}, sort_keys=True)
    path = None
    if cache_dir is not None:
        digest = hashlib.sha1(key.encode()).hexdigest()[:16]
        path = Path(cache_dir) / f"toy_{split}_{n}_{digest}.pt"
        if path.is_file():
            blob = load_checkpoint(path)
            return CaptionedImages(blob["images"], blob["tokens"], tuple(blob["kinds"]), blob["text_ids"])
    scenes = render_scenes(world, n, seed, split, workers)
    images = torch.from_numpy(np.stack([s.image for s in scenes]))
    tokens, kinds, text_ids = tokenize_scenes(scenes, tokenizer)
    data = CaptionedImages(images, tokens, kinds, text_ids)
    if path is not None:
        save_atomic({"images": images, "tokens": tokens, "kinds": list(kinds), "text_ids": text_ids}, path)
    return data
