"""Admissible bounds for the exact best-first search over trees.

The search (``_best_first.pyx``) minimises the *cost* of a tree, ``-log phi
= sum over inner nodes of -log psi(A, B)``, and never tabulates the 2**N
subsets: every quantity here is computed from the raw pairwise matrix or
the four-momenta, for one cluster at a time. A bound provides

- ``split_cost(S; A, B)``: ``-log psi(A, B)`` of one split, exactly;
- ``lower(S)``: a lower bound on the cost of every tree over the cluster
  (so ``-lower`` is an upper bound on the best subtree's log potential),
  exact for one and two points;
- ``base(S)`` and ``increments``: the pieces of a lower bound on
  ``split_cost + lower(A) + lower(B)`` over every split consistent with a
  partial assignment of the points to the two sides (see the contract in
  ``_search_bounds.pxd``), by which the search generates the splits of a
  cluster lazily, in order of that bound.

This module holds the contract, ``SearchBound``, with Python access for
tests; each energy's bound is a module of its own (``_dasgupta_bound.pyx``,
``_correlation_bound.pyx``, ``_ginkgo_bound.pyx``, ``_prior_bound.pyx``),
whose class docstring proves it; ``tests/test_best_first.py`` checks it on
every subset against the exact trellis. Everything here trusts its input
(validated by the energy's ``search_bound(X)``, ``sktrellis.energies``).
"""
from libc.math cimport INFINITY
from libc.stdint cimport uint64_t

import numpy as np

from .._common cimport float64_t, mask_t
from ._search_bounds cimport MAX_SEARCH_POINTS, NO_SUBSET_SOLVER


cdef void connected_first(const float64_t* weight, Py_ssize_t n, int* members,
                          int m) noexcept nogil:
    """Order ``members`` so each point is the most tied to the points before it.

    A point's penalties grow with its weights to the points assigned before
    it (the similarities of Dasgupta's triples, the negative weights of
    correlation clustering), so in this order the split keys rise, and
    prune, after fewer points. The first point has the largest total
    weight in the cluster (the 1e-9 weights only break the first choice).
    """
    cdef double tie[MAX_SEARCH_POINTS]
    cdef int x, y, best, moving
    for x in range(m):
        tie[x] = 0.0
        for y in range(m):
            tie[x] += 1e-9 * weight[members[x] * n + members[y]]
    for x in range(m):
        best = x
        for y in range(x + 1, m):
            if tie[y] > tie[best]:
                best = y
        moving = members[best]
        members[best], members[x] = members[x], moving
        tie[best], tie[x] = tie[x], tie[best]
        for y in range(x + 1, m):
            tie[y] += weight[members[y] * n + moving]


###############################################################################
# The contract, with Python access for tests and the estimator


cdef class SearchBound:
    """Base class of the admissible bounds; see ``_search_bounds.pxd``."""

    cdef double split_cost_(self, const int* members, int m, uint64_t sides) noexcept nogil:
        return INFINITY

    cdef double lower_(self, const int* members, int m) noexcept nogil:
        return 0.0

    cdef double log_z_upper_(self, const int* members, int m) noexcept nogil:
        return INFINITY

    cdef double base_(self, const int* members, int m) noexcept nogil:
        return self.lower_(members, m)

    cdef void increments_(self, const int* members, int m, uint64_t sides, int position,
                          int side, double* pen_a, double* pen_b) noexcept nogil:
        pass

    cdef double partial_key_(self, const int* members, int m, uint64_t sides,
                             int n_assigned) noexcept nogil:
        return -INFINITY

    cdef void order_(self, int* members, int m) noexcept nogil:
        pass

    cdef bint size_classes_(self, const int* members, int m, double* keys) noexcept nogil:
        return False

    cdef int solve_subsets_(self, const int* members, int m, double* log_z, double* log_map,
                            mask_t* best_left) except -1 nogil:
        """Solve every subset of the cluster ``members`` (3 <= m <= MAX_EXACT_POINTS) at once.

        Fills, for every subset x of two or more points (bit k of x <=>
        members[k], arrays of 2**m entries), log Z(x), the log potential of
        its best tree and the side A of that tree's top split (the side
        holding the lowest bit of x), as the trellis over the m points
        gives them: -inf (and best_left[x] = lowest bit) where no tree over
        x has non-zero potential. The best trees' values must be those of
        the recursion over ``split_cost_`` bit for bit (the search mixes
        both), and log Z within rounding. Returns SUBSETS_SOLVED;
        CLUSTER_CANNOT_SPLIT with only the full set's entries filled (-inf)
        when no split of the cluster has non-zero potential; or
        NO_SUBSET_SOLVER (this default), and the search tries each split
        through ``split_cost_``.
        """
        return NO_SUBSET_SOLVER

    def split_cost(self, members, in_a):
        """-log psi of the split of ``members`` putting ``in_a`` on side A."""
        cdef int[::1] points = np.ascontiguousarray(members, dtype=np.intc)
        return self.split_cost_(&points[0], points.shape[0], _sides_of(~np.asarray(in_a, bool)))

    def lower(self, members):
        """Lower bound on the cost of every tree over ``members``."""
        cdef int[::1] points = np.ascontiguousarray(members, dtype=np.intc)
        if points.shape[0] == 0:
            return 0.0
        return self.lower_(&points[0], points.shape[0])

    def log_z_upper(self, members):
        """Upper bound on log Z over ``members`` (+inf when the bound gives none)."""
        cdef int[::1] points = np.ascontiguousarray(members, dtype=np.intc)
        if points.shape[0] == 0:
            return 0.0
        return self.log_z_upper_(&points[0], points.shape[0])

    def size_classes(self, members):
        """Lower bounds on the split keys of ``members`` by the size of the smaller side.

        Returns an array ``keys`` with ``keys[p - 1]`` the bound over the
        splits whose smaller side has p points, p = 1..len(members) // 2,
        or None where the bound has none.
        """
        cdef int[::1] points = np.ascontiguousarray(members, dtype=np.intc)
        cdef double keys[MAX_SEARCH_POINTS + 1]
        cdef int m = points.shape[0]
        if m == 0 or not self.size_classes_(&points[0], m, keys):
            return None
        return np.array([keys[p] for p in range(1, m // 2 + 1)])

    def partial_key(self, members, sides):
        """Lower bound on the split keys of ``members`` whose first points lie on ``sides``.

        ``sides`` (0 = side A) holds the sides of the first ``len(sides)``
        members, 1 to ``len(members) - 1`` of them, the first on side A;
        -inf where the bound does not see partial assignments.
        """
        cdef int[::1] points = np.ascontiguousarray(members, dtype=np.intc)
        n_assigned = len(sides)
        if not 3 <= points.shape[0] <= MAX_SEARCH_POINTS:
            raise ValueError(f"partial keys need 3 to {MAX_SEARCH_POINTS} members, got "
                             f"{points.shape[0]}")
        if not 1 <= n_assigned < points.shape[0] or sides[0]:
            raise ValueError("sides must assign the first point to side A and leave one free")
        return self.partial_key_(&points[0], points.shape[0],
                                 _sides_of(np.asarray(sides) != 0), n_assigned)

    def base(self, members):
        """The assignment-free part of the split keys of ``members``."""
        cdef int[::1] points = np.ascontiguousarray(members, dtype=np.intc)
        return self.base_(&points[0], points.shape[0])

    def increments(self, members, sides, int position, int side, double[::1] pen_a,
                   double[::1] pen_b):
        """Add to pen_a, pen_b what ``members[position]`` going to ``side`` costs the others.

        ``sides[:position]`` holds the sides (0 = A) of the points assigned
        before; only entries after ``position`` change.
        """
        cdef int[::1] points = np.ascontiguousarray(members, dtype=np.intc)
        self.increments_(&points[0], points.shape[0], _sides_of(np.asarray(sides) != 0),
                         position, side, &pen_a[0], &pen_b[0])


def _sides_of(in_b):
    """The ``sides`` bits of a boolean array (True = side B)."""
    cdef uint64_t sides = 0
    cdef int k
    for k, flag in enumerate(np.asarray(in_b, dtype=bool)):
        if flag:
            sides |= (<uint64_t>1) << k
    return sides
