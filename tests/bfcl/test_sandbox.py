"""Model-produced code runs only in the sandbox: a hostile call that creates a file outside the sandbox does create it
when BFCL's executor runs unsandboxed (the control), and does not through hpd, with each isolation layer on its own
and through the whole ``hpd bfcl`` pipeline."""

import subprocess
import sys

import pytest

HOSTILE = "__import__('os').system('touch {path}')"
WRITE = "open('{path}', 'w').write('x')"


def _entry(bfcl):
    from hpd.bfcl import data

    return data.load_cases("multi_turn_base")[0].eval_entry


def test_control_bfcls_executor_unsandboxed_runs_the_hostile_call(bfcl, tmp_path):
    """Without hpd's sandbox, BFCL's own executor really runs the call (so the tests below are meaningful)."""
    path = tmp_path / "pwned-control"
    code = (
        "from hpd.bfcl import lib, data; lib.load();"
        "from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call as ex;"
        "e = data.load_cases('multi_turn_base')[0].eval_entry;"
        f"print(ex([{HOSTILE.format(path=path)!r}], e['initial_config'], e['involved_classes'], 'control', e['id']))"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=120)
    assert path.exists()


@pytest.mark.parametrize("namespaces", [True, False], ids=["namespaces+audit-hook", "audit-hook-only"])
def test_hostile_calls_do_not_escape_the_worker(bfcl, tmp_path, namespaces):
    from hpd.bfcl import sandbox

    if namespaces and not sandbox.namespaces_available():
        pytest.skip("unshare / user namespaces are not available here")
    path = tmp_path / "pwned"
    entry = _entry(bfcl)
    with sandbox.Worker(timeout=20, use_namespaces=namespaces) as w:
        info = w.ensure()
        assert info["readonly_fs"] is namespaces and (info["network_interfaces"] == ["lo"]) is namespaces
        ex = sandbox.Executor(w)
        calls = [HOSTILE.format(path=path), WRITE.format(path=path),
                 "__import__('subprocess').run(['touch', '%s'])" % path,
                 "__import__('socket').create_connection(('127.0.0.1', 9))", "cd(folder='document')"]
        out = ex.execute(entry, calls)
        assert [o.split(":")[0] for o in out[:4]] == ["Error during execution"] * 4
        assert "not allowed" in out[0] and "not allowed" in out[1]
        assert out[4] == '{"current_working_directory": "document"}'
    assert not path.exists()


def test_timeout_kills_the_worker_and_others_keep_their_state(bfcl):
    from hpd.bfcl import data, sandbox

    a, b = (c.eval_entry for c in data.load_cases("multi_turn_base")[:2])
    with sandbox.Worker(timeout=3) as w:
        ex = sandbox.Executor(w)
        ex.execute(a, ["cd(folder='document')"])
        gen = w.generation
        with pytest.raises(sandbox.SandboxError, match="timeout"):
            ex.execute(b, ["[0 for _ in iter(int, 1)]"])                 # an endless loop: killed after 3 s
        assert ex.execute(a, ["pwd()"]) == ['{"current_working_directory": "/workspace/document"}']  # replayed
        assert w.generation == gen + 1


def test_hostile_call_through_hpd_bfcl(bfcl, tok, tmp_path, OraclePolicy):
    """The whole pipeline: the model emits the right calls plus ``__import__('os').system('touch ...')``."""

    from hpd.bfcl import data, run_bfcl

    path = tmp_path / "pwned-pipeline"
    cases = data.select(["multi_turn_base"], 1, 0)
    pol = OraclePolicy(cases, tok, mode=lambda cid: "hostile", hostile_path=str(path))
    m = run_bfcl(tmp_path / "run", pol, categories="multi_turn_base", sample=1, seed=0)
    assert not path.exists()
    assert m["n_entries"] == 1 and m["isolation"]["mode"] in ("namespaces+audit-hook", "audit-hook")
    shard = (tmp_path / "run" / "shards" / "part-00000.jsonl").read_text()
    assert "__import__" in shard                                     # the call was made, and refused
