"""The admissible bound of Dasgupta's cost (:class:`~sktrellis.energies.Dasgupta`).

The contract is ``_search_bounds.pxd``; the class docstring proves the bound.
"""
from libc.stdint cimport uint64_t

import numpy as np

from .._common cimport float64_t
from ._search_bounds cimport SearchBound, connected_first, side_of


cdef inline double max3(double a, double b, double c) noexcept nogil:
    if b > a:
        a = b
    return c if c > a else a


cdef class DasguptaBound(SearchBound):
    """The triplet bound of Dasgupta's cost.

    Cost of a tree T over S: ``beta * sum_{inner v} |v| W(left, right) =
    beta * sum_{i<j} w_ij |lca(i, j)|``. Write ``|lca(i, j)| = 2 + #{k in S:
    k in lca(i, j)}``. In a triple {i, j, k} the tree first joins one pair,
    say (i, j), and then k: k is not under lca(i, j), while j is under
    lca(i, k) and i under lca(j, k). So the triple adds ``w_ik + w_jk =
    (w_ij + w_ik + w_jk) - w_ij`` to the cost, and

    ``cost(T) = beta * (2 W(S) + sum over triples of (sum of its three
    weights - weight of the pair T joins first))``

    ``>= beta * (2 W(S) + sum over triples of its two smallest weights) =:
    lower(S)``, since the pair joined first weighs at most the triple's
    largest weight. Equality for |S| <= 3 and when the tree joins the
    heaviest pair of every triple first.

    For a split (A, B) of S the same identity gives ``split_cost(A, B) +
    lower(A) + lower(B) = lower(S) + beta * sum over the triples the split
    separates of (max weight - weight of the pair kept on one side)``: each
    separated triple has its two cross pairs paid by the split and the
    triples inside A or B are counted by lower(A) and lower(B). Every term
    is non-negative, so a partial assignment of points to sides bounds all
    its completions from below by the separated triples among the assigned
    points (``assigned``) plus, for each unassigned u, the cheaper side for
    the triples (u, i, j) with i and j assigned (disjoint triple sets for
    distinct u).

    Parameters
    ----------
    similarities : ndarray of shape (n, n)
        Non-negative similarities; the diagonal is ignored.
    beta : float
        Inverse temperature of :class:`~sktrellis.energies.Dasgupta`.
    """

    cdef readonly object w
    cdef const float64_t* weight
    cdef Py_ssize_t n
    cdef readonly double beta

    def __init__(self, similarities, double beta):
        w = np.array(similarities, dtype=np.float64, order="C")
        np.fill_diagonal(w, 0.0)
        cdef const float64_t[:, ::1] view = w
        self.w = w
        self.n = w.shape[0]
        self.weight = &view[0, 0] if self.n else NULL
        self.beta = beta
        self.scale = beta
        # The key of a complete split is its bound already.
        self.refine = False

    cdef inline double wt(self, int i, int j) noexcept nogil:
        return self.weight[i * self.n + j]

    cdef double split_cost_(self, const int* members, int m, uint64_t sides) noexcept nogil:
        cdef double cross = 0.0
        cdef int x, y
        for x in range(m):
            if side_of(sides, x):
                continue
            for y in range(m):
                if side_of(sides, y):
                    cross += self.wt(members[x], members[y])
        return self.beta * m * cross

    cdef void order_(self, int* members, int m) noexcept nogil:
        connected_first(self.weight, self.n, members, m)

    cdef double lower_(self, const int* members, int m) noexcept nogil:
        cdef double pairs = 0.0, largest = 0.0, w_ij
        cdef int x, y, z, i, j
        for x in range(m):
            i = members[x]
            for y in range(x + 1, m):
                j = members[y]
                w_ij = self.wt(i, j)
                pairs += w_ij
                for z in range(y + 1, m):
                    largest += max3(w_ij, self.wt(i, members[z]), self.wt(j, members[z]))
        # Sum of the two smallest = sum of all three - the largest; each pair
        # is in m - 2 triples.
        if m < 3:
            return self.beta * 2 * pairs
        return self.beta * (2 * pairs + (m - 2) * pairs - largest)

    cdef void increments_(self, const int* members, int m, uint64_t sides, int position,
                          int side, double* pen_a, double* pen_b) noexcept nogil:
        # For each unassigned u and each point i assigned before, the triple
        # (u, p, i), p = members[position], is separated whichever side u
        # takes unless all three share one; it then pays (its largest
        # weight - the weight of the pair kept together).
        cdef int p = members[position], u, i, x, k
        cdef double w_up, w_ui, w_pi, largest, add_a, add_b
        for x in range(position + 1, m):
            u = members[x]
            w_up = self.wt(u, p)
            add_a = 0.0
            add_b = 0.0
            for k in range(position):
                i = members[k]
                w_ui = self.wt(u, i)
                w_pi = self.wt(p, i)
                largest = max3(w_up, w_ui, w_pi)
                if side == 0:
                    if side_of(sides, k) == 0:
                        add_b += largest - w_pi
                    else:
                        add_a += largest - w_up
                        add_b += largest - w_ui
                else:
                    if side_of(sides, k) == 0:
                        add_a += largest - w_ui
                        add_b += largest - w_up
                    else:
                        add_a += largest - w_pi
            pen_a[x] += add_a
            pen_b[x] += add_b
