"""Malformed TRAJECT-Bench entries, on corrupted copies of real files: every corruption kind stops the load
with one line naming file#index and field, or with ``skip_bad`` is counted and skipped (the other entries
keep their uids); ``hpd replay``, ``hpd eval`` and ``hpd demo`` print that line without a traceback."""

import json
import shutil

import pytest
from typer.testing import CliRunner

from hpd.bench.entries import BadEntryError
from hpd.bench.loader import load_bench
from hpd.cli import app

PAR, SEQ, TOOLS = "parallel/Finance/simple_ver.json", "sequential/Finance/traj_query.json", "tools/Finance_tool.json"
MARK = "@@CORRUPT@@"
runner = CliRunner()


@pytest.fixture(scope="module")
def real_copy(traject_data, tmp_path_factory):
    """Three real files (one domain: its tools, a parallel and a sequential task file) copied out of the data."""
    d = tmp_path_factory.mktemp("real") / "clean"
    for rel in (PAR, SEQ, TOOLS):
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(traject_data / rel, d / rel)
    return d


def _copy(real_copy, tmp_path):
    d = tmp_path / "data"
    shutil.copytree(real_copy, d)
    return d


def _edit(d, rel, fn):
    """Rewrite one task file after ``fn(entries)`` changed its records (valid JSON, real content)."""
    entries = json.loads((d / rel).read_text(encoding="utf-8"))
    fn(entries)
    (d / rel).write_text(json.dumps(entries, ensure_ascii=False, indent=1), encoding="utf-8")


def _marked(d, rel, k):
    """The file with record ``k``'s query set to MARK; returns its bytes and the marker's byte offset."""
    _edit(d, rel, lambda es: es[k].__setitem__("query", MARK))
    raw = (d / rel).read_bytes()
    return raw, raw.index(MARK.encode())


def _drop_query(d):
    _edit(d, PAR, lambda es: es[7].pop("query"))
    return PAR, 7, "query", "missing-field"


def _drop_tool_name(d):
    _edit(d, SEQ, lambda es: es[3]["tool list"][1].pop("tool name"))
    return SEQ, 3, "tool list[1].tool name", "missing-field"


def _steps_not_a_list(d):
    _edit(d, PAR, lambda es: es.__setitem__(5, {**es[5], "tool list": "get_weather"}))
    return PAR, 5, "tool list", "wrong-type"


def _params_a_number(d):
    _edit(d, SEQ, lambda es: es[9]["tool list"][0].__setitem__("required parameters", 3))
    return SEQ, 9, "tool list[0].required parameters", "wrong-type"


def _bad_json(d):
    raw, at = _marked(d, PAR, 11)
    (d / PAR).write_bytes(raw[:at - 1] + MARK.encode() + raw[at + len(MARK) + 1:])   # the string loses its quotes
    return PAR, 11, None, "bad-json"


def _truncated(d):
    raw, at = _marked(d, SEQ, 20)
    (d / SEQ).write_bytes(raw[:at + 4])                                               # cut inside record 20
    return SEQ, 20, None, "truncated"


def _not_utf8(d):
    raw, at = _marked(d, PAR, 13)
    (d / PAR).write_bytes(raw[:at] + b"caf\xe9 \xff" + raw[at + len(MARK):])          # Latin-1 bytes
    return PAR, 13, "query", "not-utf8"


def _tool_off_catalog(d):
    _edit(d, SEQ, lambda es: es[2]["tool list"][0].__setitem__("tool name", "No Such Tool: Anywhere"))
    return SEQ, 2, "tool list[0].tool name", "unknown-tool"


CORRUPTIONS = [_drop_query, _drop_tool_name, _steps_not_a_list, _params_a_number, _bad_json, _truncated, _not_utf8,
               _tool_off_catalog]


@pytest.mark.parametrize("corrupt", CORRUPTIONS, ids=lambda f: f.__name__.strip("_"))
def test_each_corruption_is_named_by_file_index_and_field(real_copy, tmp_path, corrupt):
    clean = load_bench(real_copy, strict_catalog=True)      # Finance: every gold tool is in its catalog
    d = _copy(real_copy, tmp_path)
    rel, k, field, kind = corrupt(d)
    strict = kind == "unknown-tool"
    with pytest.raises(BadEntryError) as err:
        load_bench(d, strict_catalog=strict)
    line = str(err.value)
    assert "\n" not in line and f"{d}/{rel}#{k}" in line and "--skip-bad" in line, line
    assert (err.value.entry.file, err.value.entry.index, err.value.entry.field, err.value.entry.kind) == (
        rel, k, field, kind)
    if field:
        assert repr(field) in line
    bench = load_bench(d, skip_bad=True, strict_catalog=strict)
    assert [(b.file, b.index, b.field, b.kind) for b in bench.bad] == [(rel, k, field, kind)]
    lost = {f"{rel}#{k}"} if kind not in ("bad-json", "truncated") else {
        t.uid for t in clean.tasks if t.path == rel and t.index >= k}     # the rest of an unreadable file
    assert [t.uid for t in bench.tasks] == [t.uid for t in clean.tasks if t.uid not in lost]
    for t in bench.tasks:                                  # the entries kept are read exactly as before
        ref = clean.task(t.uid)
        assert (t.query, [s.tool for s in t.steps], t.final_answer) == (ref.query, [s.tool for s in ref.steps],
                                                                        ref.final_answer)


def test_off_catalog_tools_are_unscorable_steps_by_default(real_copy, tmp_path):
    """TRAJECT-Bench itself names tools missing from its catalog (docs/traject-bench.md sec 2.3), so without
    --strict-catalog such a step loads as an unscorable step."""
    d = _copy(real_copy, tmp_path)
    rel, k, _, _ = _tool_off_catalog(d)
    step = load_bench(d).task(f"{rel}#{k}").steps[0]
    assert step.key is None and not step.scorable


@pytest.fixture(scope="module")
def truncated_copy(real_copy, tmp_path_factory):
    d = _copy(real_copy, tmp_path_factory.mktemp("trunc"))
    return d, _truncated(d)


def test_replay_stops_with_one_line_or_skips(truncated_copy, tmp_path):
    d, (rel, k, _, _) = truncated_copy
    r = runner.invoke(app, ["replay", "--data", str(d), "--out", str(tmp_path / "r"), "--limit", "3", "--quiet"])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    err = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert len(err) == 1 and f"{rel}#{k}" in err[0] and "truncated" in err[0], r.output
    assert not (tmp_path / "r" / "boundaries").exists()
    r = runner.invoke(app, ["replay", "--data", str(d), "--out", str(tmp_path / "r"), "--limit", "3", "--quiet",
                            "--skip-bad"])
    assert r.exit_code == 0, r.output
    assert "skipped 1 malformed entries (--skip-bad):" in r.output and f"{rel}#{k}" in r.output
    man = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert [(b["file"], b["index"], b["kind"]) for b in man["bad_entries"]] == [(rel, k, "truncated")]


def test_eval_and_demo_stop_with_one_line(real_copy, tmp_path):
    d = _copy(real_copy, tmp_path)
    rel, k, field, _ = _drop_tool_name(d)
    for args in (["eval", "--out", str(tmp_path / "e"), "--limit", "2"],
                 ["demo", "--model", "tiny", "--out", str(tmp_path / "demo")]):
        r = runner.invoke(app, [*args, "--data", str(d)])
        assert r.exit_code == 2 and "Traceback" not in r.output, (args, r.output)
        err = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
        assert len(err) == 1 and f"{rel}#{k} field {field!r}: missing" in err[0], (args, r.output)
    r = runner.invoke(app, ["eval", "--out", str(tmp_path / "e"), "--limit", "2", "--data", str(d), "--skip-bad"])
    assert r.exit_code == 0 and f"{rel}#{k}" in r.output, r.output
    assert json.loads((tmp_path / "e" / "metrics.json").read_text())["n_tasks"] == 2
