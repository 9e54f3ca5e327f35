"""An admissible bound with a prior over tree shapes added to its splits.

A prior over tree shapes that factorises over the splits with a factor
depending only on the size of the parent (the Yule prior of the
hierarchical energies: ``1 / (|S| - 1)``) adds ``prior_cost(|S|) = -log of
that factor`` to the cost of every split of S. ``SizePriorBound`` adds it
to any energy's bound without the bound knowing.
"""
from libc.stdint cimport uint64_t

import numpy as np

from .._common cimport float64_t
from ._search_bounds cimport SearchBound


cdef class SizePriorBound(SearchBound):
    """``inner`` plus a split cost ``prior_cost[|S|]`` that depends on the parent's size only.

    With ``M(1) = 0`` and ``M(n) = prior_cost[n] + min over 0 < k < n of
    (M(k) + M(n - k))``, the least prior cost of a tree over n points:

    - ``split_cost'(S; A, B) = split_cost(S; A, B) + prior_cost[|S|]``,
      exactly the cost with the prior;
    - ``lower'(S) = lower(S) + M(|S|)`` is admissible: the cost of a tree
      is its energy cost (at least ``lower(S)``) plus its prior cost (at
      least ``M(|S|)`` by definition);
    - ``base'(S) = base(S) + M(|S|)`` keeps the partial-assignment keys
      below ``split_cost' + lower'(A) + lower'(B)`` for every completion:
      the inner keys are below ``split_cost + lower(A) + lower(B)``, and
      ``prior_cost[|S|] + M(|A|) + M(|B|) >= M(|S|)`` by the minimum.

    The key of a complete split is raised to its own bound (``refine``),
    which knows |A| and |B|. ``log_z_upper`` is not offered: the search
    then bounds log Z(S) by ``log #trees(S) - lower'(S)``, valid for any
    costs.

    Parameters
    ----------
    inner : SearchBound
        The energy's bound.
    prior_cost : array-like of shape (n_points + 1,)
        Non-negative, finite cost added to a split of a cluster of each size.
    """

    cdef readonly SearchBound inner
    cdef readonly object prior_cost
    cdef readonly object least_tree_cost
    cdef const float64_t* split_prior
    cdef const float64_t* least_prior

    def __init__(self, SearchBound inner, prior_cost):
        cost = np.array(prior_cost, dtype=np.float64)
        if cost.ndim != 1 or not np.all(np.isfinite(cost)) or np.any(cost < 0):
            raise ValueError("prior_cost must be a 1-d array of non-negative finite costs")
        least = np.zeros(len(cost))
        for size in range(2, len(cost)):
            least[size] = cost[size] + min(
                least[k] + least[size - k] for k in range(1, size // 2 + 1))
        cdef const float64_t[::1] cost_view = cost
        cdef const float64_t[::1] least_view = least
        self.inner = inner
        self.prior_cost = cost
        self.least_tree_cost = least
        self.split_prior = &cost_view[0]
        self.least_prior = &least_view[0]
        self.scale = inner.scale
        self.refine = True
        self.exact_size = inner.exact_size
        self.bounds_log_z = False

    cdef double split_cost_(self, const int* members, int m, uint64_t sides) noexcept nogil:
        return self.inner.split_cost_(members, m, sides) + self.split_prior[m]

    cdef double lower_(self, const int* members, int m) noexcept nogil:
        return self.inner.lower_(members, m) + self.least_prior[m]

    cdef double base_(self, const int* members, int m) noexcept nogil:
        return self.inner.base_(members, m) + self.least_prior[m]

    cdef void increments_(self, const int* members, int m, uint64_t sides, int position,
                          int side, double* pen_a, double* pen_b) noexcept nogil:
        self.inner.increments_(members, m, sides, position, side, pen_a, pen_b)

    cdef void order_(self, int* members, int m) noexcept nogil:
        self.inner.order_(members, m)
