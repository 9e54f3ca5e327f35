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

from .._common cimport low_bit, mask_t, next_submask, popcount


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
