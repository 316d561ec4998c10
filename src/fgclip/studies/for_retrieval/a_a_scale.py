"""Chapter 3's A/A control at a size the book cannot pay for: the chapter run once more with
``a_a_seeds`` seeds a side, its A/A verdict and each side's chosen schedule written to the page
the critique includes (``book/ch3_a_a_last.md``), with the date, commit and command.

At two seeds a side the A/A's interval is wider than its margin, so it can only say "cannot
tell". More seeds a side narrow the interval; each side still chooses its lr and epochs on two
selection seeds of its own, so a larger A/A measures how much that choice moves the result.

    python -m fgclip ch3-a-a --per-side 20          # runs the chapter (make ch3-a-a; about 11 minutes)
    python -m fgclip ch3-a-a --results runs/.../results.json --commit abc1234
"""
from __future__ import annotations

from pathlib import Path

from .folds import A_A, A_A_B, SUPERVISED

PAGE = Path("book/ch3_a_a_last.md")


def a_a_verdict(results: dict) -> dict:
    """The A/A record of a ch3 results file (the verdict whose arms are the two sides)."""
    found = [v for v in results.get("verdicts", []) if set(v.get("arms", ())) == {A_A, A_A_B}]
    if len(found) != 1:
        raise ValueError(f"ch3 results: expected one A/A verdict (arms {A_A!r}, {A_A_B!r}), found {len(found)}")
    return found[0]


def other_side_score(selection: dict, lr: float, epochs: int) -> float:
    """Mean validation score at (lr, epochs) over a selection record's seeds (its curves)."""
    curves = {float(k): c for k, c in selection["curves"].items()}
    if lr not in curves or not all(len(c) >= epochs for c in curves[lr]):
        raise ValueError(f"selection {selection['arm']!r} has no curve at lr {lr:g} up to epoch {epochs}")
    return sum(c[epochs - 1] for c in curves[lr]) / len(curves[lr])


def a_a_markdown(results: dict, meta: dict) -> str:
    """The page: when and how it ran, each side's seeds and chosen schedule (with its mean
    validation score there and on the other side's selection seeds), the A/A's difference, interval and outcome, and its half-width against
    the margin."""
    v, seeds, sel = a_a_verdict(results), results["a_a_seeds"], results["selection"]
    half = (v["ci_high"] - v["ci_low"]) / 2
    rows = [("side A", SUPERVISED, seeds["side A"], seeds["side A selection"]),
            ("side B", A_A_B, seeds["side B"], seeds["side B selection"])]
    lines = [f"Last run: {meta['date']}, commit `{meta['commit']}`, `{meta['command']}` "
             f"({len(seeds['side A'])} seeds a side, {v['n_clusters']} clusters: {v['cluster_unit']}).", "",
             "| side | training seeds | selection seeds | chosen lr | chosen epochs | mean validation score "
             "| the same schedule on the other side's selection seeds |",
             "|---|---|---|---|---|---|---|"]
    for (side, name, train, chose), (_, other, _, _) in zip(rows, rows[::-1]):
        s = sel[name]
        elsewhere = other_side_score(sel[other], s["lr"], s["epochs"])
        lines.append(f"| {side} | {train[0]}-{train[-1]} | {', '.join(map(str, chose))} | {s['lr']:g} | "
                     f"{s['epochs']} | {s['score']:.3f} | {elsewhere:.3f} |")
    if v["arms"] != [A_A_B, A_A]:
        raise ValueError(f"ch3 results: the A/A's arms are {v['arms']}, expected side B first: {[A_A_B, A_A]}")
    lines += ["", f"A/A on {v['unit']}: side B {v['mean_a']:.3f}, side A {v['mean_b']:.3f}, "
                  f"difference {v['difference']:+.3f} [{v['ci_low']:+.3f}, {v['ci_high']:+.3f}], "
                  f"half-width {half:.3f} against the margin {v['margin']:g}: **{v['outcome']}**."]
    return "\n".join(lines) + "\n"
