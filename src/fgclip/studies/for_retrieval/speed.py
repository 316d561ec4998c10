"""Where FOR's "3x faster than Cluster-CLIP" can hold: read ``benchmarks/results/for.json``.

``benchmarks/bench_for.py`` times visual inference per image and stage: the backbone (b),
the SUM-CLIP head (h), Cluster-CLIP's dense features (d) and its clustering (c, k-means or
agglomerative), per model and map size. Per image, SUM-CLIP costs b + h and Cluster-CLIP
b + d + c, so

    ratio = (b + d + c) / (b + h),

and the paper's 3x needs c >= 2 b + 3 h - d. If the network stages (b, h, d) ran s times
faster while the clustering stayed where it is (a GPU network with CPU clustering), the
ratio would be (b + d + s c) / (b + h), which reaches 3 at

    s_3x = (2 b + 3 h - d) / c .

s_3x <= 1 means 3x holds on the machine measured; the larger s_3x, the faster the network
stages must become, relative to the clustering, before the claim can hold.

:func:`stage_table` gathers one row per (model, map, clustering method);
:func:`readme_table` is the README's block (a test rebuilds it and compares);
:func:`speed_sentence` is what chapter 3 says about speed.
"""
from __future__ import annotations

import json
from itertools import groupby
from pathlib import Path

from ...paths import project_home

STAGES = ("backbone", "SUM-CLIP head", "dense features")
METHODS = ("k-means", "agglomerative")
README_BEGIN = "<!-- for-speed-table: generated from benchmarks/results/for.json by " \
               "fgclip.studies.for_retrieval.speed.readme_table (python benchmarks/bench_for.py --readme) -->"
README_END = "<!-- end for-speed-table -->"


def load_speed(path: str | Path | None = None) -> dict:
    """The benchmark record (default: the project's ``benchmarks/results/for.json``), checked
    for the fields this module reads."""
    path = project_home() / "benchmarks" / "results" / "for.json" if path is None else Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no FOR benchmark record at {path} (run benchmarks/bench_for.py)")
    result = json.loads(path.read_text())
    for key in ("rows", "machine", "date", "command"):
        if key not in result:
            raise ValueError(f"{path}: field {key!r} is missing")
    if not stage_table(result, source=str(path)):
        raise ValueError(f"{path}: no row carries 'model', 'map' and 'input_px' (an older bench_for.py wrote it)")
    return result


def stage_table(result: dict, source: str = "for.json") -> list[dict]:
    """One dict per (model, map, clustering method): ms/image of each stage, the ratio
    Cluster-CLIP / SUM-CLIP time, and s_3x (module docstring)."""
    times: dict[tuple[str, str, int], dict[str, float]] = {}
    head: dict[tuple[str, str, int], int] = {}
    for i, row in enumerate(result["rows"]):
        if not {"model", "map", "input_px"} <= set(row):
            continue  # the index rows (latency per query) belong to no map
        if row.get("unit") != "ms/image":
            raise ValueError(f"{source}: rows[{i}] has unit {row.get('unit')!r}, expected 'ms/image'")
        key = (row["model"], row["map"], int(row["input_px"]))
        times.setdefault(key, {})[row["name"]] = float(row["value"])
        if row["name"] == "SUM-CLIP head":
            head[key] = int(row["stored_vectors_per_image"])
    out = []
    for (model, side, px), t in times.items():
        missing = [s for s in STAGES if s not in t]
        if missing:
            raise ValueError(f"{source}: {model} {side} lacks the stage(s) {missing}")
        b, h, d = (t[s] for s in STAGES)
        for method in METHODS:
            if method not in t:
                continue
            c = t[method]
            out.append({"model": model, "map": side, "input_px": px, "queries": head[model, side, px],
                        "method": method, "backbone": b, "head": h, "dense": d, "clustering": c,
                        "ratio": (b + d + c) / (b + h), "needed_speedup": (2 * b + 3 * h - d) / c})
    return out


def readme_table(result: dict) -> str:
    """The README's per-stage table (markdown), between its two marker comments."""
    lines = [README_BEGIN,
             f"Measured {result['date']} on {result['machine']} (`{result['command']}`), ms per image:",
             "",
             "| model, map (input) | SUM-CLIP queries | backbone | SUM-CLIP head | dense features | clustering method "
             "| clustering | Cluster-CLIP / SUM-CLIP time | network speed-up needed for 3x |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in stage_table(result):
        lines.append(f"| {r['model']} {r['map']} ({r['input_px']} px) | {r['queries']} | {r['backbone']:.1f} "
                     f"| {r['head']:.1f} | {r['dense']:.1f} | {r['method']} | {r['clustering']:.1f} "
                     f"| {r['ratio']:.2f}x | {r['needed_speedup']:.0f}x |")
    lines.append(README_END)
    return "\n".join(lines)


def readme_block(readme_text: str, source: str = "README.md") -> str:
    """The generated block as the README holds it (markers included)."""
    start, end = readme_text.find(README_BEGIN), readme_text.find(README_END)
    if start < 0 or end < start:
        raise ValueError(f"{source}: the for-speed-table markers are missing")
    return readme_text[start:end + len(README_END)]


def replace_readme_block(readme_text: str, result: dict, source: str = "README.md") -> str:
    """The README with its block rebuilt from ``result``."""
    return readme_text.replace(readme_block(readme_text, source), readme_table(result))


def speed_sentence(result: dict, model: str = "RN50") -> str:
    """Where the paper's 3x can and cannot hold on the machine of ``result``, for ``model``."""
    rows = [r for r in stage_table(result) if r["model"] == model]
    if not rows:
        raise ValueError(f"for.json has no per-stage rows for model {model!r}")
    parts = []
    for (side, px), group in groupby(rows, key=lambda r: (r["map"], r["input_px"])):
        g = list(group)
        parts.append(f"at {side} ({px} px), backbone {g[0]['backbone']:.0f} ms and head {g[0]['head']:.0f} ms per "
                     f"image, Cluster-CLIP took " + " and ".join(
                         f"{r['ratio']:.2f}x SUM-CLIP's time with {r['method']} clustering ({r['clustering']:.1f} ms)"
                         + (", where 3x holds here" if r["needed_speedup"] <= 1 else
                            f", where 3x would need the network stages {r['needed_speedup']:.0f}x faster")
                         for r in g))
    anywhere = any(r["needed_speedup"] <= 1 for r in rows)
    return (f"Speed ({model} at random weights, {rows[0]['queries']} SUM-CLIP queries, {result['machine']}, "
            f"{result['date']}, `benchmarks/results/for.json`): " + "; ".join(parts) + ". "
            + ("The paper's 3x holds in at least one of these settings on this CPU." if anywhere else
               "On this CPU the network stages cost most and the paper's 3x holds in none of these settings; it "
               "can only hold where the network runs that much faster than the clustering, as on a GPU with "
               "clustering left on the CPU, which this book did not measure."))
