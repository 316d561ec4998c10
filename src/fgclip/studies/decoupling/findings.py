"""Chapter 4's findings: each verdict and record of the run turned into the clause that the
chapter's "What we found" box glues (``ch4-<key>``); nothing here states a number the run did
not produce."""
from __future__ import annotations

import pandas as pd

from ... import verdicts
from .arms import FULL_AFFINE

SUMMARY_KEYS = ("full-zero-shot", "full-untrained", "full-logistic", "full-decoupling-only",
                "full-prompts-only", "p-or-s")


def chapter_findings(summary: list, pointing: verdicts.Verdict, grads: pd.DataFrame, test_v: dict,
                     falsification: verdicts.Falsification, a_a: verdicts.Verdict, power: dict,
                     selections: dict, data: str) -> dict[str, str]:
    """{glue key: clause} for the chapter's findings box.

    summary: :func:`~fgclip.studies.decoupling.comparisons.summary_verdicts`; test_v: the
    scoring verdicts keyed by (control Arm, ρ); grads: the init-gradient table; power:
    :func:`~fgclip.studies.decoupling.comparisons.power_check`; selections: Arm -> Selection.
    """
    g = grads.loc["softmax"]
    affine = [v.outcome for (arm, _), v in test_v.items() if arm == FULL_AFFINE]
    not_converged = [arm.name for arm, sel in selections.items() if not sel.converged]
    out = dict(zip(SUMMARY_KEYS, [v.brief() for v in summary]))
    out |= {
        "pointing": pointing.brief(),
        "unknown-gradients": f"mean |∂L/∂s| {g['unknown']:.1e} at unknown entries under the softmax "
        f"(known negatives {g['known negative']:.1e}), exactly {grads.loc['sigmoid+affine', 'unknown']:.0f} "
        "under the sigmoids",
        "scoring-rule": "; ".join(f"{rho:.0%} known: {v.brief()}" for (_, rho), v in test_v.items()),
        "same-across-proportions": f"{'the same' if len(set(affine)) == 1 else 'not the same'} at every "
        f"proportion ({', '.join(affine)})",
        "falsification": falsification.sentence(),
        "a-a": a_a.brief(),
        "power": f"half-width {power['half_width']:.3f} against a target of {power['target']:.3f}: "
        f"{'met' if power['met'] else 'not met'} with {power['n_seeds']} seeds",
        "selection": "; ".join(f"{arm.name} lr {sel.lr:g}, {sel.epochs} of {sel.budget} epochs"
                               for arm, sel in selections.items()),
        "not-converged": ", ".join(not_converged) if not_converged else "none",
        "data": data,
    }
    return out
