"""Chapter 2's controls of the localization test, both read through LA itself: planted
colour foils against the same slot of their own originals (positive), and the headline
foils' slot in their originals, where nothing is wrong, against a random content word
(negative, which must come out 'equivalent'). Each foil type's LA against the random content
word is read through the positive control and its own slot's negative control; and each
type's foils are compared with the same slot of their own originals, which separates
finding the wrong word from a prior for its word class."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ... import verdicts
from ...methods.clip4dm import AttributionConfig
from ...models.factory import Clip
from .arms import MAIN, attribute
from .pairs import original_slot
from .selection import Epsilons
from .units import build_units, compare_units


def planted_units(clip: Clip, planted: dict[int, pd.DataFrame], main: AttributionConfig,
                  rng: np.random.Generator, eps: Epsilons, device: str = "cpu",
                  batch_size: int = 128) -> pd.DataFrame:
    """Unit rows (:func:`~fgclip.studies.clip4dm.units.build_units`) of the planted colour
    foils of every draw under the chosen rule; empty when there are none (real FOIL)."""
    attr = {s: attribute(clip, p, [main], device, batch_size)[0][main] for s, p in planted.items() if len(p)}
    if not attr:
        return pd.DataFrame()
    return pd.concat([build_units(planted[s], {MAIN: a}, MAIN, rng, eps.forms, eps.f1)
                      for s, a in attr.items()], ignore_index=True)


def planted_control(planted: pd.DataFrame, units: pd.DataFrame, margin: float,
                    seed: int) -> verdicts.Verdict:
    """Positive control: on the planted colour foils, the rule's most negative word lands on
    the planted word more often than it lands on the same slot of the caption's own original
    (the true colour). A rule that always names the colour word scores alike on both and
    fails. Without planted foils (real FOIL) the control cannot pass."""
    slot = original_slot(planted, units) if len(planted) else pd.DataFrame()
    if slot.empty or slot["slot hit"].notna().sum() < 2:
        return verdicts.compare([0.0, 0.0], [0.0, 0.0], claim="no planted colour foils",
                                arms=(MAIN, "its original"), unit="none", margin=margin)
    return compare_units(planted, planted[f"hit|{MAIN}"], slot["slot hit"], slot["slot hit"].notna(),
                         claim="LA on planted colour foils against the same slot of their originals",
                         arms=("planted foil", "own original"), unit="planted captions", seed=seed, margin=margin)


def position_control(units: pd.DataFrame, foil_type: str, margin: float, seed: int) -> verdicts.Verdict:
    """Negative control: in the own originals of the ``foil_type`` foils, where nothing is
    wrong, the rule's most negative word lands in the slot the foil replaced as often as a
    random content word does: it passes only as 'equivalent' within ``margin``. A rule with
    a prior for that slot's word class (or one that reads the label) fails it."""
    rows = units[units.foil_type.eq(foil_type)]
    slot = original_slot(rows, units)
    a, b = np.full(len(units), np.nan), np.full(len(units), np.nan)
    pos = units.index.get_indexer(rows.index)
    a[pos], b[pos] = slot["slot hit"].to_numpy(), slot["slot random"].to_numpy()
    return compare_units(units, a, b, ~np.isnan(a), claim=f"{MAIN} on the {foil_type} slot of original captions",
                         arms=(MAIN, "random content word"), unit=f"original captions ({foil_type} slot)",
                         seed=seed, margin=margin)


def slot_verdict(units: pd.DataFrame, foil_type: str, margin: float, seed: int) -> verdicts.Verdict:
    """The rule's LA on the ``foil_type`` foils against how often it lands on the same slot of
    their own originals, where the word is right: a rule with only a prior for the slot's
    word class lands there alike in both and comes out 'equivalent' or worse."""
    rows = units[units.foil_type.eq(foil_type)]
    a, b = np.full(len(units), np.nan), np.full(len(units), np.nan)
    pos = units.index.get_indexer(rows.index)
    a[pos], b[pos] = rows[f"hit|{MAIN}"].to_numpy(dtype=float), original_slot(rows, units)["slot hit"].to_numpy()
    return compare_units(units, a, b, ~np.isnan(a) & ~np.isnan(b),
                         claim=f"LA on {foil_type} foils against the same slot of their own originals",
                         arms=("foil caption", "own original"), unit=f"{foil_type} foil captions", seed=seed,
                         margin=margin)


def type_falsifications(tests: list[verdicts.Verdict], positive: verdicts.Verdict,
                        slots: list[verdicts.Verdict]) -> list[verdicts.Falsification]:
    """Each foil type's LA test (against the random content word; claim 'LA on <type> foils')
    read through the planted positive control and that type's own slot control
    (:func:`position_control`, claim '... on the <type> slot ...'), paired by the type's name,
    in the order of ``tests``; a test without its slot control is an error."""
    by_type = {re.search(r" on the (.+?) slot ", n.claim).group(1): n for n in slots}
    out = []
    for t in tests:
        name = re.fullmatch(r"LA on (.+?) foils", t.claim)
        if name is None or name.group(1) not in by_type:
            raise ValueError(f"type_falsifications: no slot control for {t.claim!r} among {sorted(by_type)}")
        out.append(verdicts.falsify(t, positive, by_type[name.group(1)], effect=verdicts.A_BETTER))
    return out
