"""Chapter 3's A/A at scale: the page written from a results file, and the committed page."""
import re
from pathlib import Path

import pytest

from fgclip.studies.for_retrieval import a_a_scale as aas
from fgclip.studies.for_retrieval.folds import A_A, A_A_B, SUPERVISED

ROOT = Path(__file__).resolve().parents[1]


def _results(arms=(A_A_B, A_A)) -> dict:
    def sel(name, lr, epochs, curves):
        return {"arm": name, "lr": lr, "epochs": epochs, "score": sum(c[epochs - 1] for c in curves[str(lr)]) / 2,
                "curves": curves}
    return {"a_a_seeds": {"side A": [0, 1, 2], "side B": [3, 4, 5], "side A selection": [0, 1], "side B selection": [3, 4]},
            "selection": {SUPERVISED: sel(SUPERVISED, 0.003, 1, {"0.003": [[0.7, 0.5], [0.6, 0.5]]}),
                          A_A_B: sel(A_A_B, 0.003, 2, {"0.003": [[0.4, 0.8], [0.5, 0.6]]})},
            "verdicts": [{"arms": list(arms), "mean_a": 0.25, "mean_b": 0.40, "difference": -0.15, "ci_low": -0.2,
                          "ci_high": -0.1, "margin": 0.02, "n_clusters": 8, "cluster_unit": "folds",
                          "unit": "novel pairs", "outcome": f"{A_A} better"}]}


def test_page_by_hand():
    text = aas.a_a_markdown(_results(), {"date": "2026-12-06", "commit": "abc1234", "command": "cmd"})
    # side A chose (0.003, 1): 0.65 on its seeds, on side B's seeds (0.4 + 0.5) / 2 = 0.45;
    # side B chose (0.003, 2): 0.70 on its seeds, on side A's (0.5 + 0.5) / 2 = 0.50
    assert "| side A | 0-2 | 0, 1 | 0.003 | 1 | 0.650 | 0.450 |" in text
    assert "| side B | 3-5 | 3, 4 | 0.003 | 2 | 0.700 | 0.500 |" in text
    assert "side B 0.250, side A 0.400, difference -0.150 [-0.200, -0.100], half-width 0.050 against the margin 0.02" in text
    assert "commit `abc1234`" in text and "3 seeds a side, 8 clusters: folds" in text


def test_refuses_a_results_file_without_one_a_a_or_with_the_sides_swapped():
    with pytest.raises(ValueError, match="expected one A/A verdict"):
        aas.a_a_markdown({**_results(), "verdicts": []}, {"date": "", "commit": "", "command": ""})
    with pytest.raises(ValueError, match="side B first"):
        aas.a_a_markdown(_results((A_A, A_A_B)), {"date": "", "commit": "", "command": ""})
    with pytest.raises(ValueError, match="no curve at lr 0.01"):
        aas.other_side_score(_results()["selection"][SUPERVISED], 0.01, 1)


def test_committed_page_is_one_the_module_writes_and_the_critique_includes_it():
    page = (ROOT / "book" / "ch3_a_a_last.md").read_text()
    m = re.search(r"difference ([+-]\d\.\d{3}) \[([+-]\d\.\d{3}), ([+-]\d\.\d{3})\], half-width (\d\.\d{3})", page)
    assert m, page
    d, lo, hi, half = map(float, m.groups())
    assert lo <= d <= hi and half == pytest.approx((hi - lo) / 2, abs=1e-3)
    assert page.startswith("Last run: ") and "python -m fgclip run ch3 -p a_a_seeds" in page
    assert "```{include} ch3_a_a_last.md" in (ROOT / "book" / "ch3_critique.md").read_text()


def test_what_the_critique_says_of_the_committed_page_holds_there():
    """The critique's prose on the page: the A/A failed (a side better, not equivalent) with a
    half-width over the margin; both sides chose one lr and different epochs; each choice scores
    lower on the other side's selection seeds; the longer schedule has the lower novel AP."""
    page = (ROOT / "book" / "ch3_a_a_last.md").read_text()
    rows = {m[0]: (float(m[1]), int(m[2]), float(m[3]), float(m[4])) for m in
            re.findall(r"\| (side [AB]) \| [\d-]+ \| [\d, ]+ \| ([\d.e-]+) \| (\d+) \| ([\d.]+) \| ([\d.]+) \|", page)}
    assert set(rows) == {"side A", "side B"}, page
    (lr_a, ep_a, own_a, other_a), (lr_b, ep_b, own_b, other_b) = rows["side A"], rows["side B"]
    assert lr_a == lr_b and ep_a != ep_b and other_a < own_a and other_b < own_b
    means = re.search(r"side B (\d\.\d{3}), side A (\d\.\d{3}).*half-width (\d\.\d{3}) against the margin ([\d.]+): "
                      r"\*\*(.+) better\*\*", page)
    assert means, page
    b, a, half, margin = map(float, means.groups()[:4])
    assert half > margin and abs(b - a) >= 3 * margin  # failed by several times the margin
    assert (b < a) == (ep_b > ep_a)  # the longer schedule kept less on the novel names


def test_the_command_line_writes_the_page_from_a_results_file(tmp_path):
    import json

    from fgclip.__main__ import main

    res, page = tmp_path / "results.json", tmp_path / "page.md"
    res.write_text(json.dumps(_results()))
    assert main(["ch3-a-a", "--results", str(res), "--commit", "abc1234", "--page", str(page)]) == 0
    text = page.read_text()
    assert "commit `abc1234`" in text and "`python -m fgclip run ch3 -p a_a_seeds 3`" in text
    assert main(["ch3-a-a", "--per-side", "0", "--page", str(page)]) == 2
