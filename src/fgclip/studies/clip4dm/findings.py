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
from .comparisons import clauses, paper_eps_scale, reading
from .scale import FLAG
from .selection import Epsilons
from .units import Margins

FAMILIES = ("la", "floor", "slot", "paired", "ap", "colour-word", "controls", "quartiles", "scale", "wrong-image",
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


def through_controls(f: verdicts.Falsification) -> str:
    """A test's clause that leads with its conclusion: what the test concludes, whether its
    controls behaved, and only then the comparison itself."""
    ctl = "both controls passed" if f.controls_pass else (
        f"its {'positive' if not f.positive_passed else 'negative'} control "
        f"({(f.positive if not f.positive_passed else f.negative).claim}) failed")
    return f"{f.test.claim}: the test concludes **{f.conclusion}** ({ctl}); the comparison alone: {reading(f.test)}"


def relative_clauses(vs: Sequence[verdicts.Verdict]) -> str:
    """:func:`clauses`, with the relative change (A − B over B's mean) after every verdict on
    the share of words below ε, whose base rate is small enough that an absolute difference
    alone hides how large the change is."""
    def rel(v: verdicts.Verdict) -> str:
        if FLAG not in v.claim or not v.mean_b:
            return ""
        return f" (a relative change of {v.difference / v.mean_b:+.0%} on {v.arms[1]}'s {v.mean_b:.3f})"
    return "; ".join(f"{v.claim}: {reading(v)}{rel(v)}" for v in vs) or "not tested here"


def power_clause(power: Sequence[dict]) -> str:
    """The power checks as one clause: each comparison's half-width against its target (a
    negative control's target is its margin: wider, it could not have come out equivalent)."""
    def one(p: dict) -> str:
        null = p["rule"].endswith("(negative control)")
        missed = "too wide to come out equivalent at this size" if null else "under-powered at this size"
        return (f"{p['claim']} ({p['arms'][0]} vs {p['arms'][1]}{', negative control' if null else ''}): half-width "
                f"{p['half_width']:.3f} against a target of {p['target']:.3f}, {'met' if p['met'] else 'not met: ' + missed}")
    return "; ".join(one(p) for p in power)


def deviation_clause(eps: Epsilons, eps_types: pd.DataFrame) -> str:
    """Every ε the validation split chose above zero (a deviation: the paper's ε is negative,
    so a positive one also flags words that raise the score), or that none was."""
    pos = [f"{k} {e:+.3g}" for k, e in {"word F1": eps.f1, **eps.forms}.items() if e is not None and e > 0]
    pos += [f"{t}, {col} {e:+.3g}" for t, row in eps_types.iterrows() for col, e in row.items() if e > 0]
    if not pos:
        return "every ε chosen on the validation split is negative, as the paper's are"
    return (f"ε chosen above zero ({'; '.join(pos)}): a deviation from the paper, whose ε is negative; a "
            f"positive ε also flags words that raise the score")


PAPER_EPS_USES = ("word F1", "threshold form")  # the use each of paper_epsilon_verdicts' two verdicts reads
INFORMATIVE = 0.1  # a paper ε under this fraction of the tuned one flags nearly the words the other does


def can_fail(ratios: Mapping[str, float], informative: float = INFORMATIVE) -> bool:
    """Whether a use's paper-ε comparison can fail: some paper ε is at least ``informative`` of
    the ε this run tuned for that use (:func:`~fgclip.studies.clip4dm.comparisons.paper_eps_scale`)."""
    return max(abs(x) for x in ratios.values()) >= informative


def informative_paper_eps(vs: Sequence[verdicts.Verdict], scale: Mapping[str, Mapping[str, float]],
                          informative: float = INFORMATIVE) -> list[verdicts.Verdict]:
    """The paper-ε verdicts that can fail at this scale (:func:`can_fail`): a use whose paper ε
    flag nearly the same words comes out equivalent by construction and is not counted as a
    verdict (the clause says so)."""
    return [v for v, use in zip(vs, PAPER_EPS_USES) if can_fail(scale[use], informative)]


def paper_eps_verdicts_clause(kept: Sequence[verdicts.Verdict], all_: Sequence[verdicts.Verdict]) -> str:
    """The paper-ε verdicts the chapter counts, and the ones it shows but does not count."""
    dropped = [v.claim for v in all_ if v not in kept]
    out = clauses(kept) if kept else "none counted as a verdict"
    return out + (f" (shown in the chapter but not counted, since they cannot fail at this scale: {'; '.join(dropped)})"
                  if dropped else "")


def paper_eps_clause(scale: Mapping[str, Mapping[str, float]], informative: float = INFORMATIVE) -> str:
    """Each use's ratio of the paper's ε to the one this run tuned, and whether the paper-ε
    test can fail at this scale (uninformative when every ratio is below ``informative``)."""
    parts = []
    for use, ratios in scale.items():
        r = ", ".join(f"{name} {abs(x):.1%}" for name, x in ratios.items())
        side = " and on the other side of zero (the tuned ε is above it)" if min(ratios.values()) < 0 else ""
        parts.append(f"for {use} the paper's ε are {r} of the size of the tuned ε{side}, "
                     + ("so the test can tell them apart" if can_fail(ratios, informative) else "so both flag nearly the same words and the "
                        "test is uninformative at this scale"))
    return "; ".join(parts)


def findings(v: Mapping[str, Sequence[verdicts.Verdict]], f_types: Sequence[verdicts.Falsification],
             power: Sequence[dict], run: str, relation: str, speed: Any, eps: Epsilons,
             eps_types: pd.DataFrame, paper_eps_all: Sequence[verdicts.Verdict] = ()) -> dict[str, str]:
    """The closing box's clauses, keyed as the chapter's prose glues them (``ch2-<key>``);
    ``f_types``: each foil type's LA test read through its controls, the headline first;
    ``speed``: a :class:`~fgclip.studies.clip4dm.speed.Speed` (CLIP4DM's pairs/s over
    leave-one-word-out's, measured and allowed by FLOPs); ``eps``, ``eps_types``: the chosen ε,
    read for the paper-ε test's scale and for any ε above zero; ``paper_eps_all``: every paper-ε
    verdict, of which ``v["paper-eps"]`` holds the ones counted (:func:`informative_paper_eps`)."""
    la = v["la"]
    return {
        "run": run, "random": through_controls(f_types[0]), "loo-head": reading(la[1]), "loo-all": reading(la[2]),
        "relu": reading(la[3]), "gae": reading(la[4]), "rule": reading(la[5]),
        "per-type": "; ".join(through_controls(f) for f in f_types[1:]) or "not tested here",
        "relation": relation, "colour-word": reading(v["colour-word"][0]), "floor": clauses(v["floor"]),
        "slot": clauses(v["slot"]), "paired": clauses(v["paired"]), "ap-min": reading(v["ap"][0]),
        "ap-threshold": reading(v["ap"][1]), "ap-additive": reading(v["ap"][2]), "controls": f_types[0].sentence(),
        "position-controls": clauses(v["controls"][1:]), "quartiles": clauses(v["quartiles"]),
        "scale": relative_clauses(v["scale"]), "wrong-image": relative_clauses(v["wrong-image"]), "transfer": clauses(v["transfer"]),
        "power": power_clause(power), "paper-eps": paper_eps_verdicts_clause(v["paper-eps"], paper_eps_all or v["paper-eps"]),
        "paper-scale": paper_eps_clause(paper_eps_scale(eps)), "deviations": deviation_clause(eps, eps_types),
        "speed": f"CLIP4DM runs {speed.measured:.2f}x the pairs/s of leave-one-word-out on the machine that built "
                 f"this page, where their FLOPs allow {speed.allowed:.2f}x"}


def run_summary(units: pd.DataFrame, headline: str, seeds: Sequence[int], model: str, rule: str
                ) -> tuple[str, dict[str, Any]]:
    """The run's one-line description and its headline numbers: LA of the chosen rule on the
    headline foils and on all foils, and the number of test foils."""
    is_foil, on_head = units.foil_type.ne("original"), units.foil_type.eq(headline)
    la = {k: float(units.loc[m, f"hit|{MAIN}"].mean()) for k, m in (("head", on_head), ("all", is_foil))}
    line = (f"test draws {list(seeds)} ({len(seeds)} independent draws), {int(is_foil.sum())} test foils, {model}, "
            f"{rule}; LA {la['head']:.3f} on {headline} foils, {la['all']:.3f} on all types")
    return line, {"la_headline_shape": la["head"], "la_all_types": la["all"], "n_test_foils": int(is_foil.sum())}


def record(v: Mapping[str, Sequence[verdicts.Verdict]], f_types: Sequence[verdicts.Falsification],
           found: Mapping[str, str],
           tables: Mapping[str, pd.DataFrame], *, la_table: pd.DataFrame, ap_table: pd.DataFrame, eps: Epsilons,
           margins: Margins, **fields: Any) -> dict[str, Any]:
    """The chapter's results record: ``fields`` as given, every verdict in record order, the
    falsification of each type's LA test (the headline first), the findings, each of ``tables`` as a dict, LA and
    word AUC per arm and foil type, the AP table, every ε and the declared margins."""
    return {**fields, "seed_axis": "independent test draws (toy: exports; real: seeded samples)",
            "la_rule": "word (official): the argmin word equals the foil word; the position rule is a named arm",
            "precision": "fp32", "cluster_unit": "images",
            "epsilon": {"word F1": eps.f1, **{f"F {k}": e for k, e in eps.forms.items()}}, "val_fpr_originals": eps.val_fpr,
            "per_type_la": {m: row["LA"].dropna().to_dict() for m, row in la_table.iterrows()},
            "per_type_auc": {m: row["word AUC"].dropna().to_dict() for m, row in la_table.iterrows()},
            "ap": ap_table.to_dict(orient="index"),
            "margins": {"share": margins.share, "rank": margins.rank, "attr": margins.attr, "flag": margins.flag},
            "verdicts": all_verdicts(v), "controls": list(f_types), "found": list(found.values()),
            **{name: t.to_dict(orient="index") for name, t in tables.items()}}
