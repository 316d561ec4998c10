"""Chapter 4's findings: each verdict and record of the run turned into the clause that the
chapter's "What we found" box glues (``ch4-<key>``); nothing here states a number the run did
not produce."""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from ... import verdicts
from .arms import FULL, FULL_AFFINE

SUMMARY_KEYS = ("full-zero-shot", "full-untrained", "full-logistic", "full-decoupling-only",
                "full-prompts-only", "p-or-s")


def chapter_findings(summary: list, pointing: verdicts.Verdict, grads: pd.DataFrame, test_v: dict,
                     falsification: verdicts.Falsification, a_a: verdicts.Verdict, power: dict,
                     selections: dict, data: str, planted, zero_shot: dict,
                     checks: dict | None = None, ablations: dict | None = None,
                     trained_grads: pd.DataFrame | None = None, by_s: dict | None = None) -> dict[str, str]:
    """{glue key: clause} for the chapter's findings box.

    summary: :func:`~fgclip.studies.decoupling.comparisons.summary_verdicts`; test_v: the
    scoring verdicts keyed by (control Arm, ρ); grads: the init-gradient table; power:
    :func:`~fgclip.studies.decoupling.comparisons.power_check`; selections: Arm -> Selection;
    planted: the planted co-occurrence control
    (:class:`~fgclip.studies.decoupling.planted.PlantedRun`, softmax vs sigmoid+affine); zero_shot:
    :func:`~fgclip.studies.decoupling.comparisons.full_vs_zero_shot`; checks: Arm ->
    :func:`~fgclip.studies.decoupling.sweep.convergence_check` (arms chosen at the budget's end);
    ablations: :func:`~fgclip.studies.decoupling.comparisons.ablation_verdicts`; trained_grads:
    :func:`~fgclip.studies.decoupling.controls.trained_gradients`; by_s:
    :func:`~fgclip.studies.decoupling.comparisons.ranking_split_verdicts` (each adds its clause when given).
    """
    affine = [v for (arm, _), v in test_v.items() if arm == FULL_AFFINE]
    checks = checks or {}
    out = dict(zip(SUMMARY_KEYS, [v.brief() for v in summary]))
    out |= {
        "pointing": pointing.brief(),
        "unknown-gradients": gradient_clause(grads),
        "scoring-rule": per_proportion((rho, v) for (_, rho), v in test_v.items()) + control_caveat(test_v, checks),
        "same-across-proportions": same_clause(affine),
        "planted": planted_clause(planted),
        "full-zero-shot-diagnosis": zero_shot_clause(zero_shot),
        "falsification": falsification.sentence() + budget_caveat(
            {**{(a, ""): c for a, c in checks.items()}, **{(a, " on the planted world"): c for a, c in planted.checks.items()}},
            ((FULL, ""), (FULL_AFFINE, ""), *((a, " on the planted world") for a in planted.checks))),
        "a-a": a_a.brief() + "; " + a_a_spread_clause(a_a, summary[0].n_seeds, a_a.margin),
        "power": f"half-width {power['half_width']:.3f} against a target of {power['target']:.3f}: "
        f"{'met' if power['met'] else 'not met'} with {power['n_seeds']} seeds",
        "selection": "; ".join(f"{arm.name} lr {sel.lr:g}, {sel.epochs} of {sel.budget} epochs"
                               for arm, sel in selections.items()),
        "not-converged": convergence_clause(selections, checks),
        "data": data,
    }
    if ablations:
        out["ablations"] = ablation_clause(ablations)
    if by_s:
        out["trained-by-s"] = per_proportion(by_s.items())
    if trained_grads is not None:
        out["trained-gradients"] = trained_gradient_clause(trained_grads, grads)
    return out


def budget_caveat(checks: dict, arms: tuple) -> str:
    """'' when no arm of a comparison was still improving at the budget's end by its convergence
    check; otherwise a clause naming them: the verdict compares the arms at this budget. checks
    and arms are keyed (Arm, where): ``where`` follows the arm's name (e.g. " on the planted world")."""
    late = [(where, checks[a, where]) for a, where in arms
            if checks.get((a, where)) is not None and not checks[a, where]["converged"]]
    if not late:
        return ""
    return (" At this budget, not at convergence: " + "; ".join(
        f"{c['arm']}{where} was still improving (trained on to epoch {c['horizon']}, its mean validation mAP is best "
        f"at epoch {c['best epoch']}, not at its chosen {c['chosen']})" for where, c in late) + ".")


def per_proportion(verdicts_by_rho) -> str:
    """(ρ, Verdict) pairs as one clause: '<ρ> known: <brief>; ...'."""
    return "; ".join(f"{rho:.0%} known: {v.brief()}" for rho, v in verdicts_by_rho)


def control_caveat(test_v: dict, checks: dict) -> str:
    """'' when every sigmoid control of the scoring verdicts converged by its check; otherwise
    :func:`budget_caveat`'s sentence naming each one still improving at the budget's end, and
    what follows: its verdicts describe that control at this budget (not the scoring rule), and
    only the affine sigmoid's go through the falsification's controls."""
    late = budget_caveat({(arm, ""): c for arm, c in checks.items()}, tuple((a, "") for a in dict.fromkeys(a for a, _ in test_v)))
    if not late:
        return ""
    return ("." + late + " Its verdicts compare the softmax with a control under-trained at this budget, so they say "
            f"nothing about the scoring rule, and only the verdicts against {FULL_AFFINE.scoring} are read through the "
            "falsification's controls")


def convergence_clause(selections: dict, checks: dict) -> str:
    """Arms chosen near the budget's end (checked) or at its last epoch, each read through its
    convergence check: peaked at its choice (converged) or still improving (under-trained)."""
    parts = []
    for arm, sel in selections.items():
        c = checks.get(arm)
        if c is None and sel.converged:
            continue
        if c is None:
            parts.append(f"{arm.name} (not checked beyond the budget)")
        elif c["converged"]:
            parts.append(f"{arm.name}, whose mean validation mAP, trained on to epoch {c['horizon']}, stays best "
                         f"at epoch {c['best epoch']}: converged at its choice")
        else:
            parts.append(f"{arm.name}, whose mean validation mAP, trained on to epoch {c['horizon']}, is best at "
                         f"epoch {c['best epoch']}: still improving, under-trained at this budget")
    return "; ".join(parts) if parts else "none"


def a_a_spread_clause(a_a: verdicts.Verdict, n_compared: int, margin: float) -> str:
    """Why an A/A comparison of ``n_compared`` seeds a side could not decide: the standard
    deviation over seeds of the A/A's paired differences, and the half-width t_{n-1} sd / sqrt(n)
    its between-seed term alone would give at ``n_compared`` seeds, against the margin."""
    sd = float(np.std(a_a.seed_differences, ddof=1))
    half = float(stats.t.ppf(0.975, n_compared - 1) * sd / np.sqrt(n_compared))
    return (f"its paired seed differences have a standard deviation of {sd:.3f}, so at {n_compared} seeds a side "
            f"(the size of the other comparisons) the between-seed term alone gives a half-width of about "
            f"{half:.3f}, {'wider than' if half > margin else 'within'} the margin {margin:g}")


def gradient_clause(grads: pd.DataFrame) -> str:
    """The gradient reading from :func:`~fgclip.studies.decoupling.controls.init_gradients`'s
    record (rows: scoring rules, at least "softmax" and one sigmoid): where the unknown entries
    are pushed, how many known negatives sit under the margin, and how much of their gradient
    is coupling. Directions are stated from the record's shares, never assumed."""
    g = grads.loc["softmax"]
    sig = grads.drop(index="softmax")
    zero = bool((sig["unknown"] == 0).all())
    if g["unknown up"] > 0 and g["unknown down"] > 0:
        way = f"{g['unknown up']:.0%} of them pushed up and {g['unknown down']:.0%} down"
    else:
        way = f"all of them pushed {'up' if g['unknown up'] > 0 else 'down'}" if g["unknown"] > 0 \
            else "none of them moved"
    return (f"under the softmax, unknown entries get mean |∂L/∂s| {g['unknown']:.1e} (known negatives "
            f"{g['known negative']:.1e}), {way}; {g['negatives under m']:.0%} of the known negatives sit at "
            f"or under the margin m = {g['m']:g}, and with every known negative's own term deleted "
            f"{g['coupling share']:.0%} of their gradient remains (coupling through the softmax); under the "
            f"sigmoids the unknown entries get {'exactly 0' if zero else 'a non-zero gradient (a bug)'}")


def same_clause(vs: list) -> str:
    """Whether one comparison's outcome is the same at every proportion, with each difference,
    and whether the difference changes sign (which one outcome can hide)."""
    signs = {np.sign(v.difference) for v in vs}
    silent = all(v.verdict == verdicts.CANNOT_TELL for v in vs)
    return (f"{'the same' if len({v.outcome for v in vs}) == 1 else 'not the same'} at every proportion "
            f"({', '.join(f'{v.difference:+.3f}, {v.outcome}' for v in vs)})"
            + ("; the difference changes sign across the proportions" if len(signs) > 1 else "")
            + ("; every one of them cannot tell, so the agreement says nothing about the scoring rule" if silent else ""))


def planted_clause(run) -> str:
    """The planted co-occurrence control (:class:`~fgclip.studies.decoupling.planted.PlantedRun`):
    its verdict, whether it fired as predicted (the second arm, the sigmoid, better), and each
    arm's choice read through its convergence check."""
    v = run.verdict
    fired = v.verdict == verdicts.B_BETTER
    arms = []
    for arm, sel in run.selections.items():
        c = run.checks.get(arm)
        state = ("converged" if sel.converged else "best near the budget's end, not checked") if c is None else \
            (f"converged (trained on to epoch {c['horizon']}: best at {c['best epoch']})" if c["converged"]
             else f"still improving (trained on to epoch {c['horizon']}: best at {c['best epoch']})")
        arms.append(f"{arm.name} lr {sel.lr:g}, {sel.epochs} of {sel.budget} epochs, {state}")
    crowd = "" if getattr(run, "reference_labels", None) is None else (
        f"; its images hold {run.labels_per_image():.2f} categories on average against {run.reference_labels:.2f} in "
        f"the chapter's world, so the plant makes images more crowded as well as pairing categories, and the control "
        f"reads the two together")
    return (v.brief() + ("; as predicted, the softmax lost: the control fired" if fired else
                         f"; predicted: {v.arms[1]} better; it did not fire ({v.outcome})")
            + " (" + "; ".join(arms) + ")" + crowd)


def zero_shot_clause(d: dict) -> str:
    """The full model against zero-shot at each proportion, where it starts, how far its
    prompts moved and whether its selection converged
    (:func:`~fgclip.studies.decoupling.comparisons.full_vs_zero_shot`)."""
    st, cv = d["start"], d["convergence"]
    dec = d.get("decoupling only verdicts") or []
    return (per_proportion(zip(d["known"], d["verdicts"]))
            + (". Decoupling only (no learned prompts) against zero-shot: " + per_proportion(zip(d["known"], dec))
               if dec else "")
            + f". Untrained (no label has been seen yet), it starts at mAP {st['untrained']:.3f}, "
            f"{'below' if st['untrained'] < st['zero-shot'] else 'at or above'} zero-shot's {st['zero-shot']:.3f}; "
            f"its prompts (M = {d['context tokens']} context token(s) each) end a mean cosine distance "
            f"{d['prompt drift']:.3f} from the hand prompt; lr {cv['lr']:g} "
            f"was chosen with epoch {cv['epochs']} of {cv['budget']} (mean validation mAP {cv['val first epoch']:.3f} "
            f"after epoch 1, {cv['val chosen epoch']:.3f} then), " + _budget_end(cv)
            + "".join(". " + curves_clause(c) for c in (d.get("validation curves") or {}).values()))


def curves_clause(c: dict) -> str:
    """:func:`~fgclip.studies.decoupling.sweep.proportion_curves` read out: on the validation
    images' full labels, zero-shot and the untrained start, then per ρ the known positives of the
    median category, where the mean curve peaks, its value at the chosen epoch, and whether it
    ever reached zero-shot within the budget."""
    zs = c["zero-shot"]
    parts = []
    for r in c["per known"]:
        reach = ("never reaches zero-shot" if r["best"] < zs else
                 f"passes zero-shot from epoch {next(i for i, v in enumerate(r['mean curve'], 1) if v >= zs)}")
        after = "" if r["best epoch"] >= c["chosen"] else f", falling after its peak to {r['at chosen']:.3f} at the chosen epoch"
        parts.append(f"at {r['known']:.0%} known (median category: {r['median known positives']:g} known positives to "
                     f"fit) it peaks at epoch {r['best epoch']} with {r['best']:.3f}{after} and {reach}")
    return (f"{c['arm']}, trained at lr {c['lr']:g} for the whole budget of {c['budget']} epochs (seeds {c['seeds']}) "
            f"and read on the validation images' full labels (a diagnostic: nothing is chosen there), where zero-shot "
            f"scores {zs:.3f} and this arm untrained {c['untrained']:.3f}: " + "; ".join(parts))


def ablation_clause(ablations: dict) -> str:
    """The full model against each ablation at every proportion
    (:func:`~fgclip.studies.decoupling.comparisons.ablation_verdicts`), flagging a sign change
    across the proportions, which the average over them hides."""
    out = []
    for arm in dict.fromkeys(a for a, _ in ablations):
        vs = [(rho, v) for (a, rho), v in ablations.items() if a == arm]
        flip = len({np.sign(v.difference) for _, v in vs}) > 1
        out.append(f"against {arm.name}: " + ", ".join(f"{rho:.0%} known {v.brief()}" for rho, v in vs)
                   + ("; the difference changes sign across the proportions" if flip else ""))
    return "; ".join(out)


def trained_gradient_clause(trained: pd.DataFrame, init: pd.DataFrame) -> str:
    """The gradient reading at the trained heads (:func:`~fgclip.studies.decoupling.controls.trained_gradients`)
    beside the one at initialisation: under the softmax, the share of known negatives at or
    under the margin, the unknown entries' up / down shares and the coupling share."""
    g, g0 = trained.loc["softmax"], init.loc["softmax"]
    sig = ", ".join(f"{r} {trained.loc[r, 'negatives under m']:.0%}" for r in trained.index if r != "softmax")
    return (f"trained (at the chosen epoch), the softmax has {g['negatives under m']:.0%} of the known negatives at or "
            f"under the margin m = {g['m']:g} ({g0['negatives under m']:.0%} at initialisation; the sigmoids: {sig}); its "
            f"unknown entries are pushed up in {g['unknown up']:.0%} and down in {g['unknown down']:.0%} of the cases, "
            f"and {g['coupling share']:.0%} of the known negatives' gradient is coupling")


def _budget_end(cv: dict) -> str:
    check = cv.get("check")
    if check is None:
        return "before the budget's end" if cv["converged"] else "the budget's last epoch: possibly not converged"
    where = "the budget's last epoch" if not cv["converged"] else "near the budget's end"
    return (f"{where}; trained on to epoch {check['horizon']}, its mean validation mAP is best at "
            f"epoch {check['best epoch']}: " + ("converged at its choice" if check["converged"]
                                                 else "still improving, not converged"))
