"""Attention probabilities of open_clip transformers, kept in the autograd graph.

open_clip 3.3.0's ``ResidualAttentionBlock.attention`` calls ``nn.MultiheadAttention`` with
``need_weights=False``, so the probabilities are never materialised (fused kernel). Even
with ``need_weights=True`` torch returns a *view* made after the value product, whose
gradient is not the gradient of the score with respect to the attention map. So, inside
:func:`capture_attention`, each block's ``attn`` module is swapped for a wrapper that
computes the same attention explicitly with the block's own weights:

    A^h = softmax(Q^h K^h^T / sqrt(d_h) + M),   out = concat_h(A^h V^h) W_o + b_o

and records every A^h_l (shape (B, H, L, S)) as it is used, so that
``torch.autograd.grad(score, capture.maps)`` gives grad(A^h_l) for Chefer-style
attributions. The wrapper is written by hand because torch offers no public hook that
returns the probabilities inside the graph. The original modules are restored on exit,
also after an exception.
"""
from __future__ import annotations

import contextlib
import functools
import math
from dataclasses import dataclass, field
from typing import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class AttentionCapture:
    """The attention maps of one forward pass, one (B, H, L, S) tensor per block, in order."""

    maps: list[torch.Tensor] = field(default_factory=list)

    def clear(self) -> None:
        self.maps.clear()

    def gradients(self, score: torch.Tensor, retain_graph: bool = False) -> list[torch.Tensor]:
        """grad(A^h_l) of ``score.sum()`` for every captured map (same shapes as ``maps``).

        Summing over a batch gives each pair its own gradient because pairs do not interact
        in an eval-mode CLIP encoder (LayerNorm is per token, there is no batch norm).
        """
        if not self.maps:
            raise RuntimeError("no attention maps captured: run the model inside capture_attention")
        return list(torch.autograd.grad(score.sum(), self.maps, retain_graph=retain_graph))


def explicit_attention(mha: nn.MultiheadAttention, query: torch.Tensor, key: torch.Tensor,
                       value: torch.Tensor, attn_mask: torch.Tensor | None = None,
                       on_probs: Callable[[torch.Tensor], None] | None = None) -> torch.Tensor:
    """Multi-head attention written out with ``mha``'s own weights:

        A^h = softmax(Q^h K^h^T / sqrt(d_h) + M),   out = concat_h(A^h V^h) W_o + b_o

    Same result as ``mha(query, key, value, attn_mask=M)[0]`` up to float rounding.
    ``on_probs`` receives every A^h (B, H, L, S) as it is used (attention capture). When
    query, key and value are one tensor (self-attention), Q, K and V come from one matmul.
    Hand-written because torch's fused kernels hide A^h and, on CPU under bf16, their
    backward is several times slower than these three batched matmuls at CLIP's short
    sequence lengths (measured in ``benchmarks/bench_train.py``).
    """
    if mha.in_proj_weight is None:
        raise ValueError("explicit attention: separate q/k/v projection weights "
                         "(kdim/vdim != embed_dim) are not supported")
    if not mha.batch_first:  # (L, B, E) -> (B, L, E)
        query, key, value = (t.transpose(0, 1) for t in (query, key, value))
    e, h = mha.embed_dim, mha.num_heads
    if query is key and key is value:
        qkv = F.linear(query, mha.in_proj_weight, mha.in_proj_bias)  # (B, L, 3E)
        q, k, v = qkv.unflatten(-1, (3, h, e // h)).permute(2, 0, 3, 1, 4)  # 3 x (B, H, L, d_h)
    else:
        q, k, v = (_project(mha, x, part) for part, x in enumerate((query, key, value)))
    scores = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5  # (B, H, L, S)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            attn_mask = torch.zeros_like(attn_mask, dtype=scores.dtype).masked_fill(attn_mask, float("-inf"))
        if attn_mask.dim() == 3:  # (B * H, L, S)
            attn_mask = attn_mask.view(scores.shape)
        scores = scores + attn_mask
    probs = scores.softmax(dim=-1)  # A^h: (B, H, L, S)
    if on_probs is not None:
        on_probs(probs)
    probs = F.dropout(probs, mha.dropout, training=mha.training)
    out = (probs @ v).transpose(1, 2).flatten(2)  # (B, L, E)
    out = mha.out_proj(out)
    return out.transpose(0, 1) if not mha.batch_first else out


def _project(mha: nn.MultiheadAttention, x: torch.Tensor, part: int) -> torch.Tensor:
    """(B, L, E) -> (B, H, L, d_h) for the query (0), key (1) or value (2) projection."""
    e, h = mha.embed_dim, mha.num_heads
    bias = mha.in_proj_bias[part * e:(part + 1) * e] if mha.in_proj_bias is not None else None
    y = F.linear(x, mha.in_proj_weight[part * e:(part + 1) * e], bias)  # (B, L, E)
    return y.unflatten(-1, (h, e // h)).transpose(1, 2)  # (B, H, L, d_h)


class _CapturingAttention(nn.Module):
    """Drop-in for an ``nn.MultiheadAttention`` that records its probabilities."""

    def __init__(self, mha: nn.MultiheadAttention, capture: AttentionCapture):
        super().__init__()
        if mha.in_proj_weight is None:
            raise ValueError("capture_attention: attention with separate q/k/v projection "
                             "weights (kdim/vdim != embed_dim) is not supported")
        self.mha = mha
        self.capture = capture

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                key_padding_mask: torch.Tensor | None = None, need_weights: bool = True,
                attn_mask: torch.Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[torch.Tensor, None]:
        if key_padding_mask is not None or is_causal:
            raise ValueError("capture_attention: key_padding_mask / is_causal are not supported; "
                             "open_clip passes its masks as attn_mask")
        out = explicit_attention(self.mha, query, key, value, attn_mask, self.capture.maps.append)
        return out, None


def attention_blocks(tower: nn.Module) -> list[nn.Module]:
    """The residual attention blocks of a text model, a CLIP (its text tower) or a ViT."""
    transformer = getattr(tower, "transformer", tower)
    blocks = getattr(transformer, "resblocks", None)
    if blocks is None:
        raise TypeError(f"capture_attention: {type(tower).__name__} has no transformer.resblocks "
                        "(a ModifiedResNet vision tower has no per-layer self-attention)")
    for i, block in enumerate(blocks):
        if not isinstance(getattr(block, "attn", None), (nn.MultiheadAttention, _CapturingAttention)):
            raise TypeError(f"capture_attention: block {i} has no nn.MultiheadAttention 'attn'")
    return list(blocks)


@contextlib.contextmanager
def capture_attention(tower: nn.Module, layers: list[int] | None = None) -> Iterator[AttentionCapture]:
    """Record A^h_l of the blocks of ``tower`` while inside the ``with`` block: every block,
    or only ``layers`` (indices 0..n-1); the others keep their fused attention kernel, which
    is what makes a last-n-layers attribution cheaper than capturing all of them.
    ``capture.maps`` then holds one map per captured block, in forward order.

    ``tower`` is an ``open_clip.CLIP`` (its text transformer), a ``TextTransformer``, a
    ``VisionTransformer`` (pass ``model.visual``) or a ``Transformer``. Outputs equal the
    unmodified model's up to float rounding; the model is restored on exit.
    """
    capture = AttentionCapture()
    blocks = attention_blocks(tower)
    chosen = range(len(blocks)) if layers is None else sorted(set(layers))
    if any(not 0 <= i < len(blocks) for i in chosen):
        raise ValueError(f"capture_attention: layers {list(chosen)} out of range for {len(blocks)} blocks")
    originals = [block.attn for block in blocks]
    if any(isinstance(m, _CapturingAttention) for m in originals):
        raise RuntimeError("capture_attention: this tower is already being captured")
    try:
        for i in chosen:
            blocks[i].attn = _CapturingAttention(originals[i], capture)
        yield capture
    finally:
        for block, mha in zip(blocks, originals):
            block.attn = mha


def _explicit_block_attention(block: nn.Module, q_x: torch.Tensor, k_x: torch.Tensor | None = None,
                              v_x: torch.Tensor | None = None,
                              attn_mask: torch.Tensor | None = None) -> torch.Tensor:
    """open_clip's ``ResidualAttentionBlock.attention`` with :func:`explicit_attention` inside."""
    k_x = q_x if k_x is None else k_x
    v_x = q_x if v_x is None else v_x
    attn_mask = attn_mask.to(q_x.dtype) if attn_mask is not None else None
    if not isinstance(block.attn, nn.MultiheadAttention):  # e.g. a capture in progress
        return block.attn(q_x, k_x, v_x, need_weights=False, attn_mask=attn_mask)[0]
    return explicit_attention(block.attn, q_x, k_x, v_x, attn_mask)


def set_explicit_attention(model: nn.Module, enabled: bool = True) -> int:
    """Route every open_clip residual attention block of ``model`` through
    :func:`explicit_attention` (``enabled=True``) or back to ``nn.MultiheadAttention``.

    The switch is an attribute on each block instance, so parameters, state_dict keys and
    checkpoints are unchanged. Returns the number of blocks switched (0 for a model
    without transformer blocks, e.g. a ResNet image tower alone).
    """
    from open_clip.transformer import ResidualAttentionBlock

    return _patch_instances(model, ResidualAttentionBlock, "attention", _explicit_block_attention, enabled)


def _patch_instances(model: nn.Module, kind: type, attribute: str, function, enabled: bool) -> int:
    """Bind ``function(module, ...)`` as ``attribute`` on every ``kind`` module of ``model``
    (``enabled``), or delete that instance attribute so the class's own method is back;
    returns how many modules were switched."""
    modules = [m for m in model.modules() if isinstance(m, kind)]
    for module in modules:
        if enabled:
            setattr(module, attribute, functools.partial(function, module))
        elif attribute in module.__dict__:
            delattr(module, attribute)
    return len(modules)


def first_query_attention_pool(pool: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """open_clip's ``AttentionPool2d`` for its one output that CLIP uses, the mean token's.

    The pooling attends from all HW + 1 tokens and keeps row 0; this computes row 0 alone,
    softmax(q_0 K^T / sqrt(d)) V followed by the output projection, with q_0 the mean token's
    query. Same function and gradients, without the HW wasted query and output projections.
    x: (N, C, h, w) -> (N, D).
    """
    n, c, h, w = x.shape
    tokens = x.reshape(n, c, h * w).permute(2, 0, 1)  # (HW, N, C)
    tokens = torch.cat([tokens.mean(dim=0, keepdim=True), tokens], dim=0)  # (L, N, C)
    tokens = tokens + pool.positional_embedding[:, None, :].to(tokens.dtype)
    heads, length = pool.num_heads, tokens.shape[0]
    d = c // heads
    q = pool.q_proj(tokens[:1]).reshape(1, n * heads, d).transpose(0, 1)  # (N*H, 1, d)
    k = pool.k_proj(tokens).reshape(length, n * heads, d).transpose(0, 1)  # (N*H, L, d)
    v = pool.v_proj(tokens).reshape(length, n * heads, d).transpose(0, 1)  # (N*H, L, d)
    attn = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(d), dim=-1)  # (N*H, 1, L)
    out = (attn @ v).transpose(0, 1).reshape(n, c)  # (N, C)
    return pool.c_proj(out)


def set_first_query_pooling(model: nn.Module, enabled: bool = True) -> int:
    """Route every open_clip ``AttentionPool2d`` of ``model`` through
    :func:`first_query_attention_pool` (or back); returns how many were switched."""
    from open_clip.modified_resnet import AttentionPool2d

    return _patch_instances(model, AttentionPool2d, "forward", first_query_attention_pool, enabled)
