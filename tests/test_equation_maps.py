"""From equation to code: every chapter's labelled equations, the functions and tests they
name, and the glued findings its prose cites all exist; chapters stay thin."""
import re
from pathlib import Path

import pytest

from conftest import resolve_dotted

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ["ch1_maximage", "ch2_clip4dm", "ch3_for", "ch4_decoupling"]
MAX_CODE_LINES = 160  # the chapter's own code (:func:`_own_code`): about 150 lines, as d2l's chapters


def _cells(name: str) -> list[tuple[str, str]]:
    """(kind, text) of each py:percent cell after the header."""
    text = (ROOT / "notebooks" / f"{name}.py").read_text()
    out = []
    for chunk in re.split(r"^# %%", text, flags=re.M)[1:]:
        head, _, body = chunk.partition("\n")
        if "[markdown]" in head:
            out.append(("markdown", "\n".join(line[2:] for line in body.splitlines())))
        else:
            out.append(("code", body))
    return out


def _markdown(name: str) -> str:
    return "\n".join(t for kind, t in _cells(name) if kind == "markdown")


def _code(name: str) -> str:
    return "\n".join(t for kind, t in _cells(name) if kind == "code")


def _src_text() -> str:
    return "\n".join(p.read_text() for p in (ROOT / "src" / "fgclip").rglob("*.py"))


CODE_ROLE = r"\{(?:func|class|mod|meth|data|attr|obj)\}`~?(fgclip\.[\w.]+)`"  # a MyST role naming library code


def _labels(text: str) -> list[str]:
    return re.findall(r"^\$\$\s*\((eq-[\w-]+)\)\s*$", text, flags=re.M)


@pytest.mark.parametrize("name", CHAPTERS)
def test_central_equations_are_labelled_and_cited_by_the_code(name):
    labels = _labels(_markdown(name))
    assert labels, f"{name}: no labelled equation ($$ ... $$ (eq-label))"
    src = _src_text()
    uncited = [lab for lab in labels if lab not in src]
    assert not uncited, f"{name}: no docstring in src/ cites {uncited}"
    assert "show_source(" in _code(name), f"{name} never shows a library function's source"


@pytest.mark.parametrize("name", CHAPTERS)
def test_equation_maps_name_functions_and_tests_that_exist(name):
    md = _markdown(name)
    defined = {lab for n in CHAPTERS for lab in _labels(_markdown(n))}
    defined |= {lab for page in (ROOT / "book").glob("*.md") for lab in _labels(page.read_text())}  # e.g. the verdicts page
    for ref in re.findall(r"\{eq\}`([\w-]+)`", md):
        assert ref in defined, f"{name}: {{eq}}`{ref}` has no labelled equation"
    for dotted in re.findall(CODE_ROLE, md):
        assert resolve_dotted(dotted) is not None, f"{name}: {dotted} does not exist"
    tests = re.findall(r"`(tests/test_\w+\.py)::(test_\w+)`", md)
    assert tests, f"{name}: no equation -> function -> test map names a test"
    for path, test in tests:
        assert re.search(rf"^def {test}\(", (ROOT / path).read_text(), flags=re.M), f"{name}: {path}::{test} missing"


def test_book_pages_name_code_that_exists():
    for page in sorted((ROOT / "book").glob("*.md")):
        for dotted in re.findall(CODE_ROLE, page.read_text()):
            assert resolve_dotted(dotted) is not None, f"book/{page.name}: {dotted} does not exist"


@pytest.mark.parametrize("name", CHAPTERS)
def test_glued_findings_are_made_by_the_chapter(name):
    chapter = name.split("_")[0]
    keys = re.findall(r"\{glue:md\}`([\w-]+)`", _markdown(name))
    assert keys, f"{name}: the closing prose glues no finding from the run"
    study = "\n".join(p.read_text() for p in (ROOT / "src" / "fgclip" / "studies").rglob("*.py"))
    code = _code(name) + study  # a finding may be named in the chapter or in its study's findings module
    for key in keys:
        assert key.startswith(f"{chapter}-"), f"{name}: glue key {key} lacks the {chapter}- prefix"
        assert f'"{key[len(chapter) + 1:]}"' in code, f"{name}: no finding named {key[len(chapter) + 1:]!r}"


def _own_code(name: str) -> str:
    """The chapter's own code: every code cell but its parameters (declarations the runner reads)
    and its hidden cells (the Colab set-up and the runner's checks, the same in every chapter)."""
    text = (ROOT / "notebooks" / f"{name}.py").read_text()
    cells = [chunk.partition("\n") for chunk in re.split(r"^# %%", text, flags=re.M)[1:]]
    return "\n".join(body for head, _, body in cells if "[markdown]" not in head
                     and 'tags=["parameters"]' not in head and 'tags=["remove-cell"]' not in head)


@pytest.mark.parametrize("name", CHAPTERS)
def test_chapters_stay_thin(name):
    lines = [line for line in _own_code(name).splitlines() if line.strip() and not line.strip().startswith("#")]
    assert len(lines) <= MAX_CODE_LINES, f"{name}: {len(lines)} lines of code, at most {MAX_CODE_LINES}"
    assert _own_code(name).strip() and len(_own_code(name)) < len(_code(name))  # the set-up cells were found
