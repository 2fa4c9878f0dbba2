"""``hpd bfcl`` bad input: one line on stderr, exit code 2, never a traceback."""

import pytest
from typer.testing import CliRunner

from hpd.cli import app

runner = CliRunner()


def test_help_lists_bfcl():
    r = runner.invoke(app, ["--help"])
    assert r.exit_code == 0 and "bfcl" in r.output


@pytest.mark.parametrize("extra, message", [
    (["--model", "/nonexistent/model"], "is not a folder"),
    (["--model", "{empty}"], "is not a model folder (no config.json)"),
    (["--categories", "simple,nope"], "unknown BFCL category 'nope'"),
    (["--sample", "0"], "--sample must be >= 1"),
    (["--backend", "tpu"], "unknown --backend 'tpu'"),
    (["--backend", "openai"], "--backend openai needs --base-url"),
    (["--out", "{file}"], "exists and is not a folder"),
    (["--adapter", "/nonexistent/adapter"], "--adapter /nonexistent/adapter is not a folder"),
])
def test_bad_input_is_one_line_exit_2(bfcl, tiny_dir, tmp_path, extra, message):
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("x")
    args = {"--model": str(tiny_dir), "--out": str(tmp_path / "out"), "--categories": "simple"}
    it = iter(extra)
    for k in it:
        args[k] = next(it).format(empty=tmp_path / "empty", file=tmp_path / "file")
    r = runner.invoke(app, ["bfcl", *[x for kv in args.items() for x in kv], "--no-progress"])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and r.exception is None or isinstance(r.exception, SystemExit)
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert lines == [lines[0]] and lines[0].startswith("error: ") and message in lines[0], r.output
