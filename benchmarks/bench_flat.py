"""Speed of the exact flat trellis: ns per (subset, cluster) pair, threads, and NumPy.

For N points the inside pass visits sum_k C(N, k) 2**(k-1) = (3**N - 1) / 2
(subset, cluster) pairs: every subset S with every cluster C that holds the
lowest point of S. This script times, with a correlation-clustering energy
on random features:

- the plain pass (log Z and MAP together) on 1 and 2 threads, and a
  straightforward vectorised NumPy implementation of the same DP (one level
  of subsets at a time, single-threaded like the 1-thread kernel) in the
  same run, checking both give the same log Z and MAP;
- the pass with a cluster-count dimension (log Z for every number of
  clusters, which ``ExactFlatClustering`` runs for
  ``n_clusters_probability_``), as extra time over the plain pass, and the
  whole trellis (both passes) on 2 threads;
- the plain fit, the fit with ``n_clusters=3`` and ``n_clusters_probability_``
  at N = 16, 18, 20 (``--count-n``) with their ratios to the plain fit,
  which are more robust than times on a shared machine;
- the pairwise matrix (superset-sum transform) and 10**5 exact samples;
- the cache-blocked inside pass and MAP-only pass (``map_partition``)
  against the plain kernels, forced either way in the same process,
  interleaved, at N = 14..20 (``--blocked-n``; issue 23).

    python benchmarks/bench_flat.py               # N = 10..20, NumPy up to 16
    python benchmarks/bench_flat.py --max-n 22 --numpy-max-n 18
    python benchmarks/bench_flat.py --only-counts # the ratio table only
    python benchmarks/bench_flat.py --only-blocked --blocked-n 14 16 18 20
"""
import argparse
import time

import numpy as np
from scipy.special import logsumexp

from sktrellis._engine._subsets import canonical_lefts
from sktrellis._engine.trellis import flat_trellis
from sktrellis._engine.trellis.flat_trellis import FlatTrellis, map_partition
from sktrellis.energies import CorrelationClustering


def n_pairs(n_points):
    return (3**n_points - 1) // 2


def numpy_trellis(log_e, n_points, max_cells=1 << 24):
    """log Z and MAP of the full set with NumPy, vectorised over all clusters of a level."""
    log_z = np.zeros(1 << n_points)
    log_map = np.zeros(1 << n_points)
    sizes = np.bitwise_count(np.arange(1 << n_points, dtype=np.uint32))
    for size in range(1, n_points + 1):
        parents = np.flatnonzero(sizes == size)
        step = max(1, max_cells >> (size - 1))
        for first in range(0, len(parents), step):
            chunk = parents[first : first + step]
            # Clusters holding the parent's lowest point: the proper ones,
            # then the parent itself (whose rest is empty, log Z = 0).
            clusters = canonical_lefts(chunk.astype(np.uint32)).astype(np.int64)
            terms = np.column_stack([
                log_e[clusters] + log_z[chunk[:, None] ^ clusters], log_e[chunk]
            ])
            map_terms = np.column_stack([
                log_e[clusters] + log_map[chunk[:, None] ^ clusters], log_e[chunk]
            ])
            log_z[chunk] = logsumexp(terms, axis=1)
            log_map[chunk] = map_terms.max(axis=1)
    full = (1 << n_points) - 1
    return log_z[full], log_map[full]


def with_cluster_counts(trellis):
    """The trellis after its pass with a cluster-count dimension."""
    trellis.log_partition_by_count
    return trellis


def best_time(function, repeat, clock=time.perf_counter):
    times = []
    for _ in range(repeat):
        start = clock()
        result = function()
        times.append(clock() - start)
    return min(times), result


def count_depth(sizes, rng):
    """The plain trellis, the one with n_clusters=3, and log Z for every count.

    Wall time on 2 threads, and CPU time of the process on 1 thread: on a
    machine shared with other jobs a 2-thread run waits for its slowest
    thread at every level, while 1-thread CPU time hardly depends on the
    load, so its ratios are the robust figures.
    """
    print("\nThe cluster-count passes (issue 10), best of 3 below N=18, 1 run above: the "
          "plain fit, the fit with\nn_clusters=3 (a max-only pass 3 deep) and "
          "n_clusters_probability_ (a log-Z pass N deep, timed alone after a\nplain fit); "
          "2 threads wall time, and 1 thread CPU time")
    print(f"{'N':>3} {'threads':>7} {'plain s':>8} {'k=3 fit s':>10} {'k=3 / plain':>12} "
          f"{'all k s':>8} {'all k / plain':>14}")
    for n_points in sizes:
        log_e = CorrelationClustering().cluster_potential(rng.normal(size=(n_points, 3)))
        repeat = 3 if n_points < 18 else 1
        for threads, clock in ((2, time.perf_counter), (1, time.process_time)):
            plain, trellis = best_time(lambda: FlatTrellis(log_e, threads), repeat, clock)
            constrained, with_k = best_time(
                lambda: FlatTrellis(log_e, threads, n_clusters=3), repeat, clock
            )
            assert len(np.unique(with_k.constrained_map_labels)) == 3
            assert with_k.constrained_map_log_potential <= trellis.map_log_potential

            def all_counts():
                fitted = FlatTrellis(log_e, threads)
                start = clock()
                by_count = fitted.log_partition_by_count
                return clock() - start, by_count

            all_k, by_count = min((all_counts() for _ in range(repeat)), key=lambda run: run[0])
            finite = by_count > -np.inf
            assert np.isclose(logsumexp(by_count[finite]), trellis.log_partition, rtol=1e-12)
            assert by_count[3] >= with_k.constrained_map_log_potential
            print(f"{n_points:>3} {threads:>7} {plain:>8.3f} {constrained:>10.3f} "
                  f"{constrained / plain:>11.2f}x {all_k:>8.3f} {all_k / plain:>13.2f}x",
                  flush=True)


def blocked_table(sizes, rng, repeats=3):
    """Plain against cache-blocked kernels, interleaved, in CPU time and wall time.

    One thread, process CPU time (robust on a loaded machine) and wall time;
    and two threads, wall time. ns per (subset, cluster) pair the pass
    visits: (3**N - 1) / 2 for the inside pass, 3**(N - 1) / 2 for the
    MAP-only pass (subsets without point 0). Both kernels give the same MAP
    (checked) and log Z within 1e-12.
    """
    print("\nCache-blocked against plain kernels (issue 23), correlation clustering, "
          f"median of {repeats} interleaved runs;\nns per pair visited, 1 thread CPU time "
          "and wall time, 2 threads wall time")
    print(f"{'N':>3} {'pass':>9} {'plain 1t cpu':>13} {'blocked':>8} {'speed-up':>9} "
          f"{'plain 1t wall':>14} {'blocked':>8} {'speed-up':>9} {'plain 2t wall':>14} "
          f"{'blocked':>8} {'speed-up':>9}")
    saved = flat_trellis.BLOCKED_MIN_POINTS
    try:
        for n_points in sizes:
            log_e = CorrelationClustering(beta=3.0).cluster_potential(
                rng.normal(size=(n_points, 3)))
            passes = {
                "inside": (lambda threads: FlatTrellis(log_e, threads), (3**n_points - 1) / 2),
                "MAP only": (lambda threads: map_partition(log_e, threads),
                             3 ** (n_points - 1) / 2),
            }
            for name, (run, n_terms) in passes.items():
                times = {}
                results = {}
                for _ in range(repeats):
                    for threads in (1, 2):
                        for blocked in (False, True):
                            flat_trellis.BLOCKED_MIN_POINTS = 0 if blocked else 10**6
                            cpu, wall = time.process_time(), time.perf_counter()
                            results[blocked] = run(threads)
                            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                            times.setdefault((threads, blocked), []).append((cpu, wall))
                    if name == "inside":
                        plain, blocked = results[False], results[True]
                        assert blocked.map_log_potential == plain.map_log_potential
                        assert np.array_equal(blocked.map_labels, plain.map_labels)
                        assert np.isclose(blocked.log_partition, plain.log_partition,
                                          rtol=1e-12, atol=0)
                    else:
                        assert results[True][1] == results[False][1]
                        assert np.array_equal(results[True][0], results[False][0])
                ns = {key: np.median(value, axis=0) / n_terms * 1e9
                      for key, value in times.items()}
                cells = []
                for threads, column in ((1, 0), (1, 1), (2, 1)):
                    plain, blocked = ns[threads, False][column], ns[threads, True][column]
                    cells.append(f"{plain:>{14 if cells else 13}.2f} {blocked:>8.2f} "
                                 f"{plain / blocked:>8.2f}x")
                print(f"{n_points:>3} {name:>9} " + " ".join(cells), flush=True)
    finally:
        flat_trellis.BLOCKED_MIN_POINTS = saved


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-n", type=int, default=10)
    parser.add_argument("--max-n", type=int, default=20)
    parser.add_argument("--numpy-max-n", type=int, default=16)
    parser.add_argument("--count-n", type=int, nargs="*", default=[16, 18, 20])
    parser.add_argument("--only-counts", action="store_true",
                        help="only the table of the cluster-count passes")
    parser.add_argument("--blocked-n", type=int, nargs="*", default=[14, 16, 18, 20])
    parser.add_argument("--only-blocked", action="store_true",
                        help="only the table of the blocked against the plain kernels")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    if args.only_counts:
        count_depth(args.count_n, rng)
        return
    if args.only_blocked:
        blocked_table(args.blocked_n, rng)
        return

    print("Plain pass (log Z and MAP) and the cluster-count pass on top of it, correlation "
          "clustering;\nbest of 3 runs below N=18, 1 run above; ns per (subset, cluster) pair")
    print(f"{'N':>3} {'pairs':>16} {'plain 1t s':>11} {'ns/pair':>8} {'plain 2t s':>11} "
          f"{'ns/pair':>8} {'NumPy s':>9} {'NumPy/1t':>9} {'counts 1t s':>12} {'ns/pair':>8} "
          f"{'counts 2t s':>12} {'ns/pair':>8} {'fit 2t s':>9}")
    for n_points in range(args.min_n, args.max_n + 1):
        X = rng.normal(size=(n_points, 3))
        log_e = CorrelationClustering(beta=3.0).cluster_potential(X)
        pairs = n_pairs(n_points)
        repeat = 3 if n_points < 18 else 1
        plain = {}
        full = {}
        for threads in (1, 2):
            plain[threads], trellis = best_time(lambda: FlatTrellis(log_e, threads), repeat)
            full[threads], counted = best_time(
                lambda: with_cluster_counts(FlatTrellis(log_e, threads)), repeat
            )
            assert counted.log_partition == trellis.log_partition
            finite = counted.log_partition_by_count > -np.inf
            assert np.isclose(logsumexp(counted.log_partition_by_count[finite]),
                              trellis.log_partition, rtol=1e-12)
        numpy_cell = ratio_cell = "-"
        if n_points <= args.numpy_max_n:
            numpy_seconds, (log_z, log_map) = best_time(
                lambda: numpy_trellis(log_e, n_points), 1
            )
            assert np.isclose(log_z, trellis.log_partition, rtol=1e-10)
            assert np.isclose(log_map, trellis.map_log_potential, rtol=1e-10)
            numpy_cell = f"{numpy_seconds:.3f}"
            ratio_cell = f"{numpy_seconds / plain[1]:.0f}x"
        counts = {threads: full[threads] - plain[threads] for threads in (1, 2)}
        print(f"{n_points:>3} {pairs:>16,} {plain[1]:>11.3f} {plain[1] / pairs * 1e9:>8.2f} "
              f"{plain[2]:>11.3f} {plain[2] / pairs * 1e9:>8.2f} {numpy_cell:>9} "
              f"{ratio_cell:>9} {counts[1]:>12.3f} {counts[1] / pairs * 1e9:>8.2f} "
              f"{counts[2]:>12.3f} {counts[2] / pairs * 1e9:>8.2f} {full[2]:>9.3f}",
              flush=True)

    count_depth(args.count_n, rng)
    blocked_table(args.blocked_n, rng)

    print("\nPairwise matrix (superset-sum transform) and 10**5 exact samples, 2 threads")
    print(f"{'N':>3} {'energy':>10} {'fit s':>8} {'pairwise s':>11} {'sample s':>9} "
          f"{'E[#clusters]':>13}")
    for n_points in sorted({min(14, args.max_n), min(18, args.max_n)}):
        X = rng.normal(size=(n_points, 3))
        for beta in (3.0, 0.3):
            log_e = CorrelationClustering(beta=beta).cluster_potential(X)
            start = time.perf_counter()
            trellis = FlatTrellis(log_e, 2)
            fit = time.perf_counter() - start
            start = time.perf_counter()
            trellis.pairwise_probability()
            pairwise = time.perf_counter() - start
            start = time.perf_counter()
            labels = trellis.sample_labels(100_000, np.random.RandomState(0))
            sampling = time.perf_counter() - start
            mean_clusters = (labels.max(axis=1) + 1).mean()
            print(f"{n_points:>3} {'beta=' + str(beta):>10} {fit:>8.3f} {pairwise:>11.3f} "
                  f"{sampling:>9.3f} {mean_clusters:>13.2f}", flush=True)


if __name__ == "__main__":
    main()
