"""Best-first search (issue 14): exact MAP trees with a certificate, past the trellis.

(a) Equal to the trellis: for N = 8 ... 20, Dasgupta and hierarchical
    correlation clustering (HCC) on random and structured data, the MAP log
    potential of ``ExactHierarchicalClustering`` and of
    ``BestFirstHierarchicalClustering`` (with its gap and time). A search
    stopped by its budget is reported with its gap, never as exact.
(b) Dasgupta past the trellis: make_blobs and a planted hierarchy with
    noise, N = 24 ... 48: proven optimal or the gap at the budget, time,
    clusters stored, and the beam-search incumbent it started from.
(c) Ginkgo toy jets, N = 9 ... 30: the search's tree and certified gap
    next to beam search, the sparse trellis and (N <= 20) the exact MAP of
    the trellis (log likelihoods).

    python benchmarks/bench_best_first.py                      # all parts
    python benchmarks/bench_best_first.py --part b --sizes 32 40 --budget 600
"""
import argparse
import time
import warnings

import numpy as np
from sklearn.datasets import make_blobs

from sktrellis import (
    BestFirstHierarchicalClustering,
    ExactHierarchicalClustering,
    SparseTrellisClustering,
)
from sktrellis.baselines import BeamSearchHierarchicalClustering
from sktrellis.datasets import make_jets
from sktrellis.energies import CorrelationClustering, Dasgupta, GinkgoLikelihood


def planted_hierarchy(n_points, noise, rng):
    """Similarities from a random binary tree: depth of the pair's ancestor, plus noise.

    Points are split recursively at random positions; w_ij is the depth of
    the lowest common ancestor of i and j (deeper = more similar), scaled
    to [0, 1], plus uniform noise of amplitude ``noise``, symmetrised.
    """
    depth = np.zeros((n_points, n_points))

    def split(points, level):
        if len(points) < 2:
            return
        depth[np.ix_(points, points)] = level
        cut = rng.integers(1, len(points))
        split(points[:cut], level + 1)
        split(points[cut:], level + 1)

    split(rng.permutation(n_points), 0)
    similarity = depth / max(depth.max(), 1) + noise * rng.random((n_points, n_points))
    similarity = (similarity + similarity.T) / 2
    np.fill_diagonal(similarity, 0.0)
    return similarity


def problem(kind, data, n_points, seed):
    rng = np.random.default_rng(seed)
    if data == "random":
        X = rng.normal(size=(n_points, 2))
    elif data == "blobs":
        X, _ = make_blobs(n_samples=n_points, centers=3, random_state=seed)
    else:
        X = planted_hierarchy(n_points, 0.3, rng)
    if kind == "dasgupta":
        affinity = "precomputed" if data == "planted" else "rbf"
        return Dasgupta(affinity=affinity), X
    if data == "planted":
        return CorrelationClustering(affinity="precomputed"), X - np.mean(X)
    return CorrelationClustering(), X


def search(energy, X, budget):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = BestFirstHierarchicalClustering(energy, max_time=budget).fit(X)
    return model, time.perf_counter() - start


def part_a(sizes, budget):
    print("(a) against the exact trellis")
    print("| energy | data | N | trellis MAP | search MAP | equal | gap | trellis s | search s "
          "| clusters |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for kind in ("dasgupta", "hcc"):
        for data in ("random", "blobs", "planted"):
            for n_points in sizes:
                energy, X = problem(kind, data, n_points, seed=n_points)
                start = time.perf_counter()
                exact = ExactHierarchicalClustering(energy).fit(X).map_log_potential_
                trellis_time = time.perf_counter() - start
                model, search_time = search(energy, X, budget)
                equal = abs(model.map_log_potential_ - exact) <= 1e-9 * abs(exact)
                verdict = ("yes" if equal else "NO") + (
                    "" if model.optimality_gap_ == 0 else f" ({model.stop_reason_})"
                )
                print(
                    f"| {kind} | {data} | {n_points} | {exact:.6f} | "
                    f"{model.map_log_potential_:.6f} | {verdict} | "
                    f"{model.optimality_gap_:.3g} | {trellis_time:.2f} | {search_time:.2f} | "
                    f"{model.n_clusters_stored_} |",
                    flush=True,
                )


def part_b(sizes, budget):
    print("(b) Dasgupta past the trellis")
    print("| data | N | result | gap | incumbent gain | time s | clusters | splits |")
    print("|---|---|---|---|---|---|---|---|")
    for data in ("blobs", "planted", "random"):
        for n_points in sizes:
            energy, X = problem("dasgupta", data, n_points, seed=n_points)
            model, seconds = search(energy, X, budget)
            result = "proven optimal" if model.optimality_gap_ == 0 else model.stop_reason_
            gain = model.map_log_potential_ - model.incumbent_log_potential_
            print(
                f"| {data} | {n_points} | {result} | {model.optimality_gap_:.4g} | "
                f"{gain:.4g} | {seconds:.1f} | {model.n_clusters_stored_} | "
                f"{model.n_splits_} |",
                flush=True,
            )


def part_c(sizes, budget):
    print("(c) Ginkgo jets: search with its certified gap, beside beam search and sparse trellis")
    print("| N | beam | sparse trellis | search | gap | result | search s | clusters | exact MAP |")
    print("|---|---|---|---|---|---|---|---|---|")
    energy = GinkgoLikelihood()
    for n_points in sizes:
        # The published root mass (900) rarely showers into more than ~16 leaves.
        root_mass2 = 900.0 if n_points <= 16 else 2500.0 if n_points <= 20 else 6400.0
        X = make_jets(n_leaves=n_points, root_mass2=root_mass2, random_state=n_points)[0].momenta
        beam = BeamSearchHierarchicalClustering(energy, beam_width=n_points).fit(X)
        sparse = SparseTrellisClustering(energy).fit(X)
        model, seconds = search(energy, X, budget)
        result = "proven optimal" if model.optimality_gap_ == 0 else model.stop_reason_
        exact = "-"
        if n_points <= 20:
            exact = f"{ExactHierarchicalClustering(energy).fit(X).map_log_potential_:.3f}"
        print(
            f"| {n_points} | {beam.map_log_potential_:.3f} | {sparse.map_log_potential_:.3f} | "
            f"{model.map_log_potential_:.3f} | {model.optimality_gap_:.4g} | {result} | "
            f"{seconds:.1f} | {model.n_clusters_stored_} | {exact} |",
            flush=True,
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["a", "b", "c", "all"], default="all")
    parser.add_argument("--sizes-a", type=int, nargs="+", default=[8, 12, 16, 20])
    parser.add_argument("--sizes", type=int, nargs="+", default=[24, 32, 40, 48])
    parser.add_argument("--sizes-c", type=int, nargs="+", default=[9, 12, 16, 20, 30])
    parser.add_argument("--budget", type=float, default=600.0, help="seconds per search")
    args = parser.parse_args()
    if args.part in ("a", "all"):
        part_a(args.sizes_a, args.budget)
    if args.part in ("b", "all"):
        part_b(args.sizes, args.budget)
    if args.part in ("c", "all"):
        part_c(args.sizes_c, args.budget)


if __name__ == "__main__":
    main()
