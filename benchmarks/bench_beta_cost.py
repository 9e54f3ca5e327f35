"""What beta="auto" costs, and the fast path: calibrate once, then fix beta.

The default temperature beta="auto" calibrates each fit by a bootstrap over
the feature columns (20-100 minimum-loss trees and a few trellis passes).
Fitting many datasets (``fit_many``) or many candidates (grid search), the
calibration is paid on every fit; with datasets of one kind, calibrating on
one and fixing ``beta`` for the rest skips it. This times, side by side in
one run (process CPU time, so that the figures are ratios on a loaded
machine), one 14 x 20 fit with beta="auto" against one with the calibrated
beta fixed, and ``fit_many`` over --n-datasets such datasets both ways.

    PYTHONPATH=src python benchmarks/bench_beta_cost.py [--n-datasets 20] [--repeats 3]
"""
import argparse
import time

import numpy as np

from sktrellis import ExactHierarchicalClustering, fit_many
from sktrellis.energies import Dasgupta


def dataset(seed, n_points=14, n_features=20):
    """Three planted groups of points, each group shifted on its own 5 features."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_points, n_features))
    groups = np.arange(n_points) % 3
    for group in range(3):
        X[groups == group, 5 * group : 5 * group + 5] += 2.0
    return X


def cpu(call):
    start = time.process_time()
    value = call()
    return time.process_time() - start, value


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-datasets", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    X = dataset(0)
    calibrated = ExactHierarchicalClustering(verbose=0, n_jobs=1).fit(X)
    beta = calibrated.beta_
    fixed = ExactHierarchicalClustering(Dasgupta(beta=beta), verbose=0, n_jobs=1)
    auto = ExactHierarchicalClustering(verbose=0, n_jobs=1)
    single = {"auto": [], "fixed": []}
    for _ in range(args.repeats):
        single["auto"].append(cpu(lambda: auto.fit(X))[0])
        single["fixed"].append(cpu(lambda: fixed.fit(X))[0])
    same = np.array_equal(auto.fit(X).linkage_matrix_, fixed.fit(X).linkage_matrix_)
    print(f"one 14 x 20 fit, CPU s (median of {args.repeats}): beta='auto' "
          f"{np.median(single['auto']):.3f}, beta={beta:.3g} fixed "
          f"{np.median(single['fixed']):.3f}, ratio "
          f"{np.median(single['auto']) / np.median(single['fixed']):.1f}x; "
          f"same MAP tree: {same}")
    datasets = [dataset(seed) for seed in range(1, args.n_datasets + 1)]
    t_auto, fits_auto = cpu(lambda: fit_many(auto, datasets, result="beta_"))
    t_fixed, _ = cpu(lambda: fit_many(fixed, datasets, result="labels_"))
    betas = np.array(fits_auto)
    print(f"fit_many over {args.n_datasets} such datasets, CPU s: beta='auto' {t_auto:.2f}, "
          f"calibrated once and fixed {t_fixed:.2f} (plus {np.median(single['auto']):.2f} "
          f"for the one calibration), ratio {t_auto / t_fixed:.1f}x; per-dataset beta_ "
          f"{betas.min():.3g}-{betas.max():.3g} (median {np.median(betas):.3g}) against "
          f"the fixed {beta:.3g}")


if __name__ == "__main__":
    main()
