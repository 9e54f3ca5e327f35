"""scipy linkage matrices from merge lists: the one linkage builder.

A tree over N points is given as children-first merges: an (N - 1, 2)
array whose row k merges two nodes into node N + k (points are 0..N-1).
Every tree the package emits passes through here: the exact samplers' 10**5
trees at once, and single trees of any N from the sparse trellis and the
searches. Everything here trusts its input; the wrappers are in
``sktrellis._engine.tree.conversion``.
"""
from libc.stdlib cimport qsort

import numpy as np

from .._common cimport ctz, index_t, mask_t, popcount

###############################################################################
# From preorder split lists to merges


def splits_to_merges(const mask_t[:, ::1] parents, const mask_t[:, ::1] lefts):
    """Children-first merges of trees given as preorder split lists.

    `parents` and `lefts` have shape (n_trees, N - 1): inner nodes in
    preorder with the left subtree first, so a node's children sit at
    preorder positions i + 1 and i + |left|. Inner nodes are merged in
    reverse preorder (preorder node i is merge N - 2 - i), each merge
    listing (left part, right part). Returns an (n_trees, N - 1, 2) int64
    array.
    """
    cdef Py_ssize_t n_trees = parents.shape[0], n_inner = parents.shape[1]
    cdef Py_ssize_t n_points = n_inner + 1, r, node, child_node
    cdef index_t[:, :, ::1] merges = np.empty((n_trees, n_inner, 2), dtype=np.int64)
    cdef mask_t child
    cdef int side, left_size
    with nogil:
        for r in range(n_trees):
            for node in range(n_inner):
                left_size = popcount(lefts[r, node])
                for side in range(2):
                    child = lefts[r, node] if side == 0 else parents[r, node] ^ lefts[r, node]
                    if popcount(child) == 1:
                        merges[r, n_inner - 1 - node, side] = ctz(child)
                    else:
                        child_node = node + 1 if side == 0 else node + left_size
                        merges[r, n_inner - 1 - node, side] = (
                            n_points + n_inner - 1 - child_node)
    return np.asarray(merges)


###############################################################################
# Rows

cdef struct RowKey:
    double height
    index_t preorder
    index_t merge


cdef inline bint row_key_before(const RowKey* x, const RowKey* y) noexcept nogil:
    """Increasing height, ties descendants first (later in the preorder)."""
    return x.height < y.height or (x.height == y.height and x.preorder > y.preorder)


cdef int compare_row_keys(const void* a, const void* b) noexcept nogil:
    if row_key_before(<const RowKey*>a, <const RowKey*>b):
        return -1
    return 1 if row_key_before(<const RowKey*>b, <const RowKey*>a) else 0


cdef void sort_row_keys(RowKey* keys, Py_ssize_t n) noexcept nogil:
    """Sort by row_key_before, a total order (preorder positions are distinct).

    The exact samplers sort 10**5 small trees whose keys, in merge order,
    are nearly sorted already: there an insertion sort with the comparison
    inlined makes the whole builder 1.8x faster than qsort (measured at
    N = 18). Past 64 nodes (trees from the sparse trellis and the searches)
    qsort avoids the quadratic worst case.
    """
    cdef Py_ssize_t i, j
    cdef RowKey moving
    if n > 64:
        qsort(keys, n, sizeof(RowKey), compare_row_keys)
        return
    for i in range(1, n):
        moving = keys[i]
        j = i
        while j > 0 and row_key_before(&moving, &keys[j - 1]):
            keys[j] = keys[j - 1]
            j -= 1
        keys[j] = moving


# Per-node arrays run over all 2N - 1 nodes (points 0..N-1, merge k is node
# N + k), so points need no branch: the kernels below take them with their
# point entries filled by fill_points. Branches on "is this child a point?"
# are unpredictable and cost more than the rest of the work.

cdef void fill_points(Py_ssize_t n_points, index_t* size, index_t* row_id) noexcept nogil:
    """Point entries: size 1, and a point keeps its id in the linkage."""
    cdef Py_ssize_t i
    for i in range(n_points):
        size[i] = 1
        row_id[i] = i


cdef void subtree_sizes(Py_ssize_t n_inner, const index_t* merges, index_t* size) noexcept nogil:
    """size[N + k] = number of points under merge k of the (N - 1, 2) `merges`."""
    cdef Py_ssize_t n_points = n_inner + 1, k
    for k in range(n_inner):
        size[n_points + k] = size[merges[2 * k]] + size[merges[2 * k + 1]]


cdef void write_rows(Py_ssize_t n_inner, const index_t* merges, const index_t* size,
                     const index_t* order, const double* row_heights, index_t* row_id,
                     double* linkage) noexcept nogil:
    """Row r of the (N - 1, 4) `linkage` is merge order[r] at height row_heights[r].

    `merges` is the (N - 1, 2) merge array and `size` its subtree_sizes.
    Node ids are renumbered to the rows (points keep theirs), smaller child
    id first; `order` must keep children before parents. `row_id` maps
    every node to its id in the linkage.
    """
    cdef Py_ssize_t n_points = n_inner + 1, k, r
    cdef index_t a, b
    for r in range(n_inner):
        row_id[n_points + order[r]] = n_points + r
    for r in range(n_inner):
        k = order[r]
        a = row_id[merges[2 * k]]
        b = row_id[merges[2 * k + 1]]
        linkage[4 * r] = a if a < b else b
        linkage[4 * r + 1] = b if a < b else a
        linkage[4 * r + 2] = row_heights[r]
        linkage[4 * r + 3] = size[n_points + k]


def merges_to_linkage(const index_t[:, :, ::1] merges, const double[:, ::1] costs):
    """Linkage matrices of trees given as merges with a non-negative cost each.

    `merges` has shape (n_trees, N - 1, 2), `costs` (n_trees, N - 1). A
    node's height is the total cost of its subtree, which never decreases
    towards the root. Rows are emitted in order of increasing height, ties
    descendants first (later in the preorder that visits the child holding
    the lower point first), smaller child id first; row k's height is raised
    by k * 1e-9 * max(tree height, 1) / (N - 1) so heights are distinct and
    ``fcluster(Z, k, "maxclust")`` cuts exactly the top k - 1 rows. Returns
    an (n_trees, N - 1, 4) float64 array.
    """
    cdef Py_ssize_t n_trees = merges.shape[0], n_inner = merges.shape[1]
    cdef Py_ssize_t n_points = n_inner + 1, n_nodes = n_points + n_inner, r, k, i
    cdef double[:, :, ::1] linkage = np.zeros((n_trees, n_inner, 4))
    cdef RowKey[::1] keys = np.empty(n_inner, dtype=[
        ("height", np.float64), ("preorder", np.int64), ("merge", np.int64)])
    # -0.0 is the exact additive identity: a point adds nothing to a height.
    cdef double[::1] height = np.full(n_nodes, -0.0)
    cdef double[::1] row_heights = np.empty(n_inner)
    cdef index_t[::1] scratch = np.empty(5 * n_nodes, dtype=np.int64)
    cdef index_t* low = &scratch[0]
    cdef index_t* size = low + n_nodes
    cdef index_t* preorder = size + n_nodes
    cdef index_t* row_id = preorder + n_nodes
    cdef index_t* order = row_id + n_nodes
    cdef const index_t* tree
    cdef index_t a, b, first, second
    cdef double tie_step
    if n_inner == 0:
        return np.asarray(linkage)
    with nogil:
        fill_points(n_points, size, row_id)
        for i in range(n_points):
            low[i] = i
        for r in range(n_trees):
            tree = &merges[r, 0, 0]
            subtree_sizes(n_inner, tree, size)
            for k in range(n_inner):
                a = tree[2 * k]
                b = tree[2 * k + 1]
                height[n_points + k] = costs[r, k] + height[a] + height[b]
                low[n_points + k] = low[a] if low[a] < low[b] else low[b]
            # Preorder positions top-down from the root (the last merge),
            # visiting the child holding the lower point first: that child
            # follows its parent, the other follows the first's subtree.
            preorder[n_nodes - 1] = 0
            for k in range(n_inner - 1, -1, -1):
                a = tree[2 * k]
                b = tree[2 * k + 1]
                first = a if low[a] < low[b] else b
                second = b if low[a] < low[b] else a
                preorder[first] = preorder[n_points + k] + 1
                preorder[second] = preorder[n_points + k] + size[first]
            # Merges list children first, so the keys start nearly sorted.
            for k in range(n_inner):
                keys[k].height = height[n_points + k]
                keys[k].preorder = preorder[n_points + k]
                keys[k].merge = k
            sort_row_keys(&keys[0], n_inner)
            tie_step = 1e-9 * max(height[n_nodes - 1], 1.0) / n_inner
            for k in range(n_inner):
                order[k] = keys[k].merge
                row_heights[k] = keys[k].height + k * tie_step
            write_rows(n_inner, tree, size, order, &row_heights[0], row_id, &linkage[r, 0, 0])
    return np.asarray(linkage)


def linkage_rows(const index_t[:, ::1] merges, const index_t[::1] order,
                 const double[::1] row_heights):
    """Linkage of one tree whose row r is merge order[r] at height row_heights[r].

    For trees whose heights come from the model rather than from summed
    costs; `order` must keep children before parents. Returns an (N - 1, 4)
    float64 array.
    """
    cdef Py_ssize_t n_inner = merges.shape[0], n_nodes = 2 * n_inner + 1
    cdef double[:, ::1] linkage = np.zeros((n_inner, 4))
    cdef index_t[::1] scratch = np.empty(2 * n_nodes, dtype=np.int64)
    if n_inner:
        fill_points(n_inner + 1, &scratch[0], &scratch[n_nodes])
        subtree_sizes(n_inner, &merges[0, 0], &scratch[0])
        write_rows(n_inner, &merges[0, 0], &scratch[0], &order[0], &row_heights[0],
                   &scratch[n_nodes], &linkage[0, 0])
    return np.asarray(linkage)
