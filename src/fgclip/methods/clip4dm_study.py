"""Chapter 2's experiment in named steps, so the chapter reads as the protocol it runs.

The variant grid and the arms are :class:`~fgclip.methods.clip4dm.AttributionConfig`
objects, and attributions are keyed by them; a test draw is a :class:`Draw`; the chosen
thresholds are one :class:`Epsilons`. Everything tuned is tuned on the validation split
(:func:`choose_layers`, :func:`select_epsilons`); every comparison is a verdict built by
:func:`fgclip.methods.clip4dm_protocol.compare_units` (seeds = test draws, captions
clustered by image).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import NamedTuple, Sequence

import numpy as np
import pandas as pd
import torch

from .. import verdicts
from ..models import encode_image_paths, load_image_batch
from ..models.factory import Clip
from . import clip4dm as c4dm
from . import clip4dm_protocol as proto
from .clip4dm import AttributionConfig, Attributions

MAIN = "CLIP4DM"  # the arm name of the chosen rule in every table and verdict
F_NAMES = {"most negative": "F-CLIPScore as the paper's code evaluates it (most negative)",
           "threshold": "F-CLIPScore, threshold form", "additive": "F-CLIPScore, additive reading"}


# ---------------------------------------------------------------------------- variants
def last_layers(n: int) -> AttributionConfig:
    """CLIP4DM on the last ``n`` text layers (negatives kept, plain layer mean)."""
    if n < 1:
        raise ValueError(f"last_layers: n must be >= 1, got {n}")
    return AttributionConfig(layers=tuple(range(-n, 0)))


def gae(n_layers: int) -> AttributionConfig:
    """Chefer et al.'s GAE: ReLU and rollout over all ``n_layers`` text layers."""
    return AttributionConfig(layers=tuple(range(n_layers)), relu=True, rollout=True)


def layer_grid(n_layers: int) -> list[AttributionConfig]:
    """The validation pass's variants: last n, + ReLU, + rollout for n = 1..n_layers, and GAE."""
    grid = []
    for n in range(1, n_layers + 1):
        cfg = last_layers(n)
        grid += [cfg, dataclasses.replace(cfg, relu=True), dataclasses.replace(cfg, rollout=True)]
    return grid + [gae(n_layers)]


def method_arms(main: AttributionConfig, n_layers: int) -> dict[str, AttributionConfig]:
    """The gradient arms compared on the test draws: the chosen rule, the same with a ReLU
    (the paper's change alone), with rollout, and GAE; {arm name: config}."""
    return {MAIN: main, f"{MAIN} + ReLU": dataclasses.replace(main, relu=True),
            f"{MAIN} + rollout": dataclasses.replace(main, rollout=True), "GAE": gae(n_layers)}


# -------------------------------------------------------------------------------- data
@dataclass
class FoilDraws:
    """Caption rows (:func:`~fgclip.methods.clip4dm_protocol.caption_rows`) of the
    validation split and of each test draw, the planted positive-control rows per draw,
    and how many captions of each were skipped as longer than the text context."""

    val: pd.DataFrame
    test: dict[int, pd.DataFrame]
    planted: dict[int, pd.DataFrame]
    skipped: dict[str, int]

    def counts(self, val_split: str, test_split: str) -> pd.DataFrame:
        """Captions per foil type (rows) and split or draw (columns)."""
        counts = pd.DataFrame({f"{test_split} draw {s}": df.foil_type.value_counts() for s, df in self.test.items()})
        counts[val_split] = self.val.foil_type.value_counts()
        counts.loc["planted colour"] = [len(p) for p in self.planted.values()] + [0]
        return counts.fillna(0).astype(int)


def load_draws(clip: Clip, data_root: str, val_split: str, test_split: str, seed: int,
               seeds: Sequence[int], n_scenes: int, max_pairs: int) -> FoilDraws:
    """The validation rows (drawn with ``seed``) and one set of test rows per seed of
    ``seeds`` (:func:`~fgclip.methods.clip4dm_protocol.foil_sets`), captions that do not fit
    the context dropped and counted; planted colour foils built from each test draw."""
    val = proto.foil_sets(data_root, val_split, [seed], n_scenes, max_pairs)[seed]
    test = proto.foil_sets(data_root, test_split, seeds, n_scenes, max_pairs)
    fits = {k: c4dm.caption_fits(clip, df.caption.tolist()) for k, df in [("val", val), *test.items()]}
    val = val[fits["val"]].reset_index(drop=True)
    test = {s: df[fits[s]].reset_index(drop=True) for s, df in test.items()}
    return FoilDraws(val, test, {s: proto.planted_colour_rows(df) for s, df in test.items()},
                     {str(k): int((~f).sum()) for k, f in fits.items()})


# ------------------------------------------------------------------------- attribution
class ImageFeatures(NamedTuple):
    """Embeddings of the distinct images (U, D) and, per caption, the row of its image."""

    feats: torch.Tensor
    index: np.ndarray


def attribute(clip: Clip, df: pd.DataFrame, cfgs: Sequence[AttributionConfig], device: str = "cpu",
              batch_size: int = 128) -> tuple[dict[AttributionConfig, Attributions], ImageFeatures]:
    """w_j of every caption of ``df`` for each config (one backward pass per batch), keyed
    by the config; images are decoded and encoded a batch at a time, only features stay."""
    feats, index = encode_image_paths(clip, df.image.tolist(), device=device)
    attr = c4dm.clip4dm_variants(clip, feats, df.caption.tolist(), {cfg: cfg for cfg in cfgs}, device=device,
                                 batch_size=batch_size, image_index=index)
    return attr, ImageFeatures(feats, np.asarray(index))


@dataclass
class Draw:
    """One test draw: its caption rows, the attributions of every arm (keyed by config),
    leave-one-word-out on its foil captions (``foil``: (N,) bool) and its image features."""

    rows: pd.DataFrame
    attr: dict[AttributionConfig, Attributions]
    loo: Attributions
    foil: np.ndarray
    images: ImageFeatures


def attribute_draw(clip: Clip, df: pd.DataFrame, cfgs: Sequence[AttributionConfig], device: str = "cpu",
                   batch_size: int = 128) -> Draw:
    """:func:`attribute` for every arm plus leave-one-word-out on the foil captions only
    (n + 1 text passes per caption)."""
    attr, images = attribute(clip, df, cfgs, device, batch_size)
    foil = df.foil_type.ne("original").to_numpy()
    loo = c4dm.leave_one_word_out(clip, images.feats, df.caption[foil].tolist(), device=device,
                                  image_index=images.index[foil])
    return Draw(df, attr, loo, foil, images)


def choose_layers(attr_val: dict[AttributionConfig, Attributions], val: pd.DataFrame, n_layers: int,
                  rng: np.random.Generator, n_last_layers: int = 0,
                  name: str = "LA") -> tuple[pd.Series, AttributionConfig]:
    """LA (most negative word) of the last-n rule for n = 1..n_layers on the validation
    rows, and the chosen rule: the best n, or ``n_last_layers`` when it is > 0."""
    if not 0 <= n_last_layers <= n_layers:
        raise ValueError(f"n_last_layers must lie in 0..{n_layers} (the text layers), got {n_last_layers}")
    la = pd.Series({last_layers(n).label: proto.localization_units(attr_val[last_layers(n)], val, rng).hit.mean()
                    for n in range(1, n_layers + 1)}, name=name)
    return la, last_layers(n_last_layers or int(la.to_numpy().argmax()) + 1)


# ------------------------------------------------------------------------- thresholds
@dataclass(frozen=True)
class Epsilons:
    """The chosen thresholds: ``f1`` for the threshold rule's word F1, ``forms`` the ε of
    each F-CLIPScore form (None for the most-negative form), and ``val_fpr``, the share of
    words that ``f1`` flags on the validation originals."""

    f1: float
    forms: dict[str, float | None]
    val_fpr: float


def select_epsilons(attr: Attributions, val: pd.DataFrame, tune: bool = True,
                    epsilon: float = 0.0) -> Epsilons:
    """Every ε on the validation rows: one per F-CLIPScore form for its AP (originals above
    foils), and the threshold rule's for word F1 (or ``epsilon`` when not ``tune``)."""
    orig = val.foil_type.eq("original").to_numpy()
    forms = {"most negative": None, "threshold": proto.tune_eps_for_ap(attr, orig, "threshold"),
             "additive": proto.tune_eps_for_ap(attr, orig, "additive")}
    f1 = proto.tune_eps_f1(attr, proto.labels_of(attr, val), np.ones(len(val), bool)) if tune else epsilon
    fpr = float(np.mean([np.mean(w < f1) for w, o in zip(attr.w, orig) if o]))
    return Epsilons(f1, forms, fpr)


def selection_table(n_layers: int, main: AttributionConfig, eps: Epsilons, tuned: bool,
                    val_split: str) -> pd.DataFrame:
    """What was chosen on which split (hyperparameter, candidates, chosen, criterion, split)."""
    return pd.DataFrame([
        ("layers n (last n)", f"1..{n_layers}", main.label, "LA (most negative word)", val_split),
        ("ε, threshold rule", "80 quantiles of w_j" if tuned else "given", f"{eps.f1:.3g}", "word F1", val_split),
        ("ε, F-CLIPScore threshold form", "40 quantiles of w_j", f"{eps.forms['threshold']:.3g}", "AP", val_split),
        ("ε, F-CLIPScore additive form", "40 quantiles of w_j", f"{eps.forms['additive']:.3g}", "AP", val_split),
        ("ε, F-CLIPScore most-negative form", "none", "none", "the form has no ε", "-"),
        ("ε per foil type (transfer)", "80 / 40 quantiles", "table below", "word F1 / AP", val_split)],
        columns=["hyperparameter", "candidates", "chosen", "criterion", "split"])


# ------------------------------------------------------------------------------ units
def unit_table(draws: dict[int, Draw], arms: dict[str, AttributionConfig], rng: np.random.Generator,
               eps: Epsilons) -> pd.DataFrame:
    """Per-caption units of all test draws (:func:`~fgclip.methods.clip4dm_protocol.build_units`):
    every arm, leave-one-word-out on the foils, the random content word, F-CLIPScore forms."""
    return pd.concat([proto.build_units(d.rows, {m: d.attr[cfg] for m, cfg in arms.items()}, MAIN, rng,
                                        eps.forms, eps.f1, partial={"leave-one-word-out": (d.loo, d.foil)})
                      for d in draws.values()], ignore_index=True)


def headline_type(units: pd.DataFrame) -> str:
    """The foil type of the headline: shape foils (nouns replaced, as in real FOIL) when the
    toy world made them, else every foil of a real FOIL file ('foil')."""
    return "shape" if units.foil_type.eq("shape").any() else "foil"


def foil_types(units: pd.DataFrame) -> list[str]:
    """The foil types present, sorted (originals excluded)."""
    return sorted(set(units.foil_type) - {"original"})


# --------------------------------------------------------------------------- verdicts
def la_verdict(units: pd.DataFrame, a: str, b: str, where, what: str, seed: int) -> verdicts.Verdict:
    """LA of arm ``a`` against arm ``b`` on the foil captions where ``where``."""
    return proto.compare_units(units, units[f"hit|{a}"], units[f"hit|{b}"], where, claim=f"LA on {what}",
                               arms=(a, b), unit="foil captions", seed=seed)


def la_verdicts(units: pd.DataFrame, seed: int) -> list[verdicts.Verdict]:
    """CLIP4DM's LA against the random content word and leave-one-word-out on the headline
    foils; against leave-one-word-out, its ReLU twin and GAE on all foils; against the
    random content word on each other foil type."""
    head, types = headline_type(units), foil_types(units)
    is_foil, on_head = units.foil_type.ne("original").to_numpy(), units.foil_type.eq(head).to_numpy()
    out = [la_verdict(units, MAIN, "random content word", on_head, f"{head} foils", seed),
           la_verdict(units, MAIN, "leave-one-word-out", on_head, f"{head} foils", seed),
           la_verdict(units, MAIN, "leave-one-word-out", is_foil, "all foils", seed),
           la_verdict(units, MAIN, f"{MAIN} + ReLU", is_foil, "all foils (the ReLU alone)", seed),
           la_verdict(units, MAIN, "GAE", is_foil, "all foils", seed)]
    return out + [la_verdict(units, MAIN, "random content word", units.foil_type.eq(t).to_numpy(), f"{t} foils", seed)
                  for t in types if t != head]


def ap_verdicts(units: pd.DataFrame, seed: int) -> list[verdicts.Verdict]:
    """Each F-CLIPScore form against CLIPScore: per-original AP of originals above foils."""
    is_foil, orig = units.foil_type.ne("original").to_numpy(), units.foil_type.eq("original").to_numpy()
    ap = {f: proto.ap_units(units, units[f"F|{f}"], is_foil) for f in [*F_NAMES, "CLIPScore"]}
    return [proto.compare_units(units, ap[f], ap["CLIPScore"], orig, arms=(name, "CLIPScore"),
                                claim="AP of originals above foils (per-original precision)",
                                unit="original captions", seed=seed) for f, name in F_NAMES.items()]


def colour_word_verdict(units: pd.DataFrame, seed: int) -> verdicts.Verdict:
    """On original captions: is the most negative word a colour word more often than a
    uniformly drawn word is?"""
    orig = units.foil_type.eq("original").to_numpy()
    return proto.compare_units(units, units.role.eq("colour").astype(float), units["random role share"], orig,
                               claim="on original captions, the most negative word is a colour word",
                               arms=("CLIP4DM's most negative word", "a random word"),
                               unit="original captions", seed=seed)


def planted_control(clip: Clip, planted: dict[int, pd.DataFrame], main: AttributionConfig,
                    rng: np.random.Generator, eps: Epsilons, seed: int, device: str = "cpu",
                    batch_size: int = 128) -> verdicts.Verdict:
    """Positive control: CLIP4DM's LA against the random content word on the planted colour
    foils of every draw. Without any (real FOIL) the control cannot be built, and the
    returned verdict cannot pass."""
    attr = {s: attribute(clip, p, [main], device, batch_size)[0][main] for s, p in planted.items() if len(p)}
    if not attr:
        return verdicts.compare([0.0, 0.0], [0.0, 0.0], claim="no planted colour foils",
                                arms=(MAIN, "random"), unit="none")
    pl = pd.concat([proto.build_units(planted[s], {MAIN: a}, MAIN, rng, eps.forms, eps.f1)
                    for s, a in attr.items()], ignore_index=True)
    return proto.compare_units(pl, pl[f"hit|{MAIN}"], pl["hit|random content word"], np.ones(len(pl), bool),
                               claim="LA on planted colour foils", arms=(MAIN, "random content word"),
                               unit="planted captions", seed=seed)


def flag_rate_control(units: pd.DataFrame, eps: Epsilons, test_split: str, val_split: str,
                      seed: int) -> verdicts.Verdict:
    """Negative control: the share of words the threshold rule flags on the test originals
    against the rate its ε flags on the validation originals."""
    return proto.compare_units(units, units.flagged, np.full(len(units), eps.val_fpr),
                               units.foil_type.eq("original").to_numpy(),
                               claim="share of words flagged on original captions",
                               arms=(f"{test_split} originals", f"rate tuned on {val_split}"),
                               unit="original captions", seed=seed)


def transfer(units: pd.DataFrame, draws: dict[int, Draw], main: AttributionConfig, val: pd.DataFrame,
             val_attr: Attributions, seed: int) -> tuple[list[verdicts.Verdict], pd.DataFrame]:
    """:func:`~fgclip.methods.clip4dm_protocol.transfer_verdicts` of the chosen rule; nothing
    (no verdicts, an empty table) when there is a single foil type to transfer across."""
    types = foil_types(units)
    if len(types) < 2:
        return [], pd.DataFrame()
    return proto.transfer_verdicts(units, {s: d.attr[main] for s, d in draws.items()}, val, val_attr, types, seed)


# ------------------------------------------------------------------------------ speed
class Speed(NamedTuple):
    """pairs/s, GFLOP/pair and GFLOP/s per method (:func:`~fgclip.methods.clip4dm_protocol.pairs_per_second`),
    the pairs timed, and CLIP4DM's speed-up over leave-one-word-out: measured and allowed by the FLOPs."""

    table: dict[str, dict[str, float]]
    n_pairs: int
    measured: float
    allowed: float


def speed(clip: Clip, df: pd.DataFrame, cfg: AttributionConfig, device: str = "cpu", n_pairs: int = 32) -> Speed:
    """Time CLIP4DM against leave-one-word-out on the first ``n_pairs`` pairs of ``df``."""
    n = min(n_pairs, len(df))
    _, inputs, index = load_image_batch(df.image.tolist()[:n], clip)
    table = proto.pairs_per_second(clip, inputs[index], df.caption.tolist()[:n], cfg, device)
    return Speed(table, n, table["pairs/s"]["CLIP4DM"] / table["pairs/s"]["leave-one-word-out"],
                 table["GFLOP/pair"]["leave-one-word-out"] / table["GFLOP/pair"]["CLIP4DM"])


def clauses(vs: Sequence[verdicts.Verdict]) -> str:
    """Several verdicts as one Markdown string of '<claim>: <brief>' clauses, for prose."""
    return "; ".join(f"{v.claim}: {v.brief()}" for v in vs) or "not tested here"

