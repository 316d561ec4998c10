"""The low-CLIPScore claim on the attributions' own scale (issue 32 item 3): quartile
verdicts on the share of words below ε and on the minimum attribution, and the wrong-image
arm; each fires on a planted effect and stays quiet (or equivalent) without one."""
import numpy as np
import pandas as pd
import pytest

from fgclip import verdicts
from fgclip.studies.clip4dm import scale as cscale
from fgclip.studies.clip4dm.units import Margins

MARGINS = Margins(share=0.03, rank=0.02, attr=0.1)


def _units(effect: float, n=80, seeds=(0, 1, 2)):
    """Shape foils, each beside its own original on its image: the original's cosine (the
    pair's difficulty) raises the foil's share of flagged words and lowers its minimum
    attribution by ``effect`` (0: flat); the foil's own cosine runs the other way, so
    quartiles cut on it would reverse every trend; ε = -0.01."""
    frames = []
    for s in seeds:
        rng = np.random.default_rng(s)
        cos = rng.uniform(0.1, 0.5, n)
        rank = np.argsort(np.argsort(cos)) / (n - 1)  # 0 .. 1 by the original's cosine
        base = {"seed": s, "cluster": [f"{s}:{i}" for i in range(n)], "image": [f"im{i}" for i in range(n)],
                "original": [f"orig {i}" for i in range(n)]}
        frames.append(pd.DataFrame({**base, "caption": [f"foil {i}" for i in range(n)], "foil_type": "shape",
                                    "cos": 0.6 - cos, "flagged": 0.2 + effect * rank,
                                    "w_min": -0.01 * (1 + 5 * effect * rank)}))
        frames.append(pd.DataFrame({**base, "caption": base["original"], "foil_type": "original", "cos": cos,
                                    "flagged": 0.0, "w_min": -0.01}))
    return pd.concat(frames, ignore_index=True)


def test_quartile_scale_verdicts_fire_on_a_planted_trend_and_not_without():
    v = cscale.scale_quartile_verdicts(_units(0.5), ["shape"], -0.01, 0, MARGINS)
    assert [x.claim for x in v] == [f"{cscale.FLAG} on shape foils by CLIPScore quartile",
                                    f"{cscale.MIN_W} on shape foils by CLIPScore quartile"]
    assert v[0].verdict == verdicts.A_BETTER and v[1].verdict == verdicts.B_BETTER  # more flagged, lower minimum
    assert v[0].margin == MARGINS.flag == 0.01 and v[1].margin == 0.1  # the flag rate has its own margin
    flat = cscale.scale_quartile_verdicts(_units(0.0), ["shape"], -0.01, 0, MARGINS)
    assert all(x.verdict == verdicts.EQUIVALENT for x in flat)
    table = cscale.quartile_table(_units(0.0), ["shape"], -0.01, MARGINS)
    assert list(table.columns) == ["Q1", "Q2", "Q3", "Q4"] and table.loc[f"shape | {cscale.MIN_W}"].tolist() == [-1.0] * 4
    with pytest.raises(ValueError, match="ε = 0"):
        cscale.scale_metrics(_units(0.0), 0.0, MARGINS)


def test_derangement_moves_every_image():
    images = [f"im{i}" for i in range(6)] * 2
    d = cscale.derangement(images, np.random.default_rng(0))
    assert sorted(d) == sorted(d.values()) == sorted(set(images)) and all(a != b for a, b in d.items())
    assert d == cscale.derangement(images, np.random.default_rng(0))  # seeded
    with pytest.raises(ValueError, match="at least 2 distinct images"):
        cscale.derangement(["one", "one"], np.random.default_rng(0))


def test_wrong_image_verdicts_fire_only_on_a_difference():
    t = _units(0.0).assign(foil_type="original", **{"F|most negative": -0.1, "F|CLIPScore": 1.0})
    more = t.assign(**{"flagged|wrong": t.flagged + 0.2, "w_min|wrong": t.w_min - 0.01,
                       "F|most negative|wrong": -0.2, "F|CLIPScore|wrong": 1.0})  # F ranks own image above; CLIPScore ties
    v = cscale.wrong_image_verdicts(more, -0.01, 0, MARGINS)
    assert [x.arms for x in v[:2]] == [("wrong image", "own image")] * 2
    assert v[0].verdict == verdicts.A_BETTER and v[1].verdict == verdicts.B_BETTER
    assert v[1].difference == pytest.approx(-1.0)  # one |ε| lower
    assert v[2].arms[1] == "CLIPScore" and (v[2].mean_a, v[2].mean_b) == (1.0, 0.5) and v[2].verdict == verdicts.A_BETTER
    assert "F_min" in v[2].claim and len(v) == 3  # no threshold column: no threshold row
    same = t.assign(**{"flagged|wrong": t.flagged, "w_min|wrong": t.w_min, "F|most negative|wrong": -0.1,
                       "F|CLIPScore|wrong": 1.0})
    assert all(x.verdict == verdicts.EQUIVALENT for x in cscale.wrong_image_verdicts(same, -0.01, 0, MARGINS))
    thr = more.assign(**{"F|threshold": -0.1, "F|threshold|wrong": -0.1, "eps|threshold": 0.002})  # ties: 1/2
    v4 = cscale.wrong_image_verdicts(thr, -0.01, 0, MARGINS)
    assert len(v4) == 4 and v4[3].arms == ("F-CLIPScore, threshold form", "CLIPScore")
    # the claim's words do not carry the run's ε: a replicate with another ε must match it claim by claim
    other = cscale.wrong_image_verdicts(thr.assign(**{"eps|threshold": -0.005}), -0.01, 0, MARGINS)
    assert [x.claim for x in other] == [x.claim for x in v4] and "e-03" not in v4[3].claim
    assert (v4[3].mean_a, v4[3].verdict) == (0.5, verdicts.EQUIVALENT)


def test_flag_rate_margin_is_its_own_and_the_relative_change_is_reported():
    from fgclip.studies.clip4dm import findings as cfind
    t = _units(0.0).assign(foil_type="original", **{"F|most negative": -0.1, "F|CLIPScore": 1.0,
                                                    "F|most negative|wrong": -0.1, "F|CLIPScore|wrong": 1.0})
    t = t.assign(flagged=0.04, **{"flagged|wrong": 0.06, "w_min|wrong": t.w_min})  # +0.02 on a base of 0.04
    v = cscale.wrong_image_verdicts(t, -0.01, 0, MARGINS)[0]
    assert v.margin == MARGINS.flag == 0.01 and v.verdict == verdicts.A_BETTER
    assert cscale.wrong_image_verdicts(t, -0.01, 0, Margins(0.03, 0.02, flag=0.03))[0].verdict == verdicts.EQUIVALENT
    assert "a relative change of +50% on own image's 0.040" in cfind.relative_clauses([v])
    assert "relative" not in cfind.relative_clauses(cscale.wrong_image_verdicts(t, -0.01, 0, MARGINS)[1:])


def test_findings_families_and_the_relation_note():
    from fgclip.studies.clip4dm import findings as cfind
    one = [verdicts.compare([0.5] * 3, [0.4] * 3, claim="c", arms=("a", "b"), unit="u", margin=0.03)]
    fam = {name: one for name in cfind.FAMILIES}
    assert len(cfind.all_verdicts(fam)) == len(cfind.FAMILIES)
    with pytest.raises(ValueError, match="verdict families"):
        cfind.all_verdicts({k: w for k, w in fam.items() if k != "scale"})
    units = pd.DataFrame({"foil_type": ["relation", "relation", "original", "shape"],
                          "role": ["shape", "relation/position", "shape", "shape"]})
    roles = cfind.roles_by_type(units)
    assert roles.loc["relation", "shape"] == 0.5 and roles.loc["original", "shape"] == 1.0
    note = cfind.relation_note(roles, {"relation": 0.25})
    assert note == ("on relation foils the most negative word is a shape word in 0.500 of captions and a relation "
                    "word in 0.500; LA there is 0.250")
    assert cfind.relation_note(roles.drop(index="relation"), {}) == "no relation foils in this run"
