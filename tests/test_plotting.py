"""Plotting helpers, drawn off-screen with the Agg backend."""
import sys

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.cluster import AgglomerativeClustering
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sktrellis import ExactHierarchicalClustering
from sktrellis.energies import Dasgupta
from sktrellis.plotting import plot_dendrogram, plot_pairwise_probability

matplotlib = pytest.importorskip("matplotlib", reason="plots need matplotlib")
matplotlib.use("Agg")
plt = pytest.importorskip("matplotlib.pyplot")


@pytest.fixture
def ax():
    figure, axes = plt.subplots()
    yield axes
    plt.close(figure)


class _FlatPosterior(ClusterMixin, BaseEstimator):
    """Stands in for a fitted flat clusterer: pairwise_probability_ from labels."""

    def fit(self, X, y=None):
        self.labels_ = (np.asarray(X)[:, 0] > 0).astype(int)
        same = self.labels_[:, None] == self.labels_[None, :]
        self.pairwise_probability_ = np.where(same, 0.9, 0.1)
        np.fill_diagonal(self.pairwise_probability_, 1.0)
        return self


@pytest.mark.parametrize("orientation", ["top", pytest.param("left", marks=pytest.mark.slow)])
def test_dendrogram_annotates_every_inner_node_with_its_marginal(
    ax, orientation, global_random_seed
):
    X = np.random.default_rng(global_random_seed).normal(size=(7, 2))
    model = ExactHierarchicalClustering().fit(X)
    tree = model.tree_.with_heights(X)
    ax.figure.set_size_inches(12, 12)  # room for every label
    plot_dendrogram(model, tree=tree, ax=ax, orientation=orientation)
    Z = tree.to_numpy()
    assert len(ax.texts) == len(Z) - 1  # every merge but the root
    where = _node_positions(Z)
    for text in ax.texts:
        x, y = text.xy if orientation == "top" else text.xy[::-1]
        (row,) = [row for row in range(len(Z) - 1) if where[row] == (x, y)]
        members = _members(Z, len(X) + row)
        assert text.get_text() == f"{model.cluster_probability(members):.2f}"
    # Each annotation sits on a link that scipy drew at that height.
    drawn = {(round(x, 6), round(y, 6)) for x, y in _drawn_link_tops(ax, orientation)}
    for text in ax.texts:
        x, y = text.xy if orientation == "top" else text.xy[::-1]
        assert (round(x, 6), round(y, 6)) in drawn


def _node_positions(Z):
    """(position, height) of every merge as scipy lays it out, by linkage row."""
    from scipy.cluster.hierarchy import dendrogram

    n_points = len(Z) + 1
    position = np.zeros(2 * n_points - 1)
    position[dendrogram(Z, no_plot=True)["leaves"]] = 5.0 + 10.0 * np.arange(n_points)
    for row, (a, b) in enumerate(Z[:, :2].astype(int)):
        position[n_points + row] = (position[a] + position[b]) / 2
    return [(position[n_points + row], Z[row, 2]) for row in range(len(Z))]


def _drawn_link_tops(ax, orientation):
    """(x, height) of the middle of the bar of every link scipy drew."""
    tops = []
    for collection in ax.collections:
        for path in collection.get_paths():
            vertices = path.vertices if orientation == "top" else path.vertices[:, ::-1]
            tops.append(tuple(vertices[1:3].mean(axis=0)))
    return tops


def _members(Z, node):
    n_points = len(Z) + 1
    if node < n_points:
        return [node]
    a, b = Z[node - n_points, :2].astype(int)
    return sorted(_members(Z, a) + _members(Z, b))


def test_dendrogram_of_a_pipeline_with_options(ax, global_random_seed):
    X = np.random.default_rng(global_random_seed).normal(size=(6, 2))
    pipeline = make_pipeline(StandardScaler(), ExactHierarchicalClustering()).fit(X)
    names = list("abcdef")
    plot_dendrogram(pipeline, ax=ax, labels=names, fmt="P={:.1%}", leaf_rotation=90)
    assert sorted(t.get_text() for t in ax.get_xticklabels()) == names
    assert all(t.get_text().startswith("P=") for t in ax.texts)
    plot_dendrogram(pipeline, ax=ax, annotate=False)


def test_dendrogram_errors(ax, global_random_seed):
    X = np.random.default_rng(global_random_seed).normal(size=(5, 2))
    with pytest.raises(TypeError, match="linkage_matrix_"):
        plot_dendrogram(AgglomerativeClustering().fit(X), ax=ax)
    no_marginals = _FlatPosterior().fit(X)
    no_marginals.linkage_matrix_ = ExactHierarchicalClustering().fit(X).linkage_matrix_
    with pytest.raises(TypeError, match="annotate=False"):
        plot_dendrogram(no_marginals, ax=ax)
    plot_dendrogram(no_marginals, ax=ax, annotate=False)
    with pytest.raises(ValueError, match="truncate_mode"):
        plot_dendrogram(ExactHierarchicalClustering().fit(X), ax=ax, truncate_mode="level")


def test_heatmap_orders_points_into_blocks(ax):
    X = np.array([[1.0], [-1.0], [2.0], [-2.0], [3.0]])
    model = _FlatPosterior().fit(X)
    plot_pairwise_probability(model, ax=ax)
    shown = ax.images[0].get_array()
    order = [int(t.get_text()) for t in ax.get_xticklabels()]
    np.testing.assert_array_equal(shown, model.pairwise_probability_[np.ix_(order, order)])
    # The two clusters are contiguous blocks in the chosen order.
    assert np.count_nonzero(np.diff(model.labels_[order])) == 1
    assert ax.images[0].get_clim() == (0.0, 1.0)


def test_heatmap_of_any_matrix(ax, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    matrix = rng.normal(size=(4, 4))
    plot_pairwise_probability(matrix, ax=ax, order=None, colorbar=False, labels=list("wxyz"))
    np.testing.assert_array_equal(ax.images[0].get_array(), matrix)
    assert [t.get_text() for t in ax.get_yticklabels()] == list("wxyz")
    permutation = [3, 1, 0, 2]
    plot_pairwise_probability(matrix, ax=ax, order=permutation)
    np.testing.assert_array_equal(
        ax.images[-1].get_array(), matrix[np.ix_(permutation, permutation)]
    )
    plot_pairwise_probability(np.ones((1, 1)), ax=ax)


@pytest.mark.parametrize(
    "matrix, kwargs, match",
    [
        (np.ones((2, 3)), {}, "square"),
        (np.array([[1.0, np.nan], [np.nan, 1.0]]), {}, "NaN"),
        (np.array([[1.0, 2.0], [2.0, 1.0]]), {}, r"order=None"),
        (np.eye(3), {"order": "labels"}, "order must be"),
        (np.eye(3), {"order": [0, 0, 1]}, "permutation"),
        (np.eye(3), {"labels": ["a"]}, "labels has 1 names"),
    ],
)
def test_heatmap_errors(ax, matrix, kwargs, match):
    with pytest.raises(ValueError, match=match):
        plot_pairwise_probability(matrix, ax=ax, **kwargs)


def test_heatmap_of_an_estimator_without_pairwise_probabilities(ax):
    model = ExactHierarchicalClustering().fit(np.arange(8.0).reshape(4, 2))
    with pytest.raises(TypeError, match="pairwise_probability_"):
        plot_pairwise_probability(model, ax=ax)


def test_missing_matplotlib_is_a_clear_import_error(monkeypatch):
    model = ExactHierarchicalClustering().fit(np.arange(8.0).reshape(4, 2))
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        plot_dendrogram(model)
    with pytest.raises(ImportError, match="sktrellis\\[plot\\]"):
        plot_pairwise_probability(np.eye(3))


def test_dendrogram_of_another_tree_shows_its_exact_support():
    """Any tree over the fitted points, each node with its clade support."""
    from scipy.cluster.hierarchy import linkage

    X = np.random.default_rng(3).normal(size=(7, 2))
    model = ExactHierarchicalClustering().fit(X)
    greedy = linkage(X, "single")
    fig, ax = plt.subplots()
    plot_dendrogram(model, tree=greedy, ax=ax)
    shown = sorted(float(t.get_text()) for t in ax.texts)
    assert shown == pytest.approx(sorted(np.round(model.clade_support(greedy)[:-1], 2)))
    plt.close(fig)
    with pytest.raises(ValueError, match="linkage matrix over the fitted points"):
        plot_dendrogram(model, tree=greedy[:-1])


def _blobs(seed, sizes=(3, 3, 3), spread=0.1):
    rng = np.random.default_rng(seed)
    centres = 10.0 * np.arange(len(sizes))[:, None] * np.ones((1, 2))
    return np.vstack([c + spread * rng.normal(size=(n, 2)) for c, n in zip(centres, sizes)])


@pytest.mark.parametrize("n_clusters", [pytest.param(2, marks=pytest.mark.slow), 3,
                                        pytest.param(4, marks=pytest.mark.slow)])
def test_dendrogram_colours_follow_n_clusters(ax, n_clusters, global_random_seed):
    """One colour per cluster of the estimator's cut, not scipy's 0.7 x top height."""
    X = _blobs(global_random_seed, sizes=(3, 3, 4, 4))
    model = ExactHierarchicalClustering(n_clusters=n_clusters).fit(X)
    plot_dendrogram(model, tree=model.tree_.with_heights(X), ax=ax)
    # scipy draws one collection per colour: the clusters' and the links above them.
    assert len(ax.collections) == n_clusters + 1
    plot_dendrogram(model, ax=ax, color_threshold=0)  # the caller's threshold wins
    assert len(ax.collections) == n_clusters + 1 + 1


def test_dendrogram_labels_do_not_overlap(global_random_seed):
    """Energy heights squash within-group merges onto the baseline: labels would pile up."""
    X = np.random.default_rng(global_random_seed).normal(size=(14, 2))
    model = ExactHierarchicalClustering(Dasgupta(beta=1.0)).fit(X)
    figure, ax = plt.subplots(figsize=(3, 2))
    plot_dendrogram(model, ax=ax)
    extents = [text.get_window_extent() for text in ax.texts]
    assert extents  # the highest node's label is always written
    for i, first in enumerate(extents):
        for second in extents[i + 1:]:
            assert not first.overlaps(second)
    plt.close(figure)


@pytest.mark.parametrize("level", [pytest.param(0.3, marks=pytest.mark.slow), 0.6,
                                   pytest.param(0.9, marks=pytest.mark.slow)])
def test_highlighted_clades_are_the_supported_ones(ax, level, global_random_seed):
    """pvrect's boxes around pvpick's clades: the largest with support >= level."""
    X = _blobs(global_random_seed, spread=2.0)
    model = ExactHierarchicalClustering().fit(X)
    support = model.clade_support()
    clusters = model.tree_.clusters()
    passing = [set(m.tolist()) for m, p in zip(clusters[:-1], support[:-1]) if p >= level]
    largest = [c for c in passing if not any(c < other for other in passing)]
    picked = model.supported_clades(level)
    assert sorted(map(sorted, largest)) == sorted(sorted(m.tolist()) for m, _ in picked)
    every = model.supported_clades(level, max_only=False)
    assert len(every) == len(passing)
    assert all(p >= level for _, p in every)
    tree = model.tree_.with_heights(X)
    plot_dendrogram(model, tree=tree, ax=ax, highlight=level)
    assert len(ax.patches) == len(picked)
    # Each box spans its clade's leaves (scipy places leaf k at 5 + 10 k) and
    # rises just above the clade's merge.
    Z = tree.to_numpy()
    order = [int(t.get_text()) for t in ax.get_xticklabels()]
    heights = {frozenset(m.tolist()): h for m, h in zip(tree.clusters(), Z[:, 2])}
    boxes = sorted((p.get_x(), p.get_x() + p.get_width(), p.get_height() + p.get_y())
                   for p in ax.patches)
    expected = []
    for members, _ in picked:
        where = [5 + 10 * order.index(i) for i in members]
        assert max(where) - min(where) == 10 * (len(members) - 1)  # contiguous
        expected.append((min(where) - 4, max(where) + 4, heights[frozenset(members.tolist())]))
    for box, want in zip(boxes, sorted(expected)):
        assert box[:2] == pytest.approx(want[:2])
        assert want[2] < box[2] < want[2] + 0.05 * Z[:, 2].max()


@pytest.mark.parametrize("level", [0, 1.5])
def test_highlight_level_is_a_support(ax, level, global_random_seed):
    model = ExactHierarchicalClustering().fit(_blobs(global_random_seed))
    with pytest.raises(ValueError, match="highlight must be a support level"):
        plot_dendrogram(model, ax=ax, highlight=level)
    with pytest.raises(ValueError, match="level must be a support"):
        model.supported_clades(level)
