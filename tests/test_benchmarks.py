"""The benchmark command runs end to end (at toy sizes) and writes what the README promises.

A smoke run, not a timing: ``benchmarks/run_all.py --quick`` runs every ``bench_*.py`` with
a few steps each, into a temporary folder, so the committed results are never touched. It
checks the files and their fields, never a speed.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = sorted(p.stem.removeprefix("bench_") for p in (ROOT / "benchmarks").glob("bench_*.py"))


def test_run_all_quick_writes_every_result(tmp_path):
    results = tmp_path / "results"
    env = {**os.environ, "FGCLIP_BENCH_RESULTS": str(results), "PYTHONPATH": str(ROOT / "src")}
    committed = {p: p.read_bytes() for p in (ROOT / "benchmarks" / "results").glob("*.json")}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run_all.py"), "--quick"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    assert BENCHMARKS == ["clip4dm", "ddp", "for", "heads", "train", "train_convergence"]
    for name in BENCHMARKS:
        res = json.loads((results / f"{name}.json").read_text())
        assert res["benchmark"] == name and res["rows"], name
        for row in res["rows"]:
            assert {"name", "metric", "value", "unit"} <= set(row), (name, row)
            assert math.isfinite(row["value"]), (name, row)
            if row["unit"] in {"images/s", "pairs/s", "steps/s", "GFLOP/s", "ms/query", "s", "MB"}:
                assert row["value"] > 0, (name, row)
        assert res["ratios"] and all(v > 0 for v in res["ratios"].values()), name
        assert res["peak_rss_mb"] > 0
        # every result records the CPU's capability and what precision='auto' chose there
        assert res["precision"]["auto"]["chosen"] in ("fp32", "bf16"), name
        assert res["precision"]["auto"]["reason"] and "torch_cpu_capability" in res["precision"]["cpu"], name
    train = json.loads((results / "train.json").read_text())
    default = [k for k in train["ratios"] if k.startswith("default path") and k.endswith("/ fp32 reference")]
    assert len(default) == 1 and f"-> {train['precision']['auto']['chosen']}" in default[0]
    assert train["arms"][train["default_path"]]["precision"] == "auto"
    assert {r["unit"] for r in train["rows"] if r["metric"] == "peak"} == {"GFLOP/s"}
    conv = json.loads((results / "train_convergence.json").read_text())
    assert {r["metric"] for r in conv["rows"]} >= {"held-out i2t R@1", "held-out t2i R@1", "steady throughput"}
    assert conv["runs"]["default path"]["0"]["precision"]["requested"] == "auto"

    combined = json.loads((tmp_path / "results.json").read_text())
    assert set(BENCHMARKS) <= set(combined) and "book_cost_s" in combined
    table = (results / "summary.md").read_text()
    assert "| train |" in table and "Measured on:" in table
    assert "| train |" in done.stdout  # the table is printed too
    # the committed results were left alone
    assert {p: p.read_bytes() for p in (ROOT / "benchmarks" / "results").glob("*.json")} == committed


def test_readme_for_tables_are_built_from_for_json(monkeypatch, tmp_path):
    """The README's FOR speed table and the "| for |" rows of the README and summary.md are
    what for.json makes now (run_all.py's format for the rows); a stale number fails."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_for
        import run_all
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    from fgclip.studies.for_retrieval import speed
    result = speed.load_speed(ROOT / "benchmarks" / "results" / "for.json")
    readme = (ROOT / "README.md").read_text()
    assert speed.readme_block(readme) == speed.readme_table(result)
    (tmp_path / "for.json").write_text((ROOT / "benchmarks" / "results" / "for.json").read_text())
    monkeypatch.setattr(run_all, "RESULTS_DIR", tmp_path)  # for.json alone, as run_all.py formats it
    monkeypatch.setattr(run_all, "book_cost", lambda: [])
    rows = [line for line in run_all.summary().splitlines() if line.startswith("| for | ")]
    assert rows == bench_for.summary_lines(result)
    summary = (ROOT / "benchmarks" / "results" / "summary.md").read_text()
    for text in (readme, summary):
        assert [line for line in text.splitlines() if line.startswith("| for | ")] == rows
    stale = {**result, "rows": [{**r, "value": r["value"] * 2} for r in result["rows"]]}
    assert speed.readme_table(stale) != speed.readme_block(readme)


def test_report_summarises_the_committed_results_beside_the_gpu_sweeps(monkeypatch):
    """``run_all.py --report`` reads benchmarks/results/ as committed: the bench_*.py files
    become rows, the pretraining sweeps (no "rows") are named apart instead of breaking it."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import run_all
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    monkeypatch.setattr(run_all, "book_cost", lambda: [])
    sweeps = sorted(p.stem for p in (ROOT / "benchmarks" / "results").glob("pretrain_sweep_*.json"))
    text = run_all.summary()
    assert sweeps and f"(not bench_*.py results): {', '.join(sweeps)}." in text
    assert set(run_all.bench_results()) == {p.stem for p in (ROOT / "benchmarks" / "results").glob("*.json")} - set(sweeps)
    assert "| train |" in text and "Measured on:" in text
