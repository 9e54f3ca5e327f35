"""Issue 32's seven items, reproduced as its reporter ran them, at the defaults.

Each item is the reporter's data shape and call, with every estimator at
its defaults, and prints what a scientist reads from the result:

1. ``ExactFlatClustering().fit`` on structureless 20 x 3000 data (the
   planted benchmark's matrix without its shifts,
   ``make_planted_subtypes(20, 3000, shift=0)``), seeds ``--item1-seeds``:
   ``beta_``, the largest co-clustering that three points all reach, the
   largest block of points that all co-cluster above 0.5 and its
   ``together_probability``, P(MAP partition);
2. iris, 18 flowers (6 per class, subsamples ``--seeds``): the flat
   ``beta_``, P(K = 3), the mode of K, the MAP partition's K, each
   species' ``together_probability`` (flat), the mean co-clustering of a
   versicolor and a virginica flower, each species' cluster probability
   (trees), and the warnings shown;
3. columns that are not information (N = 12): one noise column, twelve
   copies of it, three noise columns with and without 20 constant
   columns, and 3000 genes in 30 blocks of 100 or 300 blocks of 10
   correlated genes (each block one latent variable per sample plus noise
   of a third of its scale, no cluster structure): ``beta_``, the calibration's method and
   counts of columns, the largest support of a cluster of 3..N-1 points
   (trees), the largest co-clustering three points reach (partitions),
   the warnings;
4. degenerate data: 12 x 20 noise whose rows 1 and 2 repeat row 0 (the
   support of {0, 1, 2}, warnings, log Z, labels), and 12 identical
   rows (the error or result of each estimator);
5. ``SparseTrellisClustering()`` on structureless 40 x 2000 data, and
   ``SparseTrellisClustering(GinkgoLikelihood())`` on jets of 20 and 30
   particles (``make_jets(n_leaves=N, random_state=N)``): ``beta_``, the
   top clusters' support, ``log_spanned_mass_lower_bound_``; at 20
   particles also the exact log Z and the exact support of the same
   clusters, so the spanned trees' true share of the mass;
6. ``BestFirstHierarchicalClustering(GinkgoLikelihood()).fit(jet)`` at 25
   and 30 particles at its defaults (and at 20, where the README says the
   trellis proves the jet): wall time, ``optimality_gap_`` and the
   relative gap, which solver ended, what it printed; then at 25
   particles with ``verbose=1``, its output;
7. ``ExactHierarchicalClustering(n_clusters=k)``'s default ``labels_``
   against the MAP tree's k-cut, Ward and average linkage (ARI against the
   classes) on the 16 runs of ``bench_point_estimate.py`` (iris, wine,
   digits {0, 1, 7}, breast cancer; 18-20 rows, raw and standardised),
   the number of single-point blocks of each, ``beta_`` and each class's
   support as a cluster of the tree; then the README's main job
   (``python -m sktrellis``, the bundled 12 iris flowers).

Every item is bounded: item 6 by the estimator's own ``max_time`` (60 s,
once at 20 points, twice at 25 and once at 30), the others by their
sizes. On the 2-core machine under a load average of 12-15 (five
sessions) item 1 took 8 minutes a seed (a calibrated flat fit at
N = 20), item 2 10 minutes, item 3 under 2, item 4 seconds, items 5 and
6 about 2 and 3.5, item 7 20 (``--item7-sets`` runs some of its sets).
Run the items separately under ``nice``:

    nice -n 10 python benchmarks/bench_issue_reproduction.py --items 1 --item1-seeds 0
    nice -n 10 python benchmarks/bench_issue_reproduction.py --items 2 3 4
    nice -n 10 python benchmarks/bench_issue_reproduction.py --items 5 6
    nice -n 10 python benchmarks/bench_issue_reproduction.py --items 7 --item7-sets iris wine
"""
import argparse
import contextlib
import io
import itertools
import pathlib
import subprocess
import sys
import time
import warnings

import numpy as np
from sklearn.cluster import AgglomerativeClustering
from sklearn.datasets import load_iris
from sklearn.metrics import adjusted_rand_score

from sktrellis import (
    BestFirstHierarchicalClustering, ExactFlatClustering, ExactHierarchicalClustering,
    SparseTrellisClustering,
)
from sktrellis._engine.tree.conversion import labels_from_linkage
from sktrellis.datasets import make_jets, make_planted_subtypes
from sktrellis.energies import GinkgoLikelihood

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_point_estimate import labelled_sets  # noqa: E402  (the same 16 runs)


def fitted(estimator, X):
    """(fitted estimator or the exception, seconds, short texts of the warnings raised)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        try:
            result = estimator.fit(X)
        except Exception as error:  # the reporter reads the error as the answer
            result = error
        seconds = time.perf_counter() - start
    return result, seconds, [f"{w.category.__name__}: {str(w.message)[:110]}" for w in caught]


def show_warnings(texts, indent="    "):
    for text in dict.fromkeys(texts):  # each distinct warning once
        print(f"{indent}{text}")


def largest_together(pairwise):
    """The largest co-clustering that three points all reach with each other."""
    return max(min(pairwise[i, j], pairwise[i, k], pairwise[j, k])
               for i, j, k in itertools.combinations(range(len(pairwise)), 3))


def largest_block(pairwise, level=0.5):
    """A largest set of points whose every pair co-clusters above ``level`` (greedy clique)."""
    best = []
    for start in range(len(pairwise)):
        block = [start]
        for j in np.argsort(-pairwise[start]):
            if j not in block and all(pairwise[j, i] > level for i in block):
                block.append(int(j))
        best = max(best, block, key=len)
    return sorted(best)


def largest_support(model, n_samples):
    """The largest support of a cluster of 3..N-1 points, and that cluster."""
    clusters = [(p, members) for members, p in model.most_probable_clusters(20, min_size=3)
                if len(members) < n_samples]
    return max(clusters, default=(0.0, ()), key=lambda c: c[0])


def flat_summary(model):
    pairwise = model.pairwise_probability_
    block = largest_block(pairwise)
    together = model.together_probability(block) if len(block) > 1 else float("nan")
    return largest_together(pairwise), block, together


def item_structureless_partitions(seeds):
    print("\n1. ExactFlatClustering().fit(X), X = make_planted_subtypes(20, 3000, shift=0)")
    print(f"{'seed':>4} {'beta_':>8} {'method':>18} {'3 together':>10} {'block>0.5':>9} "
          f"{'P(block)':>8} {'P(MAP)':>7} {'K MAP':>5} {'seconds':>7}")
    for seed in seeds:
        X = make_planted_subtypes(20, 3000, shift=0.0, random_state=seed)[0]
        model, seconds, caught = fitted(ExactFlatClustering(), X)
        three, block, together = flat_summary(model)
        p_map = np.exp(model.map_log_potential_ - model.log_partition_)
        print(f"{seed:>4} {model.beta_:>8.3g} {model.calibration_['method']:>18} {three:>10.3f} "
              f"{len(block):>9} {together:>8.3f} {p_map:>7.3f} {len(np.unique(model.labels_)):>5} "
              f"{seconds:>7.1f}", flush=True)
        show_warnings(caught)


def iris_subsample(seed, per_class=6):
    X, y = load_iris(return_X_y=True)
    rng = np.random.RandomState(seed)
    rows = np.concatenate([rng.choice(np.flatnonzero(y == k), per_class, replace=False)
                           for k in range(3)])
    return X[rows], y[rows]


def item_few_features(seeds):
    print("\n2. iris, 18 flowers (6 per class): ExactFlatClustering() and "
          "ExactHierarchicalClustering()")
    print(f"{'seed':>4} {'flat beta_':>10} {'branch':>17} {'P(K=3)':>6} {'mode K':>6} "
          f"{'MAP K':>5} {'flat: set. vers. virg.':>22} {'vers~virg':>9} {'tree beta_':>10} "
          f"{'tree: set. vers. virg.':>22}")
    for seed in seeds:
        X, y = iris_subsample(seed)
        classes = [np.flatnonzero(y == k) for k in range(3)]
        flat, _, flat_warnings = fitted(ExactFlatClustering(), X)
        tree, _, tree_warnings = fitted(ExactHierarchicalClustering(), X)
        k_probability = flat.n_clusters_probability_
        flat_support = " ".join(f"{flat.together_probability(c):.2f}" for c in classes)
        tree_support = " ".join(f"{tree.cluster_probability(c):.2f}" for c in classes)
        print(f"{seed:>4} {flat.beta_:>10.3g} {str(flat.calibration_.get('branch', '-')):>17} "
              f"{k_probability[3]:>6.2f} {int(np.argmax(k_probability)):>6} "
              f"{len(np.unique(flat.labels_)):>5} {flat_support:>22} "
              f"{flat.pairwise_probability_[np.ix_(classes[1], classes[2])].mean():>9.2f} "
              f"{tree.beta_:>10.3g} "
              f"{tree_support:>22}", flush=True)
        if seed == seeds[0]:
            print("  warnings (flat, then tree):")
            show_warnings(flat_warnings + tree_warnings)


def column_regimes(seed):
    rng = np.random.default_rng(seed)
    column = rng.normal(size=(12, 1))
    three = rng.normal(size=(12, 3))
    correlated = {
        f"{n_blocks} blocks x {size}": np.repeat(rng.normal(size=(12, n_blocks)), size, axis=1)
        + rng.normal(scale=1 / 3, size=(12, 3000))
        for n_blocks, size in ((30, 100), (300, 10))
    }
    return {
        "one column": column,
        "12 copies of it": np.repeat(column, 12, axis=1),
        "3 columns": three,
        "3 + 20 constant": np.hstack([three, np.full((12, 20), 5.0)]),
        **correlated,
    }


def item_columns(seeds):
    print("\n3. columns that are not information, N = 12, no cluster structure")
    print(f"{'data':>16} {'seed':>4} | {'tree beta_':>10} {'method':>17} {'distinct':>8} "
          f"{'n_eff':>6} {'max 3..11':>9} | {'flat beta_':>10} {'3 together':>10} | warnings")
    for seed in seeds:
        for name, X in column_regimes(seed).items():
            tree, _, tree_warnings = fitted(ExactHierarchicalClustering(), X)
            flat, _, flat_warnings = fitted(ExactFlatClustering(), X)
            calibration = tree.calibration_
            n_effective = calibration.get("n_effective_features", float("nan"))
            kinds = sorted({text.split(":")[0] + ":" + text.split(":")[1][:40]
                            for text in tree_warnings + flat_warnings})
            print(f"{name:>16} {seed:>4} | {tree.beta_:>10.3g} {calibration['method']:>17} "
                  f"{str(calibration.get('n_distinct_features', '-')):>8} "
                  f"{n_effective:>6.3g} {largest_support(tree, 12)[0]:>9.3f} | "
                  f"{flat.beta_:>10.3g} {largest_together(flat.pairwise_probability_):>10.3f} | "
                  f"{len(tree_warnings) + len(flat_warnings)}", flush=True)
            if seed == seeds[0]:
                show_warnings(kinds, indent="      ")


def item_degenerate():
    print("\n4. degenerate data")
    X = np.random.default_rng(0).normal(size=(12, 20))
    X[1] = X[2] = X[0]
    for estimator in (ExactHierarchicalClustering(), ExactFlatClustering()):
        model, _, caught = fitted(estimator, X)
        name = type(estimator).__name__
        if isinstance(model, Exception):
            print(f"  rows 0-2 identical, {name}: {type(model).__name__}: {model}")
            continue
        support = (model.cluster_probability([0, 1, 2]) if hasattr(model, "cluster_probability")
                   and name.startswith("ExactHier") else model.together_probability([0, 1, 2]))
        print(f"  rows 0-2 identical, {name}: beta_ {model.beta_:.3g}, P({{0,1,2}}) {support:.3f},"
              f" log Z {model.log_partition_:.4g}, labels {model.labels_.tolist()}")
        show_warnings(caught)
    same = np.tile(np.random.default_rng(1).normal(size=(1, 5)), (12, 1))
    for estimator in (ExactHierarchicalClustering(), ExactFlatClustering(),
                      SparseTrellisClustering()):
        model, _, caught = fitted(estimator, same)
        name = type(estimator).__name__
        if isinstance(model, Exception):
            print(f"  all 12 rows identical, {name}: {type(model).__name__}: {model}")
        else:
            print(f"  all 12 rows identical, {name}: beta_ {model.beta_:.3g}, "
                  f"log Z {model.log_partition_:.4g}, labels {model.labels_.tolist()}")
        show_warnings(caught)


def exact_support(exact, members):
    return exact.cluster_probability(members) if exact is not None else float("nan")


def item_sparse(seeds):
    print("\n5. SparseTrellisClustering() past the exact estimators' comfort")
    print(f"{'data':>16} {'seed':>4} {'beta_':>8} {'max 3..N-1':>10} {'size':>5} "
          f"{'log bound':>9} {'seconds':>7}")
    for seed in seeds:
        X = np.random.default_rng(seed).normal(size=(40, 2000))
        model, seconds, caught = fitted(SparseTrellisClustering(), X)
        support, members = largest_support(model, 40)
        print(f"{'noise 40 x 2000':>16} {seed:>4} {model.beta_:>8.3g} {support:>10.3f} "
              f"{len(members):>5} {model.log_spanned_mass_lower_bound_:>9.3g} {seconds:>7.1f}",
              flush=True)
        show_warnings(caught)
    for n_points in (20, 30):
        jet = make_jets(n_leaves=n_points, random_state=n_points)[0].momenta
        model, seconds, caught = fitted(SparseTrellisClustering(GinkgoLikelihood()), jet)
        exact = None
        if n_points <= 20:
            exact = ExactHierarchicalClustering(GinkgoLikelihood()).fit(jet)
        print(f"  jet of {n_points}: sparse fit {seconds:.1f} s, sparse log Z "
              f"{model.log_partition_:.4f}, log_spanned_mass_lower_bound_ "
              f"{model.log_spanned_mass_lower_bound_:.4g}"
              + (f", exact log Z {exact.log_partition_:.4f}: log share of the spanned trees "
                 f"{model.log_partition_ - exact.log_partition_:.3f}; MAP log potential sparse "
                 f"{model.map_log_potential_:.4f}, exact {exact.map_log_potential_:.4f}"
                 if exact is not None else ""))
        print(f"  {'cluster size':>14} {'sparse support':>14} {'exact support':>13}")
        for members, probability in model.most_probable_clusters(5, min_size=3):
            if len(members) < n_points:
                print(f"  {len(members):>14} {probability:>14.3f} "
                      f"{exact_support(exact, members):>13.3f}")
        top = model.most_probable_clusters(1, min_size=3)
        print(f"  what the top-cluster query shows: {top!r}"[:200])
        show_warnings(caught)


def item_best_first(sizes, verbose_size):
    print("\n6. BestFirstHierarchicalClustering(GinkgoLikelihood()).fit(jet), defaults")
    print(f"{'N':>3} {'verbose':>7} {'seconds':>7} {'returned':>8} {'gap (nats)':>10} "
          f"{'relative gap':>12} {'solver':>8} {'stop reason':>14} {'lines':>5}")
    runs = [(n, 0) for n in sizes] + ([(verbose_size, 1)] if verbose_size else [])
    for n_points, verbose in runs:
        jet = make_jets(n_leaves=n_points, random_state=n_points)[0].momenta
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            model, seconds, caught = fitted(
                BestFirstHierarchicalClustering(GinkgoLikelihood(), verbose=verbose), jet)
        returned = not isinstance(model, Exception)
        lines = [line for line in (out.getvalue() + err.getvalue()).replace("\r", "\n")
                 .splitlines() if line.strip()]
        print(f"{n_points:>3} {verbose:>7} {seconds:>7.1f} {str(returned):>8} "
              f"{getattr(model, 'optimality_gap_', float('nan')):>10.4g} "
              f"{getattr(model, 'relative_optimality_gap_', float('nan')):>12.3g} "
              f"{str(getattr(model, 'solver_', '-')):>8} "
              f"{str(getattr(model, 'stop_reason_', '-')):>14} "
              f"{len(lines):>5}", flush=True)
        if not returned:
            print(f"    {type(model).__name__}: {model}")
        for line in lines[:4] + (["..."] + lines[-2:] if len(lines) > 6 else lines[4:]):
            print(f"    | {line[:150]}")
        show_warnings(caught)


SETS = ["iris", "wine", "digits", "cancer"]


def item_point_estimate(names):
    print("\n7. ExactHierarchicalClustering(n_clusters=k).labels_ (default) against the "
          "MAP tree's cut, Ward and average linkage: ARI")
    methods = ["labels_", "map cut", "ward", "average"]
    print(f"{'set':16s} " + " ".join(f"{m:>8s}" for m in methods)
          + f" {'singletons':>10s} {'beta_':>7s} {'class supports':>20s}")
    rows = []
    for name, X, y, k in labelled_sets():
        if name.split("-")[0] not in names:
            continue
        model = ExactHierarchicalClustering(n_clusters=k).fit(X)
        supports = " ".join(f"{model.cluster_probability(np.flatnonzero(y == c)):.2f}"
                            for c in np.unique(y))
        labels = {
            "labels_": model.labels_,
            "map cut": labels_from_linkage(model.linkage_matrix_, k),
            "ward": AgglomerativeClustering(k, linkage="ward").fit_predict(X),
            "average": AgglomerativeClustering(k, linkage="average").fit_predict(X),
        }
        rows.append([adjusted_rand_score(y, labels[m]) for m in methods])
        singletons = "/".join(str(int(np.sum(np.bincount(labels[m]) == 1))) for m in methods)
        print(f"{name:16s} " + " ".join(f"{v:8.2f}" for v in rows[-1])
              + f" {singletons:>10s} {model.beta_:>7.3g} {supports:>20s}", flush=True)
    print(f"{'mean':16s} " + " ".join(f"{v:8.3f}" for v in np.mean(rows, axis=0)))
    print("\n  README main job: python -m sktrellis")
    job = subprocess.run([sys.executable, "-m", "sktrellis"], capture_output=True, text=True,
                         timeout=300)
    for line in (job.stdout + job.stderr).splitlines():
        print(f"    | {line[:160]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, nargs="*", default=[1, 2, 3, 4, 5, 6, 7],
                        choices=range(1, 8))
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2],
                        help="seeds of items 2 and 3 (the first two: item 5)")
    parser.add_argument("--item1-seeds", type=int, nargs="*", default=[0, 1],
                        help="seeds of item 1 (a calibrated flat fit at N = 20: minutes each)")
    parser.add_argument("--best-first-sizes", type=int, nargs="*", default=[20, 25, 30])
    parser.add_argument("--verbose-size", type=int, default=25,
                        help="jet size of item 6's run at verbose=1 (0: none)")
    parser.add_argument("--item7-sets", nargs="*", default=SETS, choices=SETS,
                        help="the real sets of item 7 (each: 4 calibrated fits at N = 18-20)")
    args = parser.parse_args()
    seeds = args.seeds
    items = {
        1: lambda: item_structureless_partitions(args.item1_seeds),
        2: lambda: item_few_features(seeds),
        3: lambda: item_columns(seeds),
        4: item_degenerate,
        5: lambda: item_sparse(seeds[:2]),
        6: lambda: item_best_first(args.best_first_sizes, args.verbose_size),
        7: lambda: item_point_estimate(args.item7_sets),
    }
    for item in args.items:
        start = time.perf_counter()
        items[item]()
        print(f"  (item {item}: {time.perf_counter() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
