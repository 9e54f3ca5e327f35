"""Sparse flat trellis: gap to the exact posterior, and MAP partitions past the trellis.

(a) N = 14-18 blobs, correlation clustering (beta = 1 and 4): the gap of the
    sparse flat trellis's log Z and MAP to ``ExactFlatClustering``'s
    against the family size (seed trees only, then growing with regions of
    up to 3, 4, 6 parts), with the fraction of the Bell(N) partitions
    spanned.
(b) N = 200-2,000 blobs, signed weights (exponential similarities minus
    their mean): the MAP objective (the weight inside clusters) and time of
    a greedy flat agglomeration, the best cut of scipy's linkage trees,
    TransitivePropagation (max-sum, up to ``--max-tp`` points),
    SparseFlatClustering seeded with the linkage trees only (``builder``
    callable) and SparseFlatClustering at its defaults (the linkage trees
    and the greedy agglomeration's tree), timed side by side in one run.
(c) DPM (full covariance, BHC's hyperparameters) on blobs: BHC's evidence
    lower bound (the cuts of its tree) against SparseFlatClustering's
    ``log_evidence_`` (default seeds; and seeded with BHC's own tree, so
    never below BHC's bound).

    python benchmarks/bench_sparse_flat.py
    python benchmarks/bench_sparse_flat.py --exact-sizes 14 --sizes 200 500
    python benchmarks/bench_sparse_flat.py --exact-sizes --evidence-sizes --sizes 200 500 1000
"""
import argparse
import time

import numpy as np
from scipy.cluster.hierarchy import linkage
from scipy.spatial.distance import squareform
from sklearn.datasets import make_blobs

from sktrellis import ExactFlatClustering, SparseFlatClustering
from sktrellis._engine.multicut import greedy_agglomeration
from sktrellis.baselines import BayesianHierarchicalClustering, TransitivePropagation
from sktrellis.energies import CorrelationClustering


def bell(n):
    row = [1]
    for _ in range(n):
        new = [row[-1]]
        for value in row:
            new.append(new[-1] + value)
        row = new
    return row[0]


def exact_table(sizes, seed, betas):
    print("(a) gap to the exact posterior (CorrelationClustering on blobs)")
    print(f"{'beta':>4} {'N':>3} {'family':>10} {'clusters':>8} {'states':>7} {'spanned':>9} "
          f"{'log Z gap':>10} {'MAP gap':>8} {'sparse s':>9} {'exact s':>8}")
    settings = {"seeds": {"resplit_parts": 0}, "grow 3": {"resplit_parts": 3},
                "grow 4": {"resplit_parts": 4}, "grow 6": {"resplit_parts": 6}}
    for beta, n_points in [(beta, n) for beta in betas for n in sizes]:
        X, _ = make_blobs(n_samples=n_points, centers=4, cluster_std=2.0, random_state=seed)
        energy = CorrelationClustering(beta=beta)
        start = time.perf_counter()
        exact = ExactFlatClustering(energy, verbose=0).fit(X)
        exact_seconds = time.perf_counter() - start
        for name, params in settings.items():
            start = time.perf_counter()
            model = SparseFlatClustering(energy, **params).fit(X)
            seconds = time.perf_counter() - start
            print(f"{beta:>4g} {n_points:>3} {name:>10} {model.n_vertices_:>8} {model.n_states_:>7} "
                  f"{model.n_partitions_ / bell(n_points):>9.2e} "
                  f"{exact.log_partition_ - model.log_partition_:>10.3f} "
                  f"{exact.map_log_potential_ - model.map_log_potential_:>8.3f} "
                  f"{seconds:>9.2f} {exact_seconds:>8.2f}")


def objective(weights, labels):
    together = labels[:, None] == labels[None, :]
    return 0.5 * float(weights[together].sum())


def linkage_trees(weights):
    """The linkage seeds of the estimator's default, without the greedy tree."""
    distances = weights.max() - weights
    np.fill_diagonal(distances, 0.0)
    condensed = squareform(distances, checks=False)
    return [linkage(condensed, method)[:, :2].astype(np.int64)
            for method in ("average", "complete", "single")]


def scaling_table(sizes, seed, max_tp):
    print("(b) MAP objective (weight inside clusters, higher is better) and seconds")
    print(f"{'N':>5} {'greedy':>17} {'best linkage cut':>17} {'TransitiveProp':>17} "
          f"{'linkage seeds':>17} {'SparseFlat':>17} {'states':>7}")
    for n_points in sizes:
        X, _ = make_blobs(n_samples=n_points, centers=max(3, n_points // 50),
                          cluster_std=2.0, random_state=seed)
        weights = CorrelationClustering().weights(X)
        energy = CorrelationClustering(affinity="precomputed", beta=1.0)
        row = {}
        start = time.perf_counter()
        greedy_labels = greedy_agglomeration(weights).labels
        row["greedy"] = objective(weights, greedy_labels), time.perf_counter() - start
        start = time.perf_counter()
        cuts = SparseFlatClustering(
            energy, builder=lambda W, rs: linkage_trees(W), resplit_parts=0).fit(weights)
        row["cuts"] = cuts.map_log_potential_, time.perf_counter() - start
        if n_points <= max_tp:
            start = time.perf_counter()
            tp = TransitivePropagation().fit(weights)
            row["tp"] = objective(weights, tp.labels_), time.perf_counter() - start
        else:
            row["tp"] = np.nan, np.nan
        # The linkage trees alone as seeds (the default before the greedy
        # tree joined it), then the default: linkage trees and greedy tree.
        start = time.perf_counter()
        linkage_only = SparseFlatClustering(
            energy, builder=lambda W, rs: linkage_trees(W)).fit(weights)
        row["linkage"] = linkage_only.map_log_potential_, time.perf_counter() - start
        start = time.perf_counter()
        model = SparseFlatClustering(energy).fit(weights)
        row["sparse"] = model.map_log_potential_, time.perf_counter() - start
        assert abs(objective(weights, model.labels_) - model.map_log_potential_) < 1e-6 * (
            1 + abs(model.map_log_potential_))
        cells = " ".join(f"{value:>10.1f} {seconds:>6.2f}s" for value, seconds in row.values())
        print(f"{n_points:>5} {cells} {model.n_states_:>7}", flush=True)


def evidence_table(sizes, seed):
    print("(c) DPM evidence lower bounds on blobs (higher is tighter) and seconds")
    print(f"{'N':>5} {'BHC bound':>18} {'SparseFlat':>18} {'+ BHC tree':>18}")
    for n_points in sizes:
        X, _ = make_blobs(n_samples=n_points, centers=5, random_state=seed)
        start = time.perf_counter()
        bhc = BayesianHierarchicalClustering(covariance_type="full").fit(X)
        row = [(bhc.log_evidence_lower_bound_, time.perf_counter() - start)]
        start = time.perf_counter()
        model = SparseFlatClustering(bhc.dpm_energy()).fit(X)
        row.append((model.log_evidence_, time.perf_counter() - start))
        start = time.perf_counter()
        seeded = SparseFlatClustering(
            bhc.dpm_energy(), builder=lambda X, rs: [bhc.linkage_matrix_]).fit(X)
        row.append((seeded.log_evidence_, time.perf_counter() - start))
        cells = " ".join(f"{value:>10.2f} {seconds:>6.2f}s" for value, seconds in row)
        print(f"{n_points:>5} {cells}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exact-sizes", type=int, nargs="*", default=[14, 16, 18])
    parser.add_argument("--betas", type=float, nargs="*", default=[1.0, 4.0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[200, 500, 1000, 2000])
    parser.add_argument("--evidence-sizes", type=int, nargs="*", default=[100, 300])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-tp", type=int, default=500,
                        help="largest N for TransitivePropagation (O(N**3) per iteration)")
    args = parser.parse_args()
    exact_table(args.exact_sizes, args.seed, args.betas)
    scaling_table(args.sizes, args.seed, args.max_tp)
    evidence_table(args.evidence_sizes, args.seed)


if __name__ == "__main__":
    main()
