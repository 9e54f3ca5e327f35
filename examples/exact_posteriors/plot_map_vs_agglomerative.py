"""
=========================================================
The exact MAP tree versus greedy agglomerative clustering
=========================================================

Twelve iris flowers (four per species) have 13,749,310,575 binary
hierarchies. Under Dasgupta's cost, :class:`~sktrellis.ExactHierarchicalClustering`
finds the best one exactly and tells how probable each of its clusters is;
scikit-learn's :class:`~sklearn.cluster.AgglomerativeClustering` builds one
tree greedily and cannot say how sure it is.

We score both trees under the same Gibbs distribution: the exact trellis gives
``log P(tree | X)`` for any tree, including the greedy one.
"""

import matplotlib.pyplot as plt
import numpy as np
from scipy.cluster.hierarchy import dendrogram
from sklearn.cluster import AgglomerativeClustering
from sklearn.preprocessing import StandardScaler

from sktrellis import ExactHierarchicalClustering
from sktrellis.datasets import load_iris12
from sktrellis.energies import Dasgupta

iris = load_iris12()
X = StandardScaler().fit_transform(iris.data)
names = iris.sample_names

exact = ExactHierarchicalClustering(Dasgupta(beta=1.0), n_clusters=3).fit(X)
greedy = AgglomerativeClustering(n_clusters=3, linkage="average", compute_distances=True).fit(X)

# %%
# Both trees under the exact posterior
# ------------------------------------
# ``log_probability`` accepts a scipy linkage or an ``AgglomerativeClustering``
# ``children_`` array.
log_p_map = exact.log_probability(exact.linkage_matrix_)
log_p_greedy = exact.log_probability(greedy.children_)
print(f"trees: {exact.n_trees_:,}")
print(f"log P(MAP tree | X)    = {log_p_map:8.3f}")
print(f"log P(greedy tree | X) = {log_p_greedy:8.3f}")
print(f"the MAP tree is {np.exp(log_p_map - log_p_greedy):.3g} times as probable")

# %%
# How sure is the model about each cluster of the MAP tree?
# ---------------------------------------------------------
# The outside pass gives the marginal probability of every cluster at once.
# We annotate the MAP dendrogram's inner nodes with them.
n = exact.n_leaves_
members = [[i] for i in range(n)]
for a, b in exact.children_:
    members.append(members[a] + members[b])
probabilities = [exact.cluster_probability(m) for m in members[n:]]



def leaf_count(children, n_leaves):
    counts = [1] * n_leaves
    for a, b in children:
        counts.append(counts[a] + counts[b])
    return np.array(counts[n_leaves:], dtype=float)


greedy_linkage = np.column_stack(
    [greedy.children_, greedy.distances_, leaf_count(greedy.children_, n)]
)

fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
info = dendrogram(exact.linkage_matrix_, labels=names, ax=left, leaf_rotation=90)
# Each drawn link's top is at its row's height; heights are distinct.
heights = exact.linkage_matrix_[:, 2]
for xs, ys in zip(info["icoord"], info["dcoord"]):
    row = int(np.argmin(np.abs(heights - ys[1])))
    left.annotate(f"{probabilities[row]:.2f}", (0.5 * (xs[1] + xs[2]), ys[1]),
                  textcoords="offset points", xytext=(0, 4), ha="center", fontsize=8)
left.set_title(f"exact MAP tree (log P = {log_p_map:.2f})\nnode labels: P(cluster | X)")
left.set_ylabel("subtree energy")
dendrogram(greedy_linkage, labels=names, ax=right, leaf_rotation=90)
right.set_title(f"average-linkage tree (log P = {log_p_greedy:.2f})")
right.set_ylabel("merge distance")
fig.tight_layout()
plt.show()
