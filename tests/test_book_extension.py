"""The book's Sphinx extension (book/_ext/offline_book.py) on hand-made pages: a page keeps the
widget models its displayed views need and no other, loads no widget script when it displays
no widget, and shows the Colab badge from the build. (The built book itself is checked
offline in headless Chromium by test_book_browser.py.)"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from docutils import nodes
from docutils.utils import new_document

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("offline_book", REPO / "book" / "_ext" / "offline_book.py")
ob = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ob)


def model(name: str, **state) -> dict:
    return {"model_name": name, "state": state}


# a VBox of a slider and an output area, each with a layout; and a slider nobody displays
STATE = {
    "box": model("VBoxModel", children=["IPY_MODEL_slider", "IPY_MODEL_out"], layout="IPY_MODEL_l1"),
    "slider": model("IntSliderModel", layout="IPY_MODEL_l2", description="</script>k"),
    "out": model("OutputModel", layout="IPY_MODEL_l3"),
    "l1": model("LayoutModel"), "l2": model("LayoutModel"), "l3": model("LayoutModel"),
    "unused": model("IntSliderModel", layout="IPY_MODEL_l4"), "l4": model("LayoutModel"),
}


def page(views: list[str]) -> tuple[SimpleNamespace, nodes.document]:
    """A fake Sphinx app whose page 'ch' has myst-nb's widget scripts, and the page's doctree."""
    mime = {"version_major": 2, "version_minor": 0, "state": STATE}
    scripts = {
        "ipywidgets_state": (None, {"type": ob.WIDGET_STATE, "body": json.dumps(mime)}),
        "ipywidgets_0": ("https://cdn/require.js", {}), "ipywidgets_1": ("https://cdn/embed.js", {}),
        "other": ("local.js", {}),
    }
    env = SimpleNamespace(docname="ch", nb_metadata={"ch": {"js_files": scripts}})
    doctree = new_document("ch")
    for v in views:
        doctree += nodes.raw(text=f'<script type="{ob.WIDGET_VIEW}">{json.dumps({"model_id": v})}</script>',
                             format="html")
    return SimpleNamespace(env=env, srcdir=str(REPO)), doctree


def test_a_displayed_view_keeps_its_models_and_no_others():
    app, doctree = page(["box"])
    assert ob.displayed_views(doctree) == ["box"]
    ob.drop_unused_widget_state(app, doctree)
    scripts = app.env.nb_metadata["ch"]["js_files"]
    body = scripts["ipywidgets_state"][1]["body"]
    assert "</script>" not in body  # escaped, as myst-nb does, so the script tag stays closed
    assert sorted(json.loads(body)["state"]) == ["box", "l1", "l2", "l3", "out", "slider"]
    assert {"ipywidgets_0", "ipywidgets_1", "other"} <= set(scripts)


def test_no_displayed_view_drops_the_state_and_the_cdn_scripts():
    app, doctree = page([])
    ob.drop_unused_widget_state(app, doctree)
    assert set(app.env.nb_metadata["ch"]["js_files"]) == {"other"}


def test_a_view_of_a_missing_model_is_an_error_naming_page_and_model():
    app, doctree = page(["nosuchmodel"])
    with pytest.raises(ob.ExtensionError, match=r"ch: .*'nosuchmodel'"):
        ob.drop_unused_widget_state(app, doctree)
    with pytest.raises(ob.ExtensionError, match="'l9'"):
        ob.models_in_use({"a": model("VBoxModel", layout="IPY_MODEL_l9")}, ["a"], "p")


def test_the_colab_badge_comes_from_the_build():
    app, doctree = page([])
    doctree += nodes.image(uri=ob.COLAB_BADGE, alt="Open In Colab")
    doctree += nodes.image(uri="https://example.org/other.svg")
    ob.local_colab_badge(app, doctree)
    uris = [i["uri"] for i in doctree.findall(nodes.image)]
    assert uris == ["/book/_static/colab-badge.svg", "https://example.org/other.svg"]
    assert (REPO / uris[0].lstrip("/")).read_text().startswith("<svg")
