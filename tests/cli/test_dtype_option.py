"""Every model command takes ``--dtype auto|float32|bfloat16`` and says what auto means; a bad name is a
usage error; ``hpd train --dtype`` overrides the config's model.precision (every method)."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from hpd.cli import app

MODEL_COMMANDS = ("train", "teach", "eval", "serve", "bfcl", "probe", "export", "demo")


def _plain(text: str) -> str:
    """Help text without colours and box drawing, whitespace collapsed."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


@pytest.mark.parametrize("cmd", MODEL_COMMANDS)
def test_every_model_command_shows_dtype_in_help(cmd):
    r = CliRunner().invoke(app, [cmd, "--help"], env={"COLUMNS": "200", "NO_COLOR": "1"}, terminal_width=200)
    assert r.exit_code == 0, r.output
    text = _plain(r.output)
    assert "--dtype" in text and "auto|float32|bfloat16" in text
    assert "auto = bfloat16 where the device computes it natively" in text
    assert "AVX512-BF16 or AMX-BF16" in text and "else float32" in text


def test_a_bad_dtype_is_a_usage_error(tmp_path):
    r = CliRunner().invoke(app, ["export", "--model", str(tmp_path), "--out", str(tmp_path / "o"),
                                 "--dtype", "float16"])
    assert r.exit_code == 2 and "unknown dtype 'float16'" in _plain(r.output)


@pytest.mark.parametrize("method", ["hpd", "dpo", "grpo"])
def test_train_dtype_overrides_model_precision(method, monkeypatch, tmp_path):
    import hpd.cli.train as T

    seen = {}
    monkeypatch.setattr(T, "train_command", lambda config, out, resume, data, overrides, update:
                        seen.update(o=overrides, u=update))
    monkeypatch.setattr(T, "method_command", lambda m, config, out, resume, overrides, update:
                        seen.update(o=overrides, u=update))
    args = ["train", "--method", method, "--config", "c.yaml", "--out", str(tmp_path), "model.precision=fp32"]
    for flag, want in (("bf16", "bf16"), ("bfloat16", "bf16"), ("float32", "fp32"), ("auto", "auto")):
        r = CliRunner().invoke(app, [*args, "--dtype", flag])
        assert r.exit_code == 0, r.output
        assert seen == {"o": ["model.precision=fp32"], "u": {"model": {"precision": want}}}   # written over both
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0 and seen == {"o": ["model.precision=fp32"], "u": None}     # no --dtype: the config's


def test_the_last_precision_override_wins(tmp_path):
    from hpd.train.config import load_config

    f = tmp_path / "c.yaml"
    f.write_text("name: t\nmodel: {path: 'tiny:xs', precision: fp32}\nschedule: {phases: [{views: {T: 1}, updates: 1}]}\n")
    assert load_config(f, ["model.precision=bf16"]).model.precision == "bf16"
    assert load_config(f, ["model.precision=fp32", "model.precision=auto"]).model.precision == "auto"
    assert load_config(f, ["model.precision=fp32"], {"model": {"precision": "bf16"}}).model.precision == "bf16"
