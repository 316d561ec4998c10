"""Chapter 1's training seeds one by one: which seed of which arm scores below a
caption-blind floor, said in a sentence that names it with what is known of its cause.

A seed of a trained arm is *below the floor* when its mean pointing accuracy over the kept
test phrases is below the random point's (the exact expectation, the same for every seed)
or below the caption-blind saliency of the same seed. For each such seed the sentence adds
the same seed's untrained heads (how much its random initialisation already decides where
its maps peak) and, where its curves were recorded, its last validation loss beside the
arm's other seeds'.

Every such seed gets a cause read by one rule (:func:`floor_cause`): an outlier (a margin
below its arm's typical seed against every floor it is below), whose mechanism is read where one
is measured (heads that learned no ranking, word maps on one cell, dead units, a saliency that
failed with it, its validation loss; points that settle on background say where it fails, not
why); or, not an outlier, the arm as trained (its typical seeds clear the floor by less than the
margin; its selection caveats are said with it) or the arm's seed-to-seed spread.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .causes import as_fields, cause_clause, diagnostics_beside, floor_cause, from_fields, loss_rank, settles, span

BACKGROUND = "its points settle on background (why is not read)"  # where an outlier fails, said as one


def below_floor(scores: Mapping[str, np.ndarray], seeds: Sequence[int], arms: Sequence[str],
                random: str = "random point", saliency: str = "caption-blind saliency",
                own: Mapping[str, np.ndarray] | None = None, margin: float | None = None,
                causes: Mapping[str, str] | None = None) -> list[dict]:
    """One record per (arm, seed) below a floor: {"arm", "seed", "accuracy", "random",
    "saliency", "floors": the names of the floors it is below}, and with ``margin`` its
    :func:`floor_cause` ("cause", "cause floor", "others over it", "others range"; an arm in
    ``causes``, a control, adds "known": what its construction removes). ``scores``: arm ->
    (n_seeds, n_kept) per-phrase hits, rows in the order of ``seeds``; ``own``: arm -> its own
    seeds' caption-blind saliency hits, the floor for that arm (else ``scores[saliency]``)."""
    own = own or {}
    missing = [a for a in (*arms, random, saliency) if a not in scores]
    if missing:
        raise KeyError(f"below_floor: no scores for {missing}")
    for a in (*arms, random, saliency):
        if len(scores[a]) != len(seeds):
            raise ValueError(f"below_floor: arm {a!r} has {len(scores[a])} seed rows, seeds has {len(seeds)}")
    rnd = scores[random].mean(axis=1)
    out = []
    for a in arms:
        sal = (own[a] if a in own else scores[saliency]).mean(axis=1)
        name = f"its own {saliency}" if a in own else f"{saliency} of seed"
        acc = scores[a].mean(axis=1)  # (n_seeds,)
        for j, s in enumerate(seeds):
            x = float(acc[j])
            floors = [n for n, f in ((random, rnd[j]), (f"{name} {s}" if a not in own else name, sal[j])) if x < f]
            if floors:
                out.append({"arm": a, "seed": int(s), "accuracy": x, "random": float(rnd[j]),
                            "saliency": float(sal[j]), "floors": floors})
                if margin is not None:
                    c = floor_cause(acc, {random: rnd, name if a in own else f"the {saliency} of their seeds": sal}, j, margin)
                    out[-1] |= as_fields(c) | ({"known": causes[a]} if a in (causes or {}) else {})
    return out


def at_flat_loss(loss: float, flat: float, tol: float = 0.05) -> bool:
    """A seed's validation loss lies within ``tol`` (relative) of ``flat``, the loss of heads
    that score every pair alike (:meth:`~fgclip.studies.maximage.arms.ArmSet.flat_losses`):
    its heads rank a caption's own image no higher than the hardest other, on average."""
    return abs(loss - flat) <= tol * abs(flat)


def arm_diagnostics(curves: Sequence[dict], arm: str) -> dict[int, dict[str, float]]:
    """seed -> its collapse diagnostics on the validation images, as
    :func:`~fgclip.studies.maximage.arms.train_logged` records them ({} if none)."""
    for rec in curves:
        if rec["arm"] == arm:
            return {int(s): c["diagnostics"] for s, c in rec["seeds"].items() if "diagnostics" in c}
    return {}


def last_val_losses(curves: Sequence[dict], arm: str) -> dict[int, float]:
    """seed -> the validation loss at the arm's chosen period (the heads it evaluates), from
    :func:`~fgclip.studies.maximage.arms.train_selected`'s curve records ({} if none)."""
    for rec in curves:
        if rec["arm"] == arm:
            k = rec["chosen_periods"]
            return {int(s): float(c["val"][k - 1]) for s, c in rec["seeds"].items() if len(c["val"]) >= k}
    return {}


def seed_findings(scores: Mapping[str, np.ndarray], seeds: Sequence[int], arms: Sequence[str],
                  curves: Sequence[dict] = (), untrained: str = "untrained heads",
                  off: Mapping[str, np.ndarray] | None = None, own: Mapping[str, np.ndarray] | None = None,
                  causes: Mapping[str, str] | None = None, by: float = 0.05,
                  flat: Mapping[str, float] | None = None, margin: float = 0.05,
                  caveats: Mapping[str, str] | None = None) -> list[str]:
    """One sentence per arm with a seed below a floor (:func:`below_floor`), naming each such
    seed with its accuracy, the floors it is below, the same seed's untrained heads, its
    validation loss beside the arm's other seeds' and, where ``off`` gives them (arm ->
    (n_seeds, n_kept) 0/1, :func:`~fgclip.studies.maximage.evaluation.off_objects`), the share of
    its points off every object beside the arm's other seeds'; or one sentence saying no seed is.
    ``own``: each arm's own saliency (:func:`below_floor`); ``causes``: arm -> a cause known by
    construction (a control), said after its name; each named seed is read by :func:`settles`
    against its arm's seeds above the floors (``by``: the share margin); ``flat``: arm -> the
    loss of heads that score every pair alike, and a named seed whose validation loss sits
    there (:func:`at_flat_loss`) is said to have learned no ranking (its heads collapsed); its
    collapse diagnostics, where ``curves`` recorded them, are set beside its arm's seeds above the
    floors (:func:`diagnostics_beside`). Each named seed ends with its cause (:func:`floor_cause` at ``margin``, :func:`cause_clause`, with
    ``caveats``: arm -> its selection caveat)."""
    own, causes, flat, caveats = own or {}, causes or {}, flat or {}, caveats or {}
    rows = below_floor(scores, seeds, arms, own=own, margin=margin)
    if not rows:
        return [f"no seed of {len(arms)} arms is below the random point or its own seed's caption-blind saliency"]
    out = []
    for arm in dict.fromkeys(r["arm"] for r in rows):
        val, diag = last_val_losses(curves, arm), arm_diagnostics(curves, arm)
        parts = []
        low_seeds = {r["seed"] for r in rows if r["arm"] == arm}
        for r in (r for r in rows if r["arm"] == arm):
            j = list(seeds).index(r["seed"])
            mechanism = []
            bits = [f"{r['accuracy']:.3f}", "below " + " and ".join(
                f"{f} at {r['random'] if f == 'random point' else r['saliency']:.3f}" for f in r["floors"])]
            if untrained in scores and arm != untrained:
                bits.append(f"{'the pretrained CLIP' if 'random-init' in arm else 'its'} untrained heads "
                            f"{scores[untrained][j].mean():.3f}")
            if off is not None and arm in off and len(seeds) > 1:
                share = off[arm].mean(axis=1)  # (n_seeds,)
                low = {x["seed"] for x in rows if x["arm"] == arm}
                up = [float(share[k]) for k, s in enumerate(seeds) if s not in low]  # the arm's seeds above the floors
                bits.append(f"{share[j]:.0%} of its points off every object, "
                            + (f"its seeds above the floors {span(up)}" if up else "no seed of its arm above the floors"))
                if settles(float(share[j]), up, by):
                    mechanism.append(BACKGROUND)
            words, found = diagnostics_beside(r["seed"], diag, low_seeds, by)
            bits += [words] if words else []
            mechanism += found
            if r["seed"] in val and len(val) > 1:
                others = [v for s, v in val.items() if s != r["seed"]]
                bits.append(f"validation loss {val[r['seed']]:.3f}, other seeds {min(others):.3f}-{max(others):.3f}")
                if r["cause"] == "outlier":
                    mechanism.append(loss_rank(val[r["seed"]], others, BACKGROUND in mechanism))
            if r["seed"] in val and arm in flat and at_flat_loss(val[r["seed"]], flat[arm]):
                bits.append(f"its heads collapsed: the validation loss is that of heads scoring every pair alike "
                            f"({flat[arm]:.3f}), so they learned no ranking")
                mechanism.insert(0, "its heads learned no ranking (above)")
            if arm in own and len(seeds) > 2:  # the image head alone: its own saliency against its arm's other seeds'
                sal = own[arm].mean(axis=1)  # (n_seeds,)
                rest = [float(x) for k, x in enumerate(sal) if k != j]
                if sal[j] < float(np.median(rest)) - margin:
                    mechanism.append(f"its own caption-blind saliency failed with it ({sal[j]:.3f}, its arm's other seeds "
                                     f"{min(rest):.3f}-{max(rest):.3f}): its image head misses without the caption too")
            bits.append(cause_clause(from_fields(r), margin, "; ".join(mechanism), caveats.get(arm, ""), causes.get(arm, "")))
            parts.append(f"seed {r['seed']} ({'; '.join(bits)})")
        note = ("" if arm not in causes else f" ({causes[arm]})") + (
            f" (its {'untrained heads are' if arm in own else 'saliency floor and untrained heads are'} the pretrained "
            "CLIP's: this arm's own were not read)" if "random-init" in arm else "")
        out.append(f"{arm}{note}: " + ", ".join(parts))
    return out


def off_object_reading(scores: Mapping[str, np.ndarray], off: Mapping[str, np.ndarray], arms: Sequence[str]) -> dict:
    """Where the misses of trained seeds go, over every (arm, seed) of ``arms``: per seed its
    accuracy, its share of points off every object (on background) and its share on another
    object (a miss inside some object box), and the Pearson correlation across those seeds of
    accuracy with each share. A seed that scores low because its maps peak on background shows
    as a strong negative correlation with the off-object share."""
    rows = [{"arm": a, "seed index": j, "accuracy": float(scores[a][j].mean()), "off objects": float(off[a][j].mean()),
             "other object": float(1 - scores[a][j].mean() - off[a][j].mean())}
            for a in arms for j in range(len(scores[a]))]
    acc = np.array([r["accuracy"] for r in rows])
    corr = {k: float(np.corrcoef(acc, [r[k] for r in rows])[0, 1]) for k in ("off objects", "other object")}
    return {"seeds": rows, "correlation with accuracy": corr, "n": len(rows)}


def off_object_sentence(reading: dict) -> str:
    """:func:`off_object_reading` in one sentence."""
    c, rows = reading["correlation with accuracy"], reading["seeds"]
    off, other = [r["off objects"] for r in rows], [r["other object"] for r in rows]
    return (f"over the {reading['n']} trained seeds of the arms, a seed's pointing accuracy correlates at "
            f"r = {c['off objects']:+.2f} with the share of its points off every object ({span(off)}) "
            f"and at r = {c['other object']:+.2f} with the share on another object ({span(other)})")


def arm_val_losses(curves: Sequence[dict], arm: str) -> dict[int, float]:
    """:func:`last_val_losses` of ``arm`` and of its "<arm>, more seeds" record together."""
    return {**last_val_losses(curves, arm), **last_val_losses(curves, f"{arm}, more seeds")}


def seeds_below_sentence(arm: str, seeds: Sequence[int], hits: np.ndarray, off: np.ndarray,
                         floors: Mapping[str, np.ndarray], by: float = 0.05,
                         curves: Sequence[dict] = (), diagnostics: Mapping[str, np.ndarray] | None = None,
                         margin: float = 0.05) -> tuple[list[dict], str]:
    """Every seed of one ``arm`` ((n_seeds, n_kept) ``hits`` and ``off``-object flags) read
    against each floor in ``floors`` (name -> (n_seeds, n_kept) scores of the same seed: a
    caption-blind pointer repeated, or the seed's own saliency or untrained heads): one record
    per seed below any floor, with its off-object share (and, from ``curves``, its validation
    loss at the chosen period), and a sentence naming them beside the other seeds'. The seeds
    below are said to settle on background only if each is at least ``by`` further off every
    object than every seed above the floors (the rule of :func:`records_below`). ``diagnostics``:
    name -> (n_seeds,) shares per seed (e.g. word pairs peaking on one cell, dead hidden units),
    each low seed's set beside the range of the seeds above the floors. Each named seed gets its
    cause (:func:`floor_cause` at ``margin``), with what was measured of it: a diagnostic at least
    ``by`` above every seed above the floors, or its points settling on background."""
    acc, share = hits.mean(axis=1), off.mean(axis=1)
    means = {name: np.asarray(f, float).mean(axis=1) for name, f in floors.items()}
    if any(len(m) != len(seeds) for m in means.values()) or len(acc) != len(seeds):
        raise ValueError("seeds_below_sentence: every score needs one row per seed")
    val = arm_val_losses(curves, arm)
    rows = [{"arm": arm, "seed": int(s), "accuracy": float(acc[j]), "off objects": float(share[j]),
             "floors": {n: float(m[j]) for n, m in means.items() if acc[j] < m[j]},
             **({"validation loss": val[int(s)]} if int(s) in val else {})}
            for j, s in enumerate(seeds) if any(acc[j] < m[j] for m in means.values())]
    if not rows:
        return rows, (f"none of the {len(seeds)} seeds of {arm} is below {', '.join(floors)} (its seeds "
                      f"{acc.min():.3f}-{acc.max():.3f})")
    low = {r["seed"] for r in rows}
    rest = [float(x) for s, x in zip(seeds, share) if s not in low]
    diag = {n: np.asarray(x, float) for n, x in (diagnostics or {}).items()}
    for r in rows:
        j = list(seeds).index(r["seed"])
        r.update({n: float(x[j]) for n, x in diag.items()})

    def beside(r: dict) -> str:  # each diagnostic of a low seed beside the seeds above the floors
        parts = []
        for n, x in diag.items():
            up = [float(v) for s, v in zip(seeds, x) if s not in low]
            parts.append(f"{n} {r[n]:.0%}" + (f" (seeds above the floors {span(up)})" if up else ""))
        return "".join(f"; {p}" for p in parts)
    for r in rows:
        r["settles on background"] = settles(r["off objects"], rest, by)
        j = list(seeds).index(r["seed"])
        reading = floor_cause(acc, means, j, margin)
        mechanism = [f"{n} {r[n]:.0%}, beyond every seed above the floors" for n, x in diag.items()
                     if settles(r[n], [float(v) for s, v in zip(seeds, x) if s not in low], by)]
        if diag and not mechanism and len(low) < len(seeds):
            mechanism.append(f"neither {' nor '.join(diag)} sets it apart from the seeds above the floors")
        mechanism += [BACKGROUND] if r["settles on background"] else []
        if reading["cause"] == "outlier" and int(r["seed"]) in val and len(val) > 1:
            mechanism.append(loss_rank(val[int(r["seed"])], [v for s, v in val.items() if s != int(r["seed"])],
                                       r["settles on background"]))
        r |= as_fields(reading) | {"cause said": cause_clause(reading, margin, "; ".join(mechanism))}
    named = ", ".join(f"seed {r['seed']} ({r['accuracy']:.3f}, below "
                      + " and ".join(f"{n} {v:.3f}" for n, v in r["floors"].items())
                      + f"; {r['off objects']:.0%} of its points off every object"
                      + (f"; validation loss {r['validation loss']:.3f}" if "validation loss" in r else "") + beside(r)
                      + f"; {r['cause said']})" for r in rows)
    others = f"the seeds above the floors {span(rest)}" if rest else "no seed above the floors"
    rest_val = [v for s, v in val.items() if s not in low]
    if rest_val:
        others += f" (validation loss {min(rest_val):.3f}-{max(rest_val):.3f})"
    on_bg = [str(r["seed"]) for r in rows if r["settles on background"]]
    where = (f"; seed{'s' * (len(on_bg) > 1)} {', '.join(on_bg)} settle{'s' * (len(on_bg) == 1)} on background (at "
             f"least {by * 100:.0f} percentage points more of {'its' if len(on_bg) == 1 else 'their'} points off "
             "every object than any seed above the floors)") if on_bg else ""
    return rows, (f"{len(rows)} of the {len(seeds)} seeds of {arm} below a floor: {named}; {others} off every "
                  f"object{where}")


def records_below(records: Sequence[Mapping], label: str, value: str, floors: Mapping[str, str | float],
                  group: str | None = None, by: float = 0.05, margin: float = 0.05,
                  caveats: Mapping[str, str] | None = None, val: Mapping[str, Mapping[int, float]] | None = None,
                  diag: Mapping[str, Mapping[int, Mapping[str, float]]] | None = None) -> tuple[list[dict], str]:
    """Per-seed table rows (``records``: one dict per arm and seed, as the bias-sweep and
    batch-size tables) whose ``value`` lies below a floor: ``floors`` maps a floor's name to the
    record's column holding it or to one number for every row. ``label`` is a format string
    over a record's fields naming its arm and seed, ``group`` one naming its arm. Where the
    rows carry "off objects", each named seed's share is set beside those of its arm's seeds
    above the floors, and the seed is read by :func:`settles` (the chapter passes its share margin).
    With ``group``, each named seed gets its cause against its arm's seeds (:func:`floor_cause` at
    ``margin``; ``caveats``: an arm's name as ``group`` gives it -> its selection caveat; ``val``:
    that name -> seed -> validation loss at its chosen period, set beside an outlier's; ``diag``:
    that name -> seed -> collapse diagnostics, set beside every named seed by :func:`diagnostics_beside`)."""
    def floor_of(r: Mapping, f: str | float) -> float:  # a floor: the record's column, or one number for every row
        return float(r[f] if isinstance(f, str) else f)

    below = []
    for r in records:
        under = {n: floor_of(r, f) for n, f in floors.items() if float(r[value]) < floor_of(r, f)}
        if under:
            below.append((r, {"seed of": label.format(**r), "value": float(r[value]), "floors": under}))
    if not below:
        return [], f"no seed is below {' or '.join(floors)}"
    low = [r for r, _ in below]
    read = group is not None and all("off objects" in r for r in records)

    def above(r: Mapping) -> list[float]:  # the off-object shares of r's arm's seeds above the floors
        return [float(o["off objects"]) for o in records if all(o is not x for x in low) and group.format(**o) == group.format(**r)]

    def cause(r: Mapping, o: dict) -> str:  # r's place below its floors against its arm's seeds
        if group is None:
            return ""
        arm = [x for x in records if group.format(**x) == group.format(**r)]
        j = next(k for k, x in enumerate(arm) if x is r)
        reading = floor_cause([float(x[value]) for x in arm], {n: [floor_of(x, f) for x in arm] for n, f in floors.items()},
                              j, margin)
        o |= as_fields(reading)
        mechanism = [BACKGROUND] if o.get("settles on background") else []
        mine = {int(x["seed"]) for x in arm}  # the diagnostics of its arm's seeds only (a sweep's replicate is another arm)
        words, found = diagnostics_beside(int(r["seed"]), {s: d for s, d in (diag or {}).get(group.format(**r), {}).items() if s in mine},
                                          {int(x["seed"]) for x in low if group.format(**x) == group.format(**r)}, by)
        o |= {"diagnostics": words.removeprefix("on the validation images ")} if words else {}
        mechanism += found
        losses = (val or {}).get(group.format(**r), {})
        if reading["cause"] == "outlier" and int(r["seed"]) in losses and len(losses) > 1:
            o["validation loss"] = v = losses[int(r["seed"])]
            rest = [x for s, x in losses.items() if s != int(r["seed"])]
            mechanism.append(f"validation loss {v:.3f}, its arm's other seeds {min(rest):.3f}-{max(rest):.3f}: "
                             + loss_rank(v, rest, bool(o.get("settles on background"))))
        return (f"; {words}" if words else "") + "; " + cause_clause(reading, margin, "; ".join(mechanism),
                                                                       (caveats or {}).get(group.format(**r), ""))

    def said(r: Mapping, o: dict) -> str:
        head = f"{o['seed of']} ({o['value']:.3f}, below " + " and ".join(f"{n} {v:.3f}" for n, v in o["floors"].items())
        if not read:
            return head + cause(r, o) + ")"
        up = above(r)
        o["off objects"], o["settles on background"] = float(r["off objects"]), settles(float(r["off objects"]), up, by)
        why = cause(r, o)
        return (head + f"; {o['off objects']:.0%} of its points off every object, its arm's seeds above the floors "
                + (span(up) if up else "none") + why + ")")  # the cause says where it fails
    named = "; ".join(said(r, o) for r, o in below)
    rule = (f" (a seed settles on background when at least {by * 100:.0f} percentage points more of its points are off every "
            "object than of any seed of its arm above the floors; why it does is not established here)" if read else
            "; where their points land was not read")
    return [o for _, o in below], f"{len(below)} below a floor: {named}{rule}"


def sweep_rows(sweep, label: str = "") -> list[dict]:
    """A centre-bias sweep's per-seed rows (``sweep.table``) and its bias-0 replicate's
    (``sweep.replicate_table``), each with an "arm": "bias <b>", "bias 0.0, fresh seeds" for
    the replicate, followed by ``label`` (e.g. ", dot score"); [] for no sweep or an empty one."""
    if sweep is None or sweep.table is None or sweep.table.empty:
        return []
    rep = [] if sweep.replicate_table is None else sweep.replicate_table.to_dict("records")
    return ([{"arm": f"bias {r['train_bias']}{label}", **r} for r in sweep.table.to_dict("records")]
            + [{"arm": f"bias {r['train_bias']}, fresh seeds{label}", **r} for r in rep])


def _floors_in(rows: Sequence[Mapping], floors: Mapping[str, str | float]) -> dict[str, str | float]:
    """The floors of ``floors`` whose column every row has (a number is every row's)."""
    return {n: f for n, f in floors.items() if not isinstance(f, str) or all(f in r for r in rows)}


def bias_and_batch_below(sweep, dot_sweep, batch: Sequence[Mapping], centre: float, random: float,
                         by: float = 0.05, margin: float = 0.05, caveats: Mapping[str, str] | None = None,
                         dot_name: str = "N-Pair, dot score", curves: Sequence[dict] = ()) -> tuple[list[dict], str]:
    """:func:`records_below` over the centre-bias sweeps' rows (:func:`sweep_rows`: the chapter
    seeds and the bias-0 replicate's, each against the centre point of its own world and its own
    caption-blind saliency; the dot-score sweep labelled as such) and the batch-size rows
    (against the chapter test's centre and random points and each seed's own saliency): every
    such seed below a floor, and one sentence; ``by``: how much further off every object a named
    seed must be to be read as settling on background; ``margin``: :func:`floor_cause`'s;
    ``caveats``: a selection's arm name ("trained at bias 0.9", "<dot_name>, trained at bias 0.0",
    "B=8") -> its caveat (:func:`~fgclip.studies.maximage.arms.selection_caveats`); ``curves``: the
    chapter's curve records, whose validation losses are set beside each outlier's."""
    rows = [*sweep_rows(sweep), *sweep_rows(dot_sweep, ", dot score")]
    own, sel = "its own caption-blind saliency", caveats or {}
    names = {r["arm"]: f"{dot_name + ', ' if r['arm'].endswith(', dot score') else ''}trained at bias {r['train_bias']}"
             for r in rows} | {f"B={r['batch_size']}": f"B={r['batch_size']}" for r in batch}  # group -> its selection's name
    arm_caveat = {g: sel.get(n, "") for g, n in names.items()}
    val = {g: arm_val_losses(curves, n) for g, n in names.items()}
    diag = {g: arm_diagnostics(curves, n) for g, n in names.items()}
    bias, bias_text = records_below(rows, "{arm} seed {seed}", "model", _floors_in(rows, {
        "centre point of its world": "centre point", own: "caption-blind saliency"}), "{arm}", by, margin, arm_caveat, val, diag)
    bs, bs_text = records_below(batch, "B={batch_size} seed {seed}", "pointing", _floors_in(batch, {
        "centre point": centre, "random point": random, own: "caption-blind saliency"}), "B={batch_size}", by, margin, arm_caveat,
        val, diag)
    return bias + bs, f"seeds of the centre-bias arms: {bias_text}; of the batch-size arms: {bs_text}"
