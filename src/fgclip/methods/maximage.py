"""MaxImage (arXiv 1908.02950): localization maps from a retrieval model's score.

An image branch gives a feature v_{r,c} in R^E per map position, a caption branch a vector
t_d in R^E per word. Their dot products form the co-localization volume
m_{r,c,d} = <v_{r,c}, t_d>; an aggregator turns it into the pair score S(I, T):

* MaxImage:        S = (1/N_d) sum_d max_{r,c} m_{r,c,d}
* average pooling: S = (1/N_d) sum_d (1/(R C)) sum_{r,c} m_{r,c,d}
* max over tokens: S = (1/(R C)) sum_{r,c} max_d m_{r,c,d}

Every score function takes leading replica dimensions (chapter 1 trains its seeds side by
side); :func:`ragged_pair_scores` is the padding-free form training uses. At test time word d's map is m_{:,:,d}; its argmax is the pointing prediction.

The max over positions is ``Tensor.max(dim).values``, not ``amax``: the same values, but its
gradient goes to the one position ``max`` returns, where ``amax`` spreads it evenly over tied
positions through a dense mask of the volume. The two gradients are the same wherever no two
positions tie, and the backward pass needs no mask the size of the volume (it is most of a
training step's time in chapter 1, where 25 seeds train side by side).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..models import tokens as bpe  # BPE tokens -> words, shared with chapter 2

AGGREGATORS = ("maximage", "average", "max-tokens")
SCORES = ("cosine", "dot")
PARSE_MODES = ("vector", "maps")


def colocalization_volume(v: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """The co-localization volume, Eq. (eq-colocalization-volume) of chapter 1:
    m_{r,c,d} = <v_{r,c}, t_d>, for every image i and caption j of a batch at once.

    v: (Bi, E, h, w) image features; t: (Bt, L, E) word vectors -> m: (Bi, Bt, h*w, L), the
    positions (r, c) flattened row by row; one matmul of the (Bi*h*w, E) positions against
    the (Bt*L, E) words. Leading dimensions (independent replicas, e.g. one per training
    seed) are kept: v (..., Bi, E, h, w) and t (..., Bt, L, E) give (..., Bi, Bt, h*w, L).
    """
    if v.ndim < 4 or t.ndim < 3 or v.shape[-3] != t.shape[-1] or v.shape[:-4] != t.shape[:-3]:
        raise ValueError(f"need v (Bi, E, h, w) and t (Bt, L, E) with the same E (and the same "
                         f"leading dimensions), got {tuple(v.shape)} and {tuple(t.shape)}")
    *lead, bi, e, h, w = v.shape
    bt, n_words, _ = t.shape[-3:]
    pos = v.flatten(-2).transpose(-1, -2).reshape(*lead, bi * h * w, e)  # (..., Bi*P, E)
    m = pos @ t.reshape(*lead, bt * n_words, e).transpose(-1, -2)  # (..., Bi*P, Bt*L)
    return m.view(*lead, bi, h * w, bt, n_words).transpose(-3, -2)  # (..., Bi, Bt, P, L)


def aggregate(m: torch.Tensor, mask: torch.Tensor, aggregator: str = "maximage") -> torch.Tensor:
    """Pair scores S(I, T) (Bi, Bt) from the volume m (Bi, Bt, P, L) and the word mask (Bt, L).

    Eqs. of chapter 1, with the N_d words d of a caption and the P = R*C positions (r, c):
    "maximage" (eq-maximage-score):       S = 1/N_d sum_d max_{r,c} m_{r,c,d};
    "average" (eq-average-pooling-score): S = 1/N_d sum_d 1/(RC) sum_{r,c} m_{r,c,d};
    "max-tokens" (eq-max-tokens-score):   S = 1/(RC) sum_{r,c} max_d m_{r,c,d}.
    Padded words (mask False) take no part in any mean or max. Leading dimensions are kept:
    m (..., Bi, Bt, P, L) and mask (..., Bt, L) give (..., Bi, Bt).
    """
    if aggregator not in AGGREGATORS:
        raise ValueError(f"aggregator must be one of {AGGREGATORS}, got {aggregator!r}")
    if m.ndim < 4 or mask.shape != (*m.shape[:-4], m.shape[-3], m.shape[-1]):
        raise ValueError(f"mask {tuple(mask.shape)} does not match volume {tuple(m.shape)}")
    if not mask.any(dim=-1).all():
        raise ValueError("every caption needs at least one word (mask row all False)")
    keep = mask[..., None, :, None, :]  # (..., 1, Bt, 1, L)
    n_words = mask.sum(dim=-1).to(m.dtype)[..., None, :]  # (..., 1, Bt)
    if aggregator == "max-tokens":
        return m.masked_fill(~keep, float("-inf")).amax(dim=-1).mean(dim=-1)
    per_word = m.max(dim=-2).values if aggregator == "maximage" else m.mean(dim=-2)  # (..., Bi, Bt, L)
    return (per_word * mask[..., None, :, :].to(m.dtype)).sum(dim=-1) / n_words


def pair_scores(v: torch.Tensor, t: torch.Tensor, mask: torch.Tensor,
                aggregator: str = "maximage") -> torch.Tensor:
    """S (Bi, Bt) for all image-caption pairs of a batch: aggregate(colocalization_volume)."""
    return aggregate(colocalization_volume(v, t), mask, aggregator)


def ragged_pair_scores(v: torch.Tensor, t: torch.Tensor, caption_of_word: torch.Tensor,
                       n_captions: int, aggregator: str = "maximage") -> torch.Tensor:
    """The scores of :func:`pair_scores` without padding the captions: t holds every word
    of the batch, caption after caption, and ``caption_of_word`` says whose it is.

    v (..., Bi, E, h, w); t (..., W, E); caption_of_word (..., W) in 0..Bt-1, or -1 for an
    empty slot (replicas whose batches hold fewer words) -> S (..., Bi, Bt). For "maximage"
    and "average" the per-word reduction over positions comes first, so
    S = per_word @ A with A[w, j] = 1[caption(w) = j] / N_j: the same numbers as
    eq-maximage-score and eq-average-pooling-score, with W words in the product instead of
    Bt * L_max (toy captions of about 6 words padded to 17 cost three times as much).
    """
    if aggregator not in ("maximage", "average"):
        raise ValueError(f"ragged scores need a per-word aggregator (maximage, average), got {aggregator!r}")
    if v.ndim < 4 or t.ndim < 2 or v.shape[-3] != t.shape[-1] or caption_of_word.shape != t.shape[:-1]:
        raise ValueError(f"need v (..., Bi, E, h, w), t (..., W, E) and caption_of_word (..., W), got "
                         f"{tuple(v.shape)}, {tuple(t.shape)} and {tuple(caption_of_word.shape)}")
    *lead, bi, e, h, w = v.shape
    pos = v.flatten(-2).transpose(-1, -2).reshape(*lead, bi * h * w, e)  # (..., Bi*P, E)
    m = (pos @ t.transpose(-1, -2)).view(*lead, bi, h * w, t.shape[-2])  # (..., Bi, P, W)
    per_word = m.max(dim=-2).values if aggregator == "maximage" else m.mean(dim=-2)  # (..., Bi, W)
    onehot = (caption_of_word[..., None] == torch.arange(n_captions, device=t.device)).to(t.dtype)  # (..., W, Bt)
    counts = onehot.sum(dim=-2, keepdim=True)  # (..., 1, Bt)
    if not (counts > 0).all():
        raise ValueError("every caption needs at least one word")
    return per_word @ (onehot / counts)


def _mlp(d_in: int, d_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, d_out), nn.GELU(), nn.Linear(d_out, d_out))


class MaxImageHeads(nn.Module):
    """The two trainable branches on top of frozen features: a per-position MLP for the
    image (a pair of 1x1 convolutions, it never mixes positions) and a per-word MLP for the
    caption, both into a joint space of size ``embed_dim``.

    ``score``: "dot" is the paper's Eq. (1), m = <v, t> on the raw head outputs; "cosine"
    L2-normalises v per position and t per word first (m in [-1, 1]; a deviation that
    removes any high-norm "hub" cell)."""

    def __init__(self, image_dim: int, word_dim: int, embed_dim: int = 64,
                 score: str = "cosine"):
        super().__init__()
        if score not in SCORES:
            raise ValueError(f"score must be one of {SCORES}, got {score!r}")
        self.score = score
        self.image = _mlp(image_dim, embed_dim)
        self.text = _mlp(word_dim, embed_dim)

    def encode_image(self, feats: torch.Tensor) -> torch.Tensor:
        """(B, Di, h, w) frozen features -> v (B, E, h, w)."""
        return self.image(feats.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

    def encode_words(self, words: torch.Tensor) -> torch.Tensor:
        """(B, L, Dt) frozen word features -> t (B, L, E)."""
        return self.text(words)

    def image_vectors(self, feats: torch.Tensor) -> torch.Tensor:
        """v as it enters m: (B, Di, h, w) -> (B, E, h, w), unit norm per position for cosine."""
        v = self.encode_image(feats)
        return F.normalize(v, dim=1) if self.score == "cosine" else v

    def word_vectors(self, words: torch.Tensor) -> torch.Tensor:
        """t as it enters m: (..., Dt) -> (..., E), unit norm per word for cosine."""
        t = self.encode_words(words)
        return F.normalize(t, dim=-1) if self.score == "cosine" else t


def word_maps(v: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """One image's word maps m_{:,:,d}: v (E, h, w), t (L, E) -> (L, h, w)."""
    return torch.einsum("ehw,le->lhw", v, t)


def _standardize(maps: torch.Tensor) -> torch.Tensor:
    """(L, h, w) maps, each shifted and scaled to zero mean and unit std over positions."""
    flat = maps.flatten(1)
    z = (flat - flat.mean(dim=1, keepdim=True)) / flat.std(dim=1, keepdim=True).clamp_min(1e-6)
    return z.view_as(maps)


def phrase_map(heads: MaxImageHeads, v: torch.Tensor, word_feats: torch.Tensor,
               mode: str = "vector") -> torch.Tensor:
    """The map of a multi-word phrase, in the paper's two parse modes.

    v: (E, h, w) one image's projected features; word_feats: (n, Dt) the phrase's frozen
    word features. ``"vector"``: one vector t_P = f_text((1/n) sum_w x_w), map <v, t_P>.
    ``"maps"``: (1/n) sum_w z(<v, f_text(x_w)>), the mean of the word maps each
    standardized over positions (z) so that no word dominates by its norm. Returns (h, w).
    """
    if mode not in PARSE_MODES:
        raise ValueError(f"mode must be one of {PARSE_MODES}, got {mode!r}")
    if word_feats.ndim != 2 or len(word_feats) == 0:
        raise ValueError(f"word_feats must be a non-empty (n, Dt), got {tuple(word_feats.shape)}")
    if mode == "vector":
        t = heads.encode_words(word_feats.mean(dim=0, keepdim=True))  # (1, E)
        return word_maps(v, t)[0]
    maps = word_maps(v, heads.encode_words(word_feats))  # (n, h, w)
    return _standardize(maps).mean(dim=0)


def word_token_spans(tokenizer, words: Sequence[str]) -> list[tuple[int, int]]:
    """Token positions [start, end) of each whitespace word in the tokenized caption
    (position 0 is [SOT]); :func:`fgclip.models.tokens.token_counts` checks the split."""
    return bpe.spans_from_counts(bpe.token_counts(words, tokenizer.encode), start=1)


def normalize_features(x: torch.Tensor, dim: int) -> torch.Tensor:
    """L2-normalise along ``dim`` (the frozen features enter the heads on the unit sphere)."""
    return F.normalize(x, dim=dim)
