"""Bayesian hierarchical clustering: speed, and its DPM bound against the exact evidence.

Parts 1-3 use ``algorithm="greedy"`` (the default before issue 20's
third round) and Gaussian ``covariance_type="full"`` (the default before
its fourth), as their recorded figures do.

Part 1 times the greedy algorithm (Heller & Ghahramani 2005) on iris (N =
150, best of 5) and on Gaussian blobs up to N = 2,000 (one run), with the
number of clusters of the r_k < 0.5 cut and its adjusted Rand index.

Part 2, on data small enough for the trellis, puts three numbers side by
side: the lower bound on the DPM evidence given by the greedy BHC tree, the
same bound for the best of all (2N - 3)!! trees (``algorithm="exact"``), and
the exact DPM evidence log p(D) summed over all Bell(N) partitions
(``ExactFlatClustering`` with the same ``DirichletProcessMixture``). It does
so for stratified subsets of iris (Gaussian components) and of binarised
digits 0-2 (Bernoulli components, as in the paper), and compares the
clusters of BHC's cut with the exact MAP partition.

Part 3 learns the hyperparameters (``hyperparameters="learn"``: alpha and
the component prior's scale maximising the DPM evidence lower bound,
EM-like with restarts) on stratified subsets of iris (Gaussian) and
binarised digits 0-2 (Bernoulli), and shows how the bound and the
dendrogram purity of the tree move.

Part 4 (issue 20) scores BHC at its defaults on labelled data:
``make_blobs(200, centers=4)`` (seeds 0 and 1) and 5-centre blobs (5
seeds), with the ARI of the r < 0.5 cut and the covariance type that
``"auto"`` (the default) keeps, beside ``covariance_type="full"`` (the
default before, passed explicitly, so one run gives before and after)
and the diagonal types' own trees, GaussianMixture
with full covariances and k chosen by BIC, KMeans given k, and the
Bayes-optimal assignment to the true centres (the ceiling); structureless
data; iris and standardized wine; and sklearn's digits binarised at pixel
>= 8 with ``component="bernoulli"`` (3 classes and 10 classes, 20 per
class, 5 draws) against scipy's linkage methods.

    python benchmarks/bench_bhc.py                  # about a minute
    python benchmarks/bench_bhc.py --sizes 8 12 16 18 20 --max-n 4000
    python benchmarks/bench_bhc.py --parts defaults
"""
import argparse
import time

import numpy as np
from sklearn.datasets import load_digits, load_iris, load_wine, make_blobs
from scipy.cluster.hierarchy import linkage
from sklearn.metrics import adjusted_rand_score

from sktrellis.baselines import BayesianHierarchicalClustering
from sktrellis import ExactFlatClustering
from sktrellis.energies import DirichletProcessMixture


def bhc(energy=None, **params):
    """BHC under DirichletProcessMixture(**energy); a covariance type named there is kept."""
    energy = energy or {}
    if "covariance_type" in energy:
        params.setdefault("covariance_type", None)
    return BayesianHierarchicalClustering(DirichletProcessMixture(**energy), **params)


def best_time(function, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return min(times), result


def speed(max_n):
    print("Greedy BHC, Gaussian components, default priors")
    print(f"{'data':>22} {'N':>5} {'d':>2} {'seconds':>8} {'clusters':>9} {'ARI':>6} "
          f"{'log p(D|T)':>12} {'DPM bound':>12}")
    X, y = load_iris(return_X_y=True)
    rows = [("iris", X, y, 5)]
    for n_points in (500, 1000, 2000, 4000, 5000):
        if n_points <= max_n:
            X, y = make_blobs(n_points, n_features=4, centers=5, cluster_std=1.5,
                              random_state=n_points)
            rows.append(("blobs, 5 centres", X, y, 1))
    for name, X, y, repeat in rows:
        seconds, model = best_time(
            lambda: bhc({"covariance_type": "full"}, algorithm="greedy").fit(X), repeat
        )
        print(f"{name:>22} {len(X):>5} {X.shape[1]:>2} {seconds:>8.3f} {model.n_clusters_:>9} "
              f"{adjusted_rand_score(y, model.labels_):>6.3f} "
              f"{model.log_marginal_likelihood_:>12.2f} "
              f"{model.log_evidence_lower_bound_:>12.2f}", flush=True)


def stratified(y, n_points, rng):
    """n_points indices spread as evenly as possible over the classes."""
    classes = np.unique(y)
    picks = [rng.permutation(np.flatnonzero(y == c)) for c in classes]
    return np.sort(np.concatenate([
        pick[: n_points // len(classes) + (k < n_points % len(classes))]
        for k, pick in enumerate(picks)
    ]))


def bounds(sizes, n_subsets):
    iris_X, iris_y = load_iris(return_X_y=True)
    digits = load_digits()
    keep = digits.target < 3
    # Binarised at half the grey range; constant pixels dropped (no information).
    digit_X = (digits.data[keep] >= 8).astype(float)
    digit_X = digit_X[:, digit_X.std(axis=0) > 0]
    digit_y = digits.target[keep]
    # Iris in cm: within-species variances are about 0.1, far below the
    # default prior's (the variances of the whole data), which favours one cluster.
    problems = [
        ("iris", iris_X, iris_y, {"covariance_type": "full", "covariance_prior": 0.1,
                                  "mean_precision_prior": 0.05}),
        ("digits 0-2", digit_X, digit_y, {"component": "bernoulli"}),
    ]
    print(f"\nDPM evidence: BHC bound (greedy tree, best tree) vs exact log p(D), "
          f"alpha = 1, {n_subsets} stratified subsets per row (means)")
    print("(gap: log p(D) minus the bound; k: clusters of BHC's r < 0.5 cut and of the "
          "exact MAP partition)")
    print(f"{'data':>11} {'N':>3} {'greedy bound':>13} {'best-tree bound':>16} "
          f"{'log p(D)':>10} {'greedy gap':>11} {'best gap':>9} {'BHC k':>6} "
          f"{'MAP k':>6} {'ARI(BHC, MAP)':>14} {'greedy s':>9} {'best s':>7} "
          f"{'exact s':>8}")
    rng = np.random.default_rng(0)
    for name, X_all, y_all, params in problems:
        for n_points in sizes:
            cells = []
            for _ in range(n_subsets):
                index = stratified(y_all, n_points, rng)
                X = X_all[index]
                if params.get("component") == "bernoulli":
                    X = X[:, X.std(axis=0) > 0]
                start = time.perf_counter()
                greedy = bhc(params, algorithm="greedy").fit(X)
                greedy_s = time.perf_counter() - start
                start = time.perf_counter()
                best = bhc(params, algorithm="exact").fit(X)
                best_s = time.perf_counter() - start
                start = time.perf_counter()
                exact = ExactFlatClustering(greedy.energy_).fit(X)
                exact_s = time.perf_counter() - start
                assert greedy.log_evidence_lower_bound_ <= best.log_evidence_lower_bound_ + 1e-9
                assert best.log_evidence_lower_bound_ <= exact.log_evidence_ + 1e-9
                cells.append([
                    greedy.log_evidence_lower_bound_, best.log_evidence_lower_bound_,
                    exact.log_evidence_,
                    exact.log_evidence_ - greedy.log_evidence_lower_bound_,
                    exact.log_evidence_ - best.log_evidence_lower_bound_,
                    greedy.n_clusters_, exact.labels_.max() + 1,
                    adjusted_rand_score(exact.labels_, greedy.labels_),
                    greedy_s, best_s, exact_s,
                ])
            m = np.mean(cells, axis=0)
            print(f"{name:>11} {n_points:>3} {m[0]:>13.3f} {m[1]:>16.3f} {m[2]:>10.3f} "
                  f"{m[3]:>11.3f} {m[4]:>9.3f} {m[5]:>6.1f} {m[6]:>6.1f} {m[7]:>14.3f} "
                  f"{m[8]:>9.4f} {m[9]:>7.3f} {m[10]:>8.3f}", flush=True)


def learning(sizes, n_subsets):
    from sktrellis.metrics import dendrogram_purity

    iris_X, iris_y = load_iris(return_X_y=True)
    digits = load_digits()
    keep = digits.target < 3
    digit_X = (digits.data[keep] >= 8).astype(float)
    digit_y = digits.target[keep]
    problems = [("iris", iris_X, iris_y, {"covariance_type": "full"}),
                ("digits 0-2", digit_X, digit_y,
                                               {"component": "bernoulli"})]
    print(f"\nHyperparameter learning (greedy BHC; default priors as the start), "
          f"{n_subsets} stratified subsets per row (means)")
    print(f"{'data':>11} {'N':>4} {'DPM bound fixed':>17} {'learned':>9} "
          f"{'purity fixed':>13} {'learned':>8} {'alpha_':>7} {'scale_':>7} {'E steps':>8} "
          f"{'seconds':>8}")
    rng = np.random.default_rng(1)
    for name, X_all, y_all, params in problems:
        for n_points in sizes:
            cells = []
            for _ in range(n_subsets):
                index = stratified(y_all, n_points, rng)
                X, y = X_all[index], y_all[index]
                if params.get("component") == "bernoulli":
                    X = X[:, X.std(axis=0) > 0]
                fixed = bhc(params, algorithm="greedy").fit(X)
                start = time.perf_counter()
                learned = bhc(params, algorithm="greedy", hyperparameters="learn").fit(X)
                seconds = time.perf_counter() - start
                cells.append([
                    fixed.log_evidence_lower_bound_, learned.log_evidence_lower_bound_,
                    dendrogram_purity(y, fixed.linkage_matrix_),
                    dendrogram_purity(y, learned.linkage_matrix_),
                    learned.alpha_, learned.prior_scale_,
                    len(learned.hyperparameter_log_likelihoods_), seconds,
                ])
            m = np.mean(cells, axis=0)
            print(f"{name:>11} {n_points:>4} {m[0]:>17.2f} {m[1]:>9.2f} {m[2]:>13.3f} "
                  f"{m[3]:>8.3f} {m[4]:>7.3f} {m[5]:>7.3f} {m[6]:>8.1f} {m[7]:>8.2f}",
                  flush=True)


def defaults(n_draws):
    from sklearn.cluster import KMeans
    from sklearn.mixture import GaussianMixture
    from sklearn.preprocessing import StandardScaler

    from sktrellis.metrics import dendrogram_purity

    def short(model):
        return {"full": "full", "diag": "diag", "spherical": "sph"}[model.covariance_type_]

    print("\nBHC at its defaults on labelled data (linkage methods for comparison)")
    print("(BHC: the defaults, covariance_type='auto' and algorithm='sparse'; full: "
          "covariance_type='full', the default before; diag, sph: those types' own trees "
          "(bound); GMM+BIC: GaussianMixture with full covariances, k = 1..8 by BIC; KMeans "
          "and true centres are given the true k)")
    print(f"{'blobs':>14} {'BHC k':>6} {'ARI':>6} {'purity':>7} {'bound':>8} {'type':>5} "
          f"{'full k':>7} {'ARI':>6} {'purity':>7} {'bound':>8} {'diag':>8} {'sph':>8} "
          f"{'GMM+BIC k':>10} {'ARI':>6} {'KMeans':>7} {'true centres':>13}")
    cases = [(4, 0), (4, 1)] + [(5, seed) for seed in range(5)]
    for n_centres, seed in cases:
        X, y, centres = make_blobs(200, centers=n_centres, random_state=seed,
                                   return_centers=True)
        nearest = ((X[:, None, :] - centres[None]) ** 2).sum(axis=2).argmin(axis=1)
        model = BayesianHierarchicalClustering().fit(X)
        full = bhc({"covariance_type": "full"}).fit(X)
        bounds = model.covariance_type_lower_bounds_
        mixtures = [GaussianMixture(k, n_init=3, random_state=0).fit(X) for k in range(1, 9)]
        best = min(mixtures, key=lambda mixture: mixture.bic(X))
        kmeans = KMeans(n_centres, n_init=10, random_state=0).fit_predict(X)
        print(f"{f'{n_centres} centres, {seed}':>14} {model.n_clusters_:>6} "
              f"{adjusted_rand_score(y, model.labels_):>6.3f} "
              f"{dendrogram_purity(y, model.linkage_matrix_):>7.3f} "
              f"{model.log_evidence_lower_bound_:>8.1f} {short(model):>5} {full.n_clusters_:>7} "
              f"{adjusted_rand_score(y, full.labels_):>6.3f} "
              f"{dendrogram_purity(y, full.linkage_matrix_):>7.3f} "
              f"{full.log_evidence_lower_bound_:>8.1f} {bounds['diag']:>8.1f} "
              f"{bounds['spherical']:>8.1f} {best.n_components:>10} "
              f"{adjusted_rand_score(y, best.predict(X)):>6.3f} "
              f"{adjusted_rand_score(y, kmeans):>7.3f} "
              f"{adjusted_rand_score(y, nearest):>13.3f}", flush=True)
    # Structureless data: one Gaussian (the answer is one cluster), and a
    # uniform square (no clusters at all).
    print(f"{'no structure':>22} {'BHC k':>10} {'full k':>10} {'GMM+BIC k':>10}   (seeds 0-4)")
    for name, draw in [("gaussian 200 x 2", lambda rng: rng.normal(size=(200, 2))),
                       ("uniform 200 x 2", lambda rng: rng.uniform(size=(200, 2))),
                       ("gaussian 100 x 5", lambda rng: rng.normal(size=(100, 5)))]:
        counts = []
        for seed in range(5):
            X = draw(np.random.default_rng(seed))
            mixtures = [GaussianMixture(k, n_init=3, random_state=0).fit(X) for k in range(1, 9)]
            counts.append((BayesianHierarchicalClustering().fit(X).n_clusters_,
                           bhc({"covariance_type": "full"}).fit(X).n_clusters_,
                           min(mixtures, key=lambda mixture: mixture.bic(X)).n_components))
        columns = (" ".join(str(c[k]) for c in counts) for k in range(3))
        print(f"{name:>22} " + " ".join(f"{column:>10}" for column in columns), flush=True)
    iris_X, iris_y = load_iris(return_X_y=True)
    wine = load_wine()
    wine_X = StandardScaler().fit_transform(wine.data)
    for name, X, y in [("iris", iris_X, iris_y), ("wine (standardized)", wine_X, wine.target)]:
        for label, params in [("default", {}), ("full", {"covariance_type": "full"})]:
            model = bhc(params).fit(X)
            print(f"{name}, {label}: BHC ARI {adjusted_rand_score(y, model.labels_):.3f} "
                  f"(k = {model.n_clusters_}, {model.covariance_type_}), purity "
                  f"{dendrogram_purity(y, model.linkage_matrix_):.3f}, bound "
                  f"{model.log_evidence_lower_bound_:.1f}", flush=True)
        print(f"{name}: purity average {dendrogram_purity(y, linkage(X, 'average')):.3f}, "
              f"complete {dendrogram_purity(y, linkage(X, 'complete')):.3f}", flush=True)
    digits = load_digits()
    binary, target = (digits.data >= 8).astype(float), digits.target
    print(f"{'digits (bernoulli)':>20} {'BHC':>6} {'greedy':>7} {'average':>8} {'complete':>9} "
          f"{'single':>7} {'BHC k':>6}   (dendrogram purity, means over {n_draws} draws)")
    for n_classes in (3, 10):
        cells = []
        for seed in range(n_draws):
            rng = np.random.default_rng(seed)
            rows = np.concatenate([rng.choice(np.flatnonzero(target == c), 20, replace=False)
                                   for c in range(n_classes)])
            X, y = binary[rows], target[rows]
            model = bhc({"component": "bernoulli"}).fit(X)
            greedy = bhc({"component": "bernoulli"}, algorithm="greedy").fit(X)
            cells.append([dendrogram_purity(y, model.linkage_matrix_),
                          dendrogram_purity(y, greedy.linkage_matrix_)]
                         + [dendrogram_purity(y, linkage(X, method))
                            for method in ("average", "complete", "single")]
                         + [model.n_clusters_])
        m = np.mean(cells, axis=0)
        print(f"{f'{n_classes} classes x 20':>20} {m[0]:>6.3f} {m[1]:>7.3f} {m[2]:>8.3f} "
              f"{m[3]:>9.3f} {m[4]:>7.3f} {m[5]:>6.1f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-n", type=int, default=2000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 12, 16, 18])
    parser.add_argument("--subsets", type=int, default=5)
    parser.add_argument("--learn-sizes", type=int, nargs="+", default=[30, 60, 150])
    parser.add_argument("--parts", nargs="+", default=["speed", "bounds", "learning", "defaults"],
                        choices=["speed", "bounds", "learning", "defaults"])
    args = parser.parse_args()
    start = time.perf_counter()
    if "speed" in args.parts:
        speed(args.max_n)
    if "bounds" in args.parts:
        bounds(args.sizes, args.subsets)
    if "learning" in args.parts:
        learning(args.learn_sizes, args.subsets)
    if "defaults" in args.parts:
        defaults(args.subsets)
    print(f"\ntotal {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
