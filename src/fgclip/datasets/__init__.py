"""Readers for the real datasets' own file formats (and the toy world's exports of them).

Every reader returns plain dataclass records with boxes as continuous ``(x0, y0, x1, y1)``
pixels (see :mod:`fgclip.datasets.boxes`) and raises :class:`DatasetFormatError` on bad
input, naming the file and the line or field; nothing is skipped silently.
"""
from .boxes import Box, check_box, voc_to_xyxy, xyxy_to_voc
from .coco import CocoObject, CocoRecord, read_coco, read_coco_split
from .errors import DatasetFormatError
from .flickr30k_entities import (FlickrAnnotation, FlickrPhrase, FlickrRecord, FlickrSentence,
                                 parse_sentence, read_annotation, read_flickr30k_entities,
                                 read_flickr30k_entities_image, read_sentences, resolve_phrase)
from .detection import read_detection_split
from .foil import FoilPair, FoilSplit, foil_caption_rows, foil_position, read_foil, read_foil_split
from .voc import VocObject, VocRecord, read_voc, read_voc_annotation, readable_class_name

__all__ = [
    "Box", "CocoObject", "CocoRecord", "DatasetFormatError", "FlickrAnnotation", "FlickrPhrase",
    "FlickrRecord", "FlickrSentence", "FoilPair", "FoilSplit", "VocObject", "VocRecord",
    "check_box", "foil_caption_rows", "foil_position", "parse_sentence", "read_annotation", "read_coco",
    "read_coco_split", "read_detection_split", "read_flickr30k_entities", "read_flickr30k_entities_image", "read_foil",
    "read_foil_split", "read_sentences", "read_voc", "read_voc_annotation", "readable_class_name", "resolve_phrase",
    "voc_to_xyxy", "xyxy_to_voc",
]
