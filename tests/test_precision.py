"""precision='auto': bf16 exactly where the device runs it natively, fp32 elsewhere.

The capability is faked (the CPU flag reader and the CUDA capability are monkeypatched), so
both branches run on any machine; no test here measures or asserts a speed.
"""
from __future__ import annotations

import warnings

import pytest
import torch

from fgclip import precision as P


@pytest.fixture
def fake(monkeypatch):
    """fake(cpu_flags=..., cuda=(native, name)): pretend to be such a machine."""
    monkeypatch.setattr(P, "_ANNOUNCED", set())

    def _fake(cpu_flags=(), cuda=None):
        monkeypatch.setattr(P, "cpu_flags", lambda: frozenset(cpu_flags))
        if cuda is not None:
            monkeypatch.setattr(P, "cuda_bf16_native", lambda device: cuda)
    return _fake


@pytest.mark.parametrize("flags", [("avx2", "avx512f", "avx512_bf16"), ("avx2", "amx_bf16", "amx_tile")])
def test_auto_chooses_bf16_on_a_cpu_with_native_bf16(fake, flags):
    fake(cpu_flags=flags)
    chosen, reason = P.resolve_precision("auto", "cpu")
    assert chosen == "bf16"
    assert "avx512_bf16" in reason or "amx_bf16" in reason
    assert isinstance(P.autocast_context(torch.device("cpu"), "auto"), torch.autocast)


def test_auto_chooses_fp32_on_an_avx2_only_cpu(fake, capsys):
    fake(cpu_flags=("avx", "avx2", "fma", "avx512f"))  # AVX-512 without its bf16 extension
    chosen, reason = P.resolve_precision("auto", "cpu", announce=True)
    assert chosen == "fp32" and "neither avx512_bf16 nor amx_bf16" in reason
    assert "auto chose fp32" in capsys.readouterr().out  # the run says what it chose, once
    P.resolve_precision("auto", "cpu", announce=True)
    assert capsys.readouterr().out == ""
    ctx = P.autocast_context(torch.device("cpu"), "auto")
    assert not isinstance(ctx, torch.autocast)
    with ctx:
        assert not torch.is_autocast_enabled("cpu")


def test_the_vendor_name_is_not_the_evidence(fake, monkeypatch):
    """Two CPUs both called "AMD EPYC" differ only in their flags; only the flags count."""
    fake(cpu_flags=("avx2",))
    assert P.resolve_precision("auto", "cpu")[0] == "fp32"
    fake(cpu_flags=("avx2", "avx512_bf16"))
    assert P.resolve_precision("auto", "cpu")[0] == "bf16"


@pytest.mark.parametrize("native,chosen", [(True, "bf16"), (False, "fp32")])
def test_auto_on_cuda_follows_the_gpu(fake, native, chosen):
    fake(cpu_flags=(), cuda=(native, "Fake GPU (compute capability 9.0)" if native else "Old GPU (7.0)"))
    got, reason = P.resolve_precision("auto", "cuda:0")
    assert got == chosen and ("Fake GPU" in reason or "Old GPU" in reason)


def test_explicit_bf16_without_native_support_runs_with_a_warning(fake):
    fake(cpu_flags=("avx2",))
    with pytest.warns(RuntimeWarning, match="57x slower"):
        chosen, _ = P.resolve_precision("bf16", "cpu")
    assert chosen == "bf16"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once per process, not at every step
        assert isinstance(P.autocast_context(torch.device("cpu"), "bf16"), torch.autocast)


def test_explicit_bf16_on_native_hardware_and_fp32_anywhere_are_silent(fake):
    fake(cpu_flags=("avx512_bf16",))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert P.resolve_precision("bf16", "cpu")[0] == "bf16"
        fake(cpu_flags=())
        assert P.resolve_precision("fp32", "cpu")[0] == "fp32"


def test_unknown_precision_names_the_parameter():
    with pytest.raises(ValueError, match="precision must be one of"):
        P.resolve_precision("fp16", "cpu")
    assert P.check_precision("auto") == "auto"


def test_the_real_flag_reader_agrees_with_torch_on_this_machine():
    """Not faked: the flags read here are consistent with torch's own view of the CPU."""
    flags = P.cpu_flags()
    cap = P.cpu_capability()
    assert cap["native_bf16_flags"] == [f for f in P.NATIVE_BF16_CPU_FLAGS if f in flags]
    if cap["torch_cpu_capability"] == "AVX512" and "avx512_bf16" in flags:
        assert P.resolve_precision("auto", "cpu")[0] == "bf16"
    if not cap["native_bf16_flags"]:
        assert P.resolve_precision("auto", "cpu")[0] == "fp32"


def test_pretraining_records_what_auto_chose(fake, tmp_path):
    from fgclip.train import PretrainConfig, train
    fake(cpu_flags=("avx2",))
    assert PretrainConfig().precision == "auto"
    out = train(PretrainConfig(out_dir=str(tmp_path), n_train=16, batch_size=8, epochs=1, n_val=8, n_test=8,
                               warmup_steps=1, cache_dir=None, log_every=1))
    assert out["precision"]["requested"] == "auto" and out["precision"]["chosen"] == "fp32"
    assert "neither" in out["precision"]["reason"]
    shipped = torch.load(tmp_path / "toy-vit.pt", map_location="cpu", weights_only=False)
    assert shipped["precision"]["chosen"] == "fp32"
    assert "torch_cpu_capability" in shipped["precision"]
