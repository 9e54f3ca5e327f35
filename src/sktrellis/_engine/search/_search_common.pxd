# Small helpers shared by the units of the best-first search
# (_split_generator, _graph, _map_search, _log_partition): float slack, log
# differences, the mask <-> members conventions of _search_bounds.pxd and
# the clock of the kernels' deadlines.
# Inline, so each unit compiles them into its own loops.

from libc.math cimport INFINITY, exp, fabs, isfinite, log1p
from libc.stdint cimport uint64_t
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec


cdef inline double tolerance(double value) noexcept nogil:
    """Slack for float sums: a bound within this of a cost counts as meeting it."""
    if not isfinite(value):
        return 0.0
    return 1e-9 * max(1.0, fabs(value))


cdef inline double log_sub(double x, double y) noexcept nogil:
    """log(exp(x) - exp(y)) for y <= x (-inf when equal)."""
    if y >= x:
        return -INFINITY
    if y == -INFINITY:
        return x
    return x + log1p(-exp(y - x))


cdef inline int members_of(uint64_t mask, int* members) noexcept nogil:
    """The sorted points of ``mask``; returns their number."""
    cdef int m = 0, i = 0
    while mask:
        if mask & 1:
            members[m] = i
            m += 1
        mask >>= 1
        i += 1
    return m


cdef inline uint64_t side_a_mask(const int* members, int m, uint64_t sides) noexcept nogil:
    cdef uint64_t mask = 0
    cdef int k
    for k in range(m):
        if not (sides >> k) & 1:
            mask |= (<uint64_t>1) << members[k]
    return mask



cdef inline double now_seconds() noexcept nogil:
    """A monotonic clock in seconds, for deadlines checked without the GIL."""
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + 1e-9 * ts.tv_nsec
