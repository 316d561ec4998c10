"""Chapter 1's reading of the frozen tokens (fgclip.studies.maximage.locality) on hand-made
tokens where the answer is known: content on the background cells, or on the object cells."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from fgclip import verdicts
from fgclip.studies.maximage import locality as ml


def _data(content_on: str) -> SimpleNamespace:
    """Three 20x20 images on a 2x2 grid with two objects each: the phrase's ("i") in the top-left
    cell and another in the bottom-right; image i's tokens carry e_i on ``content_on`` cells
    ("background": the two off-object cells, "object": the phrase's cell, "both": every cell)
    and a direction no text reads elsewhere, but the other object's cell, which points away from
    the phrase where it carries no content."""
    box, other = (0.0, 0.0, 10.0, 10.0), (10.5, 10.5, 20.0, 20.0)
    img = torch.zeros(3, 4, 2, 2)
    img[:, 3] = 1.0  # the fourth dimension: no text reads it
    cells = {"background": [(0, 1), (1, 0)], "object": [(0, 0)], "both": [(0, 0), (0, 1), (1, 0), (1, 1)]}[content_on]
    for i in range(3):
        img[i, :, 1, 1] = 0.0
        img[i, i, 1, 1] = -1.0  # the other object's cell points away from the phrase (overwritten where content is)
        for r, c in cells:
            img[i, :, r, c] = 0.0
            img[i, i, r, c] = 1.0
    phrases = [SimpleNamespace(image=i, boxes=[box], text=str(i)) for i in range(3)]
    return SimpleNamespace(img=img, corpus=SimpleNamespace(phrases=phrases, objects=[[box, other]] * 3, image_hw=[(20, 20)] * 3))


def _clip3() -> SimpleNamespace:
    """A hand-made text tower: text "k" encodes to the k-th unit vector of R^4 (k < 3)."""
    model = torch.nn.Linear(1, 1)  # only its device is read
    model.encode_text = lambda tok, normalize=False: torch.nn.functional.pad(torch.eye(3)[tok[:, 0]], (0, 1))  # (K, 4), unit rows
    return SimpleNamespace(model=model, tokenizer=lambda texts: torch.tensor([[int(t)] for t in texts]))


def test_cell_mask_takes_cells_whose_centre_is_in_a_box_edges_included():
    assert ml.cell_mask([(0, 0, 10, 10)], (20, 20), (2, 2)).tolist() == [[True, False], [False, False]]
    assert ml.cell_mask([(0, 0, 5, 5)], (20, 20), (2, 2))[0, 0]  # the centre (5, 5) on the box's corner counts
    assert not ml.cell_mask([(0, 0, 4.9, 5)], (20, 20), (2, 2)).any()


def test_content_on_background_finds_images_from_background_and_beats_both_boxes():
    loc = ml.content_locality(_clip3(), _data("background"), np.ones(3, bool))
    assert loc.background_rank.tolist() == [1.0] * 3 and loc.object_rank.tolist() == [0.0] * 3
    assert loc.beats_own.tolist() == loc.beats_placebo.tolist() == [1.0] * 3
    ranks, local = ml.locality_verdicts(loc, seed=0, margin=0.05)
    assert ranks.verdict == verdicts.A_BETTER and ranks.difference == 1.0 and local.verdict == verdicts.EQUIVALENT
    text = ml.locality_sentence(loc, [ranks, local], "toy")
    assert "identify the phrase's image better than the object" in text and "without locating it" in text


def test_content_on_the_referent_is_local_and_both_is_equivalent():
    loc = ml.content_locality(_clip3(), _data("object"), np.ones(3, bool))
    assert loc.background_rank.tolist() == [0.0] * 3 and loc.object_rank.tolist() == [1.0] * 3
    assert loc.beats_own.tolist() == [0.0] * 3 and loc.beats_placebo.tolist() == [1.0] * 3  # the own box holds it, the placebo not
    ranks, local = ml.locality_verdicts(loc, seed=0, margin=0.05)
    assert ranks.verdict == verdicts.B_BETTER and local.verdict == verdicts.B_BETTER
    text = ml.locality_sentence(loc, [ranks, local], "toy")
    assert "does not explain a seed settling there" in text and "keep part of the phrase's content on its referent" in text
    both = ml.content_locality(_clip3(), _data("both"), np.ones(3, bool))
    ranks, local = ml.locality_verdicts(both, seed=0, margin=0.05)
    assert ranks.verdict == verdicts.EQUIVALENT and "a background solution is available" in ml.locality_sentence(both, [ranks, local], "toy")


def test_a_reading_too_noisy_to_tell_says_so_and_bad_input_is_named():
    assert "neither supports nor rules out" in ml._reading(verdicts.CANNOT_TELL)
    assert "cannot be told here" in ml._placebo(verdicts.CANNOT_TELL)
    with pytest.raises(ValueError, match="at least 2 test images"):
        ml.content_locality(_clip3(), SimpleNamespace(img=torch.zeros(1, 4, 2, 2), corpus=None), np.ones(0, bool))
    lone = ml.Locality(*(np.zeros(2) for _ in range(2)), np.full(2, np.nan), np.full(2, np.nan), np.arange(2))
    with pytest.raises(ValueError, match="no phrase has background"):
        ml.locality_verdicts(lone, seed=0, margin=0.05)
