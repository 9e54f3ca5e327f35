"""The flat point estimate of a tree posterior (``labels_from``), against enumeration."""
import numpy as np
import pytest
from scipy.cluster.hierarchy import fcluster
from sklearn.metrics import adjusted_rand_score

from sktrellis import ExactHierarchicalClustering
from sktrellis._engine.trellis.point_estimate import (
    OUTLIER_LEVEL, cluster_kernel, consensus_labels, keep_outliers_if_supported, outlier_support,
    partition_agreement, singleton_free_labels,
)
from sktrellis._engine.tree.conversion import labels_from_linkage
from sktrellis.energies import Dasgupta

from .common import (
    KINDS, all_partitions, assert_draws_follow, brute_force, cluster_marginals, random_problem,
)


def _members(mask, n_points):
    return np.array([(mask >> i) & 1 for i in range(n_points)], dtype=bool)


def _fit(energy, X, log_z, **params):
    if log_z == -np.inf:
        pytest.skip("every tree is forbidden")
    return ExactHierarchicalClustering(energy, verbose=0, **params).fit(X)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n_points", [2, 3, 5, 7])
def test_kernel_and_agreement_match_enumeration(kind, n_points, global_random_seed):
    """K and the agreement of a partition are expectations over all trees, exactly."""
    rng = np.random.default_rng(global_random_seed + 11 * n_points)
    energy, X = random_problem(kind, n_points, rng)
    potential = energy.split_potential(X)
    log_z, _, trees, values = brute_force(potential, n_points)
    model = _fit(energy, X, log_z, n_clusters=1)
    kernel = cluster_kernel(model.posterior_.cluster_log_marginals(), n_points)

    # P(C is a cluster) by enumeration (root and single points: 1), then
    # K and the agreements straight from their definitions.
    marginal = cluster_marginals(trees, values, log_z, n_points)
    masks = np.arange(1, 1 << n_points)
    units = np.array([_members(m, n_points) for m in masks]) / np.sqrt(
        [bin(m).count("1") for m in masks])[:, None]
    expected = (units * marginal[masks, None]).T @ units
    partitions = all_partitions(n_points)[rng.choice(len(all_partitions(n_points)), 5)]
    agreements = [
        marginal[masks] @ sum((units @ (labels == b)) ** 2 / np.sum(labels == b)
                              for b in np.unique(labels))
        for labels in partitions
    ]
    np.testing.assert_allclose(kernel, expected, atol=1e-10)
    for labels, agreement in zip(partitions, agreements):
        assert partition_agreement(kernel, labels) == pytest.approx(agreement, abs=1e-9)


@pytest.mark.parametrize("n_clusters", [1, 2, 3, 6])
def test_consensus_labels_are_a_local_optimum_no_worse_than_the_ward_cut(
    n_clusters, global_random_seed
):
    rng = np.random.default_rng(global_random_seed)
    energy, X = random_problem("dasgupta", 7, rng)
    model = _fit(energy, X, 0.0, n_clusters=n_clusters)
    kernel = cluster_kernel(model.posterior_.cluster_log_marginals(), 7)
    labels = consensus_labels(kernel, n_clusters)
    assert sorted(np.unique(labels)) == list(range(n_clusters))
    best = partition_agreement(kernel, labels)
    for point in range(7):
        for block in range(n_clusters):
            moved = labels.copy()
            moved[point] = block
            if len(np.unique(moved)) == n_clusters:
                assert partition_agreement(kernel, moved) <= best + 1e-12
    # The best partition with n_clusters blocks, by enumeration, bounds it.
    partitions = all_partitions(7)
    partitions = partitions[partitions.max(axis=1) == n_clusters - 1]
    optimum = max(partition_agreement(kernel, p) for p in partitions)
    assert best <= optimum + 1e-12


def test_labels_from_each_source():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(9, 2))
    k = 3
    fits = {source: ExactHierarchicalClustering(Dasgupta(beta=1.0), n_clusters=k, verbose=0,
                                                labels_from=source).fit(X)
            for source in ("posterior", "map_tree", "mcc_tree")}
    map_tree = fits["map_tree"]
    scipy_labels = fcluster(map_tree.linkage_matrix_, k, criterion="maxclust")
    assert adjusted_rand_score(map_tree.labels_, scipy_labels) == 1.0
    mcc = fits["mcc_tree"]
    np.testing.assert_array_equal(
        mcc.labels_, labels_from_linkage(mcc.max_clade_credibility_tree()[0], k)
    )
    posterior = fits["posterior"]
    kernel = cluster_kernel(posterior.posterior_.cluster_log_marginals(), 9)
    assert adjusted_rand_score(posterior.labels_, consensus_labels(kernel, k)) == 1.0
    # Same tree whatever the labels; labels numbered by first point.
    for model in fits.values():
        np.testing.assert_array_equal(model.linkage_matrix_, map_tree.linkage_matrix_)
        assert model.labels_[0] == 0 and len(np.unique(model.labels_)) == k
        np.testing.assert_array_equal(model.fit_predict(X), model.labels_)


def test_labels_from_is_validated():
    with pytest.raises(ValueError, match="labels_from"):
        ExactHierarchicalClustering(labels_from="map").fit(np.arange(4.0)[:, None])


@pytest.mark.parametrize("n_points", [2, 8, 9, 13])
def test_kernel_blocks_match_the_definition_past_the_low_bits(n_points, global_random_seed):
    """The kernel's blocked sum (low bits, high bits) against the plain sum over every mask."""
    rng = np.random.default_rng(global_random_seed)
    log_marginals = np.log(rng.random(1 << n_points))
    log_marginals[rng.random(1 << n_points) < 0.2] = -np.inf
    masks = np.arange(1, 1 << n_points)
    members = np.array([_members(m, n_points) for m in masks], dtype=float)
    weights = np.exp(log_marginals[masks])
    # Single points and the root: probability 1 whatever the table says.
    sizes = members.sum(axis=1)
    weights[(sizes == 1) | (sizes == n_points)] = 1.0
    expected = (members * (weights / sizes)[:, None]).T @ members
    np.testing.assert_allclose(cluster_kernel(log_marginals, n_points), expected, atol=1e-9)


@pytest.mark.parametrize("labels_from", ["posterior", "map_tree"])
def test_labels_find_planted_groups_past_an_outlier(labels_from, global_random_seed):
    """Three groups and one far point: the MAP tree's root sets the point apart.

    Every cut of the MAP tree keeps that root split, so into three clusters
    it merges two groups; the posterior's labels keep the groups apart.
    """
    rng = np.random.default_rng(global_random_seed)
    centers = np.array([[0.0, 0.0], [4.0, 0.0], [2.0, 3.5]])
    X = np.vstack([c + 0.5 * rng.normal(size=(4, 2)) for c in centers] + [[[12.0, 12.0]]])
    model = ExactHierarchicalClustering(n_clusters=3, labels_from=labels_from, verbose=0).fit(X)
    score = adjusted_rand_score(np.repeat([0, 1, 2], 4), model.labels_[:12])
    if labels_from == "posterior":
        assert score == 1.0
    else:
        assert score < 0.9 and np.sum(model.labels_ == model.labels_[12]) == 1


def _structureless_cases():
    """Four datasets per shape: the first in the quick suite, all four in the full one."""
    for n_features in (2, 5, 30):
        for offset in range(4):
            marks = [pytest.mark.slow] if offset else []
            yield pytest.param(n_features, offset, marks=marks)


@pytest.mark.parametrize("n_features, offset", list(_structureless_cases()))
def test_labels_hand_out_no_singletons_on_structureless_data(n_features, offset,
                                                             global_random_seed):
    """On noise no point stands apart; a cluster of one would claim an outlier.

    With 2 and 5 features beta="auto" is "test, then temper", and on noise
    beta is the humble one of X's own posterior (0.18-0.5 here), close to
    the uniform prior over trees: the best partition into three sets a
    point apart in two of these datasets, a claim the posterior gives
    0.03 (``outlier_support``), so that block is filled.
    """
    X = np.random.default_rng(global_random_seed + offset).normal(size=(12, n_features))
    labels = ExactHierarchicalClustering(n_clusters=3, verbose=0).fit(X).labels_
    assert np.bincount(labels).min() >= 2


def _splits(trees):
    """(parents, lefts) arrays of trees given as lists of (parent, left) masks."""
    return (np.array([[parent for parent, _ in tree] for tree in trees], dtype=np.uint64),
            np.array([[left for _, left in tree] for tree in trees], dtype=np.uint64))


def _sibling(tree, point):
    """The sibling of ``point`` in a tree given as (parent, left) splits."""
    for parent, left in tree:
        for child in (left, parent ^ left):
            if child == 1 << point:
                return parent ^ child
    raise AssertionError("every point has a parent")


@pytest.mark.parametrize("kind", KINDS)
def test_outlier_support_matches_enumeration(kind, global_random_seed):
    """The claim of a block of one point: its sibling is a union of whole blocks.

    Its share over any trees against the definition read off each tree, and
    over posterior draws against its exact probability by enumeration.
    """
    n_points = 6
    rng = np.random.default_rng(global_random_seed)
    energy, X = random_problem(kind, n_points, rng)
    potential = energy.split_potential(X)
    log_z, _, trees, values = brute_force(potential, n_points)
    model = _fit(energy, X, log_z)
    labels = np.array([0, 1, 1, 2, 2, 2])
    blocks = [sum(1 << i for i in np.flatnonzero(labels == b)) for b in range(3)]

    def claim(tree):
        sibling = _sibling(tree, 0)
        return all(sibling & b in (0, b) for b in blocks)

    assert outlier_support(*_splits(trees), labels, 0) == pytest.approx(
        np.mean([claim(tree) for tree in trees]), abs=1e-12)
    exact = float(np.sum(np.exp(values - log_z)[[claim(tree) for tree in trees]]))
    n_draws = 2000
    draws = model._trellis.sample_splits(n_draws, np.random.RandomState(global_random_seed))
    hits = outlier_support(*draws, labels, 0) * n_draws
    assert_draws_follow(np.array([hits, n_draws - hits]),
                        np.array([exact, 1.0 - exact]) * n_draws, what="claim")


@pytest.mark.parametrize("keep", [(), (0,)])
def test_singleton_free_labels_are_a_constrained_local_optimum(keep, global_random_seed):
    """No block of one point but ``keep``, and no allowed single-point move improves them."""
    rng = np.random.default_rng(global_random_seed)
    energy, X = random_problem("dasgupta", 7, rng)
    model = _fit(energy, X, 0.0)
    kernel = cluster_kernel(model.posterior_.cluster_log_marginals(), 7)
    start = np.array([0, 1, 1, 1, 2, 2, 2])
    labels = singleton_free_labels(kernel, start, 3, keep)
    sizes = np.bincount(labels, minlength=3)
    minimum = np.array([1 if b in keep else 2 for b in range(3)])
    assert np.all(sizes >= minimum)
    best = partition_agreement(kernel, labels)
    for point in range(7):
        for block in range(3):
            moved = labels.copy()
            moved[point] = block
            if np.all(np.bincount(moved, minlength=3) >= minimum):
                assert partition_agreement(kernel, moved) <= best + 1e-12
    # Four blocks of two do not fit in seven points.
    assert singleton_free_labels(kernel, np.array([0, 1, 2, 3, 3, 3, 3]), 4) is None


def test_labels_keep_an_outlier_the_posterior_sets_apart(global_random_seed):
    """Three tight groups and one far point, into four: the point stays alone."""
    rng = np.random.default_rng(global_random_seed)
    centers = np.array([[0.0, 0.0], [4.0, 0.0], [2.0, 3.5]])
    X = np.vstack([c + 0.5 * rng.normal(size=(4, 2)) for c in centers] + [[[12.0, 12.0]]])
    model = ExactHierarchicalClustering(n_clusters=4, verbose=0).fit(X)
    assert adjusted_rand_score(np.repeat([0, 1, 2, 3], [4, 4, 4, 1]), model.labels_) == 1.0
    draws = model._trellis.sample_splits(1000, np.random.RandomState(0))
    assert outlier_support(*draws, model.labels_, 12) >= OUTLIER_LEVEL


# Six points, blocks {0, 1, 2}, {3, 4}, {5}: point 5 beside the five others
# (its claim holds), or beside point 4 alone (it cuts the block {3, 4}).
_APART = [(63, 31), (31, 7), (7, 3), (3, 1), (24, 8)]
_BESIDE_4 = [(63, 15), (15, 7), (7, 3), (3, 1), (48, 16)]


@pytest.mark.parametrize("n_apart, kept", [(5, True), (4, False)])
def test_a_single_point_block_is_kept_from_half_the_draws(n_apart, kept):
    """Kept when its claim holds in at least OUTLIER_LEVEL of the draws, else filled."""
    labels = np.array([0, 0, 0, 1, 1, 2])
    calls = []

    def draw_splits():
        calls.append(1)
        return _splits([_APART] * n_apart + [_BESIDE_4] * (10 - n_apart))

    kernel = np.eye(6) + 0.1
    result = keep_outliers_if_supported(kernel, labels, 3, draw_splits)
    assert OUTLIER_LEVEL == 0.5 and len(calls) == 1
    if kept:
        np.testing.assert_array_equal(result, labels)
    else:
        assert np.bincount(result, minlength=3).min() >= 2


def test_no_single_point_block_draws_no_trees():
    def draw_splits():
        raise AssertionError("no block of one point: nothing to draw for")

    labels = np.array([0, 0, 1, 1, 1])
    np.testing.assert_array_equal(
        keep_outliers_if_supported(np.eye(5), labels, 2, draw_splits), labels)
