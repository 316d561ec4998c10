"""Chapter 5's verdicts on synthetic (S, U) scores whose truth is planted: the transfer test and
its two controls (eq-ch5-controls: a planted effect of two margins, an A/A of the method's two
halves of seeds) must conclude when the noise allows it, and must FAIL on purpose (so that the
cell reads 'cannot decide') when the units or the seeds are too noisy.

Scores: a reference B[s, u] = b_u (a deterministic CLIP reading, the same row for every seed) and
an arm A[s, u] = b_u + effect + unit noise + a per-seed offset, with margin m = 0.05 on every task;
pointing's 160 units sit 4 to an image (clustered), misalignment's 120 3 to an image, presence's
and retrieval's 32 categories stand alone, as on the real bench.
"""
import numpy as np
import pytest

from fgclip import verdicts as V
from fgclip.studies.crosspaper import judge as jd
from fgclip.studies.crosspaper import adapters as ad
from fgclip.studies.crosspaper.adapters import METHODS, TASKS

M = 0.05
MARGINS = {t: M for t in TASKS}
UNITS = {"pointing": 160, "misalignment": 120, "presence": 32, "retrieval": 32}
CLUSTERS = {"pointing": np.repeat(np.arange(40), 4), "misalignment": np.repeat(np.arange(40), 3),
            "presence": None, "retrieval": None}
S = 4


def arm(task: str, effect: float, unit_sd: float = 0.01, seed_offsets=(0.0,) * S, seed: int = 0):
    """(A, B): the arm and the CLIP reading on ``task``'s units, A - B = effect + noise."""
    rng = np.random.default_rng(seed)
    b = np.repeat(rng.uniform(0, 1, UNITS[task])[None], S, axis=0)  # (S, U)
    a = b + effect + unit_sd * rng.standard_normal(b.shape) + np.asarray(seed_offsets, float)[:, None]
    return a, b


def transfer(task: str, method: str = "maximage", **kw) -> V.Falsification:
    a, b = arm(task, **kw)
    return jd.Judge({method: {task: a}, jd.CLIP_READING[task]: {task: b}}, CLUSTERS, MARGINS).transfer(method, task)


# ------------------------------------------------------------------------------ recentred
def test_recentred_puts_the_mean_exactly_effect_above_the_comparator():
    """mean(result) - mean(comparator) = effect, NaN skipped in both; each unit moved by one constant."""
    rng = np.random.default_rng(1)
    a, b = rng.normal(0.3, 0.2, (3, 7)), rng.normal(0.6, 0.1, (3, 7))
    a[:, 2] = b[:, 2] = np.nan
    for effect in (0.0, 0.1, 2.5):
        r = jd.recentred(a, b, effect)
        assert np.nanmean(r) - np.nanmean(b) == pytest.approx(effect, abs=1e-12)
        shift = (r - a)[~np.isnan(a)]
        np.testing.assert_allclose(shift, shift[0], atol=1e-12)
        assert np.isnan(r[:, 2]).all()


def test_recentred_refuses_a_negative_effect_and_mismatched_shapes():
    """effect < 0 (or NaN), shapes that differ, and 1-D scores raise."""
    a = np.zeros((2, 4))
    for effect in (-0.01, np.nan):
        with pytest.raises(ValueError, match="effect"):
            jd.recentred(a, a, effect)
    with pytest.raises(ValueError, match="shape"):
        jd.recentred(a, np.zeros((2, 5)), 0.0)
    with pytest.raises(ValueError, match="shape"):
        jd.recentred(np.zeros(4), np.zeros(4), 0.0)


def test_judge_refuses_missing_or_non_positive_margins():
    """A task without a margin, or with a margin <= 0 (or NaN), raises naming 'margins'."""
    for bad in ({t: M for t in TASKS[:3]}, {**MARGINS, "presence": 0.0}, {**MARGINS, "retrieval": -0.1},
                {**MARGINS, "pointing": np.nan}):
        with pytest.raises(ValueError, match="'margins'"):
            jd.Judge({}, CLUSTERS, bad)


# ---------------------------------------------------------------- controls that can fail
@pytest.mark.parametrize("task", TASKS)
def test_no_true_effect_at_low_noise_is_equivalent_with_both_controls_passing(task):
    """(a) effect 0, low noise: 'equivalent', the planted 2m fires, the planted null stays quiet."""
    f = transfer(task, effect=0.0)
    assert f.test.verdict == V.EQUIVALENT and f.positive_passed and f.negative_passed and f.controls_pass
    assert jd.conclusion_word(f) == "equivalent" and f.conclusion == f.test.outcome
    assert f.test.arms == ("maximage", jd.CLIP_READING[task]) and f.test.margin == M
    assert f.positive.difference == pytest.approx(jd.PLANTED_MARGINS * M, abs=1e-12)
    assert f.negative.arms == ("maximage, even seeds", "maximage, odd seeds")
    assert f.negative.n_seeds == S // 2 and f.negative.margin == M


@pytest.mark.parametrize("task", TASKS)
def test_a_true_effect_of_three_margins_at_low_noise_is_better(task):
    """(b) effect +3m, low noise: 'A better', controls pass, the word is 'better' ('worse' for -3m)."""
    f = transfer(task, effect=3 * M)
    assert f.test.verdict == V.A_BETTER and f.controls_pass and jd.conclusion_word(f) == "better"
    g = transfer(task, effect=-3 * M)
    assert g.test.verdict == V.B_BETTER and g.controls_pass and jd.conclusion_word(g) == "worse"


def test_the_clusters_and_units_of_the_task_reach_the_comparison():
    """Pointing's 160 trials are resampled as 40 images; presence's 32 categories each alone."""
    f, g = transfer("pointing", effect=0.0), transfer("presence", effect=0.0)
    assert (f.test.n_units, f.test.n_clusters, f.test.unit) == (160, 40, "(image, name) trials")
    assert (g.test.n_units, g.test.n_clusters, g.test.unit) == (32, 32, "categories")
    assert f.negative.n_clusters == f.positive.n_clusters == 40


def test_seeds_that_disagree_make_the_a_a_fail_and_the_cell_undecided():
    """(c) the two halves of the seeds differ by more than the margin (even seeds low, odd high):
    the test itself says 'A better' on a true +3m and the planted 2m fires, yet the A/A is not
    equivalent, so the controls fail and the cell reads 'cannot decide'."""
    f = transfer("pointing", effect=3 * M, unit_sd=0.001, seed_offsets=(-0.04, 0.04, -0.04, 0.04))
    assert f.negative.difference == pytest.approx(-0.08, abs=1e-3)
    assert f.test.verdict == V.A_BETTER and f.positive_passed
    assert f.negative.verdict != V.EQUIVALENT and not f.negative_passed and not f.controls_pass
    assert jd.conclusion_word(f) == "cannot decide" and f.conclusion == V.CANNOT_DECIDE


def test_noisy_units_make_the_a_a_too_wide_to_show_equivalence():
    """(c') unit noise that the two halves do not share: the A/A's interval is wider than +-m."""
    f = transfer("pointing", effect=3 * M, unit_sd=0.5)
    assert f.negative.half_width > M and not f.negative_passed and jd.conclusion_word(f) == "cannot decide"


@pytest.mark.parametrize("noise", [{"unit_sd": 3.0}, {"unit_sd": 0.001, "seed_offsets": (-0.3, 0.3, 0.0, 0.0)}],
                         ids=["noisy units", "noisy seeds"])
def test_noise_beyond_two_margins_keeps_the_positive_control_from_firing(noise):
    """(d) an interval wider than the planted 2m: the positive control does not fire either."""
    f = transfer("pointing", effect=0.0, **noise)
    assert f.positive.half_width > jd.PLANTED_MARGINS * M
    assert not f.positive_passed and not f.negative_passed and jd.conclusion_word(f) == "cannot decide"


# ---------------------------------------------------------------------- the whole table
EFFECTS = {  # method -> task -> (effect, unit sd); sumclip left out: its row is all '-'
    "maximage": {"pointing": (3 * M, 0.01), "misalignment": (0.0, 0.01), "presence": (0.0, 0.01),
                 "retrieval": (0.0, 3.0)},
    "clip4dm": {"misalignment": (3 * M, 0.01), "presence": (-3 * M, 0.01)},
    "decoupling": {"pointing": (0.0, 0.01), "misalignment": (-3 * M, 0.01), "presence": (3 * M, 0.01),
                   "retrieval": (3 * M, 0.01)},
}


@pytest.fixture(scope="module")
def table():
    """judge_all over synthetic scores: every CLIP reading and baseline, three of the four methods."""
    scores = {}
    for k, t in enumerate(TASKS):
        b = arm(t, 0.0, seed=100 + k)[1]
        scores.setdefault(jd.CLIP_READING[t], {})[t] = b
        scores.setdefault(jd.BASELINE[t], {})[t] = b - 0.2  # the baseline well below the CLIP reading
    for (m, t), (ref, base) in jd.CELL_REFERENCES.items():  # a cell's own reading: the task's numbers
        scores[ref], scores[base] = {t: scores[jd.CLIP_READING[t]][t]}, {t: scores[jd.BASELINE[t]][t]}
    methods = {m: {t: arm(t, e, sd, seed=100 + TASKS.index(t))[0] for t, (e, sd) in cells.items()}
               for m, cells in EFFECTS.items()}
    for m, cells in methods.items():
        scores[m] = cells
    return jd.judge_all(jd.Judge(scores, CLUSTERS, MARGINS), methods)


def test_judge_all_gives_one_transfer_and_one_baseline_per_filled_cell_and_four_stage_verdicts(table):
    """10 filled cells -> 10 Falsifications and 10 baseline Verdicts, in method then task order; 4 stage."""
    cells = [(m, t) for m in METHODS for t in TASKS if t in EFFECTS.get(m, {})]
    assert len(cells) == 10 and len(table["transfer"]) == len(table["baseline"]) == len(cells)
    for (m, t), f, v in zip(cells, table["transfer"], table["baseline"]):
        ref, base = jd.CELL_REFERENCES.get((m, t), (jd.CLIP_READING[t], jd.BASELINE[t]))
        assert isinstance(f, V.Falsification) and f.test.arms == (m, ref)
        assert isinstance(v, V.Verdict) and v.arms == (m, base) and v.claim.endswith(f" on {t}")
    stage = table["stage"]
    assert [v.arms for v in stage] == [(jd.CLIP_READING[t], jd.BASELINE[t]) for t in TASKS]
    assert all(v.verdict == V.A_BETTER and v.difference == pytest.approx(0.2) for v in stage)


def test_transfer_table_marks_the_own_task_and_empty_cells(table):
    """Each cell's conclusion word, '(own)' on the method's paper's task, '-' where not asked."""
    tab = jd.transfer_table(table["transfer"])
    assert list(tab.index) == list(METHODS) and list(tab.columns) == list(TASKS)
    assert tab.loc["maximage"].tolist() == ["better (own)", "equivalent", "equivalent", "cannot decide"]
    assert tab.loc["clip4dm"].tolist() == ["-", "better (own)", "worse", "-"]
    assert tab.loc["sumclip"].tolist() == ["-"] * 4
    assert tab.loc["decoupling"].tolist() == ["equivalent", "worse", "better (own)", "better"]


def test_findings_group_other_tasks_and_call_a_method_specific_or_transferring(table):
    """Better on its own task only -> specific, not transfers; better elsewhere -> transfers."""
    rec = jd.findings(table["transfer"])
    mx, c4, dec, sc = rec["maximage"], rec["clip4dm"], rec["decoupling"], rec["sumclip"]
    assert (mx["own"], mx["equivalent"], mx["cannot decide"], mx["better"]) == \
        ("better", ["misalignment", "presence"], ["retrieval"], [])
    assert mx["specific"] and not mx["transfers"]
    assert (c4["own"], c4["worse"], c4["specific"], c4["transfers"]) == ("better", ["presence"], True, False)
    assert (dec["own"], dec["better"], dec["worse"], dec["equivalent"]) == \
        ("better", ["retrieval"], ["misalignment"], ["pointing"])
    assert not dec["transfers"] and not dec["specific"]  # retrieval is presence's kind: no transfer
    assert sc["own"] is None and not sc["transfers"] and not sc["specific"] and sc["own task"] == "retrieval"


# ------------------------------------------------------------------------ one arm alone
@pytest.mark.parametrize("task", ["pointing", "presence"])
def test_cell_interval_is_the_arms_mean_with_its_interval(task):
    """The comparison with a zero arm: difference = the arm's mean (NaN units skipped), inside its CI."""
    x = arm(task, 0.0, unit_sd=0.2)[0]
    x[:, 3] = np.nan  # a unit no seed scored (a category without a positive)
    v = jd.Judge({"sumclip": {task: x}}, CLUSTERS, MARGINS).cell_interval("sumclip", task)
    assert v.difference == pytest.approx(np.nanmean(x), abs=1e-12) and v.mean_b == 0.0
    assert v.ci_low < v.difference < v.ci_high and v.arms == ("sumclip", "zero")
    assert v.n_units == UNITS[task] - 1


def test_the_reading_chosen_on_validation_is_the_comparator():
    """Judge(readings=...) replaces a task's default CLIP reading in the transfer test and the stage."""
    a, b = arm("presence", 3 * M)
    judge = jd.Judge({"decoupling": {"presence": a}, "CLIP dense max": {"presence": b}, "zero-shot": {"presence": b + 1}},
                     CLUSTERS, MARGINS, readings={"presence": "CLIP dense max"})
    f = judge.transfer("decoupling", "presence")
    assert f.test.arms == ("decoupling", "CLIP dense max") and f.test.verdict == V.A_BETTER
    assert judge.readings["pointing"] == jd.CLIP_READING["pointing"]


def test_a_a_halves_pairs_even_seeds_with_odd_ones():
    """(S, U) -> rows 0, 2, ... against 1, 3, ..., an odd last seed left out; one seed raises."""
    x = np.arange(10.0).reshape(5, 2)
    first, second = jd.a_a_halves(x)
    assert first.tolist() == [[0, 1], [4, 5]] and second.tolist() == [[2, 3], [6, 7]]
    with pytest.raises(ValueError, match="n_seeds >= 2"):
        jd.a_a_halves(x[:1])


def test_a_gain_on_a_task_of_another_kind_is_a_transfer_and_a_candidate_set_cell_is_not():
    """Better on pointing (region) from presence (image): transfers. Decoupling's misalignment cell
    answers among category words only, so it is image-level: better there is no transfer."""
    scores, methods = {}, {}
    for t in ("presence", "pointing", "misalignment"):
        a, b = arm(t, 3 * M, seed=7)
        scores.setdefault(jd.CLIP_READING[t], {})[t] = b
        scores.setdefault(jd.CELL_REFERENCES[("decoupling", "misalignment")][0], {})[t] = b
        methods[t] = a
    j = jd.Judge({**scores, "decoupling": {"presence": methods["presence"], "misalignment": methods["misalignment"]}},
                 CLUSTERS, MARGINS)
    only_words = jd.findings([j.transfer("decoupling", "presence"), j.transfer("decoupling", "misalignment")])
    assert only_words["decoupling"]["better"] == ["misalignment"] and not only_words["decoupling"]["transfers"]
    assert j.transfer("decoupling", "misalignment").test.arms[1] == "CLIP dense max, category words"
    j2 = jd.Judge({**scores, "decoupling": {"presence": methods["presence"], "pointing": methods["pointing"]}},
                  CLUSTERS, MARGINS)
    far = jd.findings([j2.transfer("decoupling", "presence"), j2.transfer("decoupling", "pointing")])
    assert far["decoupling"]["transfers"] and not far["decoupling"]["specific"]


def test_a_method_with_no_other_cell_is_not_called_specific():
    """Better on its own task with every other cell '-': transfer untested, not 'specific'."""
    a, b = arm("misalignment", 3 * M)
    j = jd.Judge({"clip4dm": {"misalignment": a}, jd.CLIP_READING["misalignment"]: {"misalignment": b}},
                 CLUSTERS, MARGINS)
    rec = jd.findings([j.transfer("clip4dm", "misalignment")])["clip4dm"]
    assert rec["own"] == "better" and not rec["others tested"] and not rec["specific"] and not rec["transfers"]


@pytest.mark.parametrize("effect", [-3 * M, 3 * M], ids=["extension worse", "extension better"])
def test_an_extension_cell_is_reported_apart_and_counts_for_nothing(effect):
    """CLIP4DM's pointing cell is the book's extension: whatever its verdict, it is recorded under
    'extensions', the method's transfer stays untested (neither 'specific' nor 'transfers'), and the
    sentence names the cell as an extension and the own task's comparator."""
    from fgclip.studies.crosspaper import findings as fd
    a, b = arm("misalignment", 3 * M)
    p, q = arm("pointing", effect)
    j = jd.Judge({"clip4dm": {"misalignment": a, "pointing": p}, jd.CLIP_READING["misalignment"]: {"misalignment": b},
                  jd.CLIP_READING["pointing"]: {"pointing": q}}, CLUSTERS, MARGINS)
    tests = [j.transfer("clip4dm", "pointing"), j.transfer("clip4dm", "misalignment")]
    rec = jd.findings(tests)["clip4dm"]
    assert rec["extensions"] == {"pointing": "worse" if effect < 0 else "better"}
    assert not rec["others tested"] and not rec["specific"] and not rec["transfers"] and not rec["better"]
    sentence = fd.method_sentence("clip4dm", tests, jd.findings(tests))
    assert f"pointing ({ad.EXTENSIONS['clip4dm', 'pointing']}; against {jd.CLIP_READING['pointing']})" in sentence
    assert "untested here" in sentence and f"it beats {jd.CLIP_READING['misalignment']}" in sentence
    assert "transfers to a task of another kind" not in sentence
    assert tests[0].test.claim.startswith("clip4dm's image-side extension vs ")  # the record names it too
    assert jd.transfer_table(tests).loc["clip4dm", "pointing"].endswith("(ext.)")
    base = [j.compare("clip4dm", jd.BASELINE["pointing"], "pointing", f"{jd.subject('clip4dm', 'pointing')} vs x on pointing",
                      p, q - 1.0)]
    assert "better on pointing (the book's extension)" in fd.baseline_sentence(base)
    controls = fd.controls_sentence(tests)
    assert controls.startswith("0 of 0 transfer tests of trained methods") and "2 more are of a method that trains nothing" in controls


def test_the_closing_sentence_claims_nothing_when_nothing_was_decided():
    """Every cell of a method 'cannot decide' (its A/A fails): the sentence neither supports nor
    refutes its paper's claim; one decided 'worse' cell: nothing supports the claim."""
    from fgclip.studies.crosspaper import findings as fd
    noisy = {"unit_sd": 0.001, "seed_offsets": (-0.04, 0.04, -0.04, 0.04)}  # the A/A fails
    a, b = arm("pointing", -3 * M, **noisy)
    j = jd.Judge({"maximage": {"pointing": a}, jd.CLIP_READING["pointing"]: {"pointing": b}}, CLUSTERS, MARGINS)
    tests = [j.transfer("maximage", "pointing")]
    sentence = fd.method_sentence("maximage", tests, jd.findings(tests))
    assert "neither supports nor refutes" in sentence and "nothing supports" not in sentence
    (a, b), (c, d) = arm("pointing", -3 * M), arm("presence", -3 * M)
    j = jd.Judge({"maximage": {"pointing": a, "presence": c}, jd.CLIP_READING["pointing"]: {"pointing": b},
                  jd.CLIP_READING["presence"]: {"presence": d}}, CLUSTERS, MARGINS)
    tests = [j.transfer("maximage", "pointing"), j.transfer("maximage", "presence")]
    assert "nothing supports the claim" in fd.method_sentence("maximage", tests, jd.findings(tests))


def test_the_a_a_of_a_method_that_trains_nothing_is_marked_vacuous_whatever_its_scores():
    """By design, not by result: CLIP4DM's A/A is vacuous even where a seeded tie-break makes its
    seeds differ; a trained method's A/A is real even where its seeds happen to agree."""
    a, b = arm("misalignment", 3 * M)
    same = np.tile(a[0], (len(a), 1))
    for method, x, want in (("clip4dm", same, True), ("clip4dm", a, True), ("maximage", same, False)):
        j = jd.Judge({method: {"misalignment": x}, jd.CLIP_READING["misalignment"]: {"misalignment": b}},
                     CLUSTERS, MARGINS)
        assert jd.a_a_vacuous(j.transfer(method, "misalignment")) is want


def test_claim_roles_name_the_chosen_reading_by_its_role_only_where_it_was_chosen():
    """Presence judged against a reading chosen on validation: its transfer test, planted control and
    stage verdict get the role's claim and arms; pointing (a fixed reading) and the A/A get none."""
    scores, methods = {}, {}
    for t in ("pointing", "presence"):
        a, b = arm(t, 3 * M)
        ref = "Cluster-CLIP" if t == "presence" else jd.CLIP_READING[t]
        scores.setdefault(ref, {})[t] = b
        scores.setdefault(jd.BASELINE[t], {})[t] = b - 0.2
        methods.setdefault("maximage", {})[t] = a
    for t in ("misalignment", "retrieval"):  # every task needs its stage arms
        b = arm(t, 0.0)[1]
        scores.setdefault(jd.CLIP_READING[t], {})[t] = b
        scores.setdefault(jd.BASELINE[t], {})[t] = b - 0.2
    scores["maximage"] = methods["maximage"]
    judge = jd.Judge(scores, CLUSTERS, MARGINS, readings={"presence": "Cluster-CLIP"})
    judged = jd.judge_all(judge, methods)
    roles = jd.claim_roles(judge, judged)
    f = next(f for f in judged["transfer"] if jd.task_of(f.test) == "presence")
    stage = next(v for v in judged["stage"] if jd.task_of(v) == "presence")
    assert set(roles) == {"\t".join((v.claim, *v.arms)) for v in (f.test, f.positive, stage)}
    assert roles["\t".join((f.test.claim, *f.test.arms))] == {
        "claim": f"maximage vs {jd.CHOSEN_READING} on presence", "arms": ["maximage", jd.CHOSEN_READING]}
    assert all("Cluster-CLIP" not in r["claim"] and "Cluster-CLIP" not in r["arms"] for r in roles.values())
