"""LA by the word, as the official CLIP4DM code scores it (issue 32 item 4): FOIL words keep
no punctuation ('handbag.' in real FOIL), a repeated foil word counts wherever it stands,
and the position rule stays a separate, named arm."""
import json

import numpy as np
import pandas as pd
import pytest

from fgclip.datasets import read_foil
from fgclip.datasets.foil import strip_punctuation
from fgclip.methods.clip4dm import Attributions
from fgclip.metrics.misalignment import normalise_word, word_matches
from fgclip.studies.clip4dm.units import POSITION_RULE, build_units, localization_units


def _foil_file(tmp_path):
    ann = dict(id=7, image_id=1, foil_id=0, caption="A woman carrying a bag.", foil=False, target_word="ORIG",
               foil_word="ORIG")
    foil = dict(ann, foil_id=1, caption="A woman carrying a handbag.", foil=True, target_word="bag.",
                foil_word="handbag.")
    path = tmp_path / "foil.json"
    path.write_text(json.dumps({"images": [{"id": 1, "file_name": "x.jpg"}], "annotations": [ann, foil]}))
    return path


def test_handbag_fixture_reads_without_punctuation(tmp_path):
    (p,) = read_foil(_foil_file(tmp_path), tmp_path, check_images=False).pairs
    assert (p.foil_word, p.target_word, p.foil_span, p.target_span) == ("handbag", "bag", "handbag", "bag")
    assert p.foiled == "A woman carrying a handbag." and p.word_index == 4  # the caption is kept as written
    assert strip_punctuation("teddy bear, .") == "teddy bear" and normalise_word("Handbag.") == "handbag"


def _one(words, w, start, foil_word, length=1):
    attr = Attributions([words], [np.asarray(w, float)], np.zeros(1), [np.arange(len(words))])
    df = pd.DataFrame({"start": [start], "length": [length], "foil_word": [foil_word]})
    return localization_units(attr, df, np.random.default_rng(0)).iloc[0]


def test_word_rule_counts_a_repeated_word_the_position_rule_does_not():
    words = "a red star and a red ring".split()
    w = np.zeros(7)
    w[5] = -1.0  # the argmin is the second 'red'; the foil replaced the first
    u = _one(words, w, 1, "Red.")
    assert (u.hit, u.hit_pos) == (1.0, 0.0)
    w[:] = 0.0
    w[2] = -1.0  # 'star': a miss under both rules
    assert (_one(words, w, 1, "red").hit, _one(words, w, 1, "red").hit_pos) == (0.0, 0.0)
    teddy = "a teddy bear on a bed".split()  # a multi-word foil never equals one word (the official rule)
    u = _one(teddy, [0, -1.0, 0, 0, 0, 0], 1, "teddy bear", length=2)
    assert (u.hit, u.hit_pos) == (0.0, 1.0)
    assert word_matches(["a", "Handbag", "bag"], "handbag.").tolist() == [False, True, False]
    assert not word_matches(["a", "bag"], "").any()


def test_units_carry_both_rules_and_random_arms_by_the_word():
    words = "a red star and a red ring".split()
    w = np.zeros(7)
    w[5] = -1.0
    df = pd.DataFrame({"caption": [" ".join(words)], "start": [1], "length": [1], "foil_type": ["color"],
                       "foil_word": ["red"], "seed": [0], "cluster": ["0:i"]})
    attr = Attributions([words], [w], np.array([0.3]), [np.arange(7)])
    u = build_units(df, {"CLIP4DM": attr}, "CLIP4DM", np.random.default_rng(0),
                    {"most negative": None}, -0.5).iloc[0]
    assert u["hit|CLIP4DM"] == 1.0 and u[f"hit|{POSITION_RULE}"] == 0.0
    assert u["hit|random content word"] == pytest.approx(2 / 4)  # "red" twice among 4 content words
    assert u["hit|informed floor"] == 1.0  # both colour words are the foil word
    assert u.w_min == -1.0 and u.flagged == pytest.approx(1 / 7)
