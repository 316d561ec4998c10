"""Flickr30K Entities reader: ``Sentences/<id>.txt`` markup and ``Annotations/<id>.xml`` boxes.

A sentence line marks each phrase as ``[/EN#<entity id>/<type>[/<type>...] words]``,
e.g. ``[/EN#18/people A man] in [/EN#19/clothing a blue shirt] .``; words are the
whitespace tokens of the line with the markup removed, and a phrase's ``first_word``
indexes that list. Phrases do not nest.

An annotation ``<object>`` holds one or more ``<name>`` entity ids and either a
``<bndbox>`` (1-based inclusive, converted as in :mod:`fgclip.datasets.boxes`) or the
flags ``<nobndbox>``/``<scene>``. An entity may have several boxes (``two men``).

Phrases without a box are kept, with ``boxes == []`` and ``box_status`` saying why:
``"box"`` (has boxes), ``"notvisual"`` (type notvisual, as ``/EN#0/notvisual``),
``"scene"`` (scene=1 in the XML), ``"nobox"`` (nobndbox=1) or ``"missing"`` (the entity id
appears nowhere in the XML). ``"unresolved"`` means the sentence was parsed alone.
"""
from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, replace
from pathlib import Path

from ._files import find_image, read_id_list, require_file
from ._xml import image_size, int_of, parse_xml, voc_box
from .boxes import Box
from .errors import DatasetFormatError

_TAG = re.compile(r"\[/EN#(\d+)((?:/[A-Za-z_]+)+)")


@dataclass
class FlickrPhrase:
    text: str
    first_word: int
    entity_id: int
    types: tuple[str, ...]
    boxes: list[Box] = field(default_factory=list)
    box_status: str = "unresolved"

    @property
    def last_word(self) -> int:
        return self.first_word + len(self.text.split()) - 1


@dataclass
class FlickrSentence:
    text: str  # the caption without markup, words joined by single spaces
    phrases: list[FlickrPhrase] = field(default_factory=list)


@dataclass
class FlickrAnnotation:
    width: int
    height: int
    depth: int
    boxes: dict[int, list[Box]] = field(default_factory=dict)
    no_box: set[int] = field(default_factory=set)
    scene: set[int] = field(default_factory=set)
    filename: str | None = None  # the image file name, when the XML gives one


@dataclass
class FlickrRecord:
    image_id: str
    image_path: Path
    width: int
    height: int
    sentences: list[FlickrSentence]
    annotation: FlickrAnnotation


def _open_tag(token: str, bad) -> tuple[int, tuple[str, ...]]:
    """Entity id and types of an opening token such as ``[/EN#18/people``."""
    if token.endswith("]"):
        raise bad(f"empty phrase {token!r}")
    m = _TAG.fullmatch(token)
    if m is None:
        raise bad(f"bad entity tag {token!r}: expected [/EN#<id>/<type>")
    return int(m[1]), tuple(m[2].split("/")[1:])


def parse_sentence(line: str, path: str | os.PathLike = "<string>",
                   line_no: int | None = None) -> FlickrSentence:
    """Parse one marked-up sentence; errors name ``path`` and ``line_no``."""
    def bad(msg: str) -> DatasetFormatError:
        return DatasetFormatError(path, msg, line=line_no)

    words: list[str] = []
    phrases: list[FlickrPhrase] = []
    current: tuple[int, tuple[str, ...], int] | None = None  # entity, types, first word
    for token in line.split():
        if token.startswith("["):
            if current is not None:
                raise bad(f"unbalanced brackets: {token!r} opens a phrase inside a phrase")
            current = (*_open_tag(token, bad), len(words))
            continue
        closes = token.endswith("]")
        word = token[:-1] if closes else token
        if "[" in word or "]" in word or not word:
            raise bad(f"unbalanced brackets: stray bracket in token {token!r}")
        if closes and current is None:
            raise bad(f"unbalanced brackets: {token!r} closes no phrase")
        words.append(word)
        if closes:
            entity, types, first = current
            phrases.append(FlickrPhrase(" ".join(words[first:]), first, entity, types))
            current = None
    if current is not None:
        raise bad("unbalanced brackets: phrase not closed at end of line")
    if not words:
        raise bad("empty sentence")
    return FlickrSentence(" ".join(words), phrases)


def read_sentences(path: str | os.PathLike) -> list[FlickrSentence]:
    """Every line of a Sentences file (a blank line is an error)."""
    path = require_file(path, "Sentences file")
    lines = path.read_text(encoding="utf-8").splitlines()
    return [parse_sentence(line, path, i) for i, line in enumerate(lines, start=1)]


def _entity_ids(obj: ET.Element, path: Path, where: str) -> list[int]:
    names = obj.findall("name")
    if not names:
        raise DatasetFormatError(path, "missing field", field=f"{where}/name")
    ids = []
    for k, name in enumerate(names):
        text = (name.text or "").strip()
        if not text.isdigit():
            raise DatasetFormatError(path, f"entity id {text!r} is not a non-negative integer",
                                     field=f"{where}/name[{k}]")
        ids.append(int(text))
    return ids


def _add_object(ann: FlickrAnnotation, obj: ET.Element, path: Path, where: str,
                tolerance: float) -> None:
    ids = _entity_ids(obj, path, where)
    if obj.find("bndbox") is not None:
        box = voc_box(obj, path, where, ann.width, ann.height, tolerance)
        for i in ids:
            ann.boxes.setdefault(i, []).append(box)
        return
    no_box = int_of(obj, "nobndbox", path, where, default=0) > 0
    scene = int_of(obj, "scene", path, where, default=0) > 0
    if not (no_box or scene):
        raise DatasetFormatError(path, "object has no bndbox and neither nobndbox nor scene "
                                 "set", field=f"{where}/bndbox")
    if no_box:
        ann.no_box.update(ids)
    if scene:
        ann.scene.update(ids)


def read_annotation(path: str | os.PathLike, box_tolerance: float = 1.0) -> FlickrAnnotation:
    """One Annotations XML file: boxes and box-less flags per entity id."""
    path = Path(path)
    root = parse_xml(path)
    ann = FlickrAnnotation(*image_size(root, path))
    ann.filename = (root.findtext("filename") or "").strip() or None
    for k, obj in enumerate(root.findall("object")):
        _add_object(ann, obj, path, f"object[{k}]", box_tolerance)
    return ann


def resolve_phrase(phrase: FlickrPhrase, ann: FlickrAnnotation) -> FlickrPhrase:
    """A copy of ``phrase`` with its boxes and ``box_status`` looked up in ``ann``."""
    boxes = list(ann.boxes.get(phrase.entity_id, []))
    if boxes:
        status = "box"
    elif "notvisual" in phrase.types:
        status = "notvisual"
    elif phrase.entity_id in ann.scene:
        status = "scene"
    elif phrase.entity_id in ann.no_box:
        status = "nobox"
    else:
        status = "missing"
    return replace(phrase, boxes=boxes, box_status=status)


def read_flickr30k_entities_image(root: str | os.PathLike, image_id: str, *,
                                  check_images: bool = True,
                                  box_tolerance: float = 1.0) -> FlickrRecord:
    """Sentences, annotation and image path of one image, phrases resolved to boxes."""
    root = Path(root)
    xml_path = root / "Annotations" / f"{image_id}.xml"
    ann = read_annotation(xml_path, box_tolerance)
    sentences = [FlickrSentence(s.text, [resolve_phrase(p, ann) for p in s.phrases])
                 for s in read_sentences(root / "Sentences" / f"{image_id}.txt")]
    image = find_image(root / "flickr30k-images", image_id, ann.filename, check_images,
                       xml_path, "filename")
    return FlickrRecord(image_id, image, ann.width, ann.height, sentences, ann)


def read_flickr30k_entities(root: str | os.PathLike, split: str, *, check_images: bool = True,
                            box_tolerance: float = 1.0) -> list[FlickrRecord]:
    """Every image listed in ``<root>/<split>.txt``, in list order."""
    ids = read_id_list(Path(root) / f"{split}.txt", "split list")
    return [read_flickr30k_entities_image(root, i, check_images=check_images,
                                          box_tolerance=box_tolerance) for i in ids]
