import http.server
import io
import json
import tarfile
import threading

import pytest
from typer.testing import CliRunner

from hpd.cli import app

runner = CliRunner()


def test_cli_stats_split_eval(mini_dir, tmp_path):
    r = runner.invoke(app, ["data", "stats", "--data", str(mini_dir), "--out", str(tmp_path / "st")])
    assert r.exit_code == 0, r.output
    assert "Zoology" in r.output and json.loads((tmp_path / "st" / "stats.json").read_text())["n_tasks"] == 13
    assert (tmp_path / "st" / "manifest.json").is_file()
    r = runner.invoke(app, ["data", "split", "--data", str(mini_dir), "--out", str(tmp_path / "sp"), "--test-frac", "0.5"])
    assert r.exit_code == 0, r.output
    sp = json.loads((tmp_path / "sp" / "split.json").read_text())
    assert sp["leakage"] == {k: 0 for k in ("query", "trajectory", "twin", "template", "tool_sequence")}
    r = runner.invoke(app, ["eval", "--policy", "reference", "--data", str(mini_dir), "--out", str(tmp_path / "ev")])
    assert r.exit_code == 0, r.output
    m = json.loads((tmp_path / "ev" / "metrics.json").read_text())
    assert m["TS"] == m["Step-SR"] == m["Exact"] == m["RC"] == m["Action-Acc"] == 1.0 and m["n_tasks"] == 13
    assert "TS" in r.output and len((tmp_path / "ev" / "tasks.jsonl").read_text().splitlines()) == 13
    r = runner.invoke(app, ["eval", "--data", str(mini_dir), "--out", str(tmp_path / "ev2"),
                            "--split-file", str(tmp_path / "sp" / "split.json"), "--split", "test"])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "ev2" / "metrics.json").read_text())["n_tasks"] == sp["sizes"]["test"]


@pytest.mark.parametrize("args", [
    ["data", "stats", "--data", "/nonexistent/dir"],
    ["eval", "--out", "/tmp/x", "--policy", "nope"],
    ["eval", "--out", "/tmp/x", "--split", "test"],
    ["data", "split", "--out", "/tmp/x", "--test-frac", "2"],
])
def test_cli_bad_input_is_one_line(args, mini_dir):
    r = runner.invoke(app, args)
    assert r.exit_code == 2 and "Traceback" not in r.output


class _Server:
    def __init__(self, handler):
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def _archive(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _serve_bytes(blobs: dict[str, bytes]):
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            data = blobs.get(self.path)
            if data is None:
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            pass
    return _Server(H)


def test_fetch_from_local_server(traject_data, mini_dir, tmp_path):
    pre = "TRAJECT-Bench-2723fd8/"
    readme = (traject_data / "README.md").read_bytes()
    cat = (traject_data / "selected_category.json").read_bytes()
    good = {pre + "public_data/README.md": readme, pre + "public_data/selected_category.json": cat,
            pre + "README.md": b"top-level, ignored", pre + "../evil": b"x"}
    for f in mini_dir.rglob("*.json"):
        good[pre + "public_data/" + f.relative_to(mini_dir).as_posix()] = f.read_bytes()
    bad = dict(good)
    bad[pre + "public_data/README.md"] = b"tampered"
    srv = _serve_bytes({"/good.tar.gz": _archive(good), "/bad.tar.gz": _archive(bad)})
    try:
        out = tmp_path / "data"
        r = runner.invoke(app, ["data", "fetch", "--out", str(out), "--url", srv.url + "/good.tar.gz"])
        assert r.exit_code == 0, r.output
        man = json.loads((out / "manifest.json").read_text())
        assert set(man["verified"]) == {"README.md", "selected_category.json"}
        assert "tools/Zoology_tool.json" in man["unverified"] and "parallel/Education/simple_ver.json" in man["absent"]
        assert not (tmp_path / "evil").exists() and not (out / "../evil").exists()
        r = runner.invoke(app, ["eval", "--data", str(out), "--out", str(tmp_path / "ev")])   # --data works
        assert r.exit_code == 0, r.output
        r = runner.invoke(app, ["data", "fetch", "--out", str(tmp_path / "d2"), "--url", srv.url + "/bad.tar.gz"])
        assert r.exit_code == 2 and "checksum mismatch" in r.output and not (tmp_path / "d2" / "README.md").exists()
        r = runner.invoke(app, ["data", "fetch", "--out", str(tmp_path / "d3"), "--url", srv.url + "/missing.tar.gz"])
        assert r.exit_code == 2 and "HTTP 404" in r.output
    finally:
        srv.close()


def _fake_llm(replies: list[str], seen: list):
    class H(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(body)
            content = replies[min(len(seen) - 1, len(replies) - 1)]
            data = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            pass
    return _Server(H)


def test_judge_cached_against_fake_server(tmp_path, mini_dir):
    from hpd.eval.judge import Judge
    seen = []
    srv = _fake_llm(['{"match": true}'], seen)
    try:
        cache = tmp_path / "c.jsonl"
        j = Judge(srv.url + "/v1", "m", cache_path=cache)
        assert j.answer_match("q", "ref", "pred") is True and len(seen) == 1
        assert seen[0]["temperature"] == 0 and seen[0]["model"] == "m"
        assert j.answer_match("q", "ref", "pred") is True and len(seen) == 1      # memory cache
        assert Judge(srv.url + "/v1", "m", cache_path=cache).answer_match("q", "ref", "pred") and len(seen) == 1
        assert j.answer_match("q", "ref", "") is False and len(seen) == 1       # empty: no call
        r = runner.invoke(app, ["eval", "--data", str(mini_dir), "--out", str(tmp_path / "ev"),
                                "--judge-url", srv.url + "/v1", "--judge-model", "m"])
        assert r.exit_code == 0, r.output
        m = json.loads((tmp_path / "ev" / "metrics.json").read_text())
        assert m["TS_judge"] == 1.0 and (tmp_path / "ev" / "judge_cache.jsonl").is_file()
    finally:
        srv.close()
    seen2 = []
    srv = _fake_llm(["no json here"], seen2)
    try:
        assert Judge(srv.url, "m").answer_match("q", "r", "p") is False and len(seen2) == 3
    finally:
        srv.close()
