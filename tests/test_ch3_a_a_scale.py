"""Chapter 3's A/A at scale: the record and page written from a results file, and the committed
page, which must be what its committed record gives and must hold what the critique says of it."""
import json
import os
from pathlib import Path

import numpy as np
import pytest

from fgclip.studies.for_retrieval import a_a_scale as aas
from fgclip.studies.for_retrieval.folds import A_A, A_A_B, SUPERVISED
from fgclip.train.selection import SelectionGrid, select_lr_epochs, stop_epoch

ROOT = Path(__file__).resolve().parents[1]
META = {"date": "2026-12-06", "commit": "abc1234", "command": "cmd"}


def _results(arms=(A_A_B, A_A)) -> dict:
    def sel(name, lr, epochs, curves):
        return {"arm": name, "lr": lr, "epochs": epochs, "score": sum(c[epochs - 1] for c in curves[str(lr)]) / 2,
                "curves": curves}
    return {"a_a_seeds": {"side A": [0, 1, 2], "side B": [3, 4, 5], "side A selection": [0, 1], "side B selection": [3, 4]},
            "selection": {SUPERVISED: sel(SUPERVISED, 0.003, 1, {"0.003": [[0.7, 0.5], [0.6, 0.5]]}),
                          A_A_B: sel(A_A_B, 0.003, 2, {"0.003": [[0.4, 0.8], [0.5, 0.6]]}), "FOR": {}},
            "verdicts": [{"claim": "A/A (novel AP)", "arms": list(arms), "mean_a": 0.25, "mean_b": 0.40,
                          "difference": -0.15, "ci_low": -0.2, "ci_high": -0.1, "margin": 0.02, "n_clusters": 8,
                          "n_seeds": 3, "seeds_agreeing": 3, "seed_differences": [-0.1, -0.2, -0.15],
                          "outcome": f"{A_A} better"}]}


def test_page_by_hand():
    record = aas.a_a_record(_results(), META)
    assert set(record["selection"]) == {SUPERVISED, A_A_B}  # only what the page needs is kept
    text = aas.a_a_markdown(record)
    # side A chose (0.003, 1): 0.65 on its seeds, on side B's seeds (0.4 + 0.5) / 2 = 0.45;
    # side B chose (0.003, 2): 0.70 on its seeds, on side A's (0.5 + 0.5) / 2 = 0.50
    assert "| side A | 0-2 | 0, 1 | 0.003 | 1 | 0.650 | 0.450 |" in text
    assert "| side B | 3-5 | 3, 4 | 0.003 | 2 | 0.700 | 0.500 |" in text
    assert ("A/A (novel AP): side B 0.250, side A 0.400, difference -0.150 [-0.200, -0.100]; 3 of 3 paired seeds agree "
            "in sign (from -0.200 to -0.100); half-width 0.050 against the margin 0.02") in text
    assert "commit `abc1234`" in text and "3 seeds a side; the interval resamples 8 folds as clusters" in text


def test_refuses_a_results_file_without_one_a_a_or_with_the_sides_swapped():
    with pytest.raises(ValueError, match="expected one A/A verdict"):
        aas.a_a_record({**_results(), "verdicts": []}, META)
    with pytest.raises(ValueError, match="side B first"):
        aas.a_a_record(_results((A_A, A_A_B)), META)
    with pytest.raises(ValueError, match="no selection record"):
        aas.a_a_record({**_results(), "selection": {SUPERVISED: {}}}, META)
    with pytest.raises(ValueError, match="no curve at lr 0.01"):
        aas.other_side_score(_results()["selection"][SUPERVISED], 0.01, 1)


def test_the_command_line_writes_the_record_and_page_from_a_results_file(tmp_path):
    from fgclip.__main__ import main

    res, page = tmp_path / "results.json", tmp_path / "page.md"
    res.write_text(json.dumps(_results()))
    os.utime(res, (1764979200, 1764979200))  # 2025-12-06 00:00 UTC: the run's day goes on the page
    assert main(["ch3-a-a", "--results", str(res), "--commit", "abc1234", "--page", str(page)]) == 0
    record = json.loads(page.with_suffix(".json").read_text())
    assert record["meta"]["date"].startswith("2025-12-0") and record["meta"]["commit"] == "abc1234"
    assert record["meta"]["command"] == "python -m fgclip run ch3 -p a_a_seeds 3"
    assert page.read_text() == aas.a_a_markdown(record)
    res.write_text(json.dumps({**_results(), "seeds": [40, 41]}))  # a run at another seed says so
    assert main(["ch3-a-a", "--results", str(res), "--commit", "abc1234", "--page", str(page)]) == 0
    assert json.loads(page.with_suffix(".json").read_text())["meta"]["command"] == \
        "python -m fgclip run ch3 -p a_a_seeds 3 -p seed 40"
    assert main(["ch3-a-a", "--per-side", "0", "--page", str(page)]) == 2


@pytest.mark.parametrize("name", ["ch3_a_a_budget_rule", "ch3_a_a_last", "ch3_a_a_fresh"])
def test_each_committed_page_is_its_records_and_the_critique_includes_it(name):
    record = json.loads((ROOT / "book" / f"{name}.json").read_text())
    assert (ROOT / "book" / f"{name}.md").read_text() == aas.a_a_markdown(record)
    assert f"```{{include}} {name}.md" in (ROOT / "book" / "ch3_critique.md").read_text()
    # the first ran before the rule was recorded (the budget rule); the others record theirs
    assert ("rule" in record["selection"][SUPERVISED]) == (name != "ch3_a_a_budget_rule")


def test_what_the_critique_says_of_the_budget_rules_run_holds_there():
    """The critique's prose on the first run (epochs chosen over the whole budget): the A/A failed (a side better), its whole interval at
    least three margins from zero and every paired seed of one sign, its half-width still over
    the margin; both sides chose one lr (the grid's largest) and different epochs; each choice
    scores lower on the other side's selection seeds; the longer schedule has the lower novel AP."""
    record = json.loads((ROOT / "book" / "ch3_a_a_budget_rule.json").read_text())
    v, sel = record["verdict"], record["selection"]
    a, b = sel[SUPERVISED], sel[A_A_B]
    assert v["outcome"].endswith("better") and v["seeds_agreeing"] == v["n_seeds"] >= 20
    assert v["ci_high"] <= -3 * v["margin"] or v["ci_low"] >= 3 * v["margin"]
    assert (v["ci_high"] - v["ci_low"]) / 2 > v["margin"]
    assert a["lr"] == b["lr"] == max(float(lr) for lr in a["curves"]) and a["epochs"] != b["epochs"]
    assert aas.other_side_score(b, a["lr"], a["epochs"]) < a["score"]
    assert aas.other_side_score(a, b["lr"], b["epochs"]) < b["score"]
    assert (v["mean_a"] < v["mean_b"]) == (b["epochs"] > a["epochs"])  # side B is mean_a

    def seed_gap(s: dict, lr) -> float:  # mean distance between the selection seeds' curves
        c = np.asarray(s["curves"][str(lr)])
        return float(np.abs(c[:, None] - c[None]).mean())
    for s in (a, b):  # the chosen lr is where the seeds' curves lie furthest apart
        assert max(s["curves"], key=lambda lr: seed_gap(s, lr)) == str(s["lr"])
    # most of the interval's width is the folds': the seeds' share of its variance is under half
    d = np.asarray(v["seed_differences"])
    assert (d.std(ddof=1) / np.sqrt(len(d))) ** 2 < 0.5 * v["standard_error"] ** 2


def _choice(selection: dict, rule: str) -> tuple[float, int]:
    """(lr, epochs) that :func:`select_lr_epochs` picks under ``rule`` from a selection record's curves."""
    curves = {float(lr): c for lr, c in selection["curves"].items()}
    seeds = tuple(range(len(next(iter(curves.values())))))
    grid = SelectionGrid(tuple(curves), seeds, selection["budget"], rule=rule)
    chosen = select_lr_epochs(selection["arm"], lambda lr, s, e: curves[lr][s][:e], grid)
    return chosen.lr, chosen.epochs


def test_what_the_critique_says_of_the_early_stopping_run_holds_there():
    """The critique's prose on the second run: the same seeds and curves as the first, only the
    rule changed; side B's late second peak (above its first, after a fall) is past the early
    stopper's halt; side A's choice stayed, side B's changed; the gap shrank to about a quarter,
    with the other sign, yet is not equivalent (interval one side of zero, half-width over the
    margin); the two schedules score lower on the other side's seeds; the shorter one at the
    larger lr scored lower on the novel categories; most of the width is the folds'."""
    old = json.loads((ROOT / "book" / "ch3_a_a_budget_rule.json").read_text())
    new = json.loads((ROOT / "book" / "ch3_a_a_last.json").read_text())
    assert old["a_a_seeds"] == new["a_a_seeds"]
    for arm in (SUPERVISED, A_A_B):
        assert old["selection"][arm]["curves"] == new["selection"][arm]["curves"]
        assert new["selection"][arm]["rule"] == "early-stop"
        chosen = new["selection"][arm]
        assert _choice(old["selection"][arm], "early-stop") == (chosen["lr"], chosen["epochs"])
    a0, b0, a, b = old["selection"][SUPERVISED], old["selection"][A_A_B], new["selection"][SUPERVISED], new["selection"][A_A_B]
    late = np.mean(b0["curves"][str(b0["lr"])], axis=0)  # side B's first choice: a second peak above the first
    assert late[1] < late[0] < late[b0["epochs"] - 1] and late.argmax() == b0["epochs"] - 1
    patience = max(1, b0["budget"] // 4)
    assert stop_epoch(late, patience) == 3 < b0["epochs"]  # the stopper halts at the third epoch, before it
    assert stop_epoch(late, patience + 1) > b0["epochs"]  # "by the narrowest margin": one more epoch and it runs on
    assert (a["lr"], a["epochs"]) == (a0["lr"], a0["epochs"]) and (b["lr"], b["epochs"]) != (b0["lr"], b0["epochs"])
    assert late[stop_epoch(late, patience):].max() > b["score"]  # the late peak still beats the new choice
    v, v0 = new["verdict"], old["verdict"]
    assert np.sign(v["difference"]) != np.sign(v0["difference"])
    assert 0.2 < abs(v["difference"]) / abs(v0["difference"]) < 0.3  # "about a quarter"
    assert v["outcome"].endswith("better") and (v["ci_low"] > 0 or v["ci_high"] < 0)
    assert (v["ci_high"] - v["ci_low"]) / 2 > v["margin"]
    assert aas.other_side_score(b, a["lr"], a["epochs"]) < a["score"]
    assert aas.other_side_score(a, b["lr"], b["epochs"]) < b["score"]
    # side A's is the shorter schedule at the larger lr, and side A (mean_b: side B is arm a) scored lower
    assert a["epochs"] < b["epochs"] and a["lr"] > b["lr"] and v["mean_b"] < v["mean_a"]
    d = np.asarray(v["seed_differences"])
    assert (d.std(ddof=1) / np.sqrt(len(d))) ** 2 < 0.5 * v["standard_error"] ** 2


def test_what_the_critique_says_of_the_fresh_run_holds_there():
    """The third run (seed 40: fresh data and seeds) under the early stopper: the stopper never
    came into play (the budget rule picks the same); both sides chose one lr, epochs one apart;
    the difference is a small fraction of the margin; the paired seeds split and their
    differences straddle zero; not equivalent, its half-width just above the margin and its
    interval past it; the folds' part of the variance (about three quarters) alone would give a
    half-width of about the margin (t with one fewer degree of freedom than the folds)."""
    from scipy import stats

    record = json.loads((ROOT / "book" / "ch3_a_a_fresh.json").read_text())  # its page: the test above
    assert record["meta"]["command"].endswith("-p seed 40")
    assert min(record["a_a_seeds"]["side A"]) == 40 and max(record["a_a_seeds"]["side B"]) == 79
    v, a, b = record["verdict"], record["selection"][SUPERVISED], record["selection"][A_A_B]
    for side in (a, b):  # "the stopper never came into play"
        assert side["rule"] == "early-stop" and _choice(side, "budget") == (side["lr"], side["epochs"])
    assert a["lr"] == b["lr"] and abs(a["epochs"] - b["epochs"]) == 1
    assert abs(v["difference"]) < 0.25 * v["margin"]
    d = np.asarray(v["seed_differences"])
    assert 0.4 <= v["seeds_agreeing"] / v["n_seeds"] <= 0.6 and d.min() < 0 < d.max()
    half = (v["ci_high"] - v["ci_low"]) / 2
    assert v["outcome"] == "cannot tell at this size" and v["margin"] < half < 1.1 * v["margin"]
    assert v["ci_high"] > v["margin"]  # the interval reaches past it
    seed_var = (d.std(ddof=1) / np.sqrt(len(d))) ** 2
    fold_var = v["standard_error"] ** 2 - seed_var
    assert 0.65 < fold_var / v["standard_error"] ** 2 < 0.85  # "about three quarters" is the folds'
    folds_only = stats.t.ppf(0.975, v["n_clusters"] - 1) * np.sqrt(fold_var)
    assert 0.9 * v["margin"] < folds_only < 1.1 * v["margin"]  # "at best ... about the margin"
