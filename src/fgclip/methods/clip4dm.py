"""CLIP4DM (arXiv 2412.18404): misaligned words from the negative gradients of a frozen CLIP.

For a pair (image I, caption T) with cosine score s = cos(f_I, f_T), every text attention
map A^h_l (heads h, layers l) gets the relevance

    R^h_l = grad(A^h_l) ⊙ A^h_l,         grad(A^h_l) = ds / dA^h_l        (no ReLU)

averaged over heads and over a chosen set of (late) layers (CLIP4DM), or, as in Chefer et
al.'s GAE, clamped at zero before the head mean and rolled out, R <- R + cam_l @ R. The
row of the [EOS] token (the position open_clip pools) gives one value per BPE token; the
tokens of each whitespace word are averaged into the word attribution w_j. A word is
flagged when w_j < ε (threshold rule) or when it is the caption's most negative word.

CLIPScore (Hessel et al.) is 2.5 * max(s, 0); F-CLIPScore, as we read Eq. 11, adds the
summed attributions of the flagged words, weighted by how far the pair is from perfect:

    F = CLIPScore + (1 - s) * sum_j mis(w_j) w_j,    mis(w_j) = [w_j < ε].

Baselines: leave-one-word-out (the score change when word j is deleted) and a random word.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from ..models.attention import capture_attention
from ..models.factory import Clip

TEMPLATE = "A photo depicts "  # CLIPScore's prompt, prepended by the paper's code too


@dataclass(frozen=True)
class AttributionConfig:
    """Which variant of the relevance rule to run.

    layers: indices of the text layers used (Python indexing, so (-3, -2, -1) is the last
        three; the paper's ViT-B/32 setting is the last 3 of 12).
    relu: clamp grad ⊙ A at zero before the head mean (GAE); False keeps negatives (CLIP4DM).
    rollout: Chefer's R <- R + cam_l @ R over those layers instead of their plain mean.
    """

    layers: tuple[int, ...] = (-2, -1)
    relu: bool = False
    rollout: bool = False

    def __post_init__(self) -> None:
        if not self.layers or len(set(self.layers)) != len(self.layers):
            raise ValueError(f"AttributionConfig.layers must be non-empty and unique, got {self.layers}")

    def resolve(self, n_layers: int) -> list[int]:
        """The layer indices as 0..n_layers-1, in forward order; errors name the bad index."""
        bad = [i for i in self.layers if not -n_layers <= i < n_layers]
        if bad:
            raise ValueError(f"AttributionConfig.layers {bad} out of range for {n_layers} text layers")
        return sorted(i % n_layers for i in self.layers)


@dataclass
class Attributions:
    """Per pair: the words of the caption (template excluded), w_j, and the cosine score s."""

    words: list[list[str]]
    w: list[np.ndarray]  # float64 (n_words,) each
    cos: np.ndarray  # (B,)


def token_relevance(maps: Sequence[torch.Tensor], grads: Sequence[torch.Tensor],
                    eos: torch.Tensor, cfg: AttributionConfig) -> torch.Tensor:
    """The [EOS] row of R: (B, L) from per-layer A^h_l, grad(A^h_l) of shape (B, H, L, L).

    cam_l = mean_h(grad(A^h_l) ⊙ A^h_l)  (each product clamped at 0 first when cfg.relu);
    R = mean of cam_l over cfg.layers, or with cfg.rollout R_0 = I,
    R_l = R_{l-1} + cam_l @ R_{l-1} over those layers in order. Returns R[b, eos_b, :].
    """
    if len(maps) != len(grads) or not maps:
        raise ValueError(f"token_relevance: {len(maps)} maps and {len(grads)} gradients")
    layers = cfg.resolve(len(maps))
    b, _, n, _ = maps[0].shape
    rel = torch.eye(n, dtype=maps[0].dtype, device=maps[0].device).expand(b, n, n) if cfg.rollout \
        else maps[0].new_zeros(b, n, n)
    for layer in layers:
        cam = grads[layer] * maps[layer]  # (B, H, L, L)
        if cfg.relu:
            cam = cam.clamp(min=0)
        cam = cam.mean(dim=1)  # (B, L, L)
        rel = rel + cam @ rel if cfg.rollout else rel + cam / len(layers)
    return rel[torch.arange(b, device=rel.device), eos]  # (B, L)


def word_token_counts(text: str, encode: Callable[[str], list[int]]) -> list[int]:
    """BPE tokens per whitespace word, checked against the tokenisation of the whole text."""
    words = text.split()
    counts = [len(encode(word)) for word in words]
    if sum((encode(word) for word in words), []) != encode(text):
        raise ValueError(f"caption {text!r}: its BPE tokens do not split at whitespace words")
    return counts


def merge_words(token_scores: np.ndarray, counts: Sequence[int]) -> np.ndarray:
    """w_j = mean of the scores of word j's BPE tokens (as the paper's code averages them).

    ``token_scores`` starts at the first word's first token; ``counts`` are tokens per word
    (see :func:`word_token_counts`), so punctuation stays with the word it is attached to.
    """
    ends = np.cumsum(counts)
    if len(counts) == 0 or ends[-1] > len(token_scores):
        raise ValueError(f"merge_words: {int(ends[-1]) if len(counts) else 0} tokens needed, "
                         f"{len(token_scores)} given")
    starts = ends - np.asarray(counts)
    return np.array([token_scores[s:e].mean() for s, e in zip(starts, ends)], dtype=np.float64)


def _encode(clip: Clip) -> Callable[[str], list[int]]:
    inner = getattr(clip.tokenizer, "tokenizer", clip.tokenizer)  # open_clip's SimpleTokenizer
    if not hasattr(inner, "encode"):
        raise TypeError(f"{clip.name}: tokenizer has no BPE encode(); word merging needs one")
    return inner.encode


def encode_pair_images(clip: Clip, images: torch.Tensor, n_captions: int,
                       image_index: Sequence[int] | None, device: str,
                       batch_size: int = 256) -> torch.Tensor:
    """Unit image embeddings, one row per caption: (n_captions, D), computed once per image.

    Without ``image_index`` image i goes with caption i; with it, ``images`` holds the
    distinct images and caption i goes with ``images[image_index[i]]``.
    """
    index = torch.arange(len(images)) if image_index is None else torch.as_tensor(image_index)
    if len(index) != n_captions:
        raise ValueError(f"{n_captions} captions but {len(index)} images (or image_index entries)")
    if len(index) and (index.min() < 0 or index.max() >= len(images)):
        raise ValueError(f"image_index must lie in [0, {len(images)}), got {index.min()}..{index.max()}")
    with torch.no_grad():
        feats = torch.cat([clip.model.encode_image(images[k:k + batch_size].to(device))
                           for k in range(0, len(images), batch_size)])
    return torch.nn.functional.normalize(feats, dim=-1)[index.to(feats.device)]  # (N, D)


def _text_eos(clip: Clip, tokens: torch.Tensor) -> torch.Tensor:
    """The position open_clip pools: the largest token id (EOT) for 'argmax' pooling."""
    if getattr(clip.model, "text_pool_type", "argmax") != "argmax":
        raise ValueError(f"{clip.name}: text pool type {clip.model.text_pool_type!r}; "
                         "CLIP4DM reads the row of an EOT pooled by argmax")
    return tokens.argmax(dim=-1)  # (B,)


def clip4dm_variants(clip: Clip, images: torch.Tensor, captions: Sequence[str],
                     cfgs: dict[str, AttributionConfig], template: str = TEMPLATE,
                     device: str = "cpu", batch_size: int = 128,
                     image_index: Sequence[int] | None = None) -> dict[str, Attributions]:
    """w_j of every word of every caption for several rule variants from the same pass.

    One text forward and one backward pass per batch; ``images`` are preprocessed
    (M, 3, S, S) tensors, one per caption or, with ``image_index``, the distinct images
    (see :func:`encode_pair_images`). The template's words are dropped from the output.
    """
    img = encode_pair_images(clip, images, len(captions), image_index, device)  # (N, D)
    if not cfgs:
        raise ValueError("clip4dm: no attribution config given")
    texts = [template + c for c in captions]
    encode, n_template = _encode(clip), len(template.split())
    counts = [word_token_counts(t, encode) for t in texts]
    context = getattr(clip.model, "context_length", 77)
    for t, c in zip(texts, counts):
        if sum(c) + 2 > context:
            raise ValueError(f"caption {t!r} has {sum(c)} tokens, more than context {context} - 2")
    rows: dict[str, list[np.ndarray]] = {name: [] for name in cfgs}
    cos_all = []
    for k in range(0, len(texts), batch_size):
        rel, cos = _relevance_batch(clip, img[k:k + batch_size], texts[k:k + batch_size],
                                    cfgs, device)
        for name in cfgs:
            rows[name].append(rel[name])
        cos_all.append(cos)
    cos = np.concatenate(cos_all)
    words = [t.split()[n_template:] for t in texts]
    out = {}
    for name in cfgs:
        rel = np.concatenate(rows[name])  # (N, L); column 0 is [SOT]
        ws = [merge_words(r[1:], c)[n_template:] for r, c in zip(rel, counts)]
        out[name] = Attributions(words, ws, cos)
    return out


def _relevance_batch(clip: Clip, img: torch.Tensor, texts: Sequence[str],
                     cfgs: dict[str, AttributionConfig], device: str,
                     ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    tokens = clip.tokenizer(list(texts)).to(device)  # (B, L); img: (B, D) unit embeddings
    with torch.enable_grad(), capture_attention(clip.model) as cap:
        txt = torch.nn.functional.normalize(clip.model.encode_text(tokens), dim=-1)  # (B, D)
        cos = (img * txt).sum(-1)  # s: (B,)
        grads = cap.gradients(cos)
    maps, eos = [m.detach() for m in cap.maps], _text_eos(clip, tokens)
    rel = {name: token_relevance(maps, grads, eos, cfg).float().cpu().numpy()
           for name, cfg in cfgs.items()}
    return rel, cos.detach().float().cpu().numpy()


def clip4dm(clip: Clip, images: torch.Tensor, captions: Sequence[str],
            cfg: AttributionConfig = AttributionConfig(), template: str = TEMPLATE,
            device: str = "cpu", batch_size: int = 128,
            image_index: Sequence[int] | None = None) -> Attributions:
    """w_j for one rule variant (see :func:`clip4dm_variants`)."""
    return clip4dm_variants(clip, images, captions, {"w": cfg}, template, device, batch_size,
                            image_index)["w"]


def most_negative_word(w: np.ndarray) -> int:
    """The index of the caption's smallest w_j (the paper's rule for FOIL)."""
    if len(w) == 0:
        raise ValueError("most_negative_word: empty caption")
    return int(np.argmin(w))


def threshold_words(w: np.ndarray, eps: float) -> np.ndarray:
    """mis(w_j) = [w_j < ε] as a bool mask (Eq. 10)."""
    return np.asarray(w) < eps


def clip_score(cos: np.ndarray | float) -> np.ndarray:
    """CLIPScore = 2.5 * max(cos, 0) (Hessel et al., w = 2.5)."""
    return 2.5 * np.maximum(np.asarray(cos, dtype=np.float64), 0.0)


def f_clip_score(cos: float, w: np.ndarray, eps: float) -> float:
    """F = CLIPScore + (1 - s) * sum_j mis(w_j) w_j (our reading of Eq. 11)."""
    w = np.asarray(w, dtype=np.float64)
    return float(clip_score(cos) + (1.0 - cos) * w[threshold_words(w, eps)].sum())


def leave_one_word_out(clip: Clip, images: torch.Tensor, captions: Sequence[str],
                       template: str = TEMPLATE, device: str = "cpu", batch_size: int = 512,
                       image_index: Sequence[int] | None = None) -> Attributions:
    """Ablation baseline: a_j = s(T) - s(T without word j); negative when deleting j helps.

    Needs one text forward pass per word (n_words + 1 per pair) and no backward pass.
    ``images`` and ``image_index`` as in :func:`clip4dm_variants`.
    """
    img = encode_pair_images(clip, images, len(captions), image_index, device)  # (N, D)
    words = [c.split() for c in captions]
    variants, owner = [], []
    for i, ws in enumerate(words):
        variants.append(template + " ".join(ws))
        variants += [template + " ".join(ws[:j] + ws[j + 1:]) for j in range(len(ws))]
        owner += [i] * (len(ws) + 1)
    with torch.no_grad():
        txt = torch.cat([clip.model.encode_text(clip.tokenizer(variants[k:k + batch_size]).to(device))
                         for k in range(0, len(variants), batch_size)])
        txt = torch.nn.functional.normalize(txt, dim=-1)  # (sum_i (n_i + 1), D)
        cos = (img[torch.as_tensor(owner, device=device)] * txt).sum(-1).float().cpu().numpy()
    starts = np.cumsum([0] + [len(ws) + 1 for ws in words[:-1]])  # row of each full caption
    out = [(cos[k] - cos[k + 1:k + 1 + len(ws)]).astype(np.float64) for k, ws in zip(starts, words)]
    return Attributions(words, out, cos[starts])


def normalize_per_caption(w: np.ndarray) -> np.ndarray:
    """Our fix: z_j = (w_j - mean_j w) / std_j w within one caption (0 when all w_j are equal).

    It keeps each caption's ranking of words (so LA is unchanged) but puts every caption on
    one scale, so that a single threshold can mean the same thing at any CLIPScore.
    """
    w = np.asarray(w, dtype=np.float64)
    std = w.std()
    return (w - w.mean()) / std if std > 0 else np.zeros_like(w)


def random_word(n_words: int, rng: np.random.Generator) -> int:
    """The chance baseline for localization: a uniformly drawn word index."""
    if n_words < 1:
        raise ValueError("random_word: empty caption")
    return int(rng.integers(n_words))
