# The contract between the best-first search (_best_first.pyx) and an
# energy's admissible bound. The search minimises the cost -log phi of a
# tree over up to 64 points. A cluster is given as its point indices
# (`members`, m of them, in any order: the split generator uses the order of
# `order_`); a split of it as `sides`, bit k set <=> members[k] on side B,
# with members[0] on side A. A split and its mirror image are the same
# split to the search: split_cost_ and the keys must not depend on which
# side is called A.

from libc.stdint cimport uint64_t

from .._common cimport float64_t, mask_t

# Clusters are keyed by 64-bit masks.
cdef enum:
    MAX_SEARCH_POINTS = 64
    # Largest cluster a search may solve exactly: 3**20 / 2 = 1.7e9 splits.
    MAX_EXACT_POINTS = 20


cdef inline int side_of(uint64_t sides, int k) noexcept nogil:
    return <int>((sides >> k) & 1)


cdef class SearchBound:
    # The bound of a partial assignment is
    #     base(S) + scale * (assigned + sum over unassigned u of min(pen_A(u), pen_B(u))),
    # where `assigned` is what the assigned points already pay and pen_X(u)
    # what u would pay with the assigned points on side X.
    cdef readonly double scale
    # Whether a complete split's key should be raised to its own bound
    # split_cost + lower(A) + lower(B) (for bounds blind to the assignment).
    cdef readonly bint refine
    # Clusters of at most this many points are solved exactly on creation,
    # by the recursion over all their splits (memoised in the search's
    # cluster map), instead of searched: worth it where the bound prunes
    # little.
    cdef readonly int exact_size
    # Whether log_z_upper_ gives more than +inf.
    cdef readonly bint bounds_log_z
    # Whether partial_key_ bounds the splits completing a partial
    # assignment (for a bound whose base and increments are blind to it).
    cdef readonly bint sees_sides

    cdef double split_cost_(self, const int* members, int m, uint64_t sides) noexcept nogil
    cdef double lower_(self, const int* members, int m) noexcept nogil
    # An upper bound on log Z(S), the log sum over the trees over the
    # cluster of their potentials (+inf: none known).
    cdef double log_z_upper_(self, const int* members, int m) noexcept nogil
    cdef double base_(self, const int* members, int m) noexcept nogil
    cdef void increments_(self, const int* members, int m, uint64_t sides, int position,
                          int side, double* pen_a, double* pen_b) noexcept nogil
    # A lower bound on the cost of every tree over the cluster whose root
    # split puts its first n_assigned points on the sides ``sides`` gives
    # them (1 <= n_assigned < m, 3 <= m), when sees_sides; -inf otherwise.
    cdef double partial_key_(self, const int* members, int m, uint64_t sides,
                             int n_assigned) noexcept nogil
    # The order in which the split generator assigns a cluster's points
    # (in place; any order is correct, a good one prunes sooner).
    cdef void order_(self, int* members, int m) noexcept nogil
    # For a bound blind to the assignment (scale 0): keys[p], p = 1..m // 2,
    # a lower bound on split_cost + lower(A) + lower(B) over the splits of
    # the cluster whose smaller side has p points (+inf: none of non-zero
    # potential); returns False where the bound has none (the default).
    # The split generator then enumerates the classes in order of their
    # key, so its next key rises as classes are done.
    cdef bint size_classes_(self, const int* members, int m, double* keys) noexcept nogil
    # Every subset of a cluster of 3 to MAX_EXACT_POINTS points solved at
    # once, for the search's exact solves (see SearchBound.solve_subsets_);
    # NO_SUBSET_SOLVER where the bound has no such solver.
    cdef int solve_subsets_(self, const int* members, int m, double* log_z, double* log_map,
                            mask_t* best_left) except -1 nogil


# What SearchBound.solve_subsets_ returns.
cdef enum:
    NO_SUBSET_SOLVER = 0
    SUBSETS_SOLVED = 1
    # Solved, and no split of the cluster has non-zero potential: only the
    # cluster's own entries are filled.
    CLUSTER_CANNOT_SPLIT = 2


# The order of bounds over pairwise weights (Dasgupta, correlation
# clustering): each point the most tied to the points before it.
cdef void connected_first(const float64_t* weight, Py_ssize_t n, int* members,
                          int m) noexcept nogil
