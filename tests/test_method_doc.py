"""docs/method.md must define every section and equation label that the code cites.

Docstrings (fairseq_acvi/, recipes/, data_scripts/, benchmarks/, tests/, docs/, README.md,
BENCHMARKS.md) cite the method document as "METHOD.md §X" / "METHOD §X" (the original, external
spec) or "method.md §X" (this repository's copy), and cite equations of the ACVI paper and the
dissertation as "(P n)" / "(D n)". These tests read the files only (no imports of the package):
every cited section number must be a numbered heading of docs/method.md, and every cited equation
label and "seed 00N" must appear there.
"""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
METHOD_DOC = ROOT / "docs" / "method.md"
SELF = Path(__file__).resolve()

#: searched for section citations and equation labels (docs/: the notes and docs/results/)
SCAN_DIRS = ("fairseq_acvi", "recipes", "data_scripts", "benchmarks", "tests", "docs")
SCAN_FILES = ("README.md", "BENCHMARKS.md")
TEXT_SUFFIXES = {".py", ".sh", ".md", ".txt", ".cpp", ".cu", ".h", ".cfg", ".toml", ".yaml", ".yml"}

#: the section numbering of the original METHOD.md, which docs/method.md keeps
EXPECTED_SECTIONS = {"1", "2", "2.1", "2.2", "2.3", "2.4", "2.5", "3", "3.1", "3.2", "3.3", "3.4",
                     "4", "4.1", "4.2", "4.3", "4.4", "5"}

# "§4.1", "§4-5", "§4.1-4.3"
_SEC = r"\d+(?:\.\d+)*(?:\s*[-–]\s*\d+(?:\.\d+)*)?"
# "METHOD.md §2.2", "METHOD §4.1, §4.3", "METHOD.md §3.2 / §5", "docs/method.md §1"
SECTION_CITE = re.compile(
    r"\bmethod(?:\.md)?\s*§\s*(" + _SEC + r"(?:\s*(?:,|/|and|or|&)\s*§\s*" + _SEC + r")*)",
    re.IGNORECASE)
SEC_ITEM = re.compile(_SEC)
HEADING = re.compile(r"^#{1,6}\s+(\d+(?:\.\d+)*)\.?\s", re.MULTILINE)

# a parenthesised group that starts with an equation label: "(P 13, 17)", "(D 61-62)",
# "(P 18: 1, D 80: 2)", "(D 51, 48, 59)", "(P 4; K-sample average for ACVI, D 88)"
LABEL_GROUP = re.compile(r"\((?=[PD] \d)([^()\n]*)")
# one label inside such a group, with bare numbers that continue it ("D 51, 48, 59")
LABEL_IN_GROUP = re.compile(
    r"\b([PD]) (\d+)(?:\s*[-–]\s*(\d+))?((?:,\s*\d+(?:\s*[-–]\s*\d+)?(?=\s*[,;)]|\s*$))*)")
NUM_OR_RANGE = re.compile(r"(\d+)(?:\s*[-–]\s*(\d+))?")
# a label written anywhere in docs/method.md ("D 57", the end points of "D 63-71")
LABEL_ANYWHERE = re.compile(r"\b([PD]) (\d+)(?:\s*[-–]\s*(\d+))?(?!\d)")
SEED = re.compile(r"\bseed (00\d)\b")


def _scanned_files():
    skip = {SELF, METHOD_DOC.resolve()}
    for d in SCAN_DIRS:
        for path in sorted((ROOT / d).rglob("*")):
            if (path.is_file() and path.suffix in TEXT_SUFFIXES and "__pycache__" not in path.parts
                    and path.resolve() not in skip):
                yield path
    for name in SCAN_FILES:
        if (ROOT / name).is_file():
            yield ROOT / name


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def _expand_sections(item: str):
    """"4.1-4.3" -> 4.1, 4.2, 4.3; "4-5" -> 4, 5; "2.2" -> 2.2."""
    ends = [e.strip() for e in re.split(r"[-–]", item)]
    if len(ends) == 1:
        return [ends[0]]
    a, b = (e.split(".") for e in ends)
    if len(a) == len(b) and a[:-1] == b[:-1] and int(a[-1]) <= int(b[-1]):
        return [".".join(a[:-1] + [str(k)]) for k in range(int(a[-1]), int(b[-1]) + 1)]
    return ends


def _expand_numbers(lo: str, hi):
    lo = int(lo)
    hi = int(hi) if hi else lo
    return list(range(lo, hi + 1)) if lo <= hi <= lo + 40 else [lo, hi]


def cited_sections(text: str):
    """Section numbers cited as "METHOD(.md) §X" in ``text``: list of (number, line)."""
    out = []
    for m in SECTION_CITE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        for item in SEC_ITEM.findall(m.group(1)):
            out.extend((s, line) for s in _expand_sections(item))
    return out


def cited_labels(text: str):
    """Equation labels cited in parentheses in ``text``: list of ("P"/"D" + " " + n, line)."""
    out = []
    for g in LABEL_GROUP.finditer(text):
        line = text.count("\n", 0, g.start()) + 1
        for m in LABEL_IN_GROUP.finditer(g.group(1)):
            letter = m.group(1)
            nums = _expand_numbers(m.group(2), m.group(3))
            for lo, hi in NUM_OR_RANGE.findall(m.group(4) or ""):
                nums += _expand_numbers(lo, hi)
            out.extend((f"{letter} {n}", line) for n in nums)
    return out


def headings(doc: str):
    return set(HEADING.findall(doc))


def located_labels(doc: str):
    """Labels that docs/method.md names explicitly (a range contributes its two end points)."""
    found = set()
    for letter, lo, hi in LABEL_ANYWHERE.findall(doc):
        found.add(f"{letter} {int(lo)}")
        if hi:
            found.add(f"{letter} {int(hi)}")
    return found


def missing_sections(doc: str, citations):
    have = headings(doc)
    return sorted({f"§{s} ({where})" for s, where in citations if s not in have})


def missing_labels(doc: str, citations):
    have = located_labels(doc)
    return sorted({f"({lab}) ({where})" for lab, where in citations if lab not in have})


def _all_citations(fn):
    out = []
    for path in _scanned_files():
        rel = path.relative_to(ROOT)
        out.extend((c, f"{rel}:{line}") for c, line in fn(_read(path)))
    return out


@pytest.fixture(scope="module")
def doc():
    assert METHOD_DOC.is_file(), "docs/method.md is missing"
    return _read(METHOD_DOC)


@pytest.fixture(scope="module")
def section_citations():
    return _all_citations(cited_sections)


@pytest.fixture(scope="module")
def label_citations():
    return _all_citations(cited_labels)


def test_parsers_on_the_forms_the_code_uses():
    assert [s for s, _ in cited_sections("(METHOD.md §4.1-4.3, §5)")] == ["4.1", "4.2", "4.3", "5"]
    assert [s for s, _ in cited_sections("see METHOD §2.2/§2.4).")] == ["2.2", "2.4"]
    assert [s for s, _ in cited_sections("METHOD.md §3.2 / §5 and METHOD §4-5):")] == \
        ["3.2", "5", "4", "5"]
    assert [s for s, _ in cited_sections("the docs/method.md §3.1.")] == ["3.1"]
    assert [c for c, _ in cited_labels("(D 51, 48, 59) (P 18: 1, D 80: 2) (D 61-62)")] == \
        ["D 51", "D 48", "D 59", "P 18", "D 80", "D 61", "D 62"]
    assert [c for c, _ in cited_labels("(D 79, 002 l. 1719) (P 4; K-sample, D 88) (P 1, P 8)")] == \
        ["D 79", "P 4", "D 88", "P 1", "P 8"]
    assert located_labels("| D 57 | … (D 63-71) P 1-9") == {"D 57", "D 63", "D 71", "P 1", "P 9"}


def test_doc_keeps_the_original_section_numbering(doc):
    assert EXPECTED_SECTIONS <= headings(doc), sorted(EXPECTED_SECTIONS - headings(doc))


def test_scan_finds_the_citations(section_citations, label_citations):
    # guards against a regex that silently matches nothing
    assert len(section_citations) >= 50
    assert len(label_citations) >= 40
    assert any(where.startswith("fairseq_acvi/") for _, where in label_citations)


def test_every_cited_section_is_a_heading(doc, section_citations):
    assert missing_sections(doc, section_citations) == []


def test_every_cited_equation_label_is_located(doc, label_citations):
    assert missing_labels(doc, label_citations) == []


def test_every_cited_seed_is_referenced(doc):
    cited = {s for path in _scanned_files() for s in SEED.findall(_read(path))}
    assert cited, "no 'seed 00N' citation found"
    assert sorted(s for s in cited if f"seed {s}" not in doc) == []


def test_checks_fail_when_the_doc_loses_a_heading_or_a_label(doc, section_citations,
                                                            label_citations, tmp_path):
    # edit a copy, never docs/method.md itself
    copy = tmp_path / "method.md"
    copy.write_text(doc, encoding="utf-8")
    text = copy.read_text(encoding="utf-8")
    heading = re.search(r"^### 2\.2 .*$", text, re.MULTILINE)
    assert heading and any(s == "2.2" for s, _ in section_citations)
    edited = text.replace(heading.group(0) + "\n", "", 1)
    assert any(m.startswith("§2.2 ") for m in missing_sections(edited, section_citations))

    assert any(lab == "D 57" for lab, _ in label_citations)
    edited = re.sub(r"\bD 57\b", "D ??", text)
    assert any(m.startswith("(D 57) ") for m in missing_labels(edited, label_citations))
