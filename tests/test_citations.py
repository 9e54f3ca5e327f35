"""One correct reference per paper everywhere."""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCES = sorted(
    path for pattern in ("src/**/*.py", "src/**/*.pyx", "doc/*.rst", "README.md", "examples/**/*.py")
    for path in ROOT.glob(pattern)
)


@pytest.mark.parametrize(
    "wrong",
    [
        "Craig et al.",                                     # first name, not surname
        "uncertainty in hierarchical clustering",          # a title mixing both papers
        "R. Levy",                                          # Kumar & Levy are V. and D.
    ],
)
def test_no_mixed_up_citation(wrong):
    found = [str(p.relative_to(ROOT)) for p in SOURCES if wrong in p.read_text()]
    assert not found, f"{wrong!r} in {found}"


def test_the_aistats_paper_has_one_title():
    titles = set()
    for path in SOURCES:
        text = " ".join(path.read_text().split())
        for match in re.finditer(r"([A-Z][^.]*?)\.\*? AISTATS 2021", text):
            titles.add(match.group(1).strip("* "))
    assert titles <= {"Data structures & algorithms for exact inference in hierarchical clustering"}, titles


def test_the_a_star_paper_is_cited_as_itself():
    """The A* paper (UAI 2021) is cited only under its own title and venue."""
    for path in SOURCES:
        text = " ".join(path.read_text().split())
        for match in re.finditer(r"Exact and approximate hierarchical clustering using A\*", text):
            following = text[match.end() : match.end() + 40]
            assert "UAI 2021" in following and "AISTATS" not in following, (path, following)
