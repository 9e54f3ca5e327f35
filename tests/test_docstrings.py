"""Docstrings: every Example runs, and every public entry passes numpydoc validation.

The validation is as strict as scikit-learn's ``sklearn/tests/test_docstrings.py``:
every numpydoc check except RT02, GL01 and GL02, with See Also, Examples and
an extended summary required of classes and functions (not of methods).
"""
import doctest
import importlib
import inspect
import pkgutil

import pytest

import sktrellis

numpydoc_validation = pytest.importorskip("numpydoc.validate")

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(sktrellis.__path__, prefix="sktrellis.")
    if not info.name.endswith("__main__")
)

# The modules a user imports from; their ``__all__`` is the public API.
PUBLIC_MODULES = [
    "sktrellis",
    "sktrellis.baselines",
    "sktrellis.datasets",
    "sktrellis.energies",
    "sktrellis.metrics",
    "sktrellis.plotting",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"


def _defined_in_sktrellis(cls, attribute):
    """Whether the class in ``cls``'s MRO that defines ``attribute`` belongs to sktrellis.

    Methods inherited from scikit-learn (``get_params``, ``fit_predict``, ...)
    are scikit-learn's docstrings, validated by scikit-learn itself.
    """
    owner = next(klass for klass in cls.__mro__ if attribute in vars(klass))
    return owner.__module__.split(".")[0] == "sktrellis"


def _public_entries():
    """``(import path, class or None, method name or None)`` of every public entry."""
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            # __version__ is a string, with no docstring of its own.
            if not (inspect.isclass(obj) or callable(obj)):
                continue
            path = f"{module_name}.{name}"
            if not inspect.isclass(obj):
                yield path, None, None
                continue
            yield path, obj, None
            for attribute in sorted(dir(obj)):
                if attribute.startswith("_") or not _defined_in_sktrellis(obj, attribute):
                    continue
                static = inspect.getattr_static(obj, attribute)
                if isinstance(static, property) or callable(getattr(obj, attribute)):
                    yield f"{path}.{attribute}", obj, attribute


ENTRIES = list(_public_entries())


def filter_errors(errors, cls, method):
    """The numpydoc errors that count for one entry, by scikit-learn's rules."""
    is_property = method is not None and isinstance(
        inspect.getattr_static(cls, method), property
    )
    for code, message in errors:
        # RT02 (a Returns line holds only the type): we name returned values.
        # GL01, GL02 (blank lines around the summary): a style choice.
        if code in ("RT02", "GL01", "GL02"):
            continue
        # A property takes no parameters and may document itself through its
        # class's Attributes section.
        if is_property and code in ("PR02", "GL08"):
            continue
        # An extended summary, See Also and Examples are asked of classes and
        # functions; a method is described by its class.
        if method is not None and code in ("EX01", "SA01", "ES01"):
            continue
        # A typing.Protocol cannot be instantiated: its signature
        # (*args, **kwargs) is typing's placeholder __init__, not parameters.
        if method is None and getattr(cls, "_is_protocol", False) and code == "PR01":
            continue
        yield code, message


@pytest.mark.parametrize(
    "path, cls, method", ENTRIES, ids=[path for path, _, _ in ENTRIES]
)
def test_numpydoc_validation(path, cls, method):
    # The object itself, not its path: numpydoc would find it by trying to
    # import every prefix of the path as a module, and under an editable
    # install each failed import of an sktrellis name runs the build check.
    obj = importlib.import_module(path.rsplit(".", 2 if method else 1)[0])
    for name in path.split(".")[len(obj.__name__.split(".")):]:
        obj = getattr(obj, name)
    result = numpydoc_validation.validate(numpydoc_validation.get_doc_object(obj))
    errors = list(filter_errors(result["errors"], cls, method))
    # Compiled (Cython) objects have no source file to point to.
    where = f" ({result['file']}:{result['file_line']})" if result["file"] else ""
    assert not errors, "\n".join(
        [f"{path}{where}"]
        + [f"  {code}: {message}" for code, message in errors]
    )


def test_every_public_module_lists_its_api():
    # A module without __all__ would count re-exported helpers as its API.
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        assert hasattr(module, "__all__"), f"{module_name} has no __all__"
        for name in module.__all__:
            assert hasattr(module, name), f"{module_name}.__all__ names missing {name!r}"
