"""How chapter 1's heads start, chosen on the validation split before any arm trains.

A MaxImage score takes each word's maximum over positions, so the gradient of a word reaches
only its argmax cell. Where the untrained map peaks therefore decides which cells training
shapes first. PyTorch's default bias draw adds one shared vector to every cell's v and every
word's t, which makes the untrained map nearly the same for every word (caption-blind); a
seed whose shared peak sits on background can settle there, because background cells of a
transformer carry what the image holds and serve retrieval too. The census trains the
chapter's main config under each bias start (:data:`~fgclip.studies.maximage.heads.BIAS_INITS`)
on seeds the chapter never evaluates, stops each seed at its lowest validation loss, and
chooses the start with the lower mean of that loss: the weak supervision's own criterion,
no box involved. Validation pointing beside the object pointer's expectation is reported
as a diagnostic; it chooses nothing.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

import torch

from ... import verdicts
from .evaluation import evaluated, hits, kept_images, model_points, object_pointer_expectation
from .heads import BIAS_INITS, TrainConfig, make_heads, project_images
from .replicas import train_stacks


@dataclass(frozen=True)
class InitCensus:
    """Per bias start, per census seed: the lowest validation loss, the period it was reached
    at, and validation pointing of the heads there; ``pointer``: the object pointer's expected
    validation accuracy on the same phrases; ``chosen``: the start with the lower mean loss."""
    lr: float
    seeds: tuple[int, ...]
    val_loss: dict[str, list[float]]
    best_period: dict[str, list[int]]
    val_pointing: dict[str, list[float]]
    pointer: float
    chosen: str
    agreement: dict[str, float]  # untrained heads: share of a caption's word pairs peaking on one cell
    pointing: verdicts.Verdict | None = None  # validation pointing, zero vs default start (a diagnostic)

    def loss_difference(self) -> tuple[float, float]:
        """Mean and standard deviation over census seeds of the seed-paired difference of
        validation loss, zero start minus default (the two share each seed's weights and batches)."""
        d = np.subtract(self.val_loss["zero"], self.val_loss["default"])
        return float(d.mean()), float(d.std(ddof=1)) if len(d) > 1 else float("nan")

    def below_pointer(self, init: str) -> int:
        """Census seeds of ``init`` whose validation pointing is below the object pointer."""
        return int(sum(a < self.pointer for a in self.val_pointing[init]))

    def table(self) -> pd.DataFrame:
        """One row per bias start: mean validation loss (the criterion), mean, lowest validation
        pointing and the seeds below the object pointer (the diagnostic)."""
        return pd.DataFrame([{"bias start": i, "mean best validation loss": np.mean(self.val_loss[i]),
                              "validation pointing, mean": np.mean(self.val_pointing[i]),
                              "lowest seed": min(self.val_pointing[i]),
                              "seeds below the object pointer": f"{self.below_pointer(i)} of {len(self.seeds)}",
                              "untrained: word pairs on one cell": self.agreement[i],
                              "chosen": i == self.chosen} for i in self.val_loss]).set_index("bias start")

    def sentence(self) -> str:
        """The choice and the diagnostic in words."""
        parts = [f"{i}: loss {np.mean(self.val_loss[i]):.3f}, pointing {np.mean(self.val_pointing[i]):.3f} "
                 f"(lowest {min(self.val_pointing[i]):.3f}; {self.below_pointer(i)} of {len(self.seeds)} seeds below "
                 f"the object pointer's {self.pointer:.3f}; untrained, {self.agreement[i]:.0%} of a caption's word "
                 "pairs peak on one cell)" for i in self.val_loss]
        head = f"bias start chosen: {self.chosen}, by the declared rule (the lower mean validation loss over census seeds " \
               f"{list(self.seeds)} at lr {self.lr:g})"
        if set(self.val_loss) == set(BIAS_INITS):
            d, sd = self.loss_difference()
            se = sd / np.sqrt(len(self.seeds))
            noise = ("within two standard errors: the rule breaks a tie" if abs(d) <= 2 * se
                     else "beyond two standard errors")
            head += f"; zero minus default, paired by seed: {d:+.3f} (standard error {se:.3f}), {noise}"
        tail = f". Validation pointing, a diagnostic: {self.pointing.brief()}" if self.pointing else ""
        return f"{head}; " + "; ".join(parts) + tail

    def to_dict(self) -> dict:
        return {"lr": self.lr, "seeds": list(self.seeds), "val_loss": self.val_loss,
                "best_period": self.best_period, "val_pointing": self.val_pointing,
                "object_pointer": self.pointer, "chosen": self.chosen,
                "untrained_word_pairs_on_one_cell": self.agreement,
                "pointing_verdict": self.pointing.to_dict() if self.pointing else None}


@torch.no_grad()
def untrained_agreement(split, cfg: TrainConfig, seeds: Sequence[int], bias_init: str) -> float:
    """How caption-blind the untrained map is: :func:`word_agreement` of the heads at their
    seeded start, averaged over ``seeds`` (every seed reads the same captions). 1 is one map
    for every word."""
    return float(np.mean([word_agreement(make_heads(split.img.shape[1], split.words.dim, cfg.embed_dim, s, cfg.score,
                                                    bias_init), split) for s in seeds]))


def choose_init(val_loss: dict[str, Sequence[float]]) -> str:
    """The bias start with the lowest mean validation loss; a tie keeps the first listed."""
    if not val_loss or any(len(v) == 0 for v in val_loss.values()):
        raise ValueError("choose_init needs at least one census seed per bias start")
    return min(val_loss, key=lambda i: float(np.mean(val_loss[i])))


def run_init_census(data, cfg: TrainConfig, lr: float, seeds: Sequence[int], periods: int, period: int,
                    min_box_area: float, area_rule: str, inits: Sequence[str] = BIAS_INITS,
                    parse: str = "vector", margin: float | None = None) -> InitCensus:
    """Train ``cfg`` at ``lr`` for ``periods`` periods of ``period`` steps on every census seed
    under every bias start in ``inits`` (``data``: the chapter's fit/val splits), each seed
    stopped at its lowest validation loss, and choose by :func:`choose_init`. With both starts,
    their validation pointing is compared as a verdict (paired by seed, images as clusters,
    ``margin``): a diagnostic beside the choice, which it does not change."""
    if not seeds:
        raise ValueError("the census needs at least one seed")
    unknown = [i for i in inits if i not in BIAS_INITS]
    if unknown:
        raise ValueError(f"unknown bias starts {unknown}; choose from {BIAS_INITS}")
    keep = evaluated(data.val, min_box_area, area_rule)
    loss, best, point, rows = {}, {}, {}, {}
    for init in inits:
        run = train_stacks(data.fit, data.val, replace(cfg, bias_init=init, lr=lr), [lr], seeds, periods, period,
                           keep_states=True)
        curves = [run.curves[(lr, s)] for s in seeds]
        best[init] = [int(np.argmin(c)) + 1 for c in curves]
        loss[init] = [float(min(c)) for c in curves]
        rows[init] = np.stack([hits(model_points(run.heads(lr, e)[j], data.val, parse), data.val, keep)
                               for j, e in enumerate(best[init])])  # (n_seeds, n_kept) validation hits
        point[init] = rows[init].mean(axis=1).tolist()
    pointer = float(object_pointer_expectation(data.val, keep).mean())
    agree = {i: untrained_agreement(data.val, cfg, seeds, i) for i in inits}
    verdict = None
    if {"zero", "default"} <= set(inits) and len(seeds) >= 2 and keep.sum() >= 2:
        verdict = verdicts.compare(rows["zero"], rows["default"], claim="zero vs default bias start, validation pointing",
                                   arms=("zero start", "default start"), unit="phrases",
                                   clusters=kept_images(data.val, keep), cluster_unit="images", seed=seeds[0], margin=margin)
    return InitCensus(lr, tuple(seeds), loss, best, point, pointer, choose_init(loss), agree, verdict)


def resolve_bias_init(bias_init: str, census: InitCensus | None) -> str:
    """The chapter's bias start: the census's choice for ``"select"``, else the named start; a
    clear error naming the parameter for an unknown value or ``"select"`` without a census."""
    if bias_init == "select":
        if census is None:
            raise ValueError("parameter 'bias_init': 'select' needs a census (init_census_seeds > 0); "
                             f"or name a start from {BIAS_INITS}")
        return census.chosen
    if bias_init not in BIAS_INITS:
        raise ValueError(f"parameter 'bias_init': expects 'select' or one of {BIAS_INITS}, got {bias_init!r}")
    return bias_init


@torch.no_grad()
def word_agreement(heads, split) -> float:
    """The measure of :func:`untrained_agreement` for one set of heads (trained or not), all
    captions at once: the mean over captions with at least two words of the share of their
    word pairs whose maps m_{:,:,d} peak on the same cell (1: one map for every word, the
    word-region similarity collapsed onto one cell)."""
    caption, rows = split.words.words_in_order()  # (W,), (W,)
    t = heads.word_vectors(split.words.rows[rows])  # (W, E)
    v = project_images(heads, split.img).flatten(2)  # (N, E, h*w)
    image = torch.as_tensor(split.corpus.caption_image)[caption]  # (W,)
    peak = torch.einsum("we,wep->wp", t, v[image]).argmax(dim=1)  # (W,) each word's peak cell
    n_cells = v.shape[2]
    counts = torch.zeros(len(split.words), n_cells).index_put_((caption, peak), torch.ones(len(caption)), accumulate=True)
    n = counts.sum(dim=1)  # (C,) words per caption
    same = (counts * (counts - 1)).sum(dim=1)  # ordered pairs of distinct words on one cell
    ok = n >= 2
    if not ok.any():
        raise ValueError("word_agreement: no caption of the split has two words")
    return float((same[ok] / (n[ok] * (n[ok] - 1))).mean())


@torch.no_grad()
def dead_units(heads, split) -> float:
    """The share of the heads' hidden units (both two-layer MLPs) whose pre-activation is never
    positive on the split (every image cell, every word): units that pass no signal forward
    but GELU's small negative tail."""
    cells = split.img.permute(0, 2, 3, 1).flatten(0, 2)  # (N*h*w, Di)
    pre = [heads.image[0](cells), heads.text[0](split.words.rows)]  # (cells, H), (words, H)
    dead = torch.cat([(p.amax(dim=0) <= 0) for p in pre])
    return float(dead.float().mean())


def seed_diagnostics(heads_per_seed, split) -> dict[str, np.ndarray]:
    """Per seed: :func:`word_agreement` ("word pairs on one cell") and :func:`dead_units`
    ("dead hidden units") on the split, each (n_seeds,)."""
    return {"word pairs on one cell": np.array([word_agreement(h, split) for h in heads_per_seed]),
            "dead hidden units": np.array([dead_units(h, split) for h in heads_per_seed])}
