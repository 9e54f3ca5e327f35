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
# The public Tree result (sktrellis.tree)

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
    assert drawn["ivl"] == ["c", "a", "b"]
    plt.close(fig)
