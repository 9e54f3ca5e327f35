"""The one tree representation and its conversions.

Inside the package a binary tree over N points is a preorder list of splits:
two uint32 arrays ``parents`` and ``lefts`` of length N - 1, node i splitting
the subset ``parents[i]`` into ``lefts[i]`` (the part holding the parent's
lowest point) and ``parents[i] ^ lefts[i]``; the left subtree follows its
parent immediately. scipy linkage matrices and scikit-learn ``children_``
arrays exist only at the public boundary.
"""
import numpy as np
from scipy.cluster.hierarchy import is_valid_linkage

from ._linkage import linkage_rows, merges_to_linkage, splits_to_merges


def splits_from_table(best_left, n_points):
    """Preorder splits of the tree stored as a per-subset table of left children."""
    parents = np.empty(n_points - 1, dtype=np.uint32)
    lefts = np.empty(n_points - 1, dtype=np.uint32)
    stack = [(1 << n_points) - 1]
    node = 0
    while stack:
        parent = stack.pop()
        if parent & (parent - 1) == 0:
            continue
        left = int(best_left[parent])
        parents[node], lefts[node] = parent, left
        node += 1
        stack.append(parent ^ left)
        stack.append(left)
    return parents, lefts


def linkage_from_splits(potential, parents, lefts):
    """scipy linkage matrices of trees given as preorder splits.

    The trees' merges (:func:`merges_from_splits`) with each inner node's
    log psi, by :func:`linkage_from_merges`.

    Parameters
    ----------
    potential : SplitPotential
    parents, lefts : ndarray of shape (n_trees, N - 1) or (N - 1,)

    Returns
    -------
    linkage : ndarray of shape (n_trees, N - 1, 4) or (N - 1, 4)
    """
    single = np.ndim(parents) == 1
    parents = np.atleast_2d(parents).astype(np.uint32)
    lefts = np.atleast_2d(lefts).astype(np.uint32)
    log_potentials = potential.evaluate(parents.ravel(), lefts.ravel()).reshape(parents.shape)
    # Merge k is preorder node N - 2 - k.
    linkage = linkage_from_merges(merges_from_splits(parents, lefts), log_potentials[:, ::-1])
    return linkage[0] if single else linkage


def linkage_from_merges(merges, log_potentials):
    """scipy linkage matrices of trees given as merges, for any number of points.

    Each inner node costs ``-log psi``, shifted per tree by the most
    negative cost (if any) so costs are non-negative; a node's height is the
    total cost of its subtree, so heights increase towards the root. Rows go
    in order of increasing height, ties descendants first (later in the
    preorder that visits the child holding the lower point first), smaller
    child id first; row k is raised by ``k * 1e-9 * max(tree height, 1) /
    (N - 1)`` so heights are distinct and ``fcluster(Z, k, "maxclust")``
    cuts exactly the top k - 1 rows.

    Parameters
    ----------
    merges : ndarray of shape (n_trees, N - 1, 2) or (N - 1, 2)
        Children first: points are 0..N-1 and merge k is node N + k.
    log_potentials : ndarray of shape (n_trees, N - 1) or (N - 1,)
        log psi of the split each merge creates; all finite.

    Returns
    -------
    linkage : ndarray of shape (n_trees, N - 1, 4) or (N - 1, 4)
    """
    single = np.ndim(merges) == 2
    merges = np.ascontiguousarray(merges, dtype=np.int64)
    if single:
        merges = merges[None]
    costs = np.array(log_potentials, dtype=np.float64, order="C").reshape(merges.shape[:2])
    np.negative(costs, out=costs)
    if costs.shape[1]:
        costs -= np.minimum(costs.min(axis=1, keepdims=True), 0.0)
    linkage = merges_to_linkage(merges, costs)
    return linkage[0] if single else linkage


def merges_from_tree(tree, n_points):
    """Validated (N - 1, 2) merge array from a linkage matrix or ``children_``."""
    tree = np.asarray(tree)
    if tree.ndim != 2 or tree.shape[0] != n_points - 1 or tree.shape[1] not in (2, 4):
        raise ValueError(
            f"a tree over {n_points} points is a linkage matrix of shape "
            f"({n_points - 1}, 4) or a children_ array of shape ({n_points - 1}, 2); "
            f"got shape {tree.shape}"
        )
    if tree.shape[1] == 4:
        is_valid_linkage(np.asarray(tree, dtype=np.float64), throw=True, name="linkage")
    merges = tree[:, :2]
    if not np.all(np.isfinite(merges.astype(np.float64))) or np.any(merges != np.round(merges)):
        raise ValueError("tree node ids must be integers")
    merges = merges.astype(np.int64)
    # Every id below n + row used exactly once: a valid children-first merge list.
    rows = np.arange(n_points - 1)
    if np.any(merges < 0) or np.any(merges >= n_points + rows[:, None]):
        raise ValueError("each merge may only use leaves or earlier merges")
    if len(np.unique(merges)) != merges.size:
        raise ValueError("each leaf and each merge must be used exactly once")
    return merges


def masks_from_merges(merges, n_points, points=None):
    """Subset mask (Python int) of every node: leaves 0..N-1 then merges.

    Leaf i is point ``points[i]`` (default: point i), so that a tree over
    some of the points gives masks over all of them.
    """
    masks = [1 << int(p) for p in (range(n_points) if points is None else points)]
    for a, b in merges:
        masks.append(masks[a] | masks[b])
    return masks


def splits_from_merges(merges, n_points, points=None):
    """Canonical (parents, lefts) of every inner node of a merge array (any order).

    ``points`` as in :func:`masks_from_merges`.
    """
    masks = masks_from_merges(merges, n_points, points)
    parents = np.array(masks[n_points:], dtype=np.int64)
    lefts = np.array([masks[a] for a, _ in merges], dtype=np.int64)
    low = parents & -parents
    lefts = np.where(lefts & low, lefts, parents ^ lefts)
    return parents.astype(np.uint32), lefts.astype(np.uint32)


def merges_from_splits(parents, lefts):
    """Children-first merges of trees given as preorder splits.

    Merge k is node N + k, its children listed (left part, right part);
    inner nodes are merged in reverse preorder (merge k is preorder node
    N - 2 - k), so children come first.

    Parameters
    ----------
    parents, lefts : ndarray of shape (n_trees, N - 1) or (N - 1,)

    Returns
    -------
    merges : ndarray of shape (n_trees, N - 1, 2) or (N - 1, 2)
    """
    single = np.ndim(parents) == 1
    parents = np.ascontiguousarray(np.atleast_2d(parents), dtype=np.uint32)
    lefts = np.ascontiguousarray(np.atleast_2d(lefts), dtype=np.uint32)
    merges = splits_to_merges(parents, lefts)
    return merges[0] if single else merges


def labels_from_linkage(linkage, n_clusters):
    """Flat labels from undoing the last ``n_clusters - 1`` merges of a linkage.

    With the distinct heights of :func:`linkage_from_splits` these are the
    clusters of ``fcluster(linkage, n_clusters, "maxclust")``. Labels are
    0..n_clusters-1 in order of each cluster's first point.
    """
    n_points = len(linkage) + 1
    parent = np.arange(2 * n_points - 1)
    for row in range(n_points - n_clusters):
        a, b = int(linkage[row, 0]), int(linkage[row, 1])
        parent[a] = parent[b] = n_points + row
    roots = np.arange(n_points)
    for _ in range(n_points):
        moved = parent[roots]
        if np.array_equal(moved, roots):
            break
        roots = moved
    # By first appearance, so labels do not depend on node numbering.
    return relabel_by_first_appearance(roots)


def relabel_by_first_appearance(labels):
    """Cluster ids 0..k-1 numbered by each cluster's first point.

    The one labelling convention of the package: any naming of the same
    partition gives the same labels (``[7, 7, 2, 7, 5] -> [0, 0, 1, 0, 2]``).

    Parameters
    ----------
    labels : array-like of shape (n_samples,)
        Any hashable, sortable cluster names.

    Returns
    -------
    labels : ndarray of shape (n_samples,) of int64
    """
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first)] = np.arange(len(first))
    return rank[inverse.ravel()]


def to_newick(linkage, names=None, labels=None):
    """Newick string of a linkage matrix, leaves named by ``names`` or their index.

    ``labels``, one string per linkage row, label the inner nodes.
    """
    n_points = len(linkage) + 1
    names = [str(i) for i in range(n_points)] if names is None else [str(n) for n in names]
    text = list(names)
    heights = [0.0] * n_points
    for row, (a, b, height, _) in enumerate(linkage):
        a, b = int(a), int(b)
        label = "" if labels is None else labels[row]
        text.append(
            f"({text[a]}:{height - heights[a]:.6g},{text[b]}:{height - heights[b]:.6g})"
            + label
        )
        heights.append(height)
    return text[-1] + ";"


def linkage_from_heights(merges, heights):
    """scipy linkage matrix of a tree given as merges with a height each.

    For any number of points, when the heights come from the model rather
    than from summed split costs (Bayesian hierarchical clustering). Rows go
    in order of increasing height, ties in the order of ``merges``; as
    merges list children first and a node is never lower than its children,
    the rows do too. Smaller child id first.

    Parameters
    ----------
    merges : ndarray of shape (N - 1, 2)
        Children first: points are 0..N-1 and merge k is node N + k.
    heights : ndarray of shape (N - 1,)
        Non-negative height of each merge, at least its children's.

    Returns
    -------
    linkage : ndarray of shape (N - 1, 4)
    order : ndarray of shape (N - 1,)
        Row r of ``linkage`` is merge ``order[r]``.
    """
    merges = np.ascontiguousarray(merges, dtype=np.int64)
    heights = np.asarray(heights, dtype=np.float64)
    order = np.argsort(heights, kind="stable")
    return linkage_rows(merges, order, np.ascontiguousarray(heights[order])), order
