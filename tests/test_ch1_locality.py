"""Chapter 1's reading of the frozen tokens (fgclip.studies.maximage.locality) on hand-made
tokens where the answer is known: content on the background cells, or on the object cells."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from fgclip import verdicts
from fgclip.studies.maximage import locality as ml


def _data(content_on: str) -> SimpleNamespace:
    """Three 20x20 images on a 2x2 grid, one object (and one phrase "i") in the top-left cell
    of each; image i's tokens carry e_i on ``content_on`` ("background", "object" or "both")
    cells and a direction no text has elsewhere."""
    box = (0.0, 0.0, 10.0, 10.0)
    img = torch.zeros(3, 4, 2, 2)
    img[:, 3] = 1.0  # the fourth dimension: no text reads it
    for i in range(3):
        cells = {"background": [(0, 1), (1, 0), (1, 1)], "object": [(0, 0)], "both": [(0, 0), (0, 1), (1, 0), (1, 1)]}[content_on]
        for r, c in cells:
            img[i, :, r, c] = 0.0
            img[i, i, r, c] = 1.0
    phrases = [SimpleNamespace(image=i, boxes=[box], text=str(i)) for i in range(3)]
    return SimpleNamespace(img=img, corpus=SimpleNamespace(phrases=phrases, objects=[[box]] * 3, image_hw=[(20, 20)] * 3))


def _clip3() -> SimpleNamespace:
    """A hand-made text tower: text "k" encodes to the k-th unit vector of R^4 (k < 3)."""
    model = torch.nn.Linear(1, 1)  # only its device is read
    model.encode_text = lambda tok: torch.nn.functional.pad(torch.eye(3)[tok[:, 0]], (0, 1))  # (K, 4)
    return SimpleNamespace(model=model, tokenizer=lambda texts: torch.tensor([[int(t)] for t in texts]))


def test_cell_mask_takes_cells_whose_centre_is_in_a_box_edges_included():
    assert ml.cell_mask([(0, 0, 10, 10)], (20, 20), (2, 2)).tolist() == [[True, False], [False, False]]
    assert ml.cell_mask([(0, 0, 5, 5)], (20, 20), (2, 2))[0, 0]  # the centre (5, 5) on the box's corner counts
    assert not ml.cell_mask([(0, 0, 4.9, 5)], (20, 20), (2, 2)).any()


def test_content_on_background_finds_images_from_background_and_wins_the_own_image():
    loc = ml.content_locality(_clip3(), _data("background"), np.ones(3, bool))
    assert loc.background_rank.tolist() == [1.0, 1.0, 1.0] and loc.object_rank.tolist() == [0.0, 0.0, 0.0]
    assert loc.background_wins.tolist() == [1.0, 1.0, 1.0] and loc.background_chance.tolist() == [0.75] * 3
    v = ml.locality_verdict(loc, seed=0, margin=0.05)
    assert v.verdict == verdicts.A_BETTER and v.difference == 1.0
    assert "carry more of the phrase's content than the object" in ml.locality_sentence(loc, v, 0, "toy")


def test_content_on_objects_is_the_other_way_round_and_both_is_equivalent():
    loc = ml.content_locality(_clip3(), _data("object"), np.ones(3, bool))
    assert loc.background_rank.tolist() == [0.0] * 3 and loc.object_rank.tolist() == [1.0] * 3
    assert loc.background_wins.tolist() == [0.0] * 3
    assert "does not explain a seed settling there" in ml.locality_sentence(loc, ml.locality_verdict(loc, 0, 0.05), 0, "toy")
    both = ml.content_locality(_clip3(), _data("both"), np.ones(3, bool))
    v = ml.locality_verdict(both, seed=0, margin=0.05)
    assert v.verdict == verdicts.EQUIVALENT
    text = ml.locality_sentence(both, v, 0, "toy")
    assert "how a seed can settle there" in text and "for 0% [0%, 0%] of the kept phrases" in text


def test_share_interval_resamples_images_and_names_an_empty_input():
    share, lo, hi = ml.share_interval(np.array([1.0, 1.0, 0.0, np.nan]), np.array([0, 0, 1, 2]), seed=0)
    assert share == pytest.approx(2 / 3) and 0.0 <= lo <= share <= hi <= 1.0
    with pytest.raises(ValueError, match="no phrase"):
        ml.share_interval(np.array([np.nan]), np.array([0]), seed=0)
    with pytest.raises(ValueError, match="at least 2 test images"):
        ml.content_locality(_clip3(), SimpleNamespace(img=torch.zeros(1, 4, 2, 2), corpus=None), np.ones(0, bool))


def test_a_reading_too_noisy_to_tell_says_so():
    text = ml._reading(verdicts.CANNOT_TELL)
    assert "neither supports nor rules out" in text and "how a seed can settle" not in text
