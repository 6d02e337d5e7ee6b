"""Every link and repository path in the documentation resolves (pure file reading).

Checks every Markdown link or image target ``](path)`` in ``docs/**/*.md``, ``BENCHMARKS.md`` and
``README.md`` (relative to its page; URLs and in-page anchors skipped) and every path quoted in
backticks that starts with ``docs/``, ``benchmarks/``, ``tests/`` or ``recipes/`` (relative to the
repository root). Results moved or renamed without their links show here.
"""
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_QUOTED = re.compile(r"`((?:docs|benchmarks|tests|recipes)/[^`\s*]+)`")


def broken_references(repo: Path):
    """``page:line: what`` for every link or quoted path in the pages that does not resolve."""
    pages = sorted(repo.glob("docs/**/*.md")) + [repo / "BENCHMARKS.md", repo / "README.md"]
    bad = []
    for page in pages:
        text = page.read_text(encoding="utf-8")

        def where(m):
            return f"{page.relative_to(repo)}:{text.count(chr(10), 0, m.start()) + 1}"
        for m in _LINK.finditer(text):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue
            if not (page.parent / target.split("#")[0]).resolve().is_file():
                bad.append(f"{where(m)}: link -> {target}")
        for m in _QUOTED.finditer(text):
            target = m.group(1).split("::")[0].rstrip(".,;:)")
            if not (repo / target).exists():
                bad.append(f"{where(m)}: path `{target}` missing")
    return bad


def test_every_link_and_quoted_path_resolves():
    assert broken_references(REPO) == []


def test_a_broken_link_and_a_missing_path_are_reported(tmp_path):
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "a.png").write_bytes(b"")
    (tmp_path / "docs" / "results" / "page.md").write_text(
        "![ok](a.png) [web](https://example.org) [here](#top)\n![gone](b.png)\n"
        "see `docs/results/page.md` and `recipes/nothing.sh`\n", encoding="utf-8")
    (tmp_path / "BENCHMARKS.md").write_text("[page](docs/results/page.md)\n", encoding="utf-8")
    (tmp_path / "README.md").write_text("", encoding="utf-8")
    assert broken_references(tmp_path) == [
        "docs/results/page.md:2: link -> b.png",
        "docs/results/page.md:3: path `recipes/nothing.sh` missing"]
