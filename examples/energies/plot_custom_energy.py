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

Here a Ward-like energy. Ward's linkage merges, at each step, the two
clusters whose union raises the within-cluster sum of squares the least,
by the *Ward cost* ``D(S) = SSE(S) - SSE(A) - SSE(B)``; so its costly
merges, between far-apart groups, come last, high in the tree. Summed
over the merges of any tree, ``D`` gives ``SSE`` of all points: the same
for every tree, so ``D`` alone cannot rank trees. What ranks them is
*where* the cost is paid. The energy here charges a merge its Ward cost
times the number of points outside the merged cluster::

    log psi(S; A, B) = -beta (N - |S|) D(S)

Merging far-apart groups is expensive low in the tree and free at the
root, so the most probable trees join the blobs last, as Ward does.
(Weighting by ``|S|`` instead looks as natural but is backwards: it
rewards paying the large costs low in the tree, and its MAP tree mixes the
blobs.) ``beta`` is an inverse temperature in units of squared distance:
large values make the posterior a point mass on the MAP tree, small ones
spread it; 0.05 leaves visible uncertainty for this data.

The exact MAP tree under this cost and scipy's greedy Ward tree both cut
into the three blobs. They differ only in how points merge within a blob,
where the MAP, being optimal, costs slightly less (greedy Ward is a good
heuristic for this objective, not its optimum). What the trellis adds is
the posterior: the printed probabilities that each blob is a cluster of
the tree.
"""

import matplotlib.pyplot as plt
import numpy as np
from scipy.cluster.hierarchy import dendrogram, fcluster, linkage
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from sktrellis import ExactHierarchicalClustering
from sktrellis.energies import HierarchicalEnergy, SplitPotential, subset_sizes, subset_sums


class WardCostBelowRoot(HierarchicalEnergy):
    """log psi(S; A, B) = -beta (N - |S|) (SSE(S) - SSE(A) - SSE(B))."""

    potential_kind = "separable"

    def __init__(self, beta=1.0):
        self.beta = beta

    def split_potential(self, X):
        n_points = len(X)
        size = subset_sizes(n_points)
        sums = subset_sums(X)
        sse = subset_sums(np.sum(X**2, axis=1)) - np.sum(sums**2, axis=1) / np.maximum(size, 1)
        # f(S) = -beta (N - |S|) SSE(S), g = SSE, c(k) = beta (N - k).
        return SplitPotential.separable(
            n_points,
            cluster_term=-self.beta * (n_points - size) * sse,
            child_term=sse,
            size_coef=self.beta * (n_points - np.arange(n_points + 1.0)),
        )


X, blob = make_blobs(n_samples=14, centers=3, cluster_std=1.2, random_state=3)
energy = WardCostBelowRoot(beta=0.05)
model = ExactHierarchicalClustering(energy, n_clusters=3).fit(X)

# The same cost of scipy's greedy Ward tree, through the exact model.
greedy = linkage(X, method="ward")
greedy_log_potential = model.log_probability(greedy) + model.log_partition_
greedy_labels = fcluster(greedy, 3, "maxclust")
print(f"exact MAP log potential   {model.map_log_potential_:.2f}")
print(f"greedy Ward log potential {greedy_log_potential:.2f}")
print(f"adjusted Rand index with the blobs: MAP {adjusted_rand_score(blob, model.labels_):.2f}, "
      f"greedy Ward {adjusted_rand_score(blob, greedy_labels):.2f}")
blob_probability = [model.cluster_probability(blob == k) for k in range(3)]
for k, probability in enumerate(blob_probability):
    print(f"P(blob {k}, points {np.flatnonzero(blob == k).tolist()}, is a cluster) = "
          f"{probability:.3f}")

# %%
# Leaves are labelled by their blob.
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
dendrogram(model.linkage_matrix_, ax=left, labels=[f"b{k}" for k in blob])
left.set_title(f"exact MAP: log psi {model.map_log_potential_:.2f}")
dendrogram(greedy, ax=right, labels=[f"b{k}" for k in blob])
right.set_title(f"greedy Ward: log psi {greedy_log_potential:.2f}")
for ax in (left, right):
    ax.set_yticks([])
fig.tight_layout()
plt.show()
