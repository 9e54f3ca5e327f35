"""Dynamic programs of the flat cluster trellis over all 2**N subsets.

Everything here trusts its input: masks are valid, tables are C-contiguous
float64 of length 2**N (log E(C) of every cluster, log E of the empty set
unused), levels are complete. Validation happens once in the Python layer
(``sktrellis._flat``); the driver is ``flat_trellis.FlatTrellis``.

A partition of S is its cluster C holding low(S) plus a partition of S \\ C:

    log Z(S)   = logsumexp_{low(S) in C, C subset of S} [log E(C) + log Z(S \\ C)]
    log MAP(S) = max_C                                   [log E(C) + log MAP(S \\ C)]

with log Z(empty) = log MAP(empty) = 0, about 3**N / 2 (subset, cluster)
pairs in all. With a cluster-count dimension, Z(S, j) sums the partitions of
S into exactly j clusters: Z(S, j + 1) = sum_C E(C) Z(S \\ C, j). Subsets
are processed by size ("levels"); all subsets of one size are independent,
which is what the OpenMP loops use.
"""
from cython.parallel cimport parallel, prange, threadid
from libc.math cimport INFINITY, exp, log, isfinite
from libc.stdint cimport uint64_t

import numpy as np

from .._common cimport (
    LINEAR_SUM_FLOOR,
    LogSum, count_add, ctz, empty_log_sum, flush_subnormals, index_t, log_sum_add,
    log_sum_value, low_bit, mask_t, next_submask, popcount, restore_fp,
)
from ._row_sweep cimport sweep_item
from ._sampling cimport WeightCache, draw_part


# The count pass reads one row of a large table per (subset, cluster) pair,
# scattered across the table: it asks for the rows of later pairs ahead of
# time, and accumulates a row with a loop the compiler may vectorise without
# checking for overlap (the accumulator never aliases the table).
cdef extern from *:
    """
    #define sktrellis_prefetch(p) __builtin_prefetch((const void*)(p))
    static inline void sktrellis_axpy(double* __restrict y, const double* __restrict x,
                                      double c, int n) {
        for (int j = 0; j < n; j++) y[j] += c * x[j];
    }
    """
    void prefetch "sktrellis_prefetch"(const double* p) noexcept nogil
    void axpy "sktrellis_axpy"(double* y, const double* x, double c, int n) noexcept nogil


###############################################################################
# Scaled factors

def scale_cluster_factors(const double[::1] cluster_scale, const mask_t[::1] order,
                          Py_ssize_t stop, const double[::1] size_gain,
                          double[:, ::1] cluster_factors, int n_threads):
    """Column 0 of `cluster_factors` for the clusters order[1:stop].

    For a level of subsets of size k with log scale M, and mz(b) the largest
    log Z over subsets of size b, the term of cluster C and rest R = S \\ C is

        exp(log E(C) + log Z(R) - M) = u[C] * v[R],
        u[C] = exp(log E(C) + mz(k - |C|) - M),  v[R] = exp(log Z(R) - mz(|R|)),

    with M = max_a (max log E over clusters of size a) + mz(k - a), so both
    factors are <= 1 and products never overflow. u[C] is
    cluster_scale[C] * size_gain[|C|], both <= 1: cluster_scale[C] =
    exp(log E(C) - (max log E over clusters of size |C|)).
    """
    cdef Py_ssize_t i
    cdef mask_t cluster
    for i in prange(1, stop, nogil=True, num_threads=n_threads, schedule="static"):
        cluster = order[i]
        cluster_factors[cluster, 0] = cluster_scale[cluster] * size_gain[popcount(cluster)]


###############################################################################
# Inside pass: log Z, log MAP and the MAP cluster of every subset

cdef inline double exact_log_sum(mask_t parent, const double* log_e,
                                 const double* log_z) noexcept nogil:
    """log Z(parent) by an online logsumexp over the clusters holding its low point."""
    cdef mask_t low = low_bit(parent), rest = parent ^ low, sub = 0, cluster
    cdef LogSum total = empty_log_sum()
    while True:
        cluster = low | sub
        log_sum_add(&total, log_e[cluster] + log_z[parent ^ cluster])
        if sub == rest:
            break
        sub = next_submask(sub, rest)
    return log_sum_value(&total)


def inside_level(const mask_t[::1] parents, const double[::1] log_e,
                 double[::1] log_z, double[::1] log_map, mask_t[::1] best_cluster,
                 counts, double level_scale,
                 const double[:, ::1] cluster_factors, const double[:, ::1] rest_factors,
                 int n_threads):
    """Fill log Z, log MAP and the MAP cluster of `parents` (all of one size >= 2).

    Row C of `cluster_factors` is (u[C], log E(C)), row R of `rest_factors`
    (v[R], log MAP(R)), row 0 (the empty rest) being (1, 0): the loop reads
    one 16-byte record per side (see `scale_cluster_factors`). `counts` is
    None, or a uint64 array of shape (2**N, 2) holding 128-bit counts of the
    partitions with finite potential, filled here when some cluster is
    forbidden (log E = -inf).
    """
    cdef Py_ssize_t i, n = parents.shape[0]
    cdef uint64_t* count = NULL
    cdef uint64_t[:, ::1] count_view
    cdef mask_t parent, low, rest, sub, cluster, other, arg, arg_odd, pair_bit
    cdef double acc, acc_odd, best, best_odd, value
    cdef const double* e = &log_e[0]
    cdef double* z = &log_z[0]
    cdef double* m = &log_map[0]
    cdef const double* cf = &cluster_factors[0, 0]
    cdef const double* rf = &rest_factors[0, 0]
    cdef bint with_counts = counts is not None
    cdef unsigned int fp_state = 0
    if n == 0:
        return
    if with_counts:
        count_view = counts
        count = &count_view[0, 0]
    # Subsets of a level cost the same, but a thread can be descheduled on a
    # busy machine: guided scheduling lets the others take over its share.
    with nogil, parallel(num_threads=n_threads):
        fp_state = flush_subnormals()
        for i in prange(n, schedule="guided"):
            parent = parents[i]
            low = low_bit(parent)
            rest = parent ^ low
            # Submasks of rest of ranks 2j and 2j + 1 differ by its lowest bit:
            # walking them in pairs gives two independent accumulators, so the
            # multiply-adds do not wait on each other's latency. The last odd
            # member is the whole parent, whose rest is the empty set (row 0).
            pair_bit = low_bit(rest)
            rest = rest ^ pair_bit
            sub = 0
            acc = 0.0
            acc_odd = 0.0
            best = -INFINITY
            best_odd = -INFINITY
            arg = 0
            arg_odd = 0
            if with_counts:
                count[2 * parent] = 0
                count[2 * parent + 1] = 0
            while True:
                cluster = low | sub
                other = parent ^ cluster
                acc = acc + cf[2 * cluster] * rf[2 * other]
                value = cf[2 * cluster + 1] + rf[2 * other + 1]
                if value > best:
                    best = value
                    arg = cluster
                if with_counts and e[cluster] > -INFINITY:
                    count_add(&count[2 * parent], &count[2 * other])
                cluster = cluster | pair_bit
                other = other ^ pair_bit
                acc_odd = acc_odd + cf[2 * cluster] * rf[2 * other]
                value = cf[2 * cluster + 1] + rf[2 * other + 1]
                if value > best_odd:
                    best_odd = value
                    arg_odd = cluster
                if with_counts and e[cluster] > -INFINITY:
                    count_add(&count[2 * parent], &count[2 * other])
                if sub == rest:
                    break
                sub = next_submask(sub, rest)
            acc = acc + acc_odd
            # Ties go to the first cluster in increasing order of its mask.
            if best_odd > best or (best_odd == best and arg_odd < arg):
                best = best_odd
                arg = arg_odd
            if acc > LINEAR_SUM_FLOOR and isfinite(acc):
                z[parent] = level_scale + log(acc)
            else:
                z[parent] = exact_log_sum(parent, e, z)
            m[parent] = best
            best_cluster[parent] = arg
        restore_fp(fp_state)


# Cache-blocked order (from N = 16, subsets without forbidden clusters; see
# ``_row_sweep.pxd``): a cluster of S = (S_hi, S_lo) with S_lo not empty is
# (C_hi, C_lo), C_hi any subset of S_hi and C_lo a subset of S_lo holding
# low(S_lo); its record and its rest's lie in the rows C_hi and S_hi ^ C_hi
# of the factor tables. For one S_hi and one such pair of rows, the kernel
# sweeps every S_lo of one size, so the two rows are read from cache
# C(block_bits, |S_lo|) times instead of from memory once per subset. Row
# pairs come in increasing C_hi and clusters within a row in increasing
# C_lo: increasing mask order, so ties go to the same cluster as in
# `inside_level`. The subsets of one (S_hi, |S_lo|) are finished by one
# thread, which keeps their running sums in log_z, log_map and best_cluster
# (no subset of the level is read by the level). Subsets with S_lo empty go
# to `inside_level`.

def inside_level_blocked(int block_bits, const mask_t[::1] high_parts,
                         const index_t[::1] low_sizes, const mask_t[::1] low_order,
                         const index_t[::1] low_level_start, const double[::1] log_e,
                         double[::1] log_z, double[::1] log_map, mask_t[::1] best_cluster,
                         double level_scale, const double[:, ::1] cluster_factors,
                         const double[:, ::1] rest_factors, int n_threads):
    """`inside_level` for the subsets (high_parts[i] << block_bits) | S_lo, without counts.

    S_lo is every `low_sizes[i]`-point subset of the low bits
    (``low_order[low_level_start[j]:low_level_start[j + 1]]``, j >= 1); all
    the subsets have one size. The factors are those of `inside_level`
    (row 0 of `rest_factors`, the empty rest, is (1, 0)). Results equal
    those of `inside_level`: log MAP and the MAP cluster exactly, log Z to
    rounding (the same terms summed in another order).
    """
    cdef Py_ssize_t item, i, n_items = high_parts.shape[0], first, stop
    cdef mask_t high, base, parent
    cdef double total
    cdef const double* e = &log_e[0]
    cdef double* z = &log_z[0]
    cdef double* m = &log_map[0]
    cdef mask_t* best = &best_cluster[0]
    cdef const double* cf = &cluster_factors[0, 0]
    cdef const double* rf = &rest_factors[0, 0]
    cdef unsigned int fp_state = 0
    if n_items == 0:
        return
    # Items differ in cost by orders of magnitude (2**|S_hi| row pairs of
    # C(block_bits, j) parts each), so they are handed out one at a time.
    with nogil, parallel(num_threads=n_threads):
        fp_state = flush_subnormals()
        for item in prange(n_items, schedule="dynamic", chunksize=1):
            high = high_parts[item]
            base = high << block_bits
            first = low_level_start[low_sizes[item]]
            stop = low_level_start[low_sizes[item] + 1]
            sweep_item(cf, rf, high, block_bits, &low_order[0], first, stop, z, m, best)
            for i in range(first, stop):
                parent = base | low_order[i]
                total = z[parent]
                if total > LINEAR_SUM_FLOOR and isfinite(total):
                    z[parent] = level_scale + log(total)
                else:
                    z[parent] = exact_log_sum(parent, e, z)
        restore_fp(fp_state)


###############################################################################
# MAP-only pass: log MAP of every subset the full set's recursion reads

def map_level(const mask_t[::1] parents, const double[::1] log_e, double[::1] log_map,
              int n_threads):
    """Fill log MAP(S) = max_C [log E(C) + log MAP(S \\ C)] of `parents` (one size >= 2).

    The max half of `inside_level` alone: the same additions
    (log E(C) + log MAP(rest), log MAP(empty) = log_map[0] = 0), so the same
    values to the last bit, but 8-byte reads, no sums and no argmax (the
    MAP is recovered top-down by `map_cluster`).
    """
    cdef Py_ssize_t i, n = parents.shape[0]
    cdef mask_t parent, low, rest, sub, cluster, other, pair_bit
    cdef double best, best_odd, value
    cdef const double* e = &log_e[0]
    cdef double* m = &log_map[0]
    if n == 0:
        return
    for i in prange(n, nogil=True, num_threads=n_threads, schedule="guided"):
        parent = parents[i]
        low = low_bit(parent)
        rest = parent ^ low
        # Clusters in pairs differing by the rest's lowest bit, as in
        # `inside_level`: two independent running maxima.
        pair_bit = low_bit(rest)
        rest = rest ^ pair_bit
        sub = 0
        best = -INFINITY
        best_odd = -INFINITY
        while True:
            cluster = low | sub
            other = parent ^ cluster
            value = e[cluster] + m[other]
            if value > best:
                best = value
            value = e[cluster | pair_bit] + m[other ^ pair_bit]
            if value > best_odd:
                best_odd = value
            if sub == rest:
                break
            sub = next_submask(sub, rest)
        m[parent] = best_odd if best_odd > best else best


cdef inline double sweep_map_rows(const double* cluster_row, const double* rest_row,
                                  mask_t part, double top) noexcept nogil:
    """max(top, max over C_lo of cluster_row[C_lo] + rest_row[part ^ C_lo]), low(part) in C_lo.

    Four clusters per step, over the four ways of sharing the two lowest
    points of part's rest: constant offsets into both rows and one
    comparison per four terms.
    """
    cdef mask_t low = low_bit(part), rest = part ^ low, bit1, bit2, pair, high, sub = 0
    cdef const double* a
    cdef const double* b
    cdef double value
    if popcount(rest) < 2:
        while True:
            value = cluster_row[low | sub] + rest_row[rest ^ sub]
            if value > top:
                top = value
            if sub == rest:
                break
            sub = next_submask(sub, rest)
        return top
    bit1 = low_bit(rest)
    bit2 = low_bit(rest ^ bit1)
    pair = bit1 | bit2
    high = rest ^ pair
    while True:
        a = cluster_row + (low | sub)
        b = rest_row + (high ^ sub)
        value = max(max(a[0] + b[pair], a[bit1] + b[bit2]),
                    max(a[bit2] + b[bit1], a[pair] + b[0]))
        if value > top:
            top = value
        if sub == high:
            break
        sub = next_submask(sub, high)
    return top


def map_level_blocked(int block_bits, const mask_t[::1] high_parts,
                      const index_t[::1] low_sizes, const mask_t[::1] low_order,
                      const index_t[::1] low_level_start, const double[::1] log_e,
                      double[::1] log_map, int n_threads):
    """`map_level` for the parents (high_parts[i] << block_bits) | S_lo without point 0.

    S_lo is every `low_sizes[i]`-point subset of the low bits
    (``low_order[low_level_start[j]:low_level_start[j + 1]]``, j >= 1) that
    lacks point 0 (the subsets `map_level` fills; the full set goes there).
    A cluster of S = (S_hi, S_lo) is (C_hi, C_lo) with low(S_lo) in C_lo:
    for each C_hi of S_hi, the row of clusters (C_hi, *) and the row of
    rests (S_hi ^ C_hi, *), 2 x 2**block_bits doubles, serve all the S_lo of
    the item while they are in cache. The same terms as `map_level`, so the
    same maxima.
    """
    cdef Py_ssize_t item, i, n_items = high_parts.shape[0], first, stop
    cdef mask_t high, base, high_cluster, part
    cdef const double* e = &log_e[0]
    cdef double* m = &log_map[0]
    cdef const double* cluster_row
    cdef const double* rest_row
    if n_items == 0:
        return
    # Items differ in cost by orders of magnitude (2**|S_hi| row pairs of
    # C(block_bits, j) parts each), so they are handed out one at a time.
    for item in prange(n_items, nogil=True, num_threads=n_threads,
                       schedule="dynamic", chunksize=1):
        high = high_parts[item]
        base = high << block_bits
        first = low_level_start[low_sizes[item]]
        stop = low_level_start[low_sizes[item] + 1]
        for i in range(first, stop):
            if low_order[i] & 1 == 0:
                m[base | low_order[i]] = -INFINITY
        high_cluster = 0
        while True:
            cluster_row = e + (<index_t>high_cluster << block_bits)
            rest_row = m + (<index_t>(high ^ high_cluster) << block_bits)
            for i in range(first, stop):
                part = low_order[i]
                if part & 1 == 0:
                    m[base | part] = sweep_map_rows(cluster_row, rest_row, part, m[base | part])
            if high_cluster == high:
                break
            high_cluster = next_submask(high_cluster, high)


def map_cluster(const double[::1] log_e, const double[::1] log_map, mask_t subset):
    """The MAP cluster holding low(subset), from the table of `map_level`.

    Recomputes the maximisation for one subset from the same sums, so it
    finds the maximum `inside_level` finds and breaks ties the same way: the
    first cluster in increasing mask order.
    """
    cdef mask_t low = low_bit(subset), rest = subset ^ low, sub = 0, cluster
    cdef mask_t arg = 0
    cdef double best = -INFINITY, value
    with nogil:
        while True:
            cluster = low | sub
            value = log_e[cluster] + log_map[subset ^ cluster]
            if value > best:
                best = value
                arg = cluster
            if sub == rest:
                break
            sub = next_submask(sub, rest)
    return arg


###############################################################################
# Inside pass with a cluster-count dimension

cdef void exact_count_sums(mask_t parent, int size, const double* log_e,
                           const double* log_zk, const index_t* offsets,
                           const double* count_scale, const double* acc,
                           double* top, double* out) noexcept nogil:
    """log Z(parent, j) in log space for the j whose scaled sum fell below the floor."""
    cdef mask_t low = low_bit(parent), rest = parent ^ low, sub = 0, cluster, other
    cdef const double* row
    cdef double base, value
    cdef int j, n_rest
    for j in range(2, size + 1):
        top[j] = -INFINITY
    # Proper clusters only: the whole parent is the single-cluster partition.
    while sub != rest:
        cluster = low | sub
        other = parent ^ cluster
        n_rest = popcount(other)
        base = log_e[cluster]
        row = log_zk + offsets[other]
        for j in range(1, n_rest + 1):
            value = base + row[j - 1]
            if value > top[j + 1]:
                top[j + 1] = value
        sub = next_submask(sub, rest)
    for j in range(2, size + 1):
        if count_scale[j] > -INFINITY and not acc[j] > LINEAR_SUM_FLOOR:
            out[j - 1] = 0.0 if top[j] > -INFINITY else -INFINITY
    sub = 0
    while sub != rest:
        cluster = low | sub
        other = parent ^ cluster
        n_rest = popcount(other)
        base = log_e[cluster]
        row = log_zk + offsets[other]
        for j in range(1, n_rest + 1):
            if count_scale[j + 1] > -INFINITY and not acc[j + 1] > LINEAR_SUM_FLOOR \
                    and top[j + 1] > -INFINITY:
                out[j] = out[j] + exp(base + row[j - 1] - top[j + 1])
        sub = next_submask(sub, rest)
    for j in range(2, size + 1):
        if count_scale[j] > -INFINITY and not acc[j] > LINEAR_SUM_FLOOR \
                and top[j] > -INFINITY:
            out[j - 1] = top[j] + log(out[j - 1])


cdef inline mask_t next_same_size(mask_t index) noexcept nogil:
    """The next larger mask with as many bits (Gosper's hack); 0 stays 0."""
    cdef mask_t carry, moved
    if index == 0:
        return 0
    carry = index & (~index + 1)
    moved = index + carry
    return moved | (((index ^ moved) >> 2) >> ctz(carry))


def count_level(const mask_t[::1] parents, const double[::1] log_e,
                const double[::1] cluster_scale, const double[:, ::1] gain,
                const double[::1] count_scale, const index_t[::1] offsets,
                double[::1] log_zk, const double[::1] scaled_zk,
                const index_t[:, ::1] binomial,
                double[:, ::1] work, mask_t[:, ::1] spread, int n_threads):
    """Fill log Z(S, j) of `parents` for every number of clusters j.

    Row S of the count tables starts at offsets[S] and holds j = 1..|S|. For
    the level of size k, with mzc(b, j) the largest log Z(R, j) over |R| = b,
    the term of cluster C (|C| = a) and rest R with j clusters is

        exp(log E(C) + log Z(R, j) - Mc(j + 1))
            = cluster_scale[C] * gain[a, j] * scaled_zk[R, j],

    scaled_zk[R, j] = exp(log Z(R, j) - mzc(|R|, j)), gain[a, j] =
    exp(max log E over size a + mzc(k - a, j) - Mc(j + 1)), and
    Mc(j + 1) = count_scale[j + 1] the largest term over a: all three <= 1.
    A sum below the floor is redone in log space (`exact_count_sums`).

    Clusters are visited by size a, so the rest's row length k - a is fixed
    within a group (no mispredicted loop exits) and gain[a] is applied once
    per group: cluster C is low(S) plus the (a - 1)-subsets of the other
    points, enumerated in index space (Gosper's hack) and mapped to masks by
    two lookup tables of 2**((k - 1) / 2) entries (`spread`, per thread).
    Two accumulator rows alternate so consecutive updates do not wait on
    each other. `work` is per-thread
    scratch of shape (n_threads, 5 * (N + 2)).
    """
    cdef Py_ssize_t i, n = parents.shape[0]
    cdef int size = popcount(parents[0]) if n else 0
    cdef int j, t, a, n_rest, width = gain.shape[1] + 1
    cdef int n_low_bits = (size - 1) // 2
    cdef Py_ssize_t q, n_clusters, low_count = <Py_ssize_t>1 << n_low_bits
    cdef mask_t parent, low, rest, sub, cluster, other, bits, bit, index, ahead
    cdef mask_t low_mask = <mask_t>(low_count - 1)
    cdef double c
    cdef double* acc
    cdef double* top
    cdef double* banks
    cdef double* out
    cdef mask_t* spread_low
    cdef mask_t* spread_high
    cdef const double* g
    cdef bint fallback
    cdef const double* e = &log_e[0]
    cdef const double* u = &cluster_scale[0]
    cdef const double* v = &scaled_zk[0]
    cdef const double* gains = &gain[0, 0]
    cdef Py_ssize_t gain_stride = gain.shape[1]
    cdef const index_t* off = &offsets[0]
    cdef double* lz = &log_zk[0]
    cdef unsigned int fp_state = 0
    if n == 0:
        return
    with nogil, parallel(num_threads=n_threads):
        fp_state = flush_subnormals()
        for i in prange(n, schedule="guided"):
            acc = &work[threadid(), 0]
            top = acc + width
            banks = top + width
            spread_low = &spread[threadid(), 0]
            spread_high = spread_low + low_count
            parent = parents[i]
            low = low_bit(parent)
            rest = parent ^ low
            # spread_low[x] | spread_high[y] is the submask of rest whose rank
            # has low bits x and high bits y.
            bits = rest
            spread_low[0] = 0
            for t in range(n_low_bits):
                bit = low_bit(bits)
                bits = bits ^ bit
                for q in range(<Py_ssize_t>1 << t):
                    spread_low[(<Py_ssize_t>1 << t) + q] = spread_low[q] | bit
            spread_high[0] = 0
            for t in range(size - 1 - n_low_bits):
                bit = low_bit(bits)
                bits = bits ^ bit
                for q in range(<Py_ssize_t>1 << t):
                    spread_high[(<Py_ssize_t>1 << t) + q] = spread_high[q] | bit
            for j in range(size + 1):
                acc[j] = 0.0
            for a in range(1, size):
                n_rest = size - a
                for j in range(2 * width):
                    banks[j] = 0.0
                n_clusters = binomial[size - 1, a - 1]
                index = <mask_t>((1 << (a - 1)) - 1)
                ahead = index
                for q in range(4 if n_clusters > 4 else n_clusters):
                    ahead = next_same_size(ahead)
                for q in range(n_clusters):
                    sub = spread_low[index & low_mask] | spread_high[index >> n_low_bits]
                    cluster = low | sub
                    other = parent ^ cluster
                    if q + 4 < n_clusters:
                        prefetch(v + off[parent ^ (low | spread_low[ahead & low_mask]
                                                   | spread_high[ahead >> n_low_bits])])
                        ahead = next_same_size(ahead)
                    c = u[cluster]
                    if c > 0.0:
                        axpy(banks + (q & 1) * width, v + off[other], c, n_rest)
                    index = next_same_size(index)
                g = gains + a * gain_stride
                for j in range(1, n_rest + 1):
                    acc[j + 1] = acc[j + 1] + g[j] * (banks[j - 1] + banks[width + j - 1])
            out = lz + off[parent]
            out[0] = e[parent]
            fallback = False
            for j in range(2, size + 1):
                if count_scale[j] == -INFINITY:
                    out[j - 1] = -INFINITY
                elif acc[j] > LINEAR_SUM_FLOOR:
                    out[j - 1] = count_scale[j] + log(acc[j])
                else:
                    fallback = True
            if fallback:
                exact_count_sums(parent, size, e, lz, off, &count_scale[0], acc, top, out)
        restore_fp(fp_state)


def count_level_blocked(int block_bits, const mask_t[::1] high_parts,
                        const index_t[::1] low_sizes, const mask_t[::1] low_order,
                        const index_t[::1] low_level_start, int size,
                        const double[::1] log_e, const double[::1] cluster_scale,
                        const double[:, ::1] gain, const double[::1] count_scale,
                        const index_t[::1] offsets, double[::1] log_zk,
                        const double[::1] scaled_zk, double[:, ::1] work, int n_threads):
    """`count_level` for the subsets (high_parts[i] << block_bits) | S_lo without point 0.

    S_lo is every `low_sizes[i]`-point subset of the low bits (j >= 1)
    lacking point 0; all the subsets have `size` points. Clusters are
    visited one row pair at a time as in `inside_level_blocked`: for one
    C_hi, the cluster factors (C_hi, *) and the count rows of the rests
    (S_hi ^ C_hi, *) serve every S_lo of the item. Cluster sizes vary within
    a row, so each term carries its gain[|C|, j] (in `count_level` a group
    of clusters of one size shares it): the same terms, summed in another
    order. `work` is per-thread scratch of shape
    (n_threads, (C(block_bits, block_bits // 2) + 1) * (N + 2)) or more.
    """
    cdef Py_ssize_t item, i, n_items = high_parts.shape[0], first, stop
    cdef int j, a, a_high, n_rest, width = size + 2
    cdef mask_t high, base, high_cluster, high_rest, part, parent, low, rest, sub
    cdef mask_t cluster_low, rest_mask
    cdef double c
    cdef double* acc
    cdef double* top
    cdef double* accs
    cdef double* out
    cdef const double* g
    cdef const double* row
    cdef const double* cluster_row
    cdef bint fallback
    cdef const double* e = &log_e[0]
    cdef const double* u = &cluster_scale[0]
    cdef const double* v = &scaled_zk[0]
    cdef const double* gains = &gain[0, 0]
    cdef Py_ssize_t gain_stride = gain.shape[1]
    cdef const index_t* off = &offsets[0]
    cdef double* lz = &log_zk[0]
    cdef unsigned int fp_state = 0
    if n_items == 0:
        return
    with nogil, parallel(num_threads=n_threads):
        fp_state = flush_subnormals()
        for item in prange(n_items, schedule="dynamic", chunksize=1):
            top = &work[threadid(), 0]
            accs = top + width
            high = high_parts[item]
            base = high << block_bits
            first = low_level_start[low_sizes[item]]
            stop = low_level_start[low_sizes[item] + 1]
            for i in range((stop - first) * width):
                accs[i] = 0.0
            high_cluster = 0
            while True:
                a_high = popcount(high_cluster)
                high_rest = (high ^ high_cluster) << block_bits
                cluster_row = u + (<index_t>high_cluster << block_bits)
                for i in range(first, stop):
                    part = low_order[i]
                    if part & 1:
                        continue
                    acc = accs + (i - first) * width
                    low = low_bit(part)
                    rest = part ^ low
                    sub = 0
                    while True:
                        cluster_low = low | sub
                        rest_mask = high_rest | (rest ^ sub)
                        # Proper clusters only: the whole subset is Z(S, 1).
                        if rest_mask == 0:
                            break
                        c = cluster_row[cluster_low]
                        if c > 0.0:
                            a = a_high + popcount(cluster_low)
                            n_rest = size - a
                            g = gains + a * gain_stride
                            row = v + off[rest_mask]
                            for j in range(1, n_rest + 1):
                                acc[j + 1] = acc[j + 1] + c * g[j] * row[j - 1]
                        if sub == rest:
                            break
                        sub = next_submask(sub, rest)
                if high_cluster == high:
                    break
                high_cluster = next_submask(high_cluster, high)
            for i in range(first, stop):
                part = low_order[i]
                if part & 1:
                    continue
                parent = base | part
                acc = accs + (i - first) * width
                out = lz + off[parent]
                out[0] = e[parent]
                fallback = False
                for j in range(2, size + 1):
                    if count_scale[j] == -INFINITY:
                        out[j - 1] = -INFINITY
                    elif acc[j] > LINEAR_SUM_FLOOR:
                        out[j - 1] = count_scale[j] + log(acc[j])
                    else:
                        fallback = True
                if fallback:
                    exact_count_sums(parent, size, e, lz, off, &count_scale[0], acc, top, out)
        restore_fp(fp_state)


###############################################################################
# MAP partition into a given number of clusters
#
# M(S, j), the largest log potential of a partition of S into j clusters,
# obeys M(S, 1) = log E(S) and M(S, j) = max_C [log E(C) + M(S \ C, j - 1)]
# over the clusters C holding low(S). Only j <= k is needed for the MAP
# into k clusters, so the table is k deep whatever N: one row of k doubles
# per subset, indexed by the mask (no offsets), read once per
# (subset, cluster) pair like the plain pass.

def constrained_map_level(const mask_t[::1] parents, const double[::1] log_e,
                          double[:, ::1] log_mapk, int n_threads):
    """Fill rows M(S, 1..k) of `log_mapk` (shape (2**N, k)) for `parents` of one size.

    Rows of smaller subsets must be filled, with -inf where j > |S|.
    """
    cdef Py_ssize_t i, n = parents.shape[0]
    cdef int depth = log_mapk.shape[1], j
    cdef mask_t parent, low, rest, sub, cluster
    cdef double e_cluster, value
    cdef double* out
    cdef const double* row
    cdef double* m = &log_mapk[0, 0]
    cdef const double* e = &log_e[0]
    if n == 0:
        return
    for i in prange(n, nogil=True, num_threads=n_threads, schedule="guided"):
        parent = parents[i]
        low = low_bit(parent)
        rest = parent ^ low
        out = m + <Py_ssize_t>parent * depth
        out[0] = e[parent]
        for j in range(1, depth):
            out[j] = -INFINITY
        sub = 0
        # Proper clusters only: the whole parent is the one-cluster row.
        while sub != rest:
            cluster = low | sub
            e_cluster = e[cluster]
            if e_cluster > -INFINITY:
                row = m + <Py_ssize_t>(parent ^ cluster) * depth
                for j in range(1, depth):
                    value = e_cluster + row[j - 1]
                    if value > out[j]:
                        out[j] = value
            sub = next_submask(sub, rest)


def constrained_map_level_blocked(int block_bits, const mask_t[::1] high_parts,
                                  const index_t[::1] low_sizes, const mask_t[::1] low_order,
                                  const index_t[::1] low_level_start, const double[::1] log_e,
                                  double[:, ::1] log_mapk, int n_threads):
    """`constrained_map_level` for the parents (high_parts[i] << block_bits) | S_lo.

    S_lo is every `low_sizes[i]`-point subset of the low bits (j >= 1)
    lacking point 0 (the full set goes to `constrained_map_level`). As in
    `map_level_blocked`, for one C_hi the cluster row (C_hi, *) and the
    rows M(S_hi ^ C_hi, *) (2**block_bits rows of k doubles) serve every
    S_lo of the item; the same terms as `constrained_map_level`, so the
    same maxima.
    """
    cdef Py_ssize_t item, i, n_items = high_parts.shape[0], first, stop
    cdef int depth = log_mapk.shape[1], j
    cdef mask_t high, base, high_cluster, high_rest, part, low, rest, sub, rest_mask
    cdef double e_cluster, value
    cdef double* out
    cdef const double* row
    cdef const double* cluster_row
    cdef double* m = &log_mapk[0, 0]
    cdef const double* e = &log_e[0]
    if n_items == 0:
        return
    for item in prange(n_items, nogil=True, num_threads=n_threads,
                       schedule="dynamic", chunksize=1):
        high = high_parts[item]
        base = high << block_bits
        first = low_level_start[low_sizes[item]]
        stop = low_level_start[low_sizes[item] + 1]
        for i in range(first, stop):
            part = low_order[i]
            if part & 1 == 0:
                out = m + <Py_ssize_t>(base | part) * depth
                out[0] = e[base | part]
                for j in range(1, depth):
                    out[j] = -INFINITY
        high_cluster = 0
        while True:
            cluster_row = e + (<index_t>high_cluster << block_bits)
            high_rest = (high ^ high_cluster) << block_bits
            for i in range(first, stop):
                part = low_order[i]
                if part & 1:
                    continue
                out = m + <Py_ssize_t>(base | part) * depth
                low = low_bit(part)
                rest = part ^ low
                sub = 0
                while True:
                    rest_mask = high_rest | (rest ^ sub)
                    # Proper clusters only: the whole subset is the one-cluster row.
                    if rest_mask == 0:
                        break
                    e_cluster = cluster_row[low | sub]
                    if e_cluster > -INFINITY:
                        row = m + <Py_ssize_t>rest_mask * depth
                        for j in range(1, depth):
                            value = e_cluster + row[j - 1]
                            if value > out[j]:
                                out[j] = value
                    if sub == rest:
                        break
                    sub = next_submask(sub, rest)
            if high_cluster == high:
                break
            high_cluster = next_submask(high_cluster, high)


def constrained_map_cluster(const double[::1] log_e, const double[:, ::1] log_mapk,
                            mask_t subset, int n_clusters):
    """The MAP cluster holding low(subset) among partitions into n_clusters >= 2 clusters.

    Recomputes the maximisation of `constrained_map_level` for one subset
    from the same sums, so it finds the same maximum (ties go to the first
    cluster in increasing mask order): the MAP needs no argmax table.
    """
    cdef mask_t low = low_bit(subset), rest = subset ^ low, sub = 0, cluster
    cdef mask_t arg = 0
    cdef double best = -INFINITY, value
    with nogil:
        while sub != rest:
            cluster = low | sub
            value = log_e[cluster] + log_mapk[subset ^ cluster, n_clusters - 2]
            if value > best:
                best = value
                arg = cluster
            sub = next_submask(sub, rest)
    return arg


###############################################################################
# Pairwise co-clustering probabilities

def pairwise_from_marginals(double[::1] table, int n_points, int n_threads):
    """P(i and j in the same cluster) from every cluster's marginal probability.

    `table[C]` = P(C is a cluster) on entry; it is overwritten by the
    superset sums F(T) = sum_{C superset of T} P(C) (zeta transform, one
    pass per point: N 2**(N-1) additions), and F({i, j}) is the pair's
    co-clustering probability. Returns the (N, N) matrix, diagonal 1.
    """
    cdef Py_ssize_t half = (<Py_ssize_t>1 << n_points) >> 1, index, low_part
    cdef Py_ssize_t bit, mask
    cdef int i, j
    cdef double[:, ::1] out = np.ones((n_points, n_points))
    for i in range(n_points):
        bit = <Py_ssize_t>1 << i
        for index in prange(half, nogil=True, num_threads=n_threads, schedule="static"):
            low_part = index & (bit - 1)
            mask = ((index ^ low_part) << 1) | low_part
            table[mask] = table[mask] + table[mask | bit]
    for i in range(n_points):
        for j in range(i + 1, n_points):
            out[i, j] = out[j, i] = table[(<Py_ssize_t>1 << i) | (<Py_ssize_t>1 << j)]
    return np.asarray(out)


###############################################################################
# Exact sampling

cdef struct ClusterSampling:
    const double* log_e
    const double* log_z


cdef inline double cluster_log_weight(const void* model, mask_t subset,
                                      mask_t cluster) noexcept nogil:
    """log [E(cluster) Z(subset \\ cluster)], for draw_part."""
    cdef const ClusterSampling* m = <const ClusterSampling*>model
    return m.log_e[cluster] + m.log_z[subset ^ cluster]


def sample_partitions(const double[::1] log_e, const double[::1] log_z,
                      const double[:, ::1] uniforms, double[::1] cache):
    """Draw partitions top-down from P(partition) = prod E(C) / Z(all points).

    The cluster of the lowest remaining point of S is C with probability
    E(C) Z(S \\ C) / Z(S); then S becomes S \\ C. Each row of `uniforms`
    (N numbers in [0, 1)) drives one partition: the cluster taken is the
    first whose cumulative probability exceeds the uniform. Clusters are
    labelled in the order they are drawn, which is the order of their first
    point. Returns the (n_samples, N) int64 labels.

    Clusters are drawn by ``draw_part`` (``_sampling.pxd``), which keeps the
    cumulative cluster weights of subsets met more than once in `cache`
    while it has room; the caller allocates it, so its size is part of the
    estimator's memory estimate.
    """
    cdef int n_points = uniforms.shape[1]
    cdef Py_ssize_t n_samples = uniforms.shape[0]
    cdef mask_t full = <mask_t>((<uint64_t>1 << n_points) - 1)
    cdef index_t[:, ::1] labels = np.zeros((n_samples, n_points), dtype=np.int64)
    cdef index_t[::1] cache_start = np.full(<Py_ssize_t>1 << n_points, -1, dtype=np.int64)
    cdef WeightCache weights = WeightCache(&cache_start[0], &cache[0], 0, cache.shape[0])
    cdef ClusterSampling model = ClusterSampling(&log_e[0], &log_z[0])
    cdef Py_ssize_t r
    cdef mask_t subset, cluster, bits
    cdef int label
    with nogil:
        for r in range(n_samples):
            subset = full
            label = 0
            while subset:
                cluster = draw_part(&model, cluster_log_weight, subset,
                                    <Py_ssize_t>1 << (popcount(subset) - 1),
                                    log_z[subset], uniforms[r, label], &weights)
                bits = cluster
                while bits:
                    labels[r, ctz(bits)] = label
                    bits = bits ^ low_bit(bits)
                label += 1
                subset = subset ^ cluster
    return np.asarray(labels)
