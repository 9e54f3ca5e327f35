"""The admissible bound of hierarchical correlation clustering.

The bound of :class:`~sktrellis.energies.CorrelationClustering`; the
contract is ``_search_bounds.pxd``; the class docstring proves the bound.
"""
from libc.stdint cimport uint64_t

import numpy as np

from .._common cimport float64_t
from ._search_bounds cimport SearchBound, connected_first, side_of


cdef inline double min3(double a, double b, double c) noexcept nogil:
    if b < a:
        a = b
    return c if c < a else a


cdef class CorrelationBound(SearchBound):
    """A lower bound on the hierarchical correlation-clustering cost.

    A split costs ``beta * (P_cross(A, B) + N(A) + N(B))`` with P the
    positive weight and N the magnitude of the negative weight inside a set.
    Summing over a tree, every positive pair is cut exactly once and a
    negative pair is paid at every inner node below the root that holds it,
    so ``cost(T over S) = beta * (P(S) + sum over the inner nodes v != root
    of N(v))`` (singletons hold no pair). The root's two children keep, in
    every triple of S, at least one pair on one side (two sides, three
    points), and a kept pair is paid at least at that child. Each pair lies
    in |S| - 2 triples, so

    ``cost(T) >= beta * (P(S) + sum over triples of the smallest negative
    magnitude among its pairs / (|S| - 2)) =: lower(S)``.

    For a split (A, B): ``split_cost + lower(A) + lower(B) >= beta * (P(S)
    + N(A) + N(B))`` as ``P_cross + P(A) + P(B) = P(S)``; with a partial
    assignment, N(A) + N(B) is at least the negative weight among the
    assigned points of each side plus, for each unassigned u, the smaller
    of its negative weight to the assigned points of A and of B.
    ``lower`` alone is weak (the 1 / (|S| - 2) factor); most of the pruning
    comes from the split keys.

    Parameters
    ----------
    weights : ndarray of shape (n, n)
        Signed weights; the diagonal is ignored.
    beta : float
        Inverse temperature of :class:`~sktrellis.energies.CorrelationClustering`.
    """

    cdef readonly object pos, neg
    cdef const float64_t* positive
    cdef const float64_t* negative
    cdef Py_ssize_t n
    cdef readonly double beta

    def __init__(self, weights, double beta):
        weights = np.array(weights, dtype=np.float64)
        np.fill_diagonal(weights, 0.0)
        pos = np.ascontiguousarray(weights.clip(min=0))
        neg = np.ascontiguousarray(-weights.clip(max=0))
        cdef const float64_t[:, ::1] pos_view = pos
        cdef const float64_t[:, ::1] neg_view = neg
        self.pos, self.neg = pos, neg
        self.n = pos.shape[0]
        self.positive = &pos_view[0, 0] if self.n else NULL
        self.negative = &neg_view[0, 0] if self.n else NULL
        self.beta = beta
        self.scale = beta
        # Splits leave in order of the partial-assignment key.
        self.refine = False

    cdef double split_cost_(self, const int* members, int m, uint64_t sides) noexcept nogil:
        cdef double total = 0.0
        cdef int x, y
        cdef Py_ssize_t row
        for x in range(m):
            row = members[x] * self.n
            for y in range(x + 1, m):
                if side_of(sides, x) != side_of(sides, y):
                    total += self.positive[row + members[y]]
                else:
                    total += self.negative[row + members[y]]
        return self.beta * total

    cdef void order_(self, int* members, int m) noexcept nogil:
        connected_first(self.negative, self.n, members, m)

    cdef double base_(self, const int* members, int m) noexcept nogil:
        cdef double total = 0.0
        cdef int x, y
        cdef Py_ssize_t row
        for x in range(m):
            row = members[x] * self.n
            for y in range(x + 1, m):
                total += self.positive[row + members[y]]
        return self.beta * total

    cdef double lower_(self, const int* members, int m) noexcept nogil:
        cdef double kept = 0.0, n_ij
        cdef int x, y, z, i, j, k
        if m >= 3:
            for x in range(m):
                i = members[x]
                for y in range(x + 1, m):
                    j = members[y]
                    n_ij = self.negative[i * self.n + j]
                    for z in range(y + 1, m):
                        k = members[z]
                        kept += min3(n_ij, self.negative[i * self.n + k],
                                     self.negative[j * self.n + k])
            kept /= m - 2
        return self.base_(members, m) + self.beta * kept

    cdef void increments_(self, const int* members, int m, uint64_t sides, int position,
                          int side, double* pen_a, double* pen_b) noexcept nogil:
        cdef double* pen = pen_a if side == 0 else pen_b
        cdef Py_ssize_t row = members[position] * self.n
        cdef int x
        for x in range(position + 1, m):
            pen[x] += self.negative[row + members[x]]
