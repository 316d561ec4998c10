"""A Sphinx extension of this book (_config.yml, ``local_extensions``): pages that need no network.

MathJax is served from the build by the ``sphinx-mathjax-offline`` package (_config.yml). This
extension does the rest, on each page's doctree as it is read:

- **The Colab badge.** Each chapter opens with the "Open in Colab" badge, an image hosted by
  Colab; the page shows ``book/_static/colab-badge.svg`` in its place (the link is unchanged),
  so the badge renders offline too.
- **Widget state.** nbclient stores in the executed notebook the state of every widget the
  kernel created, displayed or not, and myst-nb embeds that state in the page and loads
  require.js and the widget manager from a CDN to show it. The static book
  (``FGCLIP_STATIC_WIDGETS=1``) creates controls but displays no widget, so the page keeps
  only the models a displayed widget view refers to, with the models those refer to, and
  loads no widget script at all when none is left.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Iterable

from docutils import nodes
from sphinx.errors import ExtensionError

COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
LOCAL_BADGE = Path(__file__).resolve().parents[1] / "_static" / "colab-badge.svg"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# myst-nb's keys for a page's scripts: the embedded state, then the CDN scripts that read it
STATE_KEY = "ipywidgets_state"
SCRIPT_KEY = re.compile(r"ipywidgets_\d+")
MODEL_REF = re.compile(r"IPY_MODEL_([0-9A-Za-z_-]+)")
VIEW_SCRIPT = re.compile(r'<script type="' + re.escape(WIDGET_VIEW) + r'">(.*?)</script>', re.S)


def models_in_use(state: dict, views: Iterable[str], page: str = "") -> set[str]:
    """The model ids the displayed views need: the views' models and every model they refer
    to (``"IPY_MODEL_<id>"`` in a model's state), transitively. A reference to a model that the
    state does not hold is an error naming the page and the model."""
    needed, todo = set(), list(views)
    while todo:
        model = todo.pop()
        if model in needed:
            continue
        if model not in state:
            raise ExtensionError(f"{page or 'a page'}: a widget refers to model {model!r}, "
                                 "which is not in the notebook's widget state")
        needed.add(model)
        todo += MODEL_REF.findall(json.dumps(state[model].get("state", {})))
    return needed


def prune_widget_state(mime: dict, views: Iterable[str], page: str = "") -> dict:
    """``mime`` (the notebook's widget-state metadata) keeping only the models in use."""
    state = mime.get("state")
    if not isinstance(state, dict):
        raise ExtensionError(f"{page or 'a page'}: the notebook's widget state has no 'state' mapping")
    keep = models_in_use(state, views, page)
    return {**mime, "state": {k: v for k, v in state.items() if k in keep}}


def displayed_views(doctree: nodes.Node) -> list[str]:
    """The model id of every widget view that the page displays (myst-nb writes each as a
    raw-HTML ``<script>`` holding ``{"model_id": ...}``)."""
    views = []
    for raw in doctree.findall(nodes.raw):
        for body in VIEW_SCRIPT.findall(raw.astext()):
            views.append(json.loads(body)["model_id"])
    return views


def page_scripts(env, docname: str) -> dict:
    """myst-nb's record of the scripts a page loads (key -> (uri, attributes)), or {}."""
    return getattr(env, "nb_metadata", {}).get(docname, {}).get("js_files", {})


def drop_unused_widget_state(app, doctree: nodes.document) -> None:
    docname = app.env.docname
    scripts = page_scripts(app.env, docname)
    if STATE_KEY not in scripts:
        return
    uri, attributes = scripts[STATE_KEY]
    pruned = prune_widget_state(json.loads(attributes["body"]), displayed_views(doctree), docname)
    if pruned["state"]:
        body = json.dumps(pruned).replace("</script>", r"<\/script>")  # as myst-nb escapes it
        scripts[STATE_KEY] = (uri, {**attributes, "body": body})
        return
    for key in [k for k in scripts if k == STATE_KEY or SCRIPT_KEY.fullmatch(k)]:
        del scripts[key]


def local_colab_badge(app, doctree: nodes.document) -> None:
    if not LOCAL_BADGE.is_file():
        raise ExtensionError(f"the local Colab badge {LOCAL_BADGE} is missing")
    for image in doctree.findall(nodes.image):
        if image.get("uri") == COLAB_BADGE:
            # a leading "/" makes Sphinx read the path from the source folder and copy the file
            image["uri"] = "/" + Path(os.path.relpath(LOCAL_BADGE, app.srcdir)).as_posix()


def setup(app):
    # before Sphinx's image collector (priority 500) records the page's images
    app.connect("doctree-read", local_colab_badge, priority=400)
    app.connect("doctree-read", drop_unused_widget_state)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
