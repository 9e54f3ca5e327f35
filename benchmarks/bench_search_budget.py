"""The log Z search's time budget: how far past it its callers end, and what its end costs.

At the end of a budgeted run the search revises every stored cluster's
log Z bracket from its parts (``BestFirstSearch.log_partition_bounds``).
For each size this prints, in one run:

(fit) ``BestFirstHierarchicalClustering(objective=..., max_time=--budget,
    algorithm="search")`` for each of ``--objectives``: the fit's wall
    time past ``max_time``; the reported bracket; then, on the same search
    graph, the full revision of every cluster (its time and bracket), so
    that the width the fit gave up by not revising everything within its
    budget is the difference of the two widths.
(cut) The search kernel alone (``BestFirstSearch``, seeded with the beam
    search's tree) run for ``--cut-budget`` seconds, then on the same
    graph: the root's bracket as the walks left it (what a revision with
    no time left returns), after a revision cut at ``--cut-seconds``, and
    after the full revision (its time).
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
from sktrellis._engine.agglomerative.builders import beam_search
from sktrellis._engine.search._best_first import BestFirstSearch
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


def part_fit(name, energy, X, budget, objective):
    model = BestFirstHierarchicalClustering(
        energy, objective=objective, max_time=budget, algorithm="search", tol=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, seconds = timed(lambda: model.fit(X))
    reported = model.log_partition_bounds_
    search = model._search
    full, full_seconds = timed(search.log_partition_bounds)
    print(f"{name} {objective}: fit {seconds:.2f} s, {seconds - budget:+.2f} s past max_time={budget:g} "
          f"({model.n_clusters_stored_:,} clusters); reported bracket "
          f"[{reported[0]:.4f}, {reported[1]:.4f}] width {width(reported):.4f}; full revision "
          f"after the fit {full_seconds:.2f} s, width {width(full):.4f} (given up: "
          f"{width(reported) - width(full):.4f} nats)", flush=True)


def part_cut(name, energy, X, budget, cut_seconds, objective):
    search = BestFirstSearch(energy.search_bound(X), len(X), objective=objective)
    search.add_tree(beam_search(energy.merge_model(X), 5)[0].merges)
    start = time.perf_counter()
    while time.perf_counter() - start < budget and not search.finished:
        if search.run(seconds=0.1) == "max_states":
            break
    walked = search.root_log_partition_bracket
    cut, cut_time = timed(lambda: search.log_partition_bounds(seconds=cut_seconds))
    cut_revised, complete = search.n_revised, search.log_partition_refreshed
    full, full_time = timed(search.log_partition_bounds)
    print(f"{name} {objective}: {search.n_clusters:,} clusters after {budget:g} s; bracket "
          f"width as walked {width(walked):.4f}; cut at {cut_seconds:g} s ({cut_time:.4f} s, "
          f"{cut_revised:,} clusters revised{', complete' if complete else ''}) "
          f"{width(cut):.4f}; full revision ({full_time:.4f} s, {search.n_revised:,} more "
          f"clusters) {width(full):.4f}", flush=True)


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
    parser.add_argument("--objectives", nargs="+", choices=("log_partition", "map"),
                        default=["log_partition", "map"])
    parser.add_argument("--cut-budget", type=float, default=10.0,
                        help="seconds of search before the revisions of part cut")
    parser.add_argument("--cut-seconds", type=float, default=0.001,
                        help="the budget of the cut revision of part cut")
    parser.add_argument("--parts", nargs="+", choices=("fit", "cut", "mass"),
                        default=["fit", "cut", "mass"])
    args = parser.parse_args()
    for name, energy, X in problems(args.sizes, args.dasgupta_sizes):
        for objective in args.objectives:
            if "fit" in args.parts:
                part_fit(name, energy, X, args.budget, objective)
            if "cut" in args.parts:
                part_cut(name, energy, X, args.cut_budget, args.cut_seconds, objective)
        if "mass" in args.parts:
            part_mass(name, energy, X, args.mass_time)


if __name__ == "__main__":
    main()
