"""Recipe headers are short and point at their page in docs/recipes/, and that page documents every
environment variable the recipe reads."""
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RECIPES = sorted(p for p in (REPO / "recipes").glob("*.sh") if not p.name.startswith("lib_"))


def header(path: Path):
    lines = path.read_text().splitlines()[1:]
    out = []
    for line in lines:
        if not line.startswith("#"):
            break
        out.append(line)
    return out


def variables(path: Path):
    """Variables the recipe takes from the environment: VAR="${VAR:-...}" and VAR="${VAR:-}",
    with those of recipes/lib_mt.sh's full body where the recipe sources all of it."""
    text = path.read_text()
    if re.search(r'^source "\$\(dirname "\$0"\)/lib_mt.sh"', text, flags=re.M):
        lib = (REPO / "recipes" / "lib_mt.sh").read_text()
        text += lib[lib.index('[[ "${MT_LIB_ONLY:-0}" == "1" ]] && return 0'):]
    return set(re.findall(r'^([A-Z][A-Z0-9_]*)="\$\{\1:-', text, flags=re.M))


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.name)
def test_recipe_header_is_short_and_names_its_page(recipe):
    lines = header(recipe)
    assert len(lines) <= 8, f"{recipe.name}: {len(lines)} header lines; the details go to docs/recipes/"
    pages = re.findall(r"docs/recipes/[\w.]+\.md", "\n".join(lines))
    assert pages, f"{recipe.name}: the header names no docs/recipes/ page"
    for page in pages:
        assert (REPO / page).is_file(), page


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.name)
def test_every_variable_of_a_recipe_is_documented(recipe):
    page = re.findall(r"docs/recipes/[\w.]+\.md", "\n".join(header(recipe)))[0]
    text = (REPO / page).read_text()
    documented = set(re.findall(r"`([A-Z][A-Z0-9_]*)`", text))
    missing = sorted(variables(recipe) - documented)
    assert not missing, f"{recipe.name}: {missing} not documented in {page}"


def test_the_checks_see_variables():
    assert {"CONTEXT", "PAIR", "SEEDS", "MAX_EPOCH"} <= variables(REPO / "recipes" / "mt_multi30k.sh")
    assert {"CONTEXT", "SMOKE", "SAVE_DIR", "ANNEAL_FROM"} <= variables(REPO / "recipes" / "mt_iwslt15.sh")
