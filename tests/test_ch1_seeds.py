"""Chapter 1's per-seed floor findings: a seed below the random point or its own seed's
caption-blind saliency is named, with its untrained heads and its validation loss."""
import numpy as np
import pytest

from fgclip.studies.maximage import seeds as msd


def _scores(main_rows):
    k = 10
    return {"main": np.array([[1.0] * r + [0.0] * (k - r) for r in main_rows]),
            "random point": np.full((3, k), 0.2),
            "caption-blind saliency": np.array([[1.0] * 3 + [0.0] * 7] * 3),
            "untrained heads": np.array([[1.0] * 5 + [0.0] * 5, [0.0] * k, [1.0] * k])}


def test_a_collapsed_seed_is_named_with_its_floors_and_cause():
    curves = [{"arm": "main", "lr": 1e-3, "chosen_periods": 2,
               "seeds": {0: {"val": [3.0, 2.0]}, 1: {"val": [3.0, 2.9]}, 2: {"val": [3.0, 2.1]}}}]
    rows = msd.below_floor(_scores([6, 1, 2]), [0, 1, 2], ["main"])
    assert [(r["seed"], len(r["floors"])) for r in rows] == [(1, 2), (2, 1)]  # 0.1 < 0.2 and 0.3; 0.2 < 0.3 only
    found = msd.seed_findings(_scores([6, 1, 2]), [0, 1, 2], ["main"], curves)
    assert found[0].startswith("main, seed 1: 0.100, below random point (0.200) and caption-blind saliency")
    assert "untrained heads score 0.000" in found[0] and "validation loss 2.900 against 2.000-2.100" in found[0]


def test_no_seed_below_the_floors_says_so_and_bad_input_is_named():
    assert msd.seed_findings(_scores([6, 5, 4]), [0, 1, 2], ["main"])[0].startswith("no seed of 1 arms")
    with pytest.raises(KeyError, match="nope"):
        msd.below_floor(_scores([6, 5, 4]), [0, 1, 2], ["nope"])
    with pytest.raises(ValueError, match="seed rows"):
        msd.below_floor(_scores([6, 5, 4]), [0, 1], ["main"])
