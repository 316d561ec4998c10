"""Chapter 2's controls can fail (issue 30 item 4, issue 32 item 2): the positive control
fails for a rule that always names the colour word, the negative control fails for a rule
with a prior for the slot's word class; the paired score comparison, the informed floor and
the power record by hand."""
import numpy as np
import pandas as pd
import pytest

from fgclip import verdicts
from fgclip.methods.clip4dm import Attributions
from fgclip.studies.clip4dm import comparisons as ccmp, controls as cctl, pairs as cpairs
from fgclip.studies.clip4dm.units import Margins, build_units, informed_floor_hit

EPS = {"most negative": None, "threshold": -0.1, "additive": -0.1}


def _units(foil_slot: bool, orig_argmin, n_img=40, seeds=(0, 1, 2)):
    """Per image a colour foil 'a red circle' of the original 'a blue circle' (slot: word 1);
    the foil's most negative word is the slot when ``foil_slot``, else 'circle'; the
    original's is word ``orig_argmin(i)`` of image i."""
    frames = []
    for s in seeds:
        rows, ws = [], []
        for i in range(n_img):
            rows.append(dict(caption="a red circle", image=f"im{i}", start=1, length=1, foil_type="color",
                             foil_word="red", target_word="blue", original="a blue circle"))
            ws.append(np.array([0.1, -0.5, 0.0]) if foil_slot else np.array([0.1, 0.0, -0.5]))
            rows.append(dict(caption="a blue circle", image=f"im{i}", start=np.nan, length=0, foil_type="original",
                             foil_word="", target_word="", original="a blue circle"))
            w = np.zeros(3)
            w[orig_argmin(i)] = -0.5
            ws.append(w)
        df = pd.DataFrame(rows)
        df["seed"], df["cluster"] = s, [f"{s}:{im}" for im in df.image]
        cos = np.where(df.foil_type.eq("original"), 0.3, 0.2)
        attr = Attributions([c.split() for c in df.caption], ws, cos, [np.arange(3)] * len(df))
        frames.append(build_units(df, {"CLIP4DM": attr}, "CLIP4DM", np.random.default_rng(s), EPS, -0.1))
    return pd.concat(frames, ignore_index=True)


def _planted(units):
    return units[units.foil_type.eq("color")].reset_index(drop=True)


def test_positive_control_passes_only_when_the_planted_word_is_found_not_named_by_class():
    good = _units(foil_slot=True, orig_argmin=lambda i: 2)  # finds the planted colour, quiet on the true one
    v = cctl.planted_control(_planted(good), good, margin=0.03, seed=0)
    assert v.verdict == verdicts.A_BETTER and v.mean_a == 1.0 and v.mean_b == 0.0 and v.cluster_unit == "images"
    always_colour = _units(foil_slot=True, orig_argmin=lambda i: 1)  # names the colour word, true or not
    v = cctl.planted_control(_planted(always_colour), always_colour, margin=0.03, seed=0)
    assert v.verdict != verdicts.A_BETTER and v.difference == 0.0
    blind = _units(foil_slot=False, orig_argmin=lambda i: 2)  # planted effect removed: never finds it
    assert cctl.planted_control(_planted(blind), blind, margin=0.03, seed=0).verdict != verdicts.A_BETTER
    empty = cctl.planted_control(pd.DataFrame(), good, margin=0.03, seed=0)
    assert empty.claim == "no planted colour foils" and empty.verdict != verdicts.A_BETTER


def test_negative_control_is_equivalent_without_a_prior_and_fails_with_one():
    no_prior = _units(foil_slot=True, orig_argmin=lambda i: 1 + i % 2)  # slot half the time = random's 1/2
    v = cctl.position_control(no_prior, "color", margin=0.2, seed=0)
    assert v.verdict == verdicts.EQUIVALENT and v.mean_a == pytest.approx(0.5) and v.mean_b == pytest.approx(0.5)
    prior = _units(foil_slot=True, orig_argmin=lambda i: 1)  # always the colour slot: the control fires
    v_bad = cctl.position_control(prior, "color", margin=0.2, seed=0)
    assert v_bad.verdict == verdicts.A_BETTER
    test = ccmp.la_verdict(no_prior, "CLIP4DM", "random content word", no_prior.foil_type.eq("color"), "color foils",
                           0, 0.03)
    pos = cctl.planted_control(_planted(no_prior), no_prior, 0.03, 0)
    assert verdicts.falsify(test, pos, v).controls_pass
    assert not verdicts.falsify(test, pos, v_bad).controls_pass  # planted prior added: cannot decide


def test_paired_accuracy_and_own_original():
    units = _units(foil_slot=True, orig_argmin=lambda i: 2, n_img=3, seeds=(0,))
    idx = cpairs.own_original(units, units)
    assert idx.tolist() == [1, 1, 3, 3, 5, 5]  # each caption points at its image's original
    foil = units.foil_type.eq("color").to_numpy()
    assert (units.image.to_numpy()[idx[foil]] == units.image.to_numpy()[foil]).all()
    acc = cpairs.paired_accuracy(units, units.cos)
    assert np.isnan(acc[~foil]).all() and (acc[foil] == 1.0).all()  # originals 0.3 above foils 0.2
    assert (cpairs.paired_accuracy(units, np.zeros(len(units)))[foil] == 0.5).all()  # ties count 1/2
    vs = ccmp.paired_verdicts(units.assign(seed=0), 0, Margins(0.03, 0.02))
    assert [v.arms[1] for v in vs] == ["CLIPScore", "CLIPScore"] and vs[0].claim.startswith("color foils")


def test_informed_floor_draws_from_the_foil_word_class():
    words = ["a", "red", "star", "left", "of", "a", "blue", "ring"]
    y = np.zeros(8, int)
    y[1] = 1  # a colour foil: two colour words -> 1/2
    assert informed_floor_hit(words, y) == 0.5
    y[:] = 0
    y[7] = 1  # a shape foil: two shape words
    assert informed_floor_hit(words, y) == 0.5
    assert np.isnan(informed_floor_hit(words, np.zeros(8, int)))


def test_power_record():
    units = _units(foil_slot=True, orig_argmin=lambda i: 2)
    v = ccmp.la_verdict(units, "CLIP4DM", "random content word", units.foil_type.eq("color"), "color foils", 0, 0.03)
    (rec,) = ccmp.power_records([v])
    assert rec["half_width"] == pytest.approx((v.ci_high - v.ci_low) / 2)
    assert rec["target"] == pytest.approx(0.5 * max(abs(v.difference), 0.03)) and rec["met"]


def test_power_record_of_a_negative_control_targets_its_margin():
    """A negative control passes only as 'equivalent', so its power target is the margin itself;
    the findings clause names it and says why it could not pass when wider."""
    from fgclip.studies.clip4dm.findings import power_clause
    units = _units(foil_slot=True, orig_argmin=lambda i: 2)
    v = ccmp.la_verdict(units, "CLIP4DM", "random content word", units.foil_type.eq("color"), "color foils", 0, 0.03)
    central, null = ccmp.power_records([v], [v])
    assert null["target"] == pytest.approx(0.03) and null["rule"].endswith("(negative control)")
    assert null["met"] == (null["half_width"] <= 0.03) and central["target"] != null["target"]
    wide = {**null, "half_width": 0.05, "met": False}
    assert "negative control): half-width 0.050 against a target of 0.030, not met: too wide to come out equivalent" \
        in power_clause([wide])
    assert "not met: under-powered at this size" in power_clause([{**central, "met": False}])


def test_a_paper_eps_verdict_that_cannot_fail_is_not_counted():
    """A use whose paper ε are all under a tenth of the tuned ε flags nearly the same words under
    both: its verdict is shown, not counted; the clause names it. A use at scale keeps its verdict."""
    from fgclip.studies.clip4dm.findings import informative_paper_eps, paper_eps_verdicts_clause
    units = _units(foil_slot=True, orig_argmin=lambda i: 2)
    f1, acc = (ccmp.la_verdict(units, "CLIP4DM", "random content word", units.foil_type.eq("color"), c, 0, 0.03)
               for c in ("word F1 on foil captions", "F-CLIPScore (threshold) paired accuracy on foil captions"))
    small = {"word F1": {"FOIL": 0.006, "Rich-HF": 0.001}, "threshold form": {"FOIL": 0.03, "Rich-HF": 0.006}}
    assert informative_paper_eps([f1, acc], small) == []
    said = paper_eps_verdicts_clause([], [f1, acc])
    assert said.startswith("none counted as a verdict") and "LA on word F1 on foil captions" in said
    at_scale = {**small, "threshold form": {"FOIL": 0.5, "Rich-HF": 0.1}}
    assert informative_paper_eps([f1, acc], at_scale) == [acc]
    assert "cannot fail at this scale: LA on word F1 on foil captions" in paper_eps_verdicts_clause([acc], [f1, acc])
