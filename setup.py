"""Build the Cython kernels of sktrellis.

Every ``src/sktrellis/_engine/**/_*.pyx`` becomes an extension module, compiled
with ``-O3``, POPCNT on x86-64 and, where the compiler supports it, OpenMP (the
kernels parallelise over the subsets of one size with ``prange``).
"""
import os
import platform
import sys
from glob import glob

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


def _openmp_flags():
    # gcc and clang on Linux (the supported build) take -fopenmp for compiling
    # and linking; Apple clang has no OpenMP without an extra libomp, so the
    # kernels run on one core there rather than failing to build.
    if sys.platform == "darwin":
        return [], []
    return ["-fopenmp"], ["-fopenmp"]


def _instruction_flags():
    # The kernels count the points of a subset (popcount) once per split or
    # pair of splits; without the POPCNT instruction gcc emits a ~12-instruction
    # bit-twiddling sequence, which made the outside pass 2x slower. Every
    # x86-64 processor since 2008 has it; other architectures need no flag.
    if platform.machine().lower() in ("x86_64", "amd64"):
        return ["-mpopcnt"]
    return []


# The best-first search keeps its clusters in a std::unordered_map.
CPP_MODULES = {"sktrellis._engine.search._best_first"}

# Set once for every kernel: they index only validated, in-range arrays and
# divide only by non-zero counts (the Python layer checks both), so Python's
# bounds, negative-index and zero-division checks would only slow the loops.
COMPILER_DIRECTIVES = {
    "language_level": "3",
    "boundscheck": False,
    "wraparound": False,
    "cdivision": True,
    "initializedcheck": False,
}


def _module_name(path):
    return os.path.splitext(os.path.relpath(path, "src"))[0].replace(os.sep, ".")


compile_openmp, link_openmp = _openmp_flags()
extensions = [
    Extension(
        _module_name(path),
        [path],
        language="c++" if _module_name(path) in CPP_MODULES else "c",
        include_dirs=[numpy.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["-O3"] + _instruction_flags() + compile_openmp,
        extra_link_args=link_openmp,
    )
    for path in sorted(
        glob(os.path.join("src", "sktrellis", "_engine", "**", "_*.pyx"), recursive=True)
    )
]



class ParallelBuildExt(build_ext):
    """Compile the extension modules on every core, not one after another.

    ``pip install .`` gives no way to pass ``--parallel``; serially the ten
    modules took about 2 minutes on an idle 2-core machine.
    """

    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1


setup(
    ext_modules=cythonize(
        extensions,
        nthreads=os.cpu_count() or 1,
        compiler_directives=COMPILER_DIRECTIVES,
    ),
    cmdclass={"build_ext": ParallelBuildExt},
)
