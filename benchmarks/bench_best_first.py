"""Best-first search (issue 14): exact MAP trees with a certificate, past the trellis.

(a) Equal to the trellis: for N = 8 ... 20, Dasgupta and hierarchical
    correlation clustering (HCC) on random and structured data, the MAP log
    potential of ``ExactHierarchicalClustering`` and of
    ``BestFirstHierarchicalClustering``, the search alone (with its gap and
    time) and ``algorithm="auto"`` (which solver answered, and its time).
    A search stopped by its budget is reported with its gap, never as exact.
(b) Dasgupta past the trellis: make_blobs and a planted hierarchy with
    noise, N = 24 ... 48: proven optimal or the gap at the budget, time,
    clusters stored, and the beam-search incumbent it started from.
(c) Ginkgo toy jets, N = 9 ... 30: the search's tree and certified gap
    next to beam search, the sparse trellis and (N <= 20) the exact MAP of
    the trellis (log likelihoods).
(d) log Z bracketed (issue 24), Dasgupta at an explicit beta on blobs, a
    planted hierarchy and random Gaussian points, N = 32 and 48:
    ``objective="log_partition"`` until the bracket is ``--tol`` wide or
    the budget ends; the bracket, and the probability bounds of the
    generating groups (blobs) or the best tree's two top clusters.
(e) Ginkgo jets of 20, 24 and 30 particles (issue 24): the certified MAP
    gap and the log Z bracket of the "log_partition" objective, by the
    estimator's default ``algorithm="auto"`` (search, then the trellis when
    it fits the budget) or the search alone (``--algorithm-e search``),
    against the trellis's exact MAP and log Z where it runs (N <= 20).
(f) The Ginkgo bound's slack (issue 24): on clusters of 10-16 particles of
    the 20-particle jet (three random ones per size and those of the sparse
    trellis's tree), ``-lower(S)`` and ``log_z_upper(S)`` against the
    trellis's best subtree and log Z over S, with the bound's time per call.
(g) Ginkgo exact solves of small clusters by the trellis's Ginkgo kernel
    (the bound's ``solve_subsets_``) against the recursion over
    ``split_cost`` they replace, side by side in one run: the time to
    proof of ``algorithm="search"`` on jets of ``--sizes-g`` particles
    (the two must give the same tree and cost, bit for bit).

(h) Ginkgo jets of 22, 25 and 30 particles: what the search's budget buys
    (gap, bound, clusters expanded, split bounds evaluated at 10 and 60 s,
    the longest 0.1 s slice), with the split generators by size classes
    and by partial assignments keyed by the sides (and the old search over
    blind partial assignments, ``--generators-h partial``; the sides' keys
    computing their tables afresh, ``--generators-h sides-fresh``), in one
    run, with the sides' keys computed per second; and the estimator's time
    to proof at its defaults on a 20-particle jet.
(i) The Ginkgo sides' keys on a 14-particle jet: best completion less key
    by depth of assignment (the trellis gives every subset's best tree), and
    the CPU microseconds per key at 25 and 30 particles.

    python benchmarks/bench_best_first.py                      # all parts
    python benchmarks/bench_best_first.py --part b --sizes 32 40 --budget 600
"""
import argparse
import time
import warnings

import numpy as np
from sklearn.datasets import make_blobs

from sktrellis import (
    BestFirstHierarchicalClustering,
    ExactHierarchicalClustering,
    SparseTrellisClustering,
)
from sktrellis.baselines import BeamSearchHierarchicalClustering
from sktrellis._engine.tree.conversion import merges_from_tree
from sktrellis.datasets import make_jets
from sktrellis.energies import CorrelationClustering, Dasgupta, GinkgoLikelihood


def planted_hierarchy(n_points, noise, rng):
    """Similarities from a random binary tree: depth of the pair's ancestor, plus noise.

    Points are split recursively at random positions; w_ij is the depth of
    the lowest common ancestor of i and j (deeper = more similar), scaled
    to [0, 1], plus uniform noise of amplitude ``noise``, symmetrised.
    """
    depth = np.zeros((n_points, n_points))

    def split(points, level):
        if len(points) < 2:
            return
        depth[np.ix_(points, points)] = level
        cut = rng.integers(1, len(points))
        split(points[:cut], level + 1)
        split(points[cut:], level + 1)

    split(rng.permutation(n_points), 0)
    similarity = depth / max(depth.max(), 1) + noise * rng.random((n_points, n_points))
    similarity = (similarity + similarity.T) / 2
    np.fill_diagonal(similarity, 0.0)
    return similarity


def problem(kind, data, n_points, seed):
    rng = np.random.default_rng(seed)
    if data == "random":
        X = rng.normal(size=(n_points, 2))
    elif data == "blobs":
        X, _ = make_blobs(n_samples=n_points, centers=3, random_state=seed)
    else:
        X = planted_hierarchy(n_points, 0.3, rng)
    # The costs themselves, as the papers state them (no prior over tree
    # shapes): the figures in benchmarks/README.md were measured so.
    if kind == "dasgupta":
        affinity = "precomputed" if data == "planted" else "rbf"
        return Dasgupta(affinity=affinity, beta=1.0, tree_prior="uniform"), X
    if data == "planted":
        return (CorrelationClustering(affinity="precomputed", beta=1.0, tree_prior="uniform"),
                X - np.mean(X))
    return CorrelationClustering(beta=1.0, tree_prior="uniform"), X


def search(energy, X, budget, algorithm="search"):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = BestFirstHierarchicalClustering(energy, max_time=budget,
                                                algorithm=algorithm).fit(X)
    return model, time.perf_counter() - start


def part_a(sizes, budget):
    print("(a) against the exact trellis; the search alone and algorithm='auto'")
    print("| energy | data | N | trellis MAP | search MAP | equal | gap | trellis s | search s "
          "| clusters | auto MAP equal | auto by | auto s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for kind in ("dasgupta", "hcc"):
        for data in ("random", "blobs", "planted"):
            for n_points in sizes:
                energy, X = problem(kind, data, n_points, seed=n_points)
                start = time.perf_counter()
                exact = ExactHierarchicalClustering(energy).fit(X).map_log_potential_
                trellis_time = time.perf_counter() - start
                model, search_time = search(energy, X, budget)
                equal = abs(model.map_log_potential_ - exact) <= 1e-9 * abs(exact)
                verdict = ("yes" if equal else "NO") + (
                    "" if model.optimality_gap_ == 0 else f" ({model.stop_reason_})"
                )
                auto, auto_time = search(energy, X, budget, "auto")
                auto_equal = abs(auto.map_log_potential_ - exact) <= 1e-9 * abs(exact)
                auto_verdict = ("yes" if auto_equal else "NO") + (
                    "" if auto.optimality_gap_ == 0 else f" ({auto.stop_reason_})"
                )
                print(
                    f"| {kind} | {data} | {n_points} | {exact:.6f} | "
                    f"{model.map_log_potential_:.6f} | {verdict} | "
                    f"{model.optimality_gap_:.3g} | {trellis_time:.2f} | {search_time:.2f} | "
                    f"{model.n_clusters_stored_} | {auto_verdict} | {auto.solver_} | "
                    f"{auto_time:.2f} |",
                    flush=True,
                )


def part_b(sizes, budget):
    print("(b) Dasgupta past the trellis")
    print("| data | N | result | gap | incumbent gain | time s | clusters | splits |")
    print("|---|---|---|---|---|---|---|---|")
    for data in ("blobs", "planted", "random"):
        for n_points in sizes:
            energy, X = problem("dasgupta", data, n_points, seed=n_points)
            model, seconds = search(energy, X, budget)
            result = "proven optimal" if model.optimality_gap_ == 0 else model.stop_reason_
            gain = model.map_log_potential_ - model.incumbent_log_potential_
            print(
                f"| {data} | {n_points} | {result} | {model.optimality_gap_:.4g} | "
                f"{gain:.4g} | {seconds:.1f} | {model.n_clusters_stored_} | "
                f"{model.n_splits_} |",
                flush=True,
            )


def part_c(sizes, budget):
    print("(c) Ginkgo jets: search with its certified gap, beside beam search and sparse trellis")
    print("| N | beam | sparse trellis | search | gap | result | search s | clusters | exact MAP |")
    print("|---|---|---|---|---|---|---|---|---|")
    energy = GinkgoLikelihood()
    for n_points in sizes:
        # The published root mass (900) rarely showers into more than ~16 leaves.
        root_mass2 = 900.0 if n_points <= 16 else 2500.0 if n_points <= 20 else 6400.0
        X = make_jets(n_leaves=n_points, root_mass2=root_mass2, random_state=n_points)[0].momenta
        beam = BeamSearchHierarchicalClustering(energy, beam_width=n_points).fit(X)
        sparse = SparseTrellisClustering(energy).fit(X)
        model, seconds = search(energy, X, budget)
        result = "proven optimal" if model.optimality_gap_ == 0 else model.stop_reason_
        exact = "-"
        if n_points <= 20:
            exact = f"{ExactHierarchicalClustering(energy).fit(X).map_log_potential_:.3f}"
        print(
            f"| {n_points} | {beam.map_log_potential_:.3f} | {sparse.map_log_potential_:.3f} | "
            f"{model.map_log_potential_:.3f} | {model.optimality_gap_:.4g} | {result} | "
            f"{seconds:.1f} | {model.n_clusters_stored_} | {exact} |",
            flush=True,
        )


def part_d(sizes, budget, beta, tol, exact_sizes=(None,)):
    for exact_size in exact_sizes:
        _part_d(sizes, budget, beta, tol, exact_size)


def _part_d(sizes, budget, beta, tol, exact_size):
    print(f"(d) Dasgupta log Z bracket, beta={beta}, tol={tol}, budget {budget:g} s, "
          f"exact_size={exact_size}")
    print("| data | N | lower | upper | width | result | time s | clusters | splits "
          "| P bounds of the groups |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for data in ("blobs", "planted", "random"):
        for n_points in sizes:
            energy, X = problem("dasgupta", data, n_points, seed=n_points)
            energy.set_params(beta=beta)
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = BestFirstHierarchicalClustering(
                    energy, objective="log_partition", tol=tol, max_time=budget,
                    exact_size=exact_size).fit(X)
            seconds = time.perf_counter() - start
            if data == "blobs":
                _, groups = make_blobs(n_samples=n_points, centers=3, random_state=n_points)
                groups = [np.flatnonzero(groups == g) for g in range(3)]
            else:
                # The best tree's top two clusters.
                top = model.children_[-1]
                groups = [_leaves_of(model.children_, node, n_points) for node in top]
            probabilities = ", ".join(
                "[{:.3f}, {:.3f}]".format(*model.cluster_probability_bounds(g)) for g in groups)
            lower, upper = model.log_partition_bounds_
            result = "within tol" if model.stop_reason_ == "optimal" else model.stop_reason_
            print(
                f"| {data} | {n_points} | {lower:.3f} | {upper:.3f} | {upper - lower:.3g} | "
                f"{result} | {seconds:.1f} | {model.n_clusters_stored_} | {model.n_splits_} | "
                f"{probabilities} |",
                flush=True,
            )


def _leaves_of(children, node, n_points):
    if node < n_points:
        return [int(node)]
    left, right = children[node - n_points]
    return _leaves_of(children, left, n_points) + _leaves_of(children, right, n_points)


def part_e(sizes, map_budget, log_z_budget, algorithm="search", n_jets=1):
    print(f"(e) Ginkgo: MAP ({map_budget:g} s) and log Z bracket ({log_z_budget:g} s), "
          f"algorithm={algorithm!r}")
    print("| N | jet | trellis MAP | trellis log Z | trellis s | MAP | gap | by | MAP s "
          "| log Z lower | log Z upper | width | by | log Z s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    energy = GinkgoLikelihood()
    for n_points in sizes:
        for seed in range(n_points, n_points + n_jets):
            X = make_jets(n_leaves=n_points, random_state=seed)[0].momenta
            exact_map = exact_log_z = trellis_time = "-"
            if n_points <= 20:
                start = time.perf_counter()
                exact = ExactHierarchicalClustering(energy, verbose=0).fit(X)
                trellis_time = f"{time.perf_counter() - start:.1f}"
                exact_map = f"{exact.map_log_potential_:.3f}"
                exact_log_z = f"{exact.log_partition_:.3f}"
                del exact
            model, map_seconds = search(energy, X, map_budget, algorithm)
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                bracket = BestFirstHierarchicalClustering(
                    energy, objective="log_partition", tol=0.01, max_time=log_z_budget,
                    algorithm=algorithm).fit(X)
            log_z_seconds = time.perf_counter() - start
            lower, upper = bracket.log_partition_bounds_
            print(
                f"| {n_points} | seed {seed} | {exact_map} | {exact_log_z} | {trellis_time} | "
                f"{model.map_log_potential_:.3f} | {model.optimality_gap_:.3g} | "
                f"{model.solver_} | {map_seconds:.1f} | {lower:.3f} | {upper:.3f} | "
                f"{upper - lower:.3g} | {bracket.solver_} | {log_z_seconds:.1f} |",
                flush=True,
            )


def part_f(n_points=20, sizes=range(10, 17), per_size=3):
    print(f"(f) Ginkgo bound slack on clusters of a {n_points}-particle jet (nats)")
    print("| size | clusters | MAP slack median | max | log Z slack median | max "
          "| us per lower |")
    print("|---|---|---|---|---|---|---|")
    energy = GinkgoLikelihood()
    X = make_jets(n_leaves=n_points, random_state=n_points)[0].momenta
    rng = np.random.default_rng(1)
    tree = SparseTrellisClustering(energy).fit(X).children_
    clusters = [sorted(_leaves_of(tree, node, n_points))
                for node in range(n_points, n_points + len(tree))]
    clusters += [sorted(rng.choice(n_points, size, replace=False)) for size in sizes
                 for _ in range(per_size)]
    rows = {}
    for members in clusters:
        if len(members) not in sizes:
            continue
        exact = ExactHierarchicalClustering(energy).fit(X[members])
        # Fresh bounds: one remembers the clusters it has seen, which would time a look-up.
        bounds = [energy.search_bound(X) for _ in range(20)]
        start = time.perf_counter()
        for bound in bounds:
            lower = bound.lower(members)
        micros = 1e6 * (time.perf_counter() - start) / len(bounds)
        rows.setdefault(len(members), []).append(
            (-lower - exact.map_log_potential_,
             bound.log_z_upper(members) - exact.log_partition_, micros))
    for size in sorted(rows):
        slack = np.array(rows[size])
        print(f"| {size} | {len(slack)} | {np.median(slack[:, 0]):.2f} | {slack[:, 0].max():.2f} "
              f"| {np.median(slack[:, 1]):.2f} | {slack[:, 1].max():.2f} "
              f"| {np.median(slack[:, 2]):.0f} |", flush=True)


def part_i(n_points=14, seeds=(0,), per_depth=200, key_sizes=(25, 30), n_keys=2000):
    """The sides' keys: their slack by depth of assignment, and their cost.

    On a jet of ``n_points`` particles the trellis gives the best tree over
    every subset, so each partial split of the whole jet (in the
    generator's order, softest first) has its best completion; up to
    ``per_depth`` random ones per depth, the median and least of best
    completion less key (nats). Then the CPU microseconds per key through
    ``partial_key`` on ``n_keys`` random partial splits of jets of
    ``key_sizes`` particles (fresh tables: random states rarely share a
    widest set).
    """
    print(f"(i) Ginkgo sides' keys: slack by depth on {n_points}-particle jets {seeds}")
    print("| jet | depth | states | median slack | least slack |")
    print("|---|---|---|---|---|")
    energy = GinkgoLikelihood()
    for seed in seeds:
        X = make_jets(n_leaves=n_points, random_state=seed)[0].momenta
        bound = energy.search_bound(X)
        best = -ExactHierarchicalClustering(energy).fit(X)._trellis.log_map
        members = np.argsort(X[:, 0], kind="stable")
        # Code c puts members[k] on side B iff bit k is set (bit 0 clear).
        codes = np.arange(1, 1 << (n_points - 1)) << 1
        in_b = (codes[:, None] >> np.arange(n_points)) & 1 == 1
        bits = np.left_shift(1, members)
        costs = np.array([bound.split_cost(members, ~row) + best[bits[~row].sum()]
                          + best[bits[row].sum()] for row in in_b])
        rng = np.random.default_rng(seed)
        for depth in range(1, n_points):
            chosen = rng.choice(np.arange(0, 1 << depth, 2), replace=False,
                                size=min(per_depth, 1 << (depth - 1)))
            slack = []
            for code in chosen:
                key = bound.partial_key(members, (code >> np.arange(depth)) & 1)
                truth = costs[(codes & ((1 << depth) - 1)) == code].min()
                if np.isfinite(truth):
                    slack.append(truth - key)
            print(f"| seed {seed} | {depth} | {len(slack)} | {np.median(slack):.2f} "
                  f"| {np.min(slack):.2f} |", flush=True)
    for n in key_sizes:
        X = make_jets(n_leaves=n, random_state=0)[0].momenta
        bound = energy.search_bound(X)
        rng = np.random.default_rng(0)
        states = []
        for depth in rng.integers(1, n, size=n_keys):
            sides = rng.integers(0, 2, size=depth)
            sides[0] = 0
            states.append(sides)
        start = time.process_time()
        for sides in states:
            bound.partial_key(np.arange(n), sides)
        micros = 1e6 * (time.process_time() - start) / n_keys
        print(f"{n} particles: {micros:.1f} CPU us per key through partial_key", flush=True)


def part_g(sizes, budget, n_jets=1):
    from sktrellis._engine.search import _graph

    print(f"(g) Ginkgo exact solves by the kernel vs the split_cost recursion, "
          f"algorithm='search', budget {budget:g} s")
    print("| N | jet | MAP | gap | recursion wall s (cpu) | kernel wall s (cpu) | cpu ratio "
          "| clusters | splits |")
    print("|---|---|---|---|---|---|---|---|---|")
    energy = GinkgoLikelihood()
    for n_points in sizes:
        for seed in range(n_points, n_points + n_jets):
            X = make_jets(n_leaves=n_points, random_state=seed)[0].momenta
            runs = []
            for tables in (False, True):
                previous = _graph.use_subset_solver(tables)
                try:
                    # CPU time too: the search runs on one thread, and the
                    # shared machine's load moves wall times by 10-20 %.
                    cpu = time.process_time()
                    model, seconds = search(energy, X, budget)
                    runs.append((model, seconds, time.process_time() - cpu))
                finally:
                    _graph.use_subset_solver(previous)
            (old, old_wall, old_cpu), (new, new_wall, new_cpu) = runs
            assert old.map_log_potential_ == new.map_log_potential_
            assert old.n_clusters_stored_ == new.n_clusters_stored_
            print(f"| {n_points} | seed {seed} | {new.map_log_potential_:.3f} | "
                  f"{new.optimality_gap_:.3g} | {old_wall:.1f} ({old_cpu:.1f}) | "
                  f"{new_wall:.1f} ({new_cpu:.1f}) | {old_cpu / new_cpu:.2f} | "
                  f"{new.n_clusters_stored_:,} | {new.n_splits_:,} |", flush=True)


# The split generators part h compares: (use_size_classes, use_sides_bound,
# reuse_side_tables).
GENERATORS_H = {"partial": (False, False, False), "classes": (True, False, False),
                "sides-fresh": (True, True, False), "sides": (True, True, True)}


def _generator_h(name):
    """Set the split generator of the Ginkgo bounds made next; returns a restorer."""
    from sktrellis._engine.search import _ginkgo_bound, _split_generator

    classes, sides, reuse = GENERATORS_H[name]
    previous = (_split_generator.use_size_classes(classes), _ginkgo_bound.use_sides_bound(sides),
                _ginkgo_bound.reuse_side_tables(reuse))

    def restore():
        _split_generator.use_size_classes(previous[0])
        _ginkgo_bound.use_sides_bound(previous[1])
        _ginkgo_bound.reuse_side_tables(previous[2])

    return restore


def _fit_by_generator(name, estimator, X):
    """``estimator`` fitted to X with the split generator ``name``, and the seconds it took."""
    restore = _generator_h(name)
    try:
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            estimator.fit(X)
        return estimator, time.perf_counter() - start
    finally:
        restore()


def part_h(sizes, checkpoints, seeds=(0,), auto_sizes=(), generators=("classes", "sides"),
           log_z_sizes=(), log_z_budget=20.0):
    """Ginkgo past the trellis: what the search's budget buys, by each split generator.

    The search alone from the sparse trellis's tree (the estimator's
    incumbent), run in 0.1 s slices as the driver runs it: at each
    checkpoint the gap, the clusters expanded and the split bounds
    evaluated, with the split generators side by side in one run (``partial``:
    a search over partial assignments whose keys are all equal; ``classes``:
    by size classes; ``sides``: over partial assignments keyed by the
    bound's ``partial_key``; ``sides-fresh``: the same keys, each computing
    its widest sets' tables afresh), the sides' keys computed per second,
    and the longest slice (how late a Ctrl-C or the budget is seen). Then
    the estimator's time to proof at its defaults (``auto_sizes``), and the width of the log Z bracket the search alone
    reaches in ``log_z_budget`` seconds on the jet of seed N (``log_z_sizes``).
    """
    from sktrellis._engine.search._best_first import BestFirstSearch

    print(f"(h) Ginkgo search progress, checkpoints {checkpoints} s, generators {generators}")
    print("| N | jet | generator | s | gap | bound | expanded | split bounds | states "
          "| sides' keys / s | longest slice s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    energy = GinkgoLikelihood()
    for n_points in sizes:
        for seed in seeds:
            X = make_jets(n_leaves=n_points, random_state=seed)[0].momenta
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sparse = SparseTrellisClustering(energy, mass_bound_time=0).fit(X)
            merges = merges_from_tree(sparse.linkage_matrix_, n_points)
            for name in generators:
                # Size classes are chosen when the search starts a generator,
                # so the setting holds until the run is over.
                restore = _generator_h(name)
                try:
                    bound = energy.search_bound(X)
                    search = BestFirstSearch(bound, n_points)
                    search.add_tree(merges)
                    start, longest = time.perf_counter(), 0.0
                    for checkpoint in checkpoints:
                        while time.perf_counter() - start < checkpoint and not search.finished:
                            before = time.perf_counter()
                            search.run(seconds=0.1)
                            longest = max(longest, time.perf_counter() - before)
                        seconds = time.perf_counter() - start
                        print(f"| {n_points} | seed {seed} | {name} "
                              f"| {seconds:.0f} | {search.gap:.3f} | "
                              f"{-search.lower:.3f} | {search.n_expanded:,} | "
                              f"{search.n_split_keys:,} | {search.n_states:,} | "
                              f"{bound.n_partial_keys / seconds:,.0f} | "
                              f"{longest:.2f} |", flush=True)
                finally:
                    restore()
                del search, bound
    # The estimator at its defaults (the search, then the trellis where
    # the budget holds it): the time to proof.
    for n_points in auto_sizes:
        X = make_jets(n_leaves=n_points, random_state=0)[0].momenta
        for name in generators:
            model, seconds = _fit_by_generator(name, BestFirstHierarchicalClustering(energy), X)
            print(f"{n_points} particles, defaults, {name}: {seconds:.1f} s, "
                  f"{model.stop_reason_} by the {model.solver_}, gap "
                  f"{model.optimality_gap_:.3g}, MAP {model.map_log_potential_:.4f}", flush=True)
    for n_points in log_z_sizes:
        X = make_jets(n_leaves=n_points, random_state=n_points)[0].momenta
        for name in generators:
            model, seconds = _fit_by_generator(name, BestFirstHierarchicalClustering(
                energy, objective="log_partition", algorithm="search", max_time=log_z_budget), X)
            low, high = model.log_partition_bounds_
            print(f"{n_points} particles, log Z, {name}: [{low:.3f}, {high:.3f}], width "
                  f"{high - low:.2f}, {seconds:.1f} s, {model.stop_reason_}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["a", "b", "c", "d", "e", "f", "g", "h", "i", "all"],
                        default="all")
    parser.add_argument("--sizes-a", type=int, nargs="+", default=[8, 12, 16, 20])
    parser.add_argument("--sizes", type=int, nargs="+", default=[24, 32, 40, 48])
    parser.add_argument("--sizes-c", type=int, nargs="+", default=[9, 12, 16, 20, 30])
    parser.add_argument("--budget", type=float, default=600.0, help="seconds per search")
    parser.add_argument("--sizes-d", type=int, nargs="+", default=[32, 48])
    parser.add_argument("--budget-d", type=float, default=60.0)
    parser.add_argument("--beta", type=float, default=0.5, help="Dasgupta beta of part d")
    parser.add_argument("--tol", type=float, default=0.5, help="log Z bracket width of part d")
    parser.add_argument("--exact-size-d", type=int, nargs="+", default=[None],
                        help="exact_size of part d's searches, one table each (default: "
                             "the estimator's)")
    parser.add_argument("--sizes-e", type=int, nargs="+", default=[20, 24, 30])
    parser.add_argument("--budget-e", type=float, nargs=2, default=[600.0, 120.0],
                        help="seconds of the MAP search and of the log Z search (part e)")
    parser.add_argument("--algorithm-e", choices=["search", "auto"], default="auto",
                        help="algorithm of part e's estimators")
    parser.add_argument("--jets-e", type=int, default=1,
                        help="jets per size in part e (seeds N, N + 1, ...)")
    parser.add_argument("--sizes-g", type=int, nargs="+", default=[16, 17, 18])
    parser.add_argument("--budget-g", type=float, default=300.0)
    parser.add_argument("--jets-g", type=int, default=1,
                        help="jets per size in part g (seeds N, N + 1, ...)")
    parser.add_argument("--sizes-h", type=int, nargs="*", default=[22, 25, 30])
    parser.add_argument("--checkpoints-h", type=float, nargs="+", default=[10.0, 60.0],
                        help="seconds at which part h reports")
    parser.add_argument("--seeds-h", type=int, nargs="+", default=[0],
                        help="the jets of part h (make_jets seeds)")
    parser.add_argument("--auto-h", type=int, nargs="*", default=[20],
                        help="sizes part h fits with the estimator's defaults, to proof")
    parser.add_argument("--log-z-h", type=int, nargs="*", default=[],
                        help="sizes whose log Z bracket part h compares (jet seed N)")
    parser.add_argument("--log-z-budget-h", type=float, default=20.0)
    parser.add_argument("--seeds-i", type=int, nargs="+", default=[0],
                        help="the jets of part i (make_jets seeds)")
    parser.add_argument("--generators-h", nargs="+", choices=list(GENERATORS_H),
                        default=["classes", "sides"],
                        help="split generators part h compares, in one run")
    args = parser.parse_args()
    if args.part in ("a", "all"):
        part_a(args.sizes_a, args.budget)
    if args.part in ("b", "all"):
        part_b(args.sizes, args.budget)
    if args.part in ("c", "all"):
        part_c(args.sizes_c, args.budget)
    if args.part in ("d", "all"):
        part_d(args.sizes_d, args.budget_d, args.beta, args.tol, args.exact_size_d)
    if args.part in ("e", "all"):
        part_e(args.sizes_e, *args.budget_e, args.algorithm_e, args.jets_e)
    if args.part in ("f", "all"):
        part_f()
    if args.part in ("g", "all"):
        part_g(args.sizes_g, args.budget_g, args.jets_g)
    if args.part in ("h", "all"):
        part_h(args.sizes_h, args.checkpoints_h, args.seeds_h, args.auto_h, args.generators_h,
               args.log_z_h, args.log_z_budget_h)
    if args.part in ("i", "all"):
        part_i(seeds=args.seeds_i)


if __name__ == "__main__":
    main()
