"""Sparse trellis against greedy and beam search: the paper's Fig. 7 setting and scaling.

(a) Toy jets of 9 particles (``make_jets``, Ginkgo likelihood), as in Fig. 7
    of Greenberg et al. (AISTATS 2021): for each jet the exact MAP tree
    (``ExactHierarchicalClustering``), then the mean log-likelihood gap to
    it of greedy, beam search (width N(N-1)/2 = 36, the paper's) and sparse
    trellises of growing size, with their mean sparsity (spanned trees /
    (2N-3)!!) and time per jet.
(b) Dasgupta's cost on ``make_blobs`` from N = 50 to 2,000: time, vertices
    and MAP log potential of greedy, beam search and the sparse trellis
    (defaults), with scipy's average linkage as a reference.

    python benchmarks/bench_sparse.py                 # 100 jets, N up to 2,000
    python benchmarks/bench_sparse.py --jets 20 --sizes 50 200 500
"""
import argparse
import time

import numpy as np
from scipy.cluster.hierarchy import linkage
from sklearn.datasets import make_blobs

from sktrellis import ExactHierarchicalClustering
from sktrellis._engine.tree.conversion import merges_from_tree
from sktrellis.baselines import BeamSearchHierarchicalClustering, GreedyHierarchicalClustering
from sktrellis._engine.agglomerative.builders import replay_tree
from sktrellis.datasets import make_jets
from sktrellis.energies import Dasgupta, GinkgoLikelihood
from sktrellis import SparseTrellisClustering


def timed_fit(estimator, X):
    start = time.perf_counter()
    estimator.fit(X)
    return estimator, time.perf_counter() - start


def jets_table(n_jets, seed):
    energy = GinkgoLikelihood()
    methods = {
        "greedy": lambda: GreedyHierarchicalClustering(energy),
        "beam search, width 36": lambda: BeamSearchHierarchicalClustering(energy, beam_width=36),
        "sparse: beam seeds only": lambda: SparseTrellisClustering(energy, resplit_parts=0),
        "sparse: beam-36 seeds only": lambda: SparseTrellisClustering(
            energy, beam_width=36, n_seed_trees=36, resplit_parts=0
        ),
        "sparse: grown, 4 parts": lambda: SparseTrellisClustering(energy, resplit_parts=4),
        "sparse: grown, 6 parts": lambda: SparseTrellisClustering(energy, resplit_parts=6),
        "sparse: default (8 parts)": lambda: SparseTrellisClustering(energy),
        "sparse: sampled seeds, 8 parts": lambda: SparseTrellisClustering(
            energy, builder="sampled", random_state=seed
        ),
    }
    rows = {name: [] for name in methods}
    exact_seconds = []
    for jet in make_jets(n_jets, n_leaves=9, random_state=seed):
        exact, seconds = timed_fit(ExactHierarchicalClustering(energy, n_jobs=1), jet.momenta)
        exact_seconds.append(seconds)
        for name, make in methods.items():
            model, seconds = timed_fit(make(), jet.momenta)
            rows[name].append((
                exact.map_log_potential_ - model.map_log_potential_,
                getattr(model, "sparsity_", np.nan),
                getattr(model, "n_vertices_", np.nan),
                seconds,
            ))
    print(f"(a) {n_jets} toy jets with 9 particles: MAP log-likelihood gap to the exact trellis")
    print(f"{'method':<32} {'mean gap':>9} {'max gap':>8} {'exact':>6} {'sparsity':>9} "
          f"{'vertices':>9} {'ms/jet':>7}")
    print(f"{'exact trellis (511 vertices)':<32} {0:>9.3f} {0:>8.3f} {100:>5.0f}% {1:>9.4f} "
          f"{511:>9} {1e3 * np.mean(exact_seconds):>7.1f}")
    summary = {}
    for name, values in rows.items():
        gap, sparsity, vertices, seconds = np.array(values).T
        summary[name] = gap.mean()
        sparsity_cell = "-" if np.isnan(sparsity).all() else f"{sparsity.mean():.4f}"
        vertices_cell = "-" if np.isnan(vertices).all() else f"{vertices.mean():.0f}"
        print(f"{name:<32} {gap.mean():>9.3f} {gap.max():>8.3f} "
              f"{100 * np.mean(gap < 1e-9):>5.0f}% {sparsity_cell:>9} {vertices_cell:>9} "
              f"{1e3 * seconds.mean():>7.1f}", flush=True)
    default = summary["sparse: default (8 parts)"]
    print(f"default sparse trellis within 0.1 nats of exact on average: {default < 0.1} "
          f"({default:.3f}); better than beam search and greedy: "
          f"{default < min(summary['greedy'], summary['beam search, width 36'])}\n")


def tree_log_potential(energy, X, tree):
    return replay_tree(energy.merge_model(X), merges_from_tree(tree, len(X))).log_potential


def scaling_table(sizes, seed):
    energy = Dasgupta(tree_prior="uniform")   # the cost alone: log potential = -cost
    print("(b) Dasgupta's cost on make_blobs (5 centres): MAP log potential = -cost, "
          "and seconds per fit")
    print(f"{'N':>5} {'average link':>14} {'greedy':>14} {'s':>5} {'beam (5)':>14} {'s':>5} "
          f"{'sparse':>14} {'s':>6} {'vertices':>9} {'splits':>10} {'log10 trees':>11} "
          f"{'gain':>9} {'gain %':>7}")
    for n_points in sizes:
        X, _ = make_blobs(n_points, centers=5, cluster_std=1.5, random_state=seed)
        average = tree_log_potential(energy, X, linkage(X, "average"))
        greedy, greedy_s = timed_fit(GreedyHierarchicalClustering(energy), X)
        beam, beam_s = timed_fit(BeamSearchHierarchicalClustering(energy, beam_width=5), X)
        sparse, sparse_s = timed_fit(SparseTrellisClustering(energy), X)
        best = max(greedy.map_log_potential_, beam.map_log_potential_)
        gain = sparse.map_log_potential_ - best
        print(f"{n_points:>5} {average:>14.6g} {greedy.map_log_potential_:>14.6g} "
              f"{greedy_s:>5.1f} {beam.map_log_potential_:>14.6g} {beam_s:>5.1f} "
              f"{sparse.map_log_potential_:>14.6g} {sparse_s:>6.1f} {sparse.n_vertices_:>9,} "
              f"{sparse.n_splits_:>10,} {len(str(sparse.n_trees_)) - 1:>11} "
              f"{gain:>9.4g} {100 * gain / abs(best):>7.3f}", flush=True)
    print("gain: the sparse MAP's log potential minus the better of greedy and beam search "
          "(and in % of that tree's cost)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jets", type=int, default=100, help="number of toy jets in (a)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[50, 200, 500, 1000, 2000],
                        help="numbers of points in (b)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    start = time.perf_counter()
    jets_table(args.jets, args.seed)
    scaling_table(args.sizes, args.seed)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
