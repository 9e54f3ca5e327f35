# The inner loop of the cache-blocked inside passes, shared by the
# hierarchical (``_hierarchical.pyx``) and flat (``_flat.pyx``) trellises.
#
# A subset S is (S_hi, S_lo), S_lo its low block_bits bits. Both passes sum,
# for every S, terms of one part A holding low(S) and its complement S ^ A
# (the left child and the right child of a split; the cluster and the rest
# of a partition). With low(S) in S_lo, A is (A_hi, A_lo), A_lo holding
# low(S_lo), and the pair's table entries lie in the rows A_hi and
# S_hi ^ A_hi: a row is 2**block_bits 16-byte records (linear-space factor,
# log MAP value) indexed by the low bits. This sweeps the terms of one S_lo
# within one pair of rows.

from libc.math cimport INFINITY

from .._common cimport index_t, low_bit, mask_t, next_submask, popcount


cdef inline bint sweep_row_pair(const double* left_row, const double* right_row,
                                mask_t part, double* total, double* best,
                                mask_t* best_part) noexcept nogil:
    """Add the splits (A_lo, part ^ A_lo), low(part) in A_lo, of one row pair.

    ``total`` gets the sum of left_row[A_lo] * right_row[part ^ A_lo] (factor
    columns), ``best`` the largest sum of the MAP columns. Returns whether
    ``best`` grew, and then ``best_part`` is the first A_lo (in increasing
    order) reaching it, so ties keep the first split as in `inside_level`.
    """
    cdef mask_t low = low_bit(part), rest = part ^ low
    cdef mask_t bit1, bit2, pair, high, sub = 0, best_sub = 0, left
    cdef double acc = 0.0, acc_odd = 0.0, top = best[0], value
    cdef const double* a
    cdef const double* b
    cdef bint improved = False
    if popcount(rest) < 2:
        while True:
            left = low | sub
            acc = acc + left_row[2 * left] * right_row[2 * (part ^ left)]
            value = left_row[2 * left + 1] + right_row[2 * (part ^ left) + 1]
            if value > top:
                top = value
                best_part[0] = left
                improved = True
            if sub == rest:
                break
            sub = next_submask(sub, rest)
        total[0] += acc
        best[0] = top
        return improved
    # Four splits per step, over the four ways of sharing the two lowest
    # points of rest: constant offsets into both rows, two accumulators,
    # and one comparison with the running best per four MAP terms.
    bit1 = low_bit(rest)
    bit2 = low_bit(rest ^ bit1)
    pair = bit1 | bit2
    high = rest ^ pair
    while True:
        a = left_row + 2 * (low | sub)
        b = right_row + 2 * (high ^ sub)
        acc = acc + a[0] * b[2 * pair] + a[2 * bit1] * b[2 * bit2]
        acc_odd = acc_odd + a[2 * bit2] * b[2 * bit1] + a[2 * pair] * b[0]
        value = max(max(a[1] + b[2 * pair + 1], a[2 * bit1 + 1] + b[2 * bit2 + 1]),
                    max(a[2 * bit2 + 1] + b[2 * bit1 + 1], a[2 * pair + 1] + b[1]))
        if value > top:
            top = value
            best_sub = sub
            improved = True
        if sub == high:
            break
        sub = next_submask(sub, high)
    total[0] += acc + acc_odd
    best[0] = top
    if improved:
        # The first of the four splits of the winning step that reaches top.
        a = left_row + 2 * (low | best_sub)
        b = right_row + 2 * (high ^ best_sub)
        if a[1] + b[2 * pair + 1] == top:
            best_part[0] = low | best_sub
        elif a[2 * bit1 + 1] + b[2 * bit2 + 1] == top:
            best_part[0] = low | best_sub | bit1
        elif a[2 * bit2 + 1] + b[2 * bit1 + 1] == top:
            best_part[0] = low | best_sub | bit2
        else:
            best_part[0] = low | best_sub | pair
    return improved


cdef inline void sweep_item(const double* left_rows, const double* right_rows, mask_t high,
                            int block_bits, const mask_t* low_order, Py_ssize_t first,
                            Py_ssize_t stop, double* total, double* best,
                            mask_t* best_part) noexcept nogil:
    """Sum every row pair of the subsets S = (high, S_lo), S_lo in low_order[first:stop].

    The left rows are (A_hi, *) for every A_hi within ``high`` in increasing
    order and the right rows (high ^ A_hi, *): each pair is swept over all
    the S_lo while both stay in cache. ``total[S]``, ``best[S]`` and
    ``best_part[S]`` (the first part reaching the maximum) are started
    afresh; the caller turns the linear sums into logs.
    """
    cdef mask_t base = high << block_bits, high_left = 0, part, parent, arg = 0
    cdef const double* left_row
    cdef const double* right_row
    cdef Py_ssize_t i
    for i in range(first, stop):
        parent = base | low_order[i]
        total[parent] = 0.0
        best[parent] = -INFINITY
        best_part[parent] = 0
    while True:
        left_row = left_rows + 2 * (<index_t>high_left << block_bits)
        right_row = right_rows + 2 * (<index_t>(high ^ high_left) << block_bits)
        for i in range(first, stop):
            part = low_order[i]
            parent = base | part
            if sweep_row_pair(left_row, right_row, part, &total[parent], &best[parent], &arg):
                best_part[parent] = (high_left << block_bits) | arg
        if high_left == high:
            break
        high_left = next_submask(high_left, high)
