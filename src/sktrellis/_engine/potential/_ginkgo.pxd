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
# factor: tau depends on the parent and the heavier child together. The
# inside pass scales Z(A) Z(B) per subset size as the separable kernels do,
# so that its terms need no largest exponent first: one pass per split
# (`ginkgo_row`, below). The outside pass evaluates a run of terms in two
# vectorised passes: the exponents and their largest
# (`ginkgo_outside_exponents`), then the terms relative to the cluster's
# running scale (`ginkgo_sum`). The MAP term is the Z term times exp(m - z)
# of both children, a per-subset ratio: two multiplies.
cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #include <math.h>
    /* Per subset, what the outside pass reads of each sibling and parent:
       one 32-byte record, half a cache line. `aux` is log O + K, the
       outside sum and the parent's constant (-inf where the subset cannot
       split). The inside pass has its own (sktrellis_ginkgo_split_record). */
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

    /* The inside pass in scaled linear space. A parent S of k points and
       its splits (A, B = S ^ A), the lighter child not massless:

           psi Z(A) Z(B) = exp(K(S) + M_k) f_k(|A|) u(A) u(B) exp(x) / tau,
           x = -lam t_heavy / t(S) - lam t_light / tau <= 0,

       with u(X) = exp(log Z(X) - mz(|X|)) in the record (`u`), mz(a) the
       largest log Z of the subsets of a points, M_k = max_a mz(a) +
       mz(k - a) and f_k(a) = exp(mz(a) + mz(k - a) - M_k) (the scales of
       the separable kernels). Every factor but 1 / tau is at most 1, so no
       pass first looks for the largest term: one pass per split, one exp,
       one division. The MAP term is the term times the children's
       exp(log MAP - log Z) (`aux`). A row of splits is enumerated in
       blocks of eight or four: A = left_base | sub | q, sub over the
       submasks of `high` in increasing order, q over the lanes (0, b1, b2,
       b1 | b2, b3, ...), b1 < b2 < b3 the lowest bits of the row's free
       points (a row of fewer than two free points is one block of its 1 or
       2 splits, lanes (0, b1)); sktrellis_ginkgo_row_shape. */

    /* The inside pass's record of a subset X: sqrt t (t is its square,
       within an ulp of the table's t: enough for the linear terms, whose
       MAP candidates are re-evaluated from the tables), u, aux =
       exp(log MAP - log Z), and the low 64 bits of its tree count (exact
       for the children of parents of up to 18 points, where they are
       read): one 32-byte load per child and split. */
    typedef struct {
        double root;
        double u;
        double aux;
        uint64_t count;
    } sktrellis_ginkgo_split_record;
    /* The AVX-512 row walks submasks and counts their points on byte
       offsets (record size times the submask): exact only for a size that
       is a power of two. */
    _Static_assert((sizeof(sktrellis_ginkgo_split_record)
                    & (sizeof(sktrellis_ginkgo_split_record) - 1)) == 0,
                   "sktrellis_ginkgo_split_record's size must be a power of two");

    /* A level's size factors f_k(a), a = |A| (`f` of the rows): f_k(a) at
       a < SKTRELLIS_GINKGO_SIZE_FACTORS (up to 31 points, and the AVX2
       row reads 4 from a <= |S| - 2), then the eight-lane rows' factors:
       those of the lanes of a block whose lane 0 has c points at
       SKTRELLIS_GINKGO_SIZE_FACTORS + 8 c (one load per block, no
       permute). */
    #define SKTRELLIS_GINKGO_SIZE_FACTORS 36
    #define SKTRELLIS_GINKGO_FACTOR_TABLE (9 * SKTRELLIS_GINKGO_SIZE_FACTORS)

    /* The widest vector path the inside rows and the outside runs take: 8
       (AVX-512 where the processor has it), 4 (AVX2 at most) or 1 (the
       portable code, on rows of up to 8 lanes); set by tests to compare
       the paths. */
    static int sktrellis_ginkgo_vector_width = 8;

    /* A parent's running sums across its rows, one per vector lane (the
       rows keep them in registers and reduce none of them: the parent's
       last step, ginkgo_finish, does, once), and its MAP candidate cut. */
    typedef struct {
        double total[8];     /* sums of the terms / exp(K(S) + M_k) */
        double inv_max[8];   /* largest 1 / tau among the splits with a term */
        uint64_t count[8];   /* sums of the count products, 64-bit (sizes <= 18) */
        double map_top;      /* largest MAP term of a split with a term and both
                                children possible, 0 before the first */
        double cut;          /* map_top * cut_factor, or 0 where map_top is not in
                                [1e-290, inf): every such split is a candidate */
        double cut_factor;   /* 1 - the parent's relative slack */
        int any_term;        /* a split with a term and both children possible */
    } sktrellis_ginkgo_acc;

    /* A new MAP term `top` of a split with a term and both children
       possible: raises map_top and the cut. */
    static inline __attribute__((always_inline)) void sktrellis_ginkgo_raise_top(
            sktrellis_ginkgo_acc* acc, double top) {
        if (top > acc->map_top) {
            acc->map_top = top;
            acc->cut = top >= 1e-290 && top < INFINITY ? top * acc->cut_factor : 0.0;
        }
    }

    /* One split: its term (returned), MAP term, 1 / tau (0 if no term) and
       whether it has a term with both children possible (Z > 0). */
    static inline double sktrellis_ginkgo_term(
            const sktrellis_ginkgo_split_record* a, const sktrellis_ginkgo_split_record* b,
            double root_parent, double lam_over_parent, double lam, double f,
            double* map_term, double* inverse, int* alive) {
        int left_heavy = a->root >= b->root;
        double heavy_root = left_heavy ? a->root : b->root;
        double light_root = left_heavy ? b->root : a->root;
        double heavy = heavy_root * heavy_root, light = light_root * light_root;
        double scale = root_parent - heavy_root;
        double tau = scale * scale;
        int has_term = (tau > 0.0) & (light_root > 0.0);
        double inv = has_term ? 1.0 / tau : 0.0;
        double x = -(lam_over_parent * heavy) - lam * light * inv;
        double w = a->u * b->u * f * sktrellis_exp_nonpositive(x) * inv;
        *map_term = w * (a->aux * b->aux);
        *inverse = inv;
        *alive = has_term & (a->u > 0.0) & (b->u > 0.0);
        return w;
    }

    /* n_blocks blocks of a row from the submask *sub of `high` on (left
       at the next one): adds to *acc. The MAP candidates, the splits with
       a term and both children possible whose MAP term is at least the
       cut when met (a superset of those at least the parent's final cut):
       for the k-th block that has one (k from 0, the return value their
       number), cand_sub[k] is its submask and cand_terms[k * lanes +
       lane] the MAP term of each lane that is a candidate, -1 for the
       others. f is indexed by |A|. */
    static int sktrellis_ginkgo_row_portable(
            const sktrellis_ginkgo_split_record* rec, int with_count, uint32_t parent,
            uint32_t left_base, const uint32_t* q, int lanes, uint32_t high, uint32_t* sub,
            int n_blocks, double root_parent, double lam_over_parent, double lam,
            const double* f, sktrellis_ginkgo_acc* acc, uint32_t* cand_sub,
            double* cand_terms) {
        double total = 0.0, inv_max = acc->inv_max[0], v, inv, top;
        uint64_t products = 0;
        int block, lane, alive, any = 0, n_cand = 0, hit;
        uint32_t s = *sub, left;
        for (block = 0; block < n_blocks; block++) {
            hit = 0;
            top = -1.0;
            for (lane = 0; lane < lanes; lane++) {
                left = left_base | s | q[lane];
                total += sktrellis_ginkgo_term(rec + left, rec + (parent ^ left), root_parent,
                                               lam_over_parent, lam,
                                               f[__builtin_popcount(left)], &v, &inv, &alive);
                cand_terms[n_cand * lanes + lane] = -1.0;
                if (alive) {
                    any = 1;
                    if (v >= acc->cut) {
                        cand_terms[n_cand * lanes + lane] = v;
                        top = v > top ? v : top;
                        hit = 1;
                    }
                }
                inv_max = inv > inv_max ? inv : inv_max;
                if (with_count && inv != 0.0)
                    products += rec[left].count * rec[parent ^ left].count;
            }
            if (hit) {
                sktrellis_ginkgo_raise_top(acc, top);
                cand_sub[n_cand++] = s;
            }
            s = (s - high) & high;
        }
        *sub = s;
        acc->total[0] += total;
        acc->inv_max[0] = inv_max;
        acc->count[0] += products;
        acc->any_term |= any;
        return n_cand;
    }

    /* The same blocks' count products in 128 bits, added to count[parent]
       (parents of more than 18 points): the splits with a term (tau > 0 and
       a lighter child of mass > 0), by the same arithmetic. */
    static void sktrellis_ginkgo_row_count128(
            const sktrellis_ginkgo_split_record* rec, uint64_t* count, uint32_t parent,
            uint32_t left_base, const uint32_t* q, int lanes, uint32_t high, uint32_t sub,
            int n_blocks, double root_parent, double lam_over_parent, double lam) {
        unsigned __int128 acc = ((unsigned __int128)count[2 * (size_t)parent + 1] << 64)
                                | count[2 * (size_t)parent];
        double heavy_root, light_root, scale;
        int block, lane;
        uint32_t left;
        (void)lam_over_parent;
        (void)lam;
        for (block = 0; block < n_blocks; block++) {
            for (lane = 0; lane < lanes; lane++) {
                left = left_base | sub | q[lane];
                /* has_term of sktrellis_ginkgo_term, without the term. */
                heavy_root = rec[left].root >= rec[parent ^ left].root
                    ? rec[left].root : rec[parent ^ left].root;
                light_root = rec[left].root >= rec[parent ^ left].root
                    ? rec[parent ^ left].root : rec[left].root;
                scale = root_parent - heavy_root;
                if (scale * scale > 0.0 && light_root > 0.0) {
                    const uint64_t* a = count + 2 * (size_t)left;
                    const uint64_t* b = count + 2 * (size_t)(parent ^ left);
                    acc += (((unsigned __int128)a[1] << 64) | a[0])
                           * (((unsigned __int128)b[1] << 64) | b[0]);
                }
            }
            sub = (sub - high) & high;
        }
        count[2 * (size_t)parent] = (uint64_t)acc;
        count[2 * (size_t)parent + 1] = (uint64_t)(acc >> 64);
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

    /* sktrellis_ginkgo_sum (below), portable. */
    SKTRELLIS_VECTOR_CLONES static double sktrellis_ginkgo_sum_portable(
            const double* exponent, const double* inverse, int n, double scale) {
        double sum = 0.0;
        int j;
        #pragma omp simd reduction(+:sum)
        for (j = 0; j < n; j++)
            sum += sktrellis_exp_nonpositive(exponent[j] - scale) * inverse[j];
        return sum;
    }

    /* The inside pass's splits of a parent (root root_parent) into a
       massless single particle and the rest, heavy[j] (j < n): the linear
       term f u(B) exp(-lam_over_parent t_B) (1 - y) inv_lam, y =
       exp(-lam_t_cut / tau), tau = (root_parent - sqrt t_B)**2, in
       term[j], or -1 where the caller evaluates the split by libm's exp
       (`ginkgo_finish`). By the plain-arithmetic exp (within 2 ulp) only
       where y <= exp(-1/16): 1 - y then within 4e-15 relative of 1 - libm's
       exp, and below 1 as libm's, so the split has a term exactly when the
       log-space formula's log1p(-y) is finite (c = inf, tau subnormal, gives
       y = 0 as libm's). Where y is closer to 1 the relative difference of
       1 - y is no longer small (the terms must agree with the log-space MAP
       re-evaluation within MAP_CANDIDATE_SLACK), and where the other
       exponent is below -700 the two exps differ below the smallest normal
       double: libm's there. */
    SKTRELLIS_VECTOR_CLONES static void sktrellis_ginkgo_leaf_terms_portable(
            const sktrellis_ginkgo_split_record* rec, const uint32_t* heavy, int n,
            double root_parent, double lam_t_cut, double lam_over_parent, double f,
            double inv_lam, double* term) {
        int j;
        #pragma omp simd
        for (j = 0; j < n; j++) {
            const sktrellis_ginkgo_split_record* h = rec + heavy[j];
            double scale = root_parent - h->root;
            double tau = scale * scale;
            double c = lam_t_cut / tau;
            double x = -(lam_over_parent * (h->root * h->root));
            int fast = (tau > 0.0) & (c >= 0.0625) & (x >= -700.0);
            double y = sktrellis_exp_nonpositive(fast ? -c : 0.0);
            double e = sktrellis_exp_nonpositive(fast ? x : 0.0);
            term[j] = fast ? f * h->u * e * (1.0 - y) * inv_lam : -1.0;
        }
    }

    /* The outside pass's terms of a massive cluster C (t_cluster,
       root_cluster) beside a massless single particle leaf[j] (j < n),
       parent P = C | leaf[j]: O(P) psi(P; C, leaf) = exp(exponent[j])
       factor[j], exponent = aux(P) - lam t_C / t(P) (aux = log O + K, as
       sktrellis_ginkgo_outside_exponents reads it) and factor = (1 - y) /
       lam, y = exp(-lam_t_cut / tau), tau = (sqrt t(P) - sqrt t_C)**2; or
       factor -1 where the caller takes y from libm (y above exp(-1/16) or
       tau <= 0: see sktrellis_ginkgo_leaf_terms). */
    SKTRELLIS_VECTOR_CLONES static void sktrellis_ginkgo_outside_leaf_terms(
            const sktrellis_ginkgo_record* rec, uint32_t cluster, double t_cluster,
            double root_cluster, const uint32_t* leaf, int n, double lam, double lam_t_cut,
            double inv_lam, double* exponent, double* factor) {
        int j;
        #pragma omp simd
        for (j = 0; j < n; j++) {
            const sktrellis_ginkgo_record* p = rec + (cluster | leaf[j]);
            double scale = p->root - root_cluster;
            double tau = scale * scale;
            double c = lam_t_cut / tau;
            int fast = (tau > 0.0) & (c >= 0.0625);
            double y = sktrellis_exp_nonpositive(fast ? -c : 0.0);
            exponent[j] = p->aux - lam * t_cluster / p->mass2;
            factor[j] = fast ? (1.0 - y) * inv_lam : -1.0;
        }
    }
    #pragma GCC pop_options

    /* The passes read two 32-byte records per split at scattered
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
    /* The fields of four records, 4 lanes each. */
    __attribute__((target("avx2"))) static inline void sktrellis_ginkgo_load4p(
            const sktrellis_ginkgo_record* p0, const sktrellis_ginkgo_record* p1,
            const sktrellis_ginkgo_record* p2, const sktrellis_ginkgo_record* p3,
            __m256d* mass2, __m256d* root, __m256d* log_z, __m256d* aux) {
        const double* r0 = (const double*)p0;
        const double* r1 = (const double*)p1;
        const double* r2 = (const double*)p2;
        const double* r3 = (const double*)p3;
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

    /* Fields of the records rec[i[0..3]]: (t, sqrt t, log Z, aux). */
    __attribute__((target("avx2"))) static inline void sktrellis_ginkgo_load4(
            const sktrellis_ginkgo_record* rec, const uint32_t* i, __m256d* mass2,
            __m256d* root, __m256d* log_z, __m256d* aux) {
        sktrellis_ginkgo_load4p(rec + i[0], rec + i[1], rec + i[2], rec + i[3], mass2, root,
                                log_z, aux);
    }

    /* exp(x) for x <= 0, four lanes: sktrellis_exp_nonpositive's range
       reduction with fused multiply-adds, within rounding of it. */
    __attribute__((target("avx2,fma"))) static inline __m256d sktrellis_exp_nonpositive4(
            __m256d x) {
        const __m256d floor = _mm256_set1_pd(-708.0), shifter = _mm256_set1_pd(0x1.8p52);
        __m256d keep = _mm256_cmp_pd(x, floor, _CMP_GT_OQ);
        __m256d y = _mm256_max_pd(x, floor);
        __m256d k = _mm256_fmadd_pd(y, _mm256_set1_pd(0x1.71547652b82fep0), shifter);
        __m256d n = _mm256_sub_pd(k, shifter);
        __m256d r = _mm256_fnmadd_pd(n, _mm256_set1_pd(0x1.62e42fee00000p-1), y);
        r = _mm256_fnmadd_pd(n, _mm256_set1_pd(0x1.a39ef35793c76p-33), r);
        /* exp(r), |r| <= ln(2) / 2, by its degree-12 Taylor polynomial
           (truncation error < 2e-16) in Estrin's scheme: a chain of 4
           multiply-adds after r**8 rather than Horner's 12 (the pass waits
           on this latency). */
    #define SKTRELLIS_C(k) _mm256_set1_pd(k)
        __m256d r2 = _mm256_mul_pd(r, r), r4 = _mm256_mul_pd(r2, r2);
        __m256d r8 = _mm256_mul_pd(r4, r4);
        __m256d p01 = _mm256_add_pd(SKTRELLIS_C(1.0), r);
        __m256d p23 = _mm256_fmadd_pd(SKTRELLIS_C(1.0 / 6.0), r, SKTRELLIS_C(0.5));
        __m256d p45 = _mm256_fmadd_pd(SKTRELLIS_C(1.0 / 120.0), r, SKTRELLIS_C(1.0 / 24.0));
        __m256d p67 = _mm256_fmadd_pd(SKTRELLIS_C(1.0 / 5040.0), r, SKTRELLIS_C(1.0 / 720.0));
        __m256d p89 = _mm256_fmadd_pd(SKTRELLIS_C(1.0 / 362880.0), r,
                                      SKTRELLIS_C(1.0 / 40320.0));
        __m256d p1011 = _mm256_fmadd_pd(SKTRELLIS_C(1.0 / 39916800.0), r,
                                        SKTRELLIS_C(1.0 / 3628800.0));
        __m256d q0 = _mm256_fmadd_pd(p23, r2, p01), q1 = _mm256_fmadd_pd(p67, r2, p45);
        __m256d q2 = _mm256_fmadd_pd(p1011, r2, p89);
        __m256d s0 = _mm256_fmadd_pd(q1, r4, q0);
        __m256d s1 = _mm256_fmadd_pd(SKTRELLIS_C(1.0 / 479001600.0), r4, q2);
        __m256d p = _mm256_fmadd_pd(s1, r8, s0);
    #undef SKTRELLIS_C
        __m256i bits = _mm256_slli_epi64(
            _mm256_add_epi64(_mm256_castpd_si256(k), _mm256_set1_epi64x(1023)), 52);
        return _mm256_and_pd(keep, _mm256_mul_pd(p, _mm256_castsi256_pd(bits)));
    }

    /* sktrellis_ginkgo_row_portable for rows of two or more free points
       (lanes (0, b1, b2, b1 | b2)): the four splits of a block read their
       records at constant offsets from the first split's, and the four
       count products go to a vector sum. */
    __attribute__((target("avx2,fma"))) static int sktrellis_ginkgo_row_avx2(
            const sktrellis_ginkgo_split_record* rec, int with_count, uint32_t parent,
            uint32_t left_base, uint32_t b1, uint32_t b2, uint32_t high, uint32_t* sub,
            int n_blocks, double root_parent, double lam_over_parent, double lam,
            const double* f, sktrellis_ginkgo_acc* acc, uint32_t* cand_sub,
            double* cand_terms) {
        const __m256d zero = _mm256_setzero_pd(), one = _mm256_set1_pd(1.0);
        const __m256d minus_one = _mm256_set1_pd(-1.0);
        const __m256d v_root = _mm256_set1_pd(root_parent);
        const __m256d v_lop = _mm256_set1_pd(lam_over_parent), v_lam = _mm256_set1_pd(lam);
        const size_t o1 = b1, o2 = b2, o3 = (size_t)b1 + b2;
        const int base_count = __builtin_popcount(left_base);
        __m256d total = _mm256_loadu_pd(acc->total), inv_top = _mm256_loadu_pd(acc->inv_max);
        __m256d alive_any = zero, v_cut = _mm256_set1_pd(acc->cut);
        __m256i products = _mm256_loadu_si256((const __m256i*)acc->count);
        double lanes[4], best;
        uint32_t s = *sub;
        int block, k, n_cand = 0;
        for (block = 0; block < n_blocks; block++) {
            uint32_t a0 = left_base | s, c0 = parent ^ a0;
            const sktrellis_ginkgo_split_record* pa = rec + a0;
            const sktrellis_ginkgo_split_record* pb = rec + c0;
            __m256d ra, ua, xa, ca, rb, ub, xb, cb;
            /* B = parent ^ A: the lane bits are set in c0, so clearing
               them is a subtraction. */
            sktrellis_ginkgo_load4p((const sktrellis_ginkgo_record*)pa,
                                    (const sktrellis_ginkgo_record*)(pa + o1),
                                    (const sktrellis_ginkgo_record*)(pa + o2),
                                    (const sktrellis_ginkgo_record*)(pa + o3), &ra, &ua, &xa, &ca);
            sktrellis_ginkgo_load4p((const sktrellis_ginkgo_record*)pb,
                                    (const sktrellis_ginkgo_record*)(pb - o1),
                                    (const sktrellis_ginkgo_record*)(pb - o2),
                                    (const sktrellis_ginkgo_record*)(pb - o3), &rb, &ub, &xb, &cb);
            (void)ca;
            (void)cb;
            __m256d fv = _mm256_permute4x64_pd(
                _mm256_loadu_pd(f + base_count + __builtin_popcount(s)), 0x94);
            __m256d left_heavy = _mm256_cmp_pd(ra, rb, _CMP_GE_OQ);
            __m256d heavy_root = _mm256_blendv_pd(rb, ra, left_heavy);
            __m256d light_root = _mm256_blendv_pd(ra, rb, left_heavy);
            __m256d heavy = _mm256_mul_pd(heavy_root, heavy_root);
            __m256d light = _mm256_mul_pd(light_root, light_root);
            __m256d scale = _mm256_sub_pd(v_root, heavy_root);
            __m256d tau = _mm256_mul_pd(scale, scale);
            __m256d has_term = _mm256_and_pd(_mm256_cmp_pd(tau, zero, _CMP_GT_OQ),
                                             _mm256_cmp_pd(light_root, zero, _CMP_GT_OQ));
            __m256d inv = _mm256_and_pd(has_term, _mm256_div_pd(one, tau));
            __m256d x = _mm256_sub_pd(_mm256_sub_pd(zero, _mm256_mul_pd(v_lop, heavy)),
                                      _mm256_mul_pd(_mm256_mul_pd(v_lam, light), inv));
            __m256d w = _mm256_mul_pd(
                _mm256_mul_pd(_mm256_mul_pd(ua, ub), fv),
                _mm256_mul_pd(sktrellis_exp_nonpositive4(x), inv));
            __m256d v = _mm256_mul_pd(w, _mm256_mul_pd(xa, xb));
            __m256d alive = _mm256_and_pd(
                has_term, _mm256_and_pd(_mm256_cmp_pd(ua, zero, _CMP_GT_OQ),
                                        _mm256_cmp_pd(ub, zero, _CMP_GT_OQ)));
            __m256d cand = _mm256_and_pd(alive, _mm256_cmp_pd(v, v_cut, _CMP_GE_OQ));
            total = _mm256_add_pd(total, w);
            inv_top = _mm256_max_pd(inv_top, inv);
            alive_any = _mm256_or_pd(alive_any, alive);
            if (__builtin_expect(_mm256_movemask_pd(cand) != 0, 0)) {
                _mm256_storeu_pd(lanes, _mm256_blendv_pd(minus_one, v, cand));
                best = lanes[0];
                for (k = 1; k < 4; k++)
                    best = lanes[k] > best ? lanes[k] : best;
                sktrellis_ginkgo_raise_top(acc, best);
                v_cut = _mm256_set1_pd(acc->cut);
                _mm256_storeu_pd(cand_terms + 4 * n_cand, _mm256_blendv_pd(minus_one, v, cand));
                cand_sub[n_cand++] = s;
            }
            if (with_count) {
                __m256i product = _mm256_set_epi64x(
                    (long long)(pa[o3].count * pb[-(ptrdiff_t)o3].count),
                    (long long)(pa[o2].count * pb[-(ptrdiff_t)o2].count),
                    (long long)(pa[o1].count * pb[-(ptrdiff_t)o1].count),
                    (long long)(pa[0].count * pb[0].count));
                products = _mm256_add_epi64(
                    products, _mm256_and_si256(product, _mm256_castpd_si256(has_term)));
            }
            s = (s - high) & high;
        }
        *sub = s;
        _mm256_storeu_pd(acc->total, total);
        _mm256_storeu_pd(acc->inv_max, inv_top);
        _mm256_storeu_si256((__m256i*)acc->count, products);
        acc->any_term |= _mm256_movemask_pd(alive_any) != 0;
        return n_cand;
    }


    /* Eight lanes on x86-64 with AVX-512 (F, DQ): the blocks of eight
       splits of rows of three or more free points, lanes (0, b1, b2,
       b1 | b2, b3, ...), the three lowest free points deposited in
       increasing order; the block's values fit the 32 registers (gcc
       still reloads a few constants and pointers from the stack each
       block: removing such scalar work gained nothing, the loop being
       bound by each block's chain). */
    #define SKTRELLIS_GINKGO_AVX512 1
    #define SKTRELLIS_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,fma")))
    /* 2**(j / 16), j = 0..7 and 8..15, the exps' table: one
       _mm512_permutex2var_pd of the two picks 2**(j / 16) for j = k & 15. */
    #define SKTRELLIS_EXP2_SIXTEENTHS_LOW _mm512_set_pd( \
        0x1.5ab07dd485429p+0, 0x1.4bfdad5362a27p+0, 0x1.3dea64c123422p+0, \
        0x1.306fe0a31b715p+0, 0x1.2387a6e756238p+0, 0x1.172b83c7d517bp+0, \
        0x1.0b5586cf9890fp+0, 0x1.0000000000000p+0)
    #define SKTRELLIS_EXP2_SIXTEENTHS_HIGH _mm512_set_pd( \
        0x1.ea4afa2a490dap+0, 0x1.d5818dcfba487p+0, 0x1.c199bdd85529cp+0, \
        0x1.ae89f995ad3adp+0, 0x1.9c49182a3f090p+0, 0x1.8ace5422aa0dbp+0, \
        0x1.7a11473eb0187p+0, 0x1.6a09e667f3bcdp+0)
    /* exp(x) for x <= 0, eight lanes: 2**(n + j / 16) exp(r), |r| <=
       ln(2) / 32, 2**(j / 16) from a 16-entry table held in two registers
       (one permute), exp(r) - 1 by its degree-7 Taylor polynomial
       (truncation error < 2e-18) in Estrin's scheme: within 2 ulp of exp
       (1.0 measured over 4e6 points in [-708, 0]), 0 at or below -708, as
       sktrellis_exp_nonpositive. */
    SKTRELLIS_AVX512 static inline __m512d sktrellis_exp_nonpositive8(__m512d x) {
        const __m512d table_low = SKTRELLIS_EXP2_SIXTEENTHS_LOW;
        const __m512d table_high = SKTRELLIS_EXP2_SIXTEENTHS_HIGH;
        const __m512d floor = _mm512_set1_pd(-708.0), shifter = _mm512_set1_pd(0x1.8p52);
        __mmask8 keep = _mm512_cmp_pd_mask(x, floor, _CMP_GT_OQ);
        __m512d y = _mm512_max_pd(x, floor);
        /* k = round(16 y / ln 2) in the low bits of kf: n = k >> 4, j = k & 15. */
        __m512d kf = _mm512_fmadd_pd(y, _mm512_set1_pd(0x1.71547652b82fep+4), shifter);
        __m512d k = _mm512_sub_pd(kf, shifter);
        __m512d r = _mm512_fnmadd_pd(k, _mm512_set1_pd(0x1.62e42fee00000p-5), y);
        r = _mm512_fnmadd_pd(k, _mm512_set1_pd(0x1.a39ef35793c76p-37), r);
        __m512i bits = _mm512_castpd_si512(kf);
        __m512d power = _mm512_permutex2var_pd(table_low, bits, table_high);
    #define SKTRELLIS_C(k) _mm512_set1_pd(k)
        /* exp(r) - 1, small, then power * (1 + it) with a single rounding. */
        __m512d r2 = _mm512_mul_pd(r, r), r4 = _mm512_mul_pd(r2, r2);
        __m512d p23 = _mm512_fmadd_pd(SKTRELLIS_C(1.0 / 6.0), r, SKTRELLIS_C(0.5));
        __m512d p45 = _mm512_fmadd_pd(SKTRELLIS_C(1.0 / 120.0), r, SKTRELLIS_C(1.0 / 24.0));
        __m512d p67 = _mm512_fmadd_pd(SKTRELLIS_C(1.0 / 5040.0), r, SKTRELLIS_C(1.0 / 720.0));
        __m512d q = _mm512_fmadd_pd(_mm512_fmadd_pd(p67, r2, p45), r4,
                                    _mm512_fmadd_pd(p23, r2, r));
    #undef SKTRELLIS_C
        __m512i scale = _mm512_slli_epi64(
            _mm512_add_epi64(_mm512_srli_epi64(bits, 4), _mm512_set1_epi64(1023)), 52);
        return _mm512_maskz_mul_pd(keep, _mm512_fmadd_pd(power, q, power),
                                   _mm512_castsi512_pd(scale));
    }

    /* exp(x) for x <= 0, eight lanes, from y = 16 x / ln 2 (the caller
       scales x's factors by 16 / ln 2 instead): 2**(n + j / 16) exp(r),
       n + j / 16 = round(y) / 16, r = (y - round(y)) ln 2 / 16. The table
       and polynomial of sktrellis_exp_nonpositive8, but its range reduction
       is a rounding and a subtraction (y - round(y) is exact) instead of
       three fused multiply-adds, exp(r) - 1 a polynomial in y - round(y)
       (the Taylor coefficients times powers of ln 2 / 16), and 2**n
       formed beside the polynomial. Within 2 ulp of exp(y ln 2 / 16) (1.0
       measured over 4e6 points); 0 at or below y = 16 (-708) / ln 2. The
       row's block loop is bound by the latency of each block's chain
       (loads, division, exp: C timings of the row alone, the exp's
       polynomial shortened by two steps gains 3 %, four independent
       multiply-adds added cost 1 %), so this shorter chain is what pays. */
    SKTRELLIS_AVX512 static inline __m512d sktrellis_exp_scaled8(__m512d y) {
        const __m512d table_low = SKTRELLIS_EXP2_SIXTEENTHS_LOW;
        const __m512d table_high = SKTRELLIS_EXP2_SIXTEENTHS_HIGH;
        const __m512d floor = _mm512_set1_pd(-708.0 * 0x1.71547652b82fep+4);
        const __m512d shifter = _mm512_set1_pd(0x1.8p52);
        __mmask8 keep = _mm512_cmp_pd_mask(y, floor, _CMP_GT_OQ);
        /* k = round(y), d = y - k, n = floor(k / 16) and j = k - 16 n, the
           last in the low bits of kf (round to nearest even, as k). The lanes
           at or below the floor (-inf and NaN among them) make garbage here
           and are masked at the end. */
        __m512d k = _mm512_roundscale_pd(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m512d d = _mm512_sub_pd(y, k);
        __m512d n = _mm512_roundscale_pd(_mm512_mul_pd(k, _mm512_set1_pd(0.0625)),
                                         _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
        __m512d kf = _mm512_add_pd(y, shifter);
        __m512d power = _mm512_permutex2var_pd(table_low, _mm512_castpd_si512(kf), table_high);
    #define SKTRELLIS_C(k) _mm512_set1_pd(k)
        /* exp(c d) - 1, c = ln 2 / 16, |d| <= 1/2, degree 7 (truncation
           error < 2e-18): coefficients c**i / i!, in Estrin's scheme. */
        __m512d d2 = _mm512_mul_pd(d, d), d4 = _mm512_mul_pd(d2, d2);
        __m512d p01 = _mm512_mul_pd(SKTRELLIS_C(0x1.62e42fefa39efp-5), d);
        __m512d p23 = _mm512_fmadd_pd(SKTRELLIS_C(0x1.c6b08d704a0c0p-17), d,
                                      SKTRELLIS_C(0x1.ebfbdff82c58fp-11));
        __m512d p45 = _mm512_fmadd_pd(SKTRELLIS_C(0x1.5d87fe78a6731p-30), d,
                                      SKTRELLIS_C(0x1.3b2ab6fba4e77p-23));
        __m512d p67 = _mm512_fmadd_pd(SKTRELLIS_C(0x1.ffcbfc588b0c7p-45), d,
                                      SKTRELLIS_C(0x1.430912f86c787p-37));
        __m512d q = _mm512_fmadd_pd(_mm512_fmadd_pd(p67, d2, p45), d4,
                                    _mm512_fmadd_pd(p23, d2, p01));
    #undef SKTRELLIS_C
        /* 2**(n + j / 16) formed while q is, one step after it (n >= -1022
           above the floor: exact). */
        __m512d power_scale = _mm512_scalef_pd(power, n);
        return _mm512_maskz_fmadd_pd(keep, power_scale, q, power_scale);
    }

    /* The fields of eight records, 8 lanes each: lane k from p[k & 3] (k < 4)
       or q[k & 3] (k >= 4), each record one 32-byte load, two per register,
       then unpacks and cross-lane permutes. */
    SKTRELLIS_AVX512 static inline void sktrellis_ginkgo_load8(
            const char* p0, const char* p1, const char* p2, const char* p3, const char* q0,
            const char* q1, const char* q2, const char* q3, __m512d* root, __m512d* u,
            __m512d* aux, __m512d* count) {
        const __m512i even = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0);
        const __m512i odd = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
        __m512d z0 = _mm512_insertf64x4(
            _mm512_castpd256_pd512(_mm256_loadu_pd((const double*)p0)),
            _mm256_loadu_pd((const double*)q0), 1);
        __m512d z1 = _mm512_insertf64x4(
            _mm512_castpd256_pd512(_mm256_loadu_pd((const double*)p1)),
            _mm256_loadu_pd((const double*)q1), 1);
        __m512d z2 = _mm512_insertf64x4(
            _mm512_castpd256_pd512(_mm256_loadu_pd((const double*)p2)),
            _mm256_loadu_pd((const double*)q2), 1);
        __m512d z3 = _mm512_insertf64x4(
            _mm512_castpd256_pd512(_mm256_loadu_pd((const double*)p3)),
            _mm256_loadu_pd((const double*)q3), 1);
        /* t0 = (r0 r1 x0 x1 r4 r5 x4 x5), t1 = (u0 u1 c0 c1 u4 u5 c4 c5), t2
           and t3 the same for records 2, 3, 6, 7. */
        __m512d t0 = _mm512_unpacklo_pd(z0, z1), t1 = _mm512_unpackhi_pd(z0, z1);
        __m512d t2 = _mm512_unpacklo_pd(z2, z3), t3 = _mm512_unpackhi_pd(z2, z3);
        *root = _mm512_permutex2var_pd(t0, even, t2);
        *aux = _mm512_permutex2var_pd(t0, odd, t2);
        *u = _mm512_permutex2var_pd(t1, even, t3);
        *count = _mm512_permutex2var_pd(t1, odd, t3);
    }

    /* The fields of the block at byte offset `offset` of a row (see
       sktrellis_ginkgo_row_avx512): A's from a_first + offset, B's from
       b_first - offset. */
    SKTRELLIS_AVX512 static inline void sktrellis_ginkgo_load_block(
            const char* a_first, const char* a_first4, const char* b_first,
            const char* b_first4, size_t o1, size_t o2, size_t o12, size_t offset,
            __m512d* ra, __m512d* ua, __m512d* xa, __m512d* ca, __m512d* rb, __m512d* ub,
            __m512d* xb, __m512d* cb) {
        const char* a = a_first + offset;
        const char* a4 = a_first4 + offset;
        const char* b = b_first - offset;
        const char* b4 = b_first4 - offset;
        sktrellis_ginkgo_load8(a, a + o1, a + o2, a + o12, a4, a4 + o1, a4 + o2, a4 + o12,
                               ra, ua, xa, ca);
        sktrellis_ginkgo_load8(b4 + o12, b4 + o2, b4 + o1, b4, b + o12, b + o2, b + o1, b,
                               rb, ub, xb, cb);
    }

    /* sktrellis_ginkgo_row_portable for the eight-lane blocks. The block's
       addresses come from one byte offset: lane k of a block is the split
       (A, B) = (a0 + q[k], c0 - q[k]), a0 = left_base + s, c0 = (parent ^
       left_base) - s, so with S = 32 s (the submask walk (s - high) & high
       holds for S and 32 high alike) A's records are at a + q[k] and B's
       at b - q[k], a and b the row's first pair plus and minus S. B's
       eight are read from its lowest, c0 - q[7], up: c0 - q[k] = (c0 -
       q[7]) + q[7 - k], the same positive offsets as A's, taken in the
       other order (so that the same transpose gives the same lanes). This
       leaves one offset to advance a block (the address arithmetic held 36
       scalar instructions of 124 a block; 3-4 % faster at rows of 8 blocks
       once the chain was shorter, no change before). The walk and the
       popcount on byte offsets need the record's size to be a power of
       two (checked where the record is defined). */
    SKTRELLIS_AVX512 static int sktrellis_ginkgo_row_avx512(
            const sktrellis_ginkgo_split_record* rec, int with_count, uint32_t parent,
            uint32_t left_base, const uint32_t* q, uint32_t high, uint32_t* sub,
            int n_blocks, double root_parent, double lam_over_parent, double lam,
            const double* f, sktrellis_ginkgo_acc* acc, uint32_t* cand_sub,
            double* cand_terms) {
        const __m512d zero = _mm512_setzero_pd(), one = _mm512_set1_pd(1.0);
        const __m512d minus_one = _mm512_set1_pd(-1.0);
        const __m512d v_root = _mm512_set1_pd(root_parent);
        /* lam / t(S) and lam times 16 / ln 2 (sktrellis_exp_scaled8). */
        const __m512d v_lop16 = _mm512_set1_pd(lam_over_parent * 0x1.71547652b82fep+4);
        const __m512d v_lam16 = _mm512_set1_pd(lam * 0x1.71547652b82fep+4);
        const size_t record = sizeof(sktrellis_ginkgo_split_record);
        const size_t o1 = record * q[1], o2 = record * q[2], o12 = record * q[3];
        const size_t o4 = record * q[4];
        const char* a_first = (const char*)(rec + left_base);
        const char* a_first4 = a_first + o4;
        /* c0 - q[7] and c0 - q[3] at s = 0. */
        const char* b_first = (const char*)(rec + (parent ^ left_base)) - o4 - o12;
        const char* b_first4 = b_first + o4;
        const double* fs = f + SKTRELLIS_GINKGO_SIZE_FACTORS
                           + 8 * __builtin_popcount(left_base);
        const size_t walk = record * high;
        __m512d total = _mm512_loadu_pd(acc->total), inv_top = _mm512_loadu_pd(acc->inv_max);
        __m512d v_cut = _mm512_set1_pd(acc->cut), alive_any = zero;
        size_t offset = record * *sub;
        int block, n_cand = 0;
        __m512i count_sum = _mm512_loadu_si512(acc->count);
        __m512d ra, ua, xa, ca, rb, ub, xb, cb;
        /* The records of each block are read one block ahead, while the
           block before runs: the loop is bound by each block's chain, of
           which the loads and transposes are the first part (C timings of
           the row alone 5-10 % faster, the whole N = 18 pass 3 %). The block
           after the last is read too (the walk goes on within the row, or
           back to its first). */
        sktrellis_ginkgo_load_block(a_first, a_first4, b_first, b_first4, o1, o2, o12,
                                    offset, &ra, &ua, &xa, &ca, &rb, &ub, &xb, &cb);
        for (block = 0; block < n_blocks; block++) {
            const size_t next = (offset - walk) & walk;
            __m512d ra_next, ua_next, xa_next, ca_next, rb_next, ub_next, xb_next, cb_next;
            sktrellis_ginkgo_load_block(a_first, a_first4, b_first, b_first4, o1, o2, o12,
                                        next, &ra_next, &ua_next, &xa_next, &ca_next,
                                        &rb_next, &ub_next, &xb_next, &cb_next);
            __m512d fv = _mm512_loadu_pd(fs + 8 * __builtin_popcountll(offset));
            /* The roots are at least 0, never NaN: the larger is the heavier
               child's (either one where they are equal), with no compare. */
            __m512d heavy_root = _mm512_max_pd(ra, rb);
            __m512d light_root = _mm512_min_pd(ra, rb);
            __m512d scale = _mm512_sub_pd(v_root, heavy_root);
            __m512d tau = _mm512_mul_pd(scale, scale);
            /* The division starts as soon as tau is known, the lanes without a
               term masked where its result is used (its 1 / 0 = inf, or its
               lighter child's 0 t times that, only reaches the exp, which
               gives 0 for -inf and NaN). */
            __m512d inverse = _mm512_div_pd(one, tau);
            __mmask8 has_term = _mm512_mask_cmp_pd_mask(
                _mm512_cmp_pd_mask(tau, zero, _CMP_GT_OQ), light_root, zero, _CMP_GT_OQ);
            __m512d heavy = _mm512_mul_pd(heavy_root, heavy_root);
            __m512d light = _mm512_mul_pd(light_root, light_root);
            /* 16 / ln 2 times -lam t_heavy / t(S) - lam t_light / tau. */
            __m512d y = _mm512_fnmadd_pd(_mm512_mul_pd(v_lam16, light), inverse,
                                         _mm512_fnmadd_pd(v_lop16, heavy, zero));
            /* The exp's one multiply by what is known before it. */
            __m512d w = _mm512_mul_pd(
                sktrellis_exp_scaled8(y),
                _mm512_maskz_mul_pd(has_term, _mm512_mul_pd(_mm512_mul_pd(ua, ub), fv), inverse));
            __m512d v = _mm512_mul_pd(w, _mm512_mul_pd(xa, xb));
            __mmask8 alive = _mm512_mask_cmp_pd_mask(has_term, _mm512_min_pd(ua, ub), zero,
                                                     _CMP_GT_OQ);
            __mmask8 cand = _mm512_mask_cmp_pd_mask(alive, v, v_cut, _CMP_GE_OQ);
            total = _mm512_add_pd(total, w);
            inv_top = _mm512_mask_max_pd(inv_top, has_term, inv_top, inverse);
            alive_any = _mm512_mask_mov_pd(alive_any, alive, one);
            if (__builtin_expect(cand != 0, 0)) {
                sktrellis_ginkgo_raise_top(acc, _mm512_mask_reduce_max_pd(cand, v));
                v_cut = _mm512_set1_pd(acc->cut);
                _mm512_storeu_pd(cand_terms + 8 * n_cand,
                                 _mm512_mask_blend_pd(cand, minus_one, v));
                cand_sub[n_cand++] = (uint32_t)(offset / record);
            }
            if (with_count)
                count_sum = _mm512_mask_add_epi64(
                    count_sum, has_term, count_sum,
                    _mm512_mullo_epi64(_mm512_castpd_si512(ca), _mm512_castpd_si512(cb)));
            offset = next;
            ra = ra_next, ua = ua_next, xa = xa_next, ca = ca_next;
            rb = rb_next, ub = ub_next, xb = xb_next, cb = cb_next;
        }
        *sub = (uint32_t)(offset / record);
        _mm512_storeu_pd(acc->total, total);
        _mm512_storeu_pd(acc->inv_max, inv_top);
        _mm512_storeu_si512(acc->count, count_sum);
        acc->any_term |= _mm512_cmp_pd_mask(alive_any, zero, _CMP_GT_OQ) != 0;
        return n_cand;
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

    /* The fields of the records p[k], k < 8, 8 lanes each (as
       sktrellis_ginkgo_load8, at any addresses). */
    SKTRELLIS_AVX512 static inline void sktrellis_ginkgo_gather8(
            const sktrellis_ginkgo_record* const* p, __m512d* f0, __m512d* f1, __m512d* f2,
            __m512d* f3) {
        const __m512i even = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0);
        const __m512i odd = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
        __m512d z0 = _mm512_insertf64x4(
            _mm512_castpd256_pd512(_mm256_loadu_pd((const double*)p[0])),
            _mm256_loadu_pd((const double*)p[4]), 1);
        __m512d z1 = _mm512_insertf64x4(
            _mm512_castpd256_pd512(_mm256_loadu_pd((const double*)p[1])),
            _mm256_loadu_pd((const double*)p[5]), 1);
        __m512d z2 = _mm512_insertf64x4(
            _mm512_castpd256_pd512(_mm256_loadu_pd((const double*)p[2])),
            _mm256_loadu_pd((const double*)p[6]), 1);
        __m512d z3 = _mm512_insertf64x4(
            _mm512_castpd256_pd512(_mm256_loadu_pd((const double*)p[3])),
            _mm256_loadu_pd((const double*)p[7]), 1);
        __m512d t0 = _mm512_unpacklo_pd(z0, z1), t1 = _mm512_unpackhi_pd(z0, z1);
        __m512d t2 = _mm512_unpacklo_pd(z2, z3), t3 = _mm512_unpackhi_pd(z2, z3);
        *f0 = _mm512_permutex2var_pd(t0, even, t2);
        *f2 = _mm512_permutex2var_pd(t0, odd, t2);
        *f1 = _mm512_permutex2var_pd(t1, even, t3);
        *f3 = _mm512_permutex2var_pd(t1, odd, t3);
    }

    /* sktrellis_ginkgo_outside_exponents_avx2, eight lanes. */
    SKTRELLIS_AVX512 static double sktrellis_ginkgo_outside_exponents_avx512(
            const sktrellis_ginkgo_record* rec, uint32_t cluster, double t_cluster,
            double root_cluster, uint32_t sibling_high, const uint32_t* others, int n,
            double lam, double* exponent, double* inverse) {
        const __m512d zero = _mm512_setzero_pd(), one = _mm512_set1_pd(1.0);
        const __m512d minus_inf = _mm512_set1_pd(-INFINITY);
        const __m512d v_t = _mm512_set1_pd(t_cluster), v_root = _mm512_set1_pd(root_cluster);
        const __m512d v_lam = _mm512_set1_pd(lam);
        __m512d top = minus_inf;
        const sktrellis_ginkgo_record* p_rec[8];
        const sktrellis_ginkgo_record* d_rec[8];
        double c;
        int j = 0, k;
        for (; j + 8 <= n; j += 8) {
            __m512d mp, rp, zp, xp, md, rd, zd, xd;
            for (k = 0; k < 8; k++) {
                uint32_t sibling = sibling_high | others[j + k];
                d_rec[k] = rec + sibling;
                p_rec[k] = rec + (cluster | sibling);
            }
            sktrellis_ginkgo_gather8(p_rec, &mp, &rp, &zp, &xp);
            sktrellis_ginkgo_gather8(d_rec, &md, &rd, &zd, &xd);
            __mmask8 cluster_heavy = _mm512_cmp_pd_mask(v_t, md, _CMP_GE_OQ);
            __m512d heavy = _mm512_mask_blend_pd(cluster_heavy, md, v_t);
            __m512d light = _mm512_mask_blend_pd(cluster_heavy, v_t, md);
            __m512d scale = _mm512_sub_pd(rp, _mm512_mask_blend_pd(cluster_heavy, rd, v_root));
            __m512d tau = _mm512_mul_pd(scale, scale);
            __mmask8 has_term = _mm512_cmp_pd_mask(tau, zero, _CMP_GT_OQ)
                                & _mm512_cmp_pd_mask(light, zero, _CMP_GT_OQ);
            __m512d inv = _mm512_maskz_div_pd(has_term, one, tau);
            __m512d e = _mm512_sub_pd(
                _mm512_sub_pd(_mm512_add_pd(xp, zd),
                              _mm512_div_pd(_mm512_mul_pd(v_lam, heavy), mp)),
                _mm512_mul_pd(_mm512_mul_pd(v_lam, light), inv));
            e = _mm512_mask_blend_pd(has_term, minus_inf, e);
            _mm512_storeu_pd(exponent + j, e);
            _mm512_storeu_pd(inverse + j, inv);
            top = _mm512_max_pd(top, e);
        }
        c = _mm512_reduce_max_pd(top);
        if (j < n) {
            double rest = sktrellis_ginkgo_outside_exponents_portable(
                rec, cluster, t_cluster, root_cluster, sibling_high, others + j, n - j, lam,
                exponent + j, inverse + j);
            c = rest > c ? rest : c;
        }
        return c;
    }

    /* sktrellis_ginkgo_sum_portable by the eight-lane table exp. */
    SKTRELLIS_AVX512 static double sktrellis_ginkgo_sum_avx512(
            const double* exponent, const double* inverse, int n, double scale) {
        const __m512d v_scale = _mm512_set1_pd(scale), minus_inf = _mm512_set1_pd(-INFINITY);
        __m512d sum = _mm512_setzero_pd();
        int j = 0;
        for (; j + 8 <= n; j += 8)
            sum = _mm512_fmadd_pd(
                sktrellis_exp_nonpositive8(
                    _mm512_sub_pd(_mm512_loadu_pd(exponent + j), v_scale)),
                _mm512_loadu_pd(inverse + j), sum);
        if (j < n) {
            /* The last lanes: exponent -inf (exp 0) and inverse 0 beyond n. */
            __mmask8 tail = (__mmask8)((1u << (n - j)) - 1);
            sum = _mm512_fmadd_pd(
                sktrellis_exp_nonpositive8(_mm512_sub_pd(
                    _mm512_mask_loadu_pd(minus_inf, tail, exponent + j), v_scale)),
                _mm512_maskz_loadu_pd(tail, inverse + j), sum);
        }
        return _mm512_reduce_add_pd(sum);
    }
    #endif

    /* The lanes q of a row's blocks (see the inside pass above) and the free
       points `high` of its submask walk, for a row of free points `rest`;
       returns the number of lanes: 8 for three or more free points (with
       AVX-512, or on the portable path), 4 for two or more, else 1 or 2. */
    static inline int sktrellis_ginkgo_row_shape(uint32_t rest, uint32_t* q, uint32_t* high) {
        uint32_t b1 = rest & (0u - rest), b2 = (rest ^ b1) & (0u - (rest ^ b1));
        uint32_t b3 = (rest ^ b1 ^ b2) & (0u - (rest ^ b1 ^ b2));
        int k;
        int wide = sktrellis_ginkgo_vector_width == 1;
    #ifdef SKTRELLIS_GINKGO_AVX512
        wide = wide || (sktrellis_ginkgo_vector_width >= 8 && __builtin_cpu_supports("avx512f")
                        && __builtin_cpu_supports("avx512dq")
                        && __builtin_cpu_supports("avx512vl"));
    #endif
        if (b3 != 0 && wide) {
            for (k = 0; k < 8; k++)
                q[k] = (k & 1 ? b1 : 0) | (k & 2 ? b2 : 0) | (k & 4 ? b3 : 0);
            *high = rest ^ b1 ^ b2 ^ b3;
            return 8;
        }
        if (b2 != 0) {
            for (k = 0; k < 4; k++)
                q[k] = (k & 1 ? b1 : 0) | (k & 2 ? b2 : 0);
            *high = rest ^ b1 ^ b2;
            return 4;
        }
        q[0] = 0;
        q[1] = rest;
        *high = 0;
        return rest ? 2 : 1;
    }

    /* sktrellis_ginkgo_row_portable, on AVX-512 or AVX2 with FMA when the
       row has eight or four lanes. */
    static int sktrellis_ginkgo_row(
            const sktrellis_ginkgo_split_record* rec, int with_count, uint32_t parent,
            uint32_t left_base, const uint32_t* q, int lanes, uint32_t high, uint32_t* sub,
            int n_blocks, double root_parent, double lam_over_parent, double lam,
            const double* f, sktrellis_ginkgo_acc* acc, uint32_t* cand_sub,
            double* cand_terms) {
    #ifdef SKTRELLIS_GINKGO_AVX512
        if (lanes == 8 && sktrellis_ginkgo_vector_width >= 8)
            return sktrellis_ginkgo_row_avx512(rec, with_count, parent, left_base, q, high, sub,
                                               n_blocks, root_parent, lam_over_parent, lam, f,
                                               acc, cand_sub, cand_terms);
    #endif
    #ifdef SKTRELLIS_GINKGO_AVX2
        if (lanes == 4 && sktrellis_ginkgo_vector_width >= 4 && __builtin_cpu_supports("avx2")
                && __builtin_cpu_supports("fma"))
            return sktrellis_ginkgo_row_avx2(rec, with_count, parent, left_base, q[1], q[2], high,
                                             sub, n_blocks, root_parent, lam_over_parent, lam,
                                             f, acc, cand_sub, cand_terms);
    #endif
        return sktrellis_ginkgo_row_portable(rec, with_count, parent, left_base, q, lanes, high, sub,
                                             n_blocks, root_parent, lam_over_parent, lam, f,
                                             acc, cand_sub, cand_terms);
    }

    /* Prefetch the records of the first block of a row (the splits
       (left_base | q[k], parent ^ that), k < lanes). The cache-blocked pass
       runs a row of about 15 blocks per parent and row pair (N = 18-20,
       14 low bits), and the loop's exit stalls the processor's
       look-ahead: the next parent's first records would then come from L3
       one after the other. Asked for one row ahead, they are on their way
       during this one (the inside pass 4-5 % faster, N = 18-19, one
       thread). */
    static inline void sktrellis_ginkgo_prefetch_block(
            const sktrellis_ginkgo_split_record* rec, uint32_t parent, uint32_t left_base,
            const uint32_t* q, int lanes) {
        const sktrellis_ginkgo_split_record* a = rec + left_base;
        const sktrellis_ginkgo_split_record* b = rec + (parent ^ left_base);
        int k;
        for (k = 0; k < lanes; k++) {
            __builtin_prefetch(a + q[k]);
            __builtin_prefetch(b - q[k]);
        }
    }

    /* Whether the AVX-512 forms are taken (the outside passes, and the
       inside pass's massless-child terms): the processor has them and the
       vector width allows eight lanes. */
    static inline int sktrellis_ginkgo_outside_wide(void) {
    #ifdef SKTRELLIS_GINKGO_AVX512
        return sktrellis_ginkgo_vector_width >= 8 && __builtin_cpu_supports("avx512f")
               && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    #else
        return 0;
    #endif
    }

    #ifdef SKTRELLIS_GINKGO_AVX512
    /* sktrellis_ginkgo_leaf_terms_portable, eight lanes, by the table exp
       (within 2 ulp, as the portable exp): the heavy children's records
       read as the rows read theirs. */
    SKTRELLIS_AVX512 static void sktrellis_ginkgo_leaf_terms_avx512(
            const sktrellis_ginkgo_split_record* rec, const uint32_t* heavy, int n,
            double root_parent, double lam_t_cut, double lam_over_parent, double f,
            double inv_lam, double* term) {
        const __m512d zero = _mm512_setzero_pd(), one = _mm512_set1_pd(1.0);
        const __m512d v_root = _mm512_set1_pd(root_parent), v_c = _mm512_set1_pd(lam_t_cut);
        const __m512d v_lop = _mm512_set1_pd(lam_over_parent);
        const __m512d v_f = _mm512_set1_pd(f * inv_lam);
        const char* p[8];
        int j, k;
        for (j = 0; j < n; j += 8) {
            __m512d root, u, aux, count;
            __mmask8 tail = (__mmask8)(n - j >= 8 ? 0xff : (1u << (n - j)) - 1);
            for (k = 0; k < 8; k++)
                p[k] = (const char*)(rec + heavy[j + k < n ? j + k : n - 1]);
            sktrellis_ginkgo_load8(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], &root, &u,
                                   &aux, &count);
            __m512d scale = _mm512_sub_pd(v_root, root);
            __m512d tau = _mm512_mul_pd(scale, scale);
            __m512d c = _mm512_div_pd(v_c, tau);
            __m512d x = _mm512_sub_pd(zero, _mm512_mul_pd(v_lop, _mm512_mul_pd(root, root)));
            __mmask8 fast = _mm512_mask_cmp_pd_mask(
                _mm512_mask_cmp_pd_mask(_mm512_cmp_pd_mask(tau, zero, _CMP_GT_OQ), c,
                                        _mm512_set1_pd(0.0625), _CMP_GE_OQ),
                x, _mm512_set1_pd(-700.0), _CMP_GE_OQ);
            __m512d y = sktrellis_exp_nonpositive8(
                _mm512_maskz_sub_pd(fast, zero, c));
            __m512d e = sktrellis_exp_nonpositive8(_mm512_maskz_mov_pd(fast, x));
            __m512d t = _mm512_mul_pd(_mm512_mul_pd(_mm512_mul_pd(v_f, u), e),
                                      _mm512_sub_pd(one, y));
            (void)aux;
            (void)count;
            _mm512_mask_storeu_pd(term + j, tail,
                                  _mm512_mask_blend_pd(fast, _mm512_set1_pd(-1.0), t));
        }
    }
    #endif

    /* The leaf terms of sktrellis_ginkgo_leaf_terms_portable, on AVX-512
       where the rows take it. */
    static void sktrellis_ginkgo_leaf_terms(
            const sktrellis_ginkgo_split_record* rec, const uint32_t* heavy, int n,
            double root_parent, double lam_t_cut, double lam_over_parent, double f,
            double inv_lam, double* term) {
    #ifdef SKTRELLIS_GINKGO_AVX512
        if (sktrellis_ginkgo_outside_wide()) {
            sktrellis_ginkgo_leaf_terms_avx512(rec, heavy, n, root_parent, lam_t_cut,
                                               lam_over_parent, f, inv_lam, term);
            return;
        }
    #endif
        sktrellis_ginkgo_leaf_terms_portable(rec, heavy, n, root_parent, lam_t_cut,
                                             lam_over_parent, f, inv_lam, term);
    }

    static double sktrellis_ginkgo_outside_exponents(
            const sktrellis_ginkgo_record* rec, uint32_t cluster, double t_cluster,
            double root_cluster, uint32_t sibling_high, const uint32_t* others, int n,
            double lam, double* exponent, double* inverse) {
    #ifdef SKTRELLIS_GINKGO_AVX512
        if (sktrellis_ginkgo_outside_wide())
            return sktrellis_ginkgo_outside_exponents_avx512(rec, cluster, t_cluster,
                                                             root_cluster, sibling_high, others,
                                                             n, lam, exponent, inverse);
    #endif
    #ifdef SKTRELLIS_GINKGO_AVX2
        if (sktrellis_ginkgo_vector_width >= 4 && __builtin_cpu_supports("avx2"))
            return sktrellis_ginkgo_outside_exponents_avx2(rec, cluster, t_cluster,
                                                           root_cluster, sibling_high, others,
                                                           n, lam, exponent, inverse);
    #endif
        return sktrellis_ginkgo_outside_exponents_portable(rec, cluster, t_cluster,
                                                           root_cluster, sibling_high, others,
                                                           n, lam, exponent, inverse);
    }

    /* The sum of exp(exponent[j] - scale) * inverse[j], scale at least every exponent. */
    static double sktrellis_ginkgo_sum(const double* exponent, const double* inverse, int n,
                                       double scale) {
    #ifdef SKTRELLIS_GINKGO_AVX512
        if (sktrellis_ginkgo_outside_wide())
            return sktrellis_ginkgo_sum_avx512(exponent, inverse, n, scale);
    #endif
        return sktrellis_ginkgo_sum_portable(exponent, inverse, n, scale);
    }

    """
    enum:
        GINKGO_SIZE_FACTORS "SKTRELLIS_GINKGO_SIZE_FACTORS"
        GINKGO_FACTOR_TABLE "SKTRELLIS_GINKGO_FACTOR_TABLE"
    ctypedef struct GinkgoRecord "sktrellis_ginkgo_record":
        double mass2
        double root
        double log_z
        double aux
    ctypedef struct GinkgoSplitRecord "sktrellis_ginkgo_split_record":
        double root
        double u
        double aux
        uint64_t count
    ctypedef struct GinkgoAcc "sktrellis_ginkgo_acc":
        double total[8]
        double inv_max[8]
        uint64_t count[8]
        double map_top
        double cut
        double cut_factor
        int any_term
    void ginkgo_raise_top "sktrellis_ginkgo_raise_top"(GinkgoAcc* acc, double top) noexcept nogil
    int ginkgo_vector_width "sktrellis_ginkgo_vector_width"
    int ginkgo_row_shape "sktrellis_ginkgo_row_shape"(
        mask_t rest, mask_t* q, mask_t* high) noexcept nogil
    int ginkgo_row "sktrellis_ginkgo_row"(
        const GinkgoSplitRecord* rec, int with_count, mask_t parent, mask_t left_base,
        const mask_t* q, int lanes, mask_t high, mask_t* sub, int n_blocks,
        double root_parent, double lam_over_parent, double lam, const double* f,
        GinkgoAcc* acc, mask_t* cand_sub, double* cand_terms) noexcept nogil
    void ginkgo_row_count128 "sktrellis_ginkgo_row_count128"(
        const GinkgoSplitRecord* rec, uint64_t* count, mask_t parent, mask_t left_base,
        const mask_t* q, int lanes, mask_t high, mask_t sub, int n_blocks,
        double root_parent, double lam_over_parent, double lam) noexcept nogil
    double ginkgo_outside_exponents "sktrellis_ginkgo_outside_exponents"(
        const GinkgoRecord* rec, mask_t cluster, double t_cluster, double root_cluster,
        mask_t sibling_high, const mask_t* others, int n, double lam, double* exponent,
        double* inverse) noexcept nogil
    double ginkgo_sum "sktrellis_ginkgo_sum"(
        const double* exponent, const double* inverse, int n, double scale) noexcept nogil
    void ginkgo_prefetch_block "sktrellis_ginkgo_prefetch_block"(
        const GinkgoSplitRecord* rec, mask_t parent, mask_t left_base, const mask_t* q,
        int lanes) noexcept nogil
    void ginkgo_outside_leaf_terms "sktrellis_ginkgo_outside_leaf_terms"(
        const GinkgoRecord* rec, mask_t cluster, double t_cluster, double root_cluster,
        const mask_t* leaf, int n, double lam, double lam_t_cut, double inv_lam,
        double* exponent, double* factor) noexcept nogil
    void ginkgo_leaf_terms "sktrellis_ginkgo_leaf_terms"(
        const GinkgoSplitRecord* rec, const mask_t* heavy, int n, double root_parent,
        double lam_t_cut, double lam_over_parent, double f, double inv_lam,
        double* term) noexcept nogil


# Splits per run of the linear-space passes: the run's buffers stay in L1.
cdef enum:
    GINKGO_CHUNK_SIZE = 256
