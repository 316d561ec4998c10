"""Chapter 1's grounding test read out: its power check (the interval's seed and image parts)
and its sentence, the one-sided bound first where both controls pass."""
from __future__ import annotations

import numpy as np

from ... import verdicts


def power_check(v: verdicts.Verdict, margin: float) -> dict:
    """:func:`fgclip.verdicts.power_check`'s record, with the sentence the chapter glues."""
    rec = verdicts.power_check(v, margin)
    # an effect of the margin is resolved once the half-width is below it; the seed spread dominates
    # the half-width here, so the seeds needed scale as (half-width / margin)^2 (a rough estimate)
    # the half-width has a seed part, var(seed means)/S, that more seeds shrink and an image part
    # (the cluster bootstrap) that they do not; with z = 1.96, S' seeds give z sqrt(v_seed S/S' + v_image)
    z, n = 1.96, v.n_seeds
    v_seed = float(np.var(v.seed_differences, ddof=1)) / n if n > 1 else 0.0
    v_image = max((rec["half_width"] / z) ** 2 - v_seed, 0.0)

    def seeds_for(width: float) -> int | None:  # None: not reachable by seeds on these images
        room = (width / z) ** 2 - v_image
        return int(np.ceil(v_seed * n / room)) if room > 0 else None

    rec["seeds_for_margin"], rec["seeds_for_target"] = seeds_for(margin), seeds_for(rec["target"])
    rec["image_part"] = z * float(np.sqrt(v_image))
    def need(k: int | None, what: str) -> str:
        return (f"roughly {k} seeds would put it {what}" if k is not None else
                f"out of reach by seeds alone: the image part is {rec['image_part']:.3f}, more test images are needed")
    resolved = rec["half_width"] < margin
    rec["sentence"] = (f"half-width {rec['half_width']:.3f} with {n} seeds and {v.n_clusters} {v.cluster_unit} (image "
                       f"part {rec['image_part']:.3f}): {'below' if resolved else 'not below'} the margin ({margin:g}), so "
                       f"an effect of the margin {'is' if resolved else 'is not'} resolved "
                       f"({need(rec['seeds_for_margin'], 'at the margin')}); the power target, half the margin-scaled effect "
                       f"({rec['target']:.3f}), is {'met' if rec['met'] else 'not met'} "
                       f"({need(rec['seeds_for_target'], 'at the target')})")
    return rec


def grounding_sentence(f: verdicts.Falsification) -> str:
    """The grounding test in words with its interval; where both controls pass and the model is
    not found better, the interval's upper end, the one-sided bound on its advantage over the
    pointer, comes first."""
    t = f.test
    interval = f"{t.difference:+.3f} {t.interval()}"
    if not f.controls_pass or t.verdict == verdicts.A_BETTER:
        return f"{f.sentence()} The test: {interval}."
    margin = (f"so it does not beat {t.arms[1]} by the margin ({t.margin:g})" if t.ci_high <= t.margin
              else f"which does not exclude an advantage of the margin ({t.margin:g})")
    tail = (f", and it is equivalent to it within the margin" if t.verdict == verdicts.EQUIVALENT
            else "; equivalence within the margin is not shown")
    return (f"{t.arms[0]} vs {t.arms[1]}, {interval} (both controls pass): any advantage above "
            f"{max(t.ci_high, 0.0):.3f} is excluded, {margin}{tail}. {f.sentence()}")


def budget_sentence(more: verdicts.Verdict | None, test: verdicts.Falsification | None, epochs: int,
                    rerun: tuple | None = None) -> str:
    """The budget check in words: ``more``, the longer run against the main arm as trained,
    seed by seed, decides how the chapter's verdicts are to be read; ``test``, the grounding
    test of the longer run (:func:`grounding_sentence`), whether that changes its answer;
    ``rerun`` (seeds, pointing per seed as trained, the same seeds' snapshot at the same period
    in the longer run) how far floating-point rounding alone moves a seed."""
    if more is None or test is None:
        return "not run with these parameters"
    reading = {verdicts.A_BETTER: f"more training raises pointing, so every verdict above describes heads still learning "
                                  f"at the book's budget of {epochs} periods",
               verdicts.EQUIVALENT: f"the book's budget of {epochs} periods gives the same pointing within the margin",
               verdicts.B_BETTER: f"the longer budget gives lower pointing (its validation loss chose the period, not "
                                  f"pointing), so the book's budget of {epochs} periods is not what holds the main arm back",
               }.get(more.verdict, f"the seeds cannot tell whether the book's budget of {epochs} periods holds the main "
                                   "arm back")
    if more.verdict == verdicts.EQUIVALENT:
        answer = "the grounding test at the book's budget stands."
    elif test.controls_pass and test.test.verdict == verdicts.A_BETTER:
        answer = (f"with more training {test.test.arms[0]} beats {test.test.arms[1]}, and the bound at the book's budget "
                  "does not describe the method trained further.")
    elif test.controls_pass:
        answer = (f"more training does not change the answer: {test.test.arms[0]} is {test.test.outcome} against "
                  f"{test.test.arms[1]}.")
    else:
        answer = (f"whether the method beats {test.test.arms[1]} stays open here: "
                  + ("the bound at the book's budget is of heads still learning, and " if more.verdict == verdicts.A_BETTER
                     else "") + "the longer run's test cannot decide.")
    power = power_check(test.test, test.test.margin)["sentence"]
    text = (f"{more.brief()}: {reading}. The grounding test of the longer run: {grounding_sentence(test)} Its power check: "
            f"{power}. Together: {answer}")
    if rerun is not None:
        seeds, first, again = rerun
        j = int(np.argmax(np.abs(np.asarray(again) - np.asarray(first))))
        moved = (f"seed {seeds[j]} moves {first[j]:.3f} -> {again[j]:.3f}, so where a seed ends is not fixed by its start "
                 "alone" if again[j] != first[j] else "no seed moves: rounding changed nothing here")
        text += (f" The chapter's seeds {list(seeds)}, trained again in the longer run's stack (same start, batches, lr and "
                 f"period; only the floating-point rounding of the stacked products differs), score "
                 f"{', '.join(f'{x:.3f}' for x in again)} against {', '.join(f'{x:.3f}' for x in first)} as trained: "
                 f"{moved} (in the grounding test these seeds are the chapter's own heads; the longer run is compared with "
                 "its own snapshot at the book's budget).")
    return text


def grounding_at_budget(test: verdicts.Falsification, epochs: int, more: verdicts.Verdict | None = None,
                        longer: verdicts.Falsification | None = None) -> str:
    """The grounding test at the book's budget, introduced by what the budget check says of it:
    when more training raised pointing (``more`` A better) and the longer run's test, its controls
    passing, reaches another conclusion, the sentence says the budget's conclusion is reversed
    and which one the longer run reaches; without a budget check, only that the heads are at
    the budget."""
    head = f"The heads at the book's budget of {epochs} periods"
    if more is None or longer is None:
        return f"{head}: {grounding_sentence(test)}"
    if more.verdict == verdicts.A_BETTER and longer.controls_pass and longer.conclusion != test.conclusion:
        return (f"{head} are still learning, and the budget check reverses what they conclude: trained longer, the same "
                f"test, both controls passing, concludes **{longer.conclusion}** (interval "
                f"{longer.test.interval()}). At the budget: {grounding_sentence(test)}")
    return (f"{head} (the budget check: {more.outcome}; interval of the longer run's test "
            f"{longer.test.interval()}): {grounding_sentence(test)}")
