from pathlib import Path

import numpy as np
import pytest
import torch

from fgclip.metrics.pointing import (argmax_point, box_coverage, box_distance, center_point,
                                     class_pointing, contains_center, phrase_pointing,
                                     pointing_hit, random_points, union_area)


def test_argmax_point_is_the_cell_centre_in_pixels():
    heat = np.zeros((4, 8))
    heat[1, 6] = 3.0
    # 8 columns over 64 px -> 8 px per cell; 4 rows over 32 px -> 8 px per cell
    assert argmax_point(heat, (32, 64)) == (6.5 * 8, 1.5 * 8)
    # a non-square stretch: 2x2 map over a 10 (H) x 40 (W) image
    assert argmax_point(torch.tensor([[0.0, 0.0], [1.0, 0.0]]), (10, 40)) == (10.0, 7.5)
    # ties go to the first cell in row-major order
    assert argmax_point(np.ones((2, 2)), (4, 4)) == (1.0, 1.0)


def test_argmax_point_rejects_bad_maps():
    with pytest.raises(ValueError, match="heat"):
        argmax_point(np.zeros(5), (4, 4))
    with pytest.raises(ValueError, match="NaN"):
        argmax_point(np.array([[0.0, np.nan]]), (4, 4))
    with pytest.raises(ValueError, match="image_hw"):
        argmax_point(np.zeros((2, 2)), (0, 4))


def test_pointing_hit_inside_outside_and_tolerance():
    boxes = [(10, 10, 20, 20)]
    assert pointing_hit((15.0, 15.0), boxes, (64, 64))
    assert pointing_hit((10.0, 10.0), boxes, (64, 64))  # half-open: left/top edge inside
    assert not pointing_hit((20.0, 15.0), boxes, (64, 64))  # right edge outside
    # 5 px right of the last pixel centre (19.5): a hit only with tolerance > 5
    assert not pointing_hit((24.5, 15.0), boxes, (64, 64))
    assert not pointing_hit((24.5, 15.0), boxes, (64, 64), tolerance=5.0)  # strict <
    assert pointing_hit((24.5, 15.0), boxes, (64, 64), tolerance=5.01)
    # diagonal: distance to (19.5, 19.5) from (22.5, 23.5) is 5
    assert box_distance((22.5, 23.5), boxes[0]) == pytest.approx(5.0)
    # any of several boxes counts
    assert pointing_hit((40.0, 40.0), [(0, 0, 5, 5), (35, 35, 45, 45)], (64, 64))


def test_pointing_hit_takes_a_map():
    heat = torch.zeros(8, 8)
    heat[0, 7] = 1.0  # top-right cell, centre (60, 4) on a 64 x 64 image
    assert pointing_hit(heat, [(56, 0, 64, 8)], (64, 64))
    assert not pointing_hit(heat, [(0, 0, 56, 64)], (64, 64))


def test_pointing_hit_rejects_bad_input():
    with pytest.raises(ValueError, match="empty"):
        pointing_hit((1.0, 1.0), [], (8, 8))
    with pytest.raises(ValueError, match="x1 > x0"):
        pointing_hit((1.0, 1.0), [(5, 0, 5, 3)], (8, 8))
    with pytest.raises(ValueError, match="tolerance"):
        pointing_hit((1.0, 1.0), [(0, 0, 3, 3)], (8, 8), tolerance=-1)


def _torchray_hit(mask: np.ndarray, point_uv: tuple[int, int], tolerance: float) -> bool:
    """TorchRay's PointingGame.evaluate, transcribed: hit when a mask pixel (u, v) has
    (v - y)^2 + (u - x)^2 < tolerance^2, with the point given as integer pixel indices."""
    v, u = np.meshgrid((np.arange(mask.shape[0]) - point_uv[1]) ** 2,
                       (np.arange(mask.shape[1]) - point_uv[0]) ** 2, indexing="ij")
    return bool((mask & ((v + u) < tolerance ** 2)).any())


def test_tolerance_rule_matches_torchray_on_pixel_grids():
    rng = np.random.default_rng(0)
    h, w = 40, 50
    for _ in range(300):
        boxes = []
        mask = np.zeros((h, w), dtype=bool)
        for _ in range(rng.integers(1, 3)):
            x0, x1 = sorted(rng.choice(w + 1, size=2, replace=False))
            y0, y1 = sorted(rng.choice(h + 1, size=2, replace=False))
            boxes.append((x0, y0, x1, y1))
            mask[y0:y1, x0:x1] = True
        u, v = int(rng.integers(w)), int(rng.integers(h))
        tol = float(rng.choice([1.0, 3.0, 7.5, 15.0]))
        ours = pointing_hit((u + 0.5, v + 0.5), boxes, (h, w), tolerance=tol)
        assert ours == _torchray_hit(mask, (u, v), tol), (boxes, u, v, tol)


def test_union_area_and_coverage():
    assert union_area([(0, 0, 2, 2)]) == 4.0
    assert union_area([(0, 0, 2, 2), (1, 1, 3, 3)]) == 7.0  # 4 + 4 - 1 overlap
    assert union_area([(0, 0, 4, 4), (1, 1, 2, 2)]) == 16.0  # nested
    assert box_coverage([(0, 0, 5, 10), (5, 0, 10, 10)], (10, 20)) == pytest.approx(0.5)
    assert box_coverage([(-5, -5, 5, 5)], (10, 10)) == pytest.approx(0.25)  # clipped


def test_union_area_matches_rasterisation():
    rng = np.random.default_rng(1)
    for _ in range(50):
        grid = np.zeros((30, 30), dtype=bool)
        boxes = []
        for _ in range(rng.integers(1, 5)):
            x0, x1 = sorted(rng.choice(31, 2, replace=False))
            y0, y1 = sorted(rng.choice(31, 2, replace=False))
            boxes.append((x0, y0, x1, y1))
            grid[y0:y1, x0:x1] = True
        assert union_area(boxes) == grid.sum()


def test_phrase_protocol_hand_made():
    hw = (100, 100)
    points = [(50.0, 50.0), (10.0, 10.0), (90.0, 90.0), (50.0, 50.0)]
    boxes = [[(40, 40, 60, 60)],            # 4% of the image: skipped at 5%
             [(0, 0, 30, 30)],              # hit
             [(0, 0, 30, 30)],              # miss
             [(0, 0, 20, 20), (45, 45, 70, 70)]]  # hit on the second box
    r = phrase_pointing(points, boxes, [hw] * 4)
    assert (r.n_evaluated, r.n_skipped) == (3, 1)
    assert r.hits == [None, True, False, True]
    assert r.accuracy == pytest.approx(2 / 3)
    np.testing.assert_array_equal(r.evaluated_hits(), [1.0, 0.0, 1.0])
    r0 = phrase_pointing(points, boxes, [hw] * 4, min_box_area=0.0)
    assert r0.accuracy == pytest.approx(3 / 4)
    with pytest.raises(ValueError, match="min_box_area"):
        phrase_pointing(points[:1], boxes[:1], [hw], min_box_area=0.5)
    with pytest.raises(ValueError, match="lengths differ"):
        phrase_pointing(points, boxes[:2], [hw] * 4)


def test_class_protocol_is_a_mean_over_classes():
    hw = (100, 100)
    # class "a": 3 trials, 1 hit; class "b": 1 trial, 1 hit (within 15 px of its box)
    points = [(5.0, 5.0), (80.0, 80.0), (80.0, 5.0), (60.0, 50.0)]
    boxes = [[(0, 0, 10, 10)], [(0, 0, 10, 10)], [(0, 50, 10, 60)], [(20, 40, 50, 60)]]
    r = class_pointing(points, boxes, [hw] * 4, ["a", "a", "a", "b"])
    assert r.hits == [True, False, False, True]
    assert r.per_class == {"a": pytest.approx(1 / 3), "b": 1.0}
    assert r.trials == {"a": 3, "b": 1}
    assert r.mean_accuracy == pytest.approx((1 / 3 + 1) / 2)  # not the pooled 2/4
    strict = class_pointing(points, boxes, [hw] * 4, ["a", "a", "a", "b"], tolerance=0.0)
    assert strict.per_class["b"] == 0.0


def test_baselines():
    assert center_point((10, 30)) == (15.0, 5.0)
    assert contains_center([(10, 0, 20, 10)], (10, 30))
    assert not contains_center([(0, 0, 10, 10)], (10, 30))
    a = random_points([(10, 20)] * 500, seed=3)
    assert a == random_points([(10, 20)] * 500, seed=3)
    assert a != random_points([(10, 20)] * 500, seed=4)
    xs, ys = np.array(a).T
    assert xs.min() >= 0 and xs.max() < 20 and ys.min() >= 0 and ys.max() < 10
    # a uniform point hits a box covering a quarter of the image about 25% of the time
    acc = phrase_pointing(a, [[(0, 0, 10, 5)]] * 500, [(10, 20)] * 500, min_box_area=0).accuracy
    assert 0.19 < acc < 0.31


def test_resized_argmax_and_cell_centre_rules_differ_on_a_hand_made_map():
    """A 2x2 map on a 40x40 image whose best cell is the top-left one: the cell-centre rule points
    at that cell's centre (10, 10); resized bilinearly, the map is flat at 1.0 over the corner
    pixels [0, 10] x [0, 10] (values clamp outside the cell centres), so MultiGrounding's argmax
    is the first of them, pixel (0, 0). A box (5, 5, 20, 20) catches the first point, not the second."""
    from fgclip.metrics.pointing import resized_argmax_point

    heat = np.array([[1.0, 0.9], [0.0, 0.0]])
    assert argmax_point(heat, (40, 40)) == (10.0, 10.0)
    assert resized_argmax_point(heat, (40, 40)) == (0.0, 0.0)
    box = [(5.0, 5.0, 20.0, 20.0)]
    assert pointing_hit(argmax_point(heat, (40, 40)), box, (40, 40))
    assert not pointing_hit(resized_argmax_point(heat, (40, 40)), box, (40, 40), inclusive=True)
    # a torch map gives the same point; the default rule (half-open edges) is unchanged
    assert resized_argmax_point(torch.tensor(heat), (40, 40)) == (0.0, 0.0)
    # inclusive edges: a point on the far edge counts only under the inclusive rule
    assert not pointing_hit((20.0, 10.0), box, (40, 40)) and pointing_hit((20.0, 10.0), box, (40, 40), inclusive=True)
    with pytest.raises(ValueError, match="heat"):
        resized_argmax_point(np.zeros(4), (40, 40))


def test_chapter_rule_is_multigrounding_and_cell_centre_is_a_named_alternative():
    """The chapter's read-out (studies.maximage.heads.map_points) under both rule names on the
    hand-made map above: "resized" (the default) points at pixel (0, 0) and misses the box with
    closed edges; "cell-centre" points at (10, 10) and hits. The batched resize equals
    resized_argmax_point map by map on random maps (one with tied cells) of three image sizes; an
    unknown rule is refused."""
    from fgclip.metrics.pointing import resized_argmax_point
    from fgclip.studies.maximage import evaluation as ev
    from fgclip.studies.maximage.data import Corpus, PhraseItem
    from fgclip.studies.maximage.heads import map_points

    heat = torch.tensor([[[1.0, 0.9], [0.0, 0.0]]])  # (1, 2, 2)
    assert map_points(heat, [(40, 40)]) == [(0.0, 0.0)]
    assert map_points(heat, [(40, 40)], "cell-centre") == [(10.0, 10.0)]
    box = (5.0, 5.0, 20.0, 20.0)
    corpus = Corpus([Path("a.png")], [(40, 40)], [["a", "star"]], [0],
                    [PhraseItem(0, 0, (0, 2), "a star", [box], False)], [[box]])
    data, keep = type("S", (), {"corpus": corpus})(), np.array([True])
    pts = {r: map_points(heat, [(40, 40)], r) for r in ("resized", "cell-centre")}
    assert ev.hits(pts["resized"], data, keep).tolist() == [0.0]
    assert ev.hits(pts["cell-centre"], data, keep, "cell-centre").tolist() == [1.0]
    # the far edge: inside under the chapter's closed edges, outside under the cell-centre rule's
    assert ev.hits([(20.0, 20.0)], data, keep).tolist() == [1.0]
    assert ev.hits([(20.0, 20.0)], data, keep, "cell-centre").tolist() == [0.0]
    rng = np.random.default_rng(0)
    maps = torch.tensor(rng.normal(size=(7, 8, 8)))
    maps[3] = maps[3].round()  # ties between cells too
    hws = [(64, 64), (48, 80)] * 3 + [(61, 35)]
    assert map_points(maps, hws) == [resized_argmax_point(m, hw) for m, hw in zip(maps, hws)]
    with pytest.raises(ValueError, match="rule"):
        map_points(heat, [(40, 40)], "centre")
    with pytest.raises(ValueError, match="rule"):
        ev.hits([(0.0, 0.0)], data, keep, "nearest")
