"""Sparse flat trellis: gap to the exact posterior, and MAP partitions past the trellis.

(a) N = 14-16 blobs, correlation clustering (beta = 1): the gap of the
    sparse flat trellis's log Z and MAP to ``ExactFlatClustering``'s
    against the family size (seed trees only, then growing with regions of
    up to 3, 4, 6 parts), with the fraction of the Bell(N) partitions
    spanned.
(b) N = 200-2,000 blobs, signed weights (exponential similarities minus
    their mean): the MAP objective (the weight inside clusters) and time of
    a greedy flat agglomeration, the best cut of scipy's linkage trees,
    TransitivePropagation (max-sum, up to ``--max-tp`` points) and
    SparseFlatClustering (defaults), timed side by side in one run.

    python benchmarks/bench_sparse_flat.py
    python benchmarks/bench_sparse_flat.py --exact-sizes 14 --sizes 200 500
"""
import argparse
import time

import numpy as np
from sklearn.datasets import make_blobs

from sktrellis import ExactFlatClustering, SparseFlatClustering
from sktrellis.baselines import TransitivePropagation
from sktrellis.energies import CorrelationClustering


def bell(n):
    row = [1]
    for _ in range(n):
        new = [row[-1]]
        for value in row:
            new.append(new[-1] + value)
        row = new
    return row[0]


def exact_table(sizes, seed):
    print("(a) gap to the exact posterior (CorrelationClustering beta=1 on blobs)")
    print(f"{'N':>3} {'family':>10} {'clusters':>8} {'states':>7} {'spanned':>9} "
          f"{'log Z gap':>10} {'MAP gap':>8} {'sparse s':>9} {'exact s':>8}")
    settings = {"seeds": {"resplit_parts": 0}, "grow 3": {"resplit_parts": 3},
                "grow 4": {"resplit_parts": 4}, "grow 6": {"resplit_parts": 6}}
    for n_points in sizes:
        X, _ = make_blobs(n_samples=n_points, centers=4, cluster_std=2.0, random_state=seed)
        energy = CorrelationClustering(beta=1.0)
        start = time.perf_counter()
        exact = ExactFlatClustering(energy, verbose=0).fit(X)
        exact_seconds = time.perf_counter() - start
        for name, params in settings.items():
            start = time.perf_counter()
            model = SparseFlatClustering(energy, **params).fit(X)
            seconds = time.perf_counter() - start
            print(f"{n_points:>3} {name:>10} {model.n_vertices_:>8} {model.n_states_:>7} "
                  f"{model.n_partitions_ / bell(n_points):>9.2e} "
                  f"{exact.log_partition_ - model.log_partition_:>10.3f} "
                  f"{exact.map_log_potential_ - model.map_log_potential_:>8.3f} "
                  f"{seconds:>9.2f} {exact_seconds:>8.2f}")


def objective(weights, labels):
    together = labels[:, None] == labels[None, :]
    return 0.5 * float(weights[together].sum())


def greedy_flat(weights):
    """Merge the two clusters of largest positive cross weight until none is positive."""
    cross = weights.copy()
    np.fill_diagonal(cross, -np.inf)
    labels = np.arange(len(weights))
    alive = np.ones(len(weights), dtype=bool)
    while True:
        flat = np.argmax(cross)
        a, b = divmod(int(flat), len(cross))
        if not cross[a, b] > 0:
            break
        cross[a] += cross[b]
        cross[:, a] += cross[:, b]
        cross[a, a] = -np.inf
        cross[b, :] = cross[:, b] = -np.inf
        alive[b] = False
        labels[labels == b] = a
    return labels


def scaling_table(sizes, seed, max_tp):
    print("(b) MAP objective (weight inside clusters, higher is better) and seconds")
    print(f"{'N':>5} {'greedy':>16} {'best linkage cut':>18} {'TransitiveProp':>18} "
          f"{'SparseFlat':>18} {'states':>7}")
    for n_points in sizes:
        X, _ = make_blobs(n_samples=n_points, centers=max(3, n_points // 50),
                          cluster_std=2.0, random_state=seed)
        weights = CorrelationClustering().weights(X)
        energy = CorrelationClustering(affinity="precomputed", beta=1.0)
        row = {}
        start = time.perf_counter()
        row["greedy"] = objective(weights, greedy_flat(weights)), time.perf_counter() - start
        start = time.perf_counter()
        cuts = SparseFlatClustering(energy, resplit_parts=0).fit(weights)
        row["cuts"] = cuts.map_log_potential_, time.perf_counter() - start
        if n_points <= max_tp:
            start = time.perf_counter()
            tp = TransitivePropagation().fit(weights)
            row["tp"] = objective(weights, tp.labels_), time.perf_counter() - start
        else:
            row["tp"] = np.nan, np.nan
        start = time.perf_counter()
        model = SparseFlatClustering(energy).fit(weights)
        row["sparse"] = model.map_log_potential_, time.perf_counter() - start
        assert abs(objective(weights, model.labels_) - model.map_log_potential_) < 1e-6 * (
            1 + abs(model.map_log_potential_))
        cells = " ".join(f"{value:>10.1f} {seconds:>6.2f}s" for value, seconds in row.values())
        print(f"{n_points:>5} {cells} {model.n_states_:>7}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exact-sizes", type=int, nargs="*", default=[14, 16])
    parser.add_argument("--sizes", type=int, nargs="*", default=[200, 500, 1000, 2000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-tp", type=int, default=500,
                        help="largest N for TransitivePropagation (O(N**3) per iteration)")
    args = parser.parse_args()
    exact_table(args.exact_sizes, args.seed)
    scaling_table(args.sizes, args.seed, args.max_tp)


if __name__ == "__main__":
    main()
