"""Why the default family of SparseFlatClustering cannot be calibrated: the two-sided requirement.

(``beta="auto"`` now calibrates over a family of its own instead:
``bench_sparse_flat_auto.py``.)

(a) The calibration tried: ``_calibration.calibrate`` (the one calibration
of the exact estimators) over the spanned partitions -- the feature
bootstrap with each resample's greedy agglomeration partition as its
minimiser (20 sparse-trellis MAPs would cost 20 fits; the same search for
X and the resamples, so D is 0 when all agree), the exact expected loss
from the sparse trellis's co-clustering, and the reference-null cap with
``largest_together``. Planted subtypes (``make_planted_subtypes``) and
noise (standard normal), N = 30 and 60, 3 seeds each. Requirement:
planted within-subtype co-clustering >= 0.8 and P(K = 3) >= 0.5; noise no
three points together above 0.5. Cost: the calibrated fit over a fit at
the calibrated beta given as a number, timed side by side.

(b) The floor: the largest three-point co-clustering on noise at beta =
0.001 (BETA_RANGE[0]; the posterior near-uniform over the spanned
partitions), 0.1, 1 and 10. Above 0.5 at 0.001, no temperature can meet
the requirement: the spanned family, not beta, is what is proud.

    python benchmarks/bench_sparse_flat_calibration.py [n_features]
"""
import sys
import time

import numpy as np

from sktrellis import SparseFlatClustering
from sktrellis._engine.multicut import greedy_agglomeration
from sktrellis._calibration import (
    MAX_PARTITION_BOOTSTRAP, calibrate, co_clustering, flat_loss, largest_together)
from sktrellis.datasets import make_planted_subtypes
from sktrellis.energies import CorrelationClustering


def calibrated_fit(X, seed):
    """The rejected calibration: (model, beta, calibration record)."""
    model = SparseFlatClustering(random_state=seed)
    losses = {}

    def map_loss(unit, data, cancelled=None):
        if not losses:
            losses["X"] = flat_loss(unit, X)
        return losses["X"](co_clustering(greedy_agglomeration(unit.weights(data)).labels))

    energy, beta, (trellis, _), calibration = calibrate(
        CorrelationClustering(), X, seed, lambda scaled, calibrating: model._build_trellis(
            X, scaled), map_loss,
        lambda built, rng: losses["X"](built[0].pairwise_probability()),
        humility=lambda scaled, data: largest_together(
            model._build_trellis(data, scaled)[0].pairwise_probability()),
        max_resamples=MAX_PARTITION_BOOTSTRAP)
    return trellis, beta, calibration


def data(kind, n_samples, seed, n_features):
    if kind == "planted":
        return make_planted_subtypes(n_samples, n_features, random_state=seed)
    return np.random.default_rng(seed).normal(size=(n_samples, n_features)), None


def main(n_features=2000):
    print("(a) | data | N | seed | beta_ | null cap | within min | P(K=3) | max together | "
          "auto s | fixed s | ratio |")
    for n_samples in (30, 60):
        for kind in ("planted", "noise"):
            for seed in range(3):
                X, y = data(kind, n_samples, seed, n_features)
                start = time.perf_counter()
                trellis, beta, calibration = calibrated_fit(X, seed)
                auto = time.perf_counter() - start
                start = time.perf_counter()
                SparseFlatClustering(CorrelationClustering(beta=beta), random_state=seed).fit(X)
                fixed = time.perf_counter() - start
                pairwise = trellis.pairwise_probability()
                if y is not None:
                    by_count = trellis.log_partition_by_count()
                    p_k = np.exp(by_count[len(np.unique(y))] - trellis.log_partition)
                    within = min(pairwise[np.ix_(y == k, y == k)].min() for k in np.unique(y))
                    shown = f"{within:.2f} | {p_k:.2f}"
                else:
                    shown = "- | -"
                cap = calibration["null_cap"]
                print(f"| {kind} | {n_samples} | {seed} | {beta:.3g} | "
                      f"{'none humble' if cap is None else f'{cap:.3g}'} | {shown} | "
                      f"{largest_together(pairwise):.2f} | {auto:.2f} | {fixed:.2f} | "
                      f"{auto / fixed:.1f} |", flush=True)
    print("(b) | N | seed | together at beta 0.001 | 0.1 | 1 | 10 | spanned partitions |")
    for n_samples in (30, 60):
        for seed in range(3):
            X, _ = data("noise", n_samples, seed, n_features)
            row = []
            for beta in (1e-3, 0.1, 1.0, 10.0):
                model = SparseFlatClustering(CorrelationClustering(beta=beta),
                                             random_state=seed).fit(X)
                row.append(f"{largest_together(model.pairwise_probability_):.2f}")
            print(f"| {n_samples} | {seed} | {' | '.join(row)} | {model.n_partitions_:.2g} |",
                  flush=True)


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
