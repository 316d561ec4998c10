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


def _photos(tmp_path):
    rng = np.random.default_rng(0)
    paths = []
    for i, shape in enumerate([(16, 16, 3), (16, 16, 3), (10, 20, 3)]):
        Image.fromarray(rng.integers(0, 255, shape, dtype=np.uint8)).save(tmp_path / f"{i}.png")
        paths.append(str(tmp_path / f"{i}.png"))
    return paths


def test_model_input_batches_from_pixels_inputs_and_files(tmp_path):
    import torch

    from fgclip.models import create_clip, images_to_tensor, load_image_batch
    from fgclip.models.images import model_input_batches

    clip = create_clip("toy-vit", pretrained=None)
    s = clip.image_size
    pixels = np.random.default_rng(1).integers(0, 255, (5, 16, 16, 3), dtype=np.uint8)
    from_pixels = list(model_input_batches(clip, pixels, batch_size=2))
    assert [len(x) for x in from_pixels] == [2, 2, 1] and from_pixels[0].shape[1:] == (3, s, s)
    torch.testing.assert_close(torch.cat(from_pixels), images_to_tensor(torch.from_numpy(pixels), clip))
    inputs = torch.cat(from_pixels)
    assert torch.equal(torch.cat(list(model_input_batches(clip, inputs, batch_size=3))), inputs)
    paths = _photos(tmp_path)
    asked = [paths[2], paths[0], paths[2]]  # duplicates keep their rows
    by_rule = torch.cat(list(model_input_batches(clip, asked, batch_size=3)))
    _, want, index = load_image_batch(asked, clip)
    assert torch.equal(by_rule, want[index])
    by_transform = torch.cat(list(model_input_batches(clip, asked, batch_size=2, transform=clip.preprocess)))
    assert by_transform.shape == (3, 3, s, s) and torch.equal(by_transform[0], by_transform[2])
    with pytest.raises(ValueError, match="uint8"):
        next(model_input_batches(clip, pixels.astype(np.float32)))
    with pytest.raises(ValueError, match=r"\(N, 3, S, S\)"):
        next(model_input_batches(clip, inputs[:, :2]))
    with pytest.raises(FileNotFoundError, match="gone.png"):
        next(model_input_batches(clip, [str(tmp_path / "gone.png")], transform=clip.preprocess))
    with pytest.raises(ValueError, match="batch_size"):
        next(model_input_batches(clip, pixels, batch_size=0))


def test_encode_image_rows_stacks_named_rows_whatever_the_batch_size():
    import torch

    from fgclip.models import create_clip, encode_image_rows

    torch.manual_seed(0)
    clip = create_clip("toy-rn", pretrained=None)
    pixels = np.random.default_rng(2).integers(0, 255, (5, 16, 16, 3), dtype=np.uint8)

    def two_rows(x):
        f = clip.model.encode_image(x)
        return {"f": f, "norm": f.norm(dim=-1)}

    one = encode_image_rows(clip, pixels, two_rows, batch_size=5)
    many = encode_image_rows(clip, pixels, two_rows, batch_size=2)
    assert one["f"].shape == (5, clip.model.visual.output_dim) and one["norm"].shape == (5,)
    torch.testing.assert_close(one["f"], many["f"], rtol=1e-5, atol=1e-6)
    assert not one["f"].requires_grad  # the frozen model: no graph kept
    with pytest.raises(ValueError, match="no images"):
        encode_image_rows(clip, pixels[:0], two_rows)
