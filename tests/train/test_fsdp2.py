"""FSDP2 (``fully_shard``) on two CPU processes (gloo) with uneven data per process: the run finishes, and its
losses and merged adapter equal one process's.

The launch takes the environment that ``accelerate launch --config_file configs/accelerate/fsdp2.yaml`` gives
its workers (accelerate's own argument checks and ``prepare_multi_gpu_env``) and starts the workers with
torchrun, as ``accelerate launch`` does for FSDP. One thing differs from a GPU node: accelerate's
``AcceleratorState`` takes FSDP only on accelerator devices, so each worker (this file run as a script) sets
the FSDP type and plugin on the CPU state exactly as accelerate does on GPUs. From there the trainer runs
its sharded path unchanged: ``accelerator.prepare`` calls ``fully_shard`` (DTensor parameters, the
``fsdp2.yaml`` wrap policy, reshard after forward, rank-0 loading broadcast), ``hpd.train.ranks.sharded`` is true
(checkpoints through ``save_state``, the adapter through ``get_state_dict``).

Uneven data: with ``data.shuffle: false`` and ``batch.micro_batch_tokens`` chosen below, process 0's share
of an update packs into fewer micro-batches than process 1's. Without the matched micro-batch count
(``hpd.train.ranks.accumulate``) process 0 stops gathering parameters before process 1 and the run hangs,
which the launch's timeout turns into a failure.

Tolerances (fp32; the two runs differ only in summation order: two processes, other micro-batches):
per-update loss ``abs 1e-4`` (as the DDP test), merged weights ``abs 1e-5`` (measured: 7e-9; training moves
them by 1e-2).
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
FSDP2_CONFIG = REPO / "configs" / "accelerate" / "fsdp2.yaml"
LAUNCH_TIMEOUT_S = 300
BUDGET = 760            # micro_batch_tokens: process 0 packs an update's T share into 1 micro-batch, process 1 into 2


def _cpu_fsdp() -> None:
    """FSDP on CPU processes, as on GPUs (:func:`hpd.train.ranks.fsdp_on_cpu_processes`)."""
    from hpd.train.ranks import fsdp_on_cpu_processes

    fsdp_on_cpu_processes()


def fsdp2_env(config_file: Path, n: int) -> dict[str, str]:
    """The worker environment ``accelerate launch --config_file config_file --num_processes n`` sets."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env

    args = launch_command_parser().parse_args(["--config_file", str(config_file), "--num_processes", str(n),
                                               "--main_process_port", "0", "-m", "hpd.train"])
    args, _, _ = _validate_launch_command(args)
    return prepare_multi_gpu_env(args)


def _config(tiny_dir: Path) -> dict:
    return {"name": "fsdp2", "seed": 0, "model": {"path": str(tiny_dir), "precision": "fp32"},
            "lora": {"r": 8, "alpha": 16, "dropout": 0.0}, "optim": {"lr": 3e-3},
            "batch": {"global_batch": 4, "micro_batch_tokens": BUDGET},
            "data": {"synthetic_tasks": 4, "max_length": 700, "shuffle": False},
            "schedule": {"phases": [{"views": {"T": 1, "I": 1, "R": 1}, "updates": 3}]},
            "checkpoint": {"every": 2}, "logging": {"probe_examples": 2, "progress": False, "tensorboard": False}}


def _counts(cfg: dict) -> list[list[int]]:
    """Per update, the micro-batch count of each of two processes in padded batching (what FSDP2 runs)."""
    from hpd.train.config import TrainConfig
    from hpd.train.data import ViewStream
    from hpd.train.student import load_tokenizer
    from hpd.train.trainer import build_examples, micro_batches
    from hpd.views import synthetic_records

    tc = TrainConfig.model_validate(cfg)
    sched = tc.schedule.build()
    examples, _ = build_examples(synthetic_records(4, seed=0), tc, load_tokenizer(Path(cfg["model"]["path"])),
                                 sched.views())
    streams = {v: ViewStream(v, examples[v], 0, False) for v in sched.views()}
    out = []
    for u in range(sched.total):
        batch = streams[sched.view_at(u)].take(4)
        out.append([len(micro_batches(batch[r::2], "padded", BUDGET)) for r in range(2)])
    return out


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(cmd: list[str], env: dict) -> subprocess.CompletedProcess:
    """Run ``cmd`` in its own process group; past the timeout the whole group (torchrun and its workers) is
    ended and the test fails: a hang is a failure, never a stuck test."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=LAUNCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
        pytest.fail(f"2-process FSDP2 run did not finish in {LAUNCH_TIMEOUT_S} s (unmatched collectives: a hang)")
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def _merged(base: Path, adapter: Path) -> dict:
    """The base model's state dict with the adapter merged in (PEFT ``merge_and_unload``)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(base), local_files_only=True)
    return PeftModel.from_pretrained(model, str(adapter)).merge_and_unload().state_dict()


def _base_weights(base: Path) -> dict:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(base), local_files_only=True).state_dict()


def _assert_same_training(sharded: Path, single: Path, base: Path) -> tuple[float, float]:
    """Per-update losses within 1e-4 and merged weights within 1e-5; returns (max |diff|, how far training
    moved the weights)."""
    from hpd.train.logger import read_csv

    a, b = read_csv(sharded / "metrics.csv"), read_csv(single / "metrics.csv")
    assert [r["view"] for r in a] == [r["view"] for r in b] == ["T", "I", "R"]
    for ra, rb in zip(a, b):
        assert ra["loss"] == pytest.approx(rb["loss"], abs=1e-4), (ra, rb)
        assert ra["supervised_tokens"] == rb["supervised_tokens"]
    ma, mb, w0 = _merged(base, sharded / "adapter"), _merged(base, single / "adapter"), _base_weights(base)
    assert ma.keys() == mb.keys()
    moved = max(float((mb[k] - w0[k]).abs().max()) for k in mb)
    assert moved > 1e-4, "training must move the merged weights for the comparison to mean something"
    worst = max(float((ma[k] - mb[k]).abs().max()) for k in ma)
    assert worst < 1e-5, f"merged weights differ by {worst}"
    return worst, moved


@pytest.mark.slow
def test_fsdp2_uneven_micro_batches_match_single_process(tiny_dir, tmp_path):
    from hpd.train.trainer import train

    cfg = _config(tiny_dir)
    counts = _counts(cfg)
    assert any(a != b for a, b in counts), f"the data must be uneven per process: {counts}"
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    torchrun = str(Path(sys.executable).parent / "torchrun")
    env = dict(fsdp2_env(FSDP2_CONFIG, 2), OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    assert env["ACCELERATE_USE_FSDP"] == "true" and env["FSDP_VERSION"] == "2"
    t0 = time.time()
    p = _launch([torchrun, "--nproc-per-node", "2", "--master-port", str(_free_port()), __file__,
                 str(path), str(tmp_path / "fsdp")], env)
    assert p.returncode == 0, p.stderr[-3000:]
    man = json.loads((tmp_path / "fsdp" / "manifest.json").read_text())
    assert man["distributed"] == {"type": "DistributedType.FSDP", "world_size": 2}
    assert man["batching"] == "padded"          # auto: prefix would run a data-dependent number of forwards
    assert (sorted((tmp_path / "fsdp" / "checkpoints").glob("update-*"))[-1] / "accelerate").is_dir()
    t_fsdp = time.time() - t0
    train(None, dict(cfg, batch=dict(cfg["batch"], batching="padded")), tmp_path / "single")
    worst, moved = _assert_same_training(tmp_path / "fsdp", tmp_path / "single", tiny_dir)
    print(f"micro-batches per process {counts}; FSDP2 run {t_fsdp:.1f} s; merged max |diff| {worst:.2e} "
          f"(training moved them by {moved:.2e})")


class _Acc:
    """The parts of an Accelerator that :func:`hpd.train.ranks.accumulate` uses, recording what it is told."""

    def __init__(self, kind: str, world: int, counts: list[int]):
        from accelerate.utils import DistributedType

        self.distributed_type, self.num_processes, self.counts = DistributedType[kind], world, counts
        self.device, self.events = "cpu", []
        self.gradient_state = self

    def _set_sync_gradients(self, flag: bool) -> None:
        self.events.append(("sync", flag))

    def reduce(self, t, reduction):
        assert reduction == "max"
        self.events.append(("reduce", int(t)))
        return t.new_tensor([max(self.counts)])

    def no_sync(self, model):
        import contextlib

        self.events.append(("no_sync",))
        return contextlib.nullcontext()


def test_accumulate_pads_the_shorter_process_under_sharding():
    from hpd.train.ranks import accumulate

    acc = _Acc("FSDP", 2, [1, 3])
    assert list(accumulate(acc, None, ["a"])) == ["a", None, None]
    assert acc.events == [("reduce", 1), ("sync", False), ("no_sync",), ("sync", False), ("no_sync",),
                          ("sync", True), ("sync", True)]


@pytest.mark.parametrize("kind,world", [("NO", 1), ("MULTI_CPU", 2), ("FSDP", 1)])
def test_accumulate_is_the_plain_loop_unless_sharded_over_processes(kind, world):
    from hpd.train.ranks import accumulate

    acc = _Acc(kind, world, [2, 5])
    assert list(accumulate(acc, None, ["a", "b"])) == ["a", "b"]
    assert acc.events == [("sync", False), ("no_sync",), ("sync", True), ("sync", True)]


def test_prefix_batching_is_one_forward_per_micro_batch_under_sharding():
    from hpd.train.ranks import one_forward_mode

    fsdp, ddp = _Acc("FSDP", 2, [1]), _Acc("MULTI_CPU", 2, [1])
    assert one_forward_mode(fsdp, "prefix", "auto") == "padded"
    assert one_forward_mode(fsdp, "packed", "packed") == "packed"
    assert one_forward_mode(ddp, "prefix", "prefix") == "prefix"
    with pytest.raises(ValueError, match="batching=prefix .* hangs sharded training"):
        one_forward_mode(_Acc("DEEPSPEED", 2, [1]), "prefix", "prefix")


def test_zero_loss_runs_the_model_and_leaves_zero_gradients(tiny_dir):
    from transformers import AutoModelForCausalLM

    from hpd.train.ranks import zero_loss

    model = AutoModelForCausalLM.from_pretrained(str(tiny_dir), local_files_only=True)
    loss = zero_loss(model, "cpu")
    loss.backward()
    grads = [p.grad for p in model.parameters()]
    assert float(loss.detach()) == 0.0 and all(g is not None and not g.any() for g in grads)


if __name__ == "__main__":          # one FSDP2 worker: python test_fsdp2.py CONFIG OUT (under torchrun)
    _cpu_fsdp()
    from hpd.train.trainer import train

    train(None, sys.argv[1], sys.argv[2])
