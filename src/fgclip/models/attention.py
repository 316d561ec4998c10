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
from dataclasses import dataclass, field
from typing import Iterator

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


class _CapturingAttention(nn.Module):
    """Drop-in for an ``nn.MultiheadAttention`` that records its probabilities."""

    def __init__(self, mha: nn.MultiheadAttention, capture: AttentionCapture):
        super().__init__()
        if mha.in_proj_weight is None:
            raise ValueError("capture_attention: attention with separate q/k/v projection "
                             "weights (kdim/vdim != embed_dim) is not supported")
        self.mha = mha
        self.capture = capture

    def _project(self, x: torch.Tensor, part: int) -> torch.Tensor:
        """(B, L, E) -> (B, H, L, d_h) for the query (0), key (1) or value (2) projection."""
        e, h = self.mha.embed_dim, self.mha.num_heads
        bias = self.mha.in_proj_bias[part * e:(part + 1) * e] if self.mha.in_proj_bias is not None else None
        y = F.linear(x, self.mha.in_proj_weight[part * e:(part + 1) * e], bias)  # (B, L, E)
        return y.unflatten(-1, (h, e // h)).transpose(1, 2)  # (B, H, L, d_h)

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                key_padding_mask: torch.Tensor | None = None, need_weights: bool = True,
                attn_mask: torch.Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[torch.Tensor, None]:
        if key_padding_mask is not None or is_causal:
            raise ValueError("capture_attention: key_padding_mask / is_causal are not supported; "
                             "open_clip passes its masks as attn_mask")
        if not self.mha.batch_first:  # (L, B, E) -> (B, L, E)
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        q, k, v = self._project(query, 0), self._project(key, 1), self._project(value, 2)
        scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5  # (B, H, L, S)
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                attn_mask = torch.zeros_like(attn_mask, dtype=scores.dtype).masked_fill(attn_mask, float("-inf"))
            if attn_mask.dim() == 3:  # (B * H, L, S)
                attn_mask = attn_mask.view(scores.shape)
            scores = scores + attn_mask
        probs = scores.softmax(dim=-1)  # A^h_l: (B, H, L, S)
        self.capture.maps.append(probs)
        probs = F.dropout(probs, self.mha.dropout, training=self.training)
        out = (probs @ v).transpose(1, 2).flatten(2)  # (B, L, E)
        out = self.mha.out_proj(out)
        if not self.mha.batch_first:
            out = out.transpose(0, 1)
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
def capture_attention(tower: nn.Module) -> Iterator[AttentionCapture]:
    """Record A^h_l of every block of ``tower`` while inside the ``with`` block.

    ``tower`` is an ``open_clip.CLIP`` (its text transformer), a ``TextTransformer``, a
    ``VisionTransformer`` (pass ``model.visual``) or a ``Transformer``. Outputs equal the
    unmodified model's up to float rounding; the model is restored on exit.
    """
    capture = AttentionCapture()
    blocks = attention_blocks(tower)
    originals = [block.attn for block in blocks]
    if any(isinstance(m, _CapturingAttention) for m in originals):
        raise RuntimeError("capture_attention: this tower is already being captured")
    try:
        for block, mha in zip(blocks, originals):
            block.attn = _CapturingAttention(mha, capture)
        yield capture
    finally:
        for block, mha in zip(blocks, originals):
            block.attn = mha
