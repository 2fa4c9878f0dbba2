"""The run folder: what every stage writes besides its results, in one place.

Every ``hpd`` command writes into an ``--out`` folder that can be killed and restarted. This module is the
bottom layer they all share (it imports nothing from hpd but the version constants):

- **Atomic writes** (:func:`write_json`, :func:`write_text`, :func:`write_jsonl`, :class:`AtomicLines`, and
  :func:`save_png` for matplotlib figures): a
  file is written to a temporary name unique to its writer (``.<name>.<random>.tmp`` beside it), flushed,
  fsync-ed and renamed over ``<name>``, so a kill leaves either the old file or the new one, never half of
  one, and two processes that write the same file never rename each other's temporary file away.
- **Config hash** (:func:`config_hash`): the first 16 hex digits of the sha256 of the config as JSON with
  sorted keys. It names what decides a stage's results; a folder holding another hash is refused
  (:func:`check_run`), never mixed.
- **Checksums** (:func:`checksum`): sha256 of a file, or of a folder's relative paths and file contents.
- **One manifest schema** (:func:`new_manifest`, :func:`finish_manifest`, :func:`validate_manifest`):
  ``manifest.json`` in every run folder has the keys of :data:`MANIFEST_FIELDS`, spelled the same everywhere
  (docs/data-contracts.md, Manifests). Stage-specific facts (counts, shard lists) are extra keys next to them.
- **A writable ``--out``** (:func:`prepare_out`) and one line for a failed write (:func:`os_error_line`: the
  file, the reason; a full disk keeps what finished).
- **One append-only shard log with resume** (:class:`ShardLog`): records keyed by an id, appended to
  ``part-NNNNN.jsonl`` files; a resumed run opens a new part and never rewrites old ones; a line cut by a
  kill is truncated away on open; the first record per id wins.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

from hpd import PI_PACKAGE, PI_VERSION, __version__

MANIFEST = "manifest.json"
STATUSES = ("running", "complete", "stopped", "failed")
#: Every manifest has exactly these keys (plus stage-specific extras); ``types`` per key.
MANIFEST_FIELDS: dict[str, tuple[type, ...]] = {
    "command": (str,),                 # the command line, or the stage name inside `hpd demo`
    "config": (dict,),                 # everything that decides the stage's results
    "config_hash": (str,),             # config_hash(config)
    "code_version": (str,),            # hpd.__version__
    "pi_version": (str,),              # "<Pi package>@<version>" the harness mirrors
    "inputs": (dict,),                 # name -> {"path": str | None, "sha256": str | None}
    "seed": (int, type(None)),
    "status": (str,),                  # running | complete | stopped
    "started": (str,),                 # ISO-8601 UTC time the run (or its latest resume) started
    "wall_s": (float, int, type(None)),  # seconds from started to the end; None while running
}
#: Spellings the old manifests used; a manifest carrying any of them is refused by the schema check.
LEGACY_KEYS = ("hpd_version", "pi", "pi_package", "data_path", "time")
#: Files larger than this are checksummed by size + first and last MiB (a 16 GB checkpoint costs < 1 s).
SAMPLE_ABOVE = 64 << 20
_MIB = 1 << 20
#: The mode an ordinary ``open(..., "w")`` would give a new file (mkstemp's own is 0600).
_UMASK = os.umask(0)
os.umask(_UMASK)
_FILE_MODE = 0o666 & ~_UMASK


class RunFolderError(ValueError):
    """A one-line problem with a run folder (another config, unreadable manifest or shard)."""


# ------------------------------------------------------------------------------------------- atomic writes
def _fsync_dir(d: Path) -> None:
    try:
        fd = os.open(str(d), os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def clear_temporaries(path: str | os.PathLike) -> None:
    """Delete the temporary files that killed writers of ``path`` left beside it (this writer's pattern and the
    older fixed ``<name>.tmp``). Only for a file that one process owns, such as a resumed stage's shard: a
    temporary file of a writer that is still running would go too."""
    path = Path(path)
    for stale in [*path.parent.glob(f".{path.name}.*.tmp"), path.with_name(path.name + ".tmp")]:
        stale.unlink(missing_ok=True)


class AtomicLines:
    """Write a text file line by line into a temporary file of its own; :meth:`commit` renames it over ``<name>``.

    ``sha256`` is the digest of everything written. Used as a context manager, an exception discards the
    temporary file and leaves any earlier ``<name>`` untouched."""

    def __init__(self, path: str | os.PathLike, *, clear_stale: bool = False):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if clear_stale:
            clear_temporaries(self.path)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp")
        self.tmp = Path(tmp)
        os.fchmod(fd, _FILE_MODE)
        self._fh = os.fdopen(fd, "w", encoding="utf-8")
        self._h = hashlib.sha256()

    def write(self, text: str) -> None:
        self._h.update(text.encode("utf-8"))
        self._fh.write(text)

    @property
    def sha256(self) -> str:
        return self._h.hexdigest()

    def commit(self) -> Path:
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        os.replace(self.tmp, self.path)
        _fsync_dir(self.path.parent)
        return self.path

    def discard(self) -> None:
        try:
            self._fh.close()
        except OSError:   # a full disk fails the close's flush too; the temporary file goes either way
            pass
        self.tmp.unlink(missing_ok=True)

    def __enter__(self) -> "AtomicLines":
        return self

    def __exit__(self, exc_type, *_) -> bool:
        if exc_type is None:
            self.commit()
        else:
            self.discard()
        return False


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` atomically; returns the path."""
    with AtomicLines(path) as f:
        f.write(text)
    return f.path


_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(obj: Any, *, sort_keys: bool = False, indent: int | None = 2) -> str:
    """The one JSON spelling of run-folder files: UTF-8, non-JSON values as ``str``. Strings are spelled as
    well-formed ``JSON.stringify`` spells them: a surrogate pair held as two code points is written as its
    character, a lone surrogate (which UTF-8 cannot encode) as a ``\\udXXX`` escape that reads back the same."""
    seps = (",", ":") if indent is None else None
    s = json.dumps(obj, ensure_ascii=False, indent=indent, sort_keys=sort_keys, default=str, separators=seps)
    if not _SURROGATE.search(s):
        return s
    s = _PAIR.sub(lambda m: m.group().encode("utf-16", "surrogatepass").decode("utf-16"), s)
    return _SURROGATE.sub(lambda m: "\\u%04x" % ord(m.group()), s)


def write_json(path: str | os.PathLike, obj: Any, *, sort_keys: bool = False) -> Path:
    """Write ``obj`` as indented JSON atomically (keys in insertion order unless ``sort_keys``)."""
    return write_text(path, dumps(obj, sort_keys=sort_keys) + "\n")


def write_jsonl(path: str | os.PathLike, rows: Iterable[Any], *, sort_keys: bool = False) -> str:
    """Write one compact JSON object per line atomically; returns the file's sha256."""
    with AtomicLines(path) as f:
        for r in rows:
            f.write(dumps(r, sort_keys=sort_keys, indent=None) + "\n")
    return f.sha256


def save_png(fig, path: str | os.PathLike) -> Path:
    """The one way hpd saves a matplotlib figure: tight layout, parent folders created, PNG at 110 dpi, written
    atomically like every file here (a temporary file of its own, renamed over ``path``), the figure closed."""
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fig.tight_layout()
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                os.fchmod(fh.fileno(), _FILE_MODE)
                fig.savefig(fh, format="png", dpi=110)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    finally:
        plt.close(fig)
    _fsync_dir(path.parent)
    return path


def read_json(path: str | os.PathLike, what: str = "file") -> Any:
    """A JSON file, or a one-line :class:`RunFolderError` naming ``what`` when it is missing or broken."""
    p = Path(path)
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunFolderError(f"no {what} at {p}") from None
    except (OSError, ValueError) as e:
        raise RunFolderError(f"unreadable {what} {p}: {e}") from None


def prepare_out(out: str | os.PathLike) -> Path:
    """Create the ``--out`` folder (with its parents) and prove that it takes a file, or raise a one-line
    :class:`RunFolderError` (a file in the way, no permission, a read-only or full file system)."""
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise RunFolderError(f"--out {p} is a file, not a folder")
    try:
        p.mkdir(parents=True, exist_ok=True)
        probe = p / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise RunFolderError(f"--out {p} is not writable: {os_error_line(e)}") from None
    return p


def os_error_line(exc: OSError) -> str:
    """One line for a failed write: the file and the reason; a full disk says that finished work is kept."""
    where = exc.filename or "the run folder"
    if exc.errno == errno.ENOSPC:
        return (f"no space left on the device while writing {where}; finished stages and shards are kept: "
                "free some space and rerun the same command to resume")
    return f"{exc.strerror or exc} ({where})"


# ------------------------------------------------------------------------------------------- hashes
def config_hash(config: Any) -> str:
    """sha256 (16 hex) of ``config`` as JSON with sorted keys (non-JSON values as ``str``)."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _file_digest(path: Path, h) -> None:
    size = path.stat().st_size
    with path.open("rb") as fh:
        if size > SAMPLE_ABOVE:
            h.update(f"sampled:{size}:".encode())
            h.update(fh.read(_MIB))
            fh.seek(size - _MIB)
            h.update(fh.read(_MIB))
            return
        for chunk in iter(lambda: fh.read(_MIB), b""):
            h.update(chunk)


def checksum(path: str | os.PathLike, pattern: str = "*") -> str | None:
    """sha256 of a file's bytes, or of a folder's files matching ``pattern`` (relative path + bytes, sorted).
    Files over :data:`SAMPLE_ABOVE` bytes contribute their size and first and last MiB. ``None`` when the
    path does not exist (a URL, an in-memory input)."""
    p = Path(path)
    h = hashlib.sha256()
    if p.is_file():
        _file_digest(p, h)
        return h.hexdigest()
    if not p.is_dir():
        return None
    for f in sorted(x for x in p.rglob(pattern) if x.is_file()):
        h.update(f.relative_to(p).as_posix().encode())
        h.update(b"\0")
        _file_digest(f, h)
        h.update(b"\0")
    return h.hexdigest()


def records_checksum(records: Iterable[Any]) -> str:
    """sha256 of in-memory records (one compact sorted-key JSON line each)."""
    h = hashlib.sha256()
    for r in records:
        h.update(json.dumps(r, sort_keys=True, default=str).encode())
        h.update(b"\n")
    return h.hexdigest()


def input_entry(path: str | os.PathLike | None, *, sha256: str | None = None, pattern: str = "*") -> dict:
    """``{"path", "sha256"}`` of one input; the checksum is computed unless given."""
    if path is None:
        return {"path": None, "sha256": sha256}
    return {"path": str(path), "sha256": sha256 if sha256 is not None else checksum(path, pattern)}


# ------------------------------------------------------------------------------------------- manifests
def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def new_manifest(command: str | None, config: dict, *, inputs: dict[str, Any] | None = None,
                 seed: int | None = None, **extra: Any) -> dict:
    """A ``running`` manifest. ``command`` defaults to the process's command line; ``inputs`` maps a
    name to a path (checksummed here) or to a ready ``{"path", "sha256"}`` entry; None values are left out."""
    ins = {name: v if isinstance(v, dict) else input_entry(v) for name, v in (inputs or {}).items() if v is not None}
    man = {
        "command": command if command is not None else " ".join(["hpd", *sys.argv[1:]]),
        "config": config,
        "config_hash": config_hash(config),
        "code_version": __version__,
        "pi_version": f"{PI_PACKAGE}@{PI_VERSION}",
        "inputs": ins,
        "seed": seed,
        "status": "running",
        "started": _now(),
        "wall_s": None,
    }
    clash = sorted(set(extra) & set(man))
    if clash:
        raise ValueError(f"extra manifest keys {clash} would overwrite schema fields")
    man.update(extra)
    return man


def finish_manifest(manifest: dict, status: str = "complete", **extra: Any) -> dict:
    """Mark ``manifest`` finished: ``status``, ``wall_s`` since ``started``, and stage facts in ``extra``."""
    if status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}")
    start = datetime.fromisoformat(manifest["started"])
    manifest.update(extra)
    manifest["status"] = status
    manifest["wall_s"] = round((datetime.now(timezone.utc) - start).total_seconds(), 3)
    return manifest


def validate_manifest(man: Any) -> list[str]:
    """Every way ``man`` departs from the schema (``[]`` when it conforms)."""
    if not isinstance(man, dict):
        return ["not a JSON object"]
    bad = [f"missing {k}" for k in MANIFEST_FIELDS if k not in man]
    for k, types in MANIFEST_FIELDS.items():
        if k in man and (not isinstance(man[k], types) or isinstance(man[k], bool)):
            bad.append(f"{k} has type {type(man[k]).__name__}")
    bad += [f"legacy key {k}" for k in LEGACY_KEYS if k in man]
    if bad:
        return bad
    if man["config_hash"] != config_hash(man["config"]):
        bad.append("config_hash is not config_hash(config)")
    if man["code_version"] != __version__ or man["pi_version"] != f"{PI_PACKAGE}@{PI_VERSION}":
        bad.append("code_version / pi_version differ from this checkout")
    if man["status"] not in STATUSES:
        bad.append(f"status {man['status']!r}")
    elif (man["wall_s"] is None) != (man["status"] == "running"):
        bad.append("wall_s must be None exactly while running")
    try:
        datetime.fromisoformat(man["started"])
    except ValueError:
        bad.append("started is not an ISO time")
    for name, e in man["inputs"].items():
        if not (isinstance(e, dict) and set(e) == {"path", "sha256"}
                and all(v is None or isinstance(v, str) for v in e.values())):
            bad.append(f"input {name!r} is not {{path, sha256}}")
        elif e["sha256"] is not None and len(e["sha256"]) != 64:
            bad.append(f"input {name!r}: sha256 is not 64 hex digits")
    return bad


def read_manifest(out: str | os.PathLike) -> dict | None:
    """The folder's manifest, or None when there is none (an unreadable one is an error)."""
    p = Path(out) / MANIFEST
    return read_json(p, "manifest") if p.is_file() else None


def finished_manifest(out: str | os.PathLike, what: str, *, required: bool = False,
                      hint: str = "rerun its command to finish it") -> dict | None:
    """The manifest of a FINISHED run folder: the one check before a stage reads another stage's folder.

    ``out``'s manifest when its status is ``complete``; None when ``out`` has none and ``required`` is False (a
    folder older than manifests). A one-line :class:`RunFolderError` when the manifest is unreadable, absent and
    ``required`` (``<out>: no manifest.json (not a finished <what>)``), or records a run that did not finish
    (``<out> is an unfinished <what> (manifest status 'running'); <hint>``)."""
    man = read_manifest(out)
    if man is None:
        if required:
            raise RunFolderError(f"{out}: no {MANIFEST} (not a finished {what})")
        return None
    if man.get("status") != "complete":
        raise RunFolderError(f"{out} is an unfinished {what} (manifest status {man.get('status')!r}); {hint}")
    return man


def _dig(man: dict, dotted: str) -> Any:
    v: Any = man
    for part in dotted.split("."):
        v = v.get(part) if isinstance(v, dict) else None
    return v


def check_run(out: str | os.PathLike, manifest: dict, *, what: str, keys: tuple[str, ...] = ("config_hash",),
              overwrite: bool = False) -> list[str]:
    """Refuse to mix runs: if ``out`` holds a manifest that differs from ``manifest`` in any of ``keys``
    (dotted paths), raise a one-line :class:`RunFolderError`, unless ``overwrite`` (the caller then clears
    the folder's results). Returns the keys that differ (``[]`` for a new folder or the same run)."""
    p = Path(out) / MANIFEST
    if not p.is_file():
        return []
    try:
        old = json.loads(p.read_text(encoding="utf-8"))
    except ValueError:
        old = {}
    diff = [k.split(".")[-2] if k.endswith(".sha256") else k for k in keys if _dig(old, k) != _dig(manifest, k)]
    if diff and not overwrite:
        raise RunFolderError(f"{out} holds {what} with a different {', '.join(diff)}; use another --out or --overwrite")
    return diff


# ------------------------------------------------------------------------------------------- the shard log
class ShardLog:
    """Append-only, resumable records in ``<folder>/part-NNNNN.jsonl`` (see module docstring).

    ``read()`` repairs torn tails and returns ``{id: record}`` (first wins, part then line order);
    ``append(records)`` writes them to this session's part (opened lazily, after the newest existing part)
    and flushes + fsyncs them together; ``clear()`` removes every part."""

    def __init__(self, folder: str | os.PathLike, *, key: str, prefix: str = "part"):
        self.dir = Path(folder)
        self.key = key
        self.prefix = prefix
        self._fh = None
        self._path: Path | None = None

    def parts(self) -> list[Path]:
        return sorted(self.dir.glob(f"{self.prefix}-*.jsonl")) if self.dir.is_dir() else []

    def _repair(self) -> None:
        for p in self.parts():
            data = p.read_bytes()
            if data and not data.endswith(b"\n"):
                with p.open("r+b") as f:
                    f.truncate(data.rfind(b"\n") + 1)
                    f.flush()
                    os.fsync(f.fileno())

    def iter_records(self) -> Iterator[dict]:
        """Every complete record in part then line order (duplicates included)."""
        for p in self.parts():
            with p.open("rb") as f:
                for line in f:
                    if not line.endswith(b"\n"):
                        break
                    try:
                        yield json.loads(line)
                    except ValueError:
                        continue

    def read(self) -> dict[str, dict]:
        if self._fh is None:
            self._repair()
        out: dict[str, dict] = {}
        for rec in self.iter_records():
            k = rec.get(self.key)
            if k is not None and k not in out:
                out[k] = rec
        return out

    def append(self, records: Iterable[dict], *, sort_keys: bool = False, sync: bool = True) -> None:
        """Append complete lines and flush them (a SIGKILL cannot lose them); ``sync`` also fsyncs (a power
        loss cannot either), else call :meth:`sync` after a batch of appends."""
        lines = [dumps(r, sort_keys=sort_keys, indent=None) + "\n" for r in records]
        if not lines:
            return
        if self._fh is None:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._repair()
            parts = self.parts()
            nxt = int(parts[-1].stem.rsplit("-", 1)[1]) + 1 if parts else 0
            self._path = self.dir / f"{self.prefix}-{nxt:05d}.jsonl"
            self._fh = self._path.open("a", encoding="utf-8")
            _fsync_dir(self.dir)
        self._fh.write("".join(lines))
        self._fh.flush()
        if sync:
            os.fsync(self._fh.fileno())

    @staticmethod
    def as_read(record: dict, *, sort_keys: bool = False) -> dict:
        """``record`` as :meth:`read` gives it back after an :meth:`append` with the same ``sort_keys`` (JSON
        types, key order): what a run that goes on in memory should hold, so that it equals a resumed run."""
        return json.loads(dumps(record, sort_keys=sort_keys, indent=None))

    def sync(self) -> None:
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self.sync()
            self._fh.close()
            self._fh = None

    def clear(self) -> None:
        self.close()
        for p in self.parts():
            p.unlink()

    def __enter__(self) -> "ShardLog":
        return self

    def __exit__(self, *_) -> bool:
        self.close()
        return False


def open_shards(out: str | os.PathLike, manifest: dict, *, what: str, key: str, overwrite: bool = False) -> "ShardLog":
    """A resumable stage's start: :func:`check_run` (one-line :class:`RunFolderError` on a folder of
    another run), then ``out/shards`` as a :class:`ShardLog` keyed by ``key``, emptied when ``overwrite``."""
    check_run(out, manifest, what=what, overwrite=overwrite)
    log = ShardLog(Path(out) / "shards", key=key)
    if overwrite:
        log.clear()
    return log
