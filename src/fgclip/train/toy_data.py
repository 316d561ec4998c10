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

    def __len__(self) -> int:
        return self.images.shape[0]


def tokenize_scenes(scenes: list[Scene], tokenizer: Callable) -> tuple[torch.Tensor, tuple[str, ...]]:
    """(N, K, L) tokens for the K captions of every scene (all scenes share the K kinds)."""
    kinds = tuple(c.kind for c in scenes[0].captions)
    texts = [c.text for s in scenes for c in s.captions]
    unique = sorted(set(texts))
    table = tokenizer(unique)  # (U, L): the grammar repeats itself, so tokenize each text once
    where = {t: i for i, t in enumerate(unique)}
    rows = torch.tensor([where[t] for t in texts])
    return table[rows].view(len(scenes), len(kinds), -1), kinds


def build_caption_cache(world: ToyWorldConfig, n: int, seed: int, split: str,
                        tokenizer: Callable, cache_dir: str | Path | None = None) -> CaptionedImages:
    """Render ``n`` scenes of ``split`` and tokenize their captions; reuse a cached copy."""
    key = json.dumps({"world": world.to_dict(), "n": n, "seed": seed, "split": split,
                      "tok": tokenizer(["a red circle"]).tolist()}, sort_keys=True)
    path = None
    if cache_dir is not None:
        digest = hashlib.sha1(key.encode()).hexdigest()[:16]
        path = Path(cache_dir) / f"toy_{split}_{n}_{digest}.pt"
        if path.is_file():
            blob = load_checkpoint(path)
            return CaptionedImages(blob["images"], blob["tokens"], tuple(blob["kinds"]))
    scenes = generate(world, n, seed=seed, split=split)
    images = torch.from_numpy(np.stack([s.image for s in scenes]))
    tokens, kinds = tokenize_scenes(scenes, tokenizer)
    data = CaptionedImages(images, tokens, kinds)
    if path is not None:
        save_atomic({"images": images, "tokens": tokens, "kinds": list(kinds)}, path)
    return data
