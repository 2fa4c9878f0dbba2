"""benchmarks/gpu_check.py, the GPU path check (README, "The GPU check"): its CPU dry run runs the same code
at tiny sizes, so the script that only a lent GPU machine runs in full cannot rot unnoticed. The dry run
must finish, print one JSON with every section, train in fp32 (and say so), see the loss fall in every view,
resume exactly after a forced stop, generate batched and sequentially, and launch the FSDP2 step (which
a CPU cannot shard: the JSON says so)."""

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


def test_flops_formulas():
    gc = _module()
    f = gc.model_flops(n_total=1000, n_head=200, n_lora=10, tokens=7, supervised=3)
    assert f["full_6nt"] == 6 * 1000 * 7
    assert f["lora"] == 4 * 800 * 7 + 4 * 200 * 3 + 6 * 10 * 7


@pytest.mark.slow
def test_cpu_dry_run(tmp_path):
    out = tmp_path / "gpu_check.json"
    p = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--dry-run", "--threads", "1",
                        "--out", str(out)], capture_output=True, text=True, timeout=600, cwd=str(REPO))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-5000:]
    printed = json.loads(p.stdout.strip().splitlines()[-1])
    res = json.loads(out.read_text())
    assert printed["headline"] == res["headline"]

    for key in ("check", "device", "device_name", "dry_run", "ok", "checks", "versions", "precision", "plan", "model",
                "data", "matmul_baseline", "train", "throughput", "resume", "generation", "fsdp", "timings",
                "errors", "headline", "heavy_modules_imported", "wall_s"):
        assert key in res, key
    assert res["ok"] is True and res["errors"] == {} and res["dry_run"] is True and res["device"] == "cpu"
    assert set(res["timings"]) == {"tokenizer", "model", "data", "matmul", "train", "resume", "generation", "fsdp"}

    # fp32 for the CPU dry run (its choice: this CPU has AVX512-BF16/AMX-BF16), and the JSON says so; the
    # trainer's optimizer setup is the one the bf16 path uses
    prec = res["precision"]
    assert prec["requested"] == "fp32" and "fp32" in prec["note"]
    assert prec["base_dtype"] == ["float32"] and prec["lora_dtype"] == ["float32"]
    assert prec["optimizer"] == "AdamW" and prec["adamw_foreach"] is False

    assert res["model"]["arch"] == "Qwen3ForCausalLM" and res["model"]["n_params"] > 0
    assert res["data"]["records"] > 0

    # the loss fell in every view (probe loss on the same examples, and the training loss)
    tr = res["train"]
    assert tr["loss_fell"] is True and set(tr["loss_fell_by_view"]) == {"T", "I", "R"}
    for v in ("T", "I", "R"):
        assert tr["probe_loss_final"][v] < tr["probe_loss_initial"][v]
        assert tr["loss_last_tenth_mean"][v] < tr["loss_first"][v]
    assert tr["finished"] and tr["n_params_lora"] > 0

    tp = res["throughput"]
    assert tp["tokens_per_s"] > 0 and tp["achieved_tflops_lora"] > 0 and tp["updates_measured"] > 0
    assert tp["flops_formula_full"] == "6*N*T" and "N_lora" in tp["flops_formula_lora"]
    assert tp["peak_bf16_tflops"] is None and tp["mfu"] is None      # no bf16 peak for a CPU
    assert res["matmul_baseline"]["tflops"] > 0 and tp["fraction_of_measured_matmul"] > 0

    # a forced stop + resume gives the same losses as the uninterrupted run
    rs = res["resume"]
    assert rs["exact"] is True and rs["max_abs_diff"] == 0.0
    assert rs["stopped_run_finished"] is False and rs["resumed_run_finished"] is True
    assert len(rs["losses_stopped_then_resumed"]) == rs["updates"] > rs["stop_after"]

    gen = res["generation"]
    assert gen["batched_tokens"] > 0 and gen["sequential_tokens"] > 0
    assert gen["batched_tokens_per_s"] > 0 and gen["sequential_tokens_per_s"] > 0 and gen["ratio"] > 0
    assert gen["identical_outputs"] == gen["prompts"]                 # greedy, fp32: batching changes nothing
    assert gen["adapter"]["batched_tokens"] > 0

    # the FSDP2 launch ran end to end; a CPU cannot shard, and the JSON says why
    fs = res["fsdp"]
    assert fs["status"] == "not applied" and fs["returncode"] == 0 and fs["finished"] is True
    assert "CPU" in fs["reason"] and len(fs["losses"]) == 2
    assert fs["max_abs_diff_vs_single_process"] < 1e-6   # the launched run trains like the in-process one

    assert not {"matplotlib", "typer", "fastapi", "uvicorn", "tensorboard"} & set(res["heavy_modules_imported"])
    assert res["checks"] == {"loss_fell": True, "resume_exact": True, "generation_ran": True, "fsdp": "not applied"}
