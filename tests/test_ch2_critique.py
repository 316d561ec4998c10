"""The critique page of chapter 2 states nothing the run does not record (issue 32 item 5).

Every number on book/ch2_critique.md is either a named constant (the paper's, a test's
tolerance, a chapter number) or a value of the chapter's results record, and every sentence
that reads a result off the run is one of CLAIMS, each checked against that record. The
record is the built ``_build/results/ch2.json`` when it is from the current chapter (it has
the fields below), else tests/fixtures/ch2_record.json, a subset of a run of the chapter
(``python -m fgclip run ch2``) written by :func:`subset`.
"""
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "book" / "ch2_critique.md"
FIXTURE = ROOT / "tests" / "fixtures" / "ch2_record.json"
BUILT = ROOT / "_build" / "results" / "ch2.json"

CONSTANTS = {  # named constants on the page: not results of the run
    r"1e-5": "the tolerance of the independent implementation (tests/test_ch2_protocol.py)",
    r"Eq\. 11": "the paper's equation number",
    r"last-3-of-12": "the paper's layer setting for a ViT-B/32",
    r"ViT-B/32": "a model name",
    r"chapters? \d( and \d)?": "chapter numbers",
    r"ch2\.json": "the record's name",
}


def _sentence_of(text: str, phrase: str) -> bool:
    return re.search(phrase, " ".join(text.split()), flags=re.I) is not None


def _verdict(rec: dict, claim: str) -> str:
    found = [v["verdict"] for v in rec["verdicts"] if v["claim"] == claim]
    assert len(found) == 1, f"ch2.json: {len(found)} verdicts with claim {claim!r}"
    return found[0]


def _scale_claims(rec: dict) -> list[str]:
    return [v["verdict"] for v in rec["verdicts"] if re.fullmatch(r"share of words below ε on \w+ foils by CLIPScore "
                                                                  r"quartile", v["claim"])]


CLAIMS = [  # (phrase on the page, whitespace-normalised regex; what the record must say)
    (r"three independent test draws", lambda r: len(r["seeds"]) == 3),
    (r"95% intervals", lambda r: all(v["confidence"] == 0.95 for v in r["verdicts"])),
    (r"chose the last 4 of 4 text layers, that is, all of them",
     lambda r: r["layers"] == "last 4" and r["n_text_layers"] == 4),
    (r"the run chose all 4 of 4", lambda r: r["layers"] == "last 4" and r["n_text_layers"] == 4),
    (r"localisation accuracy is exactly zero in every draw",
     lambda r: r["per_type_la"]["CLIP4DM"]["relation"] == 0.0),
    (r"within-caption AUC there is above one half", lambda r: r["per_type_auc"]["CLIP4DM"]["relation"] > 0.5),
    (r"a shape word in 0\.885 of captions",
     lambda r: round(r["argmin_roles_by_type"]["relation"]["shape"], 3) == 0.885),
    (r"and the relation word in none", lambda r: r["argmin_roles_by_type"]["relation"]["relation/position"] == 0.0),
    (r"position control on the relation slot of the originals comes out below the random content word",
     lambda r: _verdict(r, "CLIP4DM on the relation slot of original captions") == "B better"),
    (r"negative control on the shape slot fails",
     lambda r: _verdict(r, "CLIP4DM on the shape slot of original captions") != "equivalent"
     and not r["controls"][0]["negative_passed"]),
    (r"closing box says the localisation test cannot decide",
     lambda r: r["controls"][0]["conclusion"] == "the test cannot decide here"),
    (r"a wrong image lowers the captions' minimum attribution beyond the declared margin",
     lambda r: _verdict(r, "original captions: min attribution / |ε|") == "B better"),
    (r"the share of words below ε is equivalent to that on the caption's own image",
     lambda r: _verdict(r, "original captions: share of words below ε") == "equivalent"),
    (r"within every foil type, more words fall below ε in the lowest CLIPScore quartile than in the highest",
     lambda r: len(_scale_claims(r)) >= 1 and set(_scale_claims(r)) == {"B better"}),
]
RESULT_WORDS = r"\b(better|worse|fails|passed|fired|cannot decide|equivalent|exactly zero|in none|chose)\b"


def subset(record: dict) -> dict:
    """The fields of a chapter-2 record that the page's claims read."""
    keep = ("seeds", "layers", "n_text_layers", "argmin_roles_by_type")
    return {**{k: record[k] for k in keep},
            "per_type_la": {"CLIP4DM": record["per_type_la"]["CLIP4DM"]},
            "per_type_auc": {"CLIP4DM": record["per_type_auc"]["CLIP4DM"]},
            "controls": [{k: c[k] for k in ("conclusion", "positive_passed", "negative_passed")}
                         for c in record["controls"]],
            "verdicts": [{k: v[k] for k in ("claim", "arms", "verdict", "confidence")} for v in record["verdicts"]]}


def _record() -> dict:
    if BUILT.is_file():
        built = json.loads(BUILT.read_text())
        if "argmin_roles_by_type" in built and "n_text_layers" in built:
            return built
    return json.loads(FIXTURE.read_text())


def _prose(text: str) -> str:
    """The page without code spans, maths, MyST roles and named constants."""
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    text = re.sub(r"\{\w+\}`[^`]*`|`[^`]*`|\$[^$]*\$", " ", text)
    for pattern in CONSTANTS:
        text = re.sub(pattern, " ", text)
    return text


def _numbers(record) -> set[str]:
    """Every number of the record as the page may print it (integers; floats at 1-3 decimals)."""
    out: set[str] = set()

    def walk(x):
        if isinstance(x, bool) or x is None:
            return
        if isinstance(x, (int, float)):
            out.update({f"{x:g}", *(f"{x:.{k}f}" for k in (1, 2, 3))})
            if float(x).is_integer():
                out.add(str(int(x)))
        elif isinstance(x, dict):
            for k, v in x.items():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk(record)
    return out


def test_every_number_on_the_page_is_a_constant_or_in_the_record():
    numbers = re.findall(r"(?<![\w.])\d+(?:\.\d+)?%?", _prose(PAGE.read_text()))
    known = _numbers(_record()) | {"95%"}  # 95%: the verdicts' confidence, checked among CLAIMS
    assert numbers, "the page prints no number: the test would pass vacuously"
    missing = [n for n in numbers if n not in known]
    assert not missing, f"book/ch2_critique.md prints {missing}, neither a named constant nor in ch2.json"


@pytest.mark.parametrize("phrase, check", CLAIMS, ids=[c[0][:40] for c in CLAIMS])
def test_each_claim_is_on_the_page_and_matches_the_record(phrase, check):
    assert _sentence_of(PAGE.read_text(), phrase), f"book/ch2_critique.md no longer says {phrase!r}: drop the claim"
    assert check(_record()), f"book/ch2_critique.md says {phrase!r}, which ch2.json does not"


def test_result_sentences_are_all_checked_claims():
    """A sentence that reads a result off the run (a verdict word in a sentence that names the
    run, the toy CLIP or a number) must contain one of CLAIMS."""
    text = " ".join(_prose(PAGE.read_text()).split())
    sentences = re.split(r"(?<=[.!?])\s+", text)
    loose = [s for s in sentences if re.search(RESULT_WORDS, s) and re.search(r"\brun\b|\btoy CLIP\b|(?<![\w.])\d", s)
             and not any(_sentence_of(s, p) for p, _ in CLAIMS)]
    assert not loose, f"result sentences without a checked claim: {loose}"


def test_the_checks_fail_on_a_record_that_disagrees():
    rec = json.loads(FIXTURE.read_text())
    rec["layers"], rec["argmin_roles_by_type"]["relation"]["shape"] = "last 2", 0.5
    for v in rec["verdicts"]:
        if v["claim"] == "original captions: share of words below ε":
            v["verdict"] = "A better"
    failed = {p for p, check in CLAIMS if not check(rec)}
    assert {r"the run chose all 4 of 4", r"a shape word in 0\.885 of captions",
            r"the share of words below ε is equivalent to that on the caption's own image"} <= failed
    assert "0.885" not in _numbers(rec)
