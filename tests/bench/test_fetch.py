"""`hpd data fetch`: download from a local server, lay out public_data, verify checksums, one-line errors;
and the TRAJECT-Bench fact that the pinned checksums match the real files."""

import hashlib
import json

from typer.testing import CliRunner

import hpd.bench.fetch as F
from hpd.cli import app
from hpd.runfolder import validate_manifest
from http_helpers import archive, serve_bytes

runner = CliRunner()


def test_fetch_from_local_server(mini_dir, tmp_path, monkeypatch):
    pre = "TRAJECT-Bench-2723fd8/"
    readme, cat = b"# public_data\n", b'{"Zoology": ["Animal DB"]}'
    pinned = {"README.md": readme, "selected_category.json": cat, "parallel/Education/simple_ver.json": b"[]"}
    monkeypatch.setattr(F, "known_checksums", lambda: {
        "commit": "2723fd8", "archive_url": "unused",
        "files": {rel: {"sha256": hashlib.sha256(b).hexdigest()} for rel, b in pinned.items()}})
    good = {pre + "public_data/README.md": readme, pre + "public_data/selected_category.json": cat,
            pre + "README.md": b"top-level, ignored", pre + "../evil": b"x"}
    for f in mini_dir.rglob("*.json"):
        good[pre + "public_data/" + f.relative_to(mini_dir).as_posix()] = f.read_bytes()
    bad = dict(good)
    bad[pre + "public_data/README.md"] = b"tampered"
    srv = serve_bytes({"/good.tar.gz": archive(good), "/bad.tar.gz": archive(bad)})
    try:
        out = tmp_path / "data"
        r = runner.invoke(app, ["data", "fetch", "--out", str(out), "--url", srv.url + "/good.tar.gz"])
        assert r.exit_code == 0, r.output
        man = json.loads((out / "manifest.json").read_text())
        assert validate_manifest(man) == [] and man["inputs"]["archive"]["path"].endswith("/good.tar.gz")
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


def test_pinned_checksums_match_the_real_files(traject_data):
    """A TRAJECT-Bench fact: every file of checksums.json present in the real data has its pinned sha256."""
    known = F.known_checksums()["files"]
    present = [rel for rel in known if (traject_data / rel).is_file()]
    assert len(present) >= 10
    bad = [rel for rel in present if hashlib.sha256((traject_data / rel).read_bytes()).hexdigest() != known[rel]["sha256"]]
    assert bad == []
