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
    SKTRELLIS_VECTOR_CLONES static double sktrellis_ginkgo_exponents(
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
    SKTRELLIS_VECTOR_CLONES static double sktrellis_ginkgo_outside_exponents(
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

    /* count[parent] += count[A_j] count[parent ^ A_j] over the splits of a
       run with a term (inverse[j] != 0), A_j = left_high | lefts[j];
       counts are (low, high) uint64 pairs (see _common.pxd). A subset of
       s <= 18 points has at most (2s - 3)!! < 2**64 trees, and every
       product is at most the parent's count: up to 18 points, 64-bit
       arithmetic is exact (a multiply-add per split, vectorisable). */
    SKTRELLIS_VECTOR_CLONES static void sktrellis_ginkgo_count(
            uint64_t* count, uint32_t parent, uint32_t left_high, const uint32_t* lefts,
            const double* inverse, int n, int parent_size) {
        int j;
        if (parent_size <= 18) {
            uint64_t acc = 0;
            #pragma omp simd reduction(+:acc)
            for (j = 0; j < n; j++) {
                uint32_t left = left_high | lefts[j];
                uint64_t product = count[2 * (size_t)left] * count[2 * (size_t)(parent ^ left)];
                acc += inverse[j] != 0.0 ? product : 0;
            }
            count[2 * (size_t)parent] += acc;
        } else {
            unsigned __int128 acc = ((unsigned __int128)count[2 * (size_t)parent + 1] << 64)
                                    | count[2 * (size_t)parent];
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
        double* exponent, double* inverse, double* ratio) noexcept nogil
    double ginkgo_weights "sktrellis_ginkgo_weights"(
        const double* exponent, const double* inverse, double* ratio, int n, double scale,
        double* map_max) noexcept nogil
    double ginkgo_outside_exponents "sktrellis_ginkgo_outside_exponents"(
        const GinkgoRecord* rec, mask_t cluster, double t_cluster, double root_cluster,
        mask_t sibling_high, const mask_t* others, int n, double lam, double* exponent,
        double* inverse) noexcept nogil
    double ginkgo_sum "sktrellis_ginkgo_sum"(
        const double* exponent, const double* inverse, int n, double scale) noexcept nogil
    void ginkgo_count "sktrellis_ginkgo_count"(
        uint64_t* count, mask_t parent, mask_t left_high, const mask_t* lefts,
        const double* inverse, int n, int parent_size) noexcept nogil


# Splits per run of the linear-space passes: the run's buffers stay in L1.
cdef enum:
    GINKGO_CHUNK_SIZE = 256
