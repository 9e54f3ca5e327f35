"""Perturb-and-MAP pairwise marginals against the exact ones of the flat trellis.

The flat cluster trellis paper (Greenberg et al., NeurIPS 2018, Fig. 3)
compares the exact pairwise marginals of correlation clustering with the
Perturb-and-MAP estimates of Kappes et al. (2015). For each problem this
prints the error of ``PerturbAndMAPClustering`` against
``ExactFlatClustering(CorrelationClustering(affinity="precomputed", beta))``
on the same weights: mean and largest absolute error over the pairs, the mean
signed error (positive: overestimated), the share of pairs overestimated by
more than two Monte-Carlo standard errors, the gap of the log-partition
upper bound over the exact log Z, and seconds. More draws shrink the
Monte-Carlo part of the error (standard error <= 0.5 / sqrt(draws)); what
stays is the bias of one perturbation per pair. The sum-product extension of
transitive propagation, which approximates the same marginals, is shown for
comparison.

    python benchmarks/bench_perturb_and_map.py            # about 5 minutes
    python benchmarks/bench_perturb_and_map.py --sizes    # the wine rows only
"""
import argparse
import time
import warnings

import numpy as np
from sklearn.datasets import load_wine
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler

from sktrellis.baselines import PerturbAndMAPClustering, TransitivePropagation
from sktrellis.energies import CorrelationClustering
from sktrellis import ExactFlatClustering


def random_problem(n_points, seed):
    weights = np.random.default_rng(seed).normal(size=(n_points, n_points))
    return (weights + weights.T) / np.sqrt(2)


def wine_problem():
    """The 12 wines of examples/plot_perturb_and_map.py and their signed weights."""
    wine = load_wine()
    X = StandardScaler().fit_transform(wine.data[np.r_[0:4, 59:63, 130:134]])
    return CorrelationClustering(affinity="exponential", beta=1.0).weights(X)


def compare(weights, beta, n_perturbations, seed):
    n_points = len(weights)
    off = ~np.eye(n_points, dtype=bool)
    start = time.perf_counter()
    exact = ExactFlatClustering(
        CorrelationClustering(affinity="precomputed", beta=beta), n_jobs=1
    ).fit(weights)
    exact_s = time.perf_counter() - start
    start = time.perf_counter()
    model = PerturbAndMAPClustering(
        beta=beta, n_perturbations=n_perturbations, random_state=seed, n_jobs=1
    ).fit(weights)
    pm_s = time.perf_counter() - start
    truth = exact.pairwise_probability_[off]
    error = model.pairwise_probability_[off] - truth
    standard_error = np.sqrt(np.maximum(truth * (1 - truth), 1e-4) / n_perturbations)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (ConvergenceWarning, UserWarning))
        sum_product = TransitivePropagation(method="sum-product").fit(beta * weights)
    sp_error = np.abs(sum_product.pairwise_probability_[off] - truth)
    return {
        "mae": np.abs(error).mean(), "max": np.abs(error).max(), "signed": error.mean(),
        "over": np.mean(error > 2 * standard_error), "under": np.mean(error < -2 * standard_error),
        "bound gap": model.log_partition_upper_bound_ - exact.log_partition_,
        "pm s": pm_s, "exact s": exact_s, "sp mae": sp_error.mean(),
    }


def report(label, rows):
    mean = {key: np.mean([row[key] for row in rows]) for key in rows[0]}
    print(f"{label:<28} {mean['mae']:>6.3f} {np.max([r['max'] for r in rows]):>6.3f} "
          f"{mean['signed']:>+7.3f} {100 * mean['over']:>5.0f}% {100 * mean['under']:>5.0f}% "
          f"{mean['bound gap']:>7.2f} {mean['pm s']:>7.2f} {mean['exact s']:>7.3f} "
          f"{mean['sp mae']:>7.3f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[6, 10, 14])
    parser.add_argument("--betas", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    parser.add_argument("--draws", type=int, nargs="+", default=[100, 400, 1600])
    parser.add_argument("--instances", type=int, default=5)
    parser.add_argument("--wine-beta", type=float, default=12.0)
    args = parser.parse_args()
    print(f"{'problem':<28} {'MAE':>6} {'max':>6} {'signed':>7} {'over':>6} {'under':>6} "
          f"{'bound-Z':>7} {'P&M s':>7} {'exact s':>7} {'SP MAE':>7}")
    for n_points in args.sizes:
        for beta in args.betas:
            rows = [compare(random_problem(n_points, seed), beta, 400, seed)
                    for seed in range(args.instances)]
            report(f"random N={n_points} beta={beta} x{args.instances}", rows)
    weights = wine_problem()
    for n_draws in args.draws:
        report(f"wine N=12 beta={args.wine_beta:g} draws={n_draws}",
               [compare(weights, args.wine_beta, n_draws, 0)])


if __name__ == "__main__":
    main()
