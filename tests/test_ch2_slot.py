"""Chapter 2, second round (issue 32 referee): the slot comparison that separates finding the
wrong word from a word-class prior, each type's test read through its own slot control,
the clauses that qualify a verdict by its margin, the paper-ε scale, ε above zero named as a
deviation, and ε tuned by paired accuracy; each made to fail on purpose."""
import dataclasses

import numpy as np
import pandas as pd
import pytest

from fgclip import verdicts
from fgclip.methods.clip4dm import Attributions
from fgclip.studies.clip4dm import comparisons as ccmp, controls as cctl, findings as cfind, selection as csel
from fgclip.studies.clip4dm.selection import Epsilons
from test_ch2_controls import _units


def test_slot_verdict_separates_finding_the_word_from_naming_its_class():
    finds = _units(foil_slot=True, orig_argmin=lambda i: 2)  # the slot on the foil, quiet on the true colour
    v = cctl.slot_verdict(finds, "color", 0.03, seed=0)
    assert v.arms == ("foil caption", "own original") and (v.mean_a, v.mean_b) == (1.0, 0.0)
    assert v.verdict == verdicts.A_BETTER
    prior = _units(foil_slot=True, orig_argmin=lambda i: 1)  # names the colour word, right or wrong
    assert cctl.slot_verdict(prior, "color", 0.03, seed=0).verdict == verdicts.EQUIVALENT


def test_each_type_goes_through_its_own_slot_control():
    good = _units(foil_slot=True, orig_argmin=lambda i: 1 + i % 2)
    test = ccmp.la_verdict(good, "CLIP4DM", "random content word", good.foil_type.eq("color"), "color foils", 0, 0.03)
    pos = cctl.planted_control(good[good.foil_type.eq("color")].reset_index(drop=True), good, 0.03, 0)
    quiet = cctl.position_control(good, "color", 0.2, 0)  # slot half the time, as a random word
    prior = cctl.position_control(_units(True, lambda i: 1), "color", 0.03, 0)  # always the slot: a prior
    shape_test = dataclasses.replace(test, claim="LA on shape foils")
    shape_prior = dataclasses.replace(prior, claim=prior.claim.replace("color slot", "shape slot"))
    f_bad, f_ok = cctl.type_falsifications([shape_test, test], pos, [quiet, shape_prior])  # paired by name, not order
    assert f_bad.test.claim == "LA on shape foils" and f_bad.negative is shape_prior and f_ok.negative is quiet
    f_bad = dataclasses.replace(f_bad, test=test)
    assert f_ok.conclusion == test.outcome and f_bad.conclusion == verdicts.CANNOT_DECIDE
    clause = cfind.through_controls(f_bad)
    assert clause.startswith(f"LA on color foils: the test concludes **{verdicts.CANNOT_DECIDE}** (its negative control")
    assert cfind.through_controls(f_ok).startswith(f"LA on color foils: the test concludes **{test.outcome}** (both "
                                                   "controls passed)")
    with pytest.raises(ValueError, match="no slot control"):
        cctl.type_falsifications([shape_test], pos, [quiet, prior])


def _verdict(low, high, mean_a=0.5, mean_b=0.4, verdict=verdicts.A_BETTER, margin=0.03):
    return verdicts.Verdict(claim="c", arms=("a", "b"), mean_a=mean_a, mean_b=mean_b, difference=(low + high) / 2,
                            ci_low=low, ci_high=high, confidence=0.95, n_seeds=3, n_units=10, n_clusters=10,
                            unit="u", cluster_unit="images", seeds_agreeing=3, verdict=verdict, margin=margin)


def test_reading_qualifies_a_side_by_its_margin_and_an_empty_equivalence():
    assert "inside the ±0.03 margin" in ccmp.reading(_verdict(0.002, 0.151))
    assert "margin" not in ccmp.reading(_verdict(0.05, 0.15)).split("**")[-1]
    below = _verdict(-0.207, -0.043, verdict=verdicts.B_BETTER, margin=0.1)
    assert "its near end, -0.043, lies inside the ±0.1 margin" in ccmp.reading(below)
    zeros = _verdict(0.0, 0.0, 0.0, 0.0, verdicts.EQUIVALENT)
    assert "compares nothing" in ccmp.reading(zeros)
    assert "compares nothing" not in ccmp.reading(_verdict(-0.01, 0.01, verdict=verdicts.EQUIVALENT))


def test_paper_eps_scale_and_positive_eps_are_named():
    eps = Epsilons(f1=-0.0084, forms={"most negative": None, "threshold": -1e-4, "additive": -1e-4}, val_fpr=0.0)
    scale = ccmp.paper_eps_scale(eps)
    assert scale["word F1"]["FOIL"] == pytest.approx(-5e-5 / -0.0084)
    clause = cfind.paper_eps_clause(scale)
    assert "for word F1 the paper's ε are FOIL 0.6%, Rich-HF 0.1% of the size of the tuned ε, so both flag" in clause
    assert "threshold form the paper's ε are FOIL 50.0%, Rich-HF 10.0% of the size of the tuned ε, so the test can" in clause
    above = cfind.paper_eps_clause(ccmp.paper_eps_scale(Epsilons(-0.0084, {"threshold": 1e-4}, 0.0)))
    assert "FOIL 50.0%, Rich-HF 10.0% of the size of the tuned ε and on the other side of zero" in above
    types = pd.DataFrame({"ε F1 own": [-0.01, -0.02], "ε paired own": [0.024, -0.001]}, index=["count", "shape"])
    assert cfind.deviation_clause(eps, types).startswith("ε chosen above zero (count, ε paired own +0.024)")
    assert "negative, as the paper's" in cfind.deviation_clause(eps, types.clip(upper=-0.001))


def test_tune_eps_paired_picks_the_eps_that_ranks_foils_below_their_originals():
    rows = pd.DataFrame({"seed": 0, "image": ["i", "i", "j", "j"], "caption": ["a b", "a c", "d e", "d f"],
                         "original": ["a b", "a b", "d e", "d e"], "foil_type": ["original", "shape"] * 2})
    # originals' words at -0.1, foils' wrong word at -0.5: an ε between them penalises the foils only
    w = [np.array([0.2, -0.1]), np.array([0.2, -0.5]), np.array([0.3, -0.1]), np.array([0.3, -0.5])]
    attr = Attributions([c.split() for c in rows.caption], w, np.full(4, 0.3), [np.arange(2)] * 4)
    e = csel.tune_eps_paired(attr, rows, np.ones(4, bool), "threshold")
    assert -0.5 < e <= -0.1
    with pytest.raises(ValueError, match="no foil"):
        csel.tune_eps_paired(attr, rows, rows.foil_type.eq("original").to_numpy(), "threshold")
    with pytest.raises(ValueError, match="form must be"):
        csel.tune_eps_paired(attr, rows, np.ones(4, bool), "most negative")
