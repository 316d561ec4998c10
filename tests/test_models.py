import pytest
import torch

from fgclip.models import TOY_MODELS, create_clip, encode_image_dense, images_to_tensor
from fgclip.train import save_atomic
from fgclip.train.pretrain import PretrainConfig, _state, export_fp16
from fgclip.train.fast import make_optimizer


@pytest.fixture(scope="module", params=TOY_MODELS)
def clip(request):
    torch.manual_seed(0)
    return create_clip(request.param, pretrained=None)


def test_toy_configs_registered():
    assert {"toy-vit", "toy-rn"} <= set(TOY_MODELS)


def test_dense_shapes_and_pooled_equals_encode_image(clip):
    x = torch.randn(2, 3, clip.image_size, clip.image_size)
    with torch.no_grad():
        out = encode_image_dense(clip.model, x)
        ref = clip.model.encode_image(x)
    d = clip.model.text_projection.shape[1]
    assert out.pooled.shape == (2, d) and out.dense.shape[:2] == (2, d)
    assert out.dense.shape[2:] == out.feature_map.shape[2:] and out.dense.shape[-1] >= 4
    torch.testing.assert_close(out.pooled, ref, rtol=0, atol=1e-6)


def test_vit_dense_token_projection_matches_open_clip_tokens():
    clip = create_clip("toy-vit", pretrained=None)
    visual = clip.model.visual
    x = torch.randn(1, 3, 64, 64)
    visual.output_tokens = True
    try:
        with torch.no_grad():
            _, tokens = visual(x)  # (1, 64, width) after ln_post
    finally:
        visual.output_tokens = False
    with torch.no_grad():
        out = encode_image_dense(clip.model, x)
    expected = (tokens @ visual.proj).transpose(1, 2).reshape(out.dense.shape)
    torch.testing.assert_close(out.dense, expected)


def test_resnet_dense_is_the_value_path_of_attention_pooling():
    """Spatially constant features and zero positional embeddings make every key equal,
    so attention pooling returns exactly the value path, which dense must reproduce."""
    clip = create_clip("toy-rn", pretrained=None)
    visual = clip.model.visual
    with torch.no_grad():
        visual.attnpool.positional_embedding.zero_()
        fmap = torch.randn(2, visual.attnpool.k_proj.in_features, 1, 1).expand(-1, -1, 4, 4)
        pooled = visual.attnpool(fmap.contiguous())
        flat = fmap.flatten(2).transpose(1, 2)
        dense = visual.attnpool.c_proj(visual.attnpool.v_proj(flat))  # (2, 16, D)
    torch.testing.assert_close(pooled, dense[:, 0], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(dense[:, 5], dense[:, 0])


def test_images_to_tensor_normalises_and_resizes():
    clip = create_clip("toy-rn", pretrained=None)  # 128 px input
    imgs = torch.full((2, 64, 64, 3), 255, dtype=torch.uint8)
    x = images_to_tensor(imgs, clip)
    mean, std = clip.mean_std
    assert x.shape == (2, 3, 128, 128)
    torch.testing.assert_close(x[0, :, 0, 0], ((1 - mean) / std).flatten())


def test_checkpoint_roundtrip_through_factory(tmp_path):
    torch.manual_seed(1)
    clip = create_clip("toy-vit", pretrained=None)
    cfg = PretrainConfig()
    opt = make_optimizer(clip.model, 1e-3, 0.1, torch.device("cpu"))
    path = export_fp16(_state(clip.model, opt, cfg, 0, []), {"x": 1}, "cmd", tmp_path / "t.pt")
    loaded = create_clip("toy-vit", pretrained=str(path))
    assert loaded.checkpoint_info["command"] == "cmd" and loaded.checkpoint_info["metrics"] == {"x": 1}
    assert "state_dict" not in loaded.checkpoint_info
    assert clip.checkpoint_info is None  # random init has no checkpoint
    for (k, a), (_, b) in zip(clip.model.state_dict().items(), loaded.model.state_dict().items()):
        torch.testing.assert_close(a.half().float(), b, msg=k)


def test_factory_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.pt"):
        create_clip("toy-vit", pretrained=str(tmp_path / "nope.pt"))
    save_atomic({"state_dict": {}}, tmp_path / "bad.pt")
    with pytest.raises(KeyError, match="model_name"):
        create_clip("toy-vit", pretrained=str(tmp_path / "bad.pt"))
    save_atomic({"model_name": "toy-rn", "state_dict": {}}, tmp_path / "rn.pt")
    with pytest.raises(ValueError, match="toy-rn"):
        create_clip("toy-vit", pretrained=str(tmp_path / "rn.pt"))


def test_collect_rows_fills_preallocated_tensors_and_checks_the_count():
    from fgclip.models.dense import collect_rows

    parts = [{"a": torch.arange(3.0)[:, None], "b": torch.ones(3, 2, dtype=torch.long)},
             {"a": torch.arange(3.0, 5.0)[:, None], "b": torch.zeros(2, 2, dtype=torch.long)}]
    out = collect_rows(5, iter(parts))
    torch.testing.assert_close(out["a"], torch.cat([p["a"] for p in parts]))
    assert out["b"].dtype == torch.long and out["b"].sum() == 6
    with pytest.raises(ValueError, match="gave 3 rows, expected 4"):
        collect_rows(4, iter(parts[:1]))
    with pytest.raises(ValueError, match="do not fill 4 rows"):
        collect_rows(4, iter(parts))
