"""Transitive propagation on noisy reads of random bit patterns (Kumar & Levy 2015).

Part 1 is the experiment of the paper's Fig. 4: K = 10, 20, 40 random
templates of L = 30 bits, N = 10 K reads with each bit flipped with
probability p_e = 0.01 ... 0.15, and the number of clusters transitive
propagation (TP) finds, mean +- std over --simulations runs (the paper
averages 100). For reference it also shows the clusters of the pairwise
calls alone (connected components of log f0/f1 > 0, no transitivity), the
adjusted Rand index of TP against the templates, how many runs met the
stopping rule, iterations and seconds per run.

Part 2 measures how far TP's answer is from the optimum of its own
objective (the sum of log f0/f1 over the pairs inside clusters) on problems
small enough for the exact flat trellis:
``ExactFlatClustering(CorrelationClustering(affinity="precomputed"))`` on the
same matrix maximises exactly that sum over all Bell(N) partitions.

Part 3 measures the sum-product extension (``method="sum-product"``): the
mean absolute error of its pairwise co-clustering probabilities against
the exact ones of the same distribution, P(partition) ~ exp(sum of log
f0/f1 inside clusters) (``ExactFlatClustering(...).pairwise_probability_``),
at N <= 16, and its speed at N = 500.

Part 4 (issue 20) gives TP similarities as AffinityPropagation takes them,
negative squared Euclidean distances of blobs: with the default threshold=0
(X read as log likelihood ratios, all negative) and with threshold=-r**2
(pairs closer than r attract), against AffinityPropagation on the same
matrix. ``--only-similarities`` runs this part alone.

    python benchmarks/bench_transitive_propagation.py          # about 3 minutes
    python benchmarks/bench_transitive_propagation.py --simulations 100 --exact-sizes 8 12 16 20
"""
import argparse
import time
import warnings

import numpy as np
from scipy.sparse.csgraph import connected_components
from sklearn.cluster import AffinityPropagation
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import adjusted_rand_score, euclidean_distances

from sktrellis.baselines import TransitivePropagation
from sktrellis.datasets import make_bit_patterns
from sktrellis.energies import CorrelationClustering
from sktrellis import ExactFlatClustering


def pairwise_clusters(llr):
    """Number of connected components of the pairs with log f0/f1 > 0."""
    return connected_components(llr > 0, directed=False)[0]


def objective(llr, labels):
    """Sum of log f0/f1 over the pairs inside clusters."""
    together = labels[:, None] == labels[None, :]
    return float(np.triu(np.where(together, llr, 0.0), 1).sum())


def fit_quietly(llr):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return TransitivePropagation().fit(llr)


def figure_4(templates, error_rates, n_simulations):
    print(f"Fig. 4: clusters found from N = 10 K reads of K templates, L = 30 bits, "
          f"{n_simulations} runs per row")
    print(f"{'K':>3} {'p_e':>5} {'TP clusters':>13} {'pairwise only':>14} {'TP ARI':>7} "
          f"{'converged':>10} {'iterations':>11} {'s/run':>7}")
    for n_templates in templates:
        for error_rate in error_rates:
            found, pairwise, ari, converged, iterations, seconds = [], [], [], 0, [], []
            for run in range(n_simulations):
                _, truth, llr = make_bit_patterns(
                    n_templates, error_rate=error_rate, random_state=1000 * n_templates + run
                )
                start = time.perf_counter()
                model = fit_quietly(llr)
                seconds.append(time.perf_counter() - start)
                found.append(model.labels_.max() + 1)
                pairwise.append(pairwise_clusters(llr))
                ari.append(adjusted_rand_score(truth, model.labels_))
                converged += model.converged_
                iterations.append(model.n_iter_)
            print(f"{n_templates:>3} {error_rate:>5.2f} "
                  f"{np.mean(found):>6.1f} +- {np.std(found):<4.1f} "
                  f"{np.mean(pairwise):>7.1f} +- {np.std(pairwise):<4.1f} "
                  f"{np.mean(ari):>7.3f} {converged:>5}/{n_simulations:<4} "
                  f"{np.mean(iterations):>11.1f} {np.mean(seconds):>7.2f}", flush=True)


def exact_gap(sizes, error_rates, n_instances):
    print(f"\nTP against the exact optimum of its objective (flat trellis), "
          f"{n_instances} instances per row, 4 reads per template")
    print(f"{'N':>3} {'p_e':>5} {'TP optimal':>11} {'mean gap':>9} {'max gap':>8} "
          f"{'TP clusters':>12} {'MAP clusters':>13} {'truth gap':>10} {'TP s':>6} "
          f"{'exact s':>8}")
    for n_points in sizes:
        for error_rate in error_rates:
            gaps, tp_clusters, map_clusters, truth_gaps, tp_seconds, exact_seconds = (
                [], [], [], [], [], []
            )
            optimal = 0
            for instance in range(n_instances):
                _, truth, llr = make_bit_patterns(
                    n_points // 4, reads_per_template=4, error_rate=error_rate,
                    random_state=10_000 + 100 * n_points + instance,
                )
                start = time.perf_counter()
                model = fit_quietly(llr)
                tp_seconds.append(time.perf_counter() - start)
                start = time.perf_counter()
                exact = ExactFlatClustering(
                    CorrelationClustering(affinity="precomputed", beta=1.0)
                ).fit(llr)
                exact_seconds.append(time.perf_counter() - start)
                best = exact.map_log_potential_
                tolerance = 1e-9 * max(1.0, abs(best))
                assert model.objective_ <= best + tolerance
                optimal += best - model.objective_ <= tolerance
                gaps.append(best - model.objective_)
                truth_gaps.append(best - objective(llr, truth))
                tp_clusters.append(model.labels_.max() + 1)
                map_clusters.append(exact.labels_.max() + 1)
            # Rounding can leave the optimum a hair below an equal objective.
            gaps = np.maximum(np.array(gaps), 0.0)
            truth_gaps = np.maximum(np.array(truth_gaps), 0.0)
            print(f"{n_points:>3} {error_rate:>5.2f} {optimal:>5}/{n_instances:<5} "
                  f"{gaps.mean():>9.3f} {gaps.max():>8.3f} {np.mean(tp_clusters):>12.1f} "
                  f"{np.mean(map_clusters):>13.1f} {np.mean(truth_gaps):>10.3f} "
                  f"{np.mean(tp_seconds):>6.3f} {np.mean(exact_seconds):>8.3f}", flush=True)


def sum_product(sizes, error_rates, n_instances, speed_n):
    print(f"\nSum-product pairwise marginals against the exact ones (flat trellis), "
          f"{n_instances} instances per row, 4 reads per template")
    print(f"{'N':>3} {'p_e':>5} {'mean |error|':>13} {'max |error|':>12} {'converged':>10} "
          f"{'iterations':>11} {'TP s':>7} {'exact s':>8}")
    for n_points in sizes:
        for error_rate in error_rates:
            errors, worst, converged, iterations, tp_s, exact_s = [], [], 0, [], [], []
            for instance in range(n_instances):
                _, _, llr = make_bit_patterns(
                    n_points // 4, reads_per_template=4, error_rate=error_rate,
                    random_state=20_000 + 100 * n_points + instance,
                )
                start = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    model = TransitivePropagation(method="sum-product").fit(llr)
                tp_s.append(time.perf_counter() - start)
                start = time.perf_counter()
                exact = ExactFlatClustering(
                    CorrelationClustering(affinity="precomputed", beta=1.0)
                ).fit(llr)
                exact_s.append(time.perf_counter() - start)
                error = np.abs(model.pairwise_probability_ - exact.pairwise_probability_)
                off = ~np.eye(n_points, dtype=bool)
                errors.append(error[off].mean())
                worst.append(error.max())
                converged += model.converged_
                iterations.append(model.n_iter_)
            print(f"{n_points:>3} {error_rate:>5.2f} {np.mean(errors):>13.4f} "
                  f"{np.max(worst):>12.4f} {converged:>5}/{n_instances:<4} "
                  f"{np.mean(iterations):>11.1f} {np.mean(tp_s):>7.3f} {np.mean(exact_s):>8.3f}",
                  flush=True)
    _, _, llr = make_bit_patterns(speed_n // 10, reads_per_template=10, error_rate=0.05,
                                  random_state=1)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = TransitivePropagation(method="sum-product").fit(llr)
    seconds = time.perf_counter() - start
    print(f"N = {speed_n}: {seconds:.1f} s, {model.n_iter_} iterations "
          f"({seconds / model.n_iter_:.2f} s each), converged: {model.converged_}")


def similarities(radii, n_seeds):
    print(f"\nSimilarities -||x_i - x_j||**2 of blobs (issue 20), mean over {n_seeds} seeds: "
          "ARI / clusters found")
    problems = [
        ("3 separated blobs, N=40", dict(n_samples=40, centers=[(-6, 0), (6, 0), (0, 8)])),
        ("make_blobs(100, centers=4)", dict(n_samples=100, centers=4)),
        ("make_blobs(200, centers=4)", dict(n_samples=200, centers=4)),
    ]
    columns = ["threshold=0"] + [f"-{r:g}**2" for r in radii] + ["AffinityProp."]
    print(f"{'data':<28}" + "".join(f"{c:>15}" for c in columns) + f"{'warned at 0':>13}")
    for name, params in problems:
        results = {column: [] for column in columns}
        truths, warned = [], 0
        for seed in range(n_seeds):
            X, truth = make_blobs(**params, random_state=seed)
            S = -euclidean_distances(X, squared=True)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                labels = TransitivePropagation().fit(S).labels_
            warned += any(issubclass(w.category, UserWarning)
                          and "cluster of its own" in str(w.message) for w in caught)
            results["threshold=0"].append(labels)
            for r, column in zip(radii, columns[1:]):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    results[column].append(TransitivePropagation(threshold=-r**2).fit(S).labels_)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                results["AffinityProp."].append(
                    AffinityPropagation(affinity="precomputed", random_state=0).fit(S).labels_
                )
            truths.append(truth)
        cells = []
        for column in columns:
            ari = np.mean([adjusted_rand_score(t, l) for t, l in zip(truths, results[column])])
            found = np.mean([l.max() + 1 for l in results[column]])
            cells.append(f"{ari:.2f} / {found:5.1f}")
        print(f"{name:<28}" + "".join(f"{c:>15}" for c in cells)
              + f"{warned:>8}/{n_seeds}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--templates", type=int, nargs="+", default=[10, 20, 40])
    parser.add_argument("--error-rates", type=float, nargs="+",
                        default=[0.01, 0.05, 0.10, 0.15])
    parser.add_argument("--simulations", type=int, default=5)
    parser.add_argument("--exact-sizes", type=int, nargs="+", default=[8, 12, 16])
    parser.add_argument("--exact-error-rates", type=float, nargs="+",
                        default=[0.05, 0.10, 0.15, 0.20])
    parser.add_argument("--exact-instances", type=int, default=10)
    parser.add_argument("--speed-n", type=int, default=500)
    parser.add_argument("--radii", type=float, nargs="+", default=[2, 3, 4, 5, 6])
    parser.add_argument("--similarity-seeds", type=int, default=5)
    parser.add_argument("--only-similarities", action="store_true")
    args = parser.parse_args()
    start = time.perf_counter()
    if args.only_similarities:
        similarities(args.radii, args.similarity_seeds)
        return
    figure_4(args.templates, args.error_rates, args.simulations)
    exact_gap(args.exact_sizes, args.exact_error_rates, args.exact_instances)
    sum_product(args.exact_sizes, args.exact_error_rates, args.exact_instances, args.speed_n)
    similarities(args.radii, args.similarity_seeds)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
