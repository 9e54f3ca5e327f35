"""State exploration of the sparse flat trellis, for any number of points.

A state (a set of points, see ``sparse_flat.py``) is a row of W = ceil(N / 64)
uint64 words, bit p of word p // 64 for the point at position p of the
order. From each state, every cluster whose lowest position is the state's
lowest and which lies inside the state leads to the state without it; new
states are found depth first from all points. States are identified by a
Zobrist hash (the XOR of a random key per position, so a child's hash is
its parent's XOR the cluster's) in an open-addressing table, compared word
by word on a hash match. Nothing here is sized by 2**N.
"""
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy

import numpy as np

cdef extern from *:
    """
    static inline int sf_ctz64(unsigned long long x) { return __builtin_ctzll(x); }
    static inline int sf_popcount64(unsigned long long x) { return __builtin_popcountll(x); }
    """
    int sf_ctz64(unsigned long long x) nogil
    int sf_popcount64(unsigned long long x) nogil


cdef struct Buffers:
    uint64_t *words      # n_states x W
    uint64_t *hashes     # per state
    int64_t *table       # open addressing, -1 empty
    int64_t *stack
    int64_t *parent
    int64_t *cluster
    int64_t *child
    int64_t n_states, state_capacity, table_size, n_stack, n_edges, edge_capacity


cdef inline void *_resized(void *buffer, size_t n_bytes, bint *failed) noexcept nogil:
    """`buffer` reallocated to `n_bytes`; on failure, now or in an earlier call
    (``failed[0]`` set), `buffer` itself, still valid and still owned."""
    cdef void *grown
    if failed[0]:
        return buffer
    grown = realloc(buffer, n_bytes)
    if grown == NULL:
        failed[0] = True
        return buffer
    return grown


cdef int _grow_states(Buffers *b, int64_t n_words) noexcept nogil:
    """Double the state buffers; -1 when out of memory (each buffer still valid)."""
    cdef int64_t capacity = 2 * b.state_capacity
    cdef bint failed = False
    b.words = <uint64_t *> _resized(b.words, capacity * n_words * sizeof(uint64_t), &failed)
    b.hashes = <uint64_t *> _resized(b.hashes, capacity * sizeof(uint64_t), &failed)
    b.stack = <int64_t *> _resized(b.stack, capacity * sizeof(int64_t), &failed)
    if failed:
        return -1
    b.state_capacity = capacity
    return 0


cdef int _grow_edges(Buffers *b) noexcept nogil:
    """Double the edge buffers; -1 when out of memory (each buffer still valid)."""
    cdef int64_t capacity = 2 * b.edge_capacity
    cdef bint failed = False
    b.parent = <int64_t *> _resized(b.parent, capacity * sizeof(int64_t), &failed)
    b.cluster = <int64_t *> _resized(b.cluster, capacity * sizeof(int64_t), &failed)
    b.child = <int64_t *> _resized(b.child, capacity * sizeof(int64_t), &failed)
    if failed:
        return -1
    b.edge_capacity = capacity
    return 0


cdef int _rehash(Buffers *b) noexcept nogil:
    cdef int64_t size = 2 * b.table_size, s, slot
    cdef int64_t *table = <int64_t *> malloc(size * sizeof(int64_t))
    if table == NULL:
        return -1
    for slot in range(size):
        table[slot] = -1
    for s in range(b.n_states):
        slot = <int64_t> (b.hashes[s] & <uint64_t> (size - 1))
        while table[slot] >= 0:
            slot = (slot + 1) & (size - 1)
        table[slot] = s
    free(b.table)
    b.table = table
    b.table_size = size
    return 0


cdef int64_t _find_or_add(Buffers *b, const uint64_t *words, uint64_t key, int64_t n_words,
                          int64_t *added) noexcept nogil:
    """Index of the state with these words, added (and pushed) if new; -1 out of memory."""
    cdef int64_t slot = <int64_t> (key & <uint64_t> (b.table_size - 1)), s, w
    cdef bint same
    added[0] = 0
    while b.table[slot] >= 0:
        s = b.table[slot]
        if b.hashes[s] == key:
            same = True
            for w in range(n_words):
                if b.words[s * n_words + w] != words[w]:
                    same = False
                    break
            if same:
                return s
        slot = (slot + 1) & (b.table_size - 1)
    if b.n_states == b.state_capacity and _grow_states(b, n_words) < 0:
        return -1
    s = b.n_states
    memcpy(&b.words[s * n_words], words, n_words * sizeof(uint64_t))
    b.hashes[s] = key
    b.table[slot] = s
    b.n_states += 1
    b.stack[b.n_stack] = s
    b.n_stack += 1
    added[0] = 1
    if 2 * b.n_states > b.table_size and _rehash(b) < 0:
        return -1
    return s


def explore(const uint64_t[:, ::1] clusters, const int64_t[::1] word_low,
            const int64_t[::1] word_high, const uint64_t[::1] cluster_keys,
            const int64_t[::1] low_start, const int64_t[::1] low_clusters,
            const uint64_t[::1] point_keys, int64_t max_states):
    """Every state reachable from all points, and the edges (state, cluster, state without it).

    Parameters
    ----------
    clusters : (K, W) uint64
        The clusters' words; ``word_low[c]..word_high[c]`` their non-zero words.
    cluster_keys : (K,) uint64
        XOR of the position keys of each cluster's points.
    low_start, low_clusters : CSR of the clusters by lowest position
        (clusters of zero potential left out).
    point_keys : (N,) uint64
        A random key per position.
    max_states : int
        Stop past this many states (the empty set and all points included).

    Returns
    -------
    n_states : int
        -1 past ``max_states``.
    sizes : (n_states,) int64
        Points in each state; state 0 is all points, state 1 the empty set.
    parents, cluster_ids, children : (n_edges,) int64
    """
    cdef int64_t n_words = clusters.shape[1], n_points = point_keys.shape[0]
    cdef Buffers b
    cdef int64_t s, w, c, k, low, first_word, added, child_index, p
    cdef uint64_t full_key = 0, key
    cdef bint inside, failed = False, too_many = False
    cdef uint64_t *child = <uint64_t *> malloc(max(n_words, 1) * sizeof(uint64_t))
    b.state_capacity = 1024
    b.edge_capacity = 4096
    b.table_size = 4096
    b.n_states = b.n_stack = b.n_edges = 0
    b.words = <uint64_t *> malloc(b.state_capacity * n_words * sizeof(uint64_t))
    b.hashes = <uint64_t *> malloc(b.state_capacity * sizeof(uint64_t))
    b.stack = <int64_t *> malloc(b.state_capacity * sizeof(int64_t))
    b.table = <int64_t *> malloc(b.table_size * sizeof(int64_t))
    b.parent = <int64_t *> malloc(b.edge_capacity * sizeof(int64_t))
    b.cluster = <int64_t *> malloc(b.edge_capacity * sizeof(int64_t))
    b.child = <int64_t *> malloc(b.edge_capacity * sizeof(int64_t))
    try:
        if (child == NULL or b.words == NULL or b.hashes == NULL or b.stack == NULL
                or b.table == NULL or b.parent == NULL or b.cluster == NULL or b.child == NULL):
            raise MemoryError("the sparse flat trellis's state exploration")
        with nogil:
            for k in range(b.table_size):
                b.table[k] = -1
            # State 0: all points; state 1: the empty set.
            for w in range(n_words):
                child[w] = 0
            for p in range(n_points):
                child[p >> 6] |= (<uint64_t> 1) << (p & 63)
                full_key ^= point_keys[p]
            _find_or_add(&b, child, full_key, n_words, &added)
            for w in range(n_words):
                child[w] = 0
            _find_or_add(&b, child, 0, n_words, &added)
            b.n_stack = 1   # the empty set has nothing to explore
            while b.n_stack > 0 and not failed and not too_many:
                b.n_stack -= 1
                s = b.stack[b.n_stack]
                first_word = 0
                while b.words[s * n_words + first_word] == 0:
                    first_word += 1
                low = 64 * first_word + sf_ctz64(b.words[s * n_words + first_word])
                for k in range(low_start[low], low_start[low + 1]):
                    c = low_clusters[k]
                    inside = True
                    for w in range(word_low[c], word_high[c] + 1):
                        if clusters[c, w] & ~b.words[s * n_words + w]:
                            inside = False
                            break
                    if not inside:
                        continue
                    memcpy(child, &b.words[s * n_words], n_words * sizeof(uint64_t))
                    for w in range(word_low[c], word_high[c] + 1):
                        child[w] ^= clusters[c, w]
                    key = b.hashes[s] ^ cluster_keys[c]
                    child_index = _find_or_add(&b, child, key, n_words, &added)
                    if child_index < 0:
                        failed = True
                        break
                    if b.n_states > max_states:
                        too_many = True
                        break
                    if b.n_edges == b.edge_capacity and _grow_edges(&b) < 0:
                        failed = True
                        break
                    b.parent[b.n_edges] = s
                    b.cluster[b.n_edges] = c
                    b.child[b.n_edges] = child_index
                    b.n_edges += 1
        if failed:
            raise MemoryError("the sparse flat trellis's state exploration")
        if too_many:
            return -1, None, None, None, None
        sizes = np.zeros(b.n_states, dtype=np.int64)
        parents = np.empty(b.n_edges, dtype=np.int64)
        cluster_ids = np.empty(b.n_edges, dtype=np.int64)
        children = np.empty(b.n_edges, dtype=np.int64)
        _copy_results(&b, n_words, sizes, parents, cluster_ids, children)
        return b.n_states, sizes, parents, cluster_ids, children
    finally:
        free(child)
        free(b.words)
        free(b.hashes)
        free(b.stack)
        free(b.table)
        free(b.parent)
        free(b.cluster)
        free(b.child)


cdef void _copy_results(Buffers *b, int64_t n_words, int64_t[::1] sizes, int64_t[::1] parents,
                        int64_t[::1] cluster_ids, int64_t[::1] children) noexcept nogil:
    cdef int64_t s, w, e, total
    for s in range(b.n_states):
        total = 0
        for w in range(n_words):
            total += sf_popcount64(b.words[s * n_words + w])
        sizes[s] = total
    for e in range(b.n_edges):
        parents[e] = b.parent[e]
        cluster_ids[e] = b.cluster[e]
        children[e] = b.child[e]
