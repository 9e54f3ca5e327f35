"""
======================================================================
Past 25 points: spanned posteriors, certified MAPs, and what they mean
======================================================================

The exact trellises stop at about 25 points: past that, every tree or
partition can no longer be summed. Four estimators go further on the same
48 points and the same correlation clustering energy, and their numbers
mean different things:

* :class:`~sktrellis.SparseTrellisClustering` and
  :class:`~sktrellis.SparseFlatClustering` are *exact over a spanned set*:
  the trees (partitions) whose every cluster belongs to a family grown
  from seed trees. Their ``log_partition_`` sums that set only, so it is a
  **lower bound** of the log Z over all trees (partitions), and their
  probabilities are exact **relative to the spanned set**: the mass
  outside it is unknown.
* :class:`~sktrellis.CertifiedFlatClustering` and
  :class:`~sktrellis.BestFirstHierarchicalClustering` search for the MAP
  over *all* partitions (trees) and return a **certificate**:
  ``optimality_gap_`` bounds how far the answer can be from the best of
  all, 0 when it is proven optimal. Best-first search also brackets log Z
  over all trees, which bounds the share of the posterior mass the
  sparse trellis's spanned trees hold.
"""

import warnings

import matplotlib.pyplot as plt
import numpy as np
from scipy.cluster.hierarchy import dendrogram
from sklearn.datasets import make_blobs

from sktrellis import (
    BestFirstHierarchicalClustering,
    CertifiedFlatClustering,
    SparseFlatClustering,
    SparseTrellisClustering,
)
from sktrellis.energies import CorrelationClustering

X, blob = make_blobs(n_samples=48, centers=3, cluster_std=1.5, random_state=2)
# One energy for all four: a cluster's (flat) log potential is the signed
# similarity inside it; a split's (hierarchical) pays what it cuts.
energy = CorrelationClustering(beta=1.0)

# %%
# Flat: a posterior over the spanned partitions, and a certified MAP
# ------------------------------------------------------------------
# ``n_partitions_`` counts the spanned partitions exactly; ``log_partition_``
# is a lower bound of the log Z over all Bell(48) (about 10^44) partitions.
# The certified MAP's ``log_potential_upper_bound_`` bounds every partition, spanned or
# not: when ``optimality_gap_`` is 0, ``map_log_potential_`` is the best of
# all, and the sparse MAP can be checked against it.
sparse_flat = SparseFlatClustering(energy).fit(X)
certified = CertifiedFlatClustering(energy, max_time=10).fit(X)

print(f"SparseFlatClustering: {sparse_flat.n_partitions_:.3g} partitions spanned "
      f"({sparse_flat.n_vertices_} clusters); log Z over them {sparse_flat.log_partition_:.2f} "
      f"(a lower bound of the full log Z); MAP log potential "
      f"{sparse_flat.map_log_potential_:.2f}")
print(f"CertifiedFlatClustering: MAP log potential {certified.map_log_potential_:.2f}, "
      f"optimality gap {certified.optimality_gap_:.3g} ({certified.stop_reason_}); "
      f"no partition exceeds {certified.log_potential_upper_bound_:.2f}")
# The full log Z is at least the spanned one, so a partition's probability
# among the spanned partitions is an upper bound of its probability among
# all; the cluster probabilities below are relative to the spanned set.
map_probability = np.exp(sparse_flat.log_probability(sparse_flat.labels_))
print(f"the MAP partition's probability: {map_probability:.3f} among the spanned "
      "partitions, at most that among all")
for k in np.unique(certified.labels_):
    members = np.flatnonzero(certified.labels_ == k)
    print(f"  certified cluster of {len(members)} points: P(all together) = "
          f"{sparse_flat.together_probability(members):.3f} over the spanned partitions")

# %%
# Hierarchical: a posterior over the spanned trees, and a certified MAP tree
# --------------------------------------------------------------------------
# The sparse trellis's ``log_partition_`` sums its spanned trees, its MAP is
# the best of them. Best-first search returns a MAP tree with a certificate
# (``optimality_gap_``) within ``max_time``; with
# ``objective="log_partition"`` it brackets the log Z of all (2N-3)!! trees
# instead, and the spanned trees' share of the posterior mass lies between
# ``exp(sparse log Z - upper end)`` and ``exp(sparse log Z - lower end)``.
sparse_tree = SparseTrellisClustering(energy, n_clusters=3, random_state=0).fit(X)
search = BestFirstHierarchicalClustering(energy, max_time=5, n_clusters=3).fit(X)
with warnings.catch_warnings():
    # It warns when max_time ends the search before the bracket is tight:
    # here a bracket within a few seconds is all we ask for.
    warnings.simplefilter("ignore", UserWarning)
    bracket = BestFirstHierarchicalClustering(
        energy, max_time=3, n_clusters=3, objective="log_partition").fit(X)
lower, upper = bracket.log_partition_bounds_

print(f"SparseTrellisClustering: about 10^{len(str(sparse_tree.n_trees_)) - 1} trees spanned; "
      f"log Z over them {sparse_tree.log_partition_:.2f}; MAP log potential "
      f"{sparse_tree.map_log_potential_:.2f}")
print(f"BestFirstHierarchicalClustering: MAP log potential {search.map_log_potential_:.2f}, "
      f"optimality gap {search.optimality_gap_:.3g} ({search.stop_reason_}): the sparse MAP "
      f"is at most {search.log_potential_upper_bound_ - sparse_tree.map_log_potential_:.2f} below the best tree")
print(f"{lower:.2f} <= log Z over all trees <= {upper:.2f}: the spanned trees hold between "
      f"{np.exp(sparse_tree.log_partition_ - upper):.2g} and "
      f"{min(1.0, np.exp(sparse_tree.log_partition_ - lower)):.2g} of the posterior mass")

# %%
# At ``beta=1`` the posterior over trees is spread thin: the trees
# best-first search has explored already outweigh the spanned ones by many
# nats (the bracket's lower end is above the sparse log Z), so the spanned
# trees hold a tiny share of the mass. The sparse trellis's probabilities
# then compare the clusters its seeds propose; they are not the posterior
# over all trees. Its MAP, like the sparse flat MAP, can still be checked
# against a certificate.
#
# The certified MAP partition, the co-clustering over the spanned
# partitions (points ordered by that partition), and the certified tree.
order = np.argsort(certified.labels_, kind="stable")
fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
axes[0].scatter(*X.T, c=certified.labels_, s=15, cmap="tab10")
axes[0].set_title(f"certified MAP partition\n(gap {certified.optimality_gap_:.3g})")
image = axes[1].imshow(sparse_flat.pairwise_probability_[np.ix_(order, order)],
                       vmin=0, vmax=1, cmap="viridis")
fig.colorbar(image, ax=axes[1], fraction=0.046)
axes[1].set_title("P(i, j together)\nover the spanned partitions")
dendrogram(search.linkage_matrix_, ax=axes[2], no_labels=True)
axes[2].set_title(f"best-first MAP tree\n(gap {search.optimality_gap_:.3g})")
plt.tight_layout()
plt.show()
