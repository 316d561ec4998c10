"""From BPE tokens to words: the one place a caption's token rows are merged into word rows.

open_clip's byte-pair encoding may split a word into several tokens. For word j with
n_j tokens, starting at position ``start`` (1 after [SOT]), its token span is

    [start + sum_{i<j} n_i,  start + sum_{i<=j} n_i),

and a word's vector (chapter 1's word features) or score (chapter 2's relevance w_j) is the
mean over its span. The split is checked against the tokenisation of the whole text, so a
tokenizer that merges across word boundaries is an error, not a silent shift.
"""
from __future__ import annotations

from typing import Callable, Sequence, TypeVar

import numpy as np
import torch

Array = TypeVar("Array", torch.Tensor, np.ndarray)


def token_counts(words: Sequence[str], encode: Callable[[str], list[int]], text: str | None = None) -> list[int]:
    """n_j, the BPE tokens of each word; the word-by-word codes must equal those of ``text``
    (default: the words joined by single spaces)."""
    pieces = [list(encode(w)) for w in words]
    if any(len(p) == 0 for p in pieces):
        raise ValueError(f"a word of {list(words)!r} encodes to no token")
    text = " ".join(words) if text is None else text
    if [t for p in pieces for t in p] != list(encode(text)):
        raise ValueError(f"caption {text!r}: its BPE tokens do not split at its words")
    return [len(p) for p in pieces]


def spans_from_counts(counts: Sequence[int], start: int = 0) -> list[tuple[int, int]]:
    """[start_j, end_j) token positions of each word from its token count n_j."""
    if any(n < 1 for n in counts):
        raise ValueError(f"every word needs at least one token, got counts {list(counts)}")
    ends = start + np.cumsum(counts, dtype=int)
    return [(int(e - n), int(e)) for e, n in zip(ends, counts)]


def average_spans(tokens: Array, spans: Sequence[tuple[int, int]]) -> Array:
    """Word rows as the mean of their token rows: tokens (T, ...) -> (len(spans), ...).

    Works on torch tensors (chapter 1's token features) and numpy arrays (chapter 2's
    token relevances) alike.
    """
    if not spans:
        raise ValueError("average_spans: no spans given")
    if spans[-1][1] > tokens.shape[0]:
        raise ValueError(f"span {spans[-1]} runs past the {tokens.shape[0]} tokens")
    rows = [tokens[a:b].mean(0) for a, b in spans]
    return torch.stack(rows) if isinstance(tokens, torch.Tensor) else np.stack(rows)
