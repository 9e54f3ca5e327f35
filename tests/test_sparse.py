"""SparseTrellisClustering against the exact trellis and brute-force enumeration."""
import itertools
import math

import warnings

import numpy as np
import pytest
from scipy.cluster.hierarchy import fcluster, is_monotonic, is_valid_linkage, linkage
from scipy.special import logsumexp
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from sktrellis import ExactHierarchicalClustering
from sktrellis.baselines import (
    BeamSearchHierarchicalClustering,
    GreedyHierarchicalClustering,
)
from sktrellis.datasets import make_jets
from sktrellis.energies import CorrelationClustering, Dasgupta, GinkgoLikelihood
from sktrellis import SparseTrellisClustering

from .common import (
    assert_draws_follow,
    KINDS,
    all_trees,
    brute_force,
    children_over,
    cluster_marginals,
    quick_kinds,
    random_problem,
    random_split_energy,
    subtree_marginals,
    tree_splits_set,
)

# Overflow or invalid values would mean statistics read from memory never
# written (the cross sums of clusters that did not meet).
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")



def _caterpillar(first, n_points):
    """children_ of the tree that builds the cluster `first`, then adds the other points."""
    order = list(first) + [i for i in range(n_points) if i not in first]
    children, node = [], order[0]
    for point in order[1:]:
        children.append([node, point])
        node = n_points + len(children) - 1
    return np.array(children)


def _every_cluster(n_points):
    """Trees whose clusters are all the subsets of the points."""
    return [
        _caterpillar(cluster, n_points)
        for size in range(2, n_points)
        for cluster in itertools.combinations(range(n_points), size)
    ]


def _random_tree(n_points, rng):
    """children_ of a uniformly random agglomeration order."""
    active, children = list(range(n_points)), []
    while len(active) > 1:
        i, j = sorted(rng.choice(len(active), 2, replace=False))
        children.append([active[i], active[j]])
        active = [a for k, a in enumerate(active) if k not in (i, j)] + [n_points + len(children) - 1]
    return np.array(children)


def _children_from_splits(tree, n_points):
    """children_ array (children first) of a list of (parent, left) mask splits."""
    node_of = {1 << i: i for i in range(n_points)}
    children = []
    for parent, left in sorted(tree, key=lambda split: bin(split[0]).count("1")):
        children.append([node_of[left], node_of[parent ^ left]])
        node_of[parent] = n_points + len(children) - 1
    return np.array(children)


def _members(mask, n_points):
    return [i for i in range(n_points) if mask >> i & 1]


def _fit_or_skip(model, X):
    try:
        return model.fit(X)
    except ValueError as error:
        if "zero potential" not in str(error):
            raise
        pytest.skip("every spanned tree is forbidden; the error was checked")


###############################################################################
# The sparse trellis of every cluster is the full trellis

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n_points", [3, 5, 7])
def test_every_cluster_gives_the_exact_trellis(kind, n_points, global_random_seed):
    rng = np.random.default_rng(global_random_seed + n_points)
    energy, X = random_problem(kind, n_points, rng)
    exact = ExactHierarchicalClustering(energy, n_clusters=1)
    sparse = SparseTrellisClustering(
        energy, builder=_every_cluster(n_points), resplit_parts=0, n_clusters=1
    )
    log_z, _, _, _ = brute_force(energy.split_potential(X), n_points)
    if log_z == -np.inf:
        with pytest.raises(ValueError, match="zero potential"):
            sparse.fit(X)
        return
    exact.fit(X)
    sparse.fit(X)
    assert sparse.n_vertices_ == 2**n_points - 1
    assert sparse.n_splits_ == (3**n_points + 1) // 2 - 2**n_points
    assert sparse.log_partition_ == pytest.approx(exact.log_partition_, rel=1e-10, abs=1e-10)
    assert sparse.map_log_potential_ == pytest.approx(exact.map_log_potential_, rel=1e-10, abs=1e-10)
    assert sparse.n_trees_ == exact.n_trees_
    assert sparse.sparsity_ == exact.n_trees_ / math.prod(range(1, 2 * n_points - 2, 2))
    for size in range(1, n_points + 1):
        for cluster in itertools.combinations(range(n_points), size):
            assert sparse.cluster_probability(cluster) == pytest.approx(
                exact.cluster_probability(list(cluster)), abs=1e-10
            )
    for _ in range(10):
        tree = _random_tree(n_points, rng)
        assert sparse.log_probability(tree) == pytest.approx(
            exact.log_probability(tree), rel=1e-10, abs=1e-10
        )


###############################################################################
# Seeds, bounds and brute force over the spanned trees

@pytest.mark.parametrize("kind", KINDS)
def test_one_seed_tree_is_returned_as_is(kind, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    n_points = 8
    energy, X = random_problem(kind, n_points, rng)
    tree = _random_tree(n_points, rng)
    model = _fit_or_skip(
        SparseTrellisClustering(energy, builder=[tree], resplit_parts=0, n_clusters=1), X
    )
    assert model.n_trees_ == 1
    assert model.n_vertices_ == 2 * n_points - 1
    assert model.log_partition_ == model.map_log_potential_
    assert model.map_log_potential_ == pytest.approx(model.seed_log_potentials_[0], rel=1e-12)
    assert tree_splits_set(model.linkage_matrix_, n_points) == tree_splits_set(
        np.column_stack([tree, np.zeros((n_points - 1, 2))]), n_points
    )
    assert model.log_probability(tree) == pytest.approx(0.0, abs=1e-12)
    for sample in model.sample(3, random_state=0):
        np.testing.assert_array_equal(sample, model.linkage_matrix_)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("builder", ["greedy", "beam", "sampled"])
def test_bounds_against_the_exact_trellis(kind, builder, global_random_seed):
    """log Z and the MAP are lower bounds; the MAP beats every seed."""
    rng = np.random.default_rng(global_random_seed)
    n_points = 9
    energy, X = random_problem(kind, n_points, rng)
    exact = ExactHierarchicalClustering(energy)
    try:
        exact.fit(X)
    except ValueError:
        pytest.skip("every tree is forbidden")
    sparse = _fit_or_skip(
        SparseTrellisClustering(
            energy, builder=builder, beam_width=4, n_seed_trees=4, resplit_parts=4,
            random_state=global_random_seed,
        ),
        X,
    )
    assert sparse.log_partition_ <= exact.log_partition_ + 1e-9
    assert sparse.map_log_potential_ <= exact.map_log_potential_ + 1e-9
    assert sparse.map_log_potential_ >= sparse.seed_log_potentials_.max() - 1e-9
    assert sparse.log_partition_ >= sparse.map_log_potential_ - 1e-9
    assert 1 <= sparse.n_trees_ <= exact.n_trees_
    assert 0 < sparse.sparsity_ <= 1


@pytest.mark.parametrize("kind", KINDS)
def test_spanned_trees_match_brute_force(kind, global_random_seed):
    """n_trees_, log Z, tree probabilities and cluster marginals by enumeration."""
    rng = np.random.default_rng(global_random_seed)
    n_points = 6
    energy, X = random_problem(kind, n_points, rng)
    seeds = [_random_tree(n_points, rng) for _ in range(4)]
    model = _fit_or_skip(
        SparseTrellisClustering(energy, builder=seeds, resplit_parts=4), X
    )
    _, _, trees, values = brute_force(energy.split_potential(X), n_points)
    vertices = set()
    for mask in range(1, 1 << n_points):
        if model._trellis.vertex_of([_members(mask, n_points)])[0] >= 0:
            vertices.add(mask)
    spanned = np.array([
        all(parent in vertices and left in vertices for parent, left in tree) for tree in trees
    ])
    finite = spanned & np.isfinite(values)
    assert model.n_trees_ == finite.sum()
    assert model.log_partition_ == pytest.approx(logsumexp(values[finite]), rel=1e-10)
    assert model.map_log_potential_ == pytest.approx(values[finite].max(), rel=1e-10)
    marginal = dict.fromkeys(vertices, 0.0)
    for tree, value, is_spanned in zip(trees, values, spanned):
        children = _children_from_splits(tree, n_points)
        expected = value - model.log_partition_ if is_spanned else -np.inf
        assert model.log_probability(children) == pytest.approx(expected, abs=1e-10)
        if is_spanned and np.isfinite(value):
            for parent, left in tree:
                for cluster in (left, parent ^ left):
                    marginal[cluster] += np.exp(value - model.log_partition_)
    full = (1 << n_points) - 1
    for mask in range(1, full + 1):
        expected = 1.0 if mask == full or mask & (mask - 1) == 0 else marginal.get(mask, 0.0)
        assert model.cluster_probability(_members(mask, n_points)) == pytest.approx(expected, abs=1e-10)


@pytest.mark.parametrize("kind", KINDS)
def test_spanned_sub_hierarchy_marginals_match_brute_force(kind, global_random_seed):
    """log_probability(tree, members) sums the spanned trees holding that sub-hierarchy."""
    rng = np.random.default_rng(global_random_seed + 1)
    n_points = 6
    energy, X = random_problem(kind, n_points, rng)
    seeds = [_random_tree(n_points, rng) for _ in range(4)]
    model = _fit_or_skip(
        SparseTrellisClustering(energy, builder=seeds, resplit_parts=4), X
    )
    _, _, trees, values = brute_force(energy.split_potential(X), n_points)
    vertices = {
        mask for mask in range(1, 1 << n_points)
        if model._trellis.vertex_of([_members(mask, n_points)])[0] >= 0
    }
    spanned = [
        all(parent in vertices and left in vertices for parent, left in tree) for tree in trees
    ]
    marginal = subtree_marginals(
        [tree for tree, keep in zip(trees, spanned) if keep],
        values[np.array(spanned)], model.log_partition_, n_points,
    )
    full = (1 << n_points) - 1
    # Vertices and non-vertices alike (these have probability 0).
    subsets = [full, 4] + list(rng.choice(np.arange(3, full), size=8, replace=False))
    for subset in subsets:
        members = rng.permutation(_members(int(subset), n_points))
        for subtree in all_trees(int(subset)):
            expected = marginal.get((int(subset), frozenset(subtree)), 0.0)
            got = model.log_probability(children_over(subtree, members), members=members)
            assert np.exp(got) == pytest.approx(expected, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(
    "kind",
    # One kind in the quick suite; the chi-square test of each is seconds.
    quick_kinds("dasgupta"),
)
def test_samples_follow_the_sparse_posterior(kind, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    n_points = 5
    energy, X = random_problem(kind, n_points, rng)
    seeds = [_random_tree(n_points, rng) for _ in range(4)]
    model = _fit_or_skip(SparseTrellisClustering(energy, builder=seeds, resplit_parts=3), X)
    _, _, trees, values = brute_force(energy.split_potential(X), n_points)
    log_probability = np.array([
        model.log_probability(_children_from_splits(tree, n_points)) for tree in trees
    ])
    n_samples = 20000
    index = {frozenset(tree): i for i, tree in enumerate(trees)}
    observed = np.bincount(
        [index[frozenset(tree_splits_set(z, n_points))]
         for z in model.sample(n_samples, random_state=global_random_seed)],
        minlength=len(trees),
    )
    expected = np.exp(log_probability) * n_samples
    assert_draws_follow(observed, expected, "tree")


###############################################################################
# Builders, growth and large N

@pytest.mark.parametrize("builder", [pytest.param("greedy", marks=pytest.mark.slow), "beam",
                                     pytest.param("sampled", marks=pytest.mark.slow)])
def test_map_is_at_least_the_baselines_on_many_points(builder, global_random_seed):
    X, _ = make_blobs(n_samples=150, centers=4, cluster_std=2.0, random_state=global_random_seed)
    sparse = SparseTrellisClustering(
        builder=builder, n_seed_trees=3, beam_width=3, random_state=global_random_seed
    ).fit(X)
    greedy = GreedyHierarchicalClustering().fit(X)
    assert sparse.map_log_potential_ >= greedy.map_log_potential_ - 1e-6
    if builder == "beam":
        beam = BeamSearchHierarchicalClustering(beam_width=3).fit(X)
        assert sparse.map_log_potential_ >= beam.map_log_potential_ - 1e-6
    assert isinstance(sparse.n_trees_, int) and sparse.n_trees_ > 2**64
    assert sparse.n_vertices_ <= 50 * 150
    assert sparse.log_partition_ >= sparse.map_log_potential_
    assert sparse.log_partition_ <= sparse.map_log_potential_ + math.log(sparse.n_trees_) + 1e-6


def test_growing_helps_and_respects_the_vertex_budget(global_random_seed):
    X, _ = make_blobs(n_samples=120, centers=3, cluster_std=2.5, random_state=global_random_seed)
    seeds_only = SparseTrellisClustering(builder="greedy", resplit_parts=0).fit(X)
    grown = SparseTrellisClustering(builder="greedy").fit(X)
    capped = SparseTrellisClustering(builder="greedy", max_vertices=400).fit(X)
    assert seeds_only.n_trees_ == 1
    assert grown.map_log_potential_ >= capped.map_log_potential_ >= seeds_only.map_log_potential_
    assert grown.n_trees_ > capped.n_trees_ > 1
    assert capped.n_vertices_ <= 400 < grown.n_vertices_


def test_callable_builder_and_user_trees():
    X, _ = make_blobs(n_samples=40, centers=3, random_state=0)
    methods = ["average", "complete", "ward"]
    # Neither test reads the bound on the spanned share of log Z, half a
    # second of wall time a fit: mass_bound_time=0 here and below.
    from_list = SparseTrellisClustering(builder=[linkage(X, m) for m in methods], n_clusters=3,
                                        mass_bound_time=0).fit(X)
    from_callable = SparseTrellisClustering(
        builder=lambda X, random_state: [linkage(X, m) for m in methods], n_clusters=3,
        mass_bound_time=0,
    ).fit(X)
    np.testing.assert_array_equal(from_list.linkage_matrix_, from_callable.linkage_matrix_)
    assert len(from_list.seed_log_potentials_) == 3
    assert from_list.map_log_potential_ >= from_list.seed_log_potentials_.max()
    assert from_list.n_trees_ > 3


def test_sampled_builder_is_reproducible(global_random_seed):
    X, _ = make_blobs(n_samples=60, centers=3, cluster_std=3.0, random_state=0)
    energy = Dasgupta(beta=0.01)
    first, second = (SparseTrellisClustering(energy, builder="sampled", mass_bound_time=0,
                                             random_state=global_random_seed).fit(X)
                     for _ in range(2))
    np.testing.assert_array_equal(first.seed_log_potentials_, second.seed_log_potentials_)
    np.testing.assert_array_equal(first.linkage_matrix_, second.linkage_matrix_)
    assert first.n_trees_ == second.n_trees_
    # The perturbed runs give other trees than the greedy one.
    assert len(np.unique(first.seed_log_potentials_)) > 1


def test_jets_beyond_the_exact_limit():
    jet = make_jets(n_leaves=28, root_mass2=20000.0, random_state=0)[0]
    model = SparseTrellisClustering(GinkgoLikelihood(), beam_width=5, n_seed_trees=5,
                                    mass_bound_time=0).fit(jet.momenta)
    assert model.map_log_potential_ >= max(model.seed_log_potentials_.max(), jet.log_likelihood) - 1e-9
    assert np.isfinite(model.log_partition_)


@pytest.mark.parametrize("n_clusters", [1, 3])
def test_labels_are_the_fcluster_cut_of_a_valid_monotone_linkage(n_clusters, global_random_seed):
    X, _ = make_blobs(n_samples=50, centers=3, random_state=global_random_seed)
    model = SparseTrellisClustering(n_clusters=n_clusters, mass_bound_time=0).fit(X)
    Z = model.linkage_matrix_
    assert is_valid_linkage(Z, throw=True) and is_monotonic(Z)
    assert np.all(np.diff(Z[:, 2]) > 0)
    assert adjusted_rand_score(model.labels_, fcluster(Z, n_clusters, "maxclust")) == 1.0
    np.testing.assert_array_equal(model.children_, Z[:, :2].astype(int))
    np.testing.assert_array_equal(model.distances_, Z[:, 2])
    for sample in model.sample(5, random_state=global_random_seed):
        assert is_valid_linkage(sample) and is_monotonic(sample)
        assert model.log_probability(sample) <= model.map_log_potential_ - model.log_partition_ + 1e-9


def test_verbose_reports_each_round(capsys):
    X, _ = make_blobs(n_samples=30, random_state=0)
    # The mass bound's search still runs and reports, in a fiftieth of its
    # default budget (the whole budget would be most of this test's time).
    SparseTrellisClustering(verbose=1, mass_bound_time=0.01).fit(X)
    out = capsys.readouterr().out
    assert "[SparseTrellisClustering] seeds:" in out and "vertices" in out
    assert "log spanned mass >=" in out


def test_input_is_not_mutated():
    X = np.random.default_rng(0).normal(size=(20, 2))
    before = X.copy()
    # The mass bound's search reads X too: it runs, in a short budget.
    SparseTrellisClustering(mass_bound_time=0.01).fit(X)
    np.testing.assert_array_equal(X, before)


###############################################################################
# scikit-learn conventions and bad input

@pytest.mark.parametrize(
    "params, X, match",
    [
        ({"n_clusters": 5}, np.arange(8.0).reshape(4, 2), "n_clusters=5 must be at most n_samples=4"),
        ({"builder": "random"}, np.arange(8.0).reshape(4, 2), "builder"),
        ({"builder": []}, np.arange(8.0).reshape(4, 2), "no seed trees"),
        ({"builder": [np.zeros((2, 4))]}, np.arange(8.0).reshape(4, 2), r"shape \(2, 4\)"),
        ({"builder": [[[0, 1], [0, 2], [4, 5]]]}, np.arange(8.0).reshape(4, 2), "exactly once"),
        ({"builder": lambda X, random_state: []}, np.arange(8.0).reshape(4, 2), "no seed trees"),
        ({"resplit_parts": -1}, np.arange(8.0).reshape(4, 2), "resplit_parts"),
        ({"max_vertices": 0}, np.arange(8.0).reshape(4, 2), "max_vertices"),
        ({"energy": random_split_energy(3, np.random.default_rng(0))}, np.zeros((70, 1)),
         "at most 62 points: n_samples=70"),
        ({}, np.array([[0.0, np.inf], [1.0, 2.0]]), "infinity"),
    ],
)
def test_bad_input(params, X, match):
    with pytest.raises(ValueError, match=match):
        SparseTrellisClustering(**params).fit(X)


@pytest.mark.parametrize(
    "members, match",
    [([], "at least one"), ([0, 9], r"\[0, 4\)"), ([1, 1], "repeat"), ([0.5], "indices"),
     (np.ones(3, dtype=bool), r"shape \(4,\)")],
)
def test_bad_cluster_queries(members, match):
    model = SparseTrellisClustering().fit(np.arange(8.0).reshape(4, 2))
    with pytest.raises(ValueError, match=match):
        model.cluster_probability(members)


def test_bad_sample_requests():
    model = SparseTrellisClustering().fit(np.arange(8.0).reshape(4, 2))
    with pytest.raises(ValueError, match="n_samples.*must be an int in the range"):
        model.sample(0)
    with pytest.raises(ValueError, match="shape"):
        model.log_probability(np.zeros((2, 4)))


@pytest.mark.parametrize("root_log_z, uniform", [(0.0, 1.0 - 2.0**-53), (1000.0, 0.5)])
def test_sampler_falls_back_to_a_possible_split_never_index_minus_one(root_log_z, uniform):
    """With no split chosen (rounding, or every weight underflowing
    against an inconsistent log Z) the sampler read right[-1]."""
    from sktrellis._engine.sparse import _sparse as kernels

    # Points 0, 1, 2; vertex 3 = {0, 1}; root 4 = {0, 1, 2} with two splits.
    split_start = np.array([0, 0, 0, 0, 1, 3])
    left = np.array([0, 3, 0])
    right = np.array([1, 2, 1])
    log_psi = np.array([0.0, 0.0, -np.inf])
    log_z = np.array([0.0, 0.0, 0.0, 0.0, root_log_z])
    splits = kernels.sample_splits(split_start, left, right, log_psi, log_z,
                                   np.full((1, 2), uniform))
    assert splits[0].tolist() == [1, 0], "the only possible split of the root, then of {0, 1}"


###############################################################################
# The share of the full posterior's mass the spanned trees hold

@pytest.mark.parametrize("kind", KINDS)
def test_spanned_mass_lower_bound_is_the_share_when_the_search_sums_every_tree(
        kind, global_random_seed):
    """At 7 points the search sums every tree within the budget: the bound is the share."""
    rng = np.random.default_rng(global_random_seed)
    n_points = 7
    energy, X = random_problem(kind, n_points, rng)
    log_z = brute_force(energy.split_potential(X), n_points)[0]
    if log_z == -np.inf:
        pytest.skip("every tree is forbidden")
    model = _fit_or_skip(SparseTrellisClustering(energy, resplit_parts=3, max_vertices=20), X)
    share = math.exp(model.log_partition_ - log_z)
    assert share <= 1 + 1e-9
    if kind == "table":   # an energy of the user's: no admissible bound, the share unknown
        assert math.isnan(model.log_spanned_mass_lower_bound_)
        return
    assert math.exp(model.log_spanned_mass_lower_bound_) == pytest.approx(share, rel=1e-9)
    assert model.log_spanned_mass_lower_bound_ <= 0.0


@pytest.mark.parametrize("mass_bound_time", [1e-4, 0.05])
def test_spanned_mass_lower_bound_holds_at_any_budget(mass_bound_time, global_random_seed):
    """Stopped early, the search's upper bound on log Z still bounds the share from below.

    At 15 points, one past those whose share the search solves at once.
    """
    rng = np.random.default_rng(global_random_seed)
    X = rng.normal(size=(15, 3))
    energy = Dasgupta(beta=rng.uniform(0.5, 3))
    model = SparseTrellisClustering(energy, mass_bound_time=mass_bound_time).fit(X)
    exact = ExactHierarchicalClustering(energy).fit(X)
    share = math.exp(model.log_partition_ - exact.log_partition_)
    assert -np.inf < model.log_spanned_mass_lower_bound_ <= math.log(share) + 1e-9
    assert share <= 1 + 1e-9


@pytest.mark.slow  # 0.4 s; the quick suite checks the share where the search sums every tree
def test_up_to_14_points_the_spanned_mass_is_the_share_at_any_budget():
    """Up to 14 points the search solves the full log Z at once: the bound is the share.

    Even with a budget far too short for a search to sum the trees.
    """
    X = np.random.default_rng(0).normal(size=(14, 3))
    energy = Dasgupta(beta=1.5)
    model = SparseTrellisClustering(energy, mass_bound_time=1e-4).fit(X)
    exact = ExactHierarchicalClustering(energy).fit(X)
    assert model.log_spanned_mass_lower_bound_ == pytest.approx(
        min(model.log_partition_ - exact.log_partition_, 0.0), rel=1e-9, abs=1e-9)


def test_spanned_mass_is_unknown_past_the_search_or_when_not_asked():
    X = np.random.default_rng(0).normal(size=(65, 2))
    energy = Dasgupta(beta=1.0)
    past = SparseTrellisClustering(energy, builder="greedy", resplit_parts=0).fit(X)
    skipped = SparseTrellisClustering(energy, builder="greedy", resplit_parts=0,
                                      mass_bound_time=0).fit(X[:20])
    assert math.isnan(past.log_spanned_mass_lower_bound_)
    assert math.isnan(skipped.log_spanned_mass_lower_bound_)


def test_verbose_reports_the_spanned_mass(capsys):
    X = np.random.default_rng(0).normal(size=(8, 2))
    SparseTrellisClustering(Dasgupta(beta=1.0), verbose=1).fit(X)
    assert "log spanned mass >=" in capsys.readouterr().out


def test_a_tree_grown_by_its_rotations_spans_them():
    """grow_tree with 3 parts: each node's two other trees over its three parts are spanned."""
    from sktrellis._engine.agglomerative.builders import replay_tree
    from sktrellis._engine.sparse.sparse_trellis import SparseTrellis

    rng = np.random.default_rng(0)
    n_points = 9
    X = rng.normal(size=(n_points, 2))
    model = Dasgupta(beta=1.0).merge_model(X)
    tree = _random_tree(n_points, rng)
    trellis = SparseTrellis(model)
    trellis.add_tree(replay_tree(model, tree))
    added = trellis.grow_tree(tree, 3)
    trellis.solve()
    assert 0 < added <= 2 * (n_points - 2)
    members = [np.array([i]) for i in range(n_points)]
    for a, b in tree:
        members.append(np.concatenate([members[a], members[b]]))
    for node, (a, b) in enumerate(tree, start=n_points):
        larger, smaller = sorted((a, b), key=lambda c: -len(members[c]))
        if larger < n_points:
            continue
        for grandchild in tree[larger - n_points]:
            union = np.concatenate([members[smaller], members[grandchild]])
            assert trellis.vertex_of([union])[0] >= 0


def test_a_tree_grown_around_kept_clusters_never_cuts_them():
    """grow_tree with ``uncut``: every vertex either holds, lies in or misses each kept cluster."""
    from sktrellis._engine.agglomerative.builders import replay_tree
    from sktrellis._engine.sparse.sparse_trellis import SparseTrellis

    rng = np.random.default_rng(1)
    n_points = 10
    X = rng.normal(size=(n_points, 2))
    model = Dasgupta(beta=1.0).merge_model(X)
    tree = _random_tree(n_points, rng)
    members = [np.array([i]) for i in range(n_points)]
    for a, b in tree:
        members.append(np.concatenate([members[a], members[b]]))
    kept = [m for m in members[n_points:-1] if 3 <= len(m)][:2]
    uncut = np.zeros((len(kept), n_points), dtype=bool)
    for row, cluster in enumerate(kept):
        uncut[row, cluster] = True
    grown = {}
    for name, mask in (("free", None), ("kept", uncut)):
        trellis = SparseTrellis(model)
        trellis.add_tree(replay_tree(model, tree))
        trellis.grow_tree(tree, 4, uncut=mask)
        trellis.solve()
        grown[name] = [set(trellis.vertex_members(v).tolist())
                       for v in range(trellis.n_vertices)]

    def cuts(vertex):
        return any(vertex & set(c.tolist()) and not vertex <= set(c.tolist())
                   and not set(c.tolist()) <= vertex for c in kept)

    assert any(cuts(v) for v in grown["free"])   # without uncut some union does cut them
    assert not any(cuts(v) for v in grown["kept"])
    assert len(grown["kept"]) > 2 * n_points - 1   # and the others are still added


###############################################################################
# The bagged posterior: a weighted mean of the posteriors of several trellises

def _bagged_problem(kind, seed, n_points=6, n_families=3):
    """A BaggedTrellis over random families, and each family's spanned mask per tree."""
    from sktrellis._engine.agglomerative.builders import replay_tree
    from sktrellis._engine.sparse.sparse_trellis import BaggedTrellis, SparseTrellis

    rng = np.random.default_rng(seed)
    energy, X = random_problem(kind, n_points, rng)
    model = energy.merge_model(X)
    _, _, trees, values = brute_force(energy.split_potential(X), n_points)
    families, spanned = [], []
    for _ in range(n_families):
        family = SparseTrellis(model)
        for _ in range(2):
            tree = _random_tree(n_points, rng)
            family.add_tree(replay_tree(model, tree))
        family.grow_tree(tree, 3)
        family.solve()
        vertices = {mask for mask in range(1, 1 << n_points)
                    if family.vertex_of([_members(mask, n_points)])[0] >= 0}
        keep = np.array([all(p in vertices and a in vertices for p, a in tree)
                         for tree in trees]) & np.isfinite(values)
        if not keep.any():
            pytest.skip("every tree a family spans is forbidden")
        families.append(family)
        spanned.append(keep)
    weights = rng.uniform(0.2, 1.0, size=n_families)
    bagged = BaggedTrellis(families, weights)
    # P(tree) under the mixture, by enumeration.
    probability = np.zeros(len(trees))
    for weight, keep in zip(weights / weights.sum(), spanned):
        probability[keep] += weight * np.exp(values[keep] - logsumexp(values[keep]))
    return bagged, trees, probability, X


@pytest.mark.parametrize("kind", quick_kinds("dasgupta", "ginkgo"))
def test_bagged_posterior_matches_brute_force(kind, global_random_seed):
    """Tree, cluster, split and sub-hierarchy probabilities of the mixture, by enumeration."""
    n_points = 6
    bagged, trees, probability, _ = _bagged_problem(kind, global_random_seed, n_points)
    assert probability.sum() == pytest.approx(1.0)
    log_z = np.log(np.maximum(probability, 1e-300))
    for tree, p in zip(trees, probability):
        got = bagged.subtree_log_probability(np.arange(n_points),
                                             _children_from_splits(tree, n_points))
        assert np.exp(got) == pytest.approx(p, abs=1e-10)
    marginal = cluster_marginals(trees, log_z, 0.0, n_points)
    for mask in range(1, 1 << n_points):
        members = _members(mask, n_points)
        assert np.exp(bagged.cluster_log_marginal(members)) == pytest.approx(marginal[mask],
                                                                           abs=1e-10)
    # Every cluster id, in every family, carries its cluster's mixture marginal and sums.
    log_marginals = bagged.cluster_log_marginals()
    sizes = bagged.cluster_sums(np.ones(n_points))
    weights = np.arange(1.0, n_points + 1)
    sums = bagged.cluster_sums(weights)
    for b, family in enumerate(bagged.trellises):
        for vertex in range(family.n_vertices):
            members = family.vertex_members(vertex)
            mask = int(sum(1 << int(i) for i in members))
            cluster = bagged.start[b] + vertex
            assert np.exp(log_marginals[cluster]) == pytest.approx(marginal[mask], abs=1e-10)
            assert sizes[cluster] == len(members) and sums[cluster] == weights[members].sum()
    # Split marginals: P(C is a node split into A, B), summed over the blocks.
    split_probability = {}
    for tree, p in zip(trees, probability):
        for parent, left in tree:
            key = (parent, frozenset((left, parent ^ left)))
            split_probability[key] = split_probability.get(key, 0.0) + p
    found = {}
    for parents, lefts, rights, log_p in bagged.split_blocks():
        for parent, left, right, value in zip(parents, lefts, rights, np.exp(log_p)):
            masks = [int(sum(1 << int(i) for i in bagged.trellises[f].vertex_members(v)))
                     for f, v in map(bagged._family_of, (parent, left, right))]
            key = (masks[0], frozenset(masks[1:]))
            found[key] = found.get(key, 0.0) + value
    for key in set(found) | set(split_probability):
        assert found.get(key, 0.0) == pytest.approx(split_probability.get(key, 0.0), abs=1e-10)
    # The most probable clusters: the largest mixture marginals, in order.
    members, values = bagged.most_probable_clusters(5, 2)
    expected = sorted((marginal[mask] for mask in range(1, (1 << n_points) - 1)
                       if mask.bit_count() >= 2), reverse=True)[:len(values)]
    np.testing.assert_allclose(np.exp(values), expected, atol=1e-10)
    for cluster, value in zip(members, values):
        assert np.exp(value) == pytest.approx(marginal[int(sum(1 << int(i) for i in cluster))],
                                              abs=1e-10)
    # Sub-hierarchies: a cluster with the subtree below it.
    sub = subtree_marginals(trees, log_z, 0.0, n_points)
    rng = np.random.default_rng(global_random_seed)
    full = (1 << n_points) - 1
    for subset in [full, 4] + list(rng.choice(np.arange(3, full), size=6, replace=False)):
        order = rng.permutation(_members(int(subset), n_points))
        for subtree in all_trees(int(subset)):
            got = bagged.subtree_log_probability(order, children_over(subtree, order))
            assert np.exp(got) == pytest.approx(sub.get((int(subset), frozenset(subtree)), 0.0),
                                                rel=1e-9, abs=1e-12)


def test_bagged_samples_follow_the_mixture(global_random_seed):
    n_points = 5
    bagged, trees, probability, _ = _bagged_problem("dasgupta", global_random_seed, n_points)
    n_samples = 20000
    index = {frozenset(tree): i for i, tree in enumerate(trees)}
    observed = np.bincount(
        [index[frozenset(tree_splits_set(z, n_points))]
         for z in bagged.sample_linkages(n_samples, np.random.RandomState(global_random_seed))],
        minlength=len(trees))
    expected = probability * n_samples
    assert_draws_follow(observed, expected, "tree")


def test_bagged_trellis_refuses_bad_families_and_weights():
    from sktrellis._engine.sparse.sparse_trellis import BaggedTrellis

    bagged, _, _, _ = _bagged_problem("dasgupta", 0)
    families = bagged.trellises
    with pytest.raises(ValueError, match="one or more SparseTrellis"):
        BaggedTrellis([])
    with pytest.raises(ValueError, match="one or more SparseTrellis"):
        BaggedTrellis(families + [None])
    with pytest.raises(ValueError, match="one positive finite number per trellis"):
        BaggedTrellis(families, [1.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="one positive finite number per trellis"):
        BaggedTrellis(families, [1.0, 1.0])
    other, _, _, _ = _bagged_problem("dasgupta", 0, n_points=5)
    with pytest.raises(ValueError, match="different numbers of points"):
        BaggedTrellis(families + other.trellises)


@pytest.mark.slow  # a calibrated fit; the quick suite has test_model_file.py's damages
def test_a_calibrated_fit_loads_from_a_model_file_and_damage_is_refused():
    import io
    import pickle

    import sktrellis

    X, _ = make_blobs(n_samples=8, n_features=12, centers=2, random_state=0)
    model = SparseTrellisClustering().fit(X)
    assert type(model._trellis).__name__ == "BaggedTrellis"
    loaded = sktrellis.load(io.BytesIO(pickle.dumps(model)))
    assert loaded.cluster_probability([0, 1]) == model.cluster_probability([0, 1])
    assert loaded.most_probable_clusters(3)[0][1] == model.most_probable_clusters(3)[0][1]
    for damage, match in [
        (lambda t: setattr(t, "log_weights", t.log_weights[:-1]), "one positive finite"),
        (lambda t: setattr(t, "log_weights", np.full(len(t.trellises), np.nan)),
         "one positive finite"),
        (lambda t: setattr(t, "log_weights", [0.0] * len(t.trellises)), "float64 log weights"),
        (lambda t: setattr(t, "trellises", tuple(t.trellises)), "no list of trellises"),
    ]:
        damaged = pickle.loads(pickle.dumps(model))
        damage(damaged._trellis)
        with pytest.raises(ValueError, match=f"a pickled BaggedTrellis .*{match}"):
            sktrellis.load(io.BytesIO(pickle.dumps(damaged)))


@pytest.mark.parametrize("energy_class", [Dasgupta, CorrelationClustering])
def test_a_retempered_family_is_the_family_built_at_that_beta(energy_class):
    """Split log potentials are -beta * loss + log prior: rescaled, the same posterior."""
    from sktrellis._engine.agglomerative.builders import replay_tree
    from sktrellis._engine.sparse.sparse_trellis import SparseTrellis
    from sktrellis.energies._tree_prior import split_log_prior

    rng = np.random.default_rng(3)
    n_points = 9
    X = rng.normal(size=(n_points, 4))
    tree = _random_tree(n_points, rng)
    built = {}
    for beta in (1.0, 2.5):
        model = energy_class(beta=beta).merge_model(X)
        family = SparseTrellis(model)
        family.add_tree(replay_tree(model, tree))
        family.grow_tree(tree, 3)
        family.solve()
        built[beta] = family
    log_prior = split_log_prior(built[1.0].size[built[1.0].parent], "yule")
    retempered = built[1.0].retempered((built[1.0].log_psi - log_prior) * 2.5 + log_prior)
    assert retempered.model is None and built[1.0].model is not None
    assert retempered.log_partition == pytest.approx(built[2.5].log_partition, rel=1e-12)
    assert retempered.map_log_potential == pytest.approx(built[2.5].map_log_potential, rel=1e-12)
    np.testing.assert_allclose(retempered.cluster_log_marginals(),
                               built[2.5].cluster_log_marginals(), atol=1e-12)
    assert built[1.0].log_partition != pytest.approx(built[2.5].log_partition)


@pytest.mark.parametrize("n_holding, kept", [(20, True), (19, True), (18, False)])
def test_clusters_most_resamples_hold_are_settled(n_holding, kept):
    """A cluster 95 % of the resamples' trees hold is kept from the rotations; 90 % is not."""
    from sktrellis._sparse import _settled_clusters

    n_points = 7
    trees = ([_caterpillar((0, 1, 2), n_points)] * n_holding
             + [_caterpillar((0, 3, 4), n_points)] * (20 - n_holding))
    settled = {tuple(np.flatnonzero(row)) for row in _settled_clusters(trees, n_points)}
    assert ((0, 1, 2) in settled) is kept
    assert (0, 1, 2, 3, 4) in settled   # every tree holds it
    assert all(2 <= len(cluster) < n_points for cluster in settled)


@pytest.mark.parametrize("mass_bound_time, share", [(0, "unknown"), (0.5, None)])
def test_the_spanned_share_is_said_when_no_bound_makes_it_half(mass_bound_time, share):
    # Five points: every tree is spanned, and the search's exact sum shows it
    # (share 1); without the search nothing bounds the share, and the fit says so.
    X = np.random.default_rng(0).normal(size=(5, 3))
    model = SparseTrellisClustering(Dasgupta(beta=1.0), mass_bound_time=mass_bound_time)
    if share is None:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            model.fit(X)
        assert model.log_spanned_mass_lower_bound_ == pytest.approx(0.0, abs=1e-12)
    else:
        with pytest.warns(UserWarning, match=f"spanned trees hold is {share}.*relative to the"):
            model.fit(X)
        assert np.isnan(model.log_spanned_mass_lower_bound_)
