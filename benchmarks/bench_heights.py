"""Heights a reader can trust: cophenetic correlation of the MAP tree's heights.

The MAP tree's own heights (``linkage_matrix_``) are cumulative energies;
``Tree.with_heights(X)`` puts each merge at the mean distance between its
children's points (monotone envelope) or at the cluster's diameter. This
measures, on the bundled iris subset, planted blobs and pure noise, the
cophenetic correlation of each against the Euclidean distances of the data,
beside scipy's average linkage (the tree that maximises nothing but is the
usual reference for this number), and how deep noise looks against planted
data (top height of the tree over the median pairwise distance).

    PYTHONPATH=src python benchmarks/bench_heights.py [--n-points 15] [--seeds 5]
"""
import argparse

import numpy as np
from scipy.cluster.hierarchy import cophenet, linkage
from scipy.spatial.distance import pdist

from sktrellis import ExactHierarchicalClustering
from sktrellis.datasets import load_iris12


def datasets(n_points, seed):
    rng = np.random.default_rng(seed)
    sizes = np.full(3, n_points // 3)
    sizes[: n_points - sizes.sum()] += 1
    planted = np.vstack([rng.normal(loc=3.0 * k, size=(n, 4)) for k, n in enumerate(sizes)])
    yield "iris12", load_iris12().data
    yield "planted", planted
    yield "noise", rng.normal(size=(n_points, 4))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-points", type=int, default=15)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    rows = {}
    for seed in range(args.seeds):
        for name, X in datasets(args.n_points, seed):
            if name == "iris12" and seed > 0:
                continue
            distances = pdist(X)
            model = ExactHierarchicalClustering(verbose=0).fit(X)
            trees = {
                "energy (linkage_matrix_)": model.linkage_matrix_,
                "with_heights(X) average": model.tree_.with_heights(X).to_numpy(),
                "with_heights(X) complete":
                    model.tree_.with_heights(X, method="complete").to_numpy(),
                "scipy average linkage": linkage(X, "average"),
            }
            for label, Z in trees.items():
                r = cophenet(Z, distances)[0]
                depth = Z[:, 2].max() / np.median(distances)
                rows.setdefault((name, label), []).append((r, depth))
    print("| data | heights | cophenet r (mean, min-max) | top height / median distance |")
    print("|---|---|---:|---:|")
    for (name, label), values in rows.items():
        r, depth = np.array(values).T
        print(f"| {name} | {label} | {r.mean():.3f} ({r.min():.3f}-{r.max():.3f}) "
              f"| {depth.mean():.2f} |")


if __name__ == "__main__":
    main()
