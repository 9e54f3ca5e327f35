"""Trees at the public boundary: sktrellis._engine.tree.conversion conversions and the sktrellis.Tree result."""
import numpy as np
import pytest
from scipy.cluster.hierarchy import fcluster, is_valid_linkage, linkage
from sklearn.metrics import adjusted_rand_score

from sktrellis._engine.tree.conversion import (
    labels_from_linkage,
    merges_from_tree,
    splits_from_merges,
    to_newick,
)


@pytest.mark.parametrize("n_clusters", [1, 2, 4, 10])
def test_labels_from_linkage_match_fcluster(n_clusters, global_random_seed):
    X = np.random.default_rng(global_random_seed).normal(size=(10, 2))
    Z = linkage(X, "average")
    labels = labels_from_linkage(Z, n_clusters)
    assert adjusted_rand_score(labels, fcluster(Z, n_clusters, "maxclust")) == 1.0
    # Labels are numbered by first appearance.
    assert labels[0] == 0 and list(dict.fromkeys(labels)) == list(range(n_clusters))


def test_merges_and_splits_from_a_scipy_linkage():
    Z = linkage(np.array([[0.0], [0.1], [5.0], [5.3]]), "single")
    merges = merges_from_tree(Z, 4)
    np.testing.assert_array_equal(merges, [[0, 1], [2, 3], [4, 5]])
    parents, lefts = splits_from_merges(merges, 4)
    assert parents.tolist() == [0b0011, 0b1100, 0b1111]
    assert lefts.tolist() == [0b0001, 0b0100, 0b0011]
    np.testing.assert_array_equal(merges_from_tree(Z[:, :2].astype(int), 4), merges)


def test_newick_of_a_small_tree():
    Z = np.array([[0, 1, 1.0, 2], [2, 3, 2.0, 3]])
    assert to_newick(Z, ["a", "b", "c"]) == "(c:2,(a:1,b:1):1);"


@pytest.mark.parametrize(
    "tree, match",
    [
        (np.zeros((3, 3)), "shape"),
        (np.array([[0, 1, 1.0, 2], [0, 3, 2.0, 3]]), "linkage"),
        (np.array([[0.5, 1], [2, 3]]), "integers"),
        (np.array([[0, 1], [1, 3]]), "exactly once"),
        (np.array([[0, 4], [1, 2]]), "earlier merges"),
        (np.array([[-1, 1], [2, 3]]), "earlier merges"),
    ],
)
def test_invalid_trees_are_rejected(tree, match):
    with pytest.raises(ValueError, match=match):
        merges_from_tree(tree, 3)


def test_linkage_heights_are_valid_for_scipy():
    from sktrellis import ExactHierarchicalClustering

    X = np.random.default_rng(1).normal(size=(8, 3))
    for tree in ExactHierarchicalClustering(random_state=0).fit(X).sample(30):
        assert is_valid_linkage(tree, throw=True)
        assert np.all(np.diff(tree[:, 2]) > 0)


###############################################################################
# The public Tree result (sktrellis._tree)

def test_tree_exports_round_trip_an_estimator_linkage():
    from scipy.cluster.hierarchy import to_tree

    from sktrellis import ExactHierarchicalClustering, Tree

    X = np.random.default_rng(0).normal(size=(7, 2))
    Z = ExactHierarchicalClustering().fit(X).linkage_matrix_
    tree = Tree(Z, names=list("abcdefg"))
    np.testing.assert_array_equal(tree.to_numpy(), Z)
    # Every cluster is the leaf set scipy's own tree gives for that row.
    scipy_root, nodes = to_tree(Z, rd=True)
    for row, members in enumerate(tree.clusters()):
        assert members.tolist() == sorted(nodes[7 + row].pre_order())
    newick = tree.to_newick()
    assert newick.endswith(";") and sorted(c for c in newick if c.isalpha()) == list("abcdefg")


def test_tree_from_children_matches_its_linkage():
    from sktrellis import Tree

    children = np.array([[0, 3], [1, 2], [4, 5]])
    tree = Tree.from_children(children)
    assert [m.tolist() for m in tree.clusters()] == [[0, 3], [1, 2], [0, 1, 2, 3]]
    assert tree.n_leaves == 4


@pytest.mark.parametrize(
    "linkage, names, match",
    [
        (np.zeros((2, 3)), None, r"shape \(n_leaves - 1, 4\)"),
        ([[0, 1, 1.0, 2], [0, 2, 2.0, 3]], None, "linkage"),
        ([[0, 1, 1.0, 2]], ["a"], "one entry per leaf"),
    ],
)
def test_bad_trees_are_refused(linkage, names, match):
    from sktrellis import Tree

    with pytest.raises(ValueError, match=match):
        Tree(linkage, names=names)


def test_tree_plot_draws_a_dendrogram():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sktrellis import Tree

    fig, ax = plt.subplots()
    drawn = Tree([[0, 1, 1.0, 2], [2, 3, 2.0, 3]], names=["a", "b", "c"]).plot(ax=ax)
    # An Axes, as plot_dendrogram returns.
    assert drawn is ax
    assert [label.get_text() for label in ax.get_xticklabels()] == ["c", "a", "b"]
    plt.close(fig)


def _random_tree(rng, n_points):
    """A uniformly built random binary tree over n_points leaves, as a Tree."""
    from sktrellis import Tree

    nodes, rows = list(range(n_points)), []
    sizes = [1] * n_points
    while len(nodes) > 1:
        a, b = sorted(rng.choice(len(nodes), size=2, replace=False))
        left, right = nodes[a], nodes[b]
        sizes.append(sizes[left] + sizes[right])
        rows.append([min(left, right), max(left, right), len(rows) + 1.0, sizes[-1]])
        nodes = [node for k, node in enumerate(nodes) if k not in (a, b)]
        nodes.append(n_points + len(rows) - 1)
    return Tree(rows)


@pytest.mark.parametrize("method", ["average", "complete"])
@pytest.mark.parametrize("n_points", [3, 6, 9])
def test_distance_heights_are_monotone_on_any_tree(method, n_points, global_random_seed):
    from scipy.spatial.distance import pdist, squareform

    rng = np.random.default_rng(global_random_seed)
    X = rng.normal(size=(n_points, 3))
    tree = _random_tree(rng, n_points)
    Z = tree.with_heights(X, method=method).to_numpy()
    np.testing.assert_array_equal(Z[:, [0, 1, 3]], tree.to_numpy()[:, [0, 1, 3]])
    distances = squareform(pdist(X))
    for row, members in enumerate(tree.clusters()):
        for child in Z[row, :2].astype(int):
            if child >= n_points:  # never below a child
                assert Z[row, 2] >= Z[child - n_points, 2]
        if method == "complete":  # the diameter, monotone by itself
            assert Z[row, 2] == pytest.approx(distances[np.ix_(members, members)].max())
    precomputed = tree.with_heights(distances, method=method, metric="precomputed")
    np.testing.assert_allclose(precomputed.to_numpy(), Z)


@pytest.mark.parametrize("method", ["average", "complete"])
def test_distance_heights_of_scipys_own_tree_are_scipys(method, global_random_seed):
    """On the tree that average (complete) linkage builds, the heights are its heights."""
    from scipy.cluster.hierarchy import linkage

    from sktrellis import Tree

    X = np.random.default_rng(global_random_seed).normal(size=(10, 2))
    Z = linkage(X, method)
    rebuilt = Tree(Z).with_heights(X, method=method).to_numpy()
    np.testing.assert_allclose(rebuilt[:, 2], Z[:, 2])


def test_distance_heights_lift_a_parent_below_its_child():
    from sktrellis import Tree

    # {0, 2} first: the mean distance from 1 to {0, 2} is 1, below d(0, 2) = 2.
    tree = Tree([[0, 2, 1.0, 2], [1, 3, 2.0, 3]])
    heights = tree.with_heights([[0.0], [1.0], [2.0]]).to_numpy()[:, 2]
    assert heights.tolist() == [2.0, 2.0]


@pytest.mark.parametrize(
    "X, kwargs, match",
    [
        (np.zeros((2, 1)), {}, "one row per leaf"),
        (np.full((3, 1), np.nan), {}, "finite"),
        (np.zeros((3, 1)), {"method": "ward"}, "method must be"),
        (-np.ones((3, 3)), {"metric": "precomputed"}, "symmetric non-negative"),
        (np.zeros((3, 2)), {"metric": "precomputed"}, "symmetric non-negative"),
    ],
)
def test_distance_heights_refuse_bad_input(X, kwargs, match):
    from sktrellis import Tree

    with pytest.raises(ValueError, match=match):
        Tree([[0, 1, 1.0, 2], [2, 3, 2.0, 3]]).with_heights(X, **kwargs)


def _parse_newick(text):
    """A small Newick reader: (leaf names, inner label) of every clade, and branch lengths."""
    clades, position = [], 0

    def token():
        nonlocal position
        start = position
        while position < len(text) and text[position] not in "(),:;":
            position += 1
        return text[start:position]

    def length():
        nonlocal position
        if text[position] != ":":
            return None
        position += 1
        return float(token())

    def node():
        nonlocal position
        if text[position] != "(":
            return frozenset([token()]), length()
        position += 1
        leaves = set()
        while True:
            child, _ = node()
            leaves |= child
            if text[position] == ",":
                position += 1
                continue
            assert text[position] == ")"
            position += 1
            break
        clades.append((frozenset(leaves), token()))
        return frozenset(leaves), length()

    node()
    assert text[position:] == ";"
    return clades


def test_newick_support_labels_read_back(global_random_seed):
    from sktrellis import ExactHierarchicalClustering, Tree

    X = np.random.default_rng(global_random_seed).normal(size=(7, 2))
    model = ExactHierarchicalClustering(n_clusters=2).fit(X)
    support = model.clade_support()
    names = [f"p{i}" for i in range(7)]
    newick = Tree(model.linkage_matrix_, names).to_newick(
        support=support, fmt="{:.6f}"
    )
    expected = {
        frozenset(names[i] for i in members): value
        for members, value in zip(model.tree_.clusters(), support)
    }
    read = dict(_parse_newick(newick))
    assert read.keys() == expected.keys()
    for clade, label in read.items():
        assert float(label) == pytest.approx(expected[clade], abs=1e-6)
    # Without support the inner nodes carry no label.
    assert all(label == "" for _, label in _parse_newick(model.tree_.to_newick()))


def test_newick_support_labels_read_by_biopython(global_random_seed):
    """Bio.Phylo, as a phylogenetics user would read the file, finds the supports."""
    from io import StringIO

    Phylo = pytest.importorskip("Bio.Phylo", reason="the reader test needs biopython")
    from sktrellis import ExactHierarchicalClustering, Tree

    X = np.random.default_rng(global_random_seed).normal(size=(6, 2))
    model = ExactHierarchicalClustering().fit(X)
    names = [f"p{i}" for i in range(6)]
    support = model.clade_support()
    tree = Phylo.read(StringIO(Tree(model.linkage_matrix_, names).to_newick(support=support)),
                      "newick")
    read = {frozenset(leaf.name for leaf in clade.get_terminals()): clade.confidence
            for clade in tree.get_nonterminals()}
    for members, value in zip(model.tree_.clusters(), support):
        assert read[frozenset(names[i] for i in members)] == pytest.approx(value, abs=5e-3)


@pytest.mark.parametrize("support", [[0.5], [0.5, np.nan], [[0.5, 1.0]]])
def test_newick_support_must_match_the_inner_nodes(support):
    from sktrellis import Tree

    with pytest.raises(ValueError, match="one finite value per inner node"):
        Tree([[0, 1, 1.0, 2], [2, 3, 2.0, 3]]).to_newick(support=support)


@pytest.mark.parametrize("exponent", [-1000, 1000, 1021])
def test_distance_heights_near_the_float_limits_scale_exactly(exponent, global_random_seed):
    """Squared differences of values near 1e308 overflow; the heights must not."""
    X = np.random.default_rng(global_random_seed).uniform(-0.4, 0.4, size=(6, 2))
    tree = _random_tree(np.random.default_rng(global_random_seed), 6)
    scaled = tree.with_heights(np.ldexp(X, exponent)).to_numpy()[:, 2]
    np.testing.assert_allclose(np.ldexp(scaled, -exponent), tree.with_heights(X).to_numpy()[:, 2])
    with pytest.raises(ValueError, match="float64's limit"):
        tree.with_heights(np.ldexp(X * 4, 1023), method="complete")
