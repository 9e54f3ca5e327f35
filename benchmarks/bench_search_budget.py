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
(tol) The "log_partition" search's ``tol`` stop, on ``--tol-problems``
    for each of ``--tols``, the clock started before the beam search's
    tree (width 5) that seeds every run, in CPU seconds and walks: when the
    root's bracket as the walks leave it is first within ``tol`` (the
    kernel in slices of 0.1 s, as the driver ran it before it revised the
    brackets between slices), when it is with every cluster's bracket
    revised after every slice (and the revisions' share of the CPU time,
    and the most a revision narrowed the walked bracket by), and when
    ``run_search`` (the driver, ``bracket_log_partition=True``) stops, with
    the bracket it reports. A problem whose walked bracket reaches no
    ``tol`` within ``--tol-budget`` is a time-bound run: then the clusters
    stored and the width at the end (the walked loop's after the final
    revision) of the walked loop and of the driver.

Ginkgo jets of ``--sizes`` particles (``make_jets(n_leaves=N,
random_state=N)``) and Dasgupta (beta 2) on ``--dasgupta-sizes`` random
Gaussian points in 5 dimensions (seed N).

    python benchmarks/bench_search_budget.py --sizes 20 25 30 --budget 20
    python benchmarks/bench_search_budget.py --parts tol --tol-problems jet:14 planted:40:2
"""
import argparse
import pathlib
import sys
import time
import warnings

import numpy as np

from sktrellis import BestFirstHierarchicalClustering, SparseTrellisClustering
from sktrellis._engine.agglomerative.builders import beam_search
from sktrellis._engine.search import driver
from sktrellis._engine.search._best_first import BestFirstSearch
from sktrellis.datasets import make_jets
from sktrellis.energies import Dasgupta, GinkgoLikelihood

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_best_first import problem  # noqa: E402  (its blobs and planted hierarchy)


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


def tol_problem(spec):
    """``jet:N``, or ``random:N:beta`` (Dasgupta on 5-d Gaussian points), ``blobs:N:beta`` or
    ``planted:N:beta`` (bench_best_first's data, seed N)."""
    kind, n_points, *beta = spec.split(":")
    n_points = int(n_points)
    if kind == "jet":
        return (f"jet N = {n_points}", GinkgoLikelihood(),
                make_jets(n_leaves=n_points, random_state=n_points)[0].momenta)
    beta = float(beta[0])
    if kind == "random":
        energy = Dasgupta(beta=beta)
        X = np.random.default_rng(n_points).normal(size=(n_points, 5))
    else:
        energy, X = problem("dasgupta", kind, n_points, seed=n_points)
        energy.set_params(beta=beta)
    return f"Dasgupta {kind} beta {beta:g} N = {n_points}", energy, X


def beam_incumbent(energy, X):
    def incumbent():
        tree = beam_search(energy.merge_model(X), 5)[0]
        return tree.merges, tree.log_potential
    return incumbent


def tol_loop(energy, X, tols, budget, revise):
    """The kernel in the driver's slices; when each tol is first reached, the revisions' share.

    Returns ``(reached, cpu, revising, narrowed, search)``: the CPU seconds and
    walks at which each tol was reached (the walked bracket, or with ``revise``
    the one revised after every slice), the loop's CPU seconds, the revisions'
    CPU seconds, and the most a revision narrowed the walked bracket by. CPU
    time: the search runs on one thread, and the machine is shared.
    """
    bound = energy.search_bound(X)
    exact_size = -1 if bound.exact_size > 2 else driver._LOG_PARTITION_EXACT_SIZE
    start, cpu = time.perf_counter(), time.process_time()
    search = BestFirstSearch(bound, len(X), objective="log_partition", exact_size=exact_size)
    search.add_tree(beam_incumbent(energy, X)()[0])
    reached, revising, narrowed = {}, 0.0, 0.0
    while (len(reached) < len(tols) and not search.finished
           and time.perf_counter() - start < budget):
        if search.run(seconds=driver._SLICE_SECONDS) == "max_states":
            break
        if revise:
            walked = width(search.root_log_partition_bracket)
            revision = time.process_time()
            search.log_partition_bounds()
            revising += time.process_time() - revision
            narrowed = max(narrowed, walked - width(search.root_log_partition_bracket))
        for tol in tols:
            if tol not in reached and (search.finished or
                                       width(search.root_log_partition_bracket) <= tol):
                reached[tol] = (time.process_time() - cpu, search.n_iterations)
    return reached, time.process_time() - cpu, revising, narrowed, search


class TimedRevisions(BestFirstSearch):
    """The search, counting its revisions of the brackets and their CPU seconds."""

    revisions = []

    def log_partition_bounds(self, seconds=np.inf, max_revisions=-1):
        cpu = time.process_time()
        bounds = super().log_partition_bounds(seconds, max_revisions)
        self.revisions.append(time.process_time() - cpu)
        return bounds


def driven(energy, X, tol, budget):
    """``run_search`` as the estimator calls it: (result, CPU seconds, revisions' note)."""
    TimedRevisions.revisions = []
    driver.BestFirstSearch = TimedRevisions
    try:
        cpu = time.process_time()
        result = driver.run_search(
            energy.search_bound(X), len(X), beam_incumbent(energy, X),
            objective="log_partition", tol=tol, max_time=budget, bracket_log_partition=True)
        cpu = time.process_time() - cpu
    finally:
        driver.BestFirstSearch = BestFirstSearch
    revisions = TimedRevisions.revisions
    return result, cpu, (f"{len(revisions)} revisions, {sum(revisions) / cpu:.1%} of the CPU "
                         "time")


def part_tol(spec, tols, budget):
    name, energy, X = tol_problem(spec)
    walked, walked_cpu, _, _, walked_search = tol_loop(energy, X, tols, budget, False)
    if not walked:
        # Time-bound: what the driver's revisions cost the walks in a run that never stops.
        clusters = walked_search.n_clusters
        final = width(walked_search.log_partition_bounds())
        result, cpu, note = driven(energy, X, min(tols), budget)
        print(f"| {name} | {min(tols):g} | time-bound, {walked_cpu:.1f} CPU s: {clusters:,} "
              f"clusters ({clusters / walked_cpu:,.0f} a CPU s), width {final:.4f} | | "
              f"{cpu:.1f} CPU s ({result.stop_reason}): {result.n_clusters_stored:,} clusters "
              f"({result.n_clusters_stored / cpu:,.0f} a CPU s), width "
              f"{width(result.log_partition_bounds):.4f}; {note} |", flush=True)
        return
    revised, revised_cpu, revising, narrowed, _ = tol_loop(energy, X, tols, budget, True)
    for tol in tols:
        result, cpu, note = driven(energy, X, tol, budget)

        def at(reached):
            return (f"{reached[tol][0]:.2f} s, {reached[tol][1]:,} walks" if tol in reached
                    else f"> {budget:g} s")
        print(f"| {name} | {tol:g} | {at(walked)} | {at(revised)} (revisions "
              f"{revising / revised_cpu:.1%}, narrowed by at most {narrowed:.3g}) | "
              f"{cpu:.2f} s, {result.n_iterations:,} walks ({result.stop_reason}), width "
              f"{width(result.log_partition_bounds):.3g}; {note} |", flush=True)


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
    parser.add_argument("--parts", nargs="+", choices=("fit", "cut", "mass", "tol"),
                        default=["fit", "cut", "mass"])
    parser.add_argument("--tol-problems", nargs="+",
                        default=["jet:14", "jet:15", "random:16:1", "planted:32:2",
                                 "planted:40:2", "blobs:40:2"],
                        help="part tol: jet:N, random:N:beta, blobs:N:beta or planted:N:beta")
    parser.add_argument("--tols", type=float, nargs="+", default=[1.0, 0.1, 0.01])
    parser.add_argument("--tol-budget", type=float, default=20.0,
                        help="the longest run of part tol")
    args = parser.parse_args()
    if "tol" in args.parts:
        print("| problem | tol | walked bracket within tol (CPU) | revised after every slice "
              "| driver (CPU) |")
        print("|---|---|---|---|---|")
        for spec in args.tol_problems:
            part_tol(spec, args.tols, args.tol_budget)
        args.sizes = args.dasgupta_sizes = []
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
