"""beta="auto" of SparseFlatClustering: the two-sided requirement, and its cost.

Planted subtypes (``make_planted_subtypes``, three subtypes) and noise
(standard normal) at N = 30 and 60 with 2000 features, three seeds each.
Planted: the smallest within-subtype co-clustering (requirement >= 0.8)
and P(K = 3) (>= 0.5). Noise: the largest probability that three points
all co-cluster (requirement <= 0.5). Cost: the calibrated fit's time over
a fit at the calibrated beta_ given as a number, timed side by side.

    python benchmarks/bench_sparse_flat_calibration.py [n_features]
"""
import sys
import time

import numpy as np

from sktrellis import SparseFlatClustering
from sktrellis._temperature import largest_together
from sktrellis.datasets import make_planted_subtypes
from sktrellis.energies import CorrelationClustering


def main(n_features=2000):
    print("| data | N | seed | beta_ | cap bound | within min | P(K=3) | max together | "
          "auto s | fixed s | ratio |")
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for n_samples in (30, 60):
        for kind in ("planted", "noise"):
            for seed in range(3):
                if kind == "planted":
                    X, y = make_planted_subtypes(n_samples, n_features, random_state=seed)
                else:
                    X, y = np.random.default_rng(seed).normal(size=(n_samples, n_features)), None
                start = time.perf_counter()
                model = SparseFlatClustering(random_state=seed).fit(X)
                auto = time.perf_counter() - start
                start = time.perf_counter()
                SparseFlatClustering(CorrelationClustering(beta=model.beta_),
                                     random_state=seed).fit(X)
                fixed = time.perf_counter() - start
                pairwise = model.pairwise_probability_
                together = largest_together(pairwise)
                if y is not None:
                    within = min(pairwise[np.ix_(y == k, y == k)].min() for k in np.unique(y))
                    p_k = model.n_clusters_probability_[len(np.unique(y))]
                    shown = f"{within:.2f} | {p_k:.2f}"
                else:
                    shown = "- | -"
                cal = model.calibration_
                print(f"| {kind} | {n_samples} | {seed} | {model.beta_:.3g} | "
                      f"{cal['null_cap_bound']} | {shown} | {together:.2f} | {auto:.2f} | "
                      f"{fixed:.2f} | {auto / fixed:.1f} |", flush=True)


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
