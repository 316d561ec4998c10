"""Zero-shot evaluation of a CLIP on held-out toy scenes: retrieval and classification."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from .metrics import accuracy, recall_at_k
from .metrics.multilabel import mean_average_precision
from .metrics.object_retrieval import per_category_ap
from .models import Clip, encode_image_rows
from .toyworld import Scene, ToyWorldConfig, generate
from .precision import autocast_context


def encode_images(clip: Clip, images: np.ndarray | torch.Tensor, batch_size: int = 256,
                  precision: str = "fp32") -> torch.Tensor:
    """-> L2-normalised (N, D) image embeddings, from uint8 (N, H, W, 3) square images or
    from model inputs (N, 3, S, S) already transformed (real photos, ``load_image_batch``)."""
    device = next(clip.model.parameters()).device

    def pooled(x: torch.Tensor) -> dict[str, torch.Tensor]:
        with autocast_context(device, precision):
            return {"f": clip.model.encode_image(x, normalize=True).float()}
    return encode_image_rows(clip, images, pooled, batch_size)["f"]


@torch.no_grad()
def encode_texts(clip: Clip, texts: list[str], batch_size: int = 512,
                 precision: str = "fp32") -> torch.Tensor:
    """list of N strings -> L2-normalised (N, D) text embeddings."""
    device = next(clip.model.parameters()).device
    out = []
    for i in range(0, len(texts), batch_size):
        tokens = clip.tokenizer(texts[i:i + batch_size]).to(device)
        with autocast_context(device, precision):
            out.append(clip.model.encode_text(tokens, normalize=True).float())
    return torch.cat(out)


def caption_retrieval(clip: Clip, scenes: list[Scene], precision: str = "fp32",
                      image_features: torch.Tensor | None = None) -> dict[str, float]:
    """Image->text and text->image R@1/5/10 with each scene's full caption (caption 0)."""
    return pair_retrieval(clip, np.stack([s.image for s in scenes]),
                          [s.captions[0].text for s in scenes], precision, image_features)


def pair_retrieval(clip: Clip, images: np.ndarray | torch.Tensor, texts: list[str],
                   precision: str = "fp32", image_features: torch.Tensor | None = None) -> dict[str, float]:
    """R@1/5/10 both ways for aligned (image i, text i) pairs; images as for :func:`encode_images`
    (``image_features``: their embeddings, already computed by it, to skip encoding them again).

    A caption counts as relevant to every image whose caption is the same string,
    so identical captions of different images are not scored as misses.
    """
    img = (encode_images(clip, images, precision=precision) if image_features is None else image_features).cpu()
    txt = encode_texts(clip, texts, precision=precision).cpu()
    sim = img @ txt.T  # (N images, N captions)
    codes = {t: i for i, t in enumerate(sorted(set(texts)))}
    ids = torch.tensor([codes[t] for t in texts])
    relevant = ids[:, None] == ids[None, :]
    i2t, t2i = recall_at_k(sim, relevant), recall_at_k(sim.T, relevant.T)
    return {**{f"i2t_R@{k}": v for k, v in i2t.items()}, **{f"t2i_R@{k}": v for k, v in t2i.items()}}


def shape_classification(clip: Clip, scenes: list[Scene], categories: tuple[str, ...],
                         template: str = "a {}", precision: str = "fp32") -> float:
    """Zero-shot accuracy: argmax_c <f(image), g(template(c))> on single-object scenes."""
    if any(len(s.objects) != 1 for s in scenes):
        raise ValueError("shape_classification needs single-object scenes")
    img = encode_images(clip, np.stack([s.image for s in scenes]), precision=precision).cpu()
    txt = encode_texts(clip, [template.format(c) for c in categories], precision=precision).cpu()
    targets = torch.tensor([categories.index(s.objects[0].category) for s in scenes])
    return accuracy(img @ txt.T, targets)


def category_zero_shot(clip: Clip, scenes: list[Scene], categories: tuple[str, ...], template: str = "a {}",
                       precision: str = "fp32", image_features: torch.Tensor | None = None) -> dict[str, float]:
    """Zero-shot recognition of every drawn category from the global embedding alone.

    s_{n,c} = <f(I_n), g(template(c))>. Multi-label mAP ranks images per category and
    averages AP over categories (chapter 4's task); retrieval AP@50 ranks the images as a
    gallery for the query c and normalises by min(50, R_c) (chapter 3's task, CLIP global).
    """
    if image_features is None:  # the scenes' embeddings (N, D), unless the caller already has them
        image_features = encode_images(clip, np.stack([s.image for s in scenes]), precision=precision)
    img = image_features.cpu()  # (N, D)
    txt = encode_texts(clip, [template.format(c) for c in categories], precision=precision).cpu()  # (C, D)
    targets = torch.tensor([[c in s.labels for c in categories] for s in scenes], dtype=torch.long)  # (N, C)
    has_pos = targets.sum(0) > 0
    scores = img @ txt.T  # (N, C)
    ap50 = per_category_ap(txt[has_pos], img[:, None], targets.T[has_pos].bool())["AP@50 min(50,R)"]
    return {"zero_shot_multilabel_mAP": mean_average_precision(scores[:, has_pos], targets[:, has_pos]),
            "zero_shot_retrieval_AP@50": float(ap50.mean())}


def retrieval_metrics(clip: Clip, world: ToyWorldConfig, n: int, seed: int, split: str = "test",
                      precision: str = "fp32") -> dict[str, float]:
    """The toy CLIP's headline numbers on ``n`` held-out scenes of ``split``: caption
    retrieval and zero-shot category recognition on scenes of 1..max objects, zero-shot
    shape accuracy on ``n`` one-object scenes (seed + 1)."""
    scenes = generate(world, n, seed=seed, split=split)
    single = generate(replace(world, min_objects=1, max_objects=1), n, seed=seed + 1, split=split)
    img = encode_images(clip, np.stack([s.image for s in scenes]), precision=precision)  # (n, D), encoded once
    metrics = caption_retrieval(clip, scenes, precision, img)
    metrics.update(category_zero_shot(clip, scenes, world.categories, precision=precision, image_features=img))
    metrics["zero_shot_shape_acc"] = shape_classification(clip, single, world.categories,
                                                          precision=precision)
    metrics["n"] = n
    metrics["chance_shape_acc"] = 1.0 / len(world.categories)
    return metrics
