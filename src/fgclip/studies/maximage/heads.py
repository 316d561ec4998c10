"""Chapter 1's heads: the MaxImage heads trained by bidirectional retrieval on cached
features (:mod:`fgclip.studies.maximage.data`), their maps, and the pointing game on every
phrase with a box, with its centre and random-point baselines.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...datasets.boxes import scale_boxes
from ...losses.ranking import npair_loss, same_text_mask, triplet_loss
from ...methods.maximage import PARSE_MODES, MaxImageHeads, pair_scores
from ...metrics.pointing import (PhrasePointing, argmax_point, center_point, phrase_pointing,
                                 pointing_hit, random_points, resized_argmax_point)
from ...train.loop import HeadTraining, train_loop
from .data import Corpus, Split, WordBank

LOSSES = ("npair", "triplet-hardest", "triplet-semi-hard")
# How the heads' biases start: "default" is PyTorch's nn.Linear draw (uniform in
# +-1/sqrt(fan_in)), which adds one shared vector to every cell's v and every word's t, so the
# untrained map is nearly the same for every word; "zero" starts every bias at 0 (the weights
# keep their seeded draw), so the untrained map already depends on the word.
BIAS_INITS = ("default", "zero")
# How a map becomes a point, and whether the far box edges count (eq-pointing-hit): "resized" is
# MultiGrounding's read-out (the map resized bilinearly to the image, its argmax pixel, closed box
# edges), the chapter's rule; "cell-centre" is the centre of the argmax cell with half-open edges.
POINT_RULES = {"resized": (resized_argmax_point, True), "cell-centre": (argmax_point, False)}


@dataclass(frozen=True)
class TrainConfig(HeadTraining):
    """One head-training run of chapter 1: the shared loop settings (``HeadTraining``), this
    chapter's defaults, and the retrieval loss and aggregation."""
    epochs: int = 8
    lr: float = 2e-3
    weight_decay: float = 0.01  # AdamW's default
    loss: str = "npair"
    aggregator: str = "maximage"
    embed_dim: int = 64
    temperature: float = 0.1  # N-Pair on cosine scores
    margin: float = 0.2  # triplet hinge
    score: str = "cosine"  # "cosine" (normalised v, t) or "dot" (the paper's Eq. 1)
    mask_same_text: bool = False  # drop same-text false negatives from the loss (needs caption_text)
    bias_init: str = "default"  # how the heads' biases start (BIAS_INITS)


def rule_of(rule: str) -> tuple:
    """(read-out, inclusive edges) of a pointing rule; a clear error for an unknown one."""
    if rule not in POINT_RULES:
        raise ValueError(f"rule must be one of {list(POINT_RULES)}, got {rule!r}")
    return POINT_RULES[rule]


def _bilinear_matrix(n_out: int, n_in: int) -> torch.Tensor:
    """(n_out, n_in) float64: row i holds the weights bilinear resizing (``align_corners=False``,
    as :func:`~fgclip.metrics.pointing.resized_argmax_point`) gives the input samples at output i."""
    src = ((torch.arange(n_out, dtype=torch.float64) + 0.5) * (n_in / n_out) - 0.5).clamp_min(0)
    lo = src.floor().long().clamp_max(n_in - 1)
    lam = src - lo
    r = torch.zeros(n_out, n_in, dtype=torch.float64)
    r[torch.arange(n_out), lo] += 1 - lam
    r[torch.arange(n_out), (lo + 1).clamp_max(n_in - 1)] += lam
    return r


@torch.no_grad()
def map_points(heats: torch.Tensor, hws, rule: str = "resized") -> list[tuple[float, float]]:
    """The point of every map of ``heats`` (K, h, w) on its image of size ``hws[k] = (H, W)``
    under ``rule``: the points of :func:`~fgclip.metrics.pointing.resized_argmax_point` (or
    :func:`~fgclip.metrics.pointing.argmax_point`) map by map, the resizing done for all maps
    of one image size at once as R_H m R_W^T (:func:`_bilinear_matrix`). Beyond the outer cell
    centres the resized map is flat and its rounding varies along the plateau, so the first
    pixel within 1e-9 (relative) of the maximum is taken, as the single map's first maximum."""
    read = rule_of(rule)[0]
    if len(heats) != len(hws):
        raise ValueError(f"map_points: {len(heats)} maps but {len(hws)} image sizes")
    if read is not resized_argmax_point:
        return [read(h, hw) for h, hw in zip(heats, hws)]
    heats = torch.as_tensor(heats).double()
    if heats.ndim != 3 or not torch.isfinite(heats).all():
        raise ValueError(f"map_points: heat must be (K, h, w) and finite, got shape {tuple(heats.shape)}")
    out: list = [None] * len(heats)
    for hw in set(map(tuple, hws)):
        ks = [k for k, x in enumerate(hws) if tuple(x) == hw]
        big = (_bilinear_matrix(hw[0], heats.shape[1]) @ heats[ks] @ _bilinear_matrix(hw[1], heats.shape[2]).T
               ).flatten(1)  # (k, H*W)
        top = big.max(dim=1, keepdim=True).values
        flat = (big >= top - 1e-9 * (top.abs() + 1)).byte().argmax(dim=1).tolist()  # first pixel of the top plateau
        for k, f in zip(ks, flat):
            out[k] = (float(f % hw[1]), float(f // hw[1]))
    return out


def make_heads(image_dim: int, word_dim: int, embed_dim: int, seed: int,
               score: str = "cosine", bias_init: str = "default") -> MaxImageHeads:
    """Heads at their seeded random initialisation (the "untrained model" baseline); with
    ``bias_init="zero"`` every bias starts at 0 and the weights are the same seeded draw."""
    if bias_init not in BIAS_INITS:
        raise ValueError(f"bias_init must be one of {BIAS_INITS}, got {bias_init!r}")
    torch.manual_seed(seed)
    heads = MaxImageHeads(image_dim, word_dim, embed_dim, score)
    if bias_init == "zero":
        with torch.no_grad():
            for layer in heads.modules():
                if isinstance(layer, torch.nn.Linear):
                    layer.bias.zero_()
    return heads


def encode(heads: MaxImageHeads, img: torch.Tensor, words: torch.Tensor
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """v (B, E, h, w) and t (B, L, E) in the heads' score geometry (cosine: unit norm, so
    every m_{r,c,d} lies in [-1, 1]; dot: raw, the paper's Eq. 1)."""
    return heads.image_vectors(img), heads.word_vectors(words)


def _loss(scores: torch.Tensor, cfg: TrainConfig, same: torch.Tensor | None = None
          ) -> torch.Tensor:
    if cfg.loss == "npair":
        return npair_loss(scores, cfg.temperature, same)
    if cfg.loss.startswith("triplet-"):
        return triplet_loss(scores, cfg.margin, cfg.loss.removeprefix("triplet-"), same)
    raise ValueError(f"loss must be one of {LOSSES}, got {cfg.loss!r}")


def caption_batches(caption_image: list[int], batch_size: int, seed: int):
    """An endless source of epochs: each call of the returned function draws one epoch, every
    image once in a seeded random order with one of its captions at random, as batches of
    (image indices, caption indices); a last batch of one image (no negative) is dropped."""
    rng = np.random.default_rng(seed)
    by_image: dict[int, list[int]] = {}
    for c, i in enumerate(caption_image):
        by_image.setdefault(i, []).append(c)
    images = np.array(sorted(by_image))
    if len(images) < 2:
        raise ValueError("training needs at least two images")

    def epoch():
        order = rng.permutation(images)
        caps = np.array([rng.choice(by_image[i]) for i in order])
        return [(order[s:s + batch_size], caps[s:s + batch_size])
                for s in range(0, len(order) - 1, batch_size) if len(order[s:s + batch_size]) >= 2]
    return epoch


def train_heads(img: torch.Tensor, words: WordBank | torch.Tensor, mask: torch.Tensor | None,
                caption_image: list[int], cfg: TrainConfig,
                caption_text: list[int] | None = None) -> tuple[MaxImageHeads, list[dict]]:
    """Bidirectional retrieval training of the heads on cached features, through the one
    loop (:func:`fgclip.train.loop.train_loop`) over :func:`caption_batches`.

    With ``cfg.steps`` the passes repeat until that many optimiser steps are taken (equal
    steps across batch sizes). ``caption_text``: one id per caption, equal for equal texts;
    with ``cfg.mask_same_text`` a batch pair with the same text is no negative
    (:func:`fgclip.losses.ranking.same_text_mask`). Returns the heads and the history (mean
    loss per pass). ``words``: a :class:`WordBank` (``mask`` None) or padded (C, L, Dt)
    features with their (C, L) mask.
    """
    bank = words if isinstance(words, WordBank) else WordBank.from_dense(words, mask)
    if cfg.loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {cfg.loss!r}")
    if cfg.mask_same_text and caption_text is None:
        raise ValueError("mask_same_text=True needs caption_text (one text id per caption)")
    device = torch.device(cfg.device)
    epoch_batches = caption_batches(caption_image, cfg.batch_size, cfg.seed)
    heads = make_heads(img.shape[1], bank.dim, cfg.embed_dim, cfg.seed, cfg.score, cfg.bias_init).to(device)
    text_ids = torch.as_tensor(caption_text) if cfg.mask_same_text else None

    def batch_loss(batch) -> dict[str, torch.Tensor]:
        bi, bc = batch
        same = same_text_mask(text_ids[bc]).to(device) if text_ids is not None else None
        t_b, m_b = bank.padded(bc)  # (B, L_b, Dt), padded to this batch's longest caption
        v, t = encode(heads, img[bi].to(device), t_b.to(device))
        return {"loss": _loss(pair_scores(v, t, m_b.to(device), cfg.aggregator), cfg, same)}

    history = train_loop(heads.parameters(), epoch_batches, batch_loss, cfg,
                         desc=f"{cfg.loss}/{cfg.aggregator}")
    return heads.eval(), history


@torch.no_grad()
def project_images(heads: MaxImageHeads, img: torch.Tensor, batch_size: int = 512
                   ) -> torch.Tensor:
    """v for every cached image: (N, Di, h, w) -> (N, E, h, w) in the heads' score geometry."""
    return torch.cat([heads.image_vectors(img[s:s + batch_size])
                      for s in range(0, len(img), batch_size)])


@torch.no_grad()
def phrase_heats(heads: MaxImageHeads, v: torch.Tensor, words: WordBank, corpus: Corpus,
                 mode: str = "vector") -> torch.Tensor:
    """Every phrase's map (K, h, w) at once, equal to :func:`phrase_map` phrase by phrase.

    vector: <v_i, f_text(mean_w x_w)>; maps: mean_w z(<v_i, f_text(x_w)>), z standardising
    each word map over positions (a deviation: the paper averages raw maps).
    """
    if mode not in PARSE_MODES:
        raise ValueError(f"mode must be one of {PARSE_MODES}, got {mode!r}")
    phrases = corpus.phrases
    n_max = max(b - a for a, b in (ph.words for ph in phrases))
    feats = torch.zeros(len(phrases), n_max, words.dim)  # (K, n, Dt)
    keep = torch.zeros(len(phrases), n_max, dtype=torch.bool)
    for k, ph in enumerate(phrases):
        a, b = ph.words
        feats[k, :b - a], keep[k, :b - a] = words.caption(ph.caption)[a:b], True
    vi = v[torch.tensor([ph.image for ph in phrases])]  # (K, E, h, w)
    if mode == "vector":
        mean = feats.sum(dim=1) / keep.sum(dim=1, keepdim=True)  # (K, Dt)
        return torch.einsum("kehw,ke->khw", vi, heads.encode_words(mean))
    maps = torch.einsum("kehw,kne->knhw", vi, heads.encode_words(feats)).flatten(2)
    z = (maps - maps.mean(dim=2, keepdim=True)) / maps.std(dim=2, keepdim=True).clamp_min(1e-6)
    z = (z * keep[..., None]).sum(dim=1) / keep.sum(dim=1, keepdim=True)  # (K, h*w)
    return z.view(len(phrases), *v.shape[2:])


@torch.no_grad()
def phrase_points(heads: MaxImageHeads, v: torch.Tensor, words: WordBank,
                  corpus: Corpus, mode: str = "vector", rule: str = "resized") -> list[tuple[float, float]]:
    """The point of every phrase's map (parse ``mode``) under the pointing ``rule``
    (:data:`POINT_RULES`), in image pixels; v from :func:`project_images`."""
    heats = phrase_heats(heads, v, words, corpus, mode)
    return map_points(heats, [corpus.image_hw[ph.image] for ph in corpus.phrases], rule)


@torch.no_grad()
def caption_word_maps(heads: MaxImageHeads, v: torch.Tensor, words: WordBank,
                      image: int, caption: int, n_words: int) -> torch.Tensor:
    """Every word's map of one caption on one image: (n_words, h, w) scores m_{:,:,d}."""
    t = heads.word_vectors(words.caption(caption)[:n_words])
    return torch.einsum("ehw,le->lhw", v[image], t)


def word_boxes(corpus: Corpus, caption: int, n_words: int,
               to_hw: tuple[int, int] | None = None) -> list[list]:
    """Per word of a caption, the boxes of the phrase it belongs to ([] outside phrases), in
    the original image's pixels, or in those of the image resized to ``to_hw = (H, W)``
    (the stretched array a figure draws on)."""
    boxes: list[list] = [[] for _ in range(n_words)]
    hw = corpus.image_hw[corpus.caption_image[caption]]
    for ph in corpus.phrases:
        if ph.caption == caption:
            for w in range(*ph.words):
                if w < n_words:
                    boxes[w] = list(ph.boxes) if to_hw is None else scale_boxes(ph.boxes, hw, to_hw)
    return boxes


def two_object_pairs(corpus: Corpus) -> list[tuple[int, int]]:
    """Pairs (a, b) of phrase indices from one caption whose boxes differ: the captions that
    name two different objects of their image, for the token-selectivity test."""
    by_caption: dict[int, list[int]] = {}
    for k, ph in enumerate(corpus.phrases):
        by_caption.setdefault(ph.caption, []).append(k)
    pairs = []
    for ks in by_caption.values():
        for x in range(len(ks)):
            for y in range(x + 1, len(ks)):
                if corpus.phrases[ks[x]].boxes != corpus.phrases[ks[y]].boxes:
                    pairs.append((ks[x], ks[y]))
    return pairs


@torch.no_grad()
def head_word_points(heads: MaxImageHeads, v: torch.Tensor, words: WordBank,
                     corpus: Corpus, phrase_ids: list[int], rule: str = "resized"
                     ) -> dict[int, tuple[float, float]]:
    """The point (pointing ``rule``) of the map of each phrase's last word (its head noun: the
    shape name)."""
    read = rule_of(rule)[0]
    out = {}
    for k in phrase_ids:
        ph = corpus.phrases[k]
        heat = caption_word_maps(heads, v, words, ph.image, ph.caption, ph.words[1])[-1]
        out[k] = read(heat, corpus.image_hw[ph.image])
    return out


def selectivity(points: dict[int, tuple[float, float]], pairs: list[tuple[int, int]],
                corpus: Corpus) -> dict[str, float]:
    """Token selectivity over two-object captions.

    For a pair (a, b): own_a = hit(p_a, B_a), other_a = hit(p_a, B_b) and not own_a.
    Returns the share of pairs where both words land on their own objects ("both_own"),
    where they swap ("swapped": each on the other's object), and per word the rates of
    landing on its own ("own") and on the other object ("other").
    """
    if not pairs:
        raise ValueError("no caption names two different objects: selectivity is undefined")
    both, swapped, own, other = [], [], [], []
    for a, b in pairs:
        hw = corpus.image_hw[corpus.phrases[a].image]
        ba, bb = corpus.phrases[a].boxes, corpus.phrases[b].boxes
        oa, ob = pointing_hit(points[a], ba, hw), pointing_hit(points[b], bb, hw)
        xa = not oa and pointing_hit(points[a], bb, hw)
        xb = not ob and pointing_hit(points[b], ba, hw)
        both.append(oa and ob)
        swapped.append(xa and xb)
        own += [oa, ob]
        other += [xa, xb]
    return {"n_pairs": len(pairs), "both_own": float(np.mean(both)),
            "swapped": float(np.mean(swapped)), "own": float(np.mean(own)),
            "other": float(np.mean(other))}


def evaluate_pointing(heads: MaxImageHeads, data: Split, modes: tuple[str, ...] = ("vector",),
                      min_box_area: float = 0.05, area_rule: str = "union"
                      ) -> dict[str, PhrasePointing]:
    """Per-phrase pointing game of every parse mode on a split's phrases with boxes (the
    cell-centre rule with half-open edges, :func:`fgclip.metrics.pointing.phrase_pointing`'s)."""
    v = project_images(heads, data.img)
    hws = [data.corpus.image_hw[p.image] for p in data.corpus.phrases]
    boxes = [p.boxes for p in data.corpus.phrases]
    return {m: phrase_pointing(phrase_points(heads, v, data.words, data.corpus, m, "cell-centre"), boxes, hws,
                               min_box_area, area_rule=area_rule) for m in modes}


def stratum_masks(result: PhrasePointing, corpus: Corpus) -> dict[str, np.ndarray]:
    """Boolean masks over a result's evaluated phrases: "all", "center" (a box contains the
    image centre) and "non-center"; aligned with ``result.evaluated_hits()``."""
    center = np.array([ph.center for ph, h in zip(corpus.phrases, result.hits) if h is not None])
    return {"all": np.ones_like(center), "center": center, "non-center": ~center}


def baseline_results(data: Split, seed: int, min_box_area: float = 0.05,
                     area_rule: str = "union") -> dict[str, PhrasePointing]:
    """The centre-point and uniform-random-point baselines on a split's phrases."""
    hws = [data.corpus.image_hw[p.image] for p in data.corpus.phrases]
    boxes = [p.boxes for p in data.corpus.phrases]
    return {"center": phrase_pointing([center_point(hw) for hw in hws], boxes, hws, min_box_area,
                                      area_rule=area_rule),
            "random": phrase_pointing(random_points(hws, seed), boxes, hws, min_box_area,
                                      area_rule=area_rule)}
