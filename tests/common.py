"""Trivial reference implementations the fast code is tested against."""
import math

import numpy as np
from scipy.special import logsumexp

from sktrellis.energies import SplitEnergy


def all_trees(subset):
    """Every binary tree over the points of `subset`, as lists of (parent, left) splits."""
    if subset & (subset - 1) == 0:
        return [[]]
    low = subset & -subset
    rest = subset ^ low
    trees = []
    sub = 0
    while True:
        left = low | sub
        if left != subset:
            for left_tree in all_trees(left):
                for right_tree in all_trees(subset ^ left):
                    trees.append([(subset, left)] + left_tree + right_tree)
        if sub == rest:
            break
        sub = (sub - rest) & rest
    return trees


def tree_log_potentials(potential, trees):
    """Log potential of each tree under a SplitPotential."""
    parents = np.array([[p for p, _ in tree] for tree in trees], dtype=np.uint32)
    lefts = np.array([[a for _, a in tree] for tree in trees], dtype=np.uint32)
    values = potential.evaluate(parents.ravel(), lefts.ravel()).reshape(parents.shape)
    return values.sum(axis=1)


def brute_force(potential, n_points):
    """log Z, MAP value, the trees and their log potentials, by enumeration."""
    trees = all_trees((1 << n_points) - 1)
    assert len(trees) == math.prod(range(1, 2 * n_points - 2, 2))
    values = tree_log_potentials(potential, trees)
    return logsumexp(values), values.max(), trees, values


def random_split_energy(n_points, rng, forbidden=0.2, scale=3.0):
    """A SplitEnergy with an independent random log potential per split.

    A fraction `forbidden` of the splits gets -inf. The table is indexed by
    (parent, left) with `left` the child holding the parent's lowest point.
    """
    table = rng.normal(scale=scale, size=(1 << n_points, 1 << n_points))
    table[rng.random(table.shape) < forbidden] = -np.inf

    def func(X, left, right, table=table):
        return table[left | right, left]

    return SplitEnergy(func)


def tree_splits_set(linkage, n_points):
    """Set of canonical (parent, left) splits of a linkage matrix."""
    masks = [1 << i for i in range(n_points)]
    splits = set()
    for a, b, _, _ in linkage:
        a, b = int(a), int(b)
        parent = masks[a] | masks[b]
        left = masks[a] if masks[a] & (parent & -parent) else masks[b]
        splits.add((parent, left))
        masks.append(parent)
    return splits
