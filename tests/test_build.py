"""The meson build installs every module: each source file is named in its directory's meson.build.

meson lists files explicitly (no globbing), so a module added without its
line would import from the source tree and be missing from every install.
"""
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "sktrellis"
DIRECTORIES = sorted(path.parent for path in PACKAGE.rglob("__init__.py"))


def _named(directory):
    """The quoted names in a directory's meson.build (comments left out)."""
    text = re.sub(r"#.*", "", (directory / "meson.build").read_text())
    return set(re.findall(r"'([^'\n]+)'", text))


@pytest.mark.parametrize("directory", DIRECTORIES, ids=lambda d: str(d.relative_to(PACKAGE.parent)))
def test_every_source_file_is_listed(directory):
    named = _named(directory)
    missing = [path.name for path in directory.glob("*.py") if path.name not in named]
    # An extension is listed by its module name, its source being name + '.pyx'.
    missing += [path.name for path in directory.glob("_*.pyx") if path.stem not in named]
    assert not missing, f"add to {directory / 'meson.build'}: {missing}"
    parent = directory.parent
    if directory != PACKAGE:
        assert f"subdir('{directory.name}')" in (parent / "meson.build").read_text()


def test_package_data_and_the_c_contract_are_installed():
    assert "__init__.pxd" in _named(PACKAGE / "energies")
    for path in (PACKAGE / "data").iterdir():
        assert f"data/{path.name}" in _named(PACKAGE), path.name
