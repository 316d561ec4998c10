"""SUM-CLIP: N learnable queries, pooled by CLIP's own frozen attention pooling (FOR, 2412.18806).

CLIP's ResNet ends in an attention pooling. With the layer-4 map f_1..f_P (P = h w),
positional embeddings p_0..p_P and the mean token m = (1/P) sum_j f_j, it computes

    e = W_c MHA( q = W_q (m + p_0),  K = W_k [m + p_0, f_j + p_j],  V = W_v [m + p_0, f_j + p_j] ),

one embedding per image. SUM-CLIP replaces the mean token by N tokens
t_i = U h_i (i = 1..N, the paper's design), where h = Dec(Q, f) are N learnable queries Q
(N, d) refined by DETR-style decoder layers over the (projected) feature map and U (C, d)
lifts them back to the pooling's width C. Each t_i is pooled exactly as CLIP pools m, with
W_q, W_k, W_v and p frozen, so e_i = Pool(t_i) stays in CLIP's joint space. U starts at
zero, so at initialisation every t_i is 0 (with the m-residual below, every e_i is then
CLIP's global embedding).

Two options (``residual``, ``train_out``) select the setting:

* ``residual=True`` (the "m-residual", our earlier design, not the paper's): t_i = m + U h_i.
  ``residual=False`` (the paper's design): t_i = U h_i, the decoder's output alone replaces
  the mean token, so nothing ties a slot to the global embedding.
* ``train_out=True``: the pooling's output projection W_c (the "o" of the paper's v,o
  ablation) is a trainable copy, so training can move embeddings away from the text
  space, and forgetting of unlabelled categories becomes possible. ``False`` keeps the
  whole pooling frozen (the frozen-backbone arm, where nothing can be forgotten).

Deviation for a CPU: the paper's decoder works at width C; ours works at width d (a
parameter: chapter 3 runs d = 16 on the toy CLIP) with linear maps C -> d for the memory and d -> C (U) for the
output. Because the pooling's projections are linear and frozen,
W (m + p_0 + U h) = W (m + p_0) + (W U) h, so the per-image terms W (m + p_0) and the
map's keys and values are computed once (:func:`pool_memory`) and reused every epoch.
:func:`frozen_attention_pool` is the plain form, tested against open_clip's
``AttentionPool2d``; :class:`SumClipHead` is tested against it.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from open_clip.modified_resnet import AttentionPool2d
from torch import nn


@dataclass
class PoolMemory:
    """What the frozen pooling needs from one batch of feature maps, computed once."""

    feature_map: torch.Tensor  # (B, P, C) f_j + p_j, the decoder's memory
    mean: torch.Tensor  # (B, C) m + p_0
    k_map: torch.Tensor  # (B, P, C) W_k (f_j + p_j)
    v_map: torch.Tensor  # (B, P, C) W_v (f_j + p_j)
    q_mean: torch.Tensor  # (B, C) W_q (m + p_0)
    k_mean: torch.Tensor  # (B, C) W_k (m + p_0)
    v_mean: torch.Tensor  # (B, C) W_v (m + p_0)

    def __len__(self) -> int:
        return self.mean.shape[0]

    def select(self, idx: torch.Tensor | slice) -> "PoolMemory":
        return PoolMemory(*(getattr(self, f)[idx] for f in self.__dataclass_fields__))

    def to(self, device: torch.device | str) -> "PoolMemory":
        return PoolMemory(*(getattr(self, f).to(device) for f in self.__dataclass_fields__))


def _check_pool(pool: nn.Module) -> None:
    if not isinstance(pool, AttentionPool2d):
        raise TypeError(f"pool must be open_clip's AttentionPool2d, got {type(pool).__name__}")


@torch.no_grad()
def pool_memory(pool: AttentionPool2d, feature_map: torch.Tensor) -> PoolMemory:
    """(B, C, h, w) layer-4 map -> the frozen pooling's per-image keys, values and mean terms."""
    _check_pool(pool)
    flat = feature_map.flatten(2).transpose(1, 2)  # (B, P, C)
    pos = pool.positional_embedding.to(flat.dtype)  # (1 + P, C)
    if flat.shape[1] + 1 != pos.shape[0]:
        raise ValueError(f"feature_map has {flat.shape[1]} positions; the pooling expects "
                         f"{pos.shape[0] - 1}")
    fmap = flat + pos[1:]  # (B, P, C)
    mean = flat.mean(1) + pos[0]  # (B, C)
    return PoolMemory(fmap, mean, pool.k_proj(fmap), pool.v_proj(fmap),
                      pool.q_proj(mean), pool.k_proj(mean), pool.v_proj(mean))


def attend(pool: AttentionPool2d, q: torch.Tensor, k_self: torch.Tensor, v_self: torch.Tensor,
           k_map: torch.Tensor, v_map: torch.Tensor, out_proj: nn.Module | None = None,
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """Multi-head attention of N query tokens over [itself, the map], then W_c (Eq. (eq-attnpool), chapter 3).

    a_i = softmax_j( <q_i, k_j> / sqrt(d_head) ) over j in {self, 1..P} (per head);
    e_i = W_c concat_heads( sum_j a_ij v_j ).
    q, k_self, v_self: (B, N, C) projected; k_map, v_map: (B, P, C) projected.
    Returns e (B, N, D) and the head-averaged attention a (B, N, 1 + P). ``out_proj``
    replaces W_c (a trainable copy); None uses the pooling's own.
    """
    b, n, c = q.shape
    heads = pool.num_heads
    dh = c // heads
    qh = q.view(b, n, heads, dh).transpose(1, 2) * dh ** -0.5  # (B, H, N, dh)
    ks = k_self.view(b, n, heads, dh).transpose(1, 2)  # (B, H, N, dh)
    vs = v_self.view(b, n, heads, dh).transpose(1, 2)
    km = k_map.view(b, -1, heads, dh).transpose(1, 2)  # (B, H, P, dh)
    vm = v_map.view(b, -1, heads, dh).transpose(1, 2)
    logits = torch.cat([(qh * ks).sum(-1, keepdim=True), qh @ km.transpose(-1, -2)], -1)  # (B, H, N, 1+P)
    attn = logits.softmax(-1)
    out = attn[..., :1] * vs + attn[..., 1:] @ vm  # (B, H, N, dh)
    out = out.transpose(1, 2).reshape(b, n, c)  # (B, N, C)
    return (pool.c_proj if out_proj is None else out_proj)(out), attn.mean(1)


def frozen_attention_pool(pool: AttentionPool2d, feature_map: torch.Tensor,
                          tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """CLIP's attention pooling with the mean token replaced by each of N tokens.

    feature_map (B, C, h, w), tokens (B, N, C) -> embeddings (B, N, D), attention (B, N, 1+P).
    With tokens = the map's mean (N = 1) this is ``pool(feature_map)``.
    """
    _check_pool(pool)
    flat = feature_map.flatten(2).transpose(1, 2)  # (B, P, C)
    pos = pool.positional_embedding.to(flat.dtype)
    fmap = flat + pos[1:]
    t = tokens + pos[0]  # (B, N, C)
    return attend(pool, pool.q_proj(t), pool.k_proj(t), pool.v_proj(t),
                  pool.k_proj(fmap), pool.v_proj(fmap))


class SumClipHead(nn.Module):
    """N learnable queries -> decoder layers over the map -> N tokens t_i = [m +] U h_i -> pool
    (Eq. (eq-sumclip-tokens), chapter 3).

    residual: t_i = m + U h_i (True) or U h_i (False, the paper's design); train_out: W_c is
    a trainable copy (True) or CLIP's frozen one (False).

    The defaults are not the paper's head: the paper's is N = 50, ``residual=False``,
    ``train_out=False`` and a decoder at CLIP's width C (``d_model=C``). Chapter 3 passes its
    parameters explicitly (the paper's head is its arm "FOR, paper's head"), and
    ``benchmarks/bench_for.py`` passes the paper's head (``PAPER_HEAD``).
    """

    def __init__(self, pool: AttentionPool2d, n_queries: int = 10, n_layers: int = 1,
                 d_model: int = 128, n_heads: int = 4, residual: bool = True,
                 train_out: bool = False) -> None:
        super().__init__()
        _check_pool(pool)
        if n_queries < 1 or n_layers < 1:
            raise ValueError(f"n_queries and n_layers must be >= 1, got {n_queries}, {n_layers}")
        c = pool.q_proj.in_features
        self.pool = pool
        for p in self.pool.parameters():  # W_q, W_k, W_v, W_c and p stay CLIP's
            p.requires_grad_(False)
        self.queries = nn.Parameter(torch.randn(n_queries, d_model) * 0.02)  # Q (N, d)
        self.memory_proj = nn.Linear(c, d_model)  # C -> d
        layer = nn.TransformerDecoderLayer(d_model, n_heads, dim_feedforward=2 * d_model,
                                           dropout=0.0, batch_first=True, norm_first=True)
        self.decoder = nn.TransformerDecoder(layer, n_layers)
        self.up = nn.Linear(d_model, c, bias=False)  # U (C, d)
        nn.init.zeros_(self.up.weight)
        self.residual = bool(residual)
        self.out_proj = None
        if train_out:  # a trainable copy of W_c; CLIP's own stays untouched
            self.out_proj = copy.deepcopy(pool.c_proj)
            for p in self.out_proj.parameters():
                p.requires_grad_(True)

    @property
    def n_queries(self) -> int:
        return self.queries.shape[0]

    def refine(self, mem: PoolMemory) -> torch.Tensor:
        """h = Dec(Q, f): (B, N, d)."""
        memory = self.memory_proj(mem.feature_map)  # (B, P, d)
        tgt = self.queries.expand(len(mem), -1, -1)  # (B, N, d)
        return self.decoder(tgt, memory)

    def tokens(self, mem: PoolMemory) -> torch.Tensor:
        """t_i = [m +] U h_i without p_0: (B, N, C); feed to :func:`frozen_attention_pool`."""
        pos0 = self.pool.positional_embedding[0]
        up = self.up(self.refine(mem))  # (B, N, C)
        return (mem.mean - pos0)[:, None] + up if self.residual else up

    def forward(self, mem: PoolMemory) -> tuple[torch.Tensor, torch.Tensor]:
        """L2-normalised embeddings (B, N, D) and attention over [self, map] (B, N, 1 + P)."""
        delta = self.refine(mem)  # (B, N, d)
        wu = [proj.weight @ self.up.weight for proj in  # (C, d) each: W U
              (self.pool.q_proj, self.pool.k_proj, self.pool.v_proj)]
        if self.residual:  # W (m + p_0), cached per image
            base = (mem.q_mean[:, None], mem.k_mean[:, None], mem.v_mean[:, None])  # (B, 1, C)
        else:  # W p_0, the same for every image
            pos0 = self.pool.positional_embedding[0].to(delta.dtype)
            base = tuple(proj(pos0) for proj in (self.pool.q_proj, self.pool.k_proj, self.pool.v_proj))
        q = base[0] + delta @ wu[0].T  # (B, N, C)
        k = base[1] + delta @ wu[1].T
        v = base[2] + delta @ wu[2].T
        emb, attn = attend(self.pool, q, k, v, mem.k_map, mem.v_map, self.out_proj)
        return F.normalize(emb, dim=-1), attn
