"""Every shipped config loads and validates; overrides; bad input gives a one-line error, not a traceback."""

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError
from typer.testing import CliRunner

from hpd.cli import app
from hpd.train.config import TrainConfig, apply_overrides, load_config

REPO = Path(__file__).resolve().parents[2]
CONFIGS = sorted(p for p in (REPO / "configs").rglob("*.yaml")
                 if not {"accelerate", "methods", "studies"} & set(p.parts))   # studies: tests/report/test_study_registry.py
METHOD_CONFIGS = sorted((REPO / "configs" / "methods").glob("*.yaml"))
ACCEL = sorted((REPO / "configs" / "accelerate").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(REPO)))
def test_shipped_config_loads_and_has_command_header(path):
    cfg = load_config(path)
    assert isinstance(cfg, TrainConfig)
    head = path.read_text().splitlines()[:6]
    assert any("Exact command" in line for line in head)
    rel = str(path.relative_to(REPO))
    assert any(f"--config {rel}" in line for line in head), head
    s = cfg.schedule.build()
    assert s.total == cfg.total_updates > 0


@pytest.mark.parametrize("path", METHOD_CONFIGS, ids=lambda p: p.name)
def test_shipped_method_config_loads_through_its_method(path):
    """configs/methods/<method>-<size>.yaml: loaded by hpd.methods.<method> (the module `hpd train --method`
    dispatches to), with the exact command in its header."""
    from hpd.methods import method_module

    method = path.name.split("-")[0]
    cfg = method_module(method).load_config(path)
    assert cfg.updates > 0
    head = "\n".join(path.read_text().splitlines()[:8])
    assert f"--method {method} --config configs/methods/{path.name}" in head.replace("\\\n", " "), head


def test_every_method_ships_tiny_smollm2_and_qwen3_8b_configs():
    from hpd.methods import METHODS

    for m in METHODS:
        for size in ("tiny-cpu", "smollm2", "qwen3-8b"):
            assert (REPO / "configs" / "methods" / f"{m}-{size}.yaml").is_file(), (m, size)


def test_paper_setting():
    cfg = load_config(REPO / "configs/qwen3-8b.yaml")
    assert cfg.optim.lr == 2e-6 and cfg.optim.warmup_updates == 0 and cfg.batch.global_batch == 128
    assert cfg.model.precision == "bf16" and cfg.lora.target_modules == "all-linear"
    assert cfg.schedule.build().counts() == {"T": 20000, "I": 20000, "R": 20000}
    for size in ("0.6b", "1.7b", "4b"):
        c = load_config(REPO / f"configs/qwen3-{size}.yaml")
        assert c.schedule == cfg.schedule and c.optim == cfg.optim
    sft = load_config(REPO / "configs/ablations/qwen3-8b-sft.yaml")
    assert sft.data.target == "reference" and sft.schedule.build().views() == ["T"]
    assert load_config(REPO / "configs/ablations/qwen3-8b-t-then-i.yaml").schedule.build().views() == ["T", "I"]


@pytest.mark.parametrize("path", ACCEL, ids=lambda p: p.name)
def test_accelerate_configs_parse(path):
    d = yaml.safe_load(path.read_text())
    assert d["distributed_type"] in {"MULTI_GPU", "FSDP"} and d["num_processes"] >= 1
    assert path.read_text().startswith("#")
    assert {p.name for p in ACCEL} == {"ddp.yaml", "fsdp2.yaml"}    # no ZeRO: docs/departures.md


def test_overrides_and_validation():
    raw = yaml.safe_load((REPO / "configs/tiny-cpu.yaml").read_text())
    raw = apply_overrides(raw, ["optim.lr=1e-4", "schedule.phases.0.updates=7", "seed=3", "lora.target_modules=[q_proj]"])
    cfg = TrainConfig.model_validate(raw)
    assert cfg.optim.lr == 1e-4 and cfg.total_updates == 7 and cfg.seed == 3 and cfg.lora.target_modules == ["q_proj"]
    with pytest.raises(ValidationError):
        load_config(REPO / "configs/tiny-cpu.yaml", ["schedule.phases.0.views={X: 1}"])
    with pytest.raises(ValidationError):
        load_config(REPO / "configs/tiny-cpu.yaml", ["optim.lrr=1"])            # unknown keys are errors
    with pytest.raises(ValidationError):
        load_config(REPO / "configs/tiny-cpu.yaml", ["batch.micro_batch_tokens=100"])
    with pytest.raises(ValueError):
        apply_overrides({}, ["novalue"])


def test_cli_bad_input_is_one_line(tmp_path):
    r = CliRunner().invoke(app, ["train", "--config", str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "config not found" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(app, ["train", "--config", str(REPO / "configs/tiny-cpu.yaml"), "--out", str(tmp_path / "o"),
                                 "optim.lr=-1"])
    assert r.exit_code == 2 and "optim.lr" in r.output and "Traceback" not in r.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    r = CliRunner().invoke(app, ["train", "--config", str(REPO / "configs/tiny-cpu.yaml"), "--out", str(tmp_path / "o"),
                                 "--data", str(bad), "model.path=" + str(tmp_path)])
    assert r.exit_code == 2 and "Traceback" not in r.output
