"""The documents the code cites live in ``docs/``, and the architecture page's picture and links hold."""

import importlib.util
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
SCANNED = ("src", "tests", "benchmarks", "configs")
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".json", ".mjs", ".js", ".html", ".jinja", ".txt", ".toml", ".cfg"}
# "docs/<file>" as a citation: not part of a longer path such as "packages/agent/docs/x.md"
CITATION = re.compile(r"(?<![\w/.-])docs/((?:[\w.-]+/)*[\w-]+\.\w+)")


def _scanned_files():
    for top in SCANNED:
        for p in sorted((REPO / top).rglob("*")):
            if p.is_file() and p.suffix in TEXT_SUFFIXES and "egg-info" not in str(p) and "__pycache__" not in p.parts:
                yield p


def _citations() -> list[tuple[str, str]]:
    out = []
    for p in _scanned_files():
        for m in CITATION.finditer(p.read_text(encoding="utf-8", errors="ignore")):
            out.append((str(p.relative_to(REPO)), m.group(1)))
    return out


def test_every_cited_doc_exists():
    cites = _citations()
    assert len({c for _, c in cites}) >= 5, "the scan found almost no citations; is the pattern broken?"
    missing = sorted({(f, c) for f, c in cites if not (DOCS / c).is_file()})
    assert not missing, f"cited but not in docs/: {missing}"


def test_no_citation_points_outside_the_repo():
    bad = []
    for p in _scanned_files():
        text = p.read_text(encoding="utf-8", errors="ignore")
        for pat in ("shared/docs/", "CONTRACTS.md"):
            if pat in text and p.name != "test_docs.py":
                bad.append((str(p.relative_to(REPO)), pat))
    assert not bad, f"cite the copy in docs/ instead: {bad}"


def test_doc_names_are_cited_with_the_docs_prefix():
    """A bare page name cannot be checked; every mention of a page in docs/ must say ``docs/<name>``."""
    names = [p.name for p in DOCS.glob("*.md")]
    bare = re.compile(r"(?<![\w/.-])(" + "|".join(re.escape(n) for n in names) + r")\b")
    bad = []
    for p in _scanned_files():
        if p.name == Path(__file__).name:  # this checker names the pages it opens
            continue
        for m in bare.finditer(p.read_text(encoding="utf-8", errors="ignore")):
            bad.append((str(p.relative_to(REPO)), m.group(1)))
    assert not bad, f"write docs/<name>: {bad}"


def test_architecture_page_shows_an_existing_picture():
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    images = re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", text)
    assert images, "docs/architecture.md must show the data-flow picture"
    for img in images:
        assert Path(img).suffix in (".svg", ".png"), img
        assert (DOCS / img).is_file(), img


def test_dataflow_svg_is_what_the_script_draws():
    spec = importlib.util.spec_from_file_location("make_dataflow", DOCS / "make_dataflow.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert (DOCS / "dataflow.svg").read_text(encoding="utf-8") == mod.render(), "run: python docs/make_dataflow.py"


def _slug(heading: str) -> str:
    """GitHub's heading anchor: lowercase, punctuation dropped, spaces to hyphens."""
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


def test_links_between_docs_resolve():
    bad = []
    for page in sorted(DOCS.glob("*.md")):
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path) if path else page
            if not dest.is_file():
                bad.append((page.name, target))
                continue
            if anchor and dest.suffix == ".md":
                heads = re.findall(r"^#+ (.+)$", dest.read_text(encoding="utf-8"), flags=re.M)
                if anchor not in {_slug(h) for h in heads}:
                    bad.append((page.name, target))
    assert not bad, f"broken links: {bad}"


def test_architecture_table_names_existing_folders():
    """Every module path in the stage table's folder column exists under src/hpd/."""
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Stages and their folders", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("|") and not ln.startswith("|---")][1:]
    assert len(rows) >= 9
    paths = [p for row in rows for p in re.findall(r"`([\w/]+(?:\.py|/))`", row.split("|")[4])]
    assert len(paths) >= 20, paths
    missing = [p for p in paths if not (REPO / "src" / "hpd" / p).exists()]
    assert not missing, missing
