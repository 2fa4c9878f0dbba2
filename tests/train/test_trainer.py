"""End-to-end tiny CPU runs: the three-view schedule lowers every view's loss, the view order across
updates is the schedule's, and a run stopped after k updates resumes exactly."""

import hashlib
import json

import pytest

from hpd.runfolder import validate_manifest
from hpd.train.logger import read_csv
from hpd.train.trainer import Trainer, TrainError, train
from hpd.views import synthetic_records


def _cfg(tiny_dir, phases, **kw):
    cfg = {"name": "t", "seed": 0, "model": {"path": str(tiny_dir), "precision": "fp32"},
           "lora": {"r": 8, "alpha": 16, "dropout": 0.0}, "optim": {"lr": 3e-3},
           "batch": {"global_batch": 4, "micro_batch_tokens": 2048}, "data": {"max_length": 2048},
           "schedule": {"phases": phases}, "checkpoint": {"every": 100},
           "logging": {"probe_examples": 6, "progress": False, "tensorboard": True}}
    for k, v in kw.items():
        sect, key = k.split("__")
        cfg.setdefault(sect, {})[key] = v
    return cfg


def test_three_view_run_lowers_every_view_loss_in_schedule_order(tiny_dir, tmp_path):
    recs = synthetic_records(12, seed=0)
    out = tmp_path / "run"
    adapter = train(recs, _cfg(tiny_dir, [{"views": {"T": 1, "I": 1, "R": 1}, "updates": 24}]), out)
    assert adapter == out / "adapter" and (adapter / "adapter_model.safetensors").is_file()
    assert (adapter / "adapter_config.json").is_file() and (adapter / "tokenizer.json").is_file()
    m = json.loads((out / "metrics.json").read_text())
    for v in "TIR":
        assert m["probe_loss_final"][v] < m["probe_loss_initial"][v] - 0.1, (v, m)
        assert m["last_loss"][v] < m["first_loss"][v], (v, m)
    assert m["updates_per_view"] == {"T": 8, "I": 8, "R": 8}
    rows = read_csv(out / "metrics.csv")
    assert [r["update"] for r in rows] == list(range(24))
    assert "".join(r["view"] for r in rows) == "TIR" * 8                 # the exact cycle, update by update
    man = json.loads((out / "manifest.json").read_text())
    assert validate_manifest(man) == [] and man["status"] == "complete"
    for key in ("schedule", "length_report", "departures_from_paper"):
        assert key in man
    assert man["inputs"]["records"]["path"] == "records (in-memory)" and len(man["inputs"]["records"]["sha256"]) == 64
    assert man["schedule"][0]["cycle"] == "TIR" and man["batching"] == "prefix"   # auto on the CPU, no checkpointing
    assert any(p.name.startswith("events") for p in (out / "tb").iterdir())
    assert (out / "length_report.json").is_file()
    # the saved adapter IS the trained model: reloaded with PEFT it reproduces the final probe loss
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from hpd.train.trainer import probe_losses
    from hpd.views import Renderer, build_views
    tok = AutoTokenizer.from_pretrained(str(adapter))
    ex, _ = build_views(recs, Renderer(tok), max_length=2048)
    m2 = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(tiny_dir), dtype=torch.float32), str(adapter))
    again = probe_losses(m2, ex, 6, 2048, "cpu")
    assert again == pytest.approx(m["probe_loss_final"], abs=1e-4)
    with pytest.raises(TrainError):                                      # never overwrite a run silently
        train(recs, _cfg(tiny_dir, [{"views": {"T": 1}, "updates": 1}]), out)


def test_weighted_and_staged_order_in_a_real_run(tiny_dir, tmp_path):
    recs = synthetic_records(6, seed=1)
    phases = [{"views": {"T": 1}, "updates": 2}, {"views": {"T": 5, "I": 1, "R": 5}, "updates": 11}]
    train(recs, _cfg(tiny_dir, phases, logging__probe_examples=0, optim__lr=1e-4), tmp_path / "w")
    rows = read_csv(tmp_path / "w" / "metrics.csv")
    assert "".join(r["view"] for r in rows) == "TT" + "TRTRITRTRTR"
    assert [int(r["phase"]) for r in rows] == [0, 0] + [1] * 11


def test_exact_resume_after_stop(tiny_dir, tmp_path):
    recs = synthetic_records(5, seed=2)     # 10 records, batch 4: the streams wrap epochs mid-run
    phases = [{"views": {"T": 1, "I": 1, "R": 1}, "updates": 8}]
    kw = dict(lora__dropout=0.1, checkpoint__every=3, logging__probe_examples=0, optim__warmup_updates=2,
              optim__decay="cosine")    # the resumed run must follow the same warm-up + decay curve
    train(recs, _cfg(tiny_dir, phases, **kw), tmp_path / "full")
    assert train(recs, dict(_cfg(tiny_dir, phases, **kw), stop_after=4), tmp_path / "cut") is None
    cut = read_csv(tmp_path / "cut" / "metrics.csv")
    assert len(cut) == 4                     # stopped after update 3; the newest checkpoint is update 3
    man = json.loads((tmp_path / "cut" / "manifest.json").read_text())
    assert man["status"] == "stopped" and validate_manifest(man) == []
    train(recs, _cfg(tiny_dir, phases, **kw), tmp_path / "cut", resume=True)
    a = read_csv(tmp_path / "full" / "metrics.csv")
    b = read_csv(tmp_path / "cut" / "metrics.csv")
    assert [r["update"] for r in b] == list(range(8))                    # update 3 re-run once, not duplicated
    assert [r["view"] for r in b] == [r["view"] for r in a]
    for ra, rb in zip(a, b):
        assert abs(ra["loss"] - rb["loss"]) <= 1e-6, (ra, rb)
        assert float(ra["lr"]) == float(rb["lr"])
    lrs = [float(r["lr"]) for r in a]
    assert lrs[1] == lrs[2] and lrs[2] > lrs[3] > lrs[-1] > 0               # warm-up, peak, then decaying
    ma = json.loads((tmp_path / "full" / "metrics.json").read_text())
    mb = json.loads((tmp_path / "cut" / "metrics.json").read_text())
    assert ma["last_loss"] == pytest.approx(mb["last_loss"], abs=1e-6)
    st = json.loads(sorted((tmp_path / "cut" / "checkpoints").glob("update-*"))[-1].joinpath("state.json").read_text())
    assert st["update"] == 8 and set(st["streams"]) == {"T", "I", "R"}


def test_a_resumed_run_keeps_the_dtype_it_started_in(tiny_dir, tmp_path, monkeypatch, capsys):
    """precision auto is resolved once per run. An fp32 run resumed where auto is bf16 stays in fp32; a bf16 run
    resumed where auto is fp32 (no native bf16) stops with a one-line error instead of switching halfway, and
    resumes in bf16 where auto is bf16 again."""
    import hpd.policy.dtype as D

    recs = synthetic_records(3, seed=5)
    cfg = _cfg(tiny_dir, [{"views": {"T": 1}, "updates": 4}], model__precision="auto", checkpoint__every=1,
               logging__probe_examples=0)

    def dtype(out):
        return json.loads((out / "manifest.json").read_text())["dtype"]

    monkeypatch.setattr(D, "cpu_has_bf16", lambda: False)            # started on an AVX2-only machine
    assert train(recs, dict(cfg, stop_after=2), tmp_path / "a") is None and dtype(tmp_path / "a") == "float32"
    monkeypatch.setattr(D, "cpu_has_bf16", lambda: True)             # resumed where auto is bf16
    train(recs, cfg, tmp_path / "a", resume=True)
    assert dtype(tmp_path / "a") == "float32"
    assert "trained in float32 before this resume" in capsys.readouterr().err

    assert train(recs, dict(cfg, stop_after=2), tmp_path / "b") is None and dtype(tmp_path / "b") == "bfloat16"
    monkeypatch.setattr(D, "cpu_has_bf16", lambda: False)            # a bf16 run moved to an AVX2-only machine
    with pytest.raises(TrainError, match="trained in bfloat16 and this device does not compute it natively"):
        train(recs, cfg, tmp_path / "b", resume=True)
    monkeypatch.setattr(D, "cpu_has_bf16", lambda: True)
    train(recs, cfg, tmp_path / "b", resume=True)
    man = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert man["status"] == "complete" and man["resumed"] and man["dtype"] == "bfloat16"


def test_sft_baseline_is_a_setting(tiny_dir, tmp_path):
    recs = synthetic_records(3, seed=4)
    for r in recs:
        r["target"] = {"role": "assistant", "content": [{"type": "text", "text": "teacher"}], "stopReason": "stop"}
    cfg = _cfg(tiny_dir, [{"views": {"T": 1}, "updates": 2}], data__target="reference", logging__probe_examples=0)
    train(recs, cfg, tmp_path / "sft")
    man = json.loads((tmp_path / "sft" / "manifest.json").read_text())
    assert man["views"]["target_source"] == "reference" and man["updates_per_view"] == {"T": 2}


def test_cli_end_to_end_with_records_file(tiny_dir, tmp_path):
    from typer.testing import CliRunner

    from hpd.cli import app
    recs = tmp_path / "records.jsonl"
    recs.write_text("".join(json.dumps(r) + "\n" for r in synthetic_records(3, seed=7)))
    out = tmp_path / "cli"
    args = ["train", "--config", "configs/tiny-cpu-hpd-t.yaml", "--data", str(recs), "--out", str(out),
            f"model.path={tiny_dir}", "schedule.phases.0.updates=2", "logging.progress=false", "logging.probe_examples=0"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    man = json.loads((out / "manifest.json").read_text())
    assert man["inputs"]["records"] == {"path": str(recs), "sha256": hashlib.sha256(recs.read_bytes()).hexdigest()}
    assert man["n_records"] == 6 and man["command"].startswith("hpd")
    r = CliRunner().invoke(app, args)                                     # an existing run is not overwritten
    assert r.exit_code == 2 and "already holds" in r.output


def test_bf16_precision_runs_with_fp32_adapters(tiny_dir, tmp_path):
    import torch
    from hpd.train.student import load_lora_model
    from hpd.train.config import TrainConfig
    cfg = _cfg(tiny_dir, [{"views": {"T": 1, "R": 1}, "updates": 2}], logging__probe_examples=0)
    cfg["model"]["precision"] = "bf16"
    m = load_lora_model(TrainConfig.model_validate(cfg), tiny_dir)
    dt = {p.dtype for n, p in m.named_parameters() if p.requires_grad}
    assert dt == {torch.float32}                                           # LoRA weights (and AdamW state) fp32
    assert m.get_base_model().model.layers[0].mlp.down_proj.base_layer.weight.dtype == torch.bfloat16
    train(synthetic_records(2, seed=9), cfg, tmp_path / "bf16")
    rows = read_csv(tmp_path / "bf16" / "metrics.csv")
    assert len(rows) == 2 and all(0 < r["loss"] < 20 for r in rows)
    assert json.loads((tmp_path / "bf16" / "manifest.json").read_text())["dtype"] == "bfloat16"


def test_lora_top_layers_adapts_only_the_top_decoder_layers(tiny_dir, tmp_path):
    """lora.top_layers=N puts the adapters on every linear layer of the top N decoder layers only; the
    bottom layers get no gradient, and asking for more layers than the model has is a one-line error."""
    import pytest as _pytest

    from hpd.train.config import TrainConfig
    from hpd.train.student import load_lora_model

    cfg = _cfg(tiny_dir, [{"views": {"T": 1}, "updates": 1}], logging__probe_examples=0)
    full = load_lora_model(TrainConfig.model_validate(cfg), tiny_dir)
    n = full.get_base_model().config.num_hidden_layers
    cfg["lora"]["top_layers"] = 1
    top = load_lora_model(TrainConfig.model_validate(cfg), tiny_dir)
    lora_layers = {int(name.split(".layers.")[1].split(".")[0]) for name, p in top.named_parameters() if p.requires_grad}
    assert lora_layers == {n - 1}
    kinds = lambda m: {name.split(".lora_")[0].rsplit(".", 1)[-1] for name, p in m.named_parameters() if p.requires_grad}
    assert kinds(top) == kinds(full)                  # the same linear modules as 'all-linear', top layer only
    cfg["lora"]["top_layers"] = n + 1
    with _pytest.raises(ValueError, match=rf"lora.top_layers={n + 1}: the model has {n} decoder layers"):
        load_lora_model(TrainConfig.model_validate(cfg), tiny_dir)


def test_full_finetuning_saves_a_whole_model_that_reproduces_the_probe_loss(tiny_dir, tmp_path):
    """lora.enabled=false (the tiny CPU path): every parameter trains and <out>/model loads on its own."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from hpd.train.trainer import probe_losses
    from hpd.views import Renderer, build_views

    recs = synthetic_records(6, seed=1)
    out = tmp_path / "full"
    model_dir = train(recs, _cfg(tiny_dir, [{"views": {"T": 1}, "updates": 6}], lora__enabled=False,
                                 logging__tensorboard=False), out)
    assert model_dir == out / "model" and (model_dir / "config.json").is_file()
    assert not (model_dir / "adapter_config.json").exists() and not (out / "adapter").exists()
    m = json.loads((out / "metrics.json").read_text())
    assert m["probe_loss_final"]["T"] < m["probe_loss_initial"]["T"] - 0.1
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    ex, _ = build_views(recs, Renderer(tok), views=["T"], max_length=2048)
    again = probe_losses(AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32), ex, 6, 2048, "cpu")
    assert again == pytest.approx(m["probe_loss_final"], abs=1e-4)


def test_trainer_is_a_recipe_with_replaceable_parts(tiny_dir, tmp_path):
    """A later trainer (preference, RL) subclasses Trainer and replaces one part; the rest is shared."""
    seen = []

    class Counting(Trainer):
        def update_loss(self, batch):
            seen.append((self.schedule.view_at(len(seen)), len(batch)))
            return super().update_loss(batch)

        def summary(self, probe_final):
            return {**super().summary(probe_final), "counted": len(seen)}

    recs = synthetic_records(3, seed=5)
    out = Counting(recs, _cfg(tiny_dir, [{"views": {"T": 1, "R": 1}, "updates": 4}], logging__probe_examples=0),
                   tmp_path / "r").run()
    assert out == tmp_path / "r" / "adapter"
    assert seen == [("T", 4), ("R", 4), ("T", 4), ("R", 4)]
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert metrics["counted"] == 4 and 0.1 < metrics["peak_gb"] < 64    # the largest update's peak (metrics.csv)


def test_a_non_finite_loss_stops_the_run_before_the_optimizer_step(tiny_dir, tmp_path):
    """A NaN weight (what an LR too high for bf16 gave on the H200) makes update 3's loss NaN: the run stops
    there with a one-line error naming the update and view, keeps the CSV of updates 1-2, marks its manifest
    failed, and never steps the optimizer on the NaN gradient."""
    import math

    import torch

    from hpd.train.trainer import NonFiniteLoss

    class Poisoned(Trainer):
        def step(self, u):
            if u == 2:
                p = next(p for n, p in self.model.named_parameters() if p.requires_grad and "lora_B" in n)
                with torch.no_grad():
                    p.fill_(float("nan"))
            return super().step(u)

    recs = synthetic_records(4, seed=1)
    cfg = _cfg(tiny_dir, [{"views": {"T": 1, "I": 1, "R": 1}, "updates": 6}], logging__probe_examples=0)
    t = Poisoned(recs, cfg, tmp_path / "nan")
    with pytest.raises(NonFiniteLoss) as info:
        t.run()
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("update 3 (view R): loss nan")
    assert "Last finite loss per view: I " in msg and "Lower optim.lr" in msg
    rows = read_csv(tmp_path / "nan" / "metrics.csv")
    assert [r["update"] for r in rows] == [0, 1] and all(math.isfinite(r["loss"]) for r in rows)
    man = json.loads((tmp_path / "nan" / "manifest.json").read_text())
    assert man["status"] == "failed" and man["error"] == msg and validate_manifest(man) == []
    step_counts = {int(s["step"]) for s in t.optimizer.state_dict()["state"].values()}
    assert step_counts == {2}                   # two updates stepped; the NaN one was not
    assert isinstance(info.value, TrainError)   # the CLI prints TrainError on one line (exit 2)
