"""
=====================================
A new energy without kernel code
=====================================

The exact trellis evaluates about 3**N / 2 splits, so an energy must score
a split in O(1). Any energy of the *separable* form ::

    log psi(S; A, B) = f(S) + c(|S|) (g(A) + g(B))

gets that for free: tabulate f and g over all 2**N subsets with NumPy
(:func:`~sktrellis.energies.subset_sums` and friends), hand them to
:meth:`SplitPotential.separable <sktrellis.energies.SplitPotential>`, and
the kernels run it in linear space with one multiply-add per split, as fast
as the built-in Dasgupta energy. (An O(1) energy that is not of this form
runs at kernel speed as a C function: see "A new O(1) energy in Cython".)

Here a Ward-like energy: a split of S costs ``beta |S|`` times the rise in
the within-cluster sum of squares, ``SSE(S) - SSE(A) - SSE(B)`` (the Ward
merge cost, weighted by the size of the merged cluster so that the total
is not the same for every tree). We compare the exact MAP tree with
scipy's greedy Ward linkage under this cost, and show the posterior
probability of the top split.
"""

import matplotlib.pyplot as plt
import numpy as np
from scipy.cluster.hierarchy import dendrogram, linkage
from sklearn.datasets import make_blobs

from sktrellis import ExactHierarchicalClustering
from sktrellis.energies import HierarchicalEnergy, SplitPotential, subset_sizes, subset_sums


class SizeWeightedWard(HierarchicalEnergy):
    """log psi(S; A, B) = -beta |S| (SSE(S) - SSE(A) - SSE(B))."""

    potential_kind = "separable"

    def __init__(self, beta=1.0):
        self.beta = beta

    def split_potential(self, X):
        n_points = len(X)
        size = subset_sizes(n_points)
        sums = subset_sums(X)
        sse = subset_sums(np.sum(X**2, axis=1)) - np.sum(sums**2, axis=1) / np.maximum(size, 1)
        # f(S) = -beta |S| SSE(S), g = SSE, c(k) = beta k.
        return SplitPotential.separable(
            n_points,
            cluster_term=-self.beta * size * sse,
            child_term=sse,
            size_coef=self.beta * np.arange(n_points + 1.0),
        )


X, _ = make_blobs(n_samples=14, centers=3, cluster_std=1.2, random_state=3)
energy = SizeWeightedWard(beta=0.5)
model = ExactHierarchicalClustering(energy, n_clusters=3).fit(X)

# The same cost of scipy's greedy Ward tree, through the exact model.
greedy = linkage(X, method="ward")
greedy_log_potential = model.log_probability(greedy) + model.log_partition_
print(f"exact MAP log potential   {model.map_log_potential_:.2f}")
print(f"greedy Ward log potential {greedy_log_potential:.2f}")
top = model.most_probable_clusters(3)
for members, probability in top:
    print(f"P({members.tolist()} is a cluster) = {probability:.3f}")

# %%
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
dendrogram(model.linkage_matrix_, ax=left)
left.set_title(f"exact MAP: log psi {model.map_log_potential_:.1f}")
dendrogram(greedy, ax=right)
right.set_title(f"greedy Ward: log psi {greedy_log_potential:.1f}")
for ax in (left, right):
    ax.set_yticks([])
fig.tight_layout()
plt.show()
