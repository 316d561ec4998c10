"""The frozen text tower on word lists: memoised BPE codes, token ids built from them, and
open_clip's ``encode_text`` run on the positions a batch actually uses (chapter 2 runs one
text pass per caption and per deleted word, so these costs add up)."""
from __future__ import annotations

import functools
from typing import Callable, Sequence

import torch

from .factory import Clip


def bpe_encoder(clip: Clip) -> Callable[[str], list[int]]:
    """The BPE encode() of the clip's tokenizer, memoised per text (ftfy cleaning dominates)."""
    inner = getattr(clip.tokenizer, "tokenizer", clip.tokenizer)  # open_clip's SimpleTokenizer
    if not hasattr(inner, "encode"):
        raise TypeError(f"{clip.name}: tokenizer has no BPE encode(); word merging needs one")
    cached = getattr(inner, "_fgclip_encode", None)
    if cached is None:
        cached = functools.lru_cache(maxsize=100_000)(lambda text: tuple(inner.encode(text)))
        inner._fgclip_encode = cached
    return lambda text: list(cached(text))


def tokenize_words(clip: Clip, word_lists: Sequence[Sequence[str]]) -> torch.Tensor:
    """(N, context) token ids of the texts " ".join(words), built from memoised per-word BPE
    codes ([SOT] + codes + [EOT], truncated and padded as open_clip does); falls back to the
    clip's own tokenizer when it is not a plain open_clip SimpleTokenizer."""
    inner = getattr(clip.tokenizer, "tokenizer", clip.tokenizer)
    sot, eot = getattr(inner, "sot_token_id", None), getattr(inner, "eot_token_id", None)
    context = getattr(inner, "context_length", None)
    if sot is None or eot is None or not context or getattr(inner, "reduction_fn", None) is not None:
        return clip.tokenizer([" ".join(ws) for ws in word_lists])
    encode = bpe_encoder(clip)
    out = torch.zeros(len(word_lists), context, dtype=torch.long)
    for i, ws in enumerate(word_lists):
        ids = [sot] + [c for w in ws for c in encode(w)] + [eot]
        if len(ids) > context:
            ids = ids[:context]
            ids[-1] = eot
        out[i, :len(ids)] = torch.tensor(ids)
    return out


def encode_text_trimmed(model: torch.nn.Module, tokens: torch.Tensor) -> torch.Tensor:
    """open_clip's ``CLIP.encode_text`` on the first T = max_b eos_b + 1 positions only.

    With a causal mask and EOT ('argmax') pooling, positions after a caption's EOT never
    reach its pooled output, so the result equals the full-context pass (tested to 1e-5)
    at a fraction of the cost. Falls back to ``encode_text`` for any other text tower.
    """
    if getattr(model, "attn_mask", None) is None or getattr(model, "text_pool_type", None) != "argmax":
        return model.encode_text(tokens)
    eos = tokens.argmax(dim=-1)  # (B,)
    t = int(eos.max()) + 1
    cast = model.transformer.get_cast_dtype()
    x = model.token_embedding(tokens[:, :t]).to(cast) + model.positional_embedding[:t].to(cast)
    x = model.ln_final(model.transformer(x, attn_mask=model.attn_mask[:t, :t]))  # (B, T, W)
    x = x[torch.arange(x.shape[0], device=x.device), eos]
    proj = model.text_projection
    return x if proj is None else proj(x) if isinstance(proj, torch.nn.Linear) else x @ proj
