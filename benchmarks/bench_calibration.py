"""Cost and behaviour of ``beta="auto"`` (issue 19), in one run.

Tables on the planted-subtype data of issue 19 (three subtypes, each
shifting its own 150 of 3000 genes by +-1.5) and on i.i.d. normal noise of
the same shape:

- cost: the calibrated fit (``beta="auto"``, the default) against a plain
  fit at the beta it chose, interleaved, for N = 14, 18, 20 (hierarchical
  and flat) on the planted data (seed 7) and on noise, with the number of
  bootstrap resamples the calibration drew, median of ``--repeats``, on
  all cores or ``--n-jobs``;
- behaviour over ``--seeds`` seeds at ``--check-n`` points: the planted
  subtypes' smallest support and, on noise, the largest support of a
  cluster of 3..N-1 points (hierarchical); P(K=3), the smallest
  within-subtype and largest across-subtype co-clustering, and on noise
  the MAP partition's probability (flat);
- with ``--prior-n``, the noise requirement over trees for each size given,
  under the uniform and the Yule prior over tree shapes.

    python benchmarks/bench_calibration.py
    python benchmarks/bench_calibration.py --hier-n 14 18 --seeds 5 --repeats 1
    python benchmarks/bench_calibration.py --seeds 20 --prior-n 12 14 16 --hier-n --flat-n
    python benchmarks/bench_calibration.py --seeds 0 --hier-n --flat-n 14 18 20 --n-jobs 1 2
"""
import argparse
import time

import numpy as np

from sktrellis import ExactFlatClustering, ExactHierarchicalClustering
from sktrellis import _temperature as temperature
from sktrellis._engine.tree.conversion import masks_from_merges
from sktrellis.datasets import make_planted_subtypes
from sktrellis.energies import CorrelationClustering, Dasgupta


# How many resamples the calibration drew: the length of the list its
# stopping rule saw last.
last_excess = []
_enough_resamples = temperature._enough_resamples


def _counting_enough_resamples(excess, max_resamples):
    last_excess[:] = excess
    return _enough_resamples(excess, max_resamples)


temperature._enough_resamples = _counting_enough_resamples


def timed(fit):
    start = time.perf_counter()
    model = fit()
    return time.perf_counter() - start, model


def cost_table(estimator, energy_class, sizes, repeats, n_jobs=None):
    print(f"\n{estimator.__name__}: calibrated fit vs plain fit at the chosen beta "
          f"(median of {repeats}, n_jobs={n_jobs}); B = bootstrap resamples drawn")
    print(f"{'data':>8} {'N':>4} {'beta_':>9} {'B':>4} {'plain s':>9} {'auto s':>9} "
          f"{'ratio':>7}")
    for n_samples in sizes:
        for name, X in (("planted", make_planted_subtypes(n_samples, random_state=7)[0]),
                        ("noise", np.random.default_rng(7).normal(size=(n_samples, 3000)))):
            plain_times, auto_times = [], []
            for _ in range(repeats):
                last_excess.clear()
                auto_time, auto = timed(lambda: estimator(verbose=0, n_jobs=n_jobs).fit(X))
                n_resamples = len(last_excess)
                plain_time, _ = timed(lambda: estimator(
                    energy_class(beta=auto.beta_), verbose=0, n_jobs=n_jobs).fit(X))
                auto_times.append(auto_time)
                plain_times.append(plain_time)
            plain, calibrated = np.median(plain_times), np.median(auto_times)
            print(f"{name:>8} {n_samples:>4} {auto.beta_:>9.3g} {n_resamples:>4} {plain:>9.2f} "
                  f"{calibrated:>9.2f} {calibrated / plain:>7.1f}", flush=True)


def largest_support(model, n_samples):
    return max((p for members, p in model.most_probable_clusters(5, min_size=3)
                if len(members) < n_samples), default=0.0)


def behaviour_table(n_samples, n_seeds):
    print(f"\nbehaviour at N = {n_samples}, 3000 features, seeds 0..{n_seeds - 1}")
    print(f"{'seed':>4} | {'hier: beta_':>11} {'min group':>9} | {'noise beta_':>11} "
          f"{'max 3..N-1':>10} | {'flat: beta_':>11} {'P(K=3)':>7} {'within':>7} "
          f"{'across':>7} | {'noise beta_':>11} {'P(MAP)':>7}")
    failures = {"hier planted": 0, "hier noise": 0, "flat planted": 0, "flat noise": 0}
    for seed in range(n_seeds):
        X, groups = make_planted_subtypes(n_samples, random_state=seed)
        null = np.random.default_rng(seed).normal(size=(n_samples, 3000))
        tree = ExactHierarchicalClustering(n_clusters=3).fit(X)
        group_support = min(tree.cluster_probability(np.flatnonzero(groups == k))
                            for k in range(3))
        null_tree = ExactHierarchicalClustering().fit(null)
        null_support = largest_support(null_tree, n_samples)
        flat = ExactFlatClustering().fit(X)
        same = groups[:, None] == groups[None, :]
        within = flat.pairwise_probability_[same].min()
        across = flat.pairwise_probability_[~same].max()
        k3 = flat.n_clusters_probability_[3]
        null_flat = ExactFlatClustering().fit(null)
        map_probability = np.exp(null_flat.map_log_potential_ - null_flat.log_partition_)
        failures["hier planted"] += group_support < 0.9
        failures["hier noise"] += null_support > 0.5
        failures["flat planted"] += not (k3 >= 0.5 and within >= 0.8 and across <= 0.2)
        failures["flat noise"] += not (null_flat.labels_.max() == 0 or map_probability <= 0.5)
        print(f"{seed:>4} | {tree.beta_:>11.3g} {group_support:>9.3f} | {null_tree.beta_:>11.3g} "
              f"{null_support:>10.3f} | {flat.beta_:>11.3g} {k3:>7.3f} {within:>7.3f} "
              f"{across:>7.3f} | {null_flat.beta_:>11.3g} {map_probability:>7.3f}", flush=True)
    print("requirement failures: " + ", ".join(f"{k} {v}/{n_seeds}" for k, v in failures.items()))


def bootstrap_frequency(X, members, n_resamples=200, seed=12345):
    """How often the minimum-loss trees of column resamples of X hold the cluster."""
    n_samples, n_features = X.shape
    target = sum(1 << int(i) for i in members)
    unit = temperature._unit_loss(Dasgupta())
    rng = np.random.RandomState(seed)
    hits = 0
    for _ in range(n_resamples):
        merges = temperature._search_map_merges(unit, X[:, rng.randint(n_features, size=n_features)])
        hits += target in {int(mask) for mask in masks_from_merges(merges, n_samples)}
    return hits / n_resamples


def tree_prior_table(sizes, n_seeds):
    """Noise: clusters of 3..N-1 points above 0.5, calibrated, by prior over tree shapes.

    Each cluster above 0.5 under the default (Yule) prior is listed with its
    frequency among the minimum-loss trees of 200 column resamples (a fresh
    stream, not the calibration's): where that is above 0.5 too, resampling
    the features supports the cluster as much as the posterior does.
    """
    print(f"\ntrees on noise (3000 features), seeds 0..{n_seeds - 1}: the largest support "
          "of a cluster of 3..N-1 points, by tree prior")
    print(f"{'N':>4} | {'uniform: > 0.5':>15} {'largest':>8} | {'yule: > 0.5':>12} "
          f"{'largest':>8}")
    exceptions = []
    for n_samples in sizes:
        row = []
        for tree_prior in ("uniform", "yule"):
            supports = []
            for seed in range(n_seeds):
                X = np.random.default_rng(seed).normal(size=(n_samples, 3000))
                model = ExactHierarchicalClustering(Dasgupta(tree_prior=tree_prior)).fit(X)
                supports.append(largest_support(model, n_samples))
                if tree_prior == "yule" and supports[-1] > 0.5:
                    members = next(members for members, _ in model.most_probable_clusters(
                        5, min_size=3) if len(members) < n_samples)
                    exceptions.append((n_samples, seed, supports[-1], members,
                                       bootstrap_frequency(X, members)))
            supports = np.array(supports)
            row.append(f"{int(np.sum(supports > 0.5)):>{8 if row else 11}}/{n_seeds:<3} "
                       f"{supports.max():>8.3f}")
        print(f"{n_samples:>4} | {row[0]} | {row[1]}", flush=True)
    for n_samples, seed, support, members, frequency in exceptions:
        print(f"  yule, N = {n_samples}, seed {seed}: all points but "
              f"{sorted(set(range(n_samples)) - set(members))} at {support:.3f}, bootstrap "
              f"frequency {frequency:.3f} (200 resamples)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hier-n", type=int, nargs="*", default=[14, 18, 20])
    parser.add_argument("--flat-n", type=int, nargs="*", default=[14, 18, 20])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n-jobs", type=int, nargs="*", default=[None],
                        help="kernel threads of the cost tables (several: one table each; "
                             "1 gives ratios that hardly depend on the machine's load)")
    parser.add_argument("--check-n", type=int, default=12)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--prior-n", type=int, nargs="*", default=[],
                        help="sizes of the noise table by tree prior (e.g. 12 14 16)")
    args = parser.parse_args()
    if args.seeds:
        behaviour_table(args.check_n, args.seeds)
    if args.prior_n:
        tree_prior_table(args.prior_n, args.seeds)
    for n_jobs in args.n_jobs:
        if args.hier_n:
            cost_table(ExactHierarchicalClustering, Dasgupta, args.hier_n, args.repeats, n_jobs)
        if args.flat_n:
            cost_table(ExactFlatClustering, CorrelationClustering, args.flat_n, args.repeats,
                       n_jobs)


if __name__ == "__main__":
    main()
