"""benchmarks/compare_results.py: equal builds compare identical, a changed number is named by
its key path, and only the wall-clock keys are left out."""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import compare_results  # noqa: E402


def _write(folder: Path, chapters: dict) -> Path:
    folder.mkdir()
    for name, doc in chapters.items():
        (folder / f"{name}.json").write_text(json.dumps(doc))
    return folder


def test_identical_differing_and_ignored(tmp_path, capsys):
    doc = {"verdicts": [{"difference": 0.125, "ci": [0.1, 0.2]}], "wall_s": 10.0,
           "speed_pairs_per_s": {"pairs/s": {"A": 3.0}, "GFLOP/pair": {"A": 0.4}}}
    base = _write(tmp_path / "base", {"ch1": doc, "ch2": doc})
    changed = json.loads(json.dumps(doc))
    changed["wall_s"], changed["speed_pairs_per_s"]["pairs/s"]["A"] = 99.0, 5.0  # wall clock: ignored
    same = _write(tmp_path / "same", {"ch1": changed, "ch2": doc})
    assert compare_results.main([str(base), str(same)]) == 0
    out = capsys.readouterr().out
    assert "ch1: identical (ignored: speed_pairs_per_s.pairs/s.A, wall_s)" in out and "ch2: identical" in out

    changed["verdicts"][0]["ci"][1] = 0.2000000001  # one number, one bit off: named by its path
    changed["speed_pairs_per_s"]["GFLOP/pair"]["A"] = 0.5  # FLOP counts are compared
    diff = _write(tmp_path / "diff", {"ch1": changed})
    assert compare_results.main([str(base), str(diff)]) == 1
    out = capsys.readouterr().out
    assert "ch1: 2 differing key paths" in out and "verdicts[0].ci[1]: 0.2 -> 0.2000000001" in out
    assert "speed_pairs_per_s.GFLOP/pair.A: 0.4 -> 0.5" in out and "ch2: only in" in out
