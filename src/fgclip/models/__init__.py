"""CLIP models: the open_clip factory, toy configs, dense features."""
from .dense import DenseFeatures, encode_image_dense
from .factory import (TOY_MODELS, committed_checkpoint, Clip, create_clip, encode_image_paths,
                      images_to_tensor, load_image_batch, load_toy_checkpoint)

__all__ = ["TOY_MODELS", "committed_checkpoint", "Clip", "DenseFeatures", "create_clip",
           "encode_image_dense", "encode_image_paths", "images_to_tensor", "load_image_batch", "load_toy_checkpoint"]
