"""
=======================================================================
The exact MAP tree past the trellis: best-first search with a budget
=======================================================================

:class:`~sktrellis.BestFirstHierarchicalClustering` searches the clusters
of 40 points best first, with an admissible bound on what each cluster's
subtree can still gain: when it stops, ``optimality_gap_`` certifies how
far (in log potential) the tree it returns can be from the best of all
(2N-3)!! trees, 0 when it is proven optimal. ``max_time`` bounds the
search; on clear structure it proves the MAP long before that.
"""

import matplotlib.pyplot as plt
from scipy.cluster.hierarchy import dendrogram
from sklearn.datasets import make_blobs

from sktrellis import BestFirstHierarchicalClustering
from sktrellis.baselines import GreedyHierarchicalClustering
from sktrellis.energies import Dasgupta

X, _ = make_blobs(n_samples=40, centers=3, cluster_std=0.8, random_state=0)
energy = Dasgupta(beta=1.0)

search = BestFirstHierarchicalClustering(energy, max_time=10, n_clusters=3).fit(X)
greedy = GreedyHierarchicalClustering(energy, n_clusters=3).fit(X)

print(f"stopped: {search.stop_reason_} (solver: {search.solver_}), "
      f"optimality gap {search.optimality_gap_:.3g}, {search.n_expanded_} clusters expanded")
print(f"log potential: best-first {search.map_log_potential_:.3f}, "
      f"greedy {greedy.map_log_potential_:.3f}")

# %%
# The tree the search returns, with the greedy tree under the same energy.
fig, axes = plt.subplots(1, 2, figsize=(9, 3.5), sharey=False)
for ax, model, name in [(axes[0], search, "best-first"), (axes[1], greedy, "greedy")]:
    dendrogram(model.linkage_matrix_, ax=ax, no_labels=True)
    ax.set_title(f"{name}: log potential {model.map_log_potential_:.2f}")
plt.tight_layout()
plt.show()
