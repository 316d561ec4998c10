"""Where FOR's 3x can hold: for.json's rows read back, by hand."""
from __future__ import annotations

import json

import pytest

from fgclip.studies.for_retrieval import speed


def _result(clustering_ms: float) -> dict:
    times = {"backbone": 100.0, "SUM-CLIP head": 10.0, "dense features": 5.0, "agglomerative": clustering_ms}
    rows = [{"name": n, "metric": "m", "value": v, "unit": "ms/image", "model": "RN50", "map": "7x7",
             "input_px": 224, "stored_vectors_per_image": 50 if n == "SUM-CLIP head" else 4} for n, v in times.items()]
    rows.append({"name": "numpy index", "metric": "latency", "value": 1.0, "unit": "ms/query", "stored_vectors": 10})
    return {"rows": rows, "machine": "a CPU", "date": "2026-12-05", "command": "python bench_for.py"}


def test_ratio_and_needed_speedup_by_hand():
    (row,) = speed.stage_table(_result(20.0))
    assert row["ratio"] == pytest.approx((100 + 5 + 20) / (100 + 10))
    assert row["needed_speedup"] == pytest.approx((200 + 30 - 5) / 20)  # 11.25x
    assert row["queries"] == 50 and row["method"] == "agglomerative"


def test_the_sentence_says_where_3x_holds():
    cannot = speed.speed_sentence(_result(20.0))
    assert "holds in none" in cannot and "11x faster" in cannot and "1.14x" in cannot
    can = speed.speed_sentence(_result(400.0))  # clustering >= 2 b + 3 h - d = 225 ms
    assert "3x holds here" in can and "holds in at least one" in can
    with pytest.raises(ValueError, match="ViT"):
        speed.speed_sentence(_result(20.0), model="ViT")


def test_readme_block_round_trip_and_bad_files(tmp_path):
    res = _result(20.0)
    text = "intro\n" + speed.README_BEGIN + "\nstale\n" + speed.README_END + "\noutro\n"
    new = speed.replace_readme_block(text, res)
    assert speed.readme_block(new) == speed.readme_table(res) and new.endswith("outro\n")
    assert "| RN50 7x7 (224 px) | 50 | 100.0 | 10.0 | 5.0 | agglomerative | 20.0 | 1.14x | 11x |" in new
    with pytest.raises(ValueError, match="markers"):
        speed.readme_block("no markers here")
    with pytest.raises(FileNotFoundError, match="bench_for"):
        speed.load_speed(tmp_path / "absent.json")
    (tmp_path / "old.json").write_text(json.dumps({**res, "rows": res["rows"][-1:]}))
    with pytest.raises(ValueError, match="older bench_for"):
        speed.load_speed(tmp_path / "old.json")
    bad = {**res, "rows": [r for r in res["rows"] if r["name"] != "backbone"]}
    with pytest.raises(ValueError, match="backbone"):
        speed.stage_table(bad)
