"""Timing of sktrellis.metrics on large trees.

dendrogram_purity at N=200,000 points with 1,000 classes (target: under 2 s)
on trees of different shapes, as scipy linkage matrices; dasgupta_cost on a
dense affinity matrix. Prints a Markdown table.

    PYTHONPATH=. python3 benchmarks/bench_metrics.py [--n-points 200000] [--n-classes 1000]
"""
import argparse
import time

import numpy as np
from scipy.cluster.hierarchy import linkage

from sktrellis.metrics import dasgupta_cost, dendrogram_purity


def random_merge_tree(n_points, rng):
    """Merge two uniformly random active nodes until one is left."""
    active = list(range(n_points))
    picks = rng.random((n_points - 1, 2))
    children = np.empty((n_points - 1, 2), dtype=np.int64)
    for row in range(n_points - 1):
        for side in range(2):
            k = int(picks[row, side] * len(active))
            children[row, side] = active[k]
            active[k] = active[-1]
            active.pop()
        active.append(n_points + row)
    return children


def balanced_tree(n_points):
    """Merge neighbours level by level: depth log2(n)."""
    level = list(range(n_points))
    children, next_id = [], n_points
    while len(level) > 1:
        paired = []
        for k in range(0, len(level) - 1, 2):
            children.append((level[k], level[k + 1]))
            paired.append(next_id)
            next_id += 1
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return np.array(children, dtype=np.int64)


def caterpillar_tree(n_points):
    """((((0, 1), 2), 3), ...): depth n - 1."""
    rows = np.arange(2, n_points)
    return np.vstack([[0, 1], np.column_stack([rows, n_points + rows - 2])])


def single_linkage_1d(values):
    """Single-linkage tree of 1-D points: merge sorted neighbours, smallest gap first."""
    n_points = len(values)
    order = np.argsort(values)
    gaps = np.argsort(np.diff(values[order]), kind="stable")
    # Each run of merged neighbours is an interval; its ends know the node id.
    node_at_left, node_at_right = order.copy(), order.copy()
    left_end, right_end = np.arange(n_points), np.arange(n_points)
    children = np.empty((n_points - 1, 2), dtype=np.int64)
    for row, gap in enumerate(gaps.tolist()):
        lo, hi = left_end[gap], right_end[gap + 1]
        children[row] = node_at_right[gap], node_at_left[gap + 1]
        node_at_left[lo] = node_at_right[hi] = n_points + row
        right_end[lo], left_end[hi] = hi, lo
    return children


def as_linkage(children):
    """scipy linkage matrix with heights = row index (children-first)."""
    n_points = len(children) + 1
    sizes = np.ones(2 * n_points - 1, dtype=np.int64)
    for row, (a, b) in enumerate(children.tolist()):
        sizes[n_points + row] = sizes[a] + sizes[b]
    heights = np.arange(1, n_points, dtype=np.float64)
    return np.column_stack([children, heights, sizes[n_points:]]).astype(np.float64)


def best_of(func, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        value = func()
        times.append(time.perf_counter() - start)
    return min(times), value


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-points", type=int, default=200_000)
    parser.add_argument("--n-classes", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dasgupta-points", type=int, default=4_000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    n, k = args.n_points, args.n_classes

    labels = rng.integers(k, size=n)
    trees = {
        "random merges": as_linkage(random_merge_tree(n, rng)),
        "balanced": as_linkage(balanced_tree(n)),
        "caterpillar (depth n)": as_linkage(caterpillar_tree(n)),
        "single linkage of noisy 1-D classes": as_linkage(
            single_linkage_1d(labels + rng.normal(scale=0.3, size=n))
        ),
    }
    print(f"dendrogram_purity, n={n:,} points, {k:,} classes, best of {args.repeat}\n")
    print("| tree | time (s) | purity |")
    print("|---|---:|---:|")
    for name, Z in trees.items():
        seconds, purity = best_of(lambda Z=Z: dendrogram_purity(labels, Z), args.repeat)
        print(f"| {name} | {seconds:.3f} | {purity:.4f} |")

    m = args.dasgupta_points
    X = rng.normal(size=(m, 3))
    affinity = np.exp(-np.sum((X[:, None] - X[None]) ** 2, axis=-1))
    Z = linkage(X, "average")
    seconds, cost = best_of(lambda: dasgupta_cost(Z, affinity), args.repeat)
    print(f"\ndasgupta_cost, n={m:,} points, dense affinity, average linkage: "
          f"{seconds:.3f} s (cost {cost:.6g})")


if __name__ == "__main__":
    main()
