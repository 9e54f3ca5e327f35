"""Build the Cython kernels of sktrellis.

Every ``src/sktrellis/_trellis/_*.pyx`` becomes an extension module, compiled with
``-O3`` and, where the compiler supports it, OpenMP (the kernels parallelise
over the subsets of one size with ``prange``).
"""
import os
import sys
from glob import glob

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup


def _openmp_flags():
    # gcc and clang on Linux (the supported build) take -fopenmp for compiling
    # and linking; Apple clang has no OpenMP without an extra libomp, so the
    # kernels run on one core there rather than failing to build.
    if sys.platform == "darwin":
        return [], []
    return ["-fopenmp"], ["-fopenmp"]


compile_openmp, link_openmp = _openmp_flags()
extensions = [
    Extension(
        "sktrellis._trellis." + os.path.splitext(os.path.basename(path))[0],
        [path],
        include_dirs=[numpy.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["-O3"] + compile_openmp,
        extra_link_args=link_openmp,
    )
    for path in sorted(glob(os.path.join("src", "sktrellis", "_trellis", "_*.pyx")))
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives={"language_level": "3"},
    ),
)
