# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Triple loops of the Dasgupta triplet bound (``sktrellis.energies._bounds``).

A cluster is the sorted array ``members`` of its points (int64 indices into
the similarity matrix ``w``, zero diagonal). Everything here trusts its input.
"""
from ._common cimport float64_t, intp_t


cdef inline float64_t max3(float64_t a, float64_t b, float64_t c) noexcept nogil:
    if b > a:
        a = b
    return c if c > a else a


####################################################################
# Bound of a cluster

def triple_max_sum(const float64_t[:, ::1] w, const intp_t[::1] members):
    """Sum over the triples {i, j, k} of ``members`` of max(w_ij, w_ik, w_jk)."""
    cdef Py_ssize_t m = members.shape[0], x, y, z
    cdef intp_t i, j
    cdef float64_t total = 0.0, w_ij
    with nogil:
        for x in range(m):
            i = members[x]
            for y in range(x + 1, m):
                j = members[y]
                w_ij = w[i, j]
                for z in range(y + 1, m):
                    total += max3(w_ij, w[i, members[z]], w[j, members[z]])
    return total


####################################################################
# Lazy split generation

def dasgupta_increments(const float64_t[:, ::1] w, const intp_t[::1] members,
                        const signed char[::1] sides, Py_ssize_t position, int side,
                        float64_t[::1] pen_a, float64_t[::1] pen_b):
    """Add to pen_a, pen_b of the unassigned points what ``members[position]`` going to ``side`` costs.

    For each unassigned u (positions after ``position``) and each point i
    assigned before (``sides[k]`` for k < position, 0 = A), the triple
    (u, p, i), p = members[position], is separated whichever side u takes
    unless all three share one; it then pays (its largest weight - the weight
    of the pair kept together). See ``DasguptaBound``.
    """
    cdef Py_ssize_t m = members.shape[0], x, k
    cdef intp_t p = members[position], u, i
    cdef float64_t w_up, w_ui, w_pi, largest, add_a, add_b
    with nogil:
        for x in range(position + 1, m):
            u = members[x]
            w_up = w[u, p]
            add_a = 0.0
            add_b = 0.0
            for k in range(position):
                i = members[k]
                w_ui = w[u, i]
                w_pi = w[p, i]
                largest = max3(w_up, w_ui, w_pi)
                if side == 0:
                    if sides[k] == 0:
                        add_b += largest - w_pi
                    else:
                        add_a += largest - w_up
                        add_b += largest - w_ui
                else:
                    if sides[k] == 0:
                        add_a += largest - w_ui
                        add_b += largest - w_up
                    else:
                        add_a += largest - w_pi
            pen_a[x] += add_a
            pen_b[x] += add_b
