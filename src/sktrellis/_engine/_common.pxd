# The one typedef vocabulary and subset-bit convention of the sktrellis kernels.
#
# Scheduling, the same rule in every kernel: loops over the subsets of one
# level that each sum over their splits use schedule="guided" (the subsets
# cost the same, but a thread descheduled on a busy machine has its share
# taken over by the others); loops that fill one table entry per subset
# use schedule="static" (cheap and uniform, so the fewest chunk grabs).
#
# A subset of the N points is an N-bit mask: bit i set <=> point i is in the
# subset. Masks are 32-bit because the exact trellis needs 2**N table entries
# and memory runs out long before N = 32. The low bit of a subset ("low") is
# the anchor of its canonical splits: a split of S is written (A, S ^ A) with
# low(S) in A, so each unordered pair of siblings is visited exactly once.

from libc.stdint cimport uint32_t, uint64_t, int64_t
from libc.math cimport INFINITY, exp, log, log1p

# mask_t is part of the public C contract of split potentials.
from sktrellis.energies cimport mask_t

ctypedef double float64_t
# Indices and offsets into subset-indexed tables (int64: 2**N entries and
# 3**N / 2 splits overflow 32 bits from N = 21).
ctypedef int64_t index_t

cdef extern from *:
    """
    /* Exact tree and partition counts exceed 2**64 from N = 19 on. They are
       stored as two uint64 words (low, high) per subset, in a (2**N, 2)
       uint64 array, and only ever loaded into a 128-bit integer here: no
       cast of the array to __int128 (whose alignment numpy does not
       promise) and no assumption on the byte order. 128 bits hold (2N-3)!!
       and Bell(N) up to the estimators' cap of 25 points (47!! < 2**98). */
    typedef unsigned __int128 sktrellis_count_t;
    static inline sktrellis_count_t sktrellis_load_count(const uint64_t* words) {
        return ((sktrellis_count_t)words[1] << 64) | words[0];
    }
    static inline void sktrellis_store_count(uint64_t* words, sktrellis_count_t value) {
        words[0] = (uint64_t)value;
        words[1] = (uint64_t)(value >> 64);
    }
    /* acc += a * b, on the counts of two subsets. */
    static inline void sktrellis_count_add_product(uint64_t* acc, const uint64_t* a,
                                                  const uint64_t* b) {
        sktrellis_store_count(acc, sktrellis_load_count(acc)
                              + sktrellis_load_count(a) * sktrellis_load_count(b));
    }
    /* acc += a. */
    static inline void sktrellis_count_add(uint64_t* acc, const uint64_t* a) {
        sktrellis_store_count(acc, sktrellis_load_count(acc) + sktrellis_load_count(a));
    }
    /* Sums are taken in linear space, every term scaled by the largest term
       any subset of the level can have, so each term is <= 1. A sum of at
       least this is exact to the last digit: a term lost to underflow is
       below 1e-308 and there are at most 2**30 of them. A subset whose
       scaled sum falls below it is redone exactly in log space. */
    static const double sktrellis_linear_sum_floor = 1e-250;
    /* A term of a log-space sum this far (in log) below the largest term
       is left out: see log_sum_add. */
    static const double sktrellis_negligible_log_ratio = 80.0;
    /* The linear-space sums multiply factors <= 1 that can be tiny: with a
       large beta a few percent of the products land among the subnormal
       numbers, where x86 arithmetic takes ~100 cycles per operation (the
       flat inside pass ran 4x slower at beta = 1000). Such a product is
       below 2.3e-308, so flushing it (and subnormal inputs) to zero changes a
       sum of at least LINEAR_SUM_FLOOR by less than 2**30 * 2.3e-308 /
       1e-250, far below rounding. The kernels set flush-to-zero and
       denormals-are-zero (MXCSR, per thread) for their parallel region
       and restore the caller's mode after it. */
    #if defined(__x86_64__) || defined(__SSE2__)
    #include <xmmintrin.h>
    static inline unsigned int sktrellis_flush_subnormals(void) {
        unsigned int mode = _mm_getcsr();
        _mm_setcsr(mode | 0x8040);   /* FTZ (bit 15) | DAZ (bit 6) */
        return mode;
    }
    static inline void sktrellis_restore_fp(unsigned int mode) { _mm_setcsr(mode); }
    #else
    static inline unsigned int sktrellis_flush_subnormals(void) { return 0; }
    static inline void sktrellis_restore_fp(unsigned int mode) { (void)mode; }
    #endif
    static inline int sktrellis_popcount(uint32_t x) { return __builtin_popcount(x); }
    static inline int sktrellis_ctz(uint32_t x) { return __builtin_ctz(x); }
    """
    void count_add_product "sktrellis_count_add_product"(
        uint64_t* acc, const uint64_t* a, const uint64_t* b) noexcept nogil
    void count_add "sktrellis_count_add"(uint64_t* acc, const uint64_t* a) noexcept nogil
    const double LINEAR_SUM_FLOOR "sktrellis_linear_sum_floor"
    const double NEGLIGIBLE_LOG_RATIO "sktrellis_negligible_log_ratio"
    int popcount "sktrellis_popcount"(uint32_t x) noexcept nogil
    unsigned int flush_subnormals "sktrellis_flush_subnormals"() noexcept nogil
    void restore_fp "sktrellis_restore_fp"(unsigned int mode) noexcept nogil
    int ctz "sktrellis_ctz"(uint32_t x) noexcept nogil


cdef inline mask_t low_bit(mask_t s) noexcept nogil:
    return s & (~s + 1)


cdef inline mask_t next_submask(mask_t sub, mask_t of) noexcept nogil:
    # Submasks of `of` in increasing order: the j-th one has the bits of j
    # deposited at the set positions of `of` (so its rank is extract_rank).
    return (sub - of) & of


cdef inline mask_t deposit(mask_t rank, mask_t of) noexcept nogil:
    """The submask of `of` whose rank in increasing order is `rank`."""
    cdef mask_t result = 0, bit
    while of and rank:
        bit = low_bit(of)
        if rank & 1:
            result |= bit
        rank >>= 1
        of ^= bit
    return result


cdef inline mask_t extract_rank(mask_t sub, mask_t of) noexcept nogil:
    """Rank of the submask `sub` of `of` among the submasks in increasing order."""
    cdef mask_t result = 0, place = 1, bit
    while of:
        bit = low_bit(of)
        if sub & bit:
            result |= place
        place <<= 1
        of ^= bit
    return result


# Online logsumexp, for the sums that linear space cannot hold (a subset
# whose scaled linear sum fell below LINEAR_SUM_FLOOR, a potential with no
# shared factors). One exp per term, the running sum rescaled only when a
# new largest term appears; and no exp at all for a term more than
# NEGLIGIBLE_LOG_RATIO below the largest so far. Such a term is below
# e**-80 = 1.8e-35 of the final sum (the largest term only grows), and at
# most 2**31 of them change the sum by less than 4e-26 of itself, far below
# its last digit. This is what keeps a cold posterior fast: at beta = 1000
# most subsets' sums come here, and nearly all of their terms are that small
# (N = 18: the inside pass was 11x slower than at beta = 20, the outside
# pass 28x).
cdef struct LogSum:
    double top   # the largest term so far (-inf: none)
    double acc   # sum of exp(term - top) over the terms so far


cdef inline LogSum empty_log_sum() noexcept nogil:
    # Returned by value: assigned in a prange body, the sum is then private
    # to each thread.
    cdef LogSum total
    total.top = -INFINITY
    total.acc = 0.0
    return total


cdef inline void log_sum_add(LogSum* total, double value) noexcept nogil:
    """Add the term exp(value); value = -inf adds nothing."""
    if value > total.top:
        total.acc = total.acc * exp(total.top - value) + 1.0
        total.top = value
    elif value > total.top - NEGLIGIBLE_LOG_RATIO:
        total.acc = total.acc + exp(value - total.top)


cdef inline double log_sum_value(const LogSum* total) noexcept nogil:
    """log of the sum of the terms added (-inf for none)."""
    return total.top + log(total.acc) if total.top > -INFINITY else -INFINITY


cdef inline double log_add(double a, double b) noexcept nogil:
    """log(exp(a) + exp(b)) without overflow; -inf is the additive zero."""
    if a < b:
        a, b = b, a
    if b == -INFINITY:
        return a
    return a + log1p(exp(b - a))


cdef inline object count_to_int(const uint64_t* words):
    """Exact Python int from a count stored as (low, high) uint64 words."""
    return (int(words[1]) << 64) | int(words[0])
