"""Toy exports are a cache keyed by what made them; a real data root is never written to."""
import json

import pytest

from fgclip.toyworld import ToyWorldConfig, generate
from fgclip.toyworld.cache import COMPLETE, cache_key, toy_export
from fgclip.toyworld.export import export_coco


def holds_coco(root):
    return (root / "annotations" / "instances_test.json").is_file()


def exporter(n, seed, calls):
    def export(folder):
        calls.append(folder.name)
        export_coco(generate(ToyWorldConfig(), n, seed=seed, split="test"), folder, "test", ToyWorldConfig(), seed)
    return export


def test_other_seed_or_size_gets_other_data(tmp_path):
    calls = []
    a = toy_export(tmp_path, holds_coco, exporter(3, 0, calls), world=ToyWorldConfig(), seed=0, n=3)
    again = toy_export(tmp_path, holds_coco, exporter(3, 0, calls), world=ToyWorldConfig(), seed=0, n=3)
    b = toy_export(tmp_path, holds_coco, exporter(3, 1, calls), world=ToyWorldConfig(), seed=1, n=3)
    c = toy_export(tmp_path, holds_coco, exporter(5, 0, calls), world=ToyWorldConfig(), seed=0, n=5)
    assert a == again and len({a, b, c}) == 3 and len(calls) == 3  # made once each
    assert json.loads((b / COMPLETE).read_text())["seed"] == 1
    images = lambda p: json.loads((p / "annotations" / "instances_test.json").read_text())["images"]
    assert len(images(c)) == 5 and len(images(a)) == 3
    assert cache_key(seed=0, n=3) != cache_key(seed=0, n=4)


def test_a_root_holding_a_dataset_is_used_as_is(tmp_path):
    export_coco(generate(ToyWorldConfig(), 2, seed=0, split="test"), tmp_path, "test", ToyWorldConfig(), 0)
    before = sorted(p.name for p in tmp_path.iterdir())
    calls = []
    assert toy_export(tmp_path, holds_coco, exporter(3, 0, calls), seed=0) == tmp_path
    assert not calls and sorted(p.name for p in tmp_path.iterdir()) == before


def test_an_interrupted_export_leaves_nothing_half_written(tmp_path):
    def broken(folder):
        (folder / "half.json").write_text("{")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        toy_export(tmp_path, holds_coco, broken, seed=0)
    assert list(tmp_path.iterdir()) == []


def test_a_concurrent_export_of_the_same_key_is_reused_not_replaced(tmp_path):
    calls = []
    first = toy_export(tmp_path, holds_coco, exporter(2, 0, calls), seed=0, n=2)
    (first / COMPLETE).rename(first / "moved")  # incomplete when the second call starts...
    (first / "in-use").touch()  # stands for a reader of the first export

    def export(folder):
        (first / "moved").rename(first / COMPLETE)  # ...completed by a concurrent run meanwhile
        exporter(2, 0, calls)(folder)

    assert toy_export(tmp_path, holds_coco, export, seed=0, n=2) == first
    assert [p.name for p in tmp_path.iterdir()] == [first.name]  # kept; this call's copy removed
    assert (first / "in-use").is_file()  # not deleted under its reader
