"""``hpd data fetch``: download TRAJECT-Bench at a pinned commit and lay out ``public_data`` for ``--data``.

Source: the GitHub archive of ``PengfeiHePower/TRAJECT-Bench`` at commit
``2723fd890778dbfb6af9e3aa8ee1c22272979468`` (the HEAD measured in docs/traject-bench.md, 2025-11-17), i.e.
``https://github.com/PengfeiHePower/TRAJECT-Bench/archive/<sha>.tar.gz``. ``--url`` overrides it (a mirror,
or a local server in tests); ``.tar.gz``/``.tgz``/``.tar`` and ``.zip`` archives are accepted.

What it does: stream the archive to a temporary file; take every regular file under a ``public_data/``
folder of the archive (any top-level prefix, e.g. ``TRAJECT-Bench-<sha>/public_data/``) and write it under
``OUT`` with the prefix removed, so ``--data OUT`` works; refuse absolute paths and ``..``. Verify every
extracted file that ``checksums.json`` knows (sha256 from a mirror of the pinned commit): a mismatch is an
error (the file is removed, exit 2). Files without a known checksum are listed as ``unverified`` (e.g. a
domain the mirror lacked), known files absent from the archive as ``absent`` (the mirror misses
``parallel/News_Media/*`` and ``tools/all_tools.json``, which are >= 4 MiB; the HF dataset
``bigboss24/TRAJECT-Bench`` may hold them). Writes ``OUT/manifest.json`` with the report.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tarfile
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

CHECKSUMS_FILE = Path(__file__).with_name("checksums.json")


class FetchError(Exception):
    """A one-line, user-facing failure of ``fetch``."""


def known_checksums() -> dict:
    return json.loads(CHECKSUMS_FILE.read_text(encoding="utf-8"))


def default_url() -> str:
    return known_checksums()["archive_url"]


def _download(url: str, dest: Path, timeout: float) -> None:
    if url.startswith("file://") or Path(url).exists():
        src = Path(url[7:] if url.startswith("file://") else url)
        shutil.copyfile(src, dest)
        return
    import httpx
    try:
        with httpx.stream("GET", url, follow_redirects=True, timeout=timeout) as r:
            if r.status_code != 200:
                raise FetchError(f"download failed: HTTP {r.status_code} for {url}")
            with open(dest, "wb") as f:
                for chunk in r.iter_bytes():
                    f.write(chunk)
    except httpx.HTTPError as e:
        raise FetchError(f"download failed: {type(e).__name__}: {e}") from e


def _rel_in_public_data(name: str) -> str | None:
    p = PurePosixPath(name)
    if p.is_absolute() or ".." in p.parts:
        return None
    parts = p.parts
    if "public_data" not in parts:
        return None
    i = parts.index("public_data")
    rest = parts[i + 1:]
    return "/".join(rest) if rest else None


def _members(archive: Path):
    """Yield ``(relative path under public_data, reader)`` for regular files of the archive."""
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                if info.is_dir():
                    continue
                rel = _rel_in_public_data(info.filename)
                if rel:
                    yield rel, (lambda info=info: z.read(info))
        return
    try:
        tf = tarfile.open(archive, "r:*")
    except tarfile.TarError as e:
        raise FetchError(f"not a tar or zip archive: {e}") from e
    with tf:
        for m in tf.getmembers():
            if not m.isfile():
                continue
            rel = _rel_in_public_data(m.name)
            if rel:
                yield rel, (lambda m=m: tf.extractfile(m).read())


def fetch(out: Path, url: str | None = None, *, timeout: float = 120.0, checksums: dict | None = None) -> dict:
    """Download, extract and verify (see module docstring). Returns the report (also ``OUT/manifest.json``)."""
    from hpd.runfolder import checksum, finish_manifest, new_manifest, write_json

    out = Path(out)
    url = url or default_url()
    known = (checksums or known_checksums())["files"]
    out.mkdir(parents=True, exist_ok=True)
    man = new_manifest("hpd data fetch", {"url": url, "timeout": timeout})
    with tempfile.TemporaryDirectory() as td:
        arc = Path(td) / "archive"
        _download(url, arc, timeout)
        man["inputs"]["archive"] = {"path": url, "sha256": checksum(arc)}
        written, verified, unverified, bad = [], [], [], []
        for rel, read in _members(arc):
            data = read()
            dest = out / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
            written.append(rel)
            want = known.get(rel)
            if want is None:
                unverified.append(rel)
            elif hashlib.sha256(data).hexdigest() != want["sha256"]:
                bad.append(rel)
                dest.unlink()
            else:
                verified.append(rel)
    if not written:
        raise FetchError(f"no public_data/ files found in the archive from {url}")
    absent = sorted(set(known) - set(written))
    report = finish_manifest(
        man, commit=known_checksums().get("commit"), out=str(out), files=len(written), verified=sorted(verified),
        unverified=sorted(unverified), absent=absent, checksum_mismatch=sorted(bad))
    write_json(out / "manifest.json", report)
    if bad:
        raise FetchError(f"checksum mismatch for {len(bad)} file(s): {', '.join(sorted(bad)[:5])} (removed)")
    return report
