"""SparseFlatClustering(beta="auto"): the two-sided requirement at N = 40-200, and its cost.

Planted subtypes (``make_planted_subtypes``) and noise (standard normal),
N x 2000 genes. Requirement: planted, each subtype together
(``together_probability``) and every within-subtype co-clustering >= 0.9,
across-subtype co-clustering low; noise, no three points that all
co-cluster above 0.5 (``largest_together``). Cost: the calibrated fit over
a plain fit at the ``beta_`` it chose given as a number (the default
family, grown around its MAP), timed side by side in one run; ``spanned``
is the calibrated fit's number of spanned partitions; ``plain MAP - MAP``
the log potential (at ``beta_``) the plain fit's MAP has over the
calibrated one's (at most 0 once the plain MAP joins the calibrated family;
``calibration_["plain_map_cap"]`` says when that lowered ``beta_``);
``log share >=`` is ``log_spanned_mass_lower_bound_``, the spanned
partitions' log Z less an upper bound on the log Z over every partition.

    python benchmarks/bench_sparse_flat_auto.py --sizes 40 80 --seeds 0 1 2
    python benchmarks/bench_sparse_flat_auto.py --sizes 16 20 24 30 --seeds 0 1 2 3 4 5 6 7
"""
import argparse
import time
import warnings

import numpy as np

from sktrellis import SparseFlatClustering
from sktrellis._calibration import largest_together
from sktrellis.datasets import make_planted_subtypes
from sktrellis.energies import CorrelationClustering


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[40, 80])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--features", type=int, default=2000)
    parser.add_argument("--kinds", nargs="+", default=["planted", "noise"])
    args = parser.parse_args()
    print("| data | N | seed | beta_ | bootstrap / cap | subtypes together (min) | within (min) | "
          "across (max) | largest three together | spanned | plain MAP - MAP | auto s | plain s | "
          "ratio | log share >= |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n_samples in args.sizes:
        for kind in args.kinds:
            for seed in args.seeds:
                if kind == "planted":
                    X, y = make_planted_subtypes(n_samples, args.features, random_state=seed)
                else:
                    X, y = np.random.default_rng(seed).normal(
                        size=(n_samples, args.features)), None
                start = time.process_time()
                model = SparseFlatClustering(random_state=seed).fit(X)
                auto = time.process_time() - start
                start = time.process_time()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    plain_model = SparseFlatClustering(CorrelationClustering(beta=model.beta_),
                                                       random_state=seed).fit(X)
                plain = time.process_time() - start
                pairwise = model.pairwise_probability_
                if y is not None:
                    groups = [np.flatnonzero(y == k) for k in np.unique(y)]
                    together = min(model.together_probability(g) for g in groups)
                    within = min(pairwise[np.ix_(g, g)].min() for g in groups)
                    across = max(pairwise[np.ix_(g, h)].max() for g in groups for h in groups
                                 if g[0] != h[0])
                    shown = f"{together:.3f} | {within:.3f} | {across:.3f}"
                else:
                    shown = "- | - | -"
                cal = model.calibration_
                cap = cal["null_cap"]
                print(f"| {kind} | {n_samples} | {seed} | {model.beta_:.3g} | "
                      f"{'bound' if cal['null_cap_bound'] else 'not bound'} "
                      f"({'none' if cap is None else f'{cap:.3g}'}) | {shown} | "
                      f"{largest_together(pairwise):.3f} | {model.n_partitions_:.2g} | "
                      f"{plain_model.map_log_potential_ - model.map_log_potential_:.3g} | "
                      f"{auto:.2f} | {plain:.2f} | {auto / plain:.1f} | "
                      f"{model.log_spanned_mass_lower_bound_:.3g} |", flush=True)


if __name__ == "__main__":
    main()
