"""Certified exact MAP by best-first branch and bound (issue 14), against the trellis.

Part 1: on every case small enough for the trellis (N <= 20), the search's
MAP must equal the trellis MAP (checked, with the time of each).
Part 2: structured data past that (make_blobs, 3 centres, and a planted
hierarchy), with a time budget: the best tree found, its certified gap
(0 = proven optimal), clusters expanded and seconds.

Dasgupta's energy only: no admissible bound is implemented yet for
hierarchical correlation clustering or Ginkgo.

    python benchmarks/bench_search.py                       # a few minutes
    python benchmarks/bench_search.py --sizes 24 28 32 40 --max-time 600
"""
import argparse
import time

import numpy as np
from sklearn.datasets import make_blobs

from sktrellis import ExactHierarchicalClustering
from sktrellis.energies import Dasgupta
from sktrellis.search import BestFirstHierarchicalClustering


def planted(n_points, rng):
    """A two-level planted hierarchy with noise: 2 groups of 2 subgroups."""
    centres = np.array([[0, 0], [0, 3], [12, 0], [12, 3]], dtype=float)
    return centres[np.arange(n_points) % 4] + rng.normal(scale=0.6, size=(n_points, 2))


def data(kind, n_points, seed):
    rng = np.random.default_rng(seed)
    if kind == "random":
        return rng.normal(size=(n_points, 2))
    if kind == "blobs":
        return make_blobs(n_samples=n_points, centers=3, cluster_std=0.7, random_state=seed)[0]
    return planted(n_points, rng)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exact-sizes", type=int, nargs="+", default=[12, 16, 20])
    parser.add_argument("--sizes", type=int, nargs="+", default=[24, 28, 32])
    parser.add_argument("--max-time", type=float, default=60.0)
    args = parser.parse_args()
    energy = Dasgupta()

    print("Part 1: search MAP against the trellis MAP")
    print(f"{'data':>8} {'N':>3} {'trellis MAP':>14} {'search MAP':>14} {'equal':>6} "
          f"{'trellis s':>10} {'search s':>9} {'expanded':>9}")
    for n_points in args.exact_sizes:
        for kind in ("random", "blobs", "planted"):
            X = data(kind, n_points, n_points)
            start = time.perf_counter()
            exact = ExactHierarchicalClustering(energy).fit(X)
            trellis_s = time.perf_counter() - start
            start = time.perf_counter()
            model = BestFirstHierarchicalClustering(energy, max_time=args.max_time).fit(X)
            search_s = time.perf_counter() - start
            equal = abs(model.map_log_potential_ - exact.map_log_potential_) <= (
                1e-9 * abs(exact.map_log_potential_))
            proven = model.optimality_gap_ == 0.0
            print(f"{kind:>8} {n_points:>3} {exact.map_log_potential_:>14.4f} "
                  f"{model.map_log_potential_:>14.4f} {str(equal if proven else 'gap'):>6} "
                  f"{trellis_s:>10.2f} {search_s:>9.2f} {model.n_expanded_:>9}", flush=True)
            assert model.map_log_potential_ <= exact.map_log_potential_ + 1e-9 * abs(
                exact.map_log_potential_)
            assert not proven or equal

    print(f"\nPart 2: past the trellis, budget {args.max_time:.0f} s")
    print(f"{'data':>8} {'N':>3} {'MAP log potential':>18} {'gap':>10} {'relative gap':>13} "
          f"{'expanded':>9} {'seconds':>8}")
    for n_points in args.sizes:
        for kind in ("blobs", "planted"):
            X = data(kind, n_points, n_points)
            start = time.perf_counter()
            model = BestFirstHierarchicalClustering(energy, max_time=args.max_time).fit(X)
            seconds = time.perf_counter() - start
            print(f"{kind:>8} {n_points:>3} {model.map_log_potential_:>18.4f} "
                  f"{model.optimality_gap_:>10.4f} "
                  f"{model.optimality_gap_ / abs(model.map_log_potential_):>13.2e} "
                  f"{model.n_expanded_:>9} {seconds:>8.1f}", flush=True)


if __name__ == "__main__":
    main()
