"""`hpd harness conformance` against the real Pi (Node bridge) must report N/N identical, N >= 20."""

import json
import re
import shutil

import pytest
from typer.testing import CliRunner

from hpd.runfolder import validate_manifest

from hpd.cli import app
from hpd.harness import conformance as cf
from hpd.harness import scenario as sc

pytestmark = pytest.mark.node


def test_conformance_cli_all_identical(node_bridge, tmp_path):
    res = CliRunner().invoke(app, ["harness", "conformance", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    m = re.search(r"conformance: (\d+)/(\d+) scenarios identical to @earendil-works/pi-agent-core@1\.6\.0", res.output)
    assert m, res.output
    ok, n = int(m.group(1)), int(m.group(2))
    assert n >= 20 and ok == n
    data = json.loads((tmp_path / "conformance.json").read_text())
    assert data["n_identical"] == data["n_scenarios"] == n and data["pi_version"] == "1.6.0"
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["pi_version"] == "@earendil-works/pi-agent-core@1.6.0" and manifest["command"] == "hpd harness conformance"
    assert validate_manifest(manifest) == [] and len(manifest["inputs"]["scenarios"]["sha256"]) == 64


def test_comparison_detects_a_difference(node_bridge, tmp_path):
    """The suite can fail: a scenario run with a deliberately changed Python result differs from Pi."""
    s = sc.load_scenario(cf.SCENARIO_DIR / "01_parallel_mixed_batch.json")
    ours, pi = sc.run_python(s), __import__("hpd.harness.bridge", fromlist=["run_pi"]).run_pi(s)
    assert cf.compare(ours, pi) is None
    ours["transcript"][-2] = {**ours["transcript"][-2], "isError": False}
    assert "isError" in cf.compare(ours, pi)


def test_custom_scenario_folder_and_bad_input(node_bridge, tmp_path):
    src = cf.SCENARIO_DIR / "20_no_tool_calls_ends.json"
    shutil.copy(src, tmp_path / "mine.json")
    res = CliRunner().invoke(app, ["harness", "conformance", "--scenarios", str(tmp_path)])
    assert res.exit_code == 0 and "conformance: 1/1" in res.output
    (tmp_path / "bad.json").write_text('{"name": "bad", "replies": [], "oops": 1}')
    res = CliRunner().invoke(app, ["harness", "conformance", "--scenarios", str(tmp_path)])
    assert res.exit_code == 2 and "unknown keys" in res.output


def test_library_covers_the_issue_checklist():
    covers = {c for s in sc.load_scenarios(cf.SCENARIO_DIR) for c in s.data.get("covers", [])}
    for need in ["parallel", "validation error", "unknown tool", "thrown error", "sequential", "coercion", "malformed JSON",
                 "all-terminate", "mixed terminate", "steering during a batch", "follow-up after end", "provider error",
                 "abort", "length stop", "text and tool calls in one message", "tool calls under stopReason stop",
                 "a reply with no tool calls ends the run", "long multi-turn run", "blocked by beforeToolCall",
                 "afterToolCall override", "JS numbers", "integer-valued floats", "-0", "exponents",
                 "integers above 2^53", "NaN and Infinity", "key order", "JS numbers in tool results"]:
        assert need in covers, need
