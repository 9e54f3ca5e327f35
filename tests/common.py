"""Trivial reference implementations the fast code is tested against."""
import functools
import math

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import chisquare

from sktrellis.datasets import make_jets
from sktrellis.energies import (
    ClusterEnergy,
    CorrelationClustering,
    Dasgupta,
    GinkgoLikelihood,
    SplitEnergy,
)


def all_trees(subset):
    """Every binary tree over the points of `subset`, as lists of (parent, left) splits."""
    # Fresh lists each call (a caller may change them); the enumeration
    # itself is done once per subset (the 10,395 trees of 7 points cost
    # about 0.1 s, and many tests enumerate them).
    return [list(tree) for tree in _all_trees(subset)]


@functools.lru_cache(maxsize=None)
def _all_trees(subset):
    if subset & (subset - 1) == 0:
        return ((),)
    low = subset & -subset
    rest = subset ^ low
    trees = []
    sub = 0
    while True:
        left = low | sub
        if left != subset:
            for left_tree in _all_trees(left):
                for right_tree in _all_trees(subset ^ left):
                    trees.append(((subset, left),) + left_tree + right_tree)
        if sub == rest:
            break
        sub = (sub - rest) & rest
    return tuple(trees)


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


def cluster_marginals(trees, values, log_z, n_points):
    """P(C is a cluster of the tree) of every subset mask, by enumeration.

    The root and single points are clusters of every tree (probability 1).
    """
    marginal = np.zeros(1 << n_points)
    for tree, probability in zip(trees, np.exp(np.asarray(values) - log_z)):
        for parent, left in tree:
            marginal[left] += probability
            marginal[parent ^ left] += probability
    for subset in range(1, 1 << n_points):
        if subset.bit_count() in (1, n_points):
            marginal[subset] = 1.0
    return marginal


def subtree_marginals(trees, values, log_z, n_points):
    """P(S is a cluster whose subtree has exactly these splits), by enumeration.

    Keyed by (S, frozenset of the splits below S); single points included.
    """
    marginal = {}
    for tree, probability in zip(trees, np.exp(np.asarray(values) - log_z)):
        clusters = {parent for parent, _ in tree} | {1 << i for i in range(n_points)}
        for cluster in clusters:
            below = frozenset(split for split in tree if split[0] & cluster == split[0])
            key = (cluster, below)
            marginal[key] = marginal.get(key, 0.0) + probability
    return marginal


def children_over(tree, members):
    """children_ of mask splits over the points ``members``, leaf i being members[i]."""
    node_of = {1 << int(point): i for i, point in enumerate(members)}
    children = []
    for parent, left in sorted(tree, key=lambda split: bin(split[0]).count("1")):
        children.append([node_of[left], node_of[parent ^ left]])
        node_of[parent] = len(members) + len(children) - 1
    return np.array(children, dtype=np.int64).reshape(-1, 2)


def all_partitions(n_points):
    """Every partition of n_points points as canonical labels, shape (Bell(N), N).

    Restricted growth strings: label 0 first, each label at most one more
    than the largest before it, so each partition appears exactly once.
    """
    partitions = np.zeros((1, 1), dtype=np.int64)
    for _ in range(1, n_points):
        largest = partitions.max(axis=1)
        repeats = largest + 2
        rows = np.repeat(partitions, repeats, axis=0)
        new = np.concatenate([np.arange(r) for r in repeats])
        partitions = np.column_stack([rows, new])
    return partitions


def partition_masks(partitions):
    """(n_partitions, N) cluster masks of canonical labels; 0 where a label is unused."""
    n_partitions, n_points = partitions.shape
    masks = np.zeros((n_partitions, n_points), dtype=np.int64)
    for i in range(n_points):
        masks[np.arange(n_partitions), partitions[:, i]] |= 1 << i
    return masks


def partition_log_potentials(log_potential, partitions):
    """Log potential of each partition: the sum of log E over its clusters."""
    masks = partition_masks(partitions)
    return np.where(masks > 0, log_potential[masks], 0.0).sum(axis=1)


def random_cluster_energy(n_points, rng, forbidden=0.2, scale=3.0):
    """A ClusterEnergy with an independent random log potential per cluster.

    A fraction `forbidden` of the clusters gets -inf. Returns the energy and
    its table.
    """
    table = rng.normal(scale=scale, size=1 << n_points)
    table[rng.random(table.shape) < forbidden] = -np.inf
    table[0] = 0.0

    def func(X, masks, table=table):
        return table[masks]

    return ClusterEnergy(func), table


# Number of samples in the data of the scikit-learn common checks that use
# more than a handful of points: the checks an estimator with a cap on N
# expects to fail (each restored at small N in the estimator's own tests).
COMMON_CHECK_N_SAMPLES = {
    "check_n_features_in_after_fitting": 15,
    "check_dont_overwrite_parameters": 20,
    "check_estimators_dtypes": 20,
    "check_f_contiguous_array_estimator": 20,
    "check_methods_sample_order_invariance": 20,
    "check_methods_subset_invariance": 20,
    "check_dict_unchanged": 20,
    "check_fit2d_predict1d": 20,
    "check_estimators_overwrite_params": 21,
    "check_estimators_fit_returns_self": 21,
    "check_readonly_memmap_input": 21,
    "check_fit_score_takes_y": 30,
    "check_pipeline_consistency": 30,
    "check_estimators_pickle": 30,
    "check_positive_only_tag_during_fit": 150,
    "check_dtype_object": 56,
    "check_clustering": 50,
    "check_fit_idempotent": 80,
    "check_fit_check_is_fitted": 100,
    "check_n_features_in": 100,
}


# The energy kinds every hierarchical estimator is tested on: a separable
# potential (Dasgupta, HCC), a compiled function (Ginkgo) and a table.
KINDS = ["dasgupta", "hcc", "ginkgo", "table"]


def quick_kinds(*quick):
    """KINDS as parameters: those named here in the quick suite, the others in the full suite."""
    return [kind if kind in quick else pytest.param(kind, marks=pytest.mark.slow)
            for kind in KINDS]


def random_problem(kind, n_points, rng, forbidden=0.2):
    """(energy, X) of an energy kind with random data; `forbidden` as in random_split_energy."""
    if kind == "dasgupta":
        return Dasgupta(beta=rng.uniform(0.5, 3)), rng.normal(size=(n_points, 3))
    if kind == "hcc":
        weights = rng.normal(size=(n_points, n_points))
        return CorrelationClustering(affinity="precomputed", beta=1.5), weights + weights.T
    if kind == "ginkgo":
        jet = make_jets(n_leaves=n_points, random_state=int(rng.integers(2**31)))[0]
        return GinkgoLikelihood(), jet.momenta
    if kind == "table":
        return random_split_energy(n_points, rng, forbidden=forbidden), np.zeros((n_points, 1))
    raise ValueError(kind)


def pytest_in_subprocess(node_ids, env=None, timeout=600):
    """Run pytest nodes in one fresh interpreter: {node id: None if it passed, else why not}.

    A segfault in compiled code would kill the pytest process itself; in a
    subprocess it is a return code (-11) that fails the nodes (whose report
    is written at the end of the run). One subprocess for several nodes: a
    subprocess costs about 1.8 CPU seconds of start-up and collection. The
    nodes run with SKTRELLIS_IN_SUBPROCESS=1 so that they know to run; a node
    passes if all its parametrizations passed (none skipped).
    """
    import os
    import pathlib
    import subprocess
    import sys
    import tempfile
    import xml.etree.ElementTree as ElementTree

    full_env = dict(os.environ, SKTRELLIS_IN_SUBPROCESS="1", **(env or {}))
    with tempfile.TemporaryDirectory() as directory:
        report = pathlib.Path(directory) / "report.xml"
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
             f"--junitxml={report}", *node_ids],
            capture_output=True, text=True, timeout=timeout, env=full_env,
        )
        cases = list(ElementTree.parse(report).iter("testcase")) if report.exists() else []
    outcomes = {}
    for node_id in node_ids:
        path, name = node_id.split("::")
        ran = [case for case in cases
               if case.get("classname").rsplit(".", 1)[-1] == pathlib.Path(path).stem
               and case.get("name").split("[")[0] == name]
        if ran and not any(child.tag in ("failure", "error", "skipped")
                           for case in ran for child in case):
            outcomes[node_id] = None
        else:
            outcomes[node_id] = (
                f"{node_id} did not pass: the subprocess ended with return code "
                f"{result.returncode} (negative: killed by that signal, -11 a segfault):\n"
                f"{result.stdout[-4000:]}\n{result.stderr[-2000:]}"
            )
    return outcomes


def run_pytest_in_subprocess(node_id, env=None, timeout=600):
    """Run one pytest node in a fresh interpreter; a crash fails the caller, not the run."""
    failure = pytest_in_subprocess([node_id], env, timeout)[node_id]
    assert failure is None, failure


def assert_draws_follow(observed, expected, what="tree"):
    """Chi-square test of draw counts against their exact expectations.

    No draw may fall where the expectation is 0; rare structures are pooled
    so that every cell expects at least 5 draws, and a posterior
    concentrated on one structure is skipped (nothing to test).
    """
    assert observed[expected == 0].sum() == 0, f"sampled a {what} of zero probability"
    keep = expected >= 5
    cells_observed = np.append(observed[keep], observed[~keep].sum())
    cells_expected = np.append(expected[keep], expected[~keep].sum())
    if cells_expected[-1] == 0:
        cells_observed, cells_expected = cells_observed[:-1], cells_expected[:-1]
    if len(cells_expected) < 2:
        pytest.skip(f"posterior concentrated on one {what}")
    assert chisquare(cells_observed, cells_expected).pvalue > 1e-4
