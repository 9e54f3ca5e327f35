"""Cost and behaviour of ``beta="auto"``, in one run.

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
  under the uniform and the Yule prior over tree shapes;
- with ``--regime-seeds``, the regimes the feature bootstrap does not cover
  (few features, copies of a column) and small real sets (iris, wine);
- with ``--no-null-cap``, all of it without the reference-null cap on
  beta (``N_REFERENCE_DRAWS = 0``), for the figures before it;
- with ``--screen-n``, the tree calibration with the reference-null cap
  screened by posterior draws against the exact cap (one thread);
- with ``--flat-margin``, ``ExactFlatClustering()`` on planted subtypes
  and noise at ``--check-n`` points under other levels and numbers of
  references of the cap, their caps combined by the minimum or the median;
- with ``--sparse-n``, ``SparseTrellisClustering()`` on planted subtypes
  and noise of 2000 genes, and the cost of its calibration.

    python benchmarks/bench_calibration.py
    python benchmarks/bench_calibration.py --hier-n 14 18 --seeds 5 --repeats 1
    python benchmarks/bench_calibration.py --seeds 20 --prior-n 12 14 16 --hier-n --flat-n
    python benchmarks/bench_calibration.py --seeds 0 --hier-n --flat-n 14 18 20 --n-jobs 1 2
    python benchmarks/bench_calibration.py --seeds 10 --check-n 12 --regime-seeds 5 \
        --sparse-n 40 80 --hier-n --flat-n
    python benchmarks/bench_calibration.py --seeds 0 --hier-n --flat-n --flat-margin 60
"""
import argparse
import itertools
import time
import warnings

import numpy as np

from sklearn.datasets import load_iris, load_wine
from sklearn.preprocessing import StandardScaler

from sktrellis import ExactFlatClustering, ExactHierarchicalClustering, SparseTrellisClustering
from sktrellis import _calibration as temperature
from sktrellis._engine.tree.conversion import masks_from_merges
from sktrellis.datasets import make_planted_subtypes
from sktrellis.energies import CorrelationClustering, Dasgupta


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
                auto_time, auto = timed(lambda: estimator(verbose=0, n_jobs=n_jobs).fit(X))
                n_resamples = auto.calibration_["n_resamples"]
                plain_time, _ = timed(lambda: estimator(
                    energy_class(beta=auto.beta_), verbose=0, n_jobs=n_jobs).fit(X))
                auto_times.append(auto_time)
                plain_times.append(plain_time)
            plain, calibrated = np.median(plain_times), np.median(auto_times)
            print(f"{name:>8} {n_samples:>4} {auto.beta_:>9.3g} {n_resamples:>4} {plain:>9.2f} "
                  f"{calibrated:>9.2f} {calibrated / plain:>7.1f}", flush=True)


def screen_table(sizes, n_jobs=1):
    """The tree calibration with the screened cap against the exact cap, side by side.

    ``SCREEN_MARGIN = 2`` sends every check of the reference-null cap to the
    exact outside pass (the calibration before the screen); both runs must
    give the same beta_. A plain fit at that beta for the ratios.
    """
    print(f"\nExactHierarchicalClustering, cap screened by 1000 draws vs exact, n_jobs={n_jobs}")
    print(f"{'data':>8} {'N':>4} {'beta_':>9} {'fits':>4} {'plain s':>8} {'exact s':>8} "
          f"{'screen s':>8} {'exact x':>7} {'screen x':>8} {'same':>5}")
    margin = temperature.SCREEN_MARGIN
    for n_samples in sizes:
        for name, X in (("planted", make_planted_subtypes(n_samples, random_state=7)[0]),
                        ("noise", np.random.default_rng(7).normal(size=(n_samples, 3000)))):
            temperature.SCREEN_MARGIN = 2.0
            exact_time, exact = timed(
                lambda: ExactHierarchicalClustering(verbose=0, n_jobs=n_jobs).fit(X))
            temperature.SCREEN_MARGIN = margin
            screen_time, screened = timed(
                lambda: ExactHierarchicalClustering(verbose=0, n_jobs=n_jobs).fit(X))
            plain_time, _ = timed(lambda: ExactHierarchicalClustering(
                Dasgupta(beta=screened.beta_), verbose=0, n_jobs=n_jobs).fit(X))
            print(f"{name:>8} {n_samples:>4} {screened.beta_:>9.3g} "
                  f"{screened.calibration_['n_reference_fits']:>4} {plain_time:>8.2f} "
                  f"{exact_time:>8.2f} {screen_time:>8.2f} {exact_time / plain_time:>7.1f} "
                  f"{screen_time / plain_time:>8.1f} {str(exact.beta_ == screened.beta_):>5}",
                  flush=True)


def largest_support(model, n_samples):
    return max((p for members, p in model.most_probable_clusters(5, min_size=3)
                if len(members) < n_samples), default=0.0)


def largest_together(pairwise):
    """Largest co-clustering that three points all reach with each other."""
    return max(min(pairwise[i, j], pairwise[i, k], pairwise[j, k])
               for i, j, k in itertools.combinations(range(len(pairwise)), 3))


def behaviour_table(n_samples, n_seeds):
    print(f"\nbehaviour at N = {n_samples}, 3000 features, seeds 0..{n_seeds - 1}")
    print(f"{'seed':>4} | {'hier: beta_':>11} {'min group':>9} | {'noise beta_':>11} "
          f"{'max 3..N-1':>10} | {'flat: beta_':>11} {'P(K=3)':>7} {'within':>7} "
          f"{'across':>7} | {'noise beta_':>11} {'P(MAP)':>7} {'3 togeth.':>9}")
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
        together = largest_together(null_flat.pairwise_probability_)
        failures["hier planted"] += group_support < 0.9
        failures["hier noise"] += null_support > 0.5
        failures["flat planted"] += not (k3 >= 0.5 and within >= 0.8 and across <= 0.2)
        # Noise: no three points that all co-cluster above 0.5 (P(MAP) alone
        # passed while ten noise points co-clustered at 0.7-0.93).
        failures["flat noise"] += together > 0.5
        print(f"{seed:>4} | {tree.beta_:>11.3g} {group_support:>9.3f} | {null_tree.beta_:>11.3g} "
              f"{null_support:>10.3f} | {flat.beta_:>11.3g} {k3:>7.3f} {within:>7.3f} "
              f"{across:>7.3f} | {null_flat.beta_:>11.3g} {map_probability:>7.3f} "
              f"{together:>9.3f}", flush=True)
    print("requirement failures: " + ", ".join(f"{k} {v}/{n_seeds}" for k, v in failures.items()))


def _median_null_cap(humility, X, groups, rng, start, upper=temperature.BETA_RANGE[1]):
    """``reference_null_cap`` with the median of the references' caps instead of their minimum."""
    caps, fits = [], 0
    for _ in range(temperature.N_REFERENCE_DRAWS):
        reference = temperature.reference_data(X, groups, rng)
        cap, draw_fits = temperature._largest_humble_beta(
            lambda beta: humility(beta, reference), start, upper)
        fits += draw_fits
        caps.append(temperature.BETA_RANGE[0] if cap is None else cap)
    return float(np.exp(np.median(np.log(caps)))), fits


#: Rules of the flat margin table: (level, references, how their caps are combined).
FLAT_MARGIN_RULES = ((0.3, 3, "min"), (0.35, 3, "min"), (0.3, 9, "median"), (0.25, 9, "median"))


def flat_margin_table(n_samples, n_seeds):
    """``ExactFlatClustering()`` on planted subtypes and noise under other rules of the cap.

    Planted: fails unless P(K=3) >= 0.5, within-subtype co-clustering >= 0.8
    and across <= 0.2; noise: fails when three points all co-cluster above
    0.5. The first rule is the default's.
    """
    print(f"\nflat margin at N = {n_samples}, 3000 features, seeds 0..{n_seeds - 1}")
    print(f"{'rule':>14} | {'planted fail':>12} {'min P(K=3)':>10} {'min within':>10} | "
          f"{'noise fail':>10} {'max 3 together':>14}")
    defaults = (temperature.NULL_LEVEL, temperature.N_REFERENCE_DRAWS,
                temperature.reference_null_cap)
    for level, n_references, aggregate in FLAT_MARGIN_RULES:
        temperature.NULL_LEVEL, temperature.N_REFERENCE_DRAWS = level, n_references
        if aggregate == "median":
            temperature.reference_null_cap = _median_null_cap
        planted_fail = noise_fail = 0
        k3s, withins, togethers = [], [], []
        try:
            for seed in range(n_seeds):
                X, groups = make_planted_subtypes(n_samples, random_state=seed)
                flat = ExactFlatClustering(verbose=0).fit(X)
                same = groups[:, None] == groups[None, :]
                within = flat.pairwise_probability_[same].min()
                across = flat.pairwise_probability_[~same].max()
                k3 = flat.n_clusters_probability_[3]
                null = np.random.default_rng(seed).normal(size=(n_samples, 3000))
                together = largest_together(ExactFlatClustering(verbose=0).fit(null)
                                            .pairwise_probability_)
                planted_fail += not (k3 >= 0.5 and within >= 0.8 and across <= 0.2)
                noise_fail += together > 0.5
                k3s.append(k3), withins.append(within), togethers.append(together)
        finally:
            (temperature.NULL_LEVEL, temperature.N_REFERENCE_DRAWS,
             temperature.reference_null_cap) = defaults
        rule = f"{level:g}/{aggregate}{n_references}"
        print(f"{rule:>14} | {planted_fail:>9}/{n_seeds:<2} {min(k3s):>10.2f} "
              f"{min(withins):>10.2f} | {noise_fail:>7}/{n_seeds:<2} {max(togethers):>14.2f}",
              flush=True)


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


def _subsample(X, y, per_class, seed):
    rng = np.random.RandomState(seed)
    idx = np.concatenate([rng.choice(np.flatnonzero(y == k), per_class, replace=False)
                          for k in np.unique(y)[:3]])
    return X[idx], y[idx]


def _regime_data(regime, seed):
    """(X, class labels or None for structureless data) of each regime."""
    if regime == "4 features, noise (N=12)":
        return np.random.default_rng(seed).normal(size=(12, 4)), None
    if regime == "2 features, noise (N=12)":
        return np.random.default_rng(seed).normal(size=(12, 2)), None
    if regime == "2 groups of 5 in 2 features (N=10)":
        # Shifted by 6 standard deviations: the MAP structure recovers them in every seed.
        y = np.repeat(np.arange(2), 5)
        return np.random.default_rng(seed).normal(size=(10, 2)) + 6.0 * np.eye(2)[y], y
    if regime == "3 groups of 4 in 4 features (N=12)":
        # Group k shifted by 4 standard deviations along feature k: clear groups.
        y = np.repeat(np.arange(3), 4)
        return np.random.default_rng(seed).normal(size=(12, 4)) + 4.0 * np.eye(4)[y], y
    if regime == "1 column x 12 copies, noise (N=12)":
        return np.repeat(np.random.default_rng(seed).normal(size=(12, 1)), 12, axis=1), None
    if regime == "iris, 6 per class":
        X, y = load_iris(return_X_y=True)
        return _subsample(X, y, 6, seed)
    if regime == "wine standardised, 6 per class":
        X, y = load_wine(return_X_y=True)
        return _subsample(StandardScaler().fit_transform(X), y, 6, seed)
    raise ValueError(regime)


REGIMES = ("2 features, noise (N=12)", "2 groups of 5 in 2 features (N=10)",
           "4 features, noise (N=12)", "3 groups of 4 in 4 features (N=12)",
           "1 column x 12 copies, noise (N=12)",
           "iris, 6 per class", "wine standardised, 6 per class")


def regime_table(n_seeds):
    """The default estimators in the regimes the feature bootstrap does not cover.

    Each row: how beta_ was chosen, and the two-sided requirement over
    seeds (subsamples of the real sets; fresh noise): planted classes
    support >= 0.9 (trees: each class a cluster; partitions: every pair of
    a class co-clustered, min over pairs), noise nothing above 0.5 (trees:
    a cluster of 3..N-1 points; partitions: three points all together).
    """
    print(f"\nregimes, seeds 0..{n_seeds - 1}: failures of the two-sided requirement")
    print(f"{'regime':>36} {'method':>18} {'distinct':>8} {'n_eff':>6} | {'tree beta_':>10} "
          f"{'worst':>6} {'fail':>5} | {'flat beta_':>10} {'worst':>6} {'fail':>5}")
    for regime in REGIMES:
        tree_values, flat_values, tree_betas, flat_betas = [], [], [], []
        for seed in range(n_seeds):
            X, y = _regime_data(regime, seed)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                tree = ExactHierarchicalClustering(n_clusters=3).fit(X)
                flat = ExactFlatClustering().fit(X)
            tree_betas.append(tree.beta_)
            flat_betas.append(flat.beta_)
            if y is None:
                tree_values.append(largest_support(tree, len(X)))
                flat_values.append(largest_together(flat.pairwise_probability_))
            else:
                tree_values.append(min(tree.cluster_probability(np.flatnonzero(y == k))
                                       for k in np.unique(y)))
                same = (y[:, None] == y[None, :]) & ~np.eye(len(y), dtype=bool)
                flat_values.append(flat.pairwise_probability_[same].min())
        calibration = tree.calibration_
        if y is None:
            worst_tree, worst_flat = max(tree_values), max(flat_values)
            fail_tree = sum(v > 0.5 for v in tree_values)
            fail_flat = sum(v > 0.5 for v in flat_values)
        else:
            worst_tree, worst_flat = min(tree_values), min(flat_values)
            fail_tree = sum(v < 0.9 for v in tree_values)
            fail_flat = sum(v < 0.9 for v in flat_values)
        print(f"{regime:>36} {calibration['method']:>18} "
              f"{calibration['n_distinct_features']:>8} "
              f"{calibration['n_effective_features']:>6.1f} | "
              f"{np.median(tree_betas):>10.3g} {worst_tree:>6.3f} {fail_tree:>2}/{n_seeds:<2} | "
              f"{np.median(flat_betas):>10.3g} {worst_flat:>6.3f} {fail_flat:>2}/{n_seeds:<2}",
              flush=True)


def sparse_table(n_samples, n_seeds, n_features=2000):
    """SparseTrellisClustering(), calibrated, on planted subtypes and noise; cost of the calibration.

    Planted: the smallest subtype support over the spanned trees; noise:
    the largest support of a cluster of 3..N-1 points. Cost: the
    calibrated fit against a plain fit at the beta it chose, one thread.
    """
    print(f"\nSparseTrellisClustering, N = {n_samples}, {n_features} genes, seeds "
          f"0..{n_seeds - 1}")
    print(f"{'seed':>4} | {'planted beta_':>13} {'B':>4} {'min group':>9} | "
          f"{'noise beta_':>11} {'B':>4} {'max 3..N-1':>10} | {'auto s':>7} {'plain s':>7} "
          f"{'ratio':>6}")
    failures = {"planted": 0, "noise": 0}
    for seed in range(n_seeds):
        X, groups = make_planted_subtypes(n_samples, n_features, random_state=seed)
        auto_time, planted = timed(lambda: SparseTrellisClustering(n_clusters=3).fit(X))
        plain_time, _ = timed(lambda: SparseTrellisClustering(
            Dasgupta(beta=planted.beta_), n_clusters=3).fit(X))
        group_support = min(planted.cluster_probability(np.flatnonzero(groups == k))
                            for k in range(3))
        null = np.random.default_rng(seed).normal(size=(n_samples, n_features))
        noise_model = SparseTrellisClustering().fit(null)
        null_support = largest_support(noise_model, n_samples)
        failures["planted"] += group_support < 0.9
        failures["noise"] += null_support > 0.5
        print(f"{seed:>4} | {planted.beta_:>13.3g} {planted.calibration_['n_resamples']:>4} "
              f"{group_support:>9.3f} | {noise_model.beta_:>11.3g} "
              f"{noise_model.calibration_['n_resamples']:>4} {null_support:>10.3f} | "
              f"{auto_time:>7.2f} {plain_time:>7.2f} {auto_time / plain_time:>6.1f}", flush=True)
    print("requirement failures: " + ", ".join(f"{k} {v}/{n_seeds}" for k, v in failures.items()))


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
    parser.add_argument("--regime-seeds", type=int, default=0,
                        help="seeds of the table of regimes (few features, copies, real sets)")
    parser.add_argument("--sparse-n", type=int, nargs="*", default=[],
                        help="sizes of the SparseTrellisClustering table (e.g. 40 80)")
    parser.add_argument("--sparse-seeds", type=int, default=3)
    parser.add_argument("--prior-n", type=int, nargs="*", default=[],
                        help="sizes of the noise table by tree prior (e.g. 12 14 16)")
    parser.add_argument("--screen-n", type=int, nargs="*", default=[],
                        help="sizes of the table of the screened against the exact cap (trees)")
    parser.add_argument("--flat-margin", type=int, default=0,
                        help="seeds of the flat table under other rules of the cap (N = 12)")
    parser.add_argument("--no-null-cap", action="store_true",
                        help="calibrate without the reference-null cap (the figures before it)")
    args = parser.parse_args()
    if args.no_null_cap:
        temperature.N_REFERENCE_DRAWS = 0
    if args.seeds:
        behaviour_table(args.check_n, args.seeds)
    if args.prior_n:
        tree_prior_table(args.prior_n, args.seeds)
    if args.regime_seeds:
        regime_table(args.regime_seeds)
    if args.screen_n:
        screen_table(args.screen_n)
    if args.flat_margin:
        flat_margin_table(args.check_n, args.flat_margin)
    for n_samples in args.sparse_n:
        sparse_table(n_samples, args.sparse_seeds)
    for n_jobs in args.n_jobs:
        if args.hier_n:
            cost_table(ExactHierarchicalClustering, Dasgupta, args.hier_n, args.repeats, n_jobs)
        if args.flat_n:
            cost_table(ExactFlatClustering, CorrelationClustering, args.flat_n, args.repeats,
                       n_jobs)


if __name__ == "__main__":
    main()
