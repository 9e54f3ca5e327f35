"""The public C contract of split potentials, through a user's own compiled Cython module.

The module is compiled once per session, as a user would (``cythonize -i``
against the installed ``sktrellis/energies/__init__.pxd``), and must give
the log Z, MAP tree, tree count and cluster marginals of enumeration.
"""
import importlib
import pickle
import shutil
import subprocess
import sys

import numpy as np
import pytest

from sktrellis import ExactHierarchicalClustering
from sktrellis.energies import HierarchicalEnergy, SplitPotential

from .common import brute_force, cluster_marginals, tree_splits_set

_MODULE = "sktrellis_test_split_potential"
_SOURCE = '''
from sktrellis.energies cimport SplitData, mask_t
from sktrellis.energies import register_split_function


cdef api double tabulated_log_psi(const SplitData* data, mask_t parent,
                                  mask_t left) noexcept nogil:
    # Any potential at all: one table entry per (parent, left), times a scale.
    return data.params[0] * data.tables[0][(<Py_ssize_t>parent << data.n_points) | left]


cdef api double undeclared_log_psi(const SplitData* data, mask_t parent,
                                   mask_t left) noexcept nogil:
    return 0.0


cdef api double not_a_split_potential(double x) noexcept nogil:
    return x


register_split_function(__name__, "tabulated_log_psi", tables={"psi": "4**n"}, n_params=1)
'''


@pytest.fixture(scope="session")
def user_module(tmp_path_factory):
    pytest.importorskip("Cython")
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    directory = tmp_path_factory.mktemp("user_energy")
    (directory / f"{_MODULE}.pyx").write_text(_SOURCE)
    result = subprocess.run(
        [sys.executable, "-m", "Cython.Build.Cythonize", "-i", "-q", f"{_MODULE}.pyx"],
        cwd=directory, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    sys.path.insert(0, str(directory))
    try:
        yield importlib.import_module(_MODULE)
    finally:
        sys.path.remove(str(directory))


class _Tabulated(HierarchicalEnergy):
    """log psi(S; A, B) = scale * psi[S, A], from the user's compiled function."""

    potential_kind = "function"

    def __init__(self, module=None, psi=None, scale=1.0):
        self.module = module
        self.psi = psi
        self.scale = scale

    def split_potential(self, X):
        return SplitPotential.from_cython(
            len(X), self.module, "tabulated_log_psi", {"psi": self.psi.ravel()}, [self.scale]
        )


def _random_psi(n_points, rng, forbidden=0.2):
    """A random (2**N, 2**N) table of log psi[parent, left], some splits -inf.

    The caterpillar {0..k} = {0..k-1} + {k} stays possible, so some tree is.
    """
    psi = rng.normal(scale=3.0, size=(1 << n_points, 1 << n_points))
    psi[rng.random(psi.shape) < forbidden] = -np.inf
    for k in range(1, n_points):
        psi[(1 << (k + 1)) - 1, (1 << k) - 1] = rng.normal()
    return psi


@pytest.mark.parametrize("n_points", [2, 3, 5, 7])
def test_a_cython_potential_gives_the_exact_posterior(
    user_module, n_points, global_random_seed, kernel_threads
):
    rng = np.random.default_rng(global_random_seed + 100 * n_points)
    energy = _Tabulated(user_module, _random_psi(n_points, rng), scale=0.7)
    X = np.zeros((n_points, 1))
    potential = energy.split_potential(X)
    log_z, best, trees, values = brute_force(potential, n_points)
    model = ExactHierarchicalClustering(energy, n_clusters=1).fit(X)

    assert model.log_partition_ == pytest.approx(log_z, rel=1e-12, abs=1e-12)
    assert model.map_log_potential_ == pytest.approx(best, rel=1e-12, abs=1e-12)
    assert model.n_trees_ == int(np.isfinite(values).sum())
    map_splits = tree_splits_set(model.linkage_matrix_, n_points)
    assert [v for t, v in zip(trees, values) if set(t) == map_splits] == [
        pytest.approx(best, rel=1e-12, abs=1e-12)
    ]

    marginal = cluster_marginals(trees, values, log_z, n_points)
    for subset in range(1, 1 << n_points):
        members = [i for i in range(n_points) if subset >> i & 1]
        assert model.cluster_probability(members) == pytest.approx(marginal[subset], abs=1e-12)


def test_the_function_reads_its_tables_and_parameters(user_module):
    n_points = 4
    psi = np.random.default_rng(0).normal(size=(16, 16))
    potential = SplitPotential.from_cython(
        n_points, user_module.__name__, "tabulated_log_psi", {"psi": psi.ravel()}, [2.0]
    )
    parents = np.array([0b1111, 0b1111, 0b0110], dtype=np.uint32)
    lefts = np.array([0b0001, 0b1110, 0b0100], dtype=np.uint32)  # either child may be given
    canonical = np.array([0b0001, 0b0001, 0b0010])
    np.testing.assert_array_equal(potential.evaluate(parents, lefts), 2.0 * psi[parents, canonical])
    assert potential.nbytes == psi.nbytes
    restored = pickle.loads(pickle.dumps(potential))
    np.testing.assert_array_equal(restored.evaluate(parents, lefts), potential.evaluate(parents, lefts))


def test_a_wrong_function_is_refused_by_name_and_signature(user_module):
    tables = {"psi": np.zeros(16 * 16)}
    with pytest.raises(ValueError, match="exports no C function 'missing'"):
        SplitPotential.from_cython(4, user_module, "missing", tables, [1.0])
    with pytest.raises(ValueError, match="'not_a_split_potential' .* has the signature 'double"):
        SplitPotential.from_cython(4, user_module, "not_a_split_potential", tables, [1.0])
    with pytest.raises(ValueError, match="'psi' has a non-finite entry nan"):
        SplitPotential.from_cython(4, user_module, "tabulated_log_psi", {"psi": [0.0, np.nan]})
    with pytest.raises(ValueError, match="'psi' must be a non-empty 1-d array"):
        SplitPotential.from_cython(4, user_module, "tabulated_log_psi", {"psi": np.zeros((2, 2))})
    with pytest.raises(ValueError, match="parameters must not be NaN"):
        SplitPotential.from_cython(4, user_module, "tabulated_log_psi", tables, [np.nan])
