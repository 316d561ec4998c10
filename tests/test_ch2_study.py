"""Chapter 2's experiment steps (fgclip.studies.clip4dm): the variant grid keyed by
configs, the layer choice and ε selection on validation rows, the verdict families on
synthetic units, and a small end-to-end pass over an exported toy FOIL split."""
import numpy as np
import pandas as pd
import pytest

from fgclip import verdicts
from fgclip.methods import clip4dm as c4dm
from fgclip.methods.clip4dm import AttributionConfig, Attributions
from fgclip.models import create_clip
from fgclip.studies.clip4dm import (arms as carms, comparisons as ccmp, controls as cctl, data as cdata,
                                    scale as cscale, selection as csel, speed as cspeed, units as cunits)
from test_ch2_protocol import _toy_units


def test_layer_grid_and_arms_are_configs():
    grid = carms.layer_grid(4)
    assert len(grid) == 3 * 4 + 1 and len(set(grid)) == len(grid)
    assert grid[0] == carms.last_layers(1) and grid[-1] == carms.gae(4)
    assert [c.label for c in grid[3:6]] == ["last 2", "last 2 + ReLU", "last 2 + rollout"]
    arms = carms.method_arms(carms.last_layers(2), 4)
    assert list(arms) == ["CLIP4DM", "CLIP4DM + ReLU", "CLIP4DM + rollout", "GAE"]
    assert len(set(arms.values())) == 4 and all(cfg in grid for cfg in arms.values())
    with pytest.raises(ValueError, match="n must be"):
        carms.last_layers(0)


def _attr(ws, n_words=3):
    return Attributions([["a", "red", "circle"]] * len(ws), [np.asarray(w, float) for w in ws],
                        np.full(len(ws), 0.3), [np.arange(n_words)] * len(ws))


def test_choose_layers_picks_the_best_la_on_validation():
    val = pd.DataFrame({"start": [1.0, 1.0, np.nan], "length": [1, 1, 0],
                        "foil_type": ["shape", "shape", "original"], "foil_word": ["red", "red", ""]})
    hit, miss = [0.0, -1.0, 0.0], [-1.0, 0.0, 0.0]  # the foil word is index 1
    attr = {carms.last_layers(1): _attr([miss, miss, miss]), carms.last_layers(2): _attr([hit, hit, miss]),
            carms.last_layers(3): _attr([hit, miss, miss])}
    la, chosen = csel.choose_layers(attr, val, 3, np.random.default_rng(0), name="LA on val")
    assert la.tolist() == [0.0, 1.0, 0.5] and la.name == "LA on val" and chosen == carms.last_layers(2)
    assert csel.choose_layers(attr, val, 3, np.random.default_rng(0), n_last_layers=3)[1] == carms.last_layers(3)
    with pytest.raises(ValueError, match="n_last_layers"):
        csel.choose_layers(attr, val, 3, np.random.default_rng(0), n_last_layers=4)


def test_select_epsilons_and_the_selection_table():
    frames, attrs = _toy_units(n_img=8, seeds=(0,))
    val, attr = frames[0], attrs[0]
    eps = csel.select_epsilons(attr, val)
    assert eps.forms["most negative"] is None and set(eps.forms) == set(c4dm.F_FORMS)
    assert -0.5 < eps.f1 <= 0.0  # flags the -0.5 foil words, not the originals' 0.0
    orig = val.foil_type.eq("original").to_numpy()
    assert eps.val_fpr == pytest.approx(np.mean([np.mean(w < eps.f1) for w, o in zip(attr.w, orig) if o]))
    given = csel.select_epsilons(attr, val, tune=False, epsilon=-7.0)
    assert given.f1 == -7.0 and given.val_fpr == 0.0
    table = csel.selection_table(12, carms.last_layers(3), eps, True, "val")
    assert list(table.columns) == ["hyperparameter", "candidates", "chosen", "criterion", "split"]
    assert table.chosen[0] == "last 3" and set(table.split) == {"val", "-"}


def _synthetic_draws():
    """Draws of :func:`_toy_units` where every arm and leave-one-word-out share attributions."""
    frames, attrs = _toy_units()
    arms = carms.method_arms(carms.last_layers(1), 2)
    draws = {}
    for s, df in zip(attrs, frames):
        foil = df.foil_type.ne("original").to_numpy()
        loo = Attributions([w for w, f in zip(attrs[s].words, foil) if f], [w for w, f in zip(attrs[s].w, foil) if f],
                           attrs[s].cos[foil], [x for x, f in zip(attrs[s].source, foil) if f])
        draws[s] = carms.Draw(df, {cfg: attrs[s] for cfg in arms.values()}, loo, foil, None)
    return draws, arms


def test_verdict_families_on_synthetic_units():
    draws, arms = _synthetic_draws()
    eps = csel.Epsilons(-0.1, {"most negative": None, "threshold": -0.1, "additive": -0.1}, 0.0)
    units = ccmp.unit_table(draws, arms, np.random.default_rng(0), eps)
    assert len(units) == sum(len(d.rows) for d in draws.values())
    assert ccmp.headline_type(units) == "shape" and ccmp.foil_types(units) == ["shape"]
    margins = cunits.Margins(0.03, 0.02)
    la = ccmp.la_verdicts(units, seed=0, margins=margins)
    assert [v.arms[1] for v in la] == ["random content word", "leave-one-word-out", "leave-one-word-out",
                                       "CLIP4DM + ReLU", "GAE", "CLIP4DM (position rule)"]
    assert la[0].verdict == verdicts.A_BETTER  # LA 0.75 against 0.5
    assert la[3].verdict == verdicts.EQUIVALENT and la[3].difference == 0.0  # identical arms
    assert la[5].verdict == verdicts.EQUIVALENT  # one word per foil: word and position rule agree
    assert all(v.margin == 0.03 and v.cluster_unit == "images" for v in la)
    ap = ccmp.ap_verdicts(units, seed=0, margins=margins)
    assert [v.arms[0] for v in ap] == list(carms.F_NAMES.values()) and ap[0].margin == 0.02
    assert ccmp.colour_word_verdict(units, seed=0, margins=margins).arms[1] == "a random word"
    floor = ccmp.floor_verdicts(units, seed=0, margins=margins)
    assert [v.arms for v in floor] == [("CLIP4DM", "informed floor")]
    pair = ccmp.paired_verdicts(units, seed=0, margins=margins)
    assert [v.claim for v in pair] == ["shape foils ranked below their own original"] * 2
    neg = cctl.position_control(units, "shape", margins.share, seed=0)
    assert neg.arms == ("CLIP4DM", "random content word") and neg.margin == 0.03
    assert ccmp.transfer(units, draws, carms.last_layers(1), None, None, seed=0, margins=margins)[0] == []
    assert ccmp.clauses([]) == "not tested here"
    assert ccmp.clauses(la[:1]) == f"{la[0].claim}: {ccmp.reading(la[0])}"


def test_steps_end_to_end_on_an_exported_toy_split(tmp_path):
    clip = create_clip("toy-vit", pretrained="toy")
    data = cdata.load_draws(clip, str(tmp_path), "val", "test", 0, [0, 1], n_scenes=4, max_pairs=0)
    assert set(data.test) == {0, 1} and data.skipped == {"val": 0, "0": 0, "1": 0}
    counts = data.counts("val", "test")
    assert list(counts.columns) == ["test draw 0", "test draw 1", "val"]
    assert counts.loc["original", "val"] == data.val.foil_type.eq("original").sum()
    grid = carms.layer_grid(4)
    attr_val, images = carms.attribute(clip, data.val, grid, batch_size=16)
    assert set(attr_val) == set(grid) and len(images.index) == len(data.val)
    la, main = csel.choose_layers(attr_val, data.val, 4, np.random.default_rng(0))
    assert main in grid and len(la) == 4
    arms = carms.method_arms(main, 4)
    draw = carms.attribute_draw(clip, data.test[0], list(arms.values()), batch_size=16)
    direct = c4dm.clip4dm(clip, images.feats, data.val.caption.tolist(), main, image_index=images.index)
    for a, b in zip(direct.w, attr_val[main].w):  # keyed by config: the same rule as a direct call
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-9)
    assert len(draw.loo.w) == draw.foil.sum() == data.test[0].foil_type.ne("original").sum()
    eps = csel.select_epsilons(attr_val[main], data.val)
    units = ccmp.unit_table({0: draw}, arms, np.random.default_rng(0), eps)
    planted = cctl.planted_units(clip, data.planted, main, np.random.default_rng(0), eps, batch_size=16)
    pos = cctl.planted_control(planted, units, 0.03, seed=0)
    assert pos.claim in ("LA on planted colour foils against the same slot of their originals",
                         "no planted colour foils")
    wrong = cscale.wrong_image_units(clip, units, main, eps.f1, np.random.default_rng(0), batch_size=16)
    assert len(wrong) == units.foil_type.eq("original").sum() and not np.allclose(wrong["w_min|wrong"], wrong.w_min)
    speed = cspeed.speed(clip, data.test[0], main, n_pairs=3)
    assert speed.n_pairs == 3 and speed.measured > 0 and speed.allowed > 0
    assert set(units.foil_type) <= {"original", "shape", "color", "relation", "count"}


def test_toy_foil_exports_are_keyed_by_the_world_not_by_the_file_name(tmp_path):
    """Two worlds (or a stale file of the old flat layout) in one data_root are never mixed up:
    each (world, seed, n_scenes, split) is exported once into its own complete folder."""
    from dataclasses import replace

    from fgclip.studies.clip4dm.data import foil_sets
    from fgclip.toyworld import ToyWorldConfig

    (tmp_path / "foil_val-s0-n6.json").write_text("not json: a stale flat export must not be read")
    a = foil_sets(tmp_path, "val", [0], 6, 50)[0]
    again = foil_sets(tmp_path, "val", [0], 6, 50)[0]
    other = foil_sets(tmp_path, "val", [0], 6, 50, world=replace(ToyWorldConfig(), center_bias=0.9))[0]
    folders = sorted(p.name for p in tmp_path.glob("toy-*"))
    assert len(folders) == 2 and all((tmp_path / f / "toy-export.json").is_file() for f in folders)
    assert a.equals(again) and not a.equals(other)


def test_each_draw_tunes_its_epsilon_on_its_own_half_of_the_validation_images():
    val = pd.DataFrame({"image": np.repeat(np.arange(10), 3)})  # 3 captions per image
    halves = ccmp.val_halves(val, [0, 1, 2], seed=5)
    assert list(halves) == [0, 1, 2]
    for mask in halves.values():
        assert mask.sum() == 15  # 5 of 10 images, all their captions
        assert all(len(set(mask[val.image.to_numpy() == im])) == 1 for im in range(10))  # an image whole
    assert not np.array_equal(halves[0], halves[1])  # a fresh half per draw
    assert all(np.array_equal(halves[s], ccmp.val_halves(val, [0, 1, 2], seed=5)[s]) for s in halves)  # seeded
    assert not np.array_equal(halves[0], ccmp.val_halves(val, [0], seed=6)[0])
