"""The one image loader: geometry stated, sizes kept, bad input named."""
import numpy as np
import pytest
from PIL import Image

from fgclip.models.images import load_images


def test_load_images_as_is_resize_and_crop(tmp_path):
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "a.png")
    wide = np.zeros((6, 12, 3), np.uint8)
    wide[:, :3] = 255  # a white stripe on the left edge: kept by resize, cut away by crop
    Image.fromarray(wide).save(tmp_path / "b.png")
    batch = load_images([tmp_path / "a.png"])
    assert batch.pixels.shape == (1, 8, 8, 3) and batch.geometry == "as is" and batch.original_sizes == [(8, 8)]
    with pytest.raises(ValueError, match="b.png"):
        load_images([tmp_path / "b.png"])
    stretched = load_images([tmp_path / "a.png", tmp_path / "b.png"], size=6)
    assert stretched.pixels.shape == (2, 6, 6, 3) and stretched.original_sizes == [(8, 8), (6, 12)]
    assert stretched.pixels[1, :, 0].min() > 200  # the stripe is still in view
    cropped = load_images([tmp_path / "b.png"], size=6, geometry="crop")
    assert cropped.geometry == "crop" and cropped.pixels[0, :, 0].max() < 50  # the stripe was cut away
    with pytest.raises(ValueError, match="geometry"):
        load_images([tmp_path / "a.png"], size=6, geometry="pad")
    with pytest.raises(FileNotFoundError, match="missing.png"):
        load_images([tmp_path / "missing.png"])
