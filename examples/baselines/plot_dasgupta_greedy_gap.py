"""
==========================================================
Where greedy agglomeration misses Dasgupta's optimal tree
==========================================================

Dasgupta's cost charges each split ``|parent| x (similarity cut)``. Greedy
agglomerative clustering (average linkage, which is what
:class:`~sktrellis.baselines.GreedyHierarchicalClustering` uses for this
energy) is only an approximation of its minimum (Moseley & Wang 2017;
Charikar et al. 2019). On small sparse graphs the exact trellis finds the
optimum, so the gap can be measured instead of bounded. We draw random
sparse similarity graphs, report how often greedy is suboptimal and by how
much, and draw the first graph where it is.
"""

import matplotlib.pyplot as plt
import numpy as np
from scipy.cluster.hierarchy import dendrogram

from sktrellis import ExactHierarchicalClustering
from sktrellis.baselines import GreedyHierarchicalClustering
from sktrellis.energies import Dasgupta
from sktrellis.metrics import dasgupta_cost

# Dasgupta's cost alone (no prior over tree shapes): the MAP tree is the
# cheapest tree.
energy = Dasgupta(affinity="precomputed", beta=1.0, tree_prior="uniform")
rng = np.random.default_rng(0)
n_points, gaps, shown = 10, [], None
for trial in range(40):
    weights = rng.random((n_points, n_points)) * (rng.random((n_points, n_points)) < 0.35)
    weights = np.triu(weights, 1)
    weights = weights + weights.T
    exact = ExactHierarchicalClustering(energy).fit(weights)
    greedy = GreedyHierarchicalClustering(energy).fit(weights)
    exact_cost = dasgupta_cost(exact.linkage_matrix_, weights)
    greedy_cost = dasgupta_cost(greedy.linkage_matrix_, weights)
    gaps.append(greedy_cost / exact_cost - 1)
    if shown is None and greedy_cost > exact_cost + 1e-9:
        shown = (weights, exact, greedy, exact_cost, greedy_cost)

gaps = np.array(gaps)
print(f"greedy is suboptimal on {np.mean(gaps > 1e-12):.0%} of 40 random graphs; "
      f"mean excess cost {gaps.mean():.1%}, worst {gaps.max():.1%}")

# %%
weights, exact, greedy, exact_cost, greedy_cost = shown
fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
dendrogram(exact.linkage_matrix_, ax=left)
left.set_title(f"exact optimum: cost {exact_cost:.2f}")
dendrogram(greedy.linkage_matrix_, ax=right)
right.set_title(f"greedy (average linkage): cost {greedy_cost:.2f}")
for ax in (left, right):
    ax.set_yticks([])
fig.tight_layout()
plt.show()
