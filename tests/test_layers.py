"""The import contract: three layers, imports going down only, no import cycles.

``lint-imports`` (import-linter, configured in pyproject.toml) checks the
Python modules; Cython sources are invisible to it, so their imports are
checked here; and every module must import first, in a fresh interpreter,
which no import cycle survives.
"""
import os
import pkgutil
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import sktrellis

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(sktrellis.__file__).resolve().parent
MODULES = sorted(
    info.name for info in pkgutil.walk_packages(sktrellis.__path__, prefix="sktrellis.")
)


def test_the_import_contract_is_kept():
    try:
        import importlinter
    except ImportError:
        pytest.fail("import-linter is a test dependency: pip install import-linter")
    # Without site (-S): in an editable install (README, "For developers")
    # the package is served by meson-python's import hook, whose virtual
    # __path__ import-linter cannot walk; with -S only PYTHONPATH is searched:
    # the package's own directory first, then import-linter's.
    path = os.pathsep.join([str(PACKAGE.parent), str(Path(importlinter.__file__).parents[1])])
    result = subprocess.run(
        [sys.executable, "-S", "-c",
         "import sys; from importlinter.cli import lint_imports_command; lint_imports_command()",
         "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": path},
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


_IMPORT = re.compile(
    r"^\s*(?:from\s+(\.*[\w.]*)\s+(c?import)|(c?import)\s+([\w.]+))", re.MULTILINE
)


def _cython_imports(path):
    """(module, keyword) of the sktrellis modules a .pyx/.pxd file imports or cimports."""
    package = path.relative_to(PACKAGE.parent).parent.as_posix().replace("/", ".")
    for relative, keyword, keyword_plain, absolute in _IMPORT.findall(path.read_text()):
        name, keyword = (relative, keyword) if relative else (absolute, keyword_plain)
        if name.startswith("."):
            dots = len(name) - len(name.lstrip("."))
            base = package.split(".")[: len(package.split(".")) - (dots - 1)]
            name = ".".join(base + ([name.lstrip(".")] if name.lstrip(".") else []))
        if name.startswith("sktrellis"):
            yield name, keyword


@pytest.mark.parametrize(
    "path", sorted((PACKAGE / "_engine").rglob("*.p[yx][xd]")), ids=lambda p: p.name
)
def test_compiled_engine_imports_nothing_above_it(path):
    # The public C contract sktrellis/energies/__init__.pxd declares only
    # types, so cimporting it adds no run-time import of the models layer.
    above = [
        f"{keyword} {name}" for name, keyword in _cython_imports(path)
        if not name.startswith("sktrellis._engine")
        and (name, keyword) != ("sktrellis.energies", "cimport")
    ]
    assert above == [], f"{path.name} imports {above} from above the engine"


@pytest.mark.slow  # one interpreter per distinct first import
def test_every_module_imports_first_in_a_fresh_interpreter():
    # One fresh interpreter per module (forked before sktrellis is imported),
    # so a cycle that only the usual import order hides fails here.
    script = textwrap.dedent(
        """
        import importlib, importlib.util, os, sys, traceback
        # The heavy third-party imports, shared: a child then pays for
        # sktrellis' own modules only.
        import numpy, scipy.sparse, scipy.cluster.hierarchy, sklearn.base
        import sklearn.metrics, sklearn.model_selection, sklearn.pipeline
        # Found here, not imported: an editable install's import hook checks
        # its build once, not once per child.
        importlib.util.find_spec("sktrellis")
        failures, loaded = [], {}
        for name in ["sktrellis", *sys.argv[1:]]:
            # Importing a module imports its package first: if the package's
            # own fresh import (its child, before this one) imported the
            # module, this child would repeat exactly that import (most
            # modules come with `import sktrellis`: six children, not 83).
            parent = name.rpartition(".")[0]
            if name in loaded.get(parent, ()):
                loaded[name] = loaded[parent]
                continue
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read)
                try:
                    importlib.import_module(name)
                except BaseException:
                    traceback.print_exc()
                    os._exit(1)
                os.write(write, " ".join(sys.modules).encode())
                os._exit(0)
            os.close(write)
            with os.fdopen(read, "rb") as pipe:
                loaded[name] = set(pipe.read().decode().split())
            if os.waitpid(pid, 0)[1] != 0:
                failures.append(name)
        print("FAILED", *failures)
        sys.exit(1 if failures else 0)
        """
    )
    if not hasattr(os, "fork"):
        pytest.skip("needs os.fork")
    result = subprocess.run(
        [sys.executable, "-c", script, *MODULES], capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(PACKAGE.parent)},
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
