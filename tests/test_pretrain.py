"""The toy-CLIP pretraining recipe: resume after SIGKILL, DDP == single process, fast path."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from fgclip.train import PretrainConfig, load_checkpoint, train
from fgclip.train.pretrain import batch_indices, lr_at
from fgclip.train.toy_data import build_caption_cache
from fgclip.train.distributed import DistInfo

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "data_scripts" / "pretrain_toy_clip.py"
# --threads 1: the script's default is the machine's cores split over its processes, which
# beside the other test process oversubscribes the cores (the resume test: 42 s alone, 171 s so)
SMALL = ["--n-train", "64", "--batch-size", "16", "--n-val", "32", "--n-test", "32", "--warmup-steps", "2",
         "--precision", "fp32", "--cache-dir", "none", "--log-every", "1", "--threads", "1"]


def _env():
    env = dict(os.environ, TESTING="1", OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _run(args, **kw):
    return subprocess.run([sys.executable, str(SCRIPT), *args], env=_env(), check=True,
                          capture_output=True, text=True, timeout=300, **kw)


def test_resume_after_kill_gives_the_same_model(tmp_path):
    # 48 steps, a checkpoint every 4 (each a 119 MB write with fsync)
    args = SMALL + ["--epochs", "12", "--ckpt-every", "4"]
    _run(args + ["--out-dir", str(tmp_path / "a")])
    proc = subprocess.Popen([sys.executable, str(SCRIPT), *args, "--out-dir", str(tmp_path / "b")],
                            env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    last = tmp_path / "b" / "last.pt"
    deadline, seen = time.time() + 240, None
    while time.time() < deadline and proc.poll() is None:
        stamp = last.stat().st_mtime_ns if last.is_file() else None
        if stamp != seen:  # load only a checkpoint that changed: polling must not eat the run's core
            seen = stamp
            if load_checkpoint(last)["global_step"] >= 8:
                break
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL, "the run finished before it could be killed"
    killed_at = load_checkpoint(last)["global_step"]
    assert 8 <= killed_at < 48
    assert not (tmp_path / "b" / "toy-vit.pt").exists()
    _run(args + ["--out-dir", str(tmp_path / "b")])
    a = load_checkpoint(tmp_path / "a" / "last.pt")
    b = load_checkpoint(tmp_path / "b" / "last.pt")
    assert a["global_step"] == b["global_step"] == 48
    losses = lambda c: [h["loss"] for h in c["history"] if "loss" in h]
    assert losses(b)[-10:] == pytest.approx(losses(a)[-10:], rel=1e-5)
    for k in a["state_dict"]:
        torch.testing.assert_close(a["state_dict"][k], b["state_dict"][k], msg=k)
    shipped = load_checkpoint(tmp_path / "b" / "toy-vit.pt")
    assert shipped["state_dict"]["logit_scale"].dtype == torch.float16
    assert "pretrain_toy_clip.py" in shipped["command"] and "i2t_R@1" in shipped["metrics"]


def test_ddp_two_processes_match_single_process(tmp_path):
    args = SMALL + ["--epochs", "1", "--ckpt-every", "1"]  # 4 steps of global batch 16
    _run(args + ["--out-dir", str(tmp_path / "single")])
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           str(SCRIPT), *args, "--out-dir", str(tmp_path / "ddp")]
    subprocess.run(cmd, env=_env(), check=True, capture_output=True, text=True, timeout=300)
    single = load_checkpoint(tmp_path / "single" / "last.pt")
    ddp = load_checkpoint(tmp_path / "ddp" / "last.pt")
    ls = [h["loss"] for h in single["history"]]
    ld = [h["loss"] for h in ddp["history"]]
    assert len(ls) == len(ld) == 4
    assert ld == pytest.approx(ls, rel=1e-4)
    assert ls[-1] < ls[0]  # it trains
    for k in single["state_dict"]:
        torch.testing.assert_close(ddp["state_dict"][k], single["state_dict"][k],
                                   rtol=1e-3, atol=1e-4, msg=k)


def test_ranks_split_the_global_batch():
    from fgclip.models import create_clip
    cfg = PretrainConfig(n_train=40, batch_size=8)
    data = build_caption_cache(__import__("fgclip.toyworld", fromlist=["x"]).ToyWorldConfig(),
                               40, 0, "train", create_clip("toy-vit", pretrained=None).tokenizer)
    full_rows, full_slots = batch_indices(cfg, data, 0, 1, DistInfo())
    parts = [batch_indices(cfg, data, 0, 1, DistInfo(rank=r, world_size=2)) for r in (0, 1)]
    assert torch.equal(torch.cat([p[0] for p in parts]), full_rows)
    assert torch.equal(torch.cat([p[1] for p in parts]), full_slots)
    assert len(set(full_rows.tolist())) == 8


@pytest.mark.filterwarnings("ignore:precision='bf16' on a device without native bf16")
def test_bf16_fast_path_tracks_fp32_reference(tmp_path):
    common = dict(n_train=64, batch_size=16, epochs=1, warmup_steps=2, log_every=1,
                  ckpt_every=100, cache_dir=None, n_val=32, n_test=32)
    ref = train(PretrainConfig(out_dir=str(tmp_path / "fp32"), precision="fp32", attention="sdpa",
                               **common))
    fast = train(PretrainConfig(out_dir=str(tmp_path / "bf16"), precision="bf16", attention="explicit",
                                **common))
    lr, lf = [h["loss"] for h in ref["history"] if "loss" in h], [h["loss"] for h in fast["history"] if "loss" in h]
    # bf16 keeps 8 bits of mantissa: the contrastive loss agrees to about 1%
    assert lf == pytest.approx(lr, rel=0.02)


def test_lr_schedule_warms_up_then_decays():
    cfg = PretrainConfig(lr=1.0, warmup_steps=10)
    assert lr_at(0, 100, cfg) == pytest.approx(0.1)
    assert lr_at(9, 100, cfg) == pytest.approx(1.0)
    assert lr_at(55, 100, cfg) == pytest.approx(0.5)
    assert lr_at(100, 100, cfg) == pytest.approx(0.0)


@pytest.mark.parametrize("field,value", [("precision", "fp16"), ("batch_size", 0), ("attention", "flash"),
                                         ("full_caption_weight", 2.0), ("threads", 0), ("n_test", 0)])
def test_bad_pretrain_config_names_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        PretrainConfig(**{field: value})


def test_batch_larger_than_data_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="n_train"):
        train(PretrainConfig(out_dir=str(tmp_path), n_train=8, batch_size=16, cache_dir=None))


def test_cli_switches_each_piece_of_the_fast_path():
    import importlib.util
    spec = importlib.util.spec_from_file_location("pretrain_toy_clip", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    default = mod.parse_args([])
    assert (default.precision, default.attention, default.compile, default.keep_freed_memory) == \
        ("auto", "explicit", False, True)
    assert mod.parse_args(["--precision", "bf16"]).precision == "bf16"
    with pytest.raises(SystemExit):
        mod.parse_args(["--precision", "fp16"])
    ref = mod.parse_args(["--precision", "fp32", "--attention", "sdpa", "--no-keep-freed-memory"])
    assert (ref.precision, ref.attention, ref.keep_freed_memory) == ("fp32", "sdpa", False)
    assert mod.parse_args(["--compile"]).compile is True


def test_continuation_starts_from_the_parent_and_records_its_lineage(tmp_path):
    from fgclip.train.pretrain import lineage, lineage_history
    args = SMALL + ["--epochs", "1", "--ckpt-every", "4", "--eval-every-epoch"]
    _run(args + ["--out-dir", str(tmp_path / "a")])
    parent = load_checkpoint(tmp_path / "a" / "toy-vit.pt")
    # lr 0 throughout: the continued model must be its parent's weights exactly (fp16 both ways)
    _run(args + ["--out-dir", str(tmp_path / "b"), "--init", str(tmp_path / "a" / "toy-vit.pt"), "--lr", "0"])
    child = load_checkpoint(tmp_path / "b" / "toy-vit.pt")
    for k, v in parent["state_dict"].items():
        torch.testing.assert_close(child["state_dict"][k], v, msg=k)
    record = child["parent"]
    assert record["checkpoint"].endswith("toy-vit.pt") and "pretrain_toy_clip.py" in record["command"]
    assert record["steps"] == 4 and record["test_metrics"] == parent["test_metrics"]
    assert [p["checkpoint"] for p in lineage(child)] == [record["checkpoint"]] and lineage(parent) == []
    history, starts = lineage_history(child)
    assert starts == [4]
    assert [h["step"] for h in history if "loss" in h] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert [h["epoch"] for h in history if "epoch" in h] == [1, 2]
    assert parent["parent"] is None
    # what an lr-0 run without --init would ship: the seeded initialisation, not the parent
    from fgclip.models import create_clip
    from fgclip.seeding import seed_everything
    seed_everything(0)
    fresh = create_clip("toy-vit", pretrained=None).model.state_dict()
    assert any(not torch.equal(fresh[k].half(), v) for k, v in parent["state_dict"].items() if v.is_floating_point())


def test_continuing_from_another_architecture_names_the_file():
    from fgclip.models import create_clip
    from fgclip.train.pretrain import continue_from
    path = ROOT / "checkpoints" / "toy-rn.pt"
    with pytest.raises(ValueError, match=r"--init .*toy-rn\.pt: a 'toy-rn' checkpoint whose weights do not fit"):
        continue_from(create_clip("toy-vit", pretrained=None).model, path)
