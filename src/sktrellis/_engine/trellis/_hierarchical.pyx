"""Dynamic programs of the hierarchical cluster trellis over all 2**N subsets.

Everything here trusts its input: masks are valid, tables are C-contiguous
float64 of length 2**N, levels are complete. Validation happens once in the
Python layer (``sktrellis._hierarchical``); the split potential it evaluates is
``sktrellis._engine.potential._split_potential``.

For a subset S and a canonical split (A, B = S ^ A), low(S) in A, A != S:

    log Z(S)   = logsumexp_A [log psi(S; A, B) + log Z(A) + log Z(B)]
    log MAP(S) = max_A       [log psi(S; A, B) + log MAP(A) + log MAP(B)]

with log Z({i}) = log MAP({i}) = 0. Subsets are processed by size ("levels");
all subsets of one size are independent, which is what the OpenMP loops use.
For separable potentials from N = 16 on, the inside and outside passes run
cache-blocked (``inside_level_blocked``, ``outside_level_blocked``): the same
sums, visited one pair of table rows at a time.
"""
from cython.parallel cimport prange, threadid
from libc.float cimport DBL_MIN
from libc.math cimport INFINITY, NAN, exp, fabs, log, isfinite
from libc.stdint cimport uint64_t
from libc.string cimport memset

import numpy as np

from sktrellis.energies cimport SplitData, split_log_psi_t

from .._common cimport (
    LINEAR_SUM_FLOOR,
    LogSum, count_add, count_add_product, empty_log_sum, extract_rank, index_t, log_sum_add,
    log_sum_value, low_bit, mask_t, next_submask, popcount,
)
from ..potential._ginkgo cimport (
    GINKGO_CHUNK_SIZE, GINKGO_FACTOR_TABLE, GINKGO_SIZE_FACTORS, ISOTROPIC, LAM, LOG_LAM,
    LOG_NORM, T_CUT, GinkgoAcc, GinkgoRecord, GinkgoSplitRecord,
    ginkgo_leaf_terms, ginkgo_outside_exponents, ginkgo_outside_leaf_terms,
    ginkgo_prefetch_block, ginkgo_raise_top, ginkgo_row, ginkgo_row_count128, ginkgo_row_shape,
    ginkgo_sum, ginkgo_vector_width, log_psi_of_masses,
)
from ..potential._split_potential cimport (
    FUNCTION, SEPARABLE, SplitPotential, SplitTables, split_log_potential,
)
from ._row_sweep cimport sweep_item
from ._sampling cimport WeightCache, draw_part, part_log_weight_t

###############################################################################
# Inside pass

def prepare_separable_level(SplitPotential potential, int size,
                            const mask_t[::1] order, const index_t[::1] level_start,
                            const double[::1] log_z, const double[::1] log_map,
                            double[:, ::1] left_factors, double[:, ::1] right_factors,
                            int n_threads):
    """Per-subset factors that turn the separable inside sum into products.

    With w(X) = c(size) g(X) + log Z(X) and m(a) the largest w over subsets
    of size a, the term of split (A, B) of a parent of `size` is

        exp(w(A) + w(B) - M) = u_left[A] * u_right[B],
        u_left[X] = exp(w(X) + m(size - |X|) - M),  u_right[X] = exp(w(X) - m(|X|)),

    where M = max_a m(a) + m(size - a). Both factors are <= 1, so products
    never overflow. Row X of `left_factors` is (u_left[X], w_map[X]), of
    `right_factors` (u_right[X], w_map[X]), with w_map(X) = c(size) g(X) +
    log MAP(X): the split loop then reads one 16-byte record per child.
    Returns M (the level's log scale).
    """
    cdef const SplitTables* t = &potential.tables
    cdef double coef = t.size_coef[size]
    cdef double[::1] best = np.full(size + 1, -INFINITY)
    cdef double level_scale = -INFINITY, value
    cdef Py_ssize_t i
    cdef int a
    cdef mask_t x
    for a in range(1, size):
        for i in range(level_start[a], level_start[a + 1]):
            x = order[i]
            value = coef * t.child_term[x] + log_z[x]
            if value > best[a]:
                best[a] = value
    for a in range(1, size):
        if best[a] + best[size - a] > level_scale:
            level_scale = best[a] + best[size - a]
    if level_scale == -INFINITY:
        return level_scale
    cdef Py_ssize_t first = level_start[1], stop = level_start[size]
    for i in prange(first, stop, nogil=True, num_threads=n_threads, schedule="static"):
        x = order[i]
        a = popcount(x)
        value = coef * t.child_term[x] + log_z[x]
        if best[a] == -INFINITY or best[size - a] == -INFINITY or value == -INFINITY:
            right_factors[x, 0] = 0.0
            left_factors[x, 0] = 0.0
        else:
            right_factors[x, 0] = exp(value - best[a])
            left_factors[x, 0] = exp(value + best[size - a] - level_scale)
        left_factors[x, 1] = coef * t.child_term[x] + log_map[x]
        right_factors[x, 1] = left_factors[x, 1]
    return level_scale


cdef inline double exact_log_sum(const SplitTables* t, mask_t parent,
                                 const double* log_z) noexcept nogil:
    """log Z(parent) by an online logsumexp over its canonical splits."""
    cdef mask_t low = low_bit(parent), rest = parent ^ low, sub = 0, left
    cdef LogSum total = empty_log_sum()
    while sub != rest:
        left = low | sub
        log_sum_add(&total, split_log_potential(t, parent, left) + log_z[left]
                    + log_z[parent ^ left])
        sub = next_submask(sub, rest)
    return log_sum_value(&total)


def inside_level(SplitPotential potential, const mask_t[::1] parents,
                 double[::1] log_z, double[::1] log_map, mask_t[::1] best_left,
                 counts, double level_scale,
                 const double[:, ::1] left_factors, const double[:, ::1] right_factors,
                 int n_threads):
    """Fill log Z, log MAP and the MAP split of `parents` (all of one size >= 2).

    `counts` is None, or a uint64 array of shape (2**N, 2) holding 128-bit
    counts of trees with finite potential (generic kinds only). For the
    separable kind, `level_scale`, `left_factors` and `right_factors` come
    from `prepare_separable_level`.
    """
    cdef const SplitTables* t = &potential.tables
    cdef Py_ssize_t i, n = parents.shape[0]
    cdef uint64_t* count = NULL
    cdef uint64_t[:, ::1] count_view
    cdef mask_t parent, low, rest, sub, left, right, arg, arg_odd, pair_bit
    cdef double acc, acc_odd, best, best_odd, value, psi
    cdef LogSum total
    cdef int invalid
    cdef double* z = &log_z[0]
    cdef double* m = &log_map[0]
    cdef const double* lf = &left_factors[0, 0]
    cdef const double* rf = &right_factors[0, 0]
    cdef bint with_counts = counts is not None
    # A function potential is called directly, its pointer and data held in
    # registers rather than reloaded from the tables after each opaque call.
    cdef bint is_function = t.kind == FUNCTION
    cdef split_log_psi_t function = t.function
    cdef const SplitData* data = &t.data
    if n == 0:
        return
    if with_counts:
        count_view = counts
        count = &count_view[0, 0]

    if t.kind == SEPARABLE:
        for i in prange(n, nogil=True, num_threads=n_threads, schedule="guided"):
            parent = parents[i]
            low = low_bit(parent)
            rest = parent ^ low
            # Submasks of rest of ranks 2j and 2j + 1 differ by its lowest
            # bit: walking them in pairs gives two independent accumulators,
            # so the multiply-adds do not wait on each other's latency.
            pair_bit = low_bit(rest)
            rest = rest ^ pair_bit
            sub = 0
            acc = 0.0
            acc_odd = 0.0
            best = -INFINITY
            best_odd = -INFINITY
            arg = 0
            arg_odd = 0
            while sub != rest:
                left = low | sub
                right = parent ^ left
                acc = acc + lf[2 * left] * rf[2 * right]
                value = lf[2 * left + 1] + rf[2 * right + 1]
                if value > best:
                    best = value
                    arg = left
                left = left | pair_bit
                right = right ^ pair_bit
                acc_odd = acc_odd + lf[2 * left] * rf[2 * right]
                value = lf[2 * left + 1] + rf[2 * right + 1]
                if value > best_odd:
                    best_odd = value
                    arg_odd = left
                sub = next_submask(sub, rest)
            # Last pair: its odd member would be the parent itself.
            left = low | sub
            right = parent ^ left
            acc = acc + lf[2 * left] * rf[2 * right] + acc_odd
            value = lf[2 * left + 1] + rf[2 * right + 1]
            if value > best:
                best = value
                arg = left
            # Ties go to the first split in increasing order of the left mask.
            if best_odd > best or (best_odd == best and arg_odd < arg):
                best = best_odd
                arg = arg_odd
            if acc > LINEAR_SUM_FLOOR and isfinite(acc):
                z[parent] = t.cluster_term[parent] + level_scale + log(acc)
            else:
                z[parent] = exact_log_sum(t, parent, z)
            m[parent] = t.cluster_term[parent] + best
            best_left[parent] = arg
        return

    # Generic kinds: one log psi evaluation per split and an online
    # logsumexp (LogSum), so no per-thread buffer of split values.
    for i in prange(n, nogil=True, num_threads=n_threads, schedule="guided"):
        parent = parents[i]
        low = low_bit(parent)
        rest = parent ^ low
        sub = 0
        total = empty_log_sum()
        best = -INFINITY
        arg = low
        invalid = 0
        if with_counts:
            count[2 * parent] = 0
            count[2 * parent + 1] = 0
        while sub != rest:
            left = low | sub
            right = parent ^ left
            if is_function:
                psi = function(data, parent, left)
            else:
                psi = split_log_potential(t, parent, left)
            if not psi > -INFINITY:
                # -inf is a forbidden split; NaN breaks the contract, and
                # is marked (not taken for -inf) at the cost of one compare
                # on forbidden splits only. +inf shows as log Z = +inf.
                invalid = invalid | (psi != psi)
            else:
                log_sum_add(&total, psi + z[left] + z[right])
                value = psi + m[left] + m[right]
                if value > best:
                    best = value
                    arg = left
                if with_counts:
                    count_add_product(&count[2 * parent], &count[2 * left], &count[2 * right])
            sub = next_submask(sub, rest)
        z[parent] = NAN if invalid else log_sum_value(&total)
        m[parent] = best
        best_left[parent] = arg


###############################################################################
# Inside pass of the Ginkgo potential
#
# The Ginkgo likelihood (``potential/_ginkgo.pxd``) is a function potential,
# but the kernel knows its formula: per split one division and one exp in
# linear space (``ginkgo_row``, vectorised over blocks of four splits)
# instead of a call through a pointer with a log, a division and, for leaf
# children, an exp and a log1p. Its results are those of `inside_level`:
#
# - log Z: each parent keeps a running sum in linear space, its terms
#   scaled by subset sizes as in the separable kernels (``_ginkgo.pxd``:
#   each record holds u = exp(log Z - mz(|X|)), each level the factors
#   f_k(a) and its scale M_k, `ginkgo_level_factors`), so that one pass per
#   split suffices; a parent whose sum is not in [LINEAR_SUM_FLOOR, inf),
#   or one of whose terms has 1 / tau above GINKGO_INVERSE_MAX, is redone
#   exactly in log space (`ginkgo_exact_parent`). On jets the log Z of the
#   subsets of one size span a few tens of nats (20 at N = 16), far inside
#   the 575 nats that the floor allows.
# - the MAP split: the rows pick the splits whose linear MAP term is within
#   a relative `MAP_CANDIDATE_SLACK` of the largest met so far; the parent
#   keeps them, and at its end those still within the slack of its largest
#   are re-evaluated with the log-space formula of `inside_level` and
#   compared as there (largest value, ties to the smallest left mask,
#   whatever the visiting order), so the MAP value and split are those of
#   `inside_level` bit for bit. The linear terms are far more accurate than
#   the slack (a few ulp of the exponents' magnitude), so the winner is
#   always among the candidates.
# - the tree counts: a multiply-add per split of finite potential (64-bit up
#   to 18 points, 128-bit above).
#
# Splits whose lighter child has mass 0 (a single particle) take the
# formula's other branch; there are at most |S| of them per parent, and
# they are evaluated exactly, outside the runs. The kernel requires t > 0
# for every subset of two or more points (`ginkgo_kernel_applies`).
#
# From N = 16 on the pass is cache-blocked as the separable one
# (`inside_level_ginkgo_blocked`, the visiting order of
# `inside_level_blocked`): the splits of the parents (S_hi, S_lo) of one
# item are visited one pair of record rows (A_hi, S_hi ^ A_hi) at a time,
# each parent's running sums kept across the row pairs.

# Relative slack of the MAP candidates, per unit of the magnitude of the
# log-space quantities summed (see ginkgo_row_sums).
cdef double MAP_CANDIDATE_SLACK = 1e-10

# MAP candidates a parent keeps before it evaluates them (GinkgoParent).
cdef enum:
    GINKGO_PARENT_CANDIDATES = 8


cdef struct GinkgoSum:
    # The running linear-space sums of one cluster (outside pass).
    double base       # 0 outside
    double scale      # largest exponent so far: the log scale of total and map_top
    double total      # sum of the terms / exp(base + scale)
    double map_top    # unused outside


cdef struct GinkgoParent:
    # The running linear-space sums of one parent (inside pass).
    double base       # K(S) of ``_ginkgo.pxd``
    double scale      # M_k of its level: the sums are relative to exp(base + scale)
    double best       # log MAP value of the best exact candidate so far
    mask_t arg        # and its left child
    # Per lane: sums of the terms, largest 1 / tau, 64-bit counts; the
    # largest MAP term and the candidate cut; whether any split has a term.
    GinkgoAcc acc
    # MAP candidates kept for the parent's end (left child, linear MAP
    # term): most fall below the cut by then and are never evaluated.
    int n_cands
    mask_t cand_left[GINKGO_PARENT_CANDIDATES]
    double cand_term[GINKGO_PARENT_CANDIDATES]
    # The same in every row pair: the rows' shape (``ginkgo_row_shape`` of
    # the free points), the parent's root and lam / t.
    mask_t lane_bits[8]
    mask_t high
    int lanes
    double root
    double lam_over_parent


# A parent any of whose terms has 1 / tau above this is summed exactly: a
# factor flushed below the smallest normal double (2.2e-308) then moves a
# term by at most 2.2e-278, and a sum of at most 2**30 of them by 2.4e-269,
# below the rounding of any sum of at least LINEAR_SUM_FLOOR.
cdef double GINKGO_INVERSE_MAX = 1e30


cdef inline double ginkgo_base(const double* params, double t_parent) noexcept nogil:
    """K(S) of ``_ginkgo.pxd``: the part of log psi common to the splits of S."""
    return (2.0 * params[LOG_LAM] - 2.0 * params[LOG_NORM] + params[ISOTROPIC]
            - log(t_parent))


cdef inline void ginkgo_rescale(GinkgoSum* s, double scale) noexcept nogil:
    """Raise the scale of the running sums to `scale`, if larger."""
    cdef double factor
    if scale > s.scale:
        if s.scale > -INFINITY:
            factor = exp(s.scale - scale)
            s.total = s.total * factor
            s.map_top = s.map_top * factor
        s.scale = scale


cdef double ginkgo_level_factors(const double* level_max, int size,
                                 double* factors) noexcept nogil:
    """The size factors f_k(a) of the parents of `size` points; returns M_k.

    `level_max[a]` is mz(a), the largest log Z of the subsets of a points
    (-inf if none is possible). ``factors`` gets GINKGO_FACTOR_TABLE
    entries in the layout of ``_ginkgo.pxd``, 0 where no split has a term.
    """
    cdef double scale = -INFINITY
    cdef int a, lane
    for a in range(GINKGO_FACTOR_TABLE):
        factors[a] = 0.0
    for a in range(1, size):
        if level_max[a] > -INFINITY and level_max[size - a] > -INFINITY:
            scale = max(scale, level_max[a] + level_max[size - a])
    if scale == -INFINITY:
        return 0.0
    for a in range(1, size):
        if level_max[a] > -INFINITY and level_max[size - a] > -INFINITY:
            factors[a] = exp(level_max[a] + level_max[size - a] - scale)
    # The eight lanes of a block: lane j adds popcount(j) points to lane 0.
    for a in range(GINKGO_SIZE_FACTORS):
        for lane in range(8):
            if a + popcount(lane) < GINKGO_SIZE_FACTORS:
                factors[GINKGO_SIZE_FACTORS + 8 * a + lane] = factors[a + popcount(lane)]
    return scale


cdef inline void ginkgo_fill_record(GinkgoSplitRecord* rec, double log_z, double log_map,
                                    double level_max) noexcept nogil:
    """u and aux of a finished subset, given mz of its size.

    u of a possible subset is at least the smallest normal double, so that
    u > 0 tells a possible child (see GINKGO_INVERSE_MAX for what that moves).
    """
    if log_z > -INFINITY:
        rec.u = max(exp(log_z - level_max), DBL_MIN)
        rec.aux = exp(log_map - log_z)
    else:
        rec.u = 0.0
        rec.aux = 0.0


cdef inline void ginkgo_take_split(const double* params, const double* mass2,
                                   const double* root, mask_t parent, mask_t left,
                                   const double* z, const double* m, LogSum* total,
                                   double* best, mask_t* arg, uint64_t* count,
                                   bint add_to_sum) noexcept nogil:
    """One split in log space, as `inside_level` evaluates it.

    Adds its term to `total` (if `add_to_sum`) and its count to `count` (if
    not NULL); takes it as the MAP split if its value is larger than
    `best`, or equal and its left mask smaller.
    """
    cdef mask_t right = parent ^ left
    cdef double psi = log_psi_of_masses(params, mass2[parent], root[parent], mass2[left],
                                        root[left], mass2[right], root[right])
    cdef double value
    if not psi > -INFINITY:
        return
    if add_to_sum:
        log_sum_add(total, psi + z[left] + z[right])
    value = psi + m[left] + m[right]
    if value > best[0] or (value == best[0] and left < arg[0]):
        best[0] = value
        arg[0] = left
    if count != NULL:
        count_add_product(count + 2 * parent, count + 2 * left, count + 2 * right)


cdef void ginkgo_exact_parent(const double* params, const double* mass2, const double* root,
                              mask_t parent, double* z, double* m, mask_t* best_left,
                              uint64_t* count) noexcept nogil:
    """log Z, log MAP, MAP split and count of `parent`, every split in log space."""
    cdef mask_t low = low_bit(parent), rest = parent ^ low, sub = 0
    cdef LogSum total = empty_log_sum()
    cdef double best = -INFINITY
    cdef mask_t arg = low
    if count != NULL:
        count[2 * parent] = 0
        count[2 * parent + 1] = 0
    while sub != rest:
        ginkgo_take_split(params, mass2, root, parent, low | sub, z, m, &total, &best, &arg,
                          count, True)
        sub = next_submask(sub, rest)
    z[parent] = log_sum_value(&total)
    m[parent] = best
    best_left[parent] = arg


cdef inline void ginkgo_start(const double* params, const double* mass2, const double* root,
                              mask_t parent, mask_t rest, double level_scale, GinkgoParent* s,
                              uint64_t* count) noexcept nogil:
    """Empty running sums and count of `parent`, whose rows have the free points `rest`."""
    s.base = ginkgo_base(params, mass2[parent])
    s.lanes = ginkgo_row_shape(rest, s.lane_bits, &s.high)
    s.root = root[parent]
    s.lam_over_parent = params[LAM] / mass2[parent]
    s.scale = level_scale
    s.best = -INFINITY
    s.arg = low_bit(parent)
    memset(&s.acc, 0, sizeof(GinkgoAcc))
    s.n_cands = 0
    # MAP candidates: the splits whose linear MAP term is within this
    # relative slack of the largest met so far (see ginkgo_row_sums).
    s.acc.cut_factor = 1.0 - MAP_CANDIDATE_SLACK * (1.0 + fabs(s.base) + fabs(level_scale))
    if count != NULL:
        count[2 * parent] = 0
        count[2 * parent + 1] = 0


cdef inline void ginkgo_evaluate_candidates(const double* params, const double* mass2,
                                            const double* root, mask_t parent, GinkgoParent* s,
                                            const double* z, const double* m) noexcept nogil:
    """Evaluate in log space the kept MAP candidates still at least the cut; keep none.

    The cut only rises (or drops to 0 when the linear terms leave their
    range): a split below it now is below it at the parent's end.
    """
    cdef LogSum unused
    cdef int i
    for i in range(s.n_cands):
        if s.cand_term[i] >= s.acc.cut:
            ginkgo_take_split(params, mass2, root, parent, s.cand_left[i], z, m, &unused,
                              &s.best, &s.arg, NULL, False)
    s.n_cands = 0


cdef inline void ginkgo_keep_candidate(const double* params, const double* mass2,
                                       const double* root, mask_t parent, GinkgoParent* s,
                                       mask_t left, double term, const double* z,
                                       const double* m) noexcept nogil:
    """Keep the MAP candidate (left, term) for the parent's end.

    When the buffer is full, the candidates now below the cut are dropped,
    or, if none is, all are evaluated.
    """
    cdef int i, kept = 0
    if s.n_cands == GINKGO_PARENT_CANDIDATES:
        for i in range(s.n_cands):
            if s.cand_term[i] >= s.acc.cut:
                s.cand_left[kept] = s.cand_left[i]
                s.cand_term[kept] = s.cand_term[i]
                kept += 1
        s.n_cands = kept
        if kept == GINKGO_PARENT_CANDIDATES:
            ginkgo_evaluate_candidates(params, mass2, root, parent, s, z, m)
    s.cand_left[s.n_cands] = left
    s.cand_term[s.n_cands] = term
    s.n_cands += 1


cdef void ginkgo_row_sums(const double* params, const double* mass2, const double* root,
                          const GinkgoSplitRecord* rec, mask_t parent, int size,
                          mask_t left_base, GinkgoParent* s, const double* z, const double* m,
                          uint64_t* count, const double* factors, mask_t* cand_sub,
                          double* cand_terms) noexcept nogil:
    """Add the splits (A, parent ^ A), A = left_base | a submask of `rest`, to `s`.

    `rest` is the free points given to `ginkgo_start`. Every submask, `rest`
    itself included (when A is the parent, its right child is the empty
    set, a massless child that makes no term). Their terms to the running
    sums, their counts to `count` (if not NULL), and their MAP candidates
    to the parent's: the rows hand over the splits whose linear MAP term
    was within the slack of the largest met so far when met, and the
    parent keeps those still within it after the run
    (`ginkgo_keep_candidate`), evaluated in log space at its end.
    `cand_sub` and `cand_terms` are scratch of GINKGO_CHUNK_SIZE entries.
    """
    cdef const mask_t* q = s.lane_bits
    cdef mask_t high = s.high, sub = 0, first, left
    cdef int lanes = s.lanes, n_blocks, n_cand, k, lane
    cdef index_t blocks = (<index_t>1) << popcount(high), done = 0
    cdef double root_parent = s.root, lam = params[LAM]
    cdef double lam_over_parent = s.lam_over_parent
    # Up to 18 points the row sums the count products in 64 bits.
    cdef int count64 = count != NULL and size <= 18
    while done < blocks:
        n_blocks = <int>min(<index_t>(GINKGO_CHUNK_SIZE // lanes), blocks - done)
        first = sub
        n_cand = ginkgo_row(rec, count64, parent, left_base, q, lanes, high, &sub, n_blocks,
                            root_parent, lam_over_parent, lam, factors, &s.acc, cand_sub,
                            cand_terms)
        done += n_blocks
        # Counted even when no term is in range: a split with tau so small
        # that 1 / tau overflows has a finite log psi (the parent is then
        # redone in log space).
        if count != NULL and size > 18:
            ginkgo_row_count128(rec, count, parent, left_base, q, lanes, high, first, n_blocks,
                                root_parent, lam_over_parent, lam)
        for k in range(n_cand):
            for lane in range(lanes):
                if cand_terms[k * lanes + lane] >= s.acc.cut:
                    left = left_base | cand_sub[k] | q[lane]
                    if left != parent:
                        ginkgo_keep_candidate(params, mass2, root, parent, s, left,
                                              cand_terms[k * lanes + lane], z, m)


cdef void ginkgo_finish(const double* params, const double* mass2, const double* root,
                        const GinkgoSplitRecord* rec, const double* factors, mask_t parent,
                        GinkgoParent* s, double* z, double* m, mask_t* best_left,
                        uint64_t* count) noexcept nogil:
    """log Z, log MAP and MAP split of `parent` from its sums and its massless-child splits.

    A split with a massless lighter child (a single particle {i} of mass 0
    beside B = S ^ {i}) takes the formula's other branch:

        psi Z(B) = exp(K(S) + M_k) f_k(1) u(B) exp(-lam t(B) / t(S))
                   (1 - exp(-lam t_cut / tau)) / lam,  tau = (sqrt t(S) - sqrt t(B))**2,

    added to the parent's linear sum (two exps), its MAP term compared with
    the rows' as theirs, its count added exactly; none where exp(-lam t_cut
    / tau) rounds to 1 (log psi is then -inf). Two points: in log space as
    in `inside_level`.
    """
    cdef mask_t low = low_bit(parent), rest = parent ^ low, bit, leaf, heavy, left
    cdef LogSum exact_terms = empty_log_sum()
    cdef LogSum unused
    cdef int size = popcount(parent), n_leaves = 0, n_kept = 0, j
    cdef double lam = params[LAM], y, scale, term, total, inv_max
    cdef double inv_lam = 1.0 / lam, linear = -INFINITY
    cdef uint64_t products = 0
    # The massless single particles of the parent and the rest beside each;
    # then the leaves whose split has a term, and its linear MAP term.
    cdef mask_t leaves[32]
    cdef mask_t heavies[32]
    cdef double leaf_terms[32]
    if mass2[parent] < params[T_CUT]:
        # Every split of a parent below the cut is forbidden.
        z[parent] = -INFINITY
        m[parent] = -INFINITY
        best_left[parent] = low
        if count != NULL:
            count[2 * parent] = 0
            count[2 * parent + 1] = 0
        return
    # The rows' lane sums, in a fixed order.
    total = (((s.acc.total[0] + s.acc.total[1]) + (s.acc.total[2] + s.acc.total[3]))
             + ((s.acc.total[4] + s.acc.total[5]) + (s.acc.total[6] + s.acc.total[7])))
    inv_max = s.acc.inv_max[0]
    for j in range(8):
        inv_max = max(inv_max, s.acc.inv_max[j])
        products += s.acc.count[j]
    if size == 2:
        if not (mass2[low] > 0.0 and mass2[rest] > 0.0):
            ginkgo_take_split(params, mass2, root, parent, low, z, m, &exact_terms, &s.best,
                              &s.arg, count, True)
    else:
        bit = parent
        while bit:
            leaf = low_bit(bit)
            bit = bit ^ leaf
            if not mass2[leaf] > 0.0:
                leaves[n_leaves] = leaf
                heavies[n_leaves] = parent ^ leaf
                n_leaves = n_leaves + 1
        # Their terms by a vectorised exp where it gives libm's result to
        # rounding (see ginkgo_leaf_terms), the others here.
        ginkgo_leaf_terms(rec, heavies, n_leaves, root[parent], lam * params[T_CUT],
                          s.lam_over_parent, factors[1], inv_lam, leaf_terms)
        for j in range(n_leaves):
            heavy = heavies[j]
            term = leaf_terms[j]
            if term < 0.0:
                # From the heavy child's record alone (one cache line, not
                # four tables): its root is the table's, bit for bit, its
                # square within an ulp of t (as in the rows), and up to 18
                # points its count's low 64 bits are the count.
                scale = root[parent] - rec[heavy].root
                if not scale * scale > 0.0:
                    continue
                # 1 - exp(-y) as the log-space formula rounds it, log1p(-exp(-y)):
                # exact from the same exp (Sterbenz), 0 where log psi is -inf.
                y = exp(-lam * params[T_CUT] / (scale * scale))
                if not y < 1.0:
                    continue
                # lam t_B / t_S as the rows form it (lam / t_S per parent).
                term = (factors[1] * rec[heavy].u
                        * exp(-(s.lam_over_parent * (rec[heavy].root * rec[heavy].root)))
                        * (1.0 - y) * inv_lam)
            if rec[heavy].u > 0.0:
                s.acc.any_term = 1
            total = total + term
            leaves[n_kept] = leaves[j]
            leaf_terms[n_kept] = term * rec[heavy].aux
            n_kept = n_kept + 1
            ginkgo_raise_top(&s.acc, leaf_terms[n_kept - 1])
            if count != NULL and size <= 18:
                products += rec[heavy].count
            elif count != NULL:
                count_add(count + 2 * parent, count + 2 * heavy)
    if count != NULL and size <= 18:
        # Below 2**64 (see ginkgo_row_sums): no carry.
        count[2 * parent] += products
    if s.acc.any_term:
        if not (total >= LINEAR_SUM_FLOOR and total < INFINITY
                and inv_max <= GINKGO_INVERSE_MAX):
            ginkgo_exact_parent(params, mass2, root, parent, z, m, best_left, count)
            return
        linear = s.base + s.scale + log(total)
    # The rows' MAP candidates, then the massless-child splits among them.
    ginkgo_evaluate_candidates(params, mass2, root, parent, s, z, m)
    for j in range(n_kept):
        if leaf_terms[j] >= s.acc.cut:
            leaf = leaves[j]
            ginkgo_take_split(params, mass2, root, parent, leaf if leaf == low else parent ^ leaf,
                              z, m, &unused, &s.best, &s.arg, NULL, False)
    if exact_terms.top > -INFINITY:
        # Two points: the log-space split, then the linear sum.
        log_sum_add(&exact_terms, linear)
        z[parent] = log_sum_value(&exact_terms)
    else:
        # What log_sum_value gives for one term, without an exp and a log.
        z[parent] = linear
    m[parent] = s.best
    best_left[parent] = s.arg


cdef void ginkgo_parent(const double* params, const double* mass2, const double* root,
                        const GinkgoSplitRecord* rec, mask_t parent, double level_scale,
                        const double* factors, double* z, double* m, mask_t* best_left,
                        uint64_t* count) noexcept nogil:
    """log Z, log MAP, MAP split and count of `parent`, its splits in linear space."""
    cdef mask_t low = low_bit(parent)
    cdef GinkgoParent s
    cdef mask_t cand_sub[GINKGO_CHUNK_SIZE]
    cdef double cand_terms[GINKGO_CHUNK_SIZE]
    ginkgo_start(params, mass2, root, parent, parent ^ low, level_scale, &s, count)
    if mass2[parent] >= params[T_CUT]:
        ginkgo_row_sums(params, mass2, root, rec, parent, popcount(parent), low, &s, z, m,
                        count, factors, cand_sub, cand_terms)
    ginkgo_finish(params, mass2, root, rec, factors, parent, &s, z, m, best_left, count)


cdef void ginkgo_item(const double* params, const double* mass2, const double* root,
                      const GinkgoSplitRecord* rec, int block_bits, mask_t high,
                      const mask_t* low_order, Py_ssize_t first, Py_ssize_t stop,
                      double level_scale, const double* factors, double* z, double* m,
                      mask_t* best_left, uint64_t* count, GinkgoParent* sums) noexcept nogil:
    """The parents (high, S_lo), S_lo in low_order[first:stop], one row pair at a time.

    `sums` is scratch for stop - first parents.
    """
    cdef mask_t base = high << block_bits, high_left = 0, left_high, part, parent, low
    cdef Py_ssize_t i
    cdef int size = popcount(base | low_order[first])
    cdef double t_cut = params[T_CUT]
    cdef mask_t cand_sub[GINKGO_CHUNK_SIZE]
    cdef double cand_terms[GINKGO_CHUNK_SIZE]
    for i in range(first, stop):
        part = low_order[i]
        ginkgo_start(params, mass2, root, base | part, part ^ low_bit(part), level_scale,
                     &sums[i - first], count)
    while True:
        left_high = high_left << block_bits
        for i in range(first, stop):
            part = low_order[i]
            parent = base | part
            if mass2[parent] < t_cut:
                continue
            # Every A_lo holding low(S_lo), S_lo itself included: with the
            # row pair (S_hi, empty) its right child is empty, a massless
            # child that makes no term.
            low = low_bit(part)
            # The next parent's first records, while this one's row runs.
            if i + 1 < stop:
                ginkgo_prefetch_block(rec, base | low_order[i + 1],
                                      left_high | low_bit(low_order[i + 1]),
                                      sums[i + 1 - first].lane_bits, sums[i + 1 - first].lanes)
            ginkgo_row_sums(params, mass2, root, rec, parent, size, left_high | low,
                            &sums[i - first], z, m, count, factors, cand_sub, cand_terms)
        if high_left == high:
            break
        high_left = next_submask(high_left, high)
    for i in range(first, stop):
        ginkgo_finish(params, mass2, root, rec, factors, base | low_order[i], &sums[i - first],
                      z, m, best_left, count)


def is_ginkgo_potential(SplitPotential potential):
    """Whether `potential` is the Ginkgo potential of ``potential/_ginkgo.pyx``.

    Its tables are then (t, sqrt t) of every subset and its parameters in
    the layout of ``_ginkgo.pxd``.
    """
    return (potential.kind == FUNCTION
            and potential.params.get("function") == "ginkgo_log_psi"
            and potential.params.get("module") == "sktrellis._engine.potential._ginkgo")


def ginkgo_kernel_applies(SplitPotential potential):
    """Whether `inside_level_ginkgo` computes this potential.

    It must be the Ginkgo potential (`is_ginkgo_potential`) with a
    positive mass squared for every subset of two or more points (so only
    single particles take the formula's massless branch).
    """
    cdef const double* mass2
    cdef index_t x, n_subsets = (<index_t>1) << potential.n_points
    cdef bint applies = True
    if not is_ginkgo_potential(potential):
        return False
    # A loop, not NumPy: no O(2**N) temporary beside the trellis's tables.
    mass2 = potential.tables.data.tables[0]
    with nogil:
        for x in range(1, n_subsets):
            if x & (x - 1) and not mass2[x] > 0.0:
                applies = False
                break
    return applies


def ginkgo_records(SplitPotential potential, const double[::1] log_z, double aux):
    """The per-subset records of the Ginkgo outside pass: (t, sqrt t, log Z, aux).

    Returns a float64 array of shape (2**N, 4), every `aux` given (-inf:
    the parent exponents, filled level by level by
    `fill_ginkgo_outside_records`). The inside pass has records of its own
    (`ginkgo_split_records`).
    """
    records = np.empty((1 << potential.n_points, 4))
    records[:, 0] = potential.arrays["mass2"]
    records[:, 1] = potential.arrays["sqrt_mass2"]
    records[:, 2] = log_z
    records[:, 3] = aux
    return records


def set_ginkgo_vector_width(int width):
    """Cap the vector path of the Ginkgo passes: 8, 4 or 1 (portable); returns the old cap.

    For tests: every path gives the same results (to rounding for log Z).
    """
    global ginkgo_vector_width
    if width not in (1, 4, 8):
        raise ValueError(f"width must be 1, 4 or 8, got {width}")
    old = ginkgo_vector_width
    ginkgo_vector_width = width
    return old


def ginkgo_split_records(SplitPotential potential):
    """The per-subset records of the Ginkgo inside pass: (sqrt t, u, aux, count).

    A float64 array of shape (2**N, 4), u, aux and the count (uint64 bits)
    0 until `fill_ginkgo_records` fills them level by level; the empty
    set's record (t = 0, u = 0) makes no term.
    """
    records = np.zeros((1 << potential.n_points, 4))
    records[:, 0] = potential.arrays["sqrt_mass2"]
    return records


def fill_ginkgo_records(const mask_t[::1] subsets, const double[::1] log_z,
                        const double[::1] log_map, counts, double[:, ::1] records,
                        double[::1] level_max, int n_threads):
    """Fill the records (`ginkgo_split_records`) of the finished level `subsets`.

    Sets level_max[size] to mz(size), the level's largest log Z, and each
    record's u = exp(log Z - mz(size)), aux = exp(log MAP - log Z) and the
    low 64 bits of its count (from `counts`, if not None).
    """
    cdef Py_ssize_t i, n = subsets.shape[0]
    cdef mask_t x
    cdef GinkgoSplitRecord* rec = <GinkgoSplitRecord*>&records[0, 0]
    cdef uint64_t[:, ::1] count_view
    cdef bint with_counts = counts is not None
    if with_counts:
        count_view = counts
    cdef double top = -INFINITY
    if n == 0:
        return
    for i in range(n):
        if log_z[subsets[i]] > top:
            top = log_z[subsets[i]]
    level_max[popcount(subsets[0])] = top
    for i in prange(n, nogil=True, num_threads=n_threads, schedule="static"):
        x = subsets[i]
        ginkgo_fill_record(&rec[x], log_z[x], log_map[x], top)
        if with_counts:
            rec[x].count = count_view[x, 0]


def inside_level_ginkgo(SplitPotential potential, const mask_t[::1] parents,
                        double[::1] log_z, double[::1] log_map, mask_t[::1] best_left,
                        counts, const double[:, ::1] records, const double[::1] level_max,
                        int n_threads):
    """`inside_level` for the Ginkgo potential, in linear space (see above).

    `records` come from `ginkgo_records`, with every level smaller than
    the parents filled by `fill_ginkgo_records` (which also fills
    `level_max`); `counts` as for `inside_level`. The potential must pass
    `ginkgo_kernel_applies`.
    """
    cdef const SplitTables* t = &potential.tables
    cdef const double* params = t.data.params
    cdef const double* mass2 = t.data.tables[0]
    cdef const double* root = t.data.tables[1]
    cdef const GinkgoSplitRecord* rec = <const GinkgoSplitRecord*>&records[0, 0]
    cdef Py_ssize_t i, n = parents.shape[0]
    cdef uint64_t* count = NULL
    cdef uint64_t[:, ::1] count_view
    cdef double factors[GINKGO_FACTOR_TABLE]
    cdef double level_scale
    if n == 0:
        return
    level_scale = ginkgo_level_factors(&level_max[0], popcount(parents[0]), factors)
    if counts is not None:
        count_view = counts
        count = &count_view[0, 0]
    for i in prange(n, nogil=True, num_threads=n_threads, schedule="guided"):
        ginkgo_parent(params, mass2, root, rec, parents[i], level_scale, factors, &log_z[0],
                      &log_map[0], &best_left[0], count)


def inside_level_ginkgo_blocked(SplitPotential potential, int block_bits,
                                const mask_t[::1] high_parts, const index_t[::1] low_sizes,
                                const mask_t[::1] low_order, const index_t[::1] low_level_start,
                                double[::1] log_z, double[::1] log_map, mask_t[::1] best_left,
                                counts, const double[:, ::1] records,
                                const double[::1] level_max, int n_threads):
    """`inside_level_ginkgo` for the parents (high_parts[i], S_lo), cache-blocked.

    Items as for `inside_level_blocked` (S_lo non-empty); records, level
    maxima and counts as for `inside_level_ginkgo`. The same results: the
    same terms summed in another order, the same exact MAP comparisons.
    """
    cdef const SplitTables* t = &potential.tables
    cdef const double* params = t.data.params
    cdef const double* mass2 = t.data.tables[0]
    cdef const double* root = t.data.tables[1]
    cdef const GinkgoSplitRecord* rec = <const GinkgoSplitRecord*>&records[0, 0]
    cdef Py_ssize_t item, n_items = high_parts.shape[0], first, stop
    cdef uint64_t* count = NULL
    cdef uint64_t[:, ::1] count_view
    cdef Py_ssize_t most = max(np.diff(np.asarray(low_level_start)))
    cdef double factors[GINKGO_FACTOR_TABLE]
    cdef double level_scale
    # Per thread, the running sums of one item's parents.
    cdef unsigned char[:, ::1] scratch = np.empty((n_threads, most * sizeof(GinkgoParent)),
                                                  dtype=np.uint8)
    if n_items == 0:
        return
    level_scale = ginkgo_level_factors(
        &level_max[0],
        popcount((high_parts[0] << block_bits) | low_order[low_level_start[low_sizes[0]]]),
        factors)
    if counts is not None:
        count_view = counts
        count = &count_view[0, 0]
    # Items differ in cost by orders of magnitude: handed out one at a time.
    for item in prange(n_items, nogil=True, num_threads=n_threads,
                       schedule="dynamic", chunksize=1):
        first = low_level_start[low_sizes[item]]
        stop = low_level_start[low_sizes[item] + 1]
        ginkgo_item(params, mass2, root, rec, block_bits, high_parts[item], &low_order[0],
                    first, stop, level_scale, factors, &log_z[0], &log_map[0],
                    &best_left[0], count, <GinkgoParent*>&scratch[threadid(), 0])


###############################################################################
# Every subset of a small point set under the Ginkgo potential, from C
#
# An entry point for code outside this module's trellis driver (the
# best-first search's exact solves of small clusters): the inside pass of
# the Ginkgo kernel over all 2**m subsets of m points, on one thread, given
# only the masses. Declared in ``_hierarchical.pxd`` for cimport.

cdef int ginkgo_subset_tables(const double* params, int m, const double* mass2,
                              const double* root, double* log_z, double* log_map,
                              mask_t* best_left, double* records) noexcept nogil:
    """log Z, log MAP and MAP split of every subset of m points under the Ginkgo potential.

    Parameters (C arrays of 2**m entries, indexed by subset masks over the m
    points; m from 1 to 30):

    - params: the Ginkgo parameters in the ``SplitData.params`` layout of
      ``potential/_ginkgo.pxd`` (``ginkgo_params(lam, t_cut)``);
    - mass2, root: t of every subset (0 for single points and the empty
      set) and sqrt(max(t, 0));
    - log_z, log_map, best_left (out): for every subset S of two or more
      points, log Z(S), log MAP(S) and the left child (holding low(S)) of
      its MAP split, as ``HierarchicalTrellis`` fills them; single points
      get 0, 0 and themselves. -inf where no tree of S has non-zero
      potential (then best_left[S] = low(S));
    - records: scratch of 4 * 2**m doubles.

    Returns 0. Splits in linear space (``ginkgo_parent``) when every subset
    of two or more points has t > 0 (physical momenta); otherwise every
    split in log space (``ginkgo_exact_parent``), the same results.
    """
    cdef index_t n_subsets = (<index_t>1) << m, x
    cdef mask_t subset, last, low, ripple
    cdef int size, sweep
    cdef bint massive = True
    cdef GinkgoSplitRecord* rec = <GinkgoSplitRecord*>records
    cdef double level_max[32]
    cdef double factors[GINKGO_FACTOR_TABLE]
    cdef double level_scale
    for x in range(n_subsets):
        rec[x].root = root[x]
        rec[x].u = 1.0
        rec[x].aux = 1.0
        rec[x].count = 1
        log_z[x] = 0.0
        log_map[x] = 0.0
        best_left[x] = <mask_t>x
        if x & (x - 1) and not mass2[x] > 0.0:
            massive = False
    rec[0].u = 0.0
    rec[0].aux = 0.0
    level_max[1] = 0.0
    for size in range(2, m + 1):
        level_scale = ginkgo_level_factors(level_max, size, factors)
        level_max[size] = -INFINITY
        # The subsets of `size` points in increasing order (Gosper's hack):
        # solved in the first sweep, their records filled in the second
        # (from the level's largest log Z).
        for sweep in range(2):
            subset = <mask_t>((<uint64_t>1 << size) - 1)
            last = subset << (m - size)
            while True:
                if sweep == 1:
                    ginkgo_fill_record(&rec[subset], log_z[subset], log_map[subset],
                                       level_max[size])
                elif massive:
                    ginkgo_parent(params, mass2, root, rec, subset, level_scale, factors,
                                  log_z, log_map, best_left, NULL)
                    level_max[size] = max(level_max[size], log_z[subset])
                else:
                    ginkgo_exact_parent(params, mass2, root, subset, log_z, log_map, best_left,
                                        NULL)
                if subset == last:
                    break
                low = low_bit(subset)
                ripple = subset + low
                subset = ripple | (((subset ^ ripple) >> 2) // low)
            if not massive:
                break
    return 0


def solve_ginkgo_subsets(SplitPotential potential):
    """`ginkgo_subset_tables` on a Ginkgo potential's masses: (log Z, log MAP, best_left).

    The Python face of the C entry point, for tests.
    """
    if not is_ginkgo_potential(potential):
        raise ValueError(f"solve_ginkgo_subsets needs the Ginkgo potential, got "
                         f"{potential.params!r}")
    cdef int m = potential.n_points
    cdef double[::1] log_z = np.empty(1 << m)
    cdef double[::1] log_map = np.empty(1 << m)
    cdef mask_t[::1] best_left = np.empty(1 << m, dtype=np.uint32)
    cdef double[::1] records = np.empty(4 << m)
    cdef const SplitTables* t = &potential.tables
    with nogil:
        ginkgo_subset_tables(t.data.params, m, t.data.tables[0], t.data.tables[1], &log_z[0],
                             &log_map[0], &best_left[0], &records[0])
    return np.asarray(log_z), np.asarray(log_map), np.asarray(best_left)


###############################################################################
# Cache-blocked inside pass (separable kind)
#
# From N = 19 on the tables outgrow the caches and the split loop above waits
# on memory: each parent reads 2**(|S| - 1) records scattered over the whole
# table, and the next parent reads them again. Write a subset as
# S = (S_hi, S_lo), its low `block_bits` bits in S_lo, and call the records of
# the subsets sharing a high part a row (2**block_bits consecutive records).
# A split A of S with low(S) in S_lo is (A_hi, A_lo), A_hi any subset of
# S_hi and A_lo a subset of S_lo holding low(S_lo); its children lie in the
# two rows A_hi and S_hi ^ A_hi. For one S_hi and one such pair of rows, the
# kernel sweeps every S_lo of one size, so the two rows are read from cache
# C(block_bits, |S_lo|) times instead of from memory once per parent. The
# parents of one (S_hi, |S_lo|) are finished by the same thread, which keeps
# their running sums in log_z, log_map and best_left (no parent of the level
# is read by the level). Parents with S_lo empty go to `inside_level`.

def inside_level_blocked(SplitPotential potential, int block_bits,
                         const mask_t[::1] high_parts, const index_t[::1] low_sizes,
                         const mask_t[::1] low_order, const index_t[::1] low_level_start,
                         double[::1] log_z, double[::1] log_map, mask_t[::1] best_left,
                         double level_scale, const double[:, ::1] left_factors,
                         const double[:, ::1] right_factors, int n_threads):
    """Fill log Z, log MAP and the MAP split of the parents (high_parts[i], S_lo).

    For each i, the parents are every S = (high_parts[i] << block_bits) | S_lo
    with S_lo one of the `low_sizes[i]`-point subsets of the low bits
    (``low_order[low_level_start[j]:low_level_start[j + 1]]`` for size j >= 1);
    all of them have one size. Separable kind only, with the factors of
    `prepare_separable_level`, and right_factors[0] = (0, -inf): the empty
    right child of the row pair (S_hi, empty) drops out of both sums.
    Results equal those of `inside_level` (the MAP split exactly, log Z to
    rounding: the same terms summed in another order).
    """
    cdef const SplitTables* t = &potential.tables
    cdef Py_ssize_t item, i, n_items = high_parts.shape[0], first, stop
    cdef mask_t high, base, parent
    cdef double total
    cdef double* z = &log_z[0]
    cdef double* m = &log_map[0]
    cdef mask_t* best = &best_left[0]
    cdef const double* lf = &left_factors[0, 0]
    cdef const double* rf = &right_factors[0, 0]
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
        sweep_item(lf, rf, high, block_bits, &low_order[0], first, stop, z, m, best)
        for i in range(first, stop):
            parent = base | low_order[i]
            total = z[parent]
            if total > LINEAR_SUM_FLOOR and isfinite(total):
                z[parent] = t.cluster_term[parent] + level_scale + log(total)
            else:
                z[parent] = exact_log_sum(t, parent, z)
            m[parent] = t.cluster_term[parent] + m[parent]


###############################################################################
# Outside pass
#
# O(root) = 1 and, for every other cluster C,
#
#     O(C) = sum over D, a non-empty subset of the complement of C, of
#            O(C | D) psi(C | D; C, D) Z(D),
#
# the total potential of everything in a tree outside C's subtree; the
# marginal of C is Z(C) O(C) / Z(root). A cluster needs only the outside
# sums of strictly larger clusters, so the pass runs level by level from the
# largest clusters down, each split visited once more (3**N terms in all).
#
# For a separable potential, log psi(S; C, D) = f(S) + c(|S|) (g(C) + g(D)),
# and with s = |C| + |D| a term factors into a parent part, a sibling part
# and a cluster part:
#
#     O(S) e^f(S)  *  e^(c(s) g(D)) Z(D)  *  e^(c(s) g(C)).
#
# The first two are tabulated in linear space once per level, each divided
# by its largest value over subsets of its size; the cluster part, with
# those two scales, is a weight per sibling size |D|. The sum over D is then
# one multiply-add per term, no exp, as in the inside pass.

def outside_parent_factors(SplitPotential potential, const mask_t[::1] parents,
                           const double[::1] log_out, double[::1] parent_factor,
                           int n_threads):
    """parent_factor[S] = exp(log O(S) + f(S) - M) for one level; returns M.

    M is the largest log O(S) + f(S) over `parents` (all of one size), so
    every factor is at most 1.
    """
    cdef const SplitTables* t = &potential.tables
    cdef Py_ssize_t i, n = parents.shape[0]
    cdef double level_scale = -INFINITY, value
    cdef mask_t parent
    for i in range(n):
        value = log_out[parents[i]] + t.cluster_term[parents[i]]
        if value > level_scale:
            level_scale = value
    for i in prange(n, nogil=True, num_threads=n_threads, schedule="static"):
        parent = parents[i]
        if level_scale == -INFINITY:
            parent_factor[parent] = 0.0
        else:
            parent_factor[parent] = exp(log_out[parent] + t.cluster_term[parent] - level_scale)
    return level_scale


def outside_sibling_factors(SplitPotential potential, int cluster_size,
                            const mask_t[::1] order, const index_t[::1] level_start,
                            const double[::1] log_z, double[::1] sibling_factor,
                            double[::1] sibling_scale, int n_threads):
    """sibling_factor[D] = exp(c(k + |D|) g(D) + log Z(D) - m(|D|)), k = cluster_size.

    For every D of size 1 .. N - k, with m(d) (stored in sibling_scale[d])
    the largest exponent over subsets of size d, so every factor is <= 1.
    """
    cdef const SplitTables* t = &potential.tables
    cdef int n_points = potential.n_points, d
    cdef Py_ssize_t i, first = level_start[1], stop = level_start[n_points - cluster_size + 1]
    cdef double value
    cdef mask_t x
    for d in range(1, n_points - cluster_size + 1):
        sibling_scale[d] = -INFINITY
        for i in range(level_start[d], level_start[d + 1]):
            x = order[i]
            value = t.size_coef[cluster_size + d] * t.child_term[x] + log_z[x]
            if value > sibling_scale[d]:
                sibling_scale[d] = value
    for i in prange(first, stop, nogil=True, num_threads=n_threads, schedule="static"):
        x = order[i]
        d = popcount(x)
        if sibling_scale[d] == -INFINITY:
            sibling_factor[x] = 0.0
        else:
            sibling_factor[x] = exp(t.size_coef[cluster_size + d] * t.child_term[x]
                                    + log_z[x] - sibling_scale[d])


cdef inline double exact_log_outside(const SplitTables* t, mask_t cluster, mask_t full,
                                     const double* log_z, const double* log_out) noexcept nogil:
    """log O(cluster) by an online logsumexp (one exp per term) over its parents."""
    cdef mask_t rest = full ^ cluster, other = rest, parent, left
    cdef LogSum total = empty_log_sum()
    while other:
        parent = cluster | other
        if log_out[parent] > -INFINITY and log_z[other] > -INFINITY:
            left = cluster if cluster & low_bit(parent) else other
            log_sum_add(&total, log_out[parent] + split_log_potential(t, parent, left)
                        + log_z[other])
        other = (other - 1) & rest
    return log_sum_value(&total)


def outside_level(SplitPotential potential, const mask_t[::1] clusters,
                  const double[::1] log_z, double[::1] log_out,
                  const double[::1] parent_factor, const double[::1] parent_scale,
                  const double[::1] sibling_factor, const double[::1] sibling_scale,
                  int n_threads):
    """Fill log O(C) for `clusters` (all of one size k, 1 <= k < N).

    Needs log O of every larger cluster. For the separable kind,
    `parent_factor` / `parent_scale` come from `outside_parent_factors` of
    every larger level (parent_scale[s] for size s) and `sibling_factor` /
    `sibling_scale` from `outside_sibling_factors` for this k; the other
    kinds ignore them and sum in log space.

    The linear sum of a cluster is exact when it is at least
    LINEAR_SUM_FLOOR: every factor is <= 1, so a term lost to underflow is
    below 1e-308, and at most 2**N of them are below the sum's last digit.
    Otherwise the cluster is redone in log space.
    """
    cdef const SplitTables* t = &potential.tables
    cdef int n_points = potential.n_points
    cdef mask_t full = <mask_t>((<uint64_t>1 << n_points) - 1)
    cdef Py_ssize_t i, n = clusters.shape[0]
    cdef int size = popcount(clusters[0]) if n else 0, d, n_sizes = n_points - size
    cdef mask_t cluster, rest, other, pair_bit, sibling
    cdef double acc, acc_odd, top
    cdef double* weight
    cdef double[:, ::1] weights
    cdef double* out = &log_out[0]
    cdef const double* pf = &parent_factor[0]
    cdef const double* sf = &sibling_factor[0]
    if n == 0:
        return
    if t.kind != SEPARABLE:
        for i in prange(n, nogil=True, num_threads=n_threads, schedule="guided"):
            out[clusters[i]] = exact_log_outside(t, clusters[i], full, &log_z[0], out)
        return
    # weight[d] = exp(c(k + d) g(C) + parent_scale[k + d] + sibling_scale[d] - top):
    # the cluster part and both scales of the terms whose sibling has d points.
    weights = np.empty((n_threads, n_sizes + 1))
    for i in prange(n, nogil=True, num_threads=n_threads, schedule="guided"):
        weight = &weights[threadid(), 0]
        cluster = clusters[i]
        top = -INFINITY
        for d in range(1, n_sizes + 1):
            weight[d] = (t.size_coef[size + d] * t.child_term[cluster]
                         + parent_scale[size + d] + sibling_scale[d])
            if weight[d] > top:
                top = weight[d]
        for d in range(1, n_sizes + 1):
            # top = -inf: no parent or no sibling is possible; all weights 0.
            weight[d] = exp(weight[d] - top) if top > -INFINITY else 0.0
        # Siblings D and D | pair_bit (pair_bit the lowest point outside C)
        # are visited together: two independent accumulators, and one
        # popcount per pair.
        rest = full ^ cluster
        pair_bit = low_bit(rest)
        rest = rest ^ pair_bit
        other = rest
        acc = 0.0
        acc_odd = 0.0
        while True:
            sibling = other | pair_bit
            d = popcount(other)
            acc = acc + pf[cluster | sibling] * sf[sibling] * weight[d + 1]
            if other == 0:
                break
            acc_odd = acc_odd + pf[cluster | other] * sf[other] * weight[d]
            other = (other - 1) & rest
        acc = acc + acc_odd
        if acc > LINEAR_SUM_FLOOR and isfinite(acc):
            out[cluster] = top + log(acc)
        elif top == -INFINITY:
            out[cluster] = -INFINITY
        else:
            out[cluster] = exact_log_outside(t, cluster, full, &log_z[0], out)


# Outside pass of the Ginkgo potential: the terms O(C | D) psi Z(D) of a
# cluster C in linear space, one exp and two divisions each, as the inside
# pass (`ginkgo_outside_exponents`, `ginkgo_sum`), in a running sum per
# cluster (`GinkgoSum`); a cluster whose sum is out of range, and a
# massless cluster (a single particle: every term takes the formula's other
# branch), is summed exactly in log space (`exact_log_outside`). From N = 16
# on, cache-blocked as the separable outside pass
# (`outside_level_ginkgo_blocked`).

def fill_ginkgo_outside_records(SplitPotential potential, const mask_t[::1] subsets,
                                const double[::1] log_out, double[:, ::1] records,
                                int n_threads):
    """log O(X) + K(X) of `subsets` (all outside sums known), -inf below the cut.

    `records` from `ginkgo_records` with aux -inf: the outside pass's
    parent exponents, filled level by level from the largest subsets.
    """
    cdef const double* params = potential.tables.data.params
    cdef GinkgoRecord* rec = <GinkgoRecord*>&records[0, 0]
    cdef Py_ssize_t i, n = subsets.shape[0]
    cdef mask_t x
    for i in prange(n, nogil=True, num_threads=n_threads, schedule="static"):
        x = subsets[i]
        if rec[x].mass2 < params[T_CUT] or not rec[x].mass2 > 0.0 or not log_out[x] > -INFINITY:
            rec[x].aux = -INFINITY
        else:
            rec[x].aux = log_out[x] + ginkgo_base(params, rec[x].mass2)


cdef inline void ginkgo_outside_run(const GinkgoRecord* rec, mask_t cluster,
                                    mask_t sibling_high, const mask_t* others, int n,
                                    double lam, GinkgoSum* s, double* exponent,
                                    double* inverse) noexcept nogil:
    """Add the terms of the siblings sibling_high | others[j], j < n, to `s`."""
    cdef double c = ginkgo_outside_exponents(rec, cluster, rec[cluster].mass2, rec[cluster].root,
                                             sibling_high, others, n, lam, exponent, inverse)
    if not c > -INFINITY:
        return
    ginkgo_rescale(s, c)
    s.total = s.total + ginkgo_sum(exponent, inverse, n, s.scale)


cdef inline void ginkgo_outside_start(GinkgoSum* s) noexcept nogil:
    s.base = 0.0
    s.scale = -INFINITY
    s.total = 0.0
    s.map_top = 0.0


cdef double ginkgo_outside_finish(const SplitTables* t, const GinkgoRecord* rec,
                                  mask_t cluster, mask_t full, const GinkgoSum* sums,
                                  const double* log_z, const double* log_out) noexcept nogil:
    """log O(cluster) from its running sum and its massless siblings.

    A massless sibling (a single particle) takes the formula's other
    branch: its terms go to the running sum in linear space
    (`ginkgo_outside_leaf_terms`, libm's exp where its own would not give
    1 - exp(-lam t_cut / tau) as the log-space formula does).
    """
    cdef const double* params = t.data.params
    cdef const double* mass2 = t.data.tables[0]
    cdef const double* root = t.data.tables[1]
    cdef mask_t rest = full ^ cluster, bit, other
    cdef double lam = params[LAM], inv_lam = 1.0 / lam, scale, y, top = -INFINITY
    cdef int n = 0, j
    cdef GinkgoSum s = sums[0]
    cdef mask_t leaves[32]
    cdef double exponent[32]
    cdef double factor[32]
    if not mass2[cluster] > 0.0:
        return exact_log_outside(t, cluster, full, log_z, log_out)
    bit = rest
    while bit:
        other = low_bit(bit)
        bit = bit ^ other
        if not mass2[other] > 0.0:
            leaves[n] = other
            n = n + 1
    ginkgo_outside_leaf_terms(rec, cluster, mass2[cluster], root[cluster], leaves, n, lam,
                              lam * params[T_CUT], inv_lam, exponent, factor)
    for j in range(n):
        if factor[j] < 0.0:
            # As child_term of the log-space formula: no term where tau <= 0
            # or log1p(-y) is -inf.
            scale = root[cluster | leaves[j]] - root[cluster]
            y = exp(-lam * params[T_CUT] / (scale * scale))
            if scale * scale > 0.0 and y < 1.0:
                factor[j] = (1.0 - y) * inv_lam
            else:
                exponent[j] = -INFINITY
                factor[j] = 0.0
        top = max(top, exponent[j])
    if top > -INFINITY:
        ginkgo_rescale(&s, top)
        s.total = s.total + ginkgo_sum(exponent, factor, n, s.scale)
    if s.scale > -INFINITY:
        if not (s.total >= LINEAR_SUM_FLOOR and s.total < INFINITY):
            return exact_log_outside(t, cluster, full, log_z, log_out)
        return s.scale + log(s.total)
    return -INFINITY


cdef double ginkgo_outside_cluster(const SplitTables* t, const GinkgoRecord* rec,
                                   mask_t cluster, mask_t full, const double* log_z,
                                   const double* log_out) noexcept nogil:
    """log O(cluster), its terms in linear space."""
    cdef mask_t rest = full ^ cluster, other = rest
    cdef int n
    cdef GinkgoSum s
    cdef mask_t others[GINKGO_CHUNK_SIZE]
    cdef double exponent[GINKGO_CHUNK_SIZE]
    cdef double inverse[GINKGO_CHUNK_SIZE]
    ginkgo_outside_start(&s)
    if rec[cluster].mass2 > 0.0:
        while other:
            n = 0
            while n < GINKGO_CHUNK_SIZE and other:
                others[n] = other
                n = n + 1
                other = (other - 1) & rest
            ginkgo_outside_run(rec, cluster, 0, others, n, t.data.params[LAM], &s, exponent,
                               inverse)
    return ginkgo_outside_finish(t, rec, cluster, full, &s, log_z, log_out)


def outside_level_ginkgo(SplitPotential potential, const mask_t[::1] clusters,
                         const double[::1] log_z, double[::1] log_out,
                         const double[:, ::1] records, int n_threads):
    """`outside_level` for the Ginkgo potential, in linear space (see above).

    `records` from `ginkgo_records`, with every larger subset filled by
    `fill_ginkgo_outside_records`. The potential must pass
    `ginkgo_kernel_applies`.
    """
    cdef const SplitTables* t = &potential.tables
    cdef const GinkgoRecord* rec = <const GinkgoRecord*>&records[0, 0]
    cdef int n_points = potential.n_points
    cdef mask_t full = <mask_t>((<uint64_t>1 << n_points) - 1)
    cdef Py_ssize_t i, n = clusters.shape[0]
    cdef double* out = &log_out[0]
    for i in prange(n, nogil=True, num_threads=n_threads, schedule="guided"):
        out[clusters[i]] = ginkgo_outside_cluster(t, rec, clusters[i], full, &log_z[0], out)


cdef void ginkgo_outside_item(const SplitTables* t, const GinkgoRecord* rec, int block_bits,
                              int n_points, mask_t high, const mask_t* low_order,
                              Py_ssize_t first, Py_ssize_t stop, const double* log_z,
                              double* out, GinkgoSum* sums) noexcept nogil:
    """The clusters (high, C_lo), C_lo in low_order[first:stop], one row pair at a time.

    For each high part D_hi of the siblings, the clusters' terms read the
    parent row high | D_hi and the sibling row D_hi. `sums` is scratch for
    stop - first clusters.
    """
    cdef mask_t full_high = <mask_t>((<uint64_t>1 << (n_points - block_bits)) - 1)
    cdef mask_t full_low = <mask_t>((<uint64_t>1 << block_bits) - 1)
    cdef mask_t full = <mask_t>((<uint64_t>1 << n_points) - 1)
    cdef mask_t base = high << block_bits, rest_high = full_high ^ high, sibling_high
    cdef mask_t cluster, rest, other
    cdef double lam = t.data.params[LAM]
    cdef Py_ssize_t i
    cdef int n
    cdef bint more
    cdef mask_t others[GINKGO_CHUNK_SIZE]
    cdef double exponent[GINKGO_CHUNK_SIZE]
    cdef double inverse[GINKGO_CHUNK_SIZE]
    for i in range(first, stop):
        ginkgo_outside_start(&sums[i - first])
    sibling_high = rest_high
    while True:
        for i in range(first, stop):
            cluster = base | low_order[i]
            if not rec[cluster].mass2 > 0.0:
                continue
            # D_lo over the low complement of C_lo, the empty one only with a
            # non-empty D_hi.
            rest = full_low ^ low_order[i]
            other = rest
            more = other != 0 or sibling_high != 0
            while more:
                n = 0
                while n < GINKGO_CHUNK_SIZE and more:
                    others[n] = other
                    n = n + 1
                    if other == 0:
                        more = False
                    else:
                        other = (other - 1) & rest
                        more = other != 0 or sibling_high != 0
                ginkgo_outside_run(rec, cluster, sibling_high << block_bits, others, n, lam,
                                   &sums[i - first], exponent, inverse)
        if sibling_high == 0:
            break
        sibling_high = (sibling_high - 1) & rest_high
    for i in range(first, stop):
        cluster = base | low_order[i]
        out[cluster] = ginkgo_outside_finish(t, rec, cluster, full, &sums[i - first], log_z,
                                             out)


def outside_level_ginkgo_blocked(SplitPotential potential, int block_bits,
                                 const mask_t[::1] high_parts, const index_t[::1] low_sizes,
                                 const mask_t[::1] low_order, const index_t[::1] low_level_start,
                                 const double[::1] log_z, double[::1] log_out,
                                 const double[:, ::1] records, int n_threads):
    """`outside_level_ginkgo` for the clusters (high_parts[i], C_lo), cache-blocked.

    Items as for `outside_level_blocked` (C_lo of 0 to block_bits points);
    records as for `outside_level_ginkgo`.
    """
    cdef const SplitTables* t = &potential.tables
    cdef const GinkgoRecord* rec = <const GinkgoRecord*>&records[0, 0]
    cdef int n_points = potential.n_points
    cdef Py_ssize_t item, n_items = high_parts.shape[0], first, stop
    cdef Py_ssize_t most = max(np.diff(np.asarray(low_level_start)))
    # Per thread, the running sums of one item's clusters.
    cdef unsigned char[:, ::1] scratch = np.empty((n_threads, most * sizeof(GinkgoSum)),
                                                  dtype=np.uint8)
    if n_items == 0:
        return
    for item in prange(n_items, nogil=True, num_threads=n_threads,
                       schedule="dynamic", chunksize=1):
        first = low_level_start[low_sizes[item]]
        stop = low_level_start[low_sizes[item] + 1]
        ginkgo_outside_item(t, rec, block_bits, n_points, high_parts[item], &low_order[0],
                            first, stop, &log_z[0], &log_out[0],
                            <GinkgoSum*>&scratch[threadid(), 0])


# Cache-blocked outside pass (separable kind), as the blocked inside pass:
# a cluster is C = (C_hi, C_lo) and a sibling D = (D_hi, D_lo) with D_hi in
# the high complement of C_hi. For one C_hi and one D_hi, the terms of every
# C_lo of one size read the parent row C_hi | D_hi and the sibling row D_hi,
# which stay in cache across the C(block_bits, |C_lo|) clusters.

cdef inline double sweep_sibling_row(const double* parent_row, const double* sibling_row,
                                     mask_t part, mask_t rest,
                                     const double* weight) noexcept nogil:
    """Sum of parent_row[part | D_lo] sibling_row[D_lo] weight[|D_lo|], D_lo in rest."""
    cdef mask_t pair_bit, other
    cdef double acc = 0.0, acc_odd = 0.0
    cdef int d
    if rest == 0:
        return parent_row[part] * sibling_row[0] * weight[0]
    # D_lo and D_lo | pair_bit together: two accumulators, one popcount.
    pair_bit = low_bit(rest)
    rest = rest ^ pair_bit
    other = rest
    while True:
        d = popcount(other)
        acc = acc + parent_row[part | other | pair_bit] * sibling_row[other | pair_bit] * weight[d + 1]
        acc_odd = acc_odd + parent_row[part | other] * sibling_row[other] * weight[d]
        if other == 0:
            break
        other = (other - 1) & rest
    return acc + acc_odd


def outside_level_blocked(SplitPotential potential, int block_bits, int size,
                          const mask_t[::1] high_parts, const index_t[::1] low_sizes,
                          const mask_t[::1] low_order, const index_t[::1] low_level_start,
                          const double[::1] log_z, double[::1] log_out,
                          const double[::1] parent_factor, const double[::1] parent_scale,
                          const double[::1] sibling_factor, const double[::1] sibling_scale,
                          double[:, ::1] weights, int n_threads):
    """Fill log O(C) for the clusters (high_parts[i], C_lo) of `size` points.

    C_lo runs over the `low_sizes[i]`-point subsets of the low bits (0 to
    block_bits points). Factors and scales as for `outside_level`, with
    sibling_factor[0] = 0 (no empty sibling). `weights` is scratch of shape
    (n_threads, C(block_bits, block_bits // 2) * (N - size + 2)): each
    cluster's weights per sibling size and its log scale.
    """
    cdef const SplitTables* t = &potential.tables
    cdef int n_points = potential.n_points, n_sizes = n_points - size, d, sibling_size
    cdef Py_ssize_t stride = n_sizes + 2, item, i, first, stop, n_items = high_parts.shape[0]
    cdef mask_t full_high = <mask_t>((<uint64_t>1 << (n_points - block_bits)) - 1)
    cdef mask_t full_low = <mask_t>((<uint64_t>1 << block_bits) - 1)
    cdef mask_t full = <mask_t>((<uint64_t>1 << n_points) - 1)
    cdef mask_t high, base, rest_high, sibling_high, cluster, part
    cdef double top, total
    cdef double* weight
    cdef double* buffer
    cdef double* out = &log_out[0]
    cdef const double* pf = &parent_factor[0]
    cdef const double* sf = &sibling_factor[0]
    cdef const double* parent_row
    cdef const double* sibling_row
    if n_items == 0:
        return
    for item in prange(n_items, nogil=True, num_threads=n_threads,
                       schedule="dynamic", chunksize=1):
        buffer = &weights[threadid(), 0]
        high = high_parts[item]
        base = high << block_bits
        first = low_level_start[low_sizes[item]]
        stop = low_level_start[low_sizes[item] + 1]
        for i in range(first, stop):
            cluster = base | low_order[i]
            weight = buffer + (i - first) * stride
            # As in outside_level: the cluster part and both scales per
            # sibling size d, relative to their largest; d = 0 has no term.
            top = -INFINITY
            weight[0] = -INFINITY
            for d in range(1, n_sizes + 1):
                weight[d] = (t.size_coef[size + d] * t.child_term[cluster]
                             + parent_scale[size + d] + sibling_scale[d])
                if weight[d] > top:
                    top = weight[d]
            for d in range(n_sizes + 1):
                weight[d] = exp(weight[d] - top) if top > -INFINITY else 0.0
            weight[n_sizes + 1] = top
            out[cluster] = 0.0
        rest_high = full_high ^ high
        sibling_high = rest_high
        while True:
            parent_row = pf + (<index_t>(high | sibling_high) << block_bits)
            sibling_row = sf + (<index_t>sibling_high << block_bits)
            sibling_size = popcount(sibling_high)
            for i in range(first, stop):
                part = low_order[i]
                out[base | part] += sweep_sibling_row(
                    parent_row, sibling_row, part, full_low ^ part,
                    buffer + (i - first) * stride + sibling_size)
            if sibling_high == 0:
                break
            sibling_high = (sibling_high - 1) & rest_high
        for i in range(first, stop):
            cluster = base | low_order[i]
            total = out[cluster]
            top = buffer[(i - first) * stride + n_sizes + 1]
            if total > LINEAR_SUM_FLOOR and isfinite(total):
                out[cluster] = top + log(total)
            elif top == -INFINITY:
                out[cluster] = -INFINITY
            else:
                out[cluster] = exact_log_outside(t, cluster, full, &log_z[0], out)


###############################################################################
# Exact sampling

cdef struct SplitSampling:
    const SplitTables* tables
    const double* log_z


cdef inline double split_log_weight(const void* model, mask_t parent, mask_t left) noexcept nogil:
    """log [psi(parent; left, parent ^ left) Z(left) Z(parent ^ left)], for draw_part."""
    cdef const SplitSampling* m = <const SplitSampling*>model
    return split_log_potential(m.tables, parent, left) + m.log_z[left] + m.log_z[parent ^ left]


cdef struct GinkgoSampling:
    const double* params
    const double* mass2
    const double* root
    const double* log_z


cdef inline double ginkgo_split_log_weight(const void* model, mask_t parent,
                                           mask_t left) noexcept nogil:
    """`split_log_weight` of the Ginkgo potential: its formula inlined, no call through a pointer.

    The arithmetic of ``ginkgo_log_psi`` (the C function), so the same
    weights bit for bit.
    """
    cdef const GinkgoSampling* g = <const GinkgoSampling*>model
    cdef mask_t right = parent ^ left
    return (log_psi_of_masses(g.params, g.mass2[parent], g.root[parent], g.mass2[left],
                              g.root[left], g.mass2[right], g.root[right])
            + g.log_z[left] + g.log_z[right])


cdef inline void draw_trees(const void* model, part_log_weight_t part_log_weight,
                            int n_points, const double* log_z,
                            const double[:, ::1] uniforms, mask_t[:, ::1] parents,
                            mask_t[:, ::1] lefts, WeightCache* weights) noexcept nogil:
    """The trees of `sample_splits`, each split drawn by draw_part with these weights."""
    cdef Py_ssize_t r, node, top
    cdef mask_t stack[64]
    cdef mask_t parent, left
    for r in range(uniforms.shape[0]):
        top = 0
        stack[0] = <mask_t>((<uint64_t>1 << n_points) - 1)
        node = 0
        while top >= 0:
            parent = stack[top]
            top -= 1
            if popcount(parent) < 2:
                continue
            left = draw_part(model, part_log_weight, parent,
                             (<Py_ssize_t>1 << (popcount(parent) - 1)) - 1,
                             log_z[parent], uniforms[r, node], weights)
            parents[r, node] = parent
            lefts[r, node] = left
            node += 1
            top += 1
            stack[top] = parent ^ left
            top += 1
            stack[top] = left


def sample_splits(SplitPotential potential, const double[::1] log_z,
                  const double[:, ::1] uniforms, double[::1] cache, bint ginkgo=False):
    """Draw trees top-down from P(tree) = prod psi / Z(root).

    Each row of `uniforms` (N-1 numbers in [0, 1)) drives one tree: at each
    inner node the split taken is the first whose cumulative probability
    exceeds the node's uniform. Returns (parents, lefts), each
    (n_samples, N-1): the inner nodes in preorder, left child (the part
    holding the parent's low bit) first.

    Splits are drawn by ``draw_part`` (``_sampling.pxd``), which keeps the
    cumulative split weights of subsets met more than once in `cache` while
    it has room; the caller allocates it, so its size is part of the
    estimator's memory estimate. `ginkgo`: the potential is the Ginkgo
    potential (``is_ginkgo_potential``), whose formula is then evaluated
    inline rather than through its function pointer (the same draws).
    """
    cdef int n_points = potential.n_points
    cdef Py_ssize_t n_samples = uniforms.shape[0], n_inner = n_points - 1
    cdef mask_t[:, ::1] parents = np.zeros((n_samples, n_inner), dtype=np.uint32)
    cdef mask_t[:, ::1] lefts = np.zeros((n_samples, n_inner), dtype=np.uint32)
    cdef index_t[::1] cache_start = np.full(<Py_ssize_t>1 << n_points, -1, dtype=np.int64)
    cdef WeightCache weights = WeightCache(&cache_start[0], &cache[0], 0, cache.shape[0])
    cdef SplitSampling model = SplitSampling(&potential.tables, &log_z[0])
    cdef GinkgoSampling ginkgo_model
    if ginkgo:
        if not is_ginkgo_potential(potential):
            raise ValueError(f"sample_splits(ginkgo=True) needs the Ginkgo potential, "
                             f"got {potential.params!r}")
        ginkgo_model = GinkgoSampling(potential.tables.data.params,
                                      potential.tables.data.tables[0],
                                      potential.tables.data.tables[1], &log_z[0])
        with nogil:
            draw_trees(&ginkgo_model, ginkgo_split_log_weight, n_points, &log_z[0], uniforms,
                       parents, lefts, &weights)
    else:
        with nogil:
            draw_trees(&model, split_log_weight, n_points, &log_z[0], uniforms, parents,
                       lefts, &weights)
    return np.asarray(parents), np.asarray(lefts)
