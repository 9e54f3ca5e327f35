/* A plain-C reference of the separable inside pass, for bench_hierarchical.py.
 *
 * The same dynamic program as sktrellis' Cython kernel (MAP + log Z of every
 * subset, and the MAP split, for log psi(S; A, B) = f(S) + c(|S|) (g(A) + g(B))), written as
 * directly as C allows: per-level linear-space factors (u <= 1, so products
 * never overflow), a pair of independent accumulators per parent, and an
 * exact log-space redo of a parent whose linear sum falls below 1e-250. It
 * exists only so that the benchmark measures the kernel against the C
 * limit of the same algorithm in one run, at the same thread count.
 *
 * Built by the benchmark with: gcc -O3 -mpopcnt -fopenmp -shared -fPIC.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static double log_add(double a, double b) {
    if (a < b) { double t = a; a = b; b = t; }
    return b == -INFINITY ? a : a + log1p(exp(b - a));
}

void reference_inside(int n, const double *f, const double *g, const double *c,
                      double *log_z, double *log_map, uint32_t *best_left, int n_threads) {
    const int64_t n_subsets = (int64_t)1 << n;
    double *left = malloc(sizeof(double) * 2 * n_subsets);   /* (u_left, w_map) */
    double *right = malloc(sizeof(double) * 2 * n_subsets);  /* (u_right, w_map) */
    uint32_t **level = malloc(sizeof(uint32_t *) * (n + 1));
    int64_t *level_size = calloc(n + 1, sizeof(int64_t));
    for (int64_t s = 0; s < n_subsets; s++) level_size[__builtin_popcount(s)]++;
    for (int k = 0; k <= n; k++) {
        level[k] = malloc(sizeof(uint32_t) * (level_size[k] ? level_size[k] : 1));
        level_size[k] = 0;
    }
    for (int64_t s = 0; s < n_subsets; s++) {
        int k = __builtin_popcount(s);
        level[k][level_size[k]++] = (uint32_t)s;
    }
    for (int i = 0; i < n; i++) { log_z[1u << i] = 0.0; log_map[1u << i] = 0.0; }
    for (int size = 2; size <= n; size++) {
        const double coef = c[size];
        double best[64], scale = -INFINITY;
        for (int a = 0; a <= size; a++) best[a] = -INFINITY;
        for (int a = 1; a < size; a++)
            for (int64_t i = 0; i < level_size[a]; i++) {
                uint32_t x = level[a][i];
                double w = coef * g[x] + log_z[x];
                if (w > best[a]) best[a] = w;
            }
        for (int a = 1; a < size; a++)
            if (best[a] + best[size - a] > scale) scale = best[a] + best[size - a];
        for (int a = 1; a < size; a++) {
            #pragma omp parallel for num_threads(n_threads) schedule(static)
            for (int64_t i = 0; i < level_size[a]; i++) {
                uint32_t x = level[a][i];
                double w = coef * g[x] + log_z[x];
                right[2 * x] = exp(w - best[a]);
                left[2 * x] = exp(w + best[size - a] - scale);
                left[2 * x + 1] = right[2 * x + 1] = coef * g[x] + log_map[x];
            }
        }
        const uint32_t *parents = level[size];
        #pragma omp parallel for num_threads(n_threads) schedule(static)
        for (int64_t i = 0; i < level_size[size]; i++) {
            uint32_t parent = parents[i], low = parent & -parent, rest = parent ^ low;
            uint32_t pair = rest & -rest, sub = 0;
            rest ^= pair;
            double acc = 0.0, acc_odd = 0.0, m = -INFINITY, m_odd = -INFINITY;
            uint32_t arg = 0, arg_odd = 0;
            while (sub != rest) {
                uint32_t a = low | sub, b = parent ^ a;
                acc += left[2 * a] * right[2 * b];
                double v = left[2 * a + 1] + right[2 * b + 1];
                if (v > m) { m = v; arg = a; }
                a |= pair; b ^= pair;
                acc_odd += left[2 * a] * right[2 * b];
                v = left[2 * a + 1] + right[2 * b + 1];
                if (v > m_odd) { m_odd = v; arg_odd = a; }
                sub = (sub - rest) & rest;
            }
            uint32_t a = low | sub, b = parent ^ a;
            acc += left[2 * a] * right[2 * b] + acc_odd;
            double v = left[2 * a + 1] + right[2 * b + 1];
            if (v > m) { m = v; arg = a; }
            if (m_odd > m || (m_odd == m && arg_odd < arg)) { m = m_odd; arg = arg_odd; }
            if (acc > 1e-250 && isfinite(acc)) {
                log_z[parent] = f[parent] + scale + log(acc);
            } else {
                double total = -INFINITY;
                uint32_t r = parent ^ low, s = 0;
                while (s != r) {
                    uint32_t l = low | s;
                    total = log_add(total, f[parent] + coef * (g[l] + g[parent ^ l])
                                    + log_z[l] + log_z[parent ^ l]);
                    s = (s - r) & r;
                }
                log_z[parent] = total;
            }
            log_map[parent] = f[parent] + m;
            best_left[parent] = arg;
        }
    }
    for (int k = 0; k <= n; k++) free(level[k]);
    free(level); free(level_size); free(left); free(right);
}
