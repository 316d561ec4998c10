"""Chapter 2's controls: planted colour foils (positive) and the flag rate on original
captions (negative)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ... import verdicts
from ...methods.clip4dm import AttributionConfig
from ...models.factory import Clip
from .arms import MAIN, attribute
from .selection import Epsilons
from .units import build_units, compare_units


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
    pl = pd.concat([build_units(planted[s], {MAIN: a}, MAIN, rng, eps.forms, eps.f1)
                    for s, a in attr.items()], ignore_index=True)
    return compare_units(pl, pl[f"hit|{MAIN}"], pl["hit|random content word"], np.ones(len(pl), bool),
                         claim="LA on planted colour foils", arms=(MAIN, "random content word"),
                         unit="planted captions", seed=seed)


def flag_rate_control(units: pd.DataFrame, eps: Epsilons, test_split: str, val_split: str,
                      seed: int) -> verdicts.Verdict:
    """Negative control: the share of words the threshold rule flags on the test originals
    against the rate its ε flags on the validation originals."""
    return compare_units(units, units.flagged, np.full(len(units), eps.val_fpr),
                         units.foil_type.eq("original").to_numpy(),
                         claim="share of words flagged on original captions",
                         arms=(f"{test_split} originals", f"rate tuned on {val_split}"),
                         unit="original captions", seed=seed)
