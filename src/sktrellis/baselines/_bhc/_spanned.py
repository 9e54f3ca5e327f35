"""The best tree spanned by the clusters of seed trees (``algorithm="sparse"``)."""
import numpy as np
from scipy.special import gammaln

from ._recursion import _block_rows

# algorithm="sparse": seed trees besides the greedy one (scipy's linkage
# methods). Ward's and average linkage build every cluster bottom-up at
# once, so their trees hold the clusters that the greedy tree's chaining
# misses (benchmarks/README.md, "Bayesian hierarchical clustering").
_SEED_LINKAGES = ("ward", "average")
_MASK64 = (1 << 64) - 1


def best_spanned_merges(component, X, log_alpha, trees):
    """The tree of largest DPM lower bound among those spanned by the clusters of seed trees.

    The vertices are the clusters of the seed trees (the same set of points
    in two trees is one vertex) and the splits of a vertex are those the
    seed trees make of it; a tree is spanned if each of its inner nodes is
    a vertex split in one of those ways, so seed trees that share a cluster
    can be combined above and below it. Over these trees, BHC's
    ``q(S) = d_S p(D_S | T_S) = alpha Gamma(|S|) p(D_S) + q(left) q(right)``
    is maximised by a dynamic program in order of size, as the exact
    algorithm does over all 2**N subsets (Greenberg et al. 2021's sparse
    trellis): every seed tree is spanned, so the result's bound is at least
    each seed tree's. Exact ties go to the split of the earliest seed tree.

    Parameters
    ----------
    component : ConjugateComponent
        The cluster model.
    X : ndarray of shape (n_points, n_features)
        The data, n_points >= 2.
    log_alpha : float
        log of the DP concentration.
    trees : list of ndarray of shape (n_points - 1, 2)
        Children-first merges of each seed tree (node n_points + k is row k).

    Returns
    -------
    merges : ndarray of shape (n_points - 1, 2)
        Children-first merges of the best spanned tree.
    """
    n_points = len(X)
    # Content hashes of clusters: two sums modulo 2**64 of random per-point
    # keys, so a cluster has the same key in every tree; fixed keys keep
    # fits reproducible.
    keys = np.random.default_rng(0x7E11).integers(
        0, np.iinfo(np.uint64).max, size=(2, n_points), dtype=np.uint64, endpoint=True
    )
    vertex_of = {key: i for i, key in enumerate(zip(keys[0].tolist(), keys[1].tolist()))}
    point_statistics = component.statistics(X)
    statistics = list(point_statistics)
    size = [1] * n_points
    splits = [[] for _ in range(n_points)]
    for merges in trees:
        key = list(zip(keys[0].tolist(), keys[1].tolist()))
        vertex = list(range(n_points))
        for a, b in merges:
            (a0, a1), (b0, b1) = key[a], key[b]
            union = ((a0 + b0) & _MASK64, (a1 + b1) & _MASK64)
            left, right = vertex[a], vertex[b]
            if union not in vertex_of:
                vertex_of[union] = len(size)
                statistics.append(statistics[left] + statistics[right])
                size.append(size[left] + size[right])
                splits.append([])
            node = vertex_of[union]
            if (left, right) not in splits[node] and (right, left) not in splits[node]:
                splits[node].append((left, right))
            key.append(union)
            vertex.append(node)
    size = np.array(size, dtype=np.float64)
    block = _block_rows(point_statistics.shape[1])
    log_marginal = np.concatenate([
        component.log_marginal(np.array(statistics[start : start + block]))
        for start in range(0, len(statistics), block)
    ])
    log_cluster = log_alpha + gammaln(size) + log_marginal
    # log q of every vertex, smallest first (a split's parts are smaller).
    log_q = log_cluster.copy()
    best_split = [None] * len(size)
    for node in np.argsort(size, kind="stable"):
        best_value = -np.inf
        for left, right in splits[node]:
            value = log_q[left] + log_q[right]
            if best_split[node] is None or value > best_value:
                best_split[node], best_value = (left, right), value
        if best_split[node] is not None:
            log_q[node] = np.logaddexp(log_cluster[node], best_value)
    # The root (all points) is the last vertex of every tree; emit its best
    # tree children-first, left subtree before right.
    root = vertex_of[key[-1]]
    merges = np.empty((n_points - 1, 2), dtype=np.int64)
    node_id = list(range(n_points)) + [-1] * (len(size) - n_points)
    n_merged = 0
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if node < n_points:
            continue
        if children_done:
            left, right = best_split[node]
            merges[n_merged] = node_id[left], node_id[right]
            node_id[node] = n_points + n_merged
            n_merged += 1
        else:
            left, right = best_split[node]
            stack += [(node, True), (right, False), (left, False)]
    return merges

