# Exact top-down sampling: the one draw shared by the hierarchical and flat
# samplers.
#
# Both samplers draw, for a subset S, the part of S holding low(S) -- the
# left child of a canonical split, or the cluster of S's lowest point --
# with probability w(S, P) / Z(S). The candidate parts are low(S) | sub for
# the first n_parts submasks sub of S ^ low(S) in increasing order (the
# j-th is deposit(j, S ^ low(S))): all of them for the flat trellis, all but
# S itself for the hierarchical one. Only log w differs, so each sampler
# passes its own as a function pointer. Every call site passes a constant
# static inline function, which gcc -O3 inlines into the loops below (no
# indirect call is left in the built modules): as fast as a loop written
# out for one sampler, measured.

from libc.math cimport exp

from .._common cimport deposit, index_t, low_bit, mask_t, next_submask

# log w(subset, part) of one candidate part; `model` is the sampler's tables.
ctypedef double (*part_log_weight_t)(const void* model, mask_t subset, mask_t part) noexcept nogil


cdef struct WeightCache:
    # A subset met for the first time is drawn by a scan that stops at the
    # chosen part; from its second visit on, its cumulative weights are kept
    # in `cdf` (a binary search per draw) while there is room. Broad
    # posteriors meet many subsets only once, and caching those would cost
    # more in fresh memory than the scan. The caller allocates `cdf`, so its
    # size is part of the estimator's memory estimate.
    index_t* start       # per subset: -1 never met, -2 met once, >= 0 offset in cdf
    double* cdf
    Py_ssize_t used
    Py_ssize_t capacity


cdef inline Py_ssize_t search_cumulative(const double* cdf, Py_ssize_t n, double u) noexcept nogil:
    """First j with cdf[j] > u * cdf[n - 1]: entries of zero weight are never chosen.

    Comparing with u times the computed total, rather than normalising,
    keeps rounding in log Z from leaving mass outside [0, 1).
    """
    cdef double target = u * cdf[n - 1]
    cdef Py_ssize_t lo = 0, hi = n - 1, mid
    while lo < hi:
        mid = (lo + hi) // 2
        if cdf[mid] > target:
            hi = mid
        else:
            lo = mid + 1
    return lo


cdef inline mask_t draw_part(const void* model, part_log_weight_t part_log_weight,
                             mask_t subset, Py_ssize_t n_parts, double log_z_subset,
                             double u, WeightCache* cache) noexcept nogil:
    """The first part whose cumulative probability exceeds u (uniform in [0, 1)).

    Probabilities are exp(part_log_weight(model, subset, part) - log_z_subset);
    parts of zero weight are never chosen.
    """
    cdef mask_t low = low_bit(subset), rest = subset ^ low, sub = 0, part
    cdef mask_t last_possible = low
    cdef Py_ssize_t j
    cdef double total = 0.0, weight
    cdef double* cdf
    if n_parts == 1:
        return low
    if cache.start[subset] >= 0:
        return low | deposit(<mask_t>search_cumulative(
            cache.cdf + cache.start[subset], n_parts, u), rest)
    if cache.start[subset] == -2 and cache.used + n_parts <= cache.capacity:
        cdf = cache.cdf + cache.used
        cache.start[subset] = cache.used
        cache.used += n_parts
        for j in range(n_parts):
            total = total + exp(part_log_weight(model, subset, low | sub) - log_z_subset)
            cdf[j] = total
            sub = next_submask(sub, rest)
        return low | deposit(<mask_t>search_cumulative(cdf, n_parts, u), rest)
    if cache.start[subset] == -1:
        cache.start[subset] = -2
    for j in range(n_parts):
        part = low | sub
        weight = exp(part_log_weight(model, subset, part) - log_z_subset)
        if weight > 0.0:
            total = total + weight
            last_possible = part
            if total > u:
                return part
        sub = next_submask(sub, rest)
    # Rounding left the total a hair below u: the last possible part.
    return last_possible
