# Declared here so that Cython exports it in the module's __pyx_capi__,
# where SplitPotential.from_cython finds it, as it finds a user's function.
from libc.math cimport INFINITY, exp, log, log1p
from libc.stdint cimport uint64_t

from sktrellis.energies cimport SplitData, mask_t

cdef double ginkgo_log_psi(const SplitData* data, mask_t parent, mask_t left) noexcept nogil


# Positions in SplitData.params of the Ginkgo potential; the search bound
# (_search_bounds.pyx) keeps its parameters in the same layout.
cdef enum:
    LAM = 0
    T_CUT = 1
    LOG_LAM = 2
    LOG_NORM = 3
    ISOTROPIC = 4
    N_PARAMS = 5


cdef inline double child_term(const double* params, double tau, double child_mass2) noexcept nogil:
    # g(tau, t) of the GinkgoLikelihood docstring: a child's mass given its parent's scale.
    if tau <= 0.0:
        return -INFINITY
    if child_mass2 > 0.0:
        return (params[LOG_LAM] - log(tau) - params[LAM] * child_mass2 / tau
                - params[LOG_NORM])
    return log1p(-exp(-params[LAM] * params[T_CUT] / tau)) - params[LOG_NORM]


cdef inline double log_psi_of_masses(const double* params, double t_parent, double root_parent,
                                     double t_left, double root_left, double t_right,
                                     double root_right) noexcept nogil:
    """log psi from the three masses squared t and their square roots.

    The one copy of the formula (``sktrellis.energies._ginkgo.ginkgo_log_psi``
    calls it on arrays): the heavier child's mass given the parent's, then
    the lighter's given what the heavier leaves.
    """
    cdef double scale_light
    if t_parent < params[T_CUT]:
        return -INFINITY
    if t_left >= t_right:
        scale_light = root_parent - root_left
        return (child_term(params, t_parent, t_left)
                + child_term(params, scale_light * scale_light, t_right) + params[ISOTROPIC])
    scale_light = root_parent - root_right
    return (child_term(params, t_parent, t_right)
            + child_term(params, scale_light * scale_light, t_left) + params[ISOTROPIC])


# The inside and outside passes of the Ginkgo potential in linear space (the
# kernels are ``_hierarchical.inside_level_ginkgo`` and
# ``outside_level_ginkgo``, and their cache-blocked forms). For a split whose
# lighter child is not a leaf (mass squared > 0),
#
#     log psi = K(S) - lam t_heavy / t(S) - lam t_light / tau + log(1 / tau),
#     tau = (sqrt t(S) - sqrt t_heavy)**2,
#
# with K(S) = 2 log lam - 2 log norm + log(1 / (4 pi)) - log t(S) the same
# for every split of S. So psi Z(A) Z(B) = exp(K(S) + e) / tau with
#     e = z(A) + z(B) - lam t_heavy / t(S) - lam t_light / tau:
# one division and one exp per split, no log, no sqrt (each record holds its
# root), no branch on which child is heavier (a select). The exp does not
# factor: tau depends on the parent and the heavier child together. A run of
# splits of one parent is evaluated in two vectorised passes: the exponents
# and their largest (`ginkgo_exponents`), then the terms relative to the
# parent's running scale (`ginkgo_weights`). The MAP term is the Z term
# times exp(m - z) of both children, a per-subset ratio: two multiplies.
cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #include <math.h>
    /* Per subset, what a split reads of each child (and the outside pass of
       each parent): one 32-byte record, half a cache line. `aux` is
       exp(log MAP - log Z) in the inside pass (0 where log Z = -inf) and
       log O + K, the outside sum and the parent's constant, in the outside
       pass (-inf where the subset cannot split). Tree counts stay in their
       own table: only the count loop reads them. */
    typedef struct {
        double mass2;      /* t */
        double root;       /* sqrt t, the root table's value bit for bit */
        double log_z;      /* log Z */
        double aux;
    } sktrellis_ginkgo_record;

    /* gcc keeps a select of doubles as a branch (so the loop is not
       vectorised) unless it may assume that comparisons do not trap; they
       never trap here (no FP exceptions are enabled), so this code is
       compiled with -fno-trapping-math, which changes no result; and with
       -fno-math-errno. */
    #pragma GCC push_options
    #pragma GCC optimize ("no-trapping-math", "no-math-errno")

    /* exp(x) for x <= 0 in plain arithmetic, so that a loop of it
       vectorises (libm's exp is a call per element): 2**n exp(r) with
       |r| <= ln(2) / 2, exp(r) by its degree-13 Taylor polynomial
       (truncation error < 5e-18), 2**n built in the exponent bits. Within
       2 ulp of exp (measured worst 1.6 ulp over 2e6 random x in
       [-708, 0]); 0 for x <= -708 (below 3.3e-308, subnormal) and -inf. */
    static inline double sktrellis_exp_nonpositive(double x) {
        const double shifter = 0x1.8p52;   /* rounds x / ln 2 to an integer n */
        int keep = x > -708.0;
        double y = keep ? x : -708.0, k, n, r, p, scale;
        uint64_t bits;
        k = y * 0x1.71547652b82fep0 + shifter;
        n = k - shifter;
        /* ln 2 in two parts, the first with trailing zero bits: n ln2_hi exact. */
        r = (y - n * 0x1.62e42fee00000p-1) - n * 0x1.a39ef35793c76p-33;
        p = 1.0 / 6227020800.0;
        p = p * r + 1.0 / 479001600.0;
        p = p * r + 1.0 / 39916800.0;
        p = p * r + 1.0 / 3628800.0;
        p = p * r + 1.0 / 362880.0;
        p = p * r + 1.0 / 40320.0;
        p = p * r + 1.0 / 5040.0;
        p = p * r + 1.0 / 720.0;
        p = p * r + 1.0 / 120.0;
        p = p * r + 1.0 / 24.0;
        p = p * r + 1.0 / 6.0;
        p = p * r + 0.5;
        p = p * r + 1.0;
        p = p * r + 1.0;
        /* The low bits of k hold n: (n + 1023) << 52 is 2**n. */
        memcpy(&bits, &k, sizeof bits);
        bits = (bits + 1023) << 52;
        memcpy(&scale, &bits, sizeof scale);
        return keep ? p * scale : 0.0;
    }

    /* On x86-64 with gcc, the passes are compiled three times, for the
       baseline, for AVX2 with FMA (x86-64-v3, 4 doubles per instruction)
       and for AVX-512 (x86-64-v4, 8 doubles, masked gathers), and the
       loader picks the one the processor runs (an ifunc), with the same
       results to rounding. */
    #if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11 \
        && defined(__x86_64__) && defined(__linux__)
    #define SKTRELLIS_VECTOR_CLONES \
        __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
    #else
    #define SKTRELLIS_VECTOR_CLONES
    #endif

    /* First pass over the splits (A_j, parent ^ A_j), A_j = left_high |
       lefts[j], j < n: exponent[j] = e (above), inverse[j] = 1 / tau and
       ratio[j] = the product of both children's exp(m - z); a split
       without a term here (tau <= 0: psi = 0; a lighter child of mass 0, a
       leaf or the empty set: the caller adds those exactly) has exponent
       -inf and inverse 0. Returns the largest exponent (-inf if none). */
    SKTRELLIS_VECTOR_CLONES static double sktrellis_ginkgo_exponents_portable(
            const sktrellis_ginkgo_record* rec, uint32_t parent, uint32_t left_high,
            const uint32_t* lefts, int n, double root_parent, double lam_over_parent,
            double lam, double* exponent, double* inverse, double* ratio) {
        double c = -INFINITY;
        int j;
        #pragma omp simd reduction(max:c)
        for (j = 0; j < n; j++) {
            uint32_t left = left_high | lefts[j];
            const sktrellis_ginkgo_record* a = rec + left;
            const sktrellis_ginkgo_record* b = rec + (parent ^ left);
            int left_heavy = a->mass2 >= b->mass2;
            double heavy = left_heavy ? a->mass2 : b->mass2;
            double light = left_heavy ? b->mass2 : a->mass2;
            double scale = root_parent - (left_heavy ? a->root : b->root);
            double tau = scale * scale;
            int has_term = (tau > 0.0) & (light > 0.0);
            double inv = has_term ? 1.0 / tau : 0.0;
            double e = a->log_z + b->log_z - lam_over_parent * heavy - lam * light * inv;
            e = has_term ? e : -INFINITY;
            exponent[j] = e;
            inverse[j] = inv;
            ratio[j] = a->aux * b->aux;
            c = e > c ? e : c;
        }
        return c;
    }

    /* Second pass: the terms exp(exponent[j] - scale) * inverse[j] (scale
       at least every exponent), whose sum is returned; ratio[j] becomes the
       MAP term (the term times ratio[j]) and *map_max their largest. */
    SKTRELLIS_VECTOR_CLONES static double sktrellis_ginkgo_weights(
            const double* exponent, const double* inverse, double* ratio, int n,
            double scale, double* map_max) {
        double sum = 0.0, top = 0.0;
        int j;
        #pragma omp simd reduction(+:sum) reduction(max:top)
        for (j = 0; j < n; j++) {
            double w = sktrellis_exp_nonpositive(exponent[j] - scale) * inverse[j];
            double v = w * ratio[j];
            ratio[j] = v;
            sum += w;
            top = v > top ? v : top;
        }
        *map_max = top;
        return sum;
    }

    /* The outside pass's first pass: for the siblings D_j = sibling_high |
       others[j] of `cluster` (mass t_cluster, root root_cluster), the
       exponent of O(P) psi(P; C, D) Z(D), P = C | D, relative to exp(0):
       log O(P) + K(P) + z(D) - lam t_heavy / t(P) - lam t_light / tau, and
       1 / tau; siblings of mass 0 and tau <= 0 give no term here (as in
       sktrellis_ginkgo_exponents). Returns the largest exponent. */
    SKTRELLIS_VECTOR_CLONES static double sktrellis_ginkgo_outside_exponents_portable(
            const sktrellis_ginkgo_record* rec, uint32_t cluster, double t_cluster,
            double root_cluster, uint32_t sibling_high, const uint32_t* others, int n,
            double lam, double* exponent, double* inverse) {
        double c = -INFINITY;
        int j;
        #pragma omp simd reduction(max:c)
        for (j = 0; j < n; j++) {
            uint32_t sibling = sibling_high | others[j];
            const sktrellis_ginkgo_record* p = rec + (cluster | sibling);
            const sktrellis_ginkgo_record* d = rec + sibling;
            int cluster_heavy = t_cluster >= d->mass2;
            double heavy = cluster_heavy ? t_cluster : d->mass2;
            double light = cluster_heavy ? d->mass2 : t_cluster;
            double scale = p->root - (cluster_heavy ? root_cluster : d->root);
            double tau = scale * scale;
            int has_term = (tau > 0.0) & (light > 0.0);
            double inv = has_term ? 1.0 / tau : 0.0;
            double e = p->aux + d->log_z - lam * heavy / p->mass2 - lam * light * inv;
            e = has_term ? e : -INFINITY;
            exponent[j] = e;
            inverse[j] = inv;
            c = e > c ? e : c;
        }
        return c;
    }

    /* The sum of exp(exponent[j] - scale) * inverse[j], scale at least every exponent. */
    SKTRELLIS_VECTOR_CLONES static double sktrellis_ginkgo_sum(
            const double* exponent, const double* inverse, int n, double scale) {
        double sum = 0.0;
        int j;
        #pragma omp simd reduction(+:sum)
        for (j = 0; j < n; j++)
            sum += sktrellis_exp_nonpositive(exponent[j] - scale) * inverse[j];
        return sum;
    }
    #pragma GCC pop_options

    /* Tree counts. Counts are (low, high) uint64 pairs (see _common.pxd). A
       subset of s <= 18 points has at most (2s - 3)!! < 2**64 trees, and
       every product of its children's counts is at most its own: up to 18
       points, 64-bit arithmetic is exact (a multiply-add per split).
       sktrellis_ginkgo_count64 returns the sum of count[A_j] count[parent ^
       A_j], A_j = left_high | lefts[j], over the splits with a term
       (inverse[j] != 0); sktrellis_ginkgo_count128 adds it to
       count[parent] in 128 bits, for parents of any size. */
    SKTRELLIS_VECTOR_CLONES static uint64_t sktrellis_ginkgo_count64(
            const uint64_t* count, uint32_t parent, uint32_t left_high, const uint32_t* lefts,
            const double* inverse, int n) {
        uint64_t acc = 0;
        int j;
        #pragma omp simd reduction(+:acc)
        for (j = 0; j < n; j++) {
            uint32_t left = left_high | lefts[j];
            uint64_t product = count[2 * (size_t)left] * count[2 * (size_t)(parent ^ left)];
            acc += inverse[j] != 0.0 ? product : 0;
        }
        return acc;
    }

    static void sktrellis_ginkgo_count128(
            uint64_t* count, uint32_t parent, uint32_t left_high, const uint32_t* lefts,
            const double* inverse, int n) {
        unsigned __int128 acc = ((unsigned __int128)count[2 * (size_t)parent + 1] << 64)
                                | count[2 * (size_t)parent];
        int j;
        for (j = 0; j < n; j++) {
            if (inverse[j] != 0.0) {
                uint32_t left = left_high | lefts[j];
                const uint64_t* a = count + 2 * (size_t)left;
                const uint64_t* b = count + 2 * (size_t)(parent ^ left);
                acc += (((unsigned __int128)a[1] << 64) | a[0])
                       * (((unsigned __int128)b[1] << 64) | b[0]);
            }
        }
        count[2 * (size_t)parent] = (uint64_t)acc;
        count[2 * (size_t)parent + 1] = (uint64_t)(acc >> 64);
    }

    /* The first passes read two 32-byte records per split at scattered
       addresses. Compilers vectorise those reads as one scalar load and one
       insert per field (8 of each per split, the passes' bottleneck); on
       x86-64 with AVX2 the passes below read each record as two 16-byte
       halves and transpose four records at a time with two unpacks per
       pair of fields (the whole inside pass 1.33x faster, N = 18, one
       thread, measured). Same arithmetic as the
       portable passes, operation for operation (which the compiler may
       contract into FMA), so the same results to rounding; the MAP values
       and splits are exact either way (the kernel re-evaluates its MAP
       candidates in log space). */
    #if defined(__GNUC__) && defined(__x86_64__)
    #define SKTRELLIS_GINKGO_AVX2 1
    #include <immintrin.h>
    /* Fields of the records rec[i[0..3]]: (t, sqrt t, log Z, aux), 4 lanes each. */
    __attribute__((target("avx2"))) static inline void sktrellis_ginkgo_load4(
            const sktrellis_ginkgo_record* rec, const uint32_t* i, __m256d* mass2,
            __m256d* root, __m256d* log_z, __m256d* aux) {
        const double* r0 = (const double*)(rec + i[0]);
        const double* r1 = (const double*)(rec + i[1]);
        const double* r2 = (const double*)(rec + i[2]);
        const double* r3 = (const double*)(rec + i[3]);
        __m256d lo02 = _mm256_insertf128_pd(_mm256_castpd128_pd256(_mm_loadu_pd(r0)),
                                            _mm_loadu_pd(r2), 1);
        __m256d lo13 = _mm256_insertf128_pd(_mm256_castpd128_pd256(_mm_loadu_pd(r1)),
                                            _mm_loadu_pd(r3), 1);
        __m256d hi02 = _mm256_insertf128_pd(_mm256_castpd128_pd256(_mm_loadu_pd(r0 + 2)),
                                            _mm_loadu_pd(r2 + 2), 1);
        __m256d hi13 = _mm256_insertf128_pd(_mm256_castpd128_pd256(_mm_loadu_pd(r1 + 2)),
                                            _mm_loadu_pd(r3 + 2), 1);
        *mass2 = _mm256_unpacklo_pd(lo02, lo13);
        *root = _mm256_unpackhi_pd(lo02, lo13);
        *log_z = _mm256_unpacklo_pd(hi02, hi13);
        *aux = _mm256_unpackhi_pd(hi02, hi13);
    }

    __attribute__((target("avx2"))) static double sktrellis_ginkgo_exponents_avx2(
            const sktrellis_ginkgo_record* rec, uint32_t parent, uint32_t left_high,
            const uint32_t* lefts, int n, double root_parent, double lam_over_parent,
            double lam, double* exponent, double* inverse, double* ratio,
            const uint64_t* count, uint64_t* count_sum) {
        __m256i products = _mm256_setzero_si256();
        uint64_t words[4], product_sum;
        const __m256d zero = _mm256_setzero_pd(), one = _mm256_set1_pd(1.0);
        const __m256d minus_inf = _mm256_set1_pd(-INFINITY);
        const __m256d v_root = _mm256_set1_pd(root_parent);
        const __m256d v_lop = _mm256_set1_pd(lam_over_parent), v_lam = _mm256_set1_pd(lam);
        __m256d top = minus_inf;
        double c, lanes[4];
        uint32_t a_index[4], b_index[4];
        int j = 0, k;
        for (; j + 4 <= n; j += 4) {
            __m256d ma, ra, za, xa, mb, rb, zb, xb;
            for (k = 0; k < 4; k++) {
                a_index[k] = left_high | lefts[j + k];
                b_index[k] = parent ^ a_index[k];
            }
            sktrellis_ginkgo_load4(rec, a_index, &ma, &ra, &za, &xa);
            sktrellis_ginkgo_load4(rec, b_index, &mb, &rb, &zb, &xb);
            __m256d left_heavy = _mm256_cmp_pd(ma, mb, _CMP_GE_OQ);
            __m256d heavy = _mm256_blendv_pd(mb, ma, left_heavy);
            __m256d light = _mm256_blendv_pd(ma, mb, left_heavy);
            __m256d scale = _mm256_sub_pd(v_root, _mm256_blendv_pd(rb, ra, left_heavy));
            __m256d tau = _mm256_mul_pd(scale, scale);
            __m256d has_term = _mm256_and_pd(_mm256_cmp_pd(tau, zero, _CMP_GT_OQ),
                                             _mm256_cmp_pd(light, zero, _CMP_GT_OQ));
            __m256d inv = _mm256_and_pd(has_term, _mm256_div_pd(one, tau));
            __m256d e = _mm256_sub_pd(
                _mm256_sub_pd(_mm256_add_pd(za, zb), _mm256_mul_pd(v_lop, heavy)),
                _mm256_mul_pd(_mm256_mul_pd(v_lam, light), inv));
            e = _mm256_blendv_pd(minus_inf, e, has_term);
            _mm256_storeu_pd(exponent + j, e);
            _mm256_storeu_pd(inverse + j, inv);
            _mm256_storeu_pd(ratio + j, _mm256_mul_pd(xa, xb));
            top = _mm256_max_pd(top, e);
            if (count != NULL) {
                /* The splits' counts while their indices are at hand, summed
                   in a vector register (a scalar sum is spilled to memory
                   for lack of registers, and its store-load chain cost more
                   than the rest of the loop). */
                __m256i product = _mm256_set_epi64x(
                    (long long)(count[2 * (size_t)a_index[3]] * count[2 * (size_t)b_index[3]]),
                    (long long)(count[2 * (size_t)a_index[2]] * count[2 * (size_t)b_index[2]]),
                    (long long)(count[2 * (size_t)a_index[1]] * count[2 * (size_t)b_index[1]]),
                    (long long)(count[2 * (size_t)a_index[0]] * count[2 * (size_t)b_index[0]]));
                products = _mm256_add_epi64(
                    products, _mm256_and_si256(product, _mm256_castpd_si256(has_term)));
            }
        }
        _mm256_storeu_si256((__m256i*)words, products);
        product_sum = words[0] + words[1] + words[2] + words[3];
        _mm256_storeu_pd(lanes, top);
        c = lanes[0];
        for (k = 1; k < 4; k++)
            c = lanes[k] > c ? lanes[k] : c;
        if (j < n) {
            double rest = sktrellis_ginkgo_exponents_portable(
                rec, parent, left_high, lefts + j, n - j, root_parent, lam_over_parent, lam,
                exponent + j, inverse + j, ratio + j);
            c = rest > c ? rest : c;
            if (count != NULL)
                product_sum += sktrellis_ginkgo_count64(count, parent, left_high, lefts + j,
                                                        inverse + j, n - j);
        }
        *count_sum = product_sum;
        return c;
    }

    __attribute__((target("avx2"))) static double sktrellis_ginkgo_outside_exponents_avx2(
            const sktrellis_ginkgo_record* rec, uint32_t cluster, double t_cluster,
            double root_cluster, uint32_t sibling_high, const uint32_t* others, int n,
            double lam, double* exponent, double* inverse) {
        const __m256d zero = _mm256_setzero_pd(), one = _mm256_set1_pd(1.0);
        const __m256d minus_inf = _mm256_set1_pd(-INFINITY);
        const __m256d v_t = _mm256_set1_pd(t_cluster), v_root = _mm256_set1_pd(root_cluster);
        const __m256d v_lam = _mm256_set1_pd(lam);
        __m256d top = minus_inf;
        double c, lanes[4];
        uint32_t p_index[4], d_index[4];
        int j = 0, k;
        for (; j + 4 <= n; j += 4) {
            __m256d mp, rp, zp, xp, md, rd, zd, xd;
            for (k = 0; k < 4; k++) {
                d_index[k] = sibling_high | others[j + k];
                p_index[k] = cluster | d_index[k];
            }
            sktrellis_ginkgo_load4(rec, p_index, &mp, &rp, &zp, &xp);
            sktrellis_ginkgo_load4(rec, d_index, &md, &rd, &zd, &xd);
            __m256d cluster_heavy = _mm256_cmp_pd(v_t, md, _CMP_GE_OQ);
            __m256d heavy = _mm256_blendv_pd(md, v_t, cluster_heavy);
            __m256d light = _mm256_blendv_pd(v_t, md, cluster_heavy);
            __m256d scale = _mm256_sub_pd(rp, _mm256_blendv_pd(rd, v_root, cluster_heavy));
            __m256d tau = _mm256_mul_pd(scale, scale);
            __m256d has_term = _mm256_and_pd(_mm256_cmp_pd(tau, zero, _CMP_GT_OQ),
                                             _mm256_cmp_pd(light, zero, _CMP_GT_OQ));
            __m256d inv = _mm256_and_pd(has_term, _mm256_div_pd(one, tau));
            __m256d e = _mm256_sub_pd(
                _mm256_sub_pd(_mm256_add_pd(xp, zd),
                              _mm256_div_pd(_mm256_mul_pd(v_lam, heavy), mp)),
                _mm256_mul_pd(_mm256_mul_pd(v_lam, light), inv));
            e = _mm256_blendv_pd(minus_inf, e, has_term);
            _mm256_storeu_pd(exponent + j, e);
            _mm256_storeu_pd(inverse + j, inv);
            top = _mm256_max_pd(top, e);
        }
        _mm256_storeu_pd(lanes, top);
        c = lanes[0];
        for (k = 1; k < 4; k++)
            c = lanes[k] > c ? lanes[k] : c;
        if (j < n) {
            double rest = sktrellis_ginkgo_outside_exponents_portable(
                rec, cluster, t_cluster, root_cluster, sibling_high, others + j, n - j, lam,
                exponent + j, inverse + j);
            c = rest > c ? rest : c;
        }
        return c;
    }
    #endif

    /* The first pass (sktrellis_ginkgo_exponents_portable). With `count`
       not NULL (a parent of at most 18 points, see sktrellis_ginkgo_count64),
       also the sum of the splits' count products in *count_sum. */
    static double sktrellis_ginkgo_exponents(
            const sktrellis_ginkgo_record* rec, uint32_t parent, uint32_t left_high,
            const uint32_t* lefts, int n, double root_parent, double lam_over_parent,
            double lam, double* exponent, double* inverse, double* ratio,
            const uint64_t* count, uint64_t* count_sum) {
        double c;
    #ifdef SKTRELLIS_GINKGO_AVX2
        if (__builtin_cpu_supports("avx2"))
            return sktrellis_ginkgo_exponents_avx2(rec, parent, left_high, lefts, n,
                                                   root_parent, lam_over_parent, lam,
                                                   exponent, inverse, ratio, count, count_sum);
    #endif
        c = sktrellis_ginkgo_exponents_portable(rec, parent, left_high, lefts, n,
                                                root_parent, lam_over_parent, lam,
                                                exponent, inverse, ratio);
        *count_sum = count != NULL
            ? sktrellis_ginkgo_count64(count, parent, left_high, lefts, inverse, n) : 0;
        return c;
    }

    static double sktrellis_ginkgo_outside_exponents(
            const sktrellis_ginkgo_record* rec, uint32_t cluster, double t_cluster,
            double root_cluster, uint32_t sibling_high, const uint32_t* others, int n,
            double lam, double* exponent, double* inverse) {
    #ifdef SKTRELLIS_GINKGO_AVX2
        if (__builtin_cpu_supports("avx2"))
            return sktrellis_ginkgo_outside_exponents_avx2(rec, cluster, t_cluster,
                                                           root_cluster, sibling_high, others,
                                                           n, lam, exponent, inverse);
    #endif
        return sktrellis_ginkgo_outside_exponents_portable(rec, cluster, t_cluster,
                                                           root_cluster, sibling_high, others,
                                                           n, lam, exponent, inverse);
    }

    """
    ctypedef struct GinkgoRecord "sktrellis_ginkgo_record":
        double mass2
        double root
        double log_z
        double aux
    double ginkgo_exponents "sktrellis_ginkgo_exponents"(
        const GinkgoRecord* rec, mask_t parent, mask_t left_high, const mask_t* lefts, int n,
        double root_parent, double lam_over_parent, double lam,
        double* exponent, double* inverse, double* ratio, const uint64_t* count,
        uint64_t* count_sum) noexcept nogil
    double ginkgo_weights "sktrellis_ginkgo_weights"(
        const double* exponent, const double* inverse, double* ratio, int n, double scale,
        double* map_max) noexcept nogil
    double ginkgo_outside_exponents "sktrellis_ginkgo_outside_exponents"(
        const GinkgoRecord* rec, mask_t cluster, double t_cluster, double root_cluster,
        mask_t sibling_high, const mask_t* others, int n, double lam, double* exponent,
        double* inverse) noexcept nogil
    double ginkgo_sum "sktrellis_ginkgo_sum"(
        const double* exponent, const double* inverse, int n, double scale) noexcept nogil
    void ginkgo_count128 "sktrellis_ginkgo_count128"(
        uint64_t* count, mask_t parent, mask_t left_high, const mask_t* lefts,
        const double* inverse, int n) noexcept nogil


# Splits per run of the linear-space passes: the run's buffers stay in L1.
cdef enum:
    GINKGO_CHUNK_SIZE = 256
