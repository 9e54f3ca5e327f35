"""Dynamic programs of the sparse cluster trellis: an explicit DAG of clusters.

The vertices are clusters of any number of points, numbered by increasing
size (the N points first, in point order; the root, all points, last), so
both children of a split come before their parent. A vertex is known by its
size, its lowest point and two 64-bit content hashes, each the sum (mod
2**64) of random 64-bit keys of its points: the hash of a union of disjoint
clusters is the sum of theirs. Splits are stored per parent (CSR): split k
of vertex v is (left[k], right[k]), left holding v's lowest point.

For each vertex v with splits (L, R):

    log Z(v)   = logsumexp [log psi(v; L, R) + log Z(L) + log Z(R)]
    log MAP(v) = max       [log psi(v; L, R) + log MAP(L) + log MAP(R)]

with log Z = log MAP = 0 for the points; -inf log potentials are allowed.
Everything here trusts its input; the driver is ``sparse_trellis.py``.
"""
from libc.math cimport INFINITY, exp, log
from libc.stdint cimport uint64_t
from libc.stdlib cimport free, malloc, realloc

import numpy as np

from .._common cimport index_t, log_add

###############################################################################
# Vertices by content hash: open addressing with linear probing

cdef inline Py_ssize_t find_slot(const uint64_t* keys, Py_ssize_t mask,
                                 uint64_t first, uint64_t second) noexcept nogil:
    """Slot holding (first, second), or the empty slot where it would go."""
    cdef Py_ssize_t slot = <Py_ssize_t>(first & <uint64_t>mask)
    while True:
        if keys[3 * slot + 2] == 0 or (keys[3 * slot] == first and keys[3 * slot + 1] == second):
            return slot
        slot = (slot + 1) & mask


def build_table(const uint64_t[::1] first, const uint64_t[::1] second):
    """Hash table of the vertices: rows (first hash, second hash, index + 1).

    Capacity is a power of two at least twice the number of vertices; index
    0 marks an empty row.
    """
    cdef Py_ssize_t n = first.shape[0], capacity = 2, v, slot
    while capacity < 2 * n:
        capacity *= 2
    cdef uint64_t[:, ::1] table = np.zeros((capacity, 3), dtype=np.uint64)
    cdef uint64_t* keys = &table[0, 0]
    with nogil:
        for v in range(n):
            slot = find_slot(keys, capacity - 1, first[v], second[v])
            keys[3 * slot] = first[v]
            keys[3 * slot + 1] = second[v]
            keys[3 * slot + 2] = v + 1
    return np.asarray(table)


def lookup(const uint64_t[:, ::1] table, const uint64_t[::1] first, const uint64_t[::1] second):
    """Vertex index of each (first, second) hash pair, -1 where absent."""
    cdef Py_ssize_t i, n = first.shape[0], mask = table.shape[0] - 1
    cdef index_t[::1] out = np.empty(n, dtype=np.int64)
    cdef const uint64_t* keys = &table[0, 0]
    cdef Py_ssize_t slot
    with nogil:
        for i in range(n):
            slot = find_slot(keys, mask, first[i], second[i])
            out[i] = <index_t>keys[3 * slot + 2] - 1
    return np.asarray(out)


###############################################################################
# Splits

def find_splits(const uint64_t[:, ::1] table, const index_t[::1] size,
                const uint64_t[::1] first, const uint64_t[::1] second,
                const index_t[::1] group_order, const index_t[::1] group_start):
    """Every split of a vertex into two vertices.

    ``group_order`` lists the vertices grouped by lowest point, by
    increasing size within a group; ``group_start`` delimits the groups. The
    left child of a split of v holds v's lowest point, so it is in v's group
    and smaller: for each such L the right child is the vertex whose hashes
    are v's minus L's, if any. Two independent 64-bit hashes make a false
    match (a non-partition with matching sums) a 2**-126 event per lookup.

    Returns (parent, left, right) arrays of vertex indices, by parent then
    by increasing size of the left child.
    """
    cdef Py_ssize_t mask = table.shape[0] - 1
    cdef const uint64_t* keys = &table[0, 0]
    cdef Py_ssize_t n_groups = group_start.shape[0] - 1
    cdef Py_ssize_t g, i, j, slot, capacity = 1024, count = 0
    cdef index_t parent, left, right
    cdef index_t* found = <index_t*>malloc(3 * capacity * sizeof(index_t))
    cdef index_t* grown
    if found == NULL:
        raise MemoryError("could not allocate the split buffer")
    try:
        with nogil:
            for g in range(n_groups):
                for i in range(group_start[g] + 1, group_start[g + 1]):
                    parent = group_order[i]
                    for j in range(group_start[g], i):
                        left = group_order[j]
                        if size[left] >= size[parent]:
                            break
                        slot = find_slot(keys, mask, first[parent] - first[left],
                                         second[parent] - second[left])
                        right = <index_t>keys[3 * slot + 2] - 1
                        if right < 0 or size[right] != size[parent] - size[left]:
                            continue
                        if count == capacity:
                            grown = <index_t*>realloc(found, 6 * capacity * sizeof(index_t))
                            if grown == NULL:
                                with gil:
                                    raise MemoryError("could not grow the split buffer")
                            found = grown
                            capacity *= 2
                        found[3 * count] = parent
                        found[3 * count + 1] = left
                        found[3 * count + 2] = right
                        count += 1
        out = np.empty((count, 3), dtype=np.int64)
        if count:
            out[:] = <index_t[:count, :3]>found
    finally:
        free(found)
    order = np.argsort(out[:, 0], kind="stable")
    return out[order, 0], out[order, 1], out[order, 2]


###############################################################################
# Inside and outside passes

def inside(const index_t[::1] split_start, const index_t[::1] left, const index_t[::1] right,
           const double[::1] log_psi, Py_ssize_t n_points):
    """log Z, log MAP and the MAP split (index, -1 if none) of every vertex."""
    cdef Py_ssize_t n_vertices = split_start.shape[0] - 1, v, k
    cdef double[::1] log_z = np.zeros(n_vertices)
    cdef double[::1] log_map = np.zeros(n_vertices)
    cdef index_t[::1] best = np.full(n_vertices, -1, dtype=np.int64)
    cdef double top, value, acc, best_value
    cdef index_t arg
    with nogil:
        for v in range(n_points, n_vertices):
            top = -INFINITY
            best_value = -INFINITY
            arg = -1
            for k in range(split_start[v], split_start[v + 1]):
                value = log_psi[k] + log_z[left[k]] + log_z[right[k]]
                if value > top:
                    top = value
                value = log_psi[k] + log_map[left[k]] + log_map[right[k]]
                # Ties go to the first split; a vertex whose splits are all
                # impossible still names one, so every vertex has a tree.
                if value > best_value or arg < 0:
                    best_value = value
                    arg = k
            if top == -INFINITY:
                log_z[v] = -INFINITY
            else:
                acc = 0.0
                for k in range(split_start[v], split_start[v + 1]):
                    acc = acc + exp(log_psi[k] + log_z[left[k]] + log_z[right[k]] - top)
                log_z[v] = top + log(acc)
            log_map[v] = best_value
            best[v] = arg
    return np.asarray(log_z), np.asarray(log_map), np.asarray(best)


def count_trees(const index_t[::1] split_start, const index_t[::1] left, const index_t[::1] right,
                const double[::1] log_psi, Py_ssize_t n_points):
    """Exact number of trees of non-zero potential below each vertex (Python ints).

    Sparse trellises over thousands of points span far more than 2**128
    trees, so the counts are Python integers.
    """
    cdef Py_ssize_t n_vertices = split_start.shape[0] - 1, v, k
    counts = [1] * n_points + [0] * (n_vertices - n_points)
    for v in range(n_points, n_vertices):
        total = 0
        for k in range(split_start[v], split_start[v + 1]):
            if log_psi[k] > -INFINITY:
                total += counts[left[k]] * counts[right[k]]
        counts[v] = total
    return counts


def outside(const index_t[::1] split_start, const index_t[::1] left, const index_t[::1] right,
            const double[::1] log_psi, const double[::1] log_z):
    """log O(v): the summed potential of everything outside v's subtree.

    O(root) = 1; a split (L, R) of v passes O(v) psi Z(R) to L and
    O(v) psi Z(L) to R. The marginal of vertex v is Z(v) O(v) / Z(root).
    """
    cdef Py_ssize_t n_vertices = split_start.shape[0] - 1, v, k
    cdef double[::1] log_out = np.full(n_vertices, -INFINITY)
    cdef double value
    log_out[n_vertices - 1] = 0.0
    with nogil:
        for v in range(n_vertices - 1, -1, -1):
            if log_out[v] == -INFINITY:
                continue
            for k in range(split_start[v], split_start[v + 1]):
                value = log_out[v] + log_psi[k]
                log_out[left[k]] = log_add(log_out[left[k]], value + log_z[right[k]])
                log_out[right[k]] = log_add(log_out[right[k]], value + log_z[left[k]])
    return np.asarray(log_out)


###############################################################################
# Trees: the MAP and exact samples

def map_splits(const index_t[::1] best, const index_t[::1] left, const index_t[::1] right,
               Py_ssize_t n_points):
    """Split indices of the MAP tree, in preorder."""
    cdef Py_ssize_t n_vertices = best.shape[0]
    cdef index_t[::1] out = np.empty(n_points - 1, dtype=np.int64)
    cdef Py_ssize_t node = 0
    stack = [n_vertices - 1]
    while stack:
        v = stack.pop()
        if v < n_points:
            continue
        out[node] = best[v]
        node += 1
        stack.append(right[best[v]])
        stack.append(left[best[v]])
    return np.asarray(out)


def sample_splits(const index_t[::1] split_start, const index_t[::1] left, const index_t[::1] right,
                  const double[::1] log_psi, const double[::1] log_z,
                  const double[:, ::1] uniforms):
    """Split indices of trees drawn top-down from P(tree) = prod psi / Z(root).

    Row r of ``uniforms`` (N - 1 numbers in [0, 1)) drives tree r: at a
    vertex v, split k is drawn with probability psi Z(L) Z(R) / Z(v).
    """
    cdef Py_ssize_t n_samples = uniforms.shape[0], n_inner = uniforms.shape[1]
    cdef Py_ssize_t n_points = n_inner + 1, n_vertices = split_start.shape[0] - 1
    cdef index_t[:, ::1] out = np.empty((n_samples, n_inner), dtype=np.int64)
    cdef index_t* stack = <index_t*>malloc((n_points + 1) * sizeof(index_t))
    cdef Py_ssize_t r, node, top, k, chosen, last_positive, heaviest
    cdef index_t v
    cdef double total, target, weight, best
    if stack == NULL:
        raise MemoryError("could not allocate the sampling stack")
    try:
        with nogil:
            for r in range(n_samples):
                top = 0
                stack[0] = n_vertices - 1
                node = 0
                while top >= 0:
                    v = stack[top]
                    top -= 1
                    if v < n_points:
                        continue
                    total = 0.0
                    for k in range(split_start[v], split_start[v + 1]):
                        total = total + exp(
                            log_psi[k] + log_z[left[k]] + log_z[right[k]] - log_z[v])
                    # Normalise by the computed total so rounding in log Z
                    # cannot leave mass outside [0, 1); impossible splits
                    # (weight 0) are never chosen.
                    target = uniforms[r, node] * total
                    total = 0.0
                    chosen = -1
                    # If rounding keeps the running sum at or below the target
                    # (or every weight underflowed), take the last split of
                    # positive weight, else the heaviest one, as the exact
                    # samplers do: never an index of -1.
                    last_positive = -1
                    heaviest = split_start[v]
                    best = -INFINITY
                    for k in range(split_start[v], split_start[v + 1]):
                        weight = log_psi[k] + log_z[left[k]] + log_z[right[k]] - log_z[v]
                        if weight > best:
                            best = weight
                            heaviest = k
                        if exp(weight) > 0.0:
                            last_positive = k
                        total = total + exp(weight)
                        if total > target:
                            chosen = k
                            break
                    if chosen < 0:
                        chosen = last_positive if last_positive >= 0 else heaviest
                    out[r, node] = chosen
                    node += 1
                    top += 1
                    stack[top] = right[chosen]
                    top += 1
                    stack[top] = left[chosen]
    finally:
        free(stack)
    return np.asarray(out)
