"""CoOp prompts (Zhou et al. 2022) through the FROZEN open_clip text transformer.

A prompt for category c is t_c = [SOT] [V]^c_1 ... [V]^c_M [CLASS_c] . [EOT], where the M
context vectors [V] are learned (one set per category, or one set shared by all) and every
other token keeps its frozen embedding. The sequence then goes through exactly the steps of
``open_clip.CLIP.encode_text``: + positional embedding, transformer with the causal mask,
``ln_final``, pooling at the EOT position (``text_global_pool``, the same rule and token
ids as open_clip), and the text projection. Only the context vectors are trainable.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch
from open_clip.transformer import text_global_pool
from torch import nn


def _placeholder_words(n_ctx: int, init: str | None) -> list[str]:
    words = init.split() if init else ["X"] * n_ctx
    if len(words) != n_ctx:
        raise ValueError(f"init {init!r} has {len(words)} words but n_ctx = {n_ctx}")
    return words


class PromptLearner(nn.Module):
    """f^t_c = TextEncoder(t_c) for every category c; ``forward() -> (C, D)`` (Eq. (eq-learned-prompt),
    chapter 4).

    ``specific=True``: context (C, M, width), one per category (the paper's choice);
    ``specific=False``: one shared context (M, width) as in CoOp.
    ``init``: M words whose token embeddings initialise the context (each must be one BPE
    token); None draws it from N(0, 0.02²) with the generator seeded by ``seed``.
    """

    def __init__(self, clip_model: nn.Module, tokenizer: Callable, class_names: Sequence[str],
                 n_ctx: int = 4, specific: bool = True, init: str | None = None,
                 seed: int = 0) -> None:
        super().__init__()
        words = _placeholder_words(n_ctx, init)
        device = clip_model.token_embedding.weight.device  # the tokenizer's ids come on the CPU
        ids = tokenizer([" ".join(words + [name]) + "." for name in class_names]).to(device)  # (C, L)
        prefix = tokenizer([" ".join(words)])[0]
        if int((prefix > 0).sum()) != n_ctx + 2:  # SOT + M words + EOT
            raise ValueError(f"each context word must be one token; got {words}")
        self.clip = clip_model
        for p in self.clip.parameters():
            p.requires_grad_(False)
        self.register_buffer("token_ids", ids, persistent=False)
        self.n_ctx, self.specific = n_ctx, specific
        with torch.no_grad():
            frozen = clip_model.token_embedding(ids)  # (C, L, width)
        if init:
            ctx = frozen[:, 1:1 + n_ctx].clone() if specific else frozen[0, 1:1 + n_ctx].clone()
        else:
            g = torch.Generator().manual_seed(seed)
            width = frozen.shape[-1]
            shape = (len(class_names), n_ctx, width) if specific else (n_ctx, width)
            ctx = torch.randn(shape, generator=g) * 0.02
        self.ctx = nn.Parameter(ctx.to(frozen.device))

    def embeddings(self) -> torch.Tensor:
        """Token embeddings with the context slots 1..M replaced, (C, L, width)."""
        frozen = self.clip.token_embedding(self.token_ids)  # (C, L, width)
        ctx = self.ctx if self.specific else self.ctx.expand(frozen.shape[0], -1, -1)
        return torch.cat([frozen[:, :1], ctx.to(frozen.dtype), frozen[:, 1 + self.n_ctx:]], dim=1)

    def forward(self) -> torch.Tensor:
        return encode_text_from_embeddings(self.clip, self.embeddings(), self.token_ids)


def encode_text_from_embeddings(model: nn.Module, x: torch.Tensor,
                                token_ids: torch.Tensor) -> torch.Tensor:
    """open_clip's ``CLIP.encode_text`` from token embeddings x (N, L, width) -> (N, D).

    ``token_ids`` (N, L) only decide the pooling position (the EOT token), as in open_clip.
    """
    cast_dtype = model.transformer.get_cast_dtype()
    x = x.to(cast_dtype) + model.positional_embedding.to(cast_dtype)
    mask = model.attn_mask
    if mask is not None and model.text_pool_type == "argmax":
        # Under the causal mask, position i sees only positions <= i, so the EOT output does
        # not depend on the padding after it: run the first n = max EOT index + 1 positions
        # only (the same numbers, several times faster for short prompts).
        n = int(token_ids.argmax(dim=-1).max()) + 1
        x, mask, token_ids = x[:, :n], mask[:n, :n], token_ids[:, :n]
    x = model.transformer(x, attn_mask=mask)
    x = model.ln_final(x)  # (N, L, width)
    x = text_global_pool(x, token_ids, model.text_pool_type,
                         eos_token_id=getattr(model, "text_eos_id", None))  # (N, width)
    if model.text_projection is not None:
        x = model.text_projection(x) if isinstance(model.text_projection, nn.Linear) \
            else x @ model.text_projection
    return x  # (N, D)
