"""The user guide's reStructuredText pages parse without broken references.

CI does not build the documentation, and ``sphinx-build -W`` fails on a
reference to a target that does not exist: in reStructuredText a bare word
ending in an underscore (``beta_`` written without its double backquotes)
is such a reference.
"""
import io
import pathlib

import pytest

PAGES = sorted((pathlib.Path(__file__).resolve().parents[1] / "doc").glob("*.rst"))


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_no_reference_to_an_unknown_target(page):
    core = pytest.importorskip("docutils.core")
    messages = io.StringIO()
    # Sphinx's roles and directives are unknown to plain docutils: the
    # messages are collected, and only those on references read.
    core.publish_doctree(page.read_text(), source_path=str(page),
                         settings_overrides={"report_level": 3, "halt_level": 5,
                                             "warning_stream": messages})
    unknown = [line for line in messages.getvalue().splitlines()
               if "Unknown target name" in line]
    assert not unknown, unknown
