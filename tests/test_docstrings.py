"""Every Example in every docstring of the package runs and prints what it shows."""
import doctest
import importlib
import pkgutil

import pytest

import sktrellis

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(sktrellis.__path__, prefix="sktrellis.")
    if not info.name.endswith("__main__")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
