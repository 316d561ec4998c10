"""Why a word's best cell can lie on background: how much of a phrase's content the frozen
CLIP's dense tokens keep on the phrase's own object.

The heads are per-cell MLPs on frozen tokens, and the retrieval loss reads each word's best
cell only. If the background tokens of an image identify the phrase's image as well as its
object tokens do (a ViT's self-attention mixes every patch with every other), a background
cell can win a word's max and retrieval can still be met: a background solution is
available to the loss. Two readings of the frozen tokens, before any head:

* retrieval from a cell group G (background cells, or the cells of every object box):
  the phrase's text embedding t_k scores every test image i by max_{(r,c) in G_i}
  cos(t_k, x_{i,r,c}); the phrase's own image gets the percentile rank
  rank_k = |{i != i_k : s_i < s_{i_k}}| / (N - 1) (1: first of all images; 0.5: chance);
* within the phrase's own image: 1[max over background cells > max over the phrase's own box
  cells], beside the same with the box of another object of the image in place of the
  phrase's (a placebo box: if the tokens keep the phrase's content on its referent, its own
  box resists the background more often than another object's). Ties go to the box.

A cell belongs to a box when its centre lies inside it (closed edges); background cells lie
in no object box of the image.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from ... import verdicts
from ...evaluation import encode_texts

Box = tuple[float, float, float, float]


class Locality(NamedTuple):
    background_rank: np.ndarray  # (K,) own image's percentile rank, images scored by background cells
    object_rank: np.ndarray  # (K,) the same, by the cells of every object box
    beats_own: np.ndarray  # (K,) 1[best background cell beats best own-box cell]; NaN where a placebo is missing
    beats_placebo: np.ndarray  # (K,) 1[best background cell beats best cell of another object's box]; NaN likewise
    images: np.ndarray  # (K,) the image of each phrase (the cluster unit)

    def to_dict(self) -> dict[str, float]:
        """The means the chapter records."""
        return {"beats_own": float(np.nanmean(self.beats_own)), "beats_placebo": float(np.nanmean(self.beats_placebo)),
                "background_rank": float(self.background_rank.mean()), "object_rank": float(self.object_rank.mean())}


def cell_mask(boxes: Sequence[Box], image_hw: tuple[int, int], grid: tuple[int, int]) -> np.ndarray:
    """(h, w) bool: cell (r, c) whose centre ((c + 1/2) W/w, (r + 1/2) H/h) lies in a box
    (x0, y0, x1, y1), edges included."""
    (height, width), (h, w) = image_hw, grid
    ys, xs = (np.arange(h) + 0.5) * height / h, (np.arange(w) + 0.5) * width / w
    mask = np.zeros((h, w), bool)
    for x0, y0, x1, y1 in boxes:
        mask |= ((ys >= y0) & (ys <= y1))[:, None] & ((xs >= x0) & (xs <= x1))[None, :]
    return mask


def content_locality(clip, data, keep: np.ndarray) -> Locality:
    """The two readings of the module docstring for every kept phrase of ``data`` (a
    :class:`~fgclip.studies.maximage.data.Split` whose ``img`` are the frozen CLIP's dense
    tokens in its joint space, (N, D, h, w)). The placebo box is the first object box of the
    image that is none of the phrase's; a phrase without one, or without background or own-box
    cells, is NaN in both within-image readings."""
    c = data.corpus
    x = F.normalize(data.img.float(), dim=1)  # (N, D, h, w)
    n, _, h, w = x.shape
    if n < 2:
        raise ValueError(f"content_locality needs at least 2 test images, got {n}")
    phrases = [p for p, k in zip(c.phrases, keep) if k]
    own = np.array([p.image for p in phrases])
    objects = torch.as_tensor(np.stack([cell_mask(c.objects[i], c.image_hw[i], (h, w)) for i in range(n)]))  # (N, h, w)
    boxes = [cell_mask(p.boxes, c.image_hw[p.image], (h, w)) for p in phrases]  # (h, w) each
    sims = torch.einsum("kd,ndhw->knhw", encode_texts(clip, [p.text for p in phrases]).cpu(), x)  # (K, N, h, w)
    rows = torch.arange(len(phrases))

    def rank(cells: torch.Tensor) -> np.ndarray:  # cells (N, h, w) bool; an image without such cells scores -inf
        best = sims.masked_fill(~cells[None], -torch.inf).flatten(2).amax(-1)  # (K, N)
        mine = best[rows, torch.as_tensor(own)][:, None]
        return ((best < mine).sum(1).float() / (n - 1)).numpy()

    beats_own, beats_placebo = np.full(len(phrases), np.nan), np.full(len(phrases), np.nan)
    for k, p in enumerate(phrases):
        other = next((b for b in c.objects[p.image] if tuple(b) not in {tuple(q) for q in p.boxes}), None)
        bg, box = ~objects[p.image].numpy(), boxes[k]
        placebo = cell_mask([other], c.image_hw[p.image], (h, w)) if other is not None else None
        if box.any() and bg.any() and placebo is not None and placebo.any():
            s = sims[k, p.image].numpy()
            beats_own[k], beats_placebo[k] = float(s[bg].max() > s[box].max()), float(s[bg].max() > s[placebo].max())
    return Locality(rank(~objects), rank(objects), beats_own, beats_placebo, own)


def locality_verdicts(loc: Locality, seed: int, margin: float) -> list[verdicts.Verdict]:
    """Two verdicts, phrases clustered by image, ``margin`` of equivalence (declared for these
    readings): background cells against object cells as retrievers of the phrase's image
    (percentile ranks; 'equivalent': the background tokens identify it as well); and how often
    the background beats the phrase's own box against a placebo box of another object ('B
    better': the own box holds the phrase's content better, the tokens are partly local)."""
    ok = ~np.isnan(loc.beats_own) & ~np.isnan(loc.beats_placebo)
    if not ok.any():
        raise ValueError("locality_verdicts: no phrase has background, own-box and placebo-box cells")

    def cmp(a, b, claim: str, arms: tuple[str, str], units: np.ndarray) -> verdicts.Verdict:
        return verdicts.compare(a[units], b[units], claim=claim, arms=arms, unit="phrases", clusters=loc.images[units],
                                cluster_unit="images", seed=seed, margin=margin)
    every = np.ones(len(loc.images), bool)
    return [cmp(loc.background_rank, loc.object_rank, "the frozen CLIP's tokens find a phrase's image, background cells "
                "only vs object cells only (percentile rank of the own image)", ("background cells", "object cells"), every),
            cmp(loc.beats_own, loc.beats_placebo, "within its image, the best background cell beats the phrase's own box vs "
                "another object's box (a placebo)", ("against its own box", "against a placebo box"), ok)]


def locality_sentence(loc: Locality, vs: list[verdicts.Verdict], model: str) -> str:
    """The two readings in words (:func:`locality_verdicts`) and what they allow one to say."""
    ranks, local = vs
    head = (f"On the frozen {model}, before any head, a phrase's image is found from background cells alone at "
            f"percentile rank {loc.background_rank.mean():.3f}, from object cells alone at {loc.object_rank.mean():.3f} "
            f"({ranks.difference:+.3f} {ranks.interval()}, **{ranks.verdict}**; chance 0.5). Within its image the best background cell beats the "
            f"best cell of the phrase's own box for {local.mean_a:.0%} of phrases and that of another object's box for "
            f"{local.mean_b:.0%} ({local.difference:+.3f} {local.interval()}, **{local.verdict}**). ")
    return head + _reading(ranks.verdict) + " " + _placebo(local.verdict)


def _reading(outcome: str) -> str:
    """What the retrieval verdict (background cells as A, object cells as B) allows one to say."""
    if outcome in (verdicts.EQUIVALENT, verdicts.A_BETTER):
        return (("The background tokens identify the phrase's image as well as the object tokens do"
                 if outcome == verdicts.EQUIVALENT else "The background tokens identify the phrase's image better than the "
                 "object tokens do") + ", so a head can meet retrieval, the only signal it trains on, with a word's best "
                "cell on background: a background solution is available to the loss. Whether the loss prefers it is not "
                "shown here; the validation losses of the seeds named in the seed-by-seed findings, beside those of the "
                "seeds above the floors, show how far it tells them apart.")
    if outcome == verdicts.B_BETTER:
        return ("The object tokens identify the phrase's image better than the background tokens, so by this reading "
                "a background solution costs retrieval, and it does not explain a seed settling there.")
    return ("This sample cannot say whether the background tokens identify the phrase's image as well as the object "
            "tokens do, so the reading neither supports nor rules out a background solution.")


def _placebo(outcome: str) -> str:
    """What the own-box vs placebo-box verdict allows one to say."""
    return {verdicts.B_BETTER: "The phrase's own box resists the background more often than another object's box: "
                               "the tokens keep part of the phrase's content on its referent.",
            verdicts.A_BETTER: "The phrase's own box loses to the background more often than another object's box: "
                               "the tokens do not keep the phrase's content on its referent.",
            verdicts.EQUIVALENT: "The phrase's own box does no better than another object's box: read zero-shot, by "
                                 "the phrase's text embedding, the tokens carry the phrase's content without locating "
                                 "it on its referent. A probe trained on the same tokens can still point (chapter 0's "
                                 "ceiling table), so this says how the text embedding reads them, not that the "
                                 "location is lost.",
            }.get(outcome, "Whether the own box holds the phrase's content better than another object's box cannot be "
                           "told here.")
