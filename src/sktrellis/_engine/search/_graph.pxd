# The explored AND/OR graph of the best-first search (_graph.pyx): its
# clusters, keyed by their 64-bit mask, with their bounds on the best tree
# (MAP) and on the partition function (log Z), and their generated splits.
# The walks over it are _map_search.pyx and _log_partition.pyx; the search
# object (_best_first.pyx) owns one.

from libc.math cimport INFINITY, log
from libc.stdint cimport int64_t, uint64_t
from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector

from .._common cimport mask_t
from ._search_bounds cimport MAX_SEARCH_POINTS, SearchBound
from ._search_common cimport tolerance
from ._split_generator cimport Generator


cdef struct Split:
    double cost
    int a, b          # cluster ids of the two sides, a holding the lower point

cdef struct SplitKey:
    double key        # cost + lower(A) + lower(B), as last computed
    int index         # into the cluster's splits


# Objectives of the walk.
cdef enum:
    MAP_OBJECTIVE = 0
    LOG_PARTITION_OBJECTIVE = 1


cdef struct SearchGraph:
    int n_points, root, objective, exact_size
    unordered_map[uint64_t, int] index
    # One entry per cluster id.
    vector[uint64_t] mask
    vector[int] size
    vector[double] lower_bound, upper_bound
    vector[int] best          # index into splits[id] of the best subtree's split, or -1
    vector[int] generator     # index into generators, or -1
    vector[char] solved_flag
    vector[uint64_t] seed     # mask A of the incumbent's split, generated again later
    vector[vector[Split]] splits
    vector[vector[SplitKey]] split_heap   # the open splits, see ``revise``
    vector[Generator] generators
    # The partition-function bracket of each cluster (log space), whether it
    # is exact, the least cost of a tree under a split not generated yet as
    # last known (it only rises), and the number of trees under the
    # generated splits, sum of #trees(A) #trees(B).
    vector[double] z_low, z_high, rest_key, generated_trees
    vector[char] z_exact
    # The clusters and splits of the current walk, root first.
    vector[int] path, path_split
    # Scratch of an exact solve by the bound's tables, per subset of the
    # cluster: log Z, log MAP, MAP split's side A, and cluster id.
    vector[double] subset_log_z, subset_log_map
    vector[mask_t] subset_left
    vector[int] subset_id
    int64_t n_states, n_expanded, n_splits, n_iterations
    # #trees over k points, (2k - 3)!!, k = 0..64 (1e108 at most).
    double trees[MAX_SEARCH_POINTS + 1]


cdef int start_graph(SearchGraph* g, SearchBound bound, int n_points, int objective,
                     int exact_size) except -1 nogil
cdef int cluster(SearchGraph* g, SearchBound bound, uint64_t mask) except -1 nogil
cdef int add_split(SearchGraph* g, int node, Split split) except -1 nogil
cdef int expand(SearchGraph* g, SearchBound bound, int node) except -1 nogil
cdef double open_rest_key(SearchGraph* g, int node) noexcept nogil
cdef void release_open_states(SearchGraph* g) noexcept nogil


# std heaps keep the "largest" entry on top: this makes it the smallest key.
cdef inline bint larger_key(const SplitKey& x, const SplitKey& y) noexcept nogil:
    return y.key < x.key


cdef inline int enumerated_size(SearchGraph* g) noexcept nogil:
    """Clusters of at most this many points are solved by ``solve_exactly``."""
    return g.exact_size if g.exact_size > 2 else 2


cdef inline void improve_upper(SearchGraph* g, int node, int k) noexcept nogil:
    cdef Split* split = &g.splits[node][k]
    cdef double upper = split.cost + g.upper_bound[split.a] + g.upper_bound[split.b]
    if upper < g.upper_bound[node]:
        g.upper_bound[node] = upper
        g.best[node] = k


cdef inline double ceiling(SearchGraph* g, int node) noexcept nogil:
    """Splits whose key reaches this are never generated (MAP only)."""
    return g.upper_bound[node] if g.objective == MAP_OBJECTIVE else INFINITY


cdef inline double rest_term(SearchGraph* g, int node) noexcept nogil:
    """log of an upper bound on the sum over the trees under ungenerated splits.

    Each such tree costs at least ``rest_key``, and there are
    ``#trees(S) - sum over the generated splits of #trees(A) #trees(B)``
    of them (every tree over S lies under exactly one split, and the
    split (A, B) carries #trees(A) #trees(B) trees). The count is
    rounded up by the float error of that sum, at most (|G| + 4) eps
    #trees(S) for |G| generated splits, and the key lowered by 64
    tolerances: a solved cluster's lower bound is raised to its cost
    when within one tolerance of it, and such raised bounds can nest
    once per level of the tree (64 at most) through the keys built from
    the parts' bounds.
    """
    cdef int m = g.size[node]
    cdef double count
    if g.rest_key[node] == INFINITY:
        return -INFINITY
    count = max(g.trees[m] - g.generated_trees[node], 0.0)
    count += (g.splits[node].size() + 4) * 2.3e-16 * g.trees[m]
    return log(count) - (g.rest_key[node] - 64 * tolerance(g.rest_key[node]))
