"""CLIP4DM (arXiv 2412.18404): misaligned words from the negative gradients of a frozen CLIP.

For a pair (image I, caption T) with cosine score s = <f(I), g(T)> (normalised embeddings), every text attention
map A^h_l (heads h, layers l) gets the relevance of Eq. (eq-clip4dm-relevance) of chapter 2,

    R^h_l = ∇A^h_l ⊙ A^h_l,         ∇A^h_l = ∂s / ∂A^h_l        (no ReLU)

averaged over heads and over a chosen set of (late) layers (CLIP4DM), or, as in Chefer et
al.'s GAE, clamped at zero before the head mean and rolled out, R <- R + cam_l @ R. The
row of the [EOS] token (the position open_clip pools) gives one value per BPE token; the
tokens of each word are averaged into the word attribution w_j. Words are split as in the
official code: at spaces, with "." and "," words of their own; punctuation is never a
candidate (it is dropped from the output); Eq. (eq-clip4dm-word). A word is flagged when
w_j < ε (threshold rule) or when it is the caption's most negative word, Eq. (eq-clip4dm-rules).

CLIPScore (Hessel et al.) is 2.5 * max(s, 0). F-CLIPScore in three forms, Eq. (eq-fclipscore)
(see :func:`f_clip_score`): the official code's threshold mode (1 - max(s, 0)) sum_{w_j<ε} w_j,
its most-negative mode for FOIL (1 - max(s, 0)) min_j w_j, and the additive reading of
Eq. 11, 2.5 max(s, 0) + (1 - s) sum_{w_j<ε} w_j.

Baselines: leave-one-word-out (the score change when word j is deleted) and a random word.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Hashable, Mapping, Sequence, TypeVar

import numpy as np
import torch

from ..models.attention import capture_attention
from ..models import tokens as bpe  # BPE tokens -> words, shared with chapter 1
from ..models.factory import Clip
from ..models.images import encode_image_rows
from ..models.text import bpe_encoder, encode_text_trimmed, tokenize_words

K = TypeVar("K", bound=Hashable)
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

    @property
    def label(self) -> str:
        """A short name for tables: 'last 3', 'last 3 + ReLU', 'layers (0, 1) + ReLU + rollout'."""
        n = len(self.layers)
        base = f"last {n}" if self.layers == tuple(range(-n, 0)) else f"layers {self.layers}"
        return base + " + ReLU" * self.relu + " + rollout" * self.rollout


PUNCTUATION = frozenset(".,")  # the official code's own word splits; never candidates
F_FORMS = ("threshold", "most negative", "additive")


@dataclass
class Attributions:
    """Per pair: the candidate words (template and punctuation excluded), w_j, the cosine
    score s, and for each word the index of the whitespace word it comes from."""

    words: list[list[str]]
    w: list[np.ndarray]  # float64 (n_words,) each
    cos: np.ndarray  # (B,)
    source: list[np.ndarray] | None = None  # int (n_words,) each: index into caption.split()


def token_relevance(maps: Sequence[torch.Tensor | None], grads: Sequence[torch.Tensor | None],
                    eos: torch.Tensor, cfg: AttributionConfig) -> torch.Tensor:
    """Eq. (eq-clip4dm-relevance) of chapter 2: the [EOS] row of R̄, (B, L), from the maps
    A^h_l and gradients ∇A^h_l = ∂s/∂A^h_l of each text layer, (B, H, L, L) each.

    cam_l = E_h[∇A^h_l ⊙ A^h_l]  (each product clamped at 0 first when cfg.relu: GAE);
    R̄ = (1/|Λ|) Σ_{l∈Λ} cam_l over Λ = cfg.layers, or with cfg.rollout R̄_0 = I,
    R̄_l = R̄_{l-1} + cam_l R̄_{l-1} over those layers in order. Returns R̄[b, eos_b, :].
    """
    if len(maps) != len(grads) or not maps:
        raise ValueError(f"token_relevance: {len(maps)} maps and {len(grads)} gradients")
    layers = cfg.resolve(len(maps))  # maps of other layers may be None (not captured)
    if any(maps[i] is None or grads[i] is None for i in layers):
        raise ValueError(f"token_relevance: layers {layers} need their maps and gradients")
    ref = maps[layers[0]]
    b, _, n, _ = ref.shape
    rel = torch.eye(n, dtype=ref.dtype, device=ref.device).expand(b, n, n) if cfg.rollout \
        else ref.new_zeros(b, n, n)
    for layer in layers:
        cam = grads[layer] * maps[layer]  # (B, H, L, L)
        if cfg.relu:
            cam = cam.clamp(min=0)
        cam = cam.mean(dim=1)  # (B, L, L)
        rel = rel + cam @ rel if cfg.rollout else rel + cam / len(layers)
    return rel[torch.arange(b, device=rel.device), eos]  # (B, L)


def pooling_relevance(pool: torch.nn.Module, feature_map: torch.Tensor, text_emb: torch.Tensor,
                      relu: bool = False) -> torch.Tensor:
    """An EXTENSION to the image side (the paper attributes text tokens only): Eq.
    (eq-clip4dm-relevance) on the one attention layer of an attention-pooled ResNet CLIP.

    open_clip's ``AttentionPool2d`` lets the mean token attend over L = 1 + P tokens, itself and
    the P = h w cells of the layer-4 map F (C, h, w), with one map A^h (L,) per head h:
    e = W_c concat_h(sum_k A^h_k V^h_k). For a text embedding t, s = cos(e, t) and

        R[k] = E_h[∇A^h_k A^h_k],   ∇A^h = ∂s / ∂A^h            (CLIP4DM's rule: no ReLU)

    or, with ``relu``, E_h[(∇A^h_k A^h_k)^+] (Chefer et al.'s GAE, the rule CLIP4DM modifies).
    It is the row of the mean token, the token CLIP pools, as the [EOS] row is on the text side
    (one layer: no mean over layers, no rollout); A^h is taken as it is (the gradient stops at
    the maps, not through their softmax). k = 0 is the mean token; 1 + r w + q the map's cell
    (r, q). feature_map (B, C, h, w), text_emb (T, D) -> R (B, T, 1 + P).
    """
    b, c, h, w = feature_map.shape
    if h * w + 1 != pool.positional_embedding.shape[0]:
        raise ValueError(f"feature_map has {h * w} positions; the pooling expects {pool.positional_embedding.shape[0] - 1}")
    heads, d = pool.num_heads, c // pool.num_heads
    with torch.enable_grad():
        flat = feature_map.detach().float().flatten(2).transpose(1, 2)  # (B, P, C)
        tokens = torch.cat([flat.mean(1, keepdim=True), flat], 1) + pool.positional_embedding.float()  # (B, L, C)
        q = pool.q_proj(tokens[:, :1]).view(b, 1, heads, d).transpose(1, 2)  # (B, H, 1, d)
        k = pool.k_proj(tokens).view(b, -1, heads, d).transpose(1, 2)  # (B, H, L, d)
        v = pool.v_proj(tokens).view(b, -1, heads, d).transpose(1, 2)  # (B, H, L, d)
        attn = torch.softmax(q @ k.transpose(-1, -2) / d ** 0.5, -1).squeeze(2)  # (B, H, L)
        attn = attn.detach().requires_grad_(True)  # the maps A^h are the leaves the gradient is taken at
        e = pool.c_proj((attn.unsqueeze(-1) * v).sum(2).reshape(b, c))  # (B, D)
        s = torch.nn.functional.normalize(e, dim=-1) @ torch.nn.functional.normalize(text_emb.float(), dim=-1).T  # (B, T)
        rel = []
        for j in range(s.shape[1]):  # one gradient per text; an image's s depends on its own maps only
            grad, = torch.autograd.grad(s[:, j].sum(), attn, retain_graph=j + 1 < s.shape[1])
            cam = grad * attn  # (B, H, L)
            rel.append((cam.clamp(min=0) if relu else cam).mean(1).detach())  # (B, L)
    return torch.stack(rel, 1)  # (B, T, L)


def word_attributions(rel: np.ndarray, counts: Sequence[int], keep: Sequence[int]) -> np.ndarray:
    """Eq. (eq-clip4dm-word) of chapter 2: w_j = (1/|𝒯_j|) Σ_{k∈𝒯_j} R̄[EOS, k], the mean of
    one caption's [EOS] row over the BPE tokens 𝒯_j of official word j.

    rel: (T,) with column 0 the [SOT] token; counts: BPE tokens per official word (in
    order, from column 1); keep: the indices of the candidate words. Returns (len(keep),).
    """
    return bpe.average_spans(np.asarray(rel), bpe.spans_from_counts(counts, start=1))[list(keep)]


def official_words(text: str) -> list[tuple[str, int]]:
    """The official code's words: split at spaces, "." and "," split off as words of their
    own; each as (word, index of the whitespace word it belongs to).

    >>> official_words("a dog, on grass.")
    [('a', 0), ('dog', 1), (',', 1), ('on', 2), ('grass', 3), ('.', 3)]
    """
    out = []
    for k, chunk in enumerate(text.split()):
        token = ""
        for char in chunk:
            if char in PUNCTUATION:
                if token:
                    out.append((token, k))
                out.append((char, k))
                token = ""
            else:
                token += char
        if token:
            out.append((token, k))
    return out


def word_token_counts(text: str, encode: Callable[[str], list[int]]) -> list[int]:
    """BPE tokens per official word (:func:`official_words`), checked against the
    tokenisation of the whole text (:func:`fgclip.models.tokens.token_counts`)."""
    return bpe.token_counts([w for w, _ in official_words(text)], encode, text)


def caption_fits(clip: Clip, captions: Sequence[str], template: str = TEMPLATE) -> np.ndarray:
    """(N,) bool: template + caption has at most context - 2 BPE tokens ([SOT], [EOT])."""
    encode, context = bpe_encoder(clip), getattr(clip.model, "context_length", 77)
    return np.array([len(encode(template + c)) + 2 <= context for c in captions], dtype=bool)


def encode_pair_images(clip: Clip, images: torch.Tensor, n_captions: int,
                       image_index: Sequence[int] | None, device: str,
                       batch_size: int = 256) -> torch.Tensor:
    """Unit image embeddings, one row per caption: (n_captions, D), computed once per image.

    ``images`` are preprocessed (M, 3, S, S) tensors or, to skip the image tower, their
    embeddings (M, D). Without ``image_index`` image i goes with caption i; with it,
    ``images`` holds the distinct images and caption i goes with ``images[image_index[i]]``.
    """
    index = torch.arange(len(images)) if image_index is None else torch.as_tensor(image_index)
    if len(index) != n_captions:
        raise ValueError(f"{n_captions} captions but {len(index)} images (or image_index entries)")
    if len(index) and (index.min() < 0 or index.max() >= len(images)):
        raise ValueError(f"image_index must lie in [0, {len(images)}), got {index.min()}..{index.max()}")
    if images.dim() == 2:  # already embedded
        feats = images.to(device)
    else:
        feats = encode_image_rows(clip, images, lambda x: {"f": clip.model.encode_image(x)},
                                  batch_size, device)["f"]
    return torch.nn.functional.normalize(feats, dim=-1)[index.to(feats.device)]  # (N, D)


def _text_eos(clip: Clip, tokens: torch.Tensor) -> torch.Tensor:
    """The position open_clip pools: the largest token id (EOT) for 'argmax' pooling."""
    if getattr(clip.model, "text_pool_type", "argmax") != "argmax":
        raise ValueError(f"{clip.name}: text pool type {clip.model.text_pool_type!r}; "
                         "CLIP4DM reads the row of an EOT pooled by argmax")
    return tokens.argmax(dim=-1)  # (B,)


def clip4dm_variants(clip: Clip, images: torch.Tensor, captions: Sequence[str],
                     cfgs: Mapping[K, AttributionConfig], template: str = TEMPLATE,
                     device: str = "cpu", batch_size: int = 128,
                     image_index: Sequence[int] | None = None) -> dict[K, Attributions]:
    """w_j of every word of every caption for several rule variants from the same pass
    (Eqs. (eq-clip4dm-relevance) and (eq-clip4dm-word)); the output has the keys of ``cfgs``
    (names, or the configs themselves: ``{cfg: cfg for cfg in grid}``).

    One text forward and one backward pass per batch; ``images`` are preprocessed
    (M, 3, S, S) tensors, one per caption or, with ``image_index``, the distinct images
    (see :func:`encode_pair_images`). The template's words are dropped from the output.
    """
    img = encode_pair_images(clip, images, len(captions), image_index, device)  # (N, D)
    if not cfgs:
        raise ValueError("clip4dm: no attribution config given")
    texts = [template + c for c in captions]
    encode, n_template = bpe_encoder(clip), len(template.split())
    counts = [word_token_counts(t, encode) for t in texts]
    context = getattr(clip.model, "context_length", 77)
    for t, c in zip(texts, counts):
        if sum(c) + 2 > context:
            raise ValueError(f"caption {t!r} has {sum(c)} tokens, more than context {context} - 2")
    words_src = [official_words(t) for t in texts]
    rows: dict[K, list[np.ndarray]] = {name: [] for name in cfgs}
    cos_all = []
    for k in range(0, len(texts), batch_size):
        rel, cos = _relevance_batch(clip, img[k:k + batch_size], texts[k:k + batch_size],
                                    cfgs, device)
        for name in cfgs:
            rows[name].append(rel[name])
        cos_all.append(cos)
    cos = np.concatenate(cos_all)
    keep = [[i for i, (w, k) in enumerate(ws) if k >= n_template and w not in PUNCTUATION]
            for ws in words_src]  # candidate words: not template, not punctuation
    words = [[ws[i][0] for i in kp] for ws, kp in zip(words_src, keep)]
    source = [np.array([ws[i][1] - n_template for i in kp], dtype=int) for ws, kp in zip(words_src, keep)]
    out = {}
    for name in cfgs:
        rel = [r for batch in rows[name] for r in batch]  # (T_batch,) each; column 0 is [SOT]
        ws = [word_attributions(r, c, kp) for r, c, kp in zip(rel, counts, keep)]
        out[name] = Attributions(words, ws, cos, source)
    return out


def _relevance_batch(clip: Clip, img: torch.Tensor, texts: Sequence[str],
                     cfgs: Mapping[K, AttributionConfig], device: str,
                     ) -> tuple[dict[K, np.ndarray], np.ndarray]:
    """One batch: the captured maps and gradients of s (B,), reduced by each config
    through :func:`token_relevance`; ({key: (B, L) [EOS] rows}, s)."""
    tokens = tokenize_words(clip, [[w for w, _ in official_words(t)] for t in texts]).to(device)  # (B, L)
    n_layers = len(clip.model.transformer.resblocks)
    needed = sorted({i for cfg in cfgs.values() for i in cfg.resolve(n_layers)})  # only these are captured
    with torch.enable_grad(), capture_attention(clip.model, needed) as cap:
        txt = torch.nn.functional.normalize(encode_text_trimmed(clip.model, tokens), dim=-1)  # (B, D)
        cos = (img * txt).sum(-1)  # s: (B,)
        grads = cap.gradients(cos)
    maps: list[torch.Tensor | None] = [None] * n_layers  # per text layer; None where not captured
    grads_all: list[torch.Tensor | None] = [None] * n_layers
    for i, m, g in zip(needed, cap.maps, grads):
        maps[i], grads_all[i] = m.detach(), g
    grads, eos = grads_all, _text_eos(clip, tokens)
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
    """Eq. (eq-clip4dm-rules): hat j = argmin_j w_j, the paper's rule for FOIL (first index on ties;
    the chapter breaks ties at random with :func:`fgclip.metrics.misalignment.most_negative`)."""
    if len(w) == 0:
        raise ValueError("most_negative_word: empty caption")
    return int(np.argmin(w))


def threshold_words(w: np.ndarray, eps: float) -> np.ndarray:
    """Eq. (eq-clip4dm-rules) of chapter 2 (the paper's Eq. 10): mis(w_j) = [w_j < ε], (n_words,) bool."""
    return np.asarray(w) < eps


def misalignment_penalty(w: np.ndarray, eps: float) -> float:
    """The penalty term of Eq. (eq-fclipscore): P_ε = Σ_j mis(w_j) w_j, the sum of the
    flagged (most negative) word attributions; 0 when nothing lies below ε."""
    w = np.asarray(w, dtype=np.float64)
    return float(w[threshold_words(w, eps)].sum())


def clip_score(cos: np.ndarray | float) -> np.ndarray:
    """CLIPScore = 2.5 max(s, 0) (Hessel et al., w = 2.5), the global score in Eq. (eq-fclipscore)."""
    return 2.5 * np.maximum(np.asarray(cos, dtype=np.float64), 0.0)


def f_clip_score(cos: float, w: np.ndarray, eps: float | None, form: str = "most negative") -> float:
    """Eq. (eq-fclipscore) of chapter 2: F-CLIPScore of one pair (higher = more aligned),
    with P_ε = Σ_j mis(w_j) w_j (:func:`misalignment_penalty`), in one of three forms:

    threshold (official code, threshold mode):   F_ε   = (1 - max(s, 0)) P_ε
    most negative (official code, FOIL mode):    F_min = (1 - max(s, 0)) min_j w_j   (no ε)
    additive (our reading of the paper's Eq. 11): F_+  = 2.5 max(s, 0) + (1 - s) P_ε
    """
    w = np.asarray(w, dtype=np.float64)
    if form not in F_FORMS:
        raise ValueError(f"f_clip_score: form must be one of {F_FORMS}, got {form!r}")
    if w.size == 0:
        raise ValueError("f_clip_score: caption without candidate words")
    if form == "most negative":
        return float((1.0 - max(cos, 0.0)) * w.min())
    if eps is None:
        raise ValueError(f"f_clip_score: form {form!r} needs eps")
    penalty = misalignment_penalty(w, eps)
    if form == "threshold":
        return float((1.0 - max(cos, 0.0)) * penalty)
    return float(clip_score(cos) + (1.0 - cos) * penalty)


def leave_one_word_out(clip: Clip, images: torch.Tensor, captions: Sequence[str],
                       template: str = TEMPLATE, device: str = "cpu", batch_size: int = 512,
                       image_index: Sequence[int] | None = None) -> Attributions:
    """Ablation baseline: a_j = s(T) - s(T without word j); negative when deleting j helps.

    Needs one text forward pass per word (n_words + 1 per pair) and no backward pass.
    ``images`` and ``image_index`` as in :func:`clip4dm_variants`.
    """
    img = encode_pair_images(clip, images, len(captions), image_index, device)  # (N, D)
    tokens = [official_words(c) for c in captions]
    cand = [[i for i, (w, _) in enumerate(ts) if w not in PUNCTUATION] for ts in tokens]
    words = [[ts[i][0] for i in c] for ts, c in zip(tokens, cand)]
    variants, owner, head = [], [], template.split()
    for i, (ts, c) in enumerate(zip(tokens, cand)):
        variants.append(head + [w for w, _ in ts])
        variants += [head + [w for k, (w, _) in enumerate(ts) if k != j] for j in c]
        owner += [i] * (len(c) + 1)
    with torch.no_grad():
        txt = torch.cat([encode_text_trimmed(clip.model, tokenize_words(clip, variants[k:k + batch_size]).to(device))
                         for k in range(0, len(variants), batch_size)])
        txt = torch.nn.functional.normalize(txt, dim=-1)  # (sum_i (n_i + 1), D)
        cos = (img[torch.as_tensor(owner, device=device)] * txt).sum(-1).float().cpu().numpy()
    starts = np.cumsum([0] + [len(ws) + 1 for ws in words[:-1]])  # row of each full caption
    out = [(cos[k] - cos[k + 1:k + 1 + len(ws)]).astype(np.float64) for k, ws in zip(starts, words)]
    source = [np.array([ts[i][1] for i in c], dtype=int) for ts, c in zip(tokens, cand)]
    return Attributions(words, out, cos[starts], source)


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
