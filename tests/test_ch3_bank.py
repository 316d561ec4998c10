"""Chapter 3's bank of SUM-CLIP heads computes what its heads compute one by one."""
import pytest
import torch
from open_clip.modified_resnet import AttentionPool2d

from fgclip.methods.sumclip import SumClipHead, pool_memory
from fgclip.methods.sumclip_bank import SumClipBank


def _pool():
    torch.manual_seed(0)
    return AttentionPool2d(spacial_dim=3, embed_dim=32, num_heads=4, output_dim=16).eval()


@pytest.mark.parametrize("residual,train_out", [(False, True), (True, False), (False, False)])
def test_bank_equals_its_heads_one_by_one(residual, train_out):
    pool = _pool()
    kw = dict(n_queries=3, n_layers=2, d_model=8, n_heads=2, residual=residual, train_out=train_out)
    bank = SumClipBank(pool, seeds=[0, 1, 2], **kw)
    with torch.no_grad():  # move U off zero so the decoder matters
        for p in bank.params["up"]:
            p.normal_(std=0.3)
    mem = pool_memory(pool, torch.randn(5, 32, 3, 3))
    emb, attn = bank(mem)
    assert emb.shape == (3, 5, 3, 16) and attn.shape == (3, 5, 3, 10)
    for h in range(3):
        e, a = bank.head(h)(mem)
        torch.testing.assert_close(emb[h], e, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(attn[h], a, rtol=1e-4, atol=1e-5)


def test_bank_heads_start_as_fresh_heads_of_their_seeds_and_train_apart():
    pool = _pool()
    bank = SumClipBank(pool, seeds=[3, 4], n_queries=2, d_model=8, n_heads=2, residual=False, train_out=True)
    torch.manual_seed(3)
    fresh = SumClipHead(pool, n_queries=2, d_model=8, n_heads=2, residual=False, train_out=True)
    torch.testing.assert_close(bank.head(0).queries, fresh.queries)
    mem = pool_memory(pool, torch.randn(4, 32, 3, 3))
    emb, _ = bank(mem)
    emb[0].sum().backward()  # a loss on head 0 alone
    assert bank.params["queries"][0].grad is not None
    assert bank.params["queries"][1].grad is None or bank.params["queries"][1].grad.abs().sum() == 0
