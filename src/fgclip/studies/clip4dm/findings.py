"""Chapter 2's closing findings and its results record, built from the run's verdicts.

The chapter collects its verdict families in one dict (:data:`FAMILIES` names them, in the
order the record lists them); every sentence of the closing box is made here from those
verdicts, and ``ch2.json`` holds the same verdicts, so each clause can be traced to a record.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

from ... import verdicts
from .arms import MAIN
from .comparisons import clauses
from .selection import Epsilons
from .units import Margins

FAMILIES = ("la", "floor", "paired", "ap", "colour-word", "controls", "quartiles", "scale", "wrong-image",
            "transfer", "paper-eps")


def all_verdicts(v: Mapping[str, Sequence[verdicts.Verdict]]) -> list[verdicts.Verdict]:
    """Every verdict of the chapter in record order; an unknown or missing family is an error."""
    if set(v) != set(FAMILIES):
        raise ValueError(f"verdict families {sorted(v)} differ from {sorted(FAMILIES)}")
    return [x for name in FAMILIES for x in v[name]]


def roles_by_type(units: pd.DataFrame) -> pd.DataFrame:
    """Where the chosen rule's most negative word falls, per foil type (originals included):
    the share of captions whose argmin is a word of each role (rows: types)."""
    return pd.crosstab(units.foil_type, units.role, normalize="index").rename_axis(index="foil type", columns="role")


def relation_note(roles: pd.DataFrame, la: Mapping[str, float]) -> str:
    """The reason LA on relation foils can be low whatever the labelling: how often the most
    negative word of a relation foil is a shape word; 'no relation foils' when there are none."""
    if "relation" not in roles.index:
        return "no relation foils in this run"
    shape = float(roles.loc["relation"].get("shape", 0.0))
    rel = float(roles.loc["relation"].get("relation/position", 0.0))
    return (f"on relation foils the most negative word is a shape word in {shape:.3f} of captions and a "
            f"relation word in {rel:.3f}; LA there is {la.get('relation', float('nan')):.3f}")


def findings(v: Mapping[str, Sequence[verdicts.Verdict]], f_loc: verdicts.Falsification, power: dict,
             run: str, relation: str) -> dict[str, str]:
    """The closing box's clauses, keyed as the chapter's prose glues them (``ch2-<key>``)."""
    la = v["la"]
    return {
        "run": run, "random": la[0].brief(), "loo-head": la[1].brief(), "loo-all": la[2].brief(),
        "relu": la[3].brief(), "gae": la[4].brief(), "rule": la[5].brief(), "per-type": clauses(la[6:]),
        "relation": relation, "colour-word": v["colour-word"][0].brief(), "floor": clauses(v["floor"]),
        "paired": clauses(v["paired"]), "ap-min": v["ap"][0].brief(), "ap-threshold": v["ap"][1].brief(),
        "ap-additive": v["ap"][2].brief(), "controls": f_loc.sentence(),
        "position-controls": clauses(v["controls"][1:]), "quartiles": clauses(v["quartiles"]),
        "scale": clauses(v["scale"]), "wrong-image": clauses(v["wrong-image"]), "transfer": clauses(v["transfer"]),
        "power": f"half-width {power['half_width']:.3f} against a target of {power['target']:.3f} with "
                 f"{power['n_seeds']} draws: {'met' if power['met'] else 'not met'}",
        "paper-eps": clauses(v["paper-eps"])}


def run_summary(units: pd.DataFrame, headline: str, seeds: Sequence[int], model: str, rule: str
                ) -> tuple[str, dict[str, Any]]:
    """The run's one-line description and its headline numbers: LA of the chosen rule on the
    headline foils and on all foils, and the number of test foils."""
    is_foil, on_head = units.foil_type.ne("original"), units.foil_type.eq(headline)
    la = {k: float(units.loc[m, f"hit|{MAIN}"].mean()) for k, m in (("head", on_head), ("all", is_foil))}
    line = (f"test draws {list(seeds)} ({len(seeds)} independent draws), {int(is_foil.sum())} test foils, {model}, "
            f"{rule}; LA {la['head']:.3f} on {headline} foils, {la['all']:.3f} on all types")
    return line, {"la_headline_shape": la["head"], "la_all_types": la["all"], "n_test_foils": int(is_foil.sum())}


def record(v: Mapping[str, Sequence[verdicts.Verdict]], f_loc: verdicts.Falsification, found: Mapping[str, str],
           tables: Mapping[str, pd.DataFrame], *, la_table: pd.DataFrame, ap_table: pd.DataFrame, eps: Epsilons,
           margins: Margins, **fields: Any) -> dict[str, Any]:
    """The chapter's results record: ``fields`` as given, every verdict in record order, the
    falsification of the central test, the findings, each of ``tables`` as a dict, LA and
    word AUC per arm and foil type, the AP table, every ε and the declared margins."""
    return {**fields, "seed_axis": "independent test draws (toy: exports; real: seeded samples)",
            "la_rule": "word (official): the argmin word equals the foil word; the position rule is a named arm",
            "precision": "fp32", "cluster_unit": "images",
            "epsilon": {"word F1": eps.f1, **{f"F {k}": e for k, e in eps.forms.items()}}, "val_fpr_originals": eps.val_fpr,
            "per_type_la": {m: row["LA"].dropna().to_dict() for m, row in la_table.iterrows()},
            "per_type_auc": {m: row["word AUC"].dropna().to_dict() for m, row in la_table.iterrows()},
            "ap": ap_table.to_dict(orient="index"),
            "margins": {"share": margins.share, "rank": margins.rank, "attr": margins.attr},
            "verdicts": all_verdicts(v), "controls": [f_loc], "found": list(found.values()),
            **{name: t.to_dict(orient="index") for name, t in tables.items()}}
