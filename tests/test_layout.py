"""The test tree mirrors the package tree: tests/<pkg>/ for src/hpd/<pkg>/, tests/test_<module>.py for a
top-level module src/hpd/<module>.py; shared test material lives in tests/helpers/ only."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC, TESTS = REPO / "src" / "hpd", REPO / "tests"
NOT_MIRRORED = {"helpers"}                 # shared fixtures data and helper modules, not tests
NO_OWN_TESTS = {"bench/builtin/domains"}   # data of the built-in benchmark, tested through bench/builtin
ABOUT_THE_REPO = {"test_docs.py", "test_layout.py", "test_layers.py",
                  "test_study_runner.py",   # the scripts the study's cells run with (docs/experiments/)
                  "test_conftest.py"}       # the suite's own rules


def _packages() -> set[str]:
    return {p.parent.relative_to(SRC).as_posix() for p in SRC.rglob("__init__.py") if p.parent != SRC}


def _test_dirs() -> set[str]:
    return {p.parent.relative_to(TESTS).as_posix() for p in TESTS.rglob("test_*.py") if p.parent != TESTS}


def test_every_test_folder_names_a_package():
    extra = _test_dirs() - _packages()
    assert not extra, f"test folders without a package of that name under src/hpd: {sorted(extra)}"
    assert not any(p.name.startswith("test_") for d in NOT_MIRRORED for p in (TESTS / d).glob("*.py"))


def test_every_package_has_its_test_folder():
    missing = _packages() - _test_dirs() - NO_OWN_TESTS
    assert not missing, f"packages without tests/<package>/: {sorted(missing)}"


def test_top_level_test_files_name_top_level_modules():
    modules = {p.stem for p in SRC.glob("*.py") if p.stem != "__init__"}
    for p in TESTS.glob("test_*.py"):
        assert p.name in ABOUT_THE_REPO or p.stem[len("test_"):] in modules, p.name
    assert {"demo", "runfolder"} <= {p.stem[len("test_"):] for p in TESTS.glob("test_*.py")}
