"""The reference-null cap on correlated genes: which structureless reference.

``beta="auto"`` (many features) is the feature bootstrap's beta capped by
``reference_null_cap``: the largest beta at which the posterior over
structureless references shows no cluster of 3..N-1 points (trees), no
three points together (partitions), above 0.3. Which references:

- ``tested``: the package as it is: the permuted references, and where
  ``rotation_pvalue`` finds no cluster structure (p > 0.05) also
  ``rotation_reference``'s, the cap the smaller;
- ``permutation``: ``reference_data`` alone (the rule before), each column
  (group of copies) permuted across the rows on its own. It destroys the
  gene-gene correlation, so on genes in correlated blocks the references
  look like more independent directions than the data have, and the cap
  is too hot;
- ``rotation``: ``rotation_reference`` alone, the samples rotated (the
  columns' cross-products kept exactly);
- ``covariance``: ``gaussian_within_reference``, a Gaussian with X's
  pooled within-cluster covariance (about the clusters of its MAP partition
  under ``CorrelationClustering()``), drawn in the dual N x N form;
- ``resid-drop`` / ``resid-perm``: the residuals about those clusters
  rotated, the between part dropped (rescaled) or permuted;
- ``both`` / ``rotation-both``: permuted references and covariance (or
  rotated) ones, three of each, the cap the smallest.

Every kind but ``tested`` skips the rotation test.

Data, N = 12 unless said: genes in correlated blocks (3000 genes, 30
blocks of 100 or 300 blocks of 10, each block one latent N(0, 1) per
sample plus N(0, 1/9) noise per gene; the samples i.i.d., so no structure
to find), plain N(0, 1) noise (12 x 3000) and the planted subtypes of
``make_planted_subtypes`` (three subtypes, 3000 genes). Printed: beta_,
whether the cap bound, the largest support of a cluster of 3..N-1 points
(trees) or the largest co-clustering three points all reach (partitions);
for planted data the smallest subtype support (trees, fails below 0.9) and
the smallest within-subtype co-clustering (partitions, fails below 0.8),
and the wall time of each calibrated fit. Requirement: structureless data
at most 0.5.

    nice -n 10 python benchmarks/bench_correlated_genes.py --seeds 0 1 2 3 4 \
        --kinds permutation tested

(about 3 minutes on the loaded 2-core machine; benchmarks/README.md).
"""
import argparse
import itertools
import time

import numpy as np

import sktrellis._calibration as calibration
from bench_calibration import largest_support
from sktrellis._calibration import largest_together
from sktrellis import ExactFlatClustering, ExactHierarchicalClustering
from sktrellis.datasets import make_planted_subtypes

PERMUTATION = calibration.reference_data
ROTATION_TEST = calibration.rotation_pvalue
rotation_reference = calibration.rotation_reference


def gaussian_within_reference(X, groups, rng):
    """N(mean(X), S), S X's within-cluster covariance about its MAP clusters, dual N x N form.

    ``Z @ R / sqrt(N - k) + mean(X)``, R the residuals about the clusters of
    ``correlation_map_labels(X)``, Z i.i.d. N(0, 1) of shape N x N. Measured
    and not adopted: its rows span only the N - k directions of R, so their
    distances fluctuate as a chi-square with about N - k degrees of freedom
    instead of thousands, and the references show clusters noise does not.
    """
    X = np.asarray(X, dtype=np.float64)
    labels = calibration.correlation_map_labels(X)
    point_means, n_clusters = calibration._cluster_means(X, labels)
    dof = len(X) - n_clusters
    if dof <= 0:
        point_means, dof = np.broadcast_to(X.mean(axis=0), X.shape), len(X) - 1
    draws = rng.standard_normal((len(X), len(X)))
    return draws @ (X - point_means) / np.sqrt(dof) + X.mean(axis=0)


def correlated_blocks(n_samples, n_blocks, seed, n_features=3000):
    rng = np.random.default_rng(seed)
    return (np.repeat(rng.normal(size=(n_samples, n_blocks)), n_features // n_blocks, axis=1)
            + rng.normal(scale=1 / 3, size=(n_samples, n_features)))


def residual_rotation(between):
    """Residuals about X's MAP clusters randomly rotated (``rotation_reference``), plus the between part.

    ``between``: "drop" (rescaled to N - 1 degrees of freedom) or
    "permuted" (the cluster means, each column permuted across the rows on
    its own, as ``reference_data``).
    """
    def reference(X, groups, rng):
        X = np.asarray(X, dtype=np.float64)
        labels = calibration.correlation_map_labels(X)
        point_means, n_clusters = calibration._cluster_means(X, labels)
        residuals = X - point_means
        if between == "drop":
            residuals *= np.sqrt((len(X) - 1) / max(len(X) - n_clusters, 1))
        else:
            centred_means = point_means - X.mean(axis=0)
            orders = np.argsort(rng.random_sample(X.shape), axis=0)
            residuals += np.take_along_axis(centred_means, orders, axis=0)
        return rotation_reference(residuals, groups, rng) + X.mean(axis=0)
    return reference


def use_reference(kind):
    """Point ``reference_null_cap`` at references of ``kind``."""
    covariance = (rotation_reference if kind.startswith("rotation") else
                  residual_rotation("drop") if kind == "resid-drop" else
                  residual_rotation("permuted") if kind == "resid-perm" else
                  gaussian_within_reference)
    # "tested": the package as it is; the other kinds skip the rotation test.
    calibration.rotation_pvalue = (ROTATION_TEST if kind == "tested" else
                                   lambda X, rng: 0.0)
    if kind in ("permutation", "tested"):
        calibration.reference_data = PERMUTATION
        calibration.N_REFERENCE_DRAWS = 3
    elif kind in ("covariance", "rotation", "resid-drop", "resid-perm"):
        calibration.reference_data = covariance
        calibration.N_REFERENCE_DRAWS = 3
    else:  # both: permutation and the other kind alternately, three of each
        draws = itertools.count()
        calibration.reference_data = lambda X, groups, rng: (
            (PERMUTATION if next(draws) % 2 == 0 else covariance)(X, groups, rng))
        calibration.N_REFERENCE_DRAWS = 6


def run(kind, name, X, groups, estimator):
    use_reference(kind)
    start = time.perf_counter()
    model = estimator.fit(X)
    seconds = time.perf_counter() - start
    n = len(X)
    if isinstance(estimator, ExactHierarchicalClustering):
        value = (largest_support(model, n) if groups is None else
                 min(model.cluster_probability(np.flatnonzero(groups == k))
                     for k in np.unique(groups)))
    else:
        pairwise = model.pairwise_probability_
        value = (largest_together(pairwise) if groups is None else
                 pairwise[groups[:, None] == groups[None, :]].min())
    fail = value > 0.5 if groups is None else value < (0.9 if isinstance(
        estimator, ExactHierarchicalClustering) else 0.8)
    return model.beta_, bool(model.calibration_["null_cap_bound"]), value, fail, seconds


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--kinds", nargs="+", default=["permutation", "tested"])
    parser.add_argument("--data", nargs="+",
                        default=["30x100", "300x10", "noise", "planted"])
    parser.add_argument("--estimators", nargs="+", default=["tree", "flat"])
    parser.add_argument("--planted-n", type=int, default=12)
    args = parser.parse_args()
    estimators = {"tree": ExactHierarchicalClustering, "flat": ExactFlatClustering}
    print(f"{'data':>8} {'seed':>4} {'est':>4} | " + " | ".join(
        f"{kind[:8]:>8}: {'beta_':>7} {'cap':>3} {'value':>5} {'s':>5}" for kind in args.kinds))
    failures = {}
    for data, seed, est in itertools.product(args.data, args.seeds, args.estimators):
        if data.startswith("planted"):   # "planted-50": 50 marked genes a subtype
            marked = int(data.split("-")[1]) if "-" in data else 150
            X, groups = make_planted_subtypes(args.planted_n, n_marked=marked,
                                              random_state=seed)
        elif data == "noise":
            X, groups = np.random.default_rng(seed).normal(size=(12, 3000)), None
        else:
            n_blocks = int(data.split("x")[0])
            X, groups = correlated_blocks(12, n_blocks, seed), None
        cells = []
        for kind in args.kinds:
            beta, bound, value, fail, seconds = run(kind, data, X, groups, estimators[est]())
            failures[kind, data, est] = failures.get((kind, data, est), 0) + fail
            cells.append(f"{kind[:8]:>8}: {beta:>7.3g} {'yes' if bound else 'no':>3} "
                         f"{value:>5.2f} {seconds:>5.1f}")
        print(f"{data:>8} {seed:>4} {est:>4} | " + " | ".join(cells), flush=True)
    print("failures (structureless: value > 0.5; planted: trees < 0.9, flat within < 0.8):")
    for (kind, data, est), count in failures.items():
        print(f"  {kind:>11} {data:>8} {est:>4}: {count}/{len(args.seeds)}")


if __name__ == "__main__":
    main()
