"""Chapter 1's training seeds one by one: which seed of which arm scores below a
caption-blind floor, said in a sentence that names it with what is known of its cause.

A seed of a trained arm is *below the floor* when its mean pointing accuracy over the kept
test phrases is below the random point's (the exact expectation, the same for every seed)
or below the caption-blind saliency of the same seed. For each such seed the sentence adds
the same seed's untrained heads (how much its random initialisation already decides where
its maps peak) and, where its curves were recorded, its last validation loss beside the
arm's other seeds'.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def below_floor(scores: Mapping[str, np.ndarray], seeds: Sequence[int], arms: Sequence[str],
                random: str = "random point", saliency: str = "caption-blind saliency") -> list[dict]:
    """One record per (arm, seed) below a floor: {"arm", "seed", "accuracy", "random",
    "saliency", "floors": the names of the floors it is below}. ``scores``: arm ->
    (n_seeds, n_kept) per-phrase hits, rows in the order of ``seeds``."""
    missing = [a for a in (*arms, random, saliency) if a not in scores]
    if missing:
        raise KeyError(f"below_floor: no scores for {missing}")
    for a in (*arms, random, saliency):
        if len(scores[a]) != len(seeds):
            raise ValueError(f"below_floor: arm {a!r} has {len(scores[a])} seed rows, seeds has {len(seeds)}")
    rnd, sal = scores[random].mean(axis=1), scores[saliency].mean(axis=1)
    out = []
    for a in arms:
        for j, s in enumerate(seeds):
            x = float(scores[a][j].mean())
            floors = [name for name, f in ((random, rnd[j]), (f"{saliency} of seed {s}", sal[j])) if x < f]
            if floors:
                out.append({"arm": a, "seed": int(s), "accuracy": x, "random": float(rnd[j]),
                            "saliency": float(sal[j]), "floors": floors})
    return out


def last_val_losses(curves: Sequence[dict], arm: str) -> dict[int, float]:
    """seed -> the validation loss at the arm's chosen period (the heads it evaluates), from
    :func:`~fgclip.studies.maximage.arms.train_selected`'s curve records ({} if none)."""
    for rec in curves:
        if rec["arm"] == arm:
            k = rec["chosen_periods"]
            return {int(s): float(c["val"][k - 1]) for s, c in rec["seeds"].items() if len(c["val"]) >= k}
    return {}


def seed_findings(scores: Mapping[str, np.ndarray], seeds: Sequence[int], arms: Sequence[str],
                  curves: Sequence[dict] = (), untrained: str = "untrained heads",
                  off: Mapping[str, np.ndarray] | None = None) -> list[str]:
    """One sentence per arm with a seed below a floor (:func:`below_floor`), naming each such
    seed with its accuracy, the floors it is below, the same seed's untrained heads, its
    validation loss beside the arm's other seeds' and, where ``off`` gives them (arm ->
    (n_seeds, n_kept) 0/1, :func:`~fgclip.studies.maximage.evaluation.off_objects`), the share of
    its points off every object beside the arm's other seeds'; or one sentence saying no seed is."""
    rows = below_floor(scores, seeds, arms)
    if not rows:
        return [f"no seed of {len(arms)} arms is below the random point or its own seed's caption-blind saliency"]
    out = []
    for arm in dict.fromkeys(r["arm"] for r in rows):
        val = last_val_losses(curves, arm)
        parts = []
        for r in (r for r in rows if r["arm"] == arm):
            j = list(seeds).index(r["seed"])
            bits = [f"{r['accuracy']:.3f}", "below " + " and ".join(
                f"{f} at {r['random'] if f == 'random point' else r['saliency']:.3f}" for f in r["floors"])]
            if untrained in scores and arm != untrained:
                bits.append(f"its untrained heads {scores[untrained][j].mean():.3f}")
            if off is not None and arm in off and len(seeds) > 1:
                share = off[arm].mean(axis=1)  # (n_seeds,)
                rest = np.delete(share, j)
                bits.append(f"{share[j]:.0%} of its points off every object, other seeds {rest.min():.0%}-{rest.max():.0%}")
            if r["seed"] in val and len(val) > 1:
                others = [v for s, v in val.items() if s != r["seed"]]
                bits.append(f"validation loss {val[r['seed']]:.3f}, other seeds {min(others):.3f}-{max(others):.3f}")
            parts.append(f"seed {r['seed']} ({'; '.join(bits)})")
        out.append(f"{arm}: " + ", ".join(parts))
    return out


def off_object_reading(scores: Mapping[str, np.ndarray], off: Mapping[str, np.ndarray], arms: Sequence[str]) -> dict:
    """Where the misses of trained seeds go, over every (arm, seed) of ``arms``: per seed its
    accuracy, its share of points off every object (on background) and its share on another
    object (a miss inside some object box), and the Pearson correlation across those seeds of
    accuracy with each share. A seed that scores low because its maps peak on background shows
    as a strong negative correlation with the off-object share."""
    rows = [{"arm": a, "seed index": j, "accuracy": float(scores[a][j].mean()), "off objects": float(off[a][j].mean()),
             "other object": float(1 - scores[a][j].mean() - off[a][j].mean())}
            for a in arms for j in range(len(scores[a]))]
    acc = np.array([r["accuracy"] for r in rows])
    corr = {k: float(np.corrcoef(acc, [r[k] for r in rows])[0, 1]) for k in ("off objects", "other object")}
    return {"seeds": rows, "correlation with accuracy": corr, "n": len(rows)}


def off_object_sentence(reading: dict) -> str:
    """:func:`off_object_reading` in one sentence."""
    c, rows = reading["correlation with accuracy"], reading["seeds"]
    off, other = [r["off objects"] for r in rows], [r["other object"] for r in rows]
    return (f"over the {reading['n']} trained seeds of the arms, a seed's pointing accuracy correlates at "
            f"r = {c['off objects']:+.2f} with the share of its points off every object ({min(off):.0%}-{max(off):.0%}) "
            f"and at r = {c['other object']:+.2f} with the share on another object ({min(other):.0%}-{max(other):.0%})")
