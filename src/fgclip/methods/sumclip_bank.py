"""Many SUM-CLIP heads at once: H independent heads of :class:`~fgclip.methods.sumclip.SumClipHead`
computed as one batch (Eq. (eq-sumclip-tokens), chapter 3).

Chapter 3 trains many small heads on the same cached images: every arm, learning rate,
fold and seed. Each head is the paper's head; only the arithmetic is grouped. Head h has its
own queries Q_h, decoder, memory projection, U_h and (when ``train_out``) its own copy of W_c;
CLIP's frozen pooling W_q, W_k, W_v and its map's keys and values are shared. So, for a batch
of images every head reads:

* the memory projection of all heads is one matrix product, f (P, C) @ [M_1 .. M_H] (C, H d);
* W U_h for all heads is one product, W (C, C) @ [U_1 .. U_H] (C, H d);
* the attention of the H N tokens over one image's keys is one product per image and
  attention head, with the H heads' tokens side by side as H N queries.

The decoder layers are written out (pre-norm self-attention, cross-attention and a ReLU
feed-forward, as ``nn.TransformerDecoderLayer(norm_first=True, dropout=0)``), with a leading
head dimension on every weight. :meth:`SumClipBank.load_head` and :meth:`SumClipBank.head`
move one head in and out of a :class:`SumClipHead`; ``tests/test_ch3_bank.py`` checks that
the bank computes exactly what its heads compute one by one.

Each head's parameters are their own tensors (``params[name][h]``), so an optimiser can give
every head its own learning rate (one parameter group per head).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from open_clip.modified_resnet import AttentionPool2d
from torch import nn

from .sumclip import PoolMemory, SumClipHead, _check_pool

# (name in the bank, shape without the head dimension as a function of (N, d, C, D), init)
_LAYER_PARAMS = ("sa_in_w", "sa_in_b", "sa_out_w", "sa_out_b", "ca_in_w", "ca_in_b", "ca_out_w", "ca_out_b",
                 "ff1_w", "ff1_b", "ff2_w", "ff2_b", "n1_w", "n1_b", "n2_w", "n2_b", "n3_w", "n3_b")
_TORCH_NAMES = ("self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                "self_attn.out_proj.bias", "multihead_attn.in_proj_weight", "multihead_attn.in_proj_bias",
                "multihead_attn.out_proj.weight", "multihead_attn.out_proj.bias", "linear1.weight",
                "linear1.bias", "linear2.weight", "linear2.bias", "norm1.weight", "norm1.bias",
                "norm2.weight", "norm2.bias", "norm3.weight", "norm3.bias")


def _head_names(n_layers: int, train_out: bool) -> dict[str, str]:
    """bank parameter name -> the same parameter's name in a SumClipHead."""
    names = {"queries": "queries", "mem_w": "memory_proj.weight", "mem_b": "memory_proj.bias",
             "up": "up.weight"}
    for layer in range(n_layers):
        names.update({f"l{layer}.{b}": f"decoder.layers.{layer}.{t}" for b, t in zip(_LAYER_PARAMS, _TORCH_NAMES)})
    if train_out:
        names.update({"out_w": "out_proj.weight", "out_b": "out_proj.bias"})
    return names


class SumClipBank(nn.Module):
    """H SUM-CLIP heads with one setting (``residual``, ``train_out``), each initialised as a
    fresh :class:`SumClipHead` from ``seeds[h]`` would be."""

    def __init__(self, pool: AttentionPool2d, seeds: list[int], n_queries: int = 10, n_layers: int = 1,
                 d_model: int = 128, n_heads: int = 4, residual: bool = True, train_out: bool = False) -> None:
        super().__init__()
        _check_pool(pool)
        if not seeds:
            raise ValueError("a bank needs at least one head (one seed each)")
        self.pool = pool
        for p in pool.parameters():
            p.requires_grad_(False)
        self.kw = dict(n_queries=n_queries, n_layers=n_layers, d_model=d_model, n_heads=n_heads,
                       residual=residual, train_out=train_out)
        self.names = _head_names(n_layers, train_out)
        self.params = nn.ParameterDict({k.replace(".", "_"): nn.ParameterList() for k in self.names})
        for s in seeds:
            torch.manual_seed(s)
            self.load_head(len(self), SumClipHead(pool, **self.kw))

    def __len__(self) -> int:
        return len(self.params["queries"])

    def load_head(self, h: int, head: SumClipHead) -> None:
        """Copy ``head``'s parameters into slot h (h == len(self) appends a head)."""
        state = head.state_dict()
        for name, torch_name in self.names.items():
            value = nn.Parameter(state[torch_name].detach().clone().to(self.pool.c_proj.weight.device))
            plist = self.params[name.replace(".", "_")]
            if h == len(plist):
                plist.append(value)
            else:
                plist[h] = value

    def head(self, h: int) -> SumClipHead:
        """Head h as a standalone :class:`SumClipHead` (a copy)."""
        out = SumClipHead(self.pool, **self.kw)
        state = out.state_dict()
        for name, torch_name in self.names.items():
            state[torch_name] = self.params[name.replace(".", "_")][h].detach().clone()
        out.load_state_dict(state)
        return out

    def head_parameters(self, h: int) -> list[nn.Parameter]:
        """The trainable tensors of head h (for its own optimiser group)."""
        return [plist[h] for plist in self.params.values()]

    def state_of(self, heads: list[int] | None = None) -> list[dict[str, torch.Tensor]]:
        """Detached copies of the heads' parameters (e.g. once per epoch)."""
        heads = range(len(self)) if heads is None else heads
        return [{k: v[h].detach().clone() for k, v in self.params.items()} for h in heads]

    @torch.no_grad()
    def restore(self, h: int, state: dict[str, torch.Tensor]) -> None:
        for k, v in state.items():
            self.params[k][h].copy_(v)

    def _stack(self, name: str) -> torch.Tensor:
        return torch.stack(list(self.params[name.replace(".", "_")]))

    def _attention(self, x: torch.Tensor, kv: torch.Tensor, in_w, in_b, out_w, out_b) -> torch.Tensor:
        """Multi-head attention of queries x (H, B, N, d) over kv (H, B, L, d), per head h."""
        h, b, n, d = x.shape
        heads = self.kw["n_heads"]
        dh = d // heads
        q = torch.baddbmm(in_b[:, None, :d], x.reshape(h, -1, d), in_w[:, :d].transpose(1, 2))
        k = torch.baddbmm(in_b[:, None, d:2 * d], kv.reshape(h, -1, d), in_w[:, d:2 * d].transpose(1, 2))
        v = torch.baddbmm(in_b[:, None, 2 * d:], kv.reshape(h, -1, d), in_w[:, 2 * d:].transpose(1, 2))
        split = lambda t: t.view(h, b, -1, heads, dh).transpose(2, 3)  # noqa: E731  (H, B, heads, L, dh)
        out = F.scaled_dot_product_attention(split(q), split(k), split(v))  # (H, B, heads, N, dh)
        out = out.transpose(2, 3).reshape(h, b * n, d)
        return torch.baddbmm(out_b[:, None], out, out_w.transpose(1, 2)).view(h, b, n, d)

    def refine(self, mem: PoolMemory) -> torch.Tensor:
        """h = Dec(Q_h, f) for every head: (H, B, N, d)."""
        hn, b = len(self), len(mem)
        d = self.kw["d_model"]
        w = self._stack("mem_w")  # (H, d, C)
        memory = (mem.feature_map @ w.reshape(-1, w.shape[-1]).T).view(b, -1, hn, d).permute(2, 0, 1, 3)
        memory = memory + self._stack("mem_b")[:, None, None]  # (H, B, P, d)
        x = self._stack("queries")[:, None].expand(-1, b, -1, -1)  # (H, B, N, d)
        for layer in range(self.kw["n_layers"]):
            p = {n: self._stack(f"l{layer}.{n}") for n in _LAYER_PARAMS}
            norm = lambda t, i: F.layer_norm(t, (d,)) * p[f"n{i}_w"][:, None, None] + p[f"n{i}_b"][:, None, None]  # noqa: E731
            y = norm(x, 1)
            x = x + self._attention(y, y, p["sa_in_w"], p["sa_in_b"], p["sa_out_w"], p["sa_out_b"])
            x = x + self._attention(norm(x, 2), memory, p["ca_in_w"], p["ca_in_b"], p["ca_out_w"], p["ca_out_b"])
            y = norm(x, 3).reshape(hn, -1, d)
            y = torch.baddbmm(p["ff1_b"][:, None], y, p["ff1_w"].transpose(1, 2)).relu()
            x = x + torch.baddbmm(p["ff2_b"][:, None], y, p["ff2_w"].transpose(1, 2)).view(x.shape)
        return x

    def forward(self, mem: PoolMemory) -> tuple[torch.Tensor, torch.Tensor]:
        """L2-normalised embeddings (H, B, N, D) and attention over [self, map] (H, B, N, 1 + P)."""
        pool, hn, b = self.pool, len(self), len(mem)
        delta = self.refine(mem)  # (H, B, N, d)
        n, d = delta.shape[2], delta.shape[3]
        c = pool.q_proj.in_features
        up = self._stack("up")  # (H, C, d)
        w = torch.cat([pool.q_proj.weight, pool.k_proj.weight, pool.v_proj.weight])  # (3C, C)
        wu = (w @ up.permute(1, 0, 2).reshape(c, hn * d)).view(3, c, hn, d).permute(0, 2, 1, 3)  # (3, H, C, d)
        if self.kw["residual"]:
            base = [m[None, :, None] for m in (mem.q_mean, mem.k_mean, mem.v_mean)]  # (1, B, 1, C)
        else:
            pos0 = pool.positional_embedding[0]
            base = [proj(pos0) for proj in (pool.q_proj, pool.k_proj, pool.v_proj)]  # (C,)
        flat = delta.reshape(hn, b * n, d)
        q, k, v = (bs + torch.bmm(flat, wu[i].transpose(1, 2)).view(hn, b, n, c) for i, bs in enumerate(base))
        heads = pool.num_heads
        dh = c // heads
        # the H heads' tokens side by side: (B, heads, H N, dh) against each image's map
        qh = q.permute(1, 0, 2, 3).reshape(b, hn * n, heads, dh).transpose(1, 2) * dh ** -0.5
        ks = k.permute(1, 0, 2, 3).reshape(b, hn * n, heads, dh).transpose(1, 2)
        vs = v.permute(1, 0, 2, 3).reshape(b, hn * n, heads, dh).transpose(1, 2)
        km = mem.k_map.view(b, -1, heads, dh).transpose(1, 2)  # (B, heads, P, dh)
        vm = mem.v_map.view(b, -1, heads, dh).transpose(1, 2)
        logits = torch.cat([(qh * ks).sum(-1, keepdim=True), qh @ km.transpose(-1, -2)], -1)  # (B, heads, HN, 1+P)
        attn = logits.softmax(-1)
        out = attn[..., :1] * vs + attn[..., 1:] @ vm  # (B, heads, HN, dh)
        out = out.transpose(1, 2).reshape(b, hn, n, c).transpose(0, 1).reshape(hn, b * n, c)
        if self.kw["train_out"]:
            emb = torch.baddbmm(self._stack("out_b")[:, None], out, self._stack("out_w").transpose(1, 2))
        else:
            emb = pool.c_proj(out)
        attn = attn.mean(1).view(b, hn, n, -1).transpose(0, 1)  # (H, B, N, 1 + P)
        return F.normalize(emb.view(hn, b, n, -1), dim=-1), attn

