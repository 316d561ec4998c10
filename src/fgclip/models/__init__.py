"""CLIP models: the open_clip factory, toy configs, dense features."""
from .dense import DenseFeatures, encode_image_dense
from .factory import TOY_MODELS, committed_checkpoint, Clip, create_clip, images_to_tensor, load_toy_checkpoint
from .images import encode_image_paths, encode_image_rows, load_image_batch, load_images, model_input_batches

__all__ = ["TOY_MODELS", "committed_checkpoint", "Clip", "DenseFeatures", "create_clip",
           "encode_image_dense", "encode_image_paths", "encode_image_rows", "images_to_tensor",
           "load_image_batch", "load_images", "load_toy_checkpoint", "model_input_batches"]
