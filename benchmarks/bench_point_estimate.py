"""Flat point estimates of the exact tree posterior against Ward's and average linkage.

``ExactHierarchicalClustering(n_clusters=k)`` at its defaults on small
labelled sets -- iris, wine, digits {0, 1, 7} (6 points per class, 18
points) and breast cancer (10 per class, 20 points), two random subsets
each, raw and standardised: 16 runs -- and on structureless Gaussian noise
of the same shapes. For each run, the labels of:

- ``posterior``: ``labels_from="posterior"`` (the default), the partition
  of largest expected agreement with the posterior's clusters, with each
  block of one point kept only where the posterior supports its claim to
  be an outlier (``keep_outliers_if_supported``);
- ``consensus``: that partition without the outlier check (the default
  before it);
- ``map_tree``: the MAP tree cut into k clusters;
- ``mcc_tree``: the maximum-clade-credibility tree cut into k clusters;
- ``binder`` and ``vi``: the partitions minimising the posterior expected
  Binder loss and variation of information (Wade & Ghahramani 2018) over
  the distribution of k-cuts of trees drawn from the posterior
  (``--samples`` trees; candidates: the sampled k-cuts and the three
  partitions above; the VI expectation over the first 300 draws);
- Ward's and average linkage (scikit-learn) on the same X.

Printed: the ARI of each against the classes (and the mean), on noise the
number of singleton clusters, and the time of the ``posterior`` labels
(outside pass, kernel, search) over the time of a plain fit, in one run.

    python benchmarks/bench_point_estimate.py
    python benchmarks/bench_point_estimate.py --samples 500 --no-noise
    python benchmarks/bench_point_estimate.py --samples 500 --only-noise
"""
import argparse
import time

import numpy as np
from sklearn.cluster import AgglomerativeClustering
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler

from sktrellis import ExactHierarchicalClustering
from sktrellis._engine.trellis.point_estimate import (
    N_OUTLIER_DRAWS, cluster_kernel, consensus_labels, keep_outliers_if_supported,
)
from sktrellis._engine.tree.conversion import labels_from_linkage, relabel_by_first_appearance

METHODS = ["posterior", "consensus", "map_tree", "mcc_tree", "binder", "vi", "ward", "average"]


def labelled_sets():
    """(name, X, y, k): two class-balanced subsets of each set, raw and standardised."""
    for name, loader, per_class, classes in [
        ("iris", load_iris, 6, [0, 1, 2]), ("wine", load_wine, 6, [0, 1, 2]),
        ("digits", load_digits, 6, [0, 1, 7]), ("cancer", load_breast_cancer, 10, [0, 1]),
    ]:
        data = loader()
        for seed in (0, 1):
            rng = np.random.default_rng(seed)
            rows = np.concatenate([
                rng.choice(np.flatnonzero(data.target == c), per_class, replace=False)
                for c in classes
            ])
            for scaling in ("raw", "std"):
                X = data.data[rows]
                if scaling == "std":
                    X = StandardScaler().fit_transform(X)
                yield f"{name}-{seed}-{scaling}", X, data.target[rows], len(classes)


def noise_sets():
    """Standard normal data of the labelled sets' shapes (n points, d features, k)."""
    for n, d, k in [(18, 4, 3), (18, 13, 3), (18, 64, 3), (20, 30, 2)]:
        for seed in (0, 1):
            X = np.random.default_rng(100 + seed).normal(size=(n, d))
            yield f"noise-{d}-{seed}", X, None, k


def entropy(labels):
    counts = np.unique(labels, return_counts=True)[1] / len(labels)
    return -np.sum(counts * np.log(counts))


def expected_vi(labels, draws):
    """Mean variation of information between ``labels`` and each drawn partition."""
    own = entropy(labels)
    offset = labels.max() + 1
    return np.mean([2 * entropy(labels + offset * d) - own - entropy(d) for d in draws])


def expected_binder(labels, together):
    """Posterior expected number of pairs on which ``labels`` and a draw disagree."""
    same = labels[:, None] == labels[None, :]
    return np.abs(same - together)[np.triu_indices(len(labels), 1)].sum()


def point_estimates(X, k, n_samples):
    """Labels of every method, and the seconds of a plain fit and of the posterior labels."""
    start = time.perf_counter()
    model = ExactHierarchicalClustering(n_clusters=k, labels_from="map_tree", verbose=0,
                                        random_state=0).fit(X)
    fit_seconds = time.perf_counter() - start
    start = time.perf_counter()
    kernel = cluster_kernel(model.posterior_.cluster_log_marginals(), len(X))
    consensus = consensus_labels(kernel, k)
    # As the estimator does it: draws seeded by its random_state (0).
    rng = np.random.RandomState(0)
    posterior = relabel_by_first_appearance(keep_outliers_if_supported(
        kernel, consensus, k, lambda: model._trellis.sample_splits(N_OUTLIER_DRAWS, rng)))
    label_seconds = time.perf_counter() - start
    labels = {
        "posterior": posterior,
        "consensus": relabel_by_first_appearance(consensus),
        "map_tree": model.labels_,
        "mcc_tree": labels_from_linkage(model.max_clade_credibility_tree()[0], k),
    }
    cuts = np.array([labels_from_linkage(z, k) for z in model.sample(n_samples, random_state=0)])
    together = (cuts[:, :, None] == cuts[:, None, :]).mean(axis=0)
    candidates, counts = np.unique(cuts, axis=0, return_counts=True)
    candidates = [*candidates[np.argsort(-counts)][:400], *labels.values()]
    labels["binder"] = min(candidates, key=lambda c: expected_binder(c, together))
    labels["vi"] = min(candidates, key=lambda c: expected_vi(c, cuts[:300]))
    for linkage in ("ward", "average"):
        labels[linkage] = AgglomerativeClustering(k, linkage=linkage).fit_predict(X)
    return labels, fit_seconds, label_seconds


def run(sets, n_samples, score, header):
    print(header)
    print(f"{'set':16s} " + " ".join(f"{m:>9s}" for m in METHODS) + "   labels/fit")
    rows, ratios = [], []
    for name, X, y, k in sets:
        labels, fit_seconds, label_seconds = point_estimates(X, k, n_samples)
        rows.append([score(labels[m], y) for m in METHODS])
        ratios.append(label_seconds / fit_seconds)
        print(f"{name:16s} " + " ".join(f"{v:9.2f}" for v in rows[-1])
              + f"   {ratios[-1]:9.2f}", flush=True)
    print(f"{'mean':16s} " + " ".join(f"{v:9.3f}" for v in np.mean(rows, axis=0))
          + f"   {np.median(ratios):9.2f} (median)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000,
                        help="trees drawn for the Binder and VI estimates")
    parser.add_argument("--no-noise", action="store_true")
    parser.add_argument("--only-noise", action="store_true")
    args = parser.parse_args()
    if not args.only_noise:
        run(labelled_sets(), args.samples, lambda labels, y: adjusted_rand_score(y, labels),
            "ARI against the classes")
    if not args.no_noise:
        run(noise_sets(), args.samples,
            lambda labels, y: float(np.sum(np.bincount(labels) == 1)),
            "\nStructureless noise: number of singleton clusters")


if __name__ == "__main__":
    main()
