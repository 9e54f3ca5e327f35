"""Metrics and scorers against trivial implementations kept here."""
import pickle
from itertools import combinations

import numpy as np
import pytest
from scipy.cluster.hierarchy import linkage
from scipy.special import logsumexp
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.cluster import AgglomerativeClustering
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sktrellis import ExactHierarchicalClustering, SparseTrellisClustering
from sktrellis.energies import CorrelationClustering, Dasgupta
from sktrellis.metrics import (
    TransductiveSplit,
    dasgupta_cost,
    dendrogram_purity,
    expected_dendrogram_purity,
    log_partition_scorer,
    make_posterior_scorer,
    make_tree_scorer,
)

from .common import all_trees, brute_force, random_split_energy, tree_log_potentials

###############################################################################
# Trivial implementations


def naive_members(children, n_points):
    """Leaf set of every merge, in row order."""
    members = [{i} for i in range(n_points)]
    for a, b in np.asarray(children)[:, :2].astype(int):
        members.append(members[a] | members[b])
    return members[n_points:]


def naive_lca(nodes, i, j):
    # Rows are children-first, so the first node holding both is the lowest.
    return next(node for node in nodes if i in node and j in node)


def naive_dendrogram_purity(labels, children):
    labels = list(labels)
    nodes = naive_members(children, len(labels))
    purities = []
    for i, j in combinations(range(len(labels)), 2):
        if labels[i] == labels[j]:
            lca = naive_lca(nodes, i, j)
            purities.append(sum(labels[k] == labels[i] for k in lca) / len(lca))
    return np.mean(purities) if purities else 1.0


def naive_dasgupta_cost(children, affinity):
    nodes = naive_members(children, len(affinity))
    return sum(
        affinity[i, j] * len(naive_lca(nodes, i, j))
        for i, j in combinations(range(len(affinity)), 2)
    )


def random_children(n_points, rng):
    """A uniformly random merge order of random pairs: any binary tree shape."""
    active = list(range(n_points))
    children = []
    for row in range(n_points - 1):
        a, b = rng.choice(len(active), size=2, replace=False)
        children.append([active[a], active[b]])
        active = [node for k, node in enumerate(active) if k not in (a, b)]
        active.append(n_points + row)
    return np.array(children, dtype=np.int64).reshape(-1, 2)


def caterpillar(n_points):
    """((((0, 1), 2), 3), ...): the deepest tree."""
    return np.array([[0, 1]] + [[i, n_points + i - 2] for i in range(2, n_points)]).reshape(-1, 2)


def children_from_splits(tree, n_points):
    """children_ array of a list of (parent, left) splits."""
    node_of = {1 << i: i for i in range(n_points)}
    children = []
    for parent, left in sorted(tree, key=lambda split: bin(split[0]).count("1")):
        children.append([node_of[left], node_of[parent ^ left]])
        node_of[parent] = n_points + len(children) - 1
    return np.array(children).reshape(-1, 2)


###############################################################################
# dendrogram_purity


@pytest.mark.parametrize("n_points", [2, 3, 5, 10, 40])
@pytest.mark.parametrize("n_classes", [1, 2, 4, 40])
def test_dendrogram_purity_matches_naive_on_random_trees(n_points, n_classes, global_random_seed):
    rng = np.random.default_rng(global_random_seed + n_points + 100 * n_classes)
    for _ in range(5):
        labels = rng.integers(n_classes, size=n_points)
        children = random_children(n_points, rng)
        assert dendrogram_purity(labels, children) == pytest.approx(
            naive_dendrogram_purity(labels, children), rel=1e-12
        )


@pytest.mark.parametrize("method", ["single", "average", "ward"])
def test_dendrogram_purity_of_scipy_and_sklearn_trees(method, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    X = rng.normal(size=(30, 2))
    labels = np.array(["a", "b", "c"])[rng.integers(3, size=30)]
    Z = linkage(X, method)
    expected = naive_dendrogram_purity(labels, Z)
    assert dendrogram_purity(labels, Z) == pytest.approx(expected, rel=1e-12)
    assert dendrogram_purity(labels, Z[:, :2].astype(int)) == pytest.approx(expected, rel=1e-12)
    model = AgglomerativeClustering(linkage=method, compute_full_tree=True).fit(X)
    assert dendrogram_purity(labels, model.children_) == pytest.approx(
        naive_dendrogram_purity(labels, model.children_), rel=1e-12
    )


def test_dendrogram_purity_of_deep_and_large_trees(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    labels = rng.integers(5, size=60)
    chain = caterpillar(60)
    assert dendrogram_purity(labels, chain) == pytest.approx(
        naive_dendrogram_purity(labels, chain), rel=1e-12
    )
    # A tree whose every class is a subtree is pure, whatever its size.
    n_points = 5000
    labels = np.sort(rng.integers(50, size=n_points))
    assert dendrogram_purity(labels, caterpillar(n_points)) < 1.0
    jittered = labels + 1e-6 * np.arange(n_points)
    balanced = linkage(jittered[:, None], "single")
    assert dendrogram_purity(labels, balanced) == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize(
    "labels, children, expected",
    [
        ([7], np.zeros((0, 2)), 1.0),  # one point: no pair
        ([0, 1, 2], [[0, 1], [2, 3]], 1.0),  # no same-class pair
        ([0, 0, 0], [[0, 1], [2, 3]], 1.0),  # one class
        ([0, 1, 0, 1], [[0, 1], [2, 3], [4, 5]], 0.5),
        (["x", "y", "x"], [[0, 2], [1, 3]], 1.0),
        ([0, 1, 0], [[0, 1], [2, 3]], 2 / 3),
    ],
)
def test_dendrogram_purity_edge_cases(labels, children, expected):
    assert dendrogram_purity(labels, np.array(children)) == pytest.approx(expected)


def test_dendrogram_purity_does_not_mutate_input(global_random_seed):
    Z = linkage(np.random.default_rng(global_random_seed).normal(size=(8, 2)))
    labels = np.array([0, 1, 0, 1, 2, 2, 0, 1])
    before = Z.copy(), labels.copy()
    dendrogram_purity(labels, Z)
    np.testing.assert_array_equal(Z, before[0])
    np.testing.assert_array_equal(labels, before[1])


@pytest.mark.parametrize(
    "labels, tree, match",
    [
        ([0, 1, 0], np.zeros((2, 3)), r"shape \(n_samples - 1, 4\).*got shape \(2, 3\)"),
        ([0, 1, 0], np.zeros(4), "got shape"),
        ([0, 1, 0, 1], [[0, 1], [2, 3]], r"labels_true has n_samples=4 but the tree has 2 rows"),
        (np.zeros((3, 1)), [[0, 1], [2, 3]], "1-dimensional"),
        ([], np.zeros((0, 2)), "empty"),
        ([0, 1, 0], [[0, 1], [0, 2]], "exactly once"),
        ([0, 1, 0], [[0, 4], [1, 2]], "earlier merges"),
        ([0, 1, 0], [[0, 1.5], [2, 3]], "integers"),
        ([0, 1, 0], [[0, 1, -1.0, 2], [2, 3, 1.0, 3]], "negative"),
        ([0.0, np.nan, 0.0], [[0, 1], [2, 3]], "labels_true contains NaN"),
    ],
)
def test_dendrogram_purity_errors(labels, tree, match):
    with pytest.raises(ValueError, match=match):
        dendrogram_purity(labels, tree)


###############################################################################
# dasgupta_cost


@pytest.mark.parametrize("n_points", [2, 3, 6, 25])
def test_dasgupta_cost_matches_naive(n_points, global_random_seed):
    rng = np.random.default_rng(global_random_seed + n_points)
    weights = rng.random(size=(n_points, n_points))
    affinity = weights + weights.T
    for _ in range(5):
        children = random_children(n_points, rng)
        assert dasgupta_cost(children, affinity) == pytest.approx(
            naive_dasgupta_cost(children, affinity), rel=1e-10
        )
    Z = linkage(rng.normal(size=(n_points, 2)), "average")
    assert dasgupta_cost(Z, affinity) == pytest.approx(naive_dasgupta_cost(Z, affinity), rel=1e-10)


def test_dasgupta_cost_is_minus_the_log_potential_over_beta(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    n_points = 5
    X = rng.normal(size=(n_points, 2))
    energy = Dasgupta(beta=2.5, tree_prior="uniform")   # the cost alone
    affinity = energy.similarities(X)
    trees = all_trees((1 << n_points) - 1)
    values = tree_log_potentials(energy.split_potential(X), trees)
    costs = [dasgupta_cost(children_from_splits(tree, n_points), affinity) for tree in trees]
    np.testing.assert_allclose(costs, -values / energy.beta, rtol=1e-10)
    model = ExactHierarchicalClustering(energy).fit(X)
    map_cost = dasgupta_cost(model.linkage_matrix_, affinity)
    assert map_cost == pytest.approx(-model.map_log_potential_ / energy.beta, rel=1e-10)
    assert map_cost == pytest.approx(min(costs), rel=1e-10)


def test_dasgupta_cost_edge_cases():
    assert dasgupta_cost(np.zeros((0, 2)), [[3.0]]) == 0.0
    # The diagonal is ignored: only pairs of distinct points are split.
    assert dasgupta_cost([[0, 1]], [[5.0, 2.0], [2.0, 5.0]]) == 4.0


@pytest.mark.parametrize(
    "tree, affinity, match",
    [
        ([[0, 1]], np.ones((2, 3)), "square"),
        ([[0, 1]], [[0, 1.0], [2.0, 0]], "symmetric"),
        ([[0, 1]], [[0, np.nan], [np.nan, 0]], "NaN"),
        ([[0, 1]], np.ones((3, 3)), r"affinity has n_samples=3 but the tree has 1 rows"),
        ([[0, 0]], np.ones((2, 2)), "exactly once"),
        (np.zeros((0, 2)), np.zeros((0, 0)), "empty"),
        ([[0, 1]], [[0, -1.0], [-1.0, 0]], "negative entries"),
    ],
)
def test_dasgupta_cost_errors(tree, affinity, match):
    with pytest.raises(ValueError, match=match):
        dasgupta_cost(tree, affinity)


###############################################################################
# expected_dendrogram_purity


def _energy(kind, n_points, rng):
    if kind == "dasgupta":
        return Dasgupta(beta=rng.uniform(0.2, 3)), rng.normal(size=(n_points, 2))
    if kind == "hcc":
        weights = rng.normal(size=(n_points, n_points))
        return CorrelationClustering(affinity="precomputed"), weights + weights.T
    # Random tables forbid some splits; draw until some tree is feasible.
    X = np.zeros((n_points, 1))
    while True:
        energy = random_split_energy(n_points, rng)
        if np.isfinite(brute_force(energy.split_potential(X), n_points)[0]):
            return energy, X


def brute_force_expected_purity(labels, potential, n_points):
    trees = all_trees((1 << n_points) - 1)
    values = tree_log_potentials(potential, trees)
    probabilities = np.exp(values - logsumexp(values))
    purities = [
        naive_dendrogram_purity(labels, children_from_splits(tree, n_points)) for tree in trees
    ]
    return float(np.dot(probabilities, purities))


@pytest.mark.parametrize("kind", ["dasgupta", "hcc", "table"])
@pytest.mark.parametrize("n_points", [2, 3, 4, 5, 6])
def test_expected_dendrogram_purity_matches_enumeration(kind, n_points, global_random_seed):
    rng = np.random.default_rng(global_random_seed + n_points)
    energy, X = _energy(kind, n_points, rng)
    model = ExactHierarchicalClustering(energy, n_clusters=1).fit(X)
    for n_classes in (1, 2, 3):
        labels = rng.integers(n_classes, size=n_points)
        expected = brute_force_expected_purity(labels, energy.split_potential(X), n_points)
        assert expected_dendrogram_purity(labels, model) == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("builder, resplit_parts", [("greedy", 0), ("sampled", 0), ("beam", 3)])
def test_expected_dendrogram_purity_of_a_sparse_trellis_matches_enumeration(
    builder, resplit_parts, global_random_seed
):
    """The sparse trellis raised AttributeError. Its posterior is the
    exact one restricted to the trees it spans: enumerate all 945 trees of 6
    points, keep those of finite log_probability, and average their purity."""
    from sktrellis import SparseTrellisClustering

    rng = np.random.default_rng(global_random_seed)
    n_points = 6
    X = rng.normal(size=(n_points, 2))
    model = SparseTrellisClustering(
        Dasgupta(beta=1.5), builder=builder, n_seed_trees=4, resplit_parts=resplit_parts,
        random_state=0,
    ).fit(X)
    labels = rng.integers(3, size=n_points)
    trees = [children_from_splits(tree, n_points) for tree in all_trees((1 << n_points) - 1)]
    log_p = np.array([model.log_probability(children) for children in trees])
    spanned = np.isfinite(log_p)
    assert spanned.sum() == model.n_trees_
    expected = sum(
        np.exp(lp) * naive_dendrogram_purity(labels, children)
        for lp, children, keep in zip(log_p, trees, spanned) if keep
    )
    assert expected_dendrogram_purity(labels, model) == pytest.approx(expected, rel=1e-10)
    scorer = make_posterior_scorer(expected_dendrogram_purity)
    assert scorer(model, X, labels) == pytest.approx(expected, rel=1e-10)


def test_expected_dendrogram_purity_tends_to_the_map_purity():
    X = np.array([[0.0], [0.2], [0.3], [5.0], [5.1], [9.0], [9.4]])
    labels = [0, 0, 1, 1, 1, 2, 2]
    cold = ExactHierarchicalClustering(Dasgupta(gamma=0.5, beta=1e7)).fit(X)
    expected = expected_dendrogram_purity(labels, cold)
    # The far groups' similarities are about 1e-18: trees that join them
    # otherwise cost a hair more, and the tree prior's factors keep a few
    # 1e-9 of the mass on them even at this beta.
    assert expected == pytest.approx(dendrogram_purity(labels, cold.linkage_matrix_), rel=1e-7)
    pipeline = make_pipeline(StandardScaler(), ExactHierarchicalClustering()).fit(X)
    assert 0 < expected_dendrogram_purity(labels, pipeline) < 1


def spanned_trees(model, n_points):
    """Every tree over n_points whose clusters are all vertices of a fitted sparse trellis."""
    trees = all_trees((1 << n_points) - 1)
    masks = sorted({parent for tree in trees for parent, _ in tree}
                   | {left for tree in trees for _, left in tree}
                   | {parent ^ left for tree in trees for parent, left in tree})
    found = model._trellis.vertex_of([np.flatnonzero([m >> i & 1 for i in range(n_points)])
                                      for m in masks])
    present = {m for m, v in zip(masks, found) if v >= 0}
    return [tree for tree in trees
            if all(p in present and a in present and p ^ a in present for p, a in tree)]


@pytest.mark.parametrize("n_points", [4, 5, 6])
@pytest.mark.parametrize("builder", ["greedy", "beam", "sampled"])
def test_expected_dendrogram_purity_of_sparse_trellis(n_points, builder, global_random_seed):
    """Over the spanned trees, by enumeration (the sparse trellis once raised AttributeError)."""
    rng = np.random.default_rng(global_random_seed)
    X = rng.normal(size=(n_points, 2))
    energy = Dasgupta(beta=0.7)
    model = SparseTrellisClustering(energy, builder=builder, n_seed_trees=2,
                                    random_state=global_random_seed).fit(X)
    trees = spanned_trees(model, n_points)
    values = tree_log_potentials(energy.split_potential(X), trees)
    # The certificate that the enumeration sees the trellis' trees.
    assert logsumexp(values) == pytest.approx(model.log_partition_, rel=1e-9)
    probabilities = np.exp(values - logsumexp(values))
    for n_classes in (2, 3):
        labels = rng.integers(n_classes, size=n_points)
        purities = [naive_dendrogram_purity(labels, children_from_splits(tree, n_points))
                    for tree in trees]
        expected = float(np.dot(probabilities, purities))
        assert expected_dendrogram_purity(labels, model) == pytest.approx(expected, rel=1e-9)
        scorer = make_posterior_scorer(expected_dendrogram_purity)
        assert scorer(model, X, labels) == pytest.approx(expected, rel=1e-9)


def test_expected_dendrogram_purity_errors():
    X = np.arange(8.0).reshape(4, 2)
    with pytest.raises(TypeError, match="exact posterior.*AgglomerativeClustering"):
        expected_dendrogram_purity([0, 0, 1, 1], AgglomerativeClustering().fit(X))
    model = ExactHierarchicalClustering().fit(X)
    with pytest.raises(ValueError, match="labels_true has n_samples=3 but.*n_samples=4"):
        expected_dendrogram_purity([0, 0, 1], model)
    assert expected_dendrogram_purity([0, 1, 2, 3], model) == 1.0


###############################################################################
# Scorers


def _fitted(X, **params):
    return make_pipeline(StandardScaler(), ExactHierarchicalClustering(**params)).fit(X)


def test_scorers_read_the_fitted_tree_and_posterior(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    X = rng.normal(size=(8, 2))
    y = rng.integers(3, size=8)
    pipeline = _fitted(X)
    final = pipeline[-1]
    assert make_tree_scorer(dendrogram_purity)(pipeline, X, y) == dendrogram_purity(
        y, final.linkage_matrix_
    )
    # The bare final step is scored on the data it saw: after the scaler.
    assert make_tree_scorer(dendrogram_purity)(
        final, pipeline[:-1].transform(X), y
    ) == dendrogram_purity(y, final.linkage_matrix_)
    assert make_posterior_scorer(expected_dendrogram_purity)(pipeline, X, y) == (
        expected_dendrogram_purity(y, final)
    )
    assert log_partition_scorer(pipeline, X) == final.log_partition_
    negated = make_tree_scorer(dendrogram_purity, greater_is_better=False)
    assert negated(pipeline, X, y) == -dendrogram_purity(y, final.linkage_matrix_)
    # children_ of scikit-learn's own hierarchical clusterer are read too.
    agglomerative = AgglomerativeClustering(compute_full_tree=True).fit(X)
    assert make_tree_scorer(dendrogram_purity)(agglomerative, X, y) == dendrogram_purity(
        y, agglomerative.children_
    )


def test_scorer_keyword_arguments_and_repr():
    def score(labels_true, tree, *, offset):
        return dendrogram_purity(labels_true, tree) + offset

    X = np.arange(10.0).reshape(5, 2)
    model = ExactHierarchicalClustering().fit(X)
    scorer = make_tree_scorer(score, greater_is_better=False, offset=1.0)
    assert scorer(model, X, [0, 0, 1, 1, 1]) == -(
        dendrogram_purity([0, 0, 1, 1, 1], model.linkage_matrix_) + 1.0
    )
    assert repr(scorer) == "make_tree_scorer(score, greater_is_better=False, offset=1.0)"
    assert repr(make_posterior_scorer(expected_dendrogram_purity)) == (
        "make_posterior_scorer(expected_dendrogram_purity)"
    )
    restored = pickle.loads(pickle.dumps(make_tree_scorer(dendrogram_purity)))
    assert restored(model, X, [0, 0, 1, 1, 1]) == dendrogram_purity(
        [0, 0, 1, 1, 1], model.linkage_matrix_
    )


@pytest.mark.parametrize(
    "scorer",
    [make_tree_scorer(dendrogram_purity), make_posterior_scorer(expected_dendrogram_purity),
     log_partition_scorer],
)
def test_scorers_refuse_data_the_clusterer_was_not_fitted_on(scorer, global_random_seed):
    X = np.random.default_rng(global_random_seed).normal(size=(9, 3))
    y = np.arange(9) % 3
    pipeline = _fitted(X)
    with pytest.raises(ValueError, match=r"n_samples=6 but .* n_samples=9.*TransductiveSplit"):
        scorer(pipeline, X[:6], y[:6])
    with pytest.raises(ValueError, match=r"2 features but .* n_features_in_=3"):
        scorer(pipeline, X[:, :2], y)


def test_grid_search_with_held_out_folds_fails_loudly(global_random_seed):
    X = np.random.default_rng(global_random_seed).normal(size=(9, 2))
    search = GridSearchCV(
        ExactHierarchicalClustering(Dasgupta()),
        {"energy__beta": [0.5, 1.0]},
        scoring=make_tree_scorer(dendrogram_purity),
        cv=KFold(3),
        error_score="raise",
    )
    with pytest.raises(ValueError, match=r"n_samples=3 but .* fitted on n_samples=6"):
        search.fit(X, np.arange(9) % 3)


@pytest.mark.parametrize("cv", [None, 3, KFold(3)])
def test_a_splitting_cv_is_refused_naming_the_cv_that_fits(cv, global_random_seed):
    """GridSearchCV's default cv=5 ended in NaN scores and one traceback per fold."""
    X = np.random.default_rng(global_random_seed).normal(size=(10, 2))
    y = np.arange(10) % 2
    search = GridSearchCV(ExactHierarchicalClustering(Dasgupta(beta=1.0)),
                          {"energy__gamma": [0.5, 2.0]},
                          scoring=make_tree_scorer(dendrogram_purity), error_score="raise",
                          **({} if cv is None else {"cv": cv}))
    with pytest.raises(ValueError, match=r"cv=sktrellis.metrics.TransductiveSplit\(\)"):
        search.fit(X, y)
    search.set_params(cv=TransductiveSplit()).fit(X, y)
    idx = np.arange(len(X))
    manual = GridSearchCV(search.estimator, search.param_grid, scoring=search.scoring,
                          cv=[(idx, idx)]).fit(X, y)
    np.testing.assert_array_equal(search.cv_results_["mean_test_score"],
                                  manual.cv_results_["mean_test_score"])
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    assert TransductiveSplit().get_n_splits() == 1


def test_scorer_errors():
    X = np.arange(10.0).reshape(5, 2)
    model = ExactHierarchicalClustering().fit(X)
    with pytest.raises(ValueError, match="true labels: pass them as y"):
        make_tree_scorer(dendrogram_purity)(model, X)
    with pytest.raises(TypeError, match="callable"):
        make_tree_scorer("dendrogram_purity")
    with pytest.raises(TypeError, match="callable"):
        make_posterior_scorer(None)
    with pytest.raises(TypeError, match="no fitted tree"):
        make_tree_scorer(dendrogram_purity)(_LabelsOnly().fit(X), X, [0] * 5)
    with pytest.raises(TypeError, match="labels_"):
        make_tree_scorer(dendrogram_purity)(StandardScaler().fit(X), X, [0] * 5)
    with pytest.raises(TypeError, match="log_partition_"):
        log_partition_scorer(_LabelsOnly().fit(X), X)


class _LabelsOnly(ClusterMixin, BaseEstimator):
    """A minimal flat clusterer: labels_ and nothing else."""

    def fit(self, X, y=None):
        self.labels_ = np.zeros(len(X), dtype=int)
        return self


def test_log_partition_scorer_selects_the_highest_evidence(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    X = rng.normal(size=(7, 2))
    idx = np.arange(len(X))
    betas = [0.5, 1.0, 2.0]
    search = GridSearchCV(
        ExactHierarchicalClustering(Dasgupta()), {"energy__beta": betas},
        scoring=log_partition_scorer, cv=[(idx, idx)],
    ).fit(X)
    log_z = [ExactHierarchicalClustering(Dasgupta(beta=b)).fit(X).log_partition_ for b in betas]
    np.testing.assert_allclose(search.cv_results_["mean_test_score"], log_z)
    assert search.best_params_ == {"energy__beta": betas[int(np.argmax(log_z))]}


@pytest.mark.parametrize("held_out", ["other_half", pytest.param("permuted", marks=pytest.mark.slow)])
def test_scorers_refuse_other_data_of_the_same_shape(held_out, global_random_seed):
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from sktrellis import ExactHierarchicalClustering

    rng = np.random.default_rng(global_random_seed)
    X, y = rng.normal(size=(12, 2)), np.repeat([0, 1], 6)
    train = np.arange(6)
    test = train + 6 if held_out == "other_half" else rng.permutation(train)[::-1]
    if held_out == "permuted" and np.array_equal(test, train):
        test = train[::-1]
    pipeline = make_pipeline(StandardScaler(), ExactHierarchicalClustering())
    search = GridSearchCV(
        pipeline, {"exacthierarchicalclustering__n_clusters": [2]},
        scoring=make_tree_scorer(dendrogram_purity), cv=[(train, test)], error_score="raise",
    )
    with pytest.raises(ValueError, match="different data than the clusterer was fitted on"):
        search.fit(X, y)
    # The recipe itself passes: fitted and scored on the same points.
    search.set_params(cv=[(train, train)]).fit(X, y)
