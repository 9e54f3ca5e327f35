"""Speed of the exact hierarchical trellis: ns per split, threads, and NumPy.

For N points the inside pass evaluates sum_k C(N, k) (2**(k-1) - 1), about
3**N / 2, splits. This script times MAP + log Z (one pass computes both) with
the Dasgupta energy for 1 and 2 threads, and a straightforward vectorised
NumPy implementation of the same DP (one level of subsets at a time), in the
same run, and checks that both give the same log Z and MAP. It compares the
kernel with a plain-C reference of the same dynamic program
(``reference_trellis.c``, compiled here with gcc) at equal thread counts, and
times the outside pass (every cluster marginal) against the inside pass and
10**5 exact samples.

When ``../shared/limit/hier.c`` (a cache-blocked plain-C kernel of the same
DP, kept outside the repository as a measuring stick) is present, it is
compiled here and ``ExactHierarchicalClustering.fit`` is timed against its
``both_lin_blk`` variant (MAP + log Z, blocked) at N = 18..22, 1 and 2
threads, both sides interleaved in one run; wall and CPU ratios are printed,
since on a shared machine the CPU ratio is the steadier one.

    python benchmarks/bench_hierarchical.py              # N = 10..20, NumPy up to 16
    python benchmarks/bench_hierarchical.py --max-n 22 --numpy-max-n 18 --outside-max-n 22
    python benchmarks/bench_hierarchical.py --only-blocked-c   # just the blocked-C table
    python benchmarks/bench_hierarchical.py --only-blocked-c --blocked-c-n --cold-n 16 18
    python benchmarks/bench_hierarchical.py --only-ginkgo --ginkgo-n 16 17 18
    python benchmarks/bench_hierarchical.py --only-ginkgo --ginkgo-n --ginkgo-projection-n 21 22
"""
import argparse
import ctypes
import math
import os
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.special import logsumexp

from sktrellis._engine.trellis import _hierarchical as kernels
from sktrellis._engine._subsets import canonical_lefts, subsets_by_size
from sktrellis._engine.trellis.hierarchical_trellis import (
    _SAMPLE_CACHE_MIN_DOUBLES,
    HierarchicalTrellis,
)
from sktrellis import ExactHierarchicalClustering
from sktrellis.datasets import make_jets, make_planted_subtypes
from sktrellis.energies import Dasgupta, GinkgoLikelihood

#: The measuring stick of issue 23, beside the repository (read, never copied).
LIMIT_DIR = Path(__file__).resolve().parents[1] / ".." / "shared" / "limit"


def n_splits(n_points):
    return sum(math.comb(n_points, k) * (2 ** (k - 1) - 1) for k in range(2, n_points + 1))


def numpy_trellis(potential, n_points, max_cells=1 << 24):
    """log Z and MAP of the full set with NumPy, vectorised over all splits of a level."""
    tables = potential.arrays
    cluster_term, child_term, size_coef = (
        tables["cluster_term"], tables["child_term"], tables["size_coef"]
    )
    order, level_start = subsets_by_size(n_points)
    log_z = np.zeros(1 << n_points)
    log_map = np.zeros(1 << n_points)
    for size in range(2, n_points + 1):
        parents = order[level_start[size] : level_start[size + 1]].astype(np.int64)
        per_parent = 2 ** (size - 1) - 1
        step = max(1, max_cells // per_parent)
        for first in range(0, len(parents), step):
            chunk = parents[first : first + step]
            lefts = canonical_lefts(chunk.astype(np.uint32)).astype(np.int64)
            rights = chunk[:, None] ^ lefts
            psi = cluster_term[chunk][:, None] + size_coef[size] * (
                child_term[lefts] + child_term[rights]
            )
            log_z[chunk] = logsumexp(psi + log_z[lefts] + log_z[rights], axis=1)
            log_map[chunk] = np.max(psi + log_map[lefts] + log_map[rights], axis=1)
    full = (1 << n_points) - 1
    return log_z[full], log_map[full]


def reference_kernel():
    """The plain-C reference of reference_trellis.c, compiled with gcc and loaded."""
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference_trellis.c")
    library = os.path.join(tempfile.mkdtemp(), "reference_trellis.so")
    subprocess.run(
        ["gcc", "-O3", "-mpopcnt", "-fopenmp", "-shared", "-fPIC", source, "-o", library, "-lm"],
        check=True,
    )
    function = ctypes.CDLL(library).reference_inside
    array = np.ctypeslib.ndpointer(dtype=np.float64, flags="C_CONTIGUOUS")
    masks = np.ctypeslib.ndpointer(dtype=np.uint32, flags="C_CONTIGUOUS")
    function.argtypes = [ctypes.c_int, array, array, array, array, array, masks, ctypes.c_int]

    def run(potential, n_threads):
        tables = potential.arrays
        n_points = potential.n_points
        log_z, log_map = np.zeros(1 << n_points), np.zeros(1 << n_points)
        best_left = np.zeros(1 << n_points, dtype=np.uint32)
        function(n_points, tables["cluster_term"], tables["child_term"], tables["size_coef"],
                 log_z, log_map, best_left, n_threads)
        return log_z[-1], log_map[-1], best_left

    return run


def blocked_c_kernel():
    """Run ``hier.c``'s blocked MAP + log Z kernel: (n_points, n_threads) -> fields, or None."""
    source = LIMIT_DIR / "hier.c"
    if not source.exists():
        return None
    program = os.path.join(tempfile.mkdtemp(), "hier")
    subprocess.run(
        ["gcc", "-O3", "-march=native", "-fopenmp", "-Wno-unused-function", str(source),
         "-o", program, "-lm"],
        check=True,
    )

    def run(n_points, n_threads):
        # N, variant, repetitions, beta, no long-double check: its own DP time only.
        line = subprocess.run(
            [program, str(n_points), "both_lin_blk", "1", "1", "0"],
            env={**os.environ, "OMP_NUM_THREADS": str(n_threads)},
            check=True, capture_output=True, text=True,
        ).stdout
        return dict(field.split("=", 1) for field in line.split() if "=" in field)

    return run


def compare_with_blocked_c(sizes, repeat):
    """fit / blocked-C ratios, 1 and 2 threads; returns False when hier.c is absent."""
    run_c = blocked_c_kernel()
    if run_c is None:
        print(f"\n{LIMIT_DIR / 'hier.c'} not found: blocked-C comparison skipped")
        return False
    print("\nExactHierarchicalClustering.fit (Dasgupta, precomputed random weights) against the "
          f"blocked C kernel both_lin_blk, same threads, best of {repeat}, interleaved")
    print(f"{'N':>3} {'threads':>8} {'fit s':>8} {'C s':>8} {'wall ratio':>11} "
          f"{'fit cpu s':>10} {'C cpu s':>8} {'cpu ratio':>10} {'load':>5}")
    rng = np.random.default_rng(0)
    for n_points in sizes:
        W = rng.random((n_points, n_points))
        W = (W + W.T) / 2
        for n_threads in (1, 2):
            model = ExactHierarchicalClustering(
                Dasgupta(affinity="precomputed"), n_jobs=n_threads, verbose=0
            )
            fit_wall = fit_cpu = c_wall = c_cpu = np.inf
            for _ in range(repeat):
                wall, cpu = time.perf_counter(), time.process_time()
                model.fit(W)
                fit_wall = min(fit_wall, time.perf_counter() - wall)
                fit_cpu = min(fit_cpu, time.process_time() - cpu)
                fields = run_c(n_points, n_threads)
                c_wall = min(c_wall, float(fields["wall_min"]))
                c_cpu = min(c_cpu, float(fields["cpu_min"]))
            # Same DP on other weights: log Z of the root differs, the work does not.
            print(f"{n_points:>3} {n_threads:>8} {fit_wall:>8.2f} {c_wall:>8.2f} "
                  f"{fit_wall / c_wall:>10.2f}x {fit_cpu:>10.2f} {c_cpu:>8.2f} "
                  f"{fit_cpu / c_cpu:>9.2f}x {os.getloadavg()[0]:>5.1f}", flush=True)
    return True


def full_posterior_times(sizes, n_threads=2):
    """Wall and CPU time of fit plus every cluster marginal (the outside pass), one run each."""
    print(f"\nFull posterior, Dasgupta on random weights in [0, 1], {n_threads} threads, one run")
    print(f"{'N':>3} {'fit s':>9} {'marginals s':>12} {'total s':>9} {'total cpu s':>12} {'load':>5}")
    rng = np.random.default_rng(0)
    for n_points in sizes:
        W = rng.random((n_points, n_points))
        model = ExactHierarchicalClustering(
            Dasgupta(affinity="precomputed"), n_jobs=n_threads, verbose=0
        )
        wall, cpu = time.perf_counter(), time.process_time()
        model.fit((W + W.T) / 2)
        fit = time.perf_counter() - wall
        model.posterior_.cluster_log_marginals()
        total = time.perf_counter() - wall
        print(f"{n_points:>3} {fit:>9.1f} {total - fit:>12.1f} {total:>9.1f} "
              f"{time.process_time() - cpu:>12.1f} {os.getloadavg()[0]:>5.1f}", flush=True)


def cold_posterior_times(sizes, betas=(20.0, 100.0, 1000.0)):
    """CPU time of fit and of every cluster marginal at large beta, one thread, one run.

    A cold posterior (the calibrated beta_ reaches the cap of 1000 when every
    bootstrap resample agrees) leaves most subsets' linear-space sums below
    their floor; they are redone in log space, where the negligible terms
    are skipped. The ratio is against the first beta, measured in this run.
    """
    print(f"\nCold posteriors: planted subtypes (3000 genes), Dasgupta at beta "
          f"{', '.join(f'{b:g}' for b in betas)}, 1 thread, CPU s, one run")
    print(f"{'N':>3} {'beta':>6} {'fit s':>8} {'marginals s':>12} {'fit ratio':>10} "
          f"{'marginals ratio':>16}")
    for n_points in sizes:
        X, _ = make_planted_subtypes(n_points, random_state=7)
        first = None
        for beta in betas:
            model = ExactHierarchicalClustering(Dasgupta(beta=beta), n_jobs=1, verbose=0)
            start = time.process_time()
            model.fit(X)
            fit = time.process_time() - start
            model.posterior_.cluster_log_marginals()
            marginals = time.process_time() - start - fit
            first = first or (fit, marginals)
            print(f"{n_points:>3} {beta:>6g} {fit:>8.2f} {marginals:>12.2f} "
                  f"{fit / first[0]:>9.1f}x {marginals / first[1]:>15.1f}x", flush=True)


def ginkgo_against_dasgupta(sizes, function_max_n, repeat):
    """Ginkgo's inside pass (its own kernel and its C function) beside Dasgupta's.

    A jet of ``make_jets`` and a random N x N similarity matrix (the work per
    split of Dasgupta does not depend on the weights), timed interleaved in
    one run, wall time and CPU time (the steadier one on a shared machine),
    best of `repeat`; the C-function path (the pre-kernel route, kept for
    user functions) only up to `function_max_n`. Each Ginkgo pass is checked
    to give the MAP value and tree count of the C-function pass.
    """
    if not sizes:
        return
    print("Inside pass (MAP + log Z): Ginkgo (own kernel, C function) against Dasgupta, "
          f"ns per split, best of {repeat}; cpu = process CPU time / threads")
    print(f"{'N':>3} {'threads':>8} {'Dasgupta':>9} {'Ginkgo':>8} {'function':>9} "
          f"{'Ginkgo/Dasgupta':>16} {'cpu D':>6} {'cpu G':>6} {'cpu G/D':>8} {'function/G':>11}")
    rng = np.random.default_rng(0)

    def timed(potential, n_threads, use_kernel):
        HierarchicalTrellis.use_ginkgo_kernel = use_kernel
        try:
            best = (np.inf, np.inf, None)
            for _ in range(repeat):
                start, cpu = time.perf_counter(), time.process_time()
                trellis = HierarchicalTrellis(potential, n_threads)
                wall, cpu = time.perf_counter() - start, time.process_time() - cpu
                best = min(best, (wall, cpu, trellis), key=lambda b: b[0])
            return best
        finally:
            HierarchicalTrellis.use_ginkgo_kernel = True

    for n_points in sizes:
        W = rng.random((n_points, n_points))
        dasgupta = Dasgupta(affinity="precomputed").split_potential((W + W.T) / 2)
        jet = make_jets(n_leaves=n_points, random_state=n_points)[0].momenta
        ginkgo = GinkgoLikelihood().split_potential(jet)
        count = n_splits(n_points)
        for n_threads in (1, 2):
            d_wall, d_cpu, _ = timed(dasgupta, n_threads, True)
            g_wall, g_cpu, trellis = timed(ginkgo, n_threads, True)
            f_cell = ratio_cell = "-"
            if n_points <= function_max_n:
                f_wall, _, function = timed(ginkgo, n_threads, False)
                assert function.map_log_potential == trellis.map_log_potential
                assert function.n_trees == trellis.n_trees
                assert np.isclose(function.log_partition, trellis.log_partition, rtol=1e-12)
                f_cell = f"{f_wall / count * 1e9:.2f}"
                ratio_cell = f"{f_wall / g_wall:.1f}x"
            print(f"{n_points:>3} {n_threads:>8} {d_wall / count * 1e9:>9.2f} "
                  f"{g_wall / count * 1e9:>8.2f} {f_cell:>9} {g_wall / d_wall:>15.2f}x "
                  f"{d_cpu / n_threads / count * 1e9:>6.2f} "
                  f"{g_cpu / n_threads / count * 1e9:>6.2f} {g_cpu / d_cpu:>7.2f}x "
                  f"{ratio_cell:>11}", flush=True)


def ginkgo_projection(sizes, target, n_threads=2):
    """Ginkgo jet: inside and outside passes timed at `sizes`, projected to `target` points.

    CPU time per split (inside pass) and per (cluster, sibling) term (outside
    pass) of one thread, measured on `n_threads` threads, one run each; the
    projection divides the target's terms by the last size's rates and by
    the threads (the wall time of a quiet machine, where each thread has a
    core). The cache-blocked passes keep the rate per term as N grows.
    """
    if not sizes:
        return
    print(f"\nGinkgo jet (make_jets(n_leaves=N, random_state=N)), {n_threads} threads, one run; "
          "cpu ns per term and thread")
    print(f"{'N':>3} {'inside s':>9} {'inside cpu ns':>14} {'outside s':>10} "
          f"{'outside cpu ns':>15} {'load':>5}")
    rates = None
    for n_points in sizes:
        jet = make_jets(n_leaves=n_points, random_state=n_points)[0].momenta
        potential = GinkgoLikelihood().split_potential(jet)
        wall, cpu = time.perf_counter(), time.process_time()
        trellis = HierarchicalTrellis(potential, n_threads)
        inside, inside_cpu = time.perf_counter() - wall, time.process_time() - cpu
        wall, cpu = time.perf_counter(), time.process_time()
        trellis.cluster_log_marginals()
        outside, outside_cpu = time.perf_counter() - wall, time.process_time() - cpu
        rates = (inside_cpu / n_splits(n_points), outside_cpu / outside_terms(n_points))
        print(f"{n_points:>3} {inside:>9.1f} {rates[0] * 1e9:>14.2f} {outside:>10.1f} "
              f"{rates[1] * 1e9:>15.2f} {os.getloadavg()[0]:>5.1f}", flush=True)
        del trellis
    inside = n_splits(target) * rates[0] / n_threads
    outside = outside_terms(target) * rates[1] / n_threads
    print(f"Projected N={target} on {n_threads} quiet cores at the N={sizes[-1]} rates: "
          f"MAP + log Z {inside / 60:.1f} min, every marginal {outside / 60:.1f} min more, "
          f"{(inside + outside) / 60:.1f} min in all", flush=True)


def outside_terms(n_points):
    """(cluster, sibling) terms of the outside pass: sum_k C(N, k) (2**(N - k) - 1), k < N."""
    return sum(math.comb(n_points, k) * (2 ** (n_points - k) - 1) for k in range(1, n_points))


def best_time(function, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return min(times), result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-n", type=int, default=10)
    parser.add_argument("--max-n", type=int, default=20)
    parser.add_argument("--numpy-max-n", type=int, default=16)
    parser.add_argument("--reference-n", type=int, nargs="*", default=[16, 18, 20])
    parser.add_argument("--outside-max-n", type=int, default=20)
    parser.add_argument("--blocked-c-n", type=int, nargs="*", default=[18, 19, 20, 21, 22])
    parser.add_argument("--blocked-c-repeat", type=int, default=2)
    parser.add_argument("--only-blocked-c", action="store_true")
    parser.add_argument("--ginkgo-n", type=int, nargs="*", default=[16, 18, 20],
                        help="Ginkgo against Dasgupta at these N")
    parser.add_argument("--ginkgo-function-max-n", type=int, default=18,
                        help="largest N of the Ginkgo C-function timing (slow)")
    parser.add_argument("--only-ginkgo", action="store_true")
    parser.add_argument("--ginkgo-projection-n", type=int, nargs="*", default=[],
                        help="time a Ginkgo jet's passes at these N (2 threads) and project "
                             "them to --ginkgo-projection-target points")
    parser.add_argument("--ginkgo-projection-target", type=int, default=24)
    parser.add_argument("--full-posterior-n", type=int, nargs="*", default=[],
                        help="also time fit + all cluster marginals at these N (24, 25: minutes)")
    parser.add_argument("--cold-n", type=int, nargs="*", default=[16, 18],
                        help="fit and marginals at beta 20, 100, 1000 at these N")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    ginkgo_against_dasgupta(args.ginkgo_n, args.ginkgo_function_max_n,
                            1 if args.only_ginkgo else 2)
    ginkgo_projection(args.ginkgo_projection_n, args.ginkgo_projection_target)
    if args.only_ginkgo:
        return
    compare_with_blocked_c(args.blocked_c_n, args.blocked_c_repeat)
    full_posterior_times(args.full_posterior_n)
    cold_posterior_times(args.cold_n)
    if args.only_blocked_c:
        return

    print("MAP + log Z, Dasgupta energy (best of 3 runs below N=18, 1 run above)")
    header = (f"{'N':>3} {'splits':>14} {'1 thread s':>11} {'ns/split':>9} "
              f"{'2 threads s':>12} {'ns/split':>9} {'speedup':>8} {'NumPy s':>9} "
              f"{'NumPy/kernel':>13}")
    print(header)
    for n_points in range(args.min_n, args.max_n + 1):
        X = rng.normal(size=(n_points, 3))
        potential = Dasgupta().split_potential(X)
        count = n_splits(n_points)
        repeat = 3 if n_points < 18 else 1
        one, _ = best_time(lambda: HierarchicalTrellis(potential, 1), repeat)
        two, trellis = best_time(lambda: HierarchicalTrellis(potential, 2), repeat)
        numpy_cell = ratio_cell = "-"
        if n_points <= args.numpy_max_n:
            numpy_seconds, (log_z, log_map) = best_time(
                lambda: numpy_trellis(potential, n_points), 1
            )
            assert np.isclose(log_z, trellis.log_partition, rtol=1e-10)
            assert np.isclose(log_map, trellis.map_log_potential, rtol=1e-10)
            numpy_cell = f"{numpy_seconds:.3f}"
            ratio_cell = f"{numpy_seconds / two:.1f}x"
        print(f"{n_points:>3} {count:>14,} {one:>11.3f} {one / count * 1e9:>9.2f} "
              f"{two:>12.3f} {two / count * 1e9:>9.2f} {one / two:>7.2f}x "
              f"{numpy_cell:>9} {ratio_cell:>13}", flush=True)

    print("\nInside pass (MAP + log Z) against the plain-C reference, same threads "
          "(best of 2 runs)")
    print(f"{'N':>3} {'threads':>8} {'kernel s':>9} {'C s':>9} {'kernel / C':>11}")
    reference = reference_kernel()
    for n_points in args.reference_n:
        W = rng.random((n_points, n_points))
        potential = Dasgupta(affinity="precomputed").split_potential((W + W.T) / 2)
        for n_threads in (1, 2):
            kernel_seconds, trellis = best_time(
                lambda: HierarchicalTrellis(potential, n_threads), 2
            )
            c_seconds, (log_z, log_map, best_left) = best_time(
                lambda: reference(potential, n_threads), 2
            )
            assert np.isclose(log_z, trellis.log_partition, rtol=1e-10)
            assert np.isclose(log_map, trellis.map_log_potential, rtol=1e-12)
            assert np.array_equal(best_left[3:], trellis.best_left[3:])
            print(f"{n_points:>3} {n_threads:>8} {kernel_seconds:>9.3f} {c_seconds:>9.3f} "
                  f"{kernel_seconds / c_seconds:>10.2f}x", flush=True)

    print("\nOutside pass (all cluster marginals) against the inside pass, Dasgupta on "
          "random weights in [0, 1]")
    print(f"{'N':>3} {'beta':>6} {'threads':>8} {'inside s':>9} {'outside s':>10} "
          f"{'outside / inside':>17} {'inside cpu s':>13} {'outside cpu s':>14} {'cpu ratio':>10}")
    for n_points in range(18, args.outside_max_n + 1, 2):
        W = rng.random((n_points, n_points))
        for beta in (1.0, 0.1):
            potential = Dasgupta(affinity="precomputed", beta=beta).split_potential(
                (W + W.T) / 2
            )
            for n_threads in (1, 2):
                start, cpu = time.perf_counter(), time.process_time()
                trellis = HierarchicalTrellis(potential, n_threads)
                inside, inside_cpu = time.perf_counter() - start, time.process_time() - cpu
                start, cpu = time.perf_counter(), time.process_time()
                trellis.cluster_log_marginals()
                outside, outside_cpu = time.perf_counter() - start, time.process_time() - cpu
                print(f"{n_points:>3} {beta:>6} {n_threads:>8} {inside:>9.3f} {outside:>10.3f} "
                      f"{outside / inside:>16.2f}x {inside_cpu:>13.3f} {outside_cpu:>14.3f} "
                      f"{outside_cpu / inside_cpu:>9.2f}x", flush=True)

    print("\n10**5 exact samples, 2 threads")
    print(f"{'N':>3} {'energy':>14} {'sample s':>9} {'distinct subsets sampled':>25}")
    for n_points in sorted({min(14, args.max_n), min(18, args.max_n)}):
        X = rng.normal(size=(n_points, 3))
        for beta in (1.0, 0.1):
            trellis = HierarchicalTrellis(Dasgupta(beta=beta).split_potential(X), 2)
            uniforms = np.random.default_rng(0).random((100_000, n_points - 1))
            start = time.perf_counter()
            parents, _ = kernels.sample_splits(
                trellis.potential, trellis.log_z, uniforms,
                np.empty(max(1 << n_points, _SAMPLE_CACHE_MIN_DOUBLES)),
            )
            sampling = time.perf_counter() - start
            print(f"{n_points:>3} {'beta=' + str(beta):>14} {sampling:>9.3f} "
                  f"{len(np.unique(parents)):>25,}", flush=True)


if __name__ == "__main__":
    main()
