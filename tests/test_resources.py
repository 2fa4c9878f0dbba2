"""hpd's own files (hpd.resources): the shipped configs are package data found through importlib.resources (in a
checkout ``src/hpd/configs`` links to ``configs/``), ``--config configs/...`` works from any folder, and a built
wheel carries the configs."""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from hpd.resources import checkout, config_file, configs_dir, shipped_config

REPO = Path(__file__).resolve().parents[1]


def _yaml(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.yaml"))


def test_the_shipped_configs_are_the_checkouts_configs():
    assert checkout() == REPO
    assert configs_dir() == Path(sys.modules["hpd"].__file__).parent / "configs"
    assert configs_dir().resolve() == REPO / "configs"              # the link: configs/ is the one copy
    assert _yaml(configs_dir()) == _yaml(REPO / "configs") and "methods/dpo-smollm2.yaml" in _yaml(configs_dir())
    assert shipped_config("methods", "grpo-tiny-cpu.yaml").read_text() == \
        (REPO / "configs" / "methods" / "grpo-tiny-cpu.yaml").read_text()
    with pytest.raises(FileNotFoundError, match="^configs/methods/nope.yaml: hpd ships no such config$"):
        shipped_config("methods", "nope.yaml")


def test_a_configs_path_is_found_from_any_folder(tmp_path, monkeypatch):
    from hpd.train.config import load_config

    monkeypatch.chdir(tmp_path)
    assert config_file("configs/qwen3-8b.yaml") == configs_dir() / "qwen3-8b.yaml"
    assert load_config("configs/tiny-cpu.yaml").model.path == "tiny:xs"
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "qwen3-8b.yaml").write_text("own: 1\n")
    assert config_file("configs/qwen3-8b.yaml") == Path("configs/qwen3-8b.yaml")   # a file that is there wins
    assert config_file("configs/nope.yaml") == Path("configs/nope.yaml")            # not shipped: as given
    assert config_file("elsewhere/qwen3-8b.yaml") == Path("elsewhere/qwen3-8b.yaml")


@pytest.mark.slow
def test_a_wheel_ships_the_configs(tmp_path):
    """Build the wheel (from a copy of the checkout, links kept, so the build leaves nothing here), install it
    into a folder of its own and load ``configs/...`` from another folder."""
    src = tmp_path / "checkout"
    junk = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for part in ("src", "configs"):
        shutil.copytree(REPO / part, src / part, symlinks=True, ignore=junk)
    for f in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / f, src / f)
    assert (src / "src" / "hpd" / "configs").is_symlink()
    env = {**os.environ, "PIP_NO_INDEX": "1"}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path / "dist"), str(src)], check=True, env=env, timeout=600)
    wheel = next((tmp_path / "dist").glob("hpd-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"hpd/configs/{f}" for f in _yaml(REPO / "configs")} <= names
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(tmp_path / "site"),
                    str(wheel)], check=True, env=env, timeout=600)
    (tmp_path / "elsewhere").mkdir()
    code = ("import hpd, hpd.train.config as c; print(hpd.__file__); "
            "print(c.load_config('configs/qwen3-8b.yaml').data.max_length)")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path / "elsewhere", capture_output=True, text=True,
                       env={**env, "PYTHONPATH": str(tmp_path / "site")}, timeout=300)
    assert r.returncode == 0, r.stderr
    where, max_length = r.stdout.split()
    assert Path(where).is_relative_to(tmp_path / "site") and int(max_length) > 0
