"""Chapter 3's A/A control at a size the book cannot pay for: the chapter run once more with
``a_a_seeds`` seeds a side. What the page needs of that run (the A/A verdict, each side's seeds
and selection record, when and how it ran) is kept as a small record (``book/ch3_a_a_last.json``)
and the page the critique includes (``book/ch3_a_a_last.md``) is written from it. The first such
run, made when any epoch of the budget could be chosen, is kept beside it as
``book/ch3_a_a_budget_rule.{json,md}`` (the critique compares the two).

At two seeds a side the A/A's interval is wider than its margin, so it can only say "cannot
tell". A larger A/A narrows the seeds' share of that width (the folds, resampled as clusters,
keep theirs), and each side still chooses its lr and epochs on two selection seeds of its own,
so it also measures how much that choice moves the result.

    python -m fgclip ch3-a-a --per-side 20          # runs the chapter (make ch3-a-a; 10-11 min with one torch thread)
    python -m fgclip ch3-a-a --results runs/.../results.json --commit abc1234
"""
from __future__ import annotations

from pathlib import Path

from .folds import A_A, A_A_B, SUPERVISED

PAGE = Path("book/ch3_a_a_last.md")
RECORD = PAGE.with_suffix(".json")


def a_a_verdict(results: dict) -> dict:
    """The A/A record of a ch3 results file (the verdict whose arms are the two sides, side B first)."""
    found = [v for v in results.get("verdicts", []) if set(v.get("arms", ())) == {A_A, A_A_B}]
    if len(found) != 1:
        raise ValueError(f"ch3 results: expected one A/A verdict (arms {A_A!r}, {A_A_B!r}), found {len(found)}")
    if found[0]["arms"] != [A_A_B, A_A]:
        raise ValueError(f"ch3 results: the A/A's arms are {found[0]['arms']}, expected side B first: {[A_A_B, A_A]}")
    return found[0]


def a_a_record(results: dict, meta: dict) -> dict:
    """What the page needs of a ch3 results file: ``meta`` (date, commit, command), the A/A
    verdict, the sides' seeds and both sides' selection records (with their curves)."""
    sel = results["selection"]
    missing = [name for name in (SUPERVISED, A_A_B) if name not in sel]
    if missing:
        raise ValueError(f"ch3 results: no selection record for {missing}")
    return {"meta": meta, "verdict": a_a_verdict(results), "a_a_seeds": results["a_a_seeds"],
            "selection": {name: sel[name] for name in (SUPERVISED, A_A_B)}}


def other_side_score(selection: dict, lr: float, epochs: int) -> float:
    """Mean validation score at (lr, epochs) over a selection record's seeds (its curves)."""
    curves = {float(k): c for k, c in selection["curves"].items()}
    if lr not in curves or not all(len(c) >= epochs for c in curves[lr]):
        raise ValueError(f"selection {selection['arm']!r} has no curve at lr {lr:g} up to epoch {epochs}")
    return sum(c[epochs - 1] for c in curves[lr]) / len(curves[lr])


def a_a_markdown(record: dict) -> str:
    """The page: when and how it ran; each side's seeds and chosen schedule with its mean
    validation score there and on the other side's selection seeds; the A/A's metric, means,
    difference, interval, seeds agreeing and outcome, and its half-width against the margin."""
    v, seeds, sel, meta = record["verdict"], record["a_a_seeds"], record["selection"], record["meta"]
    half = (v["ci_high"] - v["ci_low"]) / 2
    rows = [("side A", SUPERVISED, seeds["side A"], seeds["side A selection"]),
            ("side B", A_A_B, seeds["side B"], seeds["side B selection"])]
    lines = [f"Run: {meta['date']}, commit `{meta['commit']}`, `{meta['command']}` ({len(seeds['side A'])} seeds a "
             f"side; the interval resamples {v['n_clusters']} folds as clusters). Each side chose its schedule on the "
             f"first fold's validation images.", "",
             "| side | training seeds | selection seeds | chosen lr | chosen epochs | mean validation score "
             "| the same schedule on the other side's selection seeds |",
             "|---|---|---|---|---|---|---|"]
    for (side, name, train, chose), (_, other, _, _) in zip(rows, rows[::-1]):
        s = sel[name]
        elsewhere = other_side_score(sel[other], s["lr"], s["epochs"])
        lines.append(f"| {side} | {train[0]}-{train[-1]} | {', '.join(map(str, chose))} | {s['lr']:g} | "
                     f"{s['epochs']} | {s['score']:.3f} | {elsewhere:.3f} |")
    diffs = v["seed_differences"]
    lines += ["", f"{v['claim']}: side B {v['mean_a']:.3f}, side A {v['mean_b']:.3f}, difference "
                  f"{v['difference']:+.3f} [{v['ci_low']:+.3f}, {v['ci_high']:+.3f}]; {v['seeds_agreeing']} of "
                  f"{v['n_seeds']} paired seeds agree in sign (from {min(diffs):+.3f} to {max(diffs):+.3f}); "
                  f"half-width {half:.3f} against the margin {v['margin']:g}: **{v['outcome']}**."]
    return "\n".join(lines) + "\n"
