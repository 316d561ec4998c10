"""Zero-shot evaluation of a CLIP on held-out toy scenes: retrieval and classification."""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from .metrics import accuracy, recall_at_k
from .metrics.multilabel import mean_average_precision
from .metrics.object_retrieval import average_precision_at_k, per_category_ap
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
    return pair_recall(img, txt, text_ids(texts))


def text_ids(texts: list[str]) -> torch.Tensor:
    """(N,) one integer per distinct string: equal ids mark captions that are the same text."""
    codes = {t: i for i, t in enumerate(sorted(set(texts)))}
    return torch.tensor([codes[t] for t in texts])


def pair_recall(img: torch.Tensor, txt: torch.Tensor, ids: torch.Tensor) -> dict[str, float]:
    """R@1/5/10 both ways from (N, D) image and text embeddings of aligned pairs; text j is
    relevant to image i when ids[i] == ids[j]."""
    sim = img @ txt.T  # (N images, N captions)
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
    txt = encode_texts(clip, [template.format(c) for c in categories], precision=precision).cpu()  # (C, D)
    targets = torch.tensor([[c in s.labels for c in categories] for s in scenes], dtype=torch.long)  # (N, C)
    return category_scores(image_features.cpu(), txt, targets)


def category_scores(img: torch.Tensor, txt: torch.Tensor, targets: torch.Tensor) -> dict[str, float]:
    """Multi-label mAP and retrieval AP@50 of s = img @ txt.T, (N, D) x (C, D), against (N, C)
    0/1 targets, over the categories with at least one positive among the N images."""
    has_pos = targets.sum(0) > 0
    scores = img @ txt.T  # (N, C)
    ap50 = per_category_ap(txt[has_pos], img[:, None], targets.T[has_pos].bool())["AP@50 min(50,R)"]
    return {"zero_shot_multilabel_mAP": mean_average_precision(scores[:, has_pos], targets[:, has_pos]),
            "zero_shot_retrieval_AP@50": float(ap50.mean())}


@dataclass(frozen=True)
class HeldOut:
    """What :func:`retrieval_metrics` scores, embedded once: n scenes (images, their captions,
    their category labels) and n one-object scenes, with the category names' embeddings."""
    images: torch.Tensor  # (n, D)
    captions: torch.Tensor  # (n, D), caption 0 of each scene
    caption_ids: torch.Tensor  # (n,), equal for identical caption strings
    labels: torch.Tensor  # (n, C) 0/1: category c is in scene n
    names: torch.Tensor  # (C, D), "a {category}"
    single: torch.Tensor  # (n1, D), the one-object scenes
    single_class: torch.Tensor  # (n1,), their category index


def held_out(clip: Clip, world: ToyWorldConfig, n: int, seed: int, split: str = "test",
             precision: str = "fp32", image_features: tuple[torch.Tensor, torch.Tensor] | None = None) -> HeldOut:
    """Embed ``n`` scenes of ``split`` (1..max objects) and ``n`` one-object scenes (seed + 1).
    ``image_features``: those scenes' L2-normalised image embeddings, (n, D) each, already
    computed by the caller (the same scenes: the same world, n, seed and split), so the
    images are not encoded twice."""
    scenes = generate(world, n, seed=seed, split=split)
    single = generate(replace(world, min_objects=1, max_objects=1), n, seed=seed + 1, split=split)
    texts = [s.captions[0].text for s in scenes]
    cats = world.categories
    if image_features is None:
        image_features = tuple(encode_images(clip, np.stack([s.image for s in group]), precision=precision).cpu()
                               for group in (scenes, single))
    elif [len(f) for f in image_features] != [n, n]:
        raise ValueError(f"image_features: expected {n} scene and {n} one-object embeddings, "
                         f"got {[len(f) for f in image_features]}")
    return HeldOut(image_features[0], encode_texts(clip, texts, precision=precision).cpu(), text_ids(texts),
                   torch.tensor([[c in s.labels for c in cats] for s in scenes], dtype=torch.long),
                   encode_texts(clip, [f"a {c}" for c in cats], precision=precision).cpu(),
                   image_features[1], torch.tensor([cats.index(s.objects[0].category) for s in single]))


def held_out_metrics(h: HeldOut) -> dict[str, float]:
    """Caption retrieval, the category scores and zero-shot shape accuracy of ``h``."""
    return {**pair_recall(h.images, h.captions, h.caption_ids), **category_scores(h.images, h.names, h.labels),
            "zero_shot_shape_acc": accuracy(h.single @ h.names.T, h.single_class)}


HELD_OUT_KEYS = ("i2t_R@1", "zero_shot_shape_acc", "zero_shot_multilabel_mAP", "zero_shot_retrieval_AP@50")


def _galleries(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """x (n, C) per scene, rows (b, n) drawn scene indices -> (b C, n): one gallery per resample
    and category, each a row as :func:`~fgclip.metrics.object_retrieval.average_precision_at_k` ranks it."""
    b, n = rows.shape
    return x[rows].transpose(1, 2).reshape(b * x.shape[1], n)


def _kept_mean(ap: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """AP (b C,) of each resample's galleries -> (b,) its mean over the categories ``keep`` (b, C) marks."""
    return (ap.view(keep.shape) * keep).sum(1) / keep.sum(1)


def held_out_intervals(h: HeldOut, keys: tuple[str, ...] = HELD_OUT_KEYS, n_boot: int = 1000, seed: int = 0,
                       level: float = 0.95, chunk: int = 100) -> dict[str, tuple[float, float]]:
    """Percentile bootstrap intervals over the held-out scenes (which scenes were drawn is the
    noise): -> {key: (low, high)} at ``level`` for those of :data:`HELD_OUT_KEYS` in ``keys``
    (i2t R@1, zero-shot shape accuracy, mAP and retrieval AP@50).

    R@1 and shape accuracy resample the queries (each query's hit on the whole gallery of n
    captions or C names; resampling the caption gallery too would repeat distractors and make
    the task easier). mAP and AP@50 rank images, so their resample draws n scenes with
    replacement as the gallery and recomputes AP per category (categories without a positive
    among the drawn scenes left out, as for the point value), with
    :func:`~fgclip.metrics.object_retrieval.average_precision_at_k`: full AP there is
    torchmetrics' AP wherever scores do not tie (a test), and a duplicated scene ties only
    with itself.
    """
    unknown = set(keys) - set(HELD_OUT_KEYS)
    if unknown:
        raise ValueError(f"keys: {sorted(unknown)} have no interval; choose from {HELD_OUT_KEYS}")
    ranked = bool({"zero_shot_multilabel_mAP", "zero_shot_retrieval_AP@50"} & set(keys))  # a sort per resample
    gen = torch.Generator().manual_seed(seed)
    top = (h.images @ h.captions.T).topk(1, dim=1).indices[:, 0]  # (n,) each image's best caption, as recall_at_k
    i2t_hit = (h.caption_ids[top] == h.caption_ids).float()  # (n,)
    shape_hit = ((h.single @ h.names.T).argmax(1) == h.single_class).float()  # (n1,), as accuracy
    scores, labels = h.images @ h.names.T, h.labels.bool()  # (n, C)
    n, c = scores.shape
    draws: dict[str, list[torch.Tensor]] = {k: [] for k in HELD_OUT_KEYS}
    for start in range(0, n_boot, chunk):  # a chunk of resamples at once: (b, C, n) galleries
        b = min(chunk, n_boot - start)
        rows = torch.randint(n, (b, n), generator=gen)  # (b, n)
        draws["i2t_R@1"].append(i2t_hit[rows].mean(1))
        draws["zero_shot_shape_acc"].append(shape_hit[torch.randint(len(shape_hit), (b, len(shape_hit)),
                                                                    generator=gen)].mean(1))
        if not ranked:
            continue  # the ranking metrics cost a sort per category and resample: only when asked
        s, t = _galleries(scores, rows), _galleries(labels, rows)  # (b C, n)
        keep = t.any(1).view(b, c).float()  # categories with a positive among the drawn scenes
        for key, ap in (("zero_shot_multilabel_mAP", average_precision_at_k(s, t)),
                        ("zero_shot_retrieval_AP@50", average_precision_at_k(s, t, 50, "min_k_r"))):
            draws[key].append(_kept_mean(ap, keep))
    tail = (1 - level) / 2
    return {k: (float(np.quantile(torch.cat(draws[k]).numpy(), tail)),
                float(np.quantile(torch.cat(draws[k]).numpy(), 1 - tail))) for k in keys}


def map_gain_interval(scores: torch.Tensor, reference: torch.Tensor, labels: torch.Tensor, n_boot: int = 1000,
                      seed: int = 0, level: float = 0.95, chunk: int = 100) -> tuple[float, float]:
    """Percentile bootstrap interval of mAP(scores) - mAP(reference), both (N, C) on the same
    scenes with ``labels`` (N, C): each resample draws N scenes with replacement, one gallery
    for both readers (paired), and averages AP over the categories with a positive among them,
    as :func:`held_out_intervals` does for one reader."""
    if scores.ndim != 2 or scores.shape != reference.shape or scores.shape != labels.shape:
        raise ValueError(f"map_gain_interval: scores {tuple(scores.shape)}, reference {tuple(reference.shape)} and "
                         f"labels {tuple(labels.shape)} must all be one (N, C)")
    if not (torch.isfinite(scores).all() and torch.isfinite(reference).all()):
        raise ValueError("map_gain_interval: scores and reference must be finite")
    if not labels.bool().any():
        raise ValueError("map_gain_interval: labels hold no positive: mAP undefined")
    gen, (n, c) = torch.Generator().manual_seed(seed), scores.shape
    draws = []
    for start in range(0, n_boot, chunk):
        b = min(chunk, n_boot - start)
        rows = torch.randint(n, (b, n), generator=gen)  # (b, n) the drawn scenes
        t = _galleries(labels.bool(), rows)  # (b C, n)
        keep = t.any(1).view(b, c).float()
        mean_ap = lambda x: _kept_mean(average_precision_at_k(_galleries(x.float(), rows), t), keep)
        draws.append(mean_ap(scores) - mean_ap(reference))
    d = torch.cat(draws).numpy()
    return float(np.quantile(d, (1 - level) / 2)), float(np.quantile(d, (1 + level) / 2))


def retrieval_metrics(clip: Clip, world: ToyWorldConfig, n: int, seed: int, split: str = "test",
                      precision: str = "fp32") -> dict[str, float]:
    """The toy CLIP's headline numbers on ``n`` held-out scenes of ``split``: caption
    retrieval and zero-shot category recognition on scenes of 1..max objects, zero-shot
    shape accuracy on ``n`` one-object scenes (seed + 1)."""
    metrics = held_out_metrics(held_out(clip, world, n, seed, split, precision))
    metrics["n"] = n
    metrics["chance_shape_acc"] = 1.0 / len(world.categories)
    return metrics
