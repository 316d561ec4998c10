"""Why a word's best cell can lie on background: how much of a phrase's content the frozen
CLIP's dense tokens keep on the phrase's own object.

The heads are per-cell MLPs on frozen tokens, and the retrieval loss reads each word's best
cell only. If the background tokens of an image carry the phrase's content as well as its
object tokens do (a ViT's self-attention mixes every patch with every other), a background
cell can win a word's max and retrieval is still met: the loss cannot tell such a seed from
one that points at the object. Two readings of the frozen tokens, before any head:

* retrieval from a cell group G (background cells, or object cells): the phrase's text
  embedding t_k scores every test image i by max_{(r,c) in G_i} cos(t_k, x_{i,r,c}); the
  phrase's own image gets the percentile rank  rank_k = |{i != i_k : s_i < s_{i_k}}| / (N - 1)
  (1: first of all images; 0.5: chance);
* within the phrase's own image: 1[max over background cells > max over the phrase's own box
  cells] (how often the frozen CLIP's best cell for the phrase is off its object), beside the
  share a best cell placed at random among those cells would give, n_bg / (n_bg + n_box).

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

Box = tuple[float, float, float, float]


class Locality(NamedTuple):
    background_rank: np.ndarray  # (K,) own image's percentile rank, images scored by background cells
    object_rank: np.ndarray  # (K,) the same, images scored by object cells
    background_wins: np.ndarray  # (K,) 1[best background cell beats best own-box cell], NaN where either is empty
    images: np.ndarray  # (K,) the image of each phrase (the cluster unit)
    background_chance: np.ndarray  # (K,) n_bg / (n_bg + n_box): the share a best cell placed at random would give

    def to_dict(self) -> dict[str, float]:
        """The means the chapter records."""
        return {"background_wins": float(np.nanmean(self.background_wins)), "chance": float(np.nanmean(self.background_chance)),
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


@torch.no_grad()
def text_embeddings(clip, texts: Sequence[str], batch_size: int = 256) -> torch.Tensor:
    """(K, D) unit-norm CLIP text embeddings of ``texts`` (open_clip's tokenizer and text tower)."""
    device = next(clip.model.parameters()).device
    out = [clip.model.encode_text(clip.tokenizer(list(texts[i:i + batch_size])).to(device)).float().cpu()
           for i in range(0, len(texts), batch_size)]
    return F.normalize(torch.cat(out), dim=-1)


def content_locality(clip, data, keep: np.ndarray) -> Locality:
    """The two readings of the module docstring for every kept phrase of ``data`` (a
    :class:`~fgclip.studies.maximage.data.Split` whose ``img`` are the frozen CLIP's dense
    tokens in its joint space, (N, D, h, w))."""
    c = data.corpus
    x = F.normalize(data.img.float(), dim=1)  # (N, D, h, w)
    n, _, h, w = x.shape
    if n < 2:
        raise ValueError(f"content_locality needs at least 2 test images, got {n}")
    phrases = [p for p, k in zip(c.phrases, keep) if k]
    own = np.array([p.image for p in phrases])
    objects = torch.as_tensor(np.stack([cell_mask(c.objects[i], c.image_hw[i], (h, w)) for i in range(n)]))  # (N, h, w)
    sims = torch.einsum("kd,ndhw->knhw", text_embeddings(clip, [p.text for p in phrases]), x)  # (K, N, h, w)
    rows = torch.arange(len(phrases))

    def rank(cells: torch.Tensor) -> np.ndarray:  # cells (N, h, w) bool; an image without such cells scores -inf
        best = sims.masked_fill(~cells[None], -torch.inf).flatten(2).amax(-1)  # (K, N)
        mine = best[rows, torch.as_tensor(own)][:, None]
        return ((best < mine).sum(1).float() / (n - 1)).numpy()

    wins, chance = np.full(len(phrases), np.nan), np.full(len(phrases), np.nan)
    for k, p in enumerate(phrases):
        box, bg = cell_mask(p.boxes, c.image_hw[p.image], (h, w)), ~objects[p.image].numpy()
        if box.any() and bg.any():
            s = sims[k, p.image].numpy()
            wins[k], chance[k] = float(s[bg].max() > s[box].max()), bg.sum() / (bg.sum() + box.sum())
    return Locality(rank(~objects), rank(objects), wins, own, chance)


def locality_verdict(loc: Locality, seed: int, margin: float) -> verdicts.Verdict:
    """Background cells against object cells as retrievers of the phrase's image (percentile
    ranks, phrases clustered by image, ``margin`` of equivalence): 'equivalent' says the
    background tokens carry the phrase's content as well as the object tokens within the margin."""
    return verdicts.compare(loc.background_rank, loc.object_rank, claim="the frozen CLIP's tokens find a phrase's image, "
                            "background cells only vs object cells only (percentile rank of the own image)",
                            arms=("background cells", "object cells"), unit="phrases", clusters=loc.images,
                            cluster_unit="images", seed=seed, margin=margin)


def share_interval(flags: np.ndarray, images: np.ndarray, seed: int, n_resamples: int = 2000) -> tuple[float, float, float]:
    """Mean of 0/1 ``flags`` (NaN left out) with a 95% percentile bootstrap over images
    (the phrases of one image resampled together): (share, low, high). Written here because
    the protocol's clustered bootstrap (:func:`fgclip.verdicts.compare`) judges differences."""
    ok = ~np.isnan(flags)
    f, g = flags[ok], images[ok]
    if not len(f):
        raise ValueError("share_interval: no phrase has both background and own-box cells")
    groups = [f[g == i] for i in np.unique(g)]
    sums, counts = np.array([x.sum() for x in groups]), np.array([len(x) for x in groups])
    pick = np.random.default_rng(seed).integers(0, len(groups), (n_resamples, len(groups)))
    boot = sums[pick].sum(1) / counts[pick].sum(1)
    return float(f.mean()), float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975))


def locality_sentence(loc: Locality, v: verdicts.Verdict, seed: int, model: str) -> str:
    """The two readings in words: where the frozen CLIP's best cell for a phrase lies, and the
    retrieval verdict; what that allows the heads to do."""
    share, lo, hi = share_interval(loc.background_wins, loc.images, seed)
    return (f"On the frozen {model}, before any head, a phrase's best-matching cell of its own image lies on background "
            f"rather than on the phrase's box for {share:.0%} [{lo:.0%}, {hi:.0%}] of the kept phrases (a best cell "
            f"placed at random among those cells: {np.nanmean(loc.background_chance):.0%}); and its image is found from "
            f"background cells alone at percentile rank {loc.background_rank.mean():.3f}, from object cells alone at "
            f"{loc.object_rank.mean():.3f} (chance 0.5; {v.difference:+.3f} [{v.ci_low:+.3f}, {v.ci_high:+.3f}], **{v.verdict}**). "
            + _reading(v.verdict))


def _reading(outcome: str) -> str:
    """What the retrieval verdict (background cells as A, object cells as B) allows one to say."""
    if outcome in (verdicts.EQUIVALENT, verdicts.A_BETTER):
        return (("The background tokens carry the phrase's content as well as the object tokens do"
                 if outcome == verdicts.EQUIVALENT else "The background tokens carry more of the phrase's content than the "
                 "object tokens do") + ", so a head that sends a word's best cell to background still meets retrieval, the "
                "only signal it trains on: that is how a seed can settle there without the loss objecting. Which seeds do "
                "is not decided by this reading; the validation losses of the seeds named below, beside the other seeds', "
                "show how far the loss tells them apart.")
    if outcome == verdicts.B_BETTER:
        return ("The object tokens carry more of the phrase's content than the background tokens, so by this reading "
                "background is not as good for retrieval, and it does not explain a seed settling there.")
    return ("This sample cannot say whether the background tokens carry the phrase's content as well as the object "
            "tokens do, so the reading neither supports nor rules out that route to background.")
