"""
=============================
A new O(1) energy in Cython
=============================

The exact trellis scores about 3**N / 2 splits, each in O(1) from tables
over the 2**N subsets. An energy of the separable form
``f(S) + c(|S|) (g(A) + g(B))`` needs only NumPy tables (see "A new energy
without kernel code"). Any other O(1) energy runs just as fast as a C
function in a small Cython module of your own, written against the public
contract ``sktrellis/energies/__init__.pxd`` (installed with the package)
and handed to :meth:`SplitPotential.from_cython
<sktrellis.energies.SplitPotential>`. The kernels call it for every split;
sktrellis itself is neither edited nor rebuilt. The built-in
:class:`~sktrellis.energies.GinkgoLikelihood` is written this way.

The function receives the parent subset and the child ``left`` holding the
parent's lowest point (the other child is ``parent ^ left``), as bit masks,
with ``data.tables`` (the float64 tables you pass, indexed by mask) and
``data.params`` (your scalar parameters). It returns the log potential of
the split: finite, or ``-inf`` to forbid it, never NaN or ``+inf``. It runs
without the GIL, on several threads at once, and only reads ``data``.

Here a split costs the mean distance between its two sides, ::

    log psi(S; A, B) = -beta D(A, B) / (|A| |B|),

with D(A, B) the summed distance between the points of A and of B: the
height at which average linkage (UPGMA) merges A and B. A tree's log
potential is -beta times its total merge height; UPGMA builds its tree
greedily, the trellis finds the tree of least total height exactly, and
the posterior around it. The division by ``|A| |B|`` makes the energy
non-separable. D(A, B) is P(S) - P(A) - P(B), with P the summed distance
inside a subset, so two tables (P and the sizes) give it in O(1).
"""

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from scipy.cluster.hierarchy import dendrogram, linkage
from scipy.spatial.distance import pdist, squareform
from sklearn.datasets import make_blobs

from sktrellis import ExactHierarchicalClustering
from sktrellis.energies import (
    HierarchicalEnergy,
    SplitEnergy,
    SplitPotential,
    subset_pair_sums,
    subset_sizes,
)

# %%
# The Cython module
# -----------------
# In a project of your own this file is an extension module of your
# package, built by its ``setup.py``; here it is compiled on the spot with
# the ``cythonize`` command (Cython and a C compiler are needed). ``cdef
# api`` exports the function so that ``from_cython`` finds it by name.

SOURCE = """
from sktrellis.energies cimport SplitData, mask_t
from sktrellis.energies import register_split_function


cdef api double average_height_log_psi(const SplitData* data, mask_t parent,
                                       mask_t left) noexcept nogil:
    cdef const double* pair_sums = data.tables[0]
    cdef const double* sizes = data.tables[1]
    cdef double beta = data.params[0]
    cdef mask_t right = parent ^ left
    cdef double across = pair_sums[parent] - pair_sums[left] - pair_sums[right]
    return -beta * across / (sizes[left] * sizes[right])


# What the function reads: from_cython checks the tables and parameters it
# is given against this before any kernel calls the function.
register_split_function(__name__, "average_height_log_psi",
                        tables={"pair_sums": "2**n", "sizes": "2**n"}, n_params=1)
"""

build_dir = Path(tempfile.mkdtemp())
(build_dir / "average_height.pyx").write_text(SOURCE)
subprocess.run(
    [sys.executable, "-m", "Cython.Build.Cythonize", "-i", "-q", "average_height.pyx"],
    cwd=build_dir,
    check=True,
    capture_output=True,
)
sys.path.insert(0, str(build_dir))
import average_height  # noqa: E402

# %%
# The energy
# ----------
# ``split_potential`` tabulates P and the sizes with NumPy and names the
# function; ``potential_kind`` and ``table_bytes_per_subset`` let the
# estimator check the memory before anything is allocated.


class AverageLinkageHeight(HierarchicalEnergy):
    """log psi(S; A, B) = -beta D(A, B) / (|A| |B|)."""

    potential_kind = "function"
    table_bytes_per_subset = 16  # P and the sizes, float64

    def __init__(self, beta=1.0):
        self.beta = beta

    def split_potential(self, X):
        n_points = len(X)
        tables = {
            "pair_sums": subset_pair_sums(squareform(pdist(X))),
            "sizes": subset_sizes(n_points).astype(np.float64),
        }
        return SplitPotential.from_cython(
            n_points, average_height, "average_height_log_psi", tables, [self.beta]
        )


X, blob = make_blobs(n_samples=14, centers=3, cluster_std=1.2, random_state=3)
energy = AverageLinkageHeight(beta=3.0)
start = time.process_time()
model = ExactHierarchicalClustering(energy, n_clusters=3).fit(X)
compiled_seconds = time.process_time() - start

# %%
# A check, and what the compiled function saves
# ---------------------------------------------
# The same energy as a vectorised NumPy function
# (:class:`~sktrellis.energies.SplitEnergy`) is tabulated for every split,
# 8 bytes each: the same posterior, more time and O(3**N) memory.


def average_height_numpy(X, left, right, beta):
    pair_sums = subset_pair_sums(squareform(pdist(X)))
    sizes = subset_sizes(len(X))
    across = pair_sums[left | right] - pair_sums[left] - pair_sums[right]
    return -beta * across / (sizes[left] * sizes[right])


start = time.process_time()
tabulated = ExactHierarchicalClustering(
    SplitEnergy(average_height_numpy, kw_args={"beta": energy.beta}), n_clusters=3
).fit(X)
tabulated_seconds = time.process_time() - start
print(f"log Z, C function: {model.log_partition_:.6f} ({compiled_seconds:.2f} s)")
print(f"log Z, NumPy table: {tabulated.log_partition_:.6f} ({tabulated_seconds:.2f} s)")

# %%
# The exact MAP tree against scipy's greedy average linkage, scored by the
# same energy (its log potential is -beta times its total merge height),
# and the posterior probability that each blob is a cluster of the tree.
greedy = linkage(X, method="average")
greedy_log_potential = model.log_probability(greedy) + model.log_partition_
print(f"exact MAP log potential  {model.map_log_potential_:.2f}")
print(f"greedy average linkage   {greedy_log_potential:.2f}")
for k in range(3):
    members = np.flatnonzero(blob == k)
    print(f"P(blob {k} is a cluster) = {model.cluster_probability(members):.4f}")

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
dendrogram(model.linkage_matrix_, ax=left)
left.set_title(f"exact MAP: log psi {model.map_log_potential_:.1f}")
dendrogram(greedy, ax=right)
right.set_title(f"greedy average linkage: log psi {greedy_log_potential:.1f}")
for ax in (left, right):
    ax.set_yticks([])
fig.tight_layout()
plt.show()
