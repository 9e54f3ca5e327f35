"""The log Z search's time budget: how far past it its callers end, and what its end costs.

At the end of a budgeted run the search revises every stored cluster's
log Z bracket from its parts (``BestFirstSearch.log_partition_bounds``).
For each size this prints, in one run:

(fit) ``BestFirstHierarchicalClustering(objective="log_partition",
    max_time=--budget, algorithm="search")``: the fit's wall time past
    ``max_time``; the reported bracket; then, on the same search graph,
    the full revision of every cluster (its time and bracket), so that the
    width the fit gave up by not revising everything within its budget is
    the difference of the two widths.
(mass) ``SparseTrellisClustering``'s certified share of the spanned trees
    (``mass_bound_time=--mass-time``): the time of the bound past its
    budget, and the bound.

Ginkgo jets of ``--sizes`` particles (``make_jets(n_leaves=N,
random_state=N)``) and Dasgupta (beta 2) on ``--dasgupta-sizes`` random
Gaussian points in 5 dimensions (seed N).

    python benchmarks/bench_search_budget.py --sizes 20 25 30 --budget 20
"""
import argparse
import time
import warnings

import numpy as np

from sktrellis import BestFirstHierarchicalClustering, SparseTrellisClustering
from sktrellis.datasets import make_jets
from sktrellis.energies import Dasgupta, GinkgoLikelihood


def problems(sizes, dasgupta_sizes):
    for n_points in sizes:
        yield (f"Ginkgo jet N={n_points}", GinkgoLikelihood(),
               make_jets(n_leaves=n_points, random_state=n_points)[0].momenta)
    for n_points in dasgupta_sizes:
        X = np.random.default_rng(n_points).normal(size=(n_points, 5))
        yield f"Dasgupta beta=2 N={n_points}", Dasgupta(beta=2.0), X


def timed(call):
    start = time.perf_counter()
    value = call()
    return value, time.perf_counter() - start


def width(bracket):
    return bracket[1] - bracket[0]


def part_fit(name, energy, X, budget):
    model = BestFirstHierarchicalClustering(
        energy, objective="log_partition", max_time=budget, algorithm="search", tol=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, seconds = timed(lambda: model.fit(X))
    reported = model.log_partition_bounds_
    search = model._search
    full, full_seconds = timed(search.log_partition_bounds)
    print(f"{name}: fit {seconds:.2f} s, {seconds - budget:+.2f} s past max_time={budget:g} "
          f"({model.n_clusters_stored_:,} clusters); reported bracket "
          f"[{reported[0]:.4f}, {reported[1]:.4f}] width {width(reported):.4f}; full revision "
          f"after the fit {full_seconds:.2f} s, width {width(full):.4f} (given up: "
          f"{width(reported) - width(full):.4f} nats)", flush=True)


def part_mass(name, energy, X, mass_time):
    # The bound alone, on a fitted model, timed against its own budget.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = SparseTrellisClustering(energy, mass_bound_time=0).fit(X)
    model.mass_bound_time = mass_time
    bound, seconds = timed(lambda: model._log_spanned_mass_lower_bound(energy, X))
    print(f"{name}: mass bound {seconds:.2f} s, {seconds - mass_time:+.2f} s past "
          f"mass_bound_time={mass_time:g}; log spanned mass >= {bound:.4f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 25, 30])
    parser.add_argument("--dasgupta-sizes", type=int, nargs="*", default=[48])
    parser.add_argument("--budget", type=float, default=20.0, help="max_time of the fits")
    parser.add_argument("--mass-time", type=float, default=5.0,
                        help="mass_bound_time of the sparse fits")
    parser.add_argument("--parts", nargs="+", choices=("fit", "mass"), default=["fit", "mass"])
    args = parser.parse_args()
    for name, energy, X in problems(args.sizes, args.dasgupta_sizes):
        if "fit" in args.parts:
            part_fit(name, energy, X, args.budget)
        if "mass" in args.parts:
            part_mass(name, energy, X, args.mass_time)


if __name__ == "__main__":
    main()
