"""The explored AND/OR graph of the best-first search, and how it grows.

Clusters live in a hash map keyed by their 64-bit mask; nothing is sized by
2**N. A cluster is created with its bounds: the bound's lower bound on the
cost of its best tree and, for log Z, the trees it may hold; a cluster of at
most ``exact_size`` points is solved at once by the trellis recursion over
its subsets (``solve_exactly``), or from the bound's own tables of every
subset where it has them and few of the subsets are known yet (Ginkgo: the
trellis's kernel). Its splits come one at a time from its
lazy generator (``expand``, ``_split_generator.pyx``), the best first; each
split stored creates (or finds) the clusters of its two sides.
"""
from cython.operator cimport dereference as deref
from libc.math cimport INFINITY
from libc.stdint cimport uint64_t
from libcpp.algorithm cimport push_heap
from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector

from .._common cimport log_add, mask_t
from ._search_bounds cimport (
    MAX_SEARCH_POINTS, NO_SUBSET_SOLVER, SUBSETS_SOLVED, SearchBound)
from ._search_common cimport members_of, side_a_mask, tolerance
from ._split_generator cimport (
    Generator, next_key, pop_split, release_generator, start_generator)


cdef enum:
    # Exact solves use the bound's tables when at most this many parts of
    # one point fewer are known (``few_parts_known``).
    KNOWN_PARTS_FOR_TABLES = 4


# Whether exact solves use the bound's solver of every subset at once, where
# it has one (``use_subset_solver``).
cdef bint subset_solver_enabled = True


def use_subset_solver(bint enabled):
    """Let exact solves use the bound's subset solver (True, the default) or not; the previous.

    Off, every split goes through ``split_cost_``: the recursion the
    solver replaces, kept for the tests and benchmarks that compare both.
    """
    global subset_solver_enabled
    previous = subset_solver_enabled
    subset_solver_enabled = enabled
    return previous


cdef int start_graph(SearchGraph* g, SearchBound bound, int n_points, int objective,
                     int exact_size) except -1 nogil:
    """An empty graph over ``n_points`` points but for its root cluster."""
    cdef int k
    g.n_points = n_points
    g.objective = objective
    g.exact_size = exact_size
    g.trees[0] = g.trees[1] = 1.0
    for k in range(2, MAX_SEARCH_POINTS + 1):
        g.trees[k] = g.trees[k - 1] * (2 * k - 3)
    g.root = cluster(g, bound, ((<uint64_t>1) << (n_points - 1) << 1) - 1)
    return 0


cdef int cluster(SearchGraph* g, SearchBound bound, uint64_t mask) except -1 nogil:
    """The id of the cluster ``mask``, created with its bounds on first use."""
    cdef unordered_map[uint64_t, int].iterator found = g.index.find(mask)
    cdef int members[MAX_SEARCH_POINTS]
    cdef int node, m
    if found != g.index.end():
        return deref(found).second
    m = members_of(mask, members)
    node = new_cluster(g, mask, m)
    g.lower_bound[node] = bound.lower_(members, m)
    if m == 1:
        g.lower_bound[node] = 0.0
        g.upper_bound[node] = 0.0
        g.solved_flag[node] = 1
        g.z_low[node] = g.z_high[node] = 0.0
        g.z_exact[node] = 1
    elif m <= enumerated_size(g):
        solve_exactly(g, bound, node, members, m)
    else:
        # Unexpanded: every tree costs at least the lower bound (the
        # rest term with no split generated), and the bound may know
        # better (computed for the log Z walk only: it costs as much as
        # the lower bound).
        g.rest_key[node] = g.lower_bound[node]
        g.z_high[node] = rest_term(g, node)
        if g.objective == LOG_PARTITION_OBJECTIVE and bound.bounds_log_z:
            g.z_high[node] = min(g.z_high[node], bound.log_z_upper_(members, m))
    return node


cdef int new_cluster(SearchGraph* g, uint64_t mask, int m) except -1 nogil:
    """A new cluster of ``m`` points, unbounded and unsolved; its id."""
    cdef int node = <int>g.mask.size()
    g.index[mask] = node
    g.mask.push_back(mask)
    g.size.push_back(m)
    g.lower_bound.push_back(-INFINITY)
    g.upper_bound.push_back(INFINITY)
    g.best.push_back(-1)
    g.generator.push_back(-1)
    g.solved_flag.push_back(0)
    g.seed.push_back(0)
    g.splits.push_back(vector[Split]())
    g.split_heap.push_back(vector[SplitKey]())
    g.z_low.push_back(-INFINITY)
    g.z_high.push_back(INFINITY)
    g.rest_key.push_back(-INFINITY)
    g.generated_trees.push_back(0.0)
    g.z_exact.push_back(0)
    g.n_states += 1
    return node


cdef int set_solved(SearchGraph* g, int node, double best_value, double log_z,
                    Split best) except -1 nogil:
    """Close ``node``: its best tree's cost and split (none if ``best.a < 0``), and log Z."""
    g.lower_bound[node] = best_value
    g.upper_bound[node] = best_value
    g.z_low[node] = g.z_high[node] = log_z
    g.z_exact[node] = 1
    if best.a >= 0:
        g.splits[node].push_back(best)
        g.best[node] = 0
    g.solved_flag[node] = 1
    # Every split of a cluster of m points is tried once.
    g.n_splits += ((<uint64_t>1) << (g.size[node] - 1)) - 1
    return 0


cdef int solve_exactly(SearchGraph* g, SearchBound bound, int node, const int* members,
                       int m) except -1 nogil:
    """Solve a cluster by trying every split, its parts solved the same way.

    The parts are clusters of the map, so each subset is solved once
    however many clusters share it: the trellis recursion over the
    subsets of the small clusters the search reaches, for the best tree
    (max) and for log Z (log-sum-exp) at once. A split of zero potential
    creates no cluster: no tree of non-zero potential holds its parts
    through it. A bound with a solver of its own for every subset at once
    (``solve_subsets_``) gives the same clusters and values through
    ``solve_by_tables``.
    """
    cdef uint64_t sides, a, full = g.mask[node]
    cdef Split split, best
    cdef double value, best_value = INFINITY, log_z = -INFINITY
    if (m > 2 and subset_solver_enabled and few_parts_known(g, full)
            and solve_by_tables(g, bound, node, members, m)):
        return 0
    best.a = best.b = -1
    best.cost = INFINITY
    # sides: bit k set <=> members[k] in B; members[0] stays in A.
    for sides in range(2, (<uint64_t>1) << m, 2):
        split.cost = bound.split_cost_(members, m, sides)
        if not split.cost < INFINITY:
            continue
        a = side_a_mask(members, m, sides)
        split.a = cluster(g, bound, a)
        split.b = cluster(g, bound, full ^ a)
        value = split.cost + g.upper_bound[split.a] + g.upper_bound[split.b]
        if value < best_value:
            best_value, best = value, split
        log_z = log_add(log_z, g.z_low[split.a] + g.z_low[split.b] - split.cost)
    set_solved(g, node, best_value, log_z, best)
    return 0


cdef bint few_parts_known(SearchGraph* g, uint64_t mask) noexcept nogil:
    """Whether the bound's tables would solve ``mask`` sooner than the recursion.

    With p of the cluster's m parts of m - 1 points known (each solved
    with its subsets), the subsets left to the recursion all hold the p
    points whose removal gives them: at most 2**(m - p) subsets, whose
    splits with the cluster's own make at most 2**(p - 1) 3**(m - p),
    against 3**m / 2 in the tables. A split costs the tables (Ginkgo's
    kernel, its clusters stored) 1/7 to 1/15 of what it costs the
    recursion at 10 to 14 points, so they pay when (2 / 3)**p is above
    that: p <= KNOWN_PARTS_FOR_TABLES. (The count only steers the work:
    both give the same values.)
    """
    cdef uint64_t rest = mask, bit
    cdef int known = 0
    while rest:
        bit = rest & (~rest + 1)
        rest ^= bit
        if g.index.find(mask ^ bit) != g.index.end():
            known += 1
            if known > KNOWN_PARTS_FOR_TABLES:
                return False
    return True


cdef bint solve_by_tables(SearchGraph* g, SearchBound bound, int node, const int* members,
                          int m) except -1 nogil:
    """``solve_exactly`` from the bound's tables of every subset (False: it has none).

    The recursion creates every subset of the cluster when the cluster
    can split at all (each is a part of one of its splits, all of
    non-zero potential then) and none otherwise; so do these tables,
    subsets first (a subset's mask is below its superset's), each closed
    with its best split as the recursion would close it. Subsets already
    in the map were solved when created and are kept.
    """
    cdef unordered_map[uint64_t, int].iterator found
    cdef uint64_t x, n_subsets = (<uint64_t>1) << m, full = n_subsets - 1, mask
    cdef int sub_members[MAX_SEARCH_POINTS]
    cdef int k, size, id, status
    g.subset_log_z.resize(n_subsets)
    g.subset_log_map.resize(n_subsets)
    g.subset_left.resize(n_subsets)
    g.subset_id.resize(n_subsets)
    status = bound.solve_subsets_(members, m, &g.subset_log_z[0], &g.subset_log_map[0],
                                  &g.subset_left[0])
    if status == NO_SUBSET_SOLVER:
        return False
    if status == SUBSETS_SOLVED:
        for x in range(1, full):
            mask = 0
            size = 0
            for k in range(m):
                if x >> k & 1:
                    mask |= (<uint64_t>1) << members[k]
                    sub_members[size] = members[k]
                    size += 1
            if size == 1:
                g.subset_id[x] = cluster(g, bound, mask)
                continue
            found = g.index.find(mask)
            if found != g.index.end():
                g.subset_id[x] = deref(found).second
                continue
            id = new_cluster(g, mask, size)
            g.subset_id[x] = id
            close_from_tables(g, bound, id, x, sub_members, size)
    close_from_tables(g, bound, node, full, members, m)
    return True


cdef int close_from_tables(SearchGraph* g, SearchBound bound, int node, uint64_t x,
                           const int* members, int m) except -1 nogil:
    """Close ``node``, the subset ``x`` of the tables, with their values and best split."""
    cdef Split best
    cdef uint64_t left, sides = 0, bit = 1
    cdef int k
    best.a = best.b = -1
    best.cost = INFINITY
    if g.subset_log_map[x] > -INFINITY:
        left = g.subset_left[x]
        # The best split's sides over the subset's own members.
        for k in range(m):
            while not x & bit:
                bit <<= 1
            if not left & bit:
                sides |= (<uint64_t>1) << k
            bit <<= 1
        best.cost = bound.split_cost_(members, m, sides)
        best.a = g.subset_id[left]
        best.b = g.subset_id[x ^ left]
    set_solved(g, node, -g.subset_log_map[x], g.subset_log_z[x], best)
    return 0


cdef int add_split(SearchGraph* g, int node, Split split) except -1 nogil:
    cdef SplitKey entry
    entry.index = <int>g.splits[node].size()
    entry.key = split.cost + g.lower_bound[split.a] + g.lower_bound[split.b]
    g.splits[node].push_back(split)
    g.generated_trees[node] += g.trees[g.size[split.a]] * g.trees[g.size[split.b]]
    if g.objective == LOG_PARTITION_OBJECTIVE:
        # Nothing is pruned: the splits, not the open states, fill memory.
        g.n_states += 1
    g.split_heap[node].push_back(entry)
    push_heap(g.split_heap[node].begin(), g.split_heap[node].end(), larger_key)
    improve_upper(g, node, entry.index)
    return 0


cdef int expand(SearchGraph* g, SearchBound bound, int node) except -1 nogil:
    """Generate the next split of ``node`` (and its two clusters); 1 if one was."""
    cdef Generator* gen
    cdef uint64_t sides, a
    cdef Split split
    cdef int before, found
    if g.generator[node] < 0:
        g.generator[node] = <int>g.generators.size()
        g.generators.resize(g.generators.size() + 1)
        start_generator(&g.generators.back(), bound, g.mask[node],
                        ceiling(g, node), &g.index, &g.lower_bound)
        g.n_expanded += 1
        g.n_states += 1
    gen = &g.generators[g.generator[node]]
    while True:
        before = <int>gen.heap.size()
        found = pop_split(gen, bound, ceiling(g, node), &sides)
        g.n_states += <int>gen.heap.size() - before
        if not found:
            return 0
        a = side_a_mask(gen.members, gen.m, sides)
        if not a & g.mask[node] & (~g.mask[node] + 1):
            a ^= g.mask[node]
        if a == g.seed[node]:
            continue
        split.cost = bound.split_cost_(gen.members, gen.m, sides)
        # Creating clusters never moves the generators.
        split.a = cluster(g, bound, a)
        split.b = cluster(g, bound, g.mask[node] ^ a)
        add_split(g, node, split)
        g.n_splits += 1
        return 1


cdef double open_rest_key(SearchGraph* g, int node) noexcept nogil:
    """A lower bound on the cost of every tree under a split not generated yet.

    Unexpanded: the cluster's lower bound, which holds for every tree
    over it. Expanded: the generator's smallest open key bounds
    ``cost + lower(A) + lower(B)`` of every split under its open states
    (keys never decrease along an assignment); in MAP mode the states
    dropped for reaching the cluster's ceiling had keys at least the
    ceiling then, and the ceiling only falls, so at least ``ceiling -
    tolerance`` now (``c - tolerance(c)`` increases with c). A cluster
    whose best tree is proven has every tree at least its cost.
    """
    cdef double key
    if g.generator[node] < 0:
        return g.lower_bound[node]
    key = next_key(&g.generators[g.generator[node]])
    if g.objective == MAP_OBJECTIVE:
        key = min(key, g.upper_bound[node] - tolerance(g.upper_bound[node]))
    return max(key, g.lower_bound[node])


cdef void release_open_states(SearchGraph* g) noexcept nogil:
    """Free the open partial splits and split heaps (never read again after a failed walk)."""
    cdef size_t k
    for k in range(g.generators.size()):
        release_generator(&g.generators[k])
    for k in range(g.split_heap.size()):
        vector[SplitKey]().swap(g.split_heap[k])
