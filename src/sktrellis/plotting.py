"""Plots of exact posteriors: annotated MAP dendrograms and co-clustering heatmaps.

matplotlib is imported only when a plot is drawn, so the rest of the package
works without it (``pip install "sktrellis[plot]"`` installs it).
"""
from numbers import Integral

import numpy as np
from scipy.cluster.hierarchy import dendrogram, leaves_list, linkage
from scipy.spatial.distance import squareform
from sklearn.utils.validation import check_is_fitted

from ._engine.tree.conversion import masks_from_merges, merges_from_tree
from ._utils import axes, final_step, pyplot
from ._tree import Tree

__all__ = ["plot_dendrogram", "plot_pairwise_probability"]


def plot_dendrogram(estimator, *, tree=None, ax=None, annotate=True, fmt="{:.2f}",
                    highlight=None, **dendrogram_kwargs):
    """Dendrogram of a tree, each cluster annotated with its posterior support.

    Draws ``estimator.linkage_matrix_`` (the MAP tree), or any other tree
    over the fitted points, with :func:`scipy.cluster.hierarchy.dendrogram`
    and writes above every inner node (except the root, which is certain)
    the posterior probability ``P(cluster | X)`` that its leaves form a
    cluster of the tree, from ``estimator.cluster_probability``: exact
    clade support, where pvclust would bootstrap. A low number flags a merge
    that the tree makes but the posterior doubts.

    The heights of ``linkage_matrix_`` are cumulative energies, which order
    the merges but measure no distance; to draw the tree at the data's own
    distances pass ``tree=model.tree_.with_heights(X)`` (the mean distance
    between the two children's points, made monotone; see
    :meth:`sktrellis.Tree.with_heights`).

    Parameters
    ----------
    estimator : fitted estimator or Pipeline
        With ``linkage_matrix_``, and ``cluster_probability`` when
        ``annotate=True`` or ``highlight`` is given (e.g.
        :class:`~sktrellis.ExactHierarchicalClustering`).
    tree : Tree or ndarray of shape (n_samples - 1, 4), default=None
        A tree over the fitted points to draw instead of the MAP tree (the
        MAP tree at distance heights, a greedy tree,
        ``max_clade_credibility_tree()[0]``, a scipy linkage matrix, ...).
    ax : matplotlib Axes, default=None
        Where to draw; None uses the current Axes.
    annotate : bool, default=True
        Write the cluster marginals at the nodes. A label that would overlap
        a label already written (nodes close in height and position, at the
        figure's size when drawn) is left out, higher nodes first, so that
        the numbers shown can be read.
    fmt : str, default="{:.2f}"
        Format of the probabilities.
    highlight : float in (0, 1], default=None
        Draw a box around each largest clade whose support is at least
        ``highlight`` (pvclust's ``pvrect``; the clades are those of
        ``estimator.supported_clades(highlight, tree=tree)``, pvclust's
        ``pvpick``). None draws no boxes.
    **dendrogram_kwargs
        Passed to :func:`scipy.cluster.hierarchy.dendrogram` (``labels``,
        ``orientation``, ``color_threshold``, ``leaf_rotation``, ...);
        ``truncate_mode`` is not supported because every node is annotated.
        Without ``color_threshold`` the links are coloured by the cut of
        the drawn tree into the estimator's ``n_clusters`` clusters, when
        it has one (scipy's default colours at 0.7 times the top height).

    Returns
    -------
    ax : matplotlib Axes
        The Axes drawn on, holding the dendrogram, one text annotation
        per inner node but the root (fewer where labels would overlap), and
        one rectangle patch per highlighted clade.

    Raises
    ------
    ImportError
        If matplotlib is not installed.
    TypeError
        If the estimator has no fitted tree, or no ``cluster_probability``
        while ``annotate=True`` or ``highlight`` is given.
    ValueError
        If ``tree`` is not a linkage matrix over the fitted points, or
        ``highlight`` is not in (0, 1].

    See Also
    --------
    sktrellis.Tree.plot : The same dendrogram without the annotations.
    sktrellis.Tree.with_heights : A tree's heights in the data's distance.
    plot_pairwise_probability : The posterior of flat clusterings as a heatmap.
    sktrellis.ExactHierarchicalClustering.cluster_probability : The number
        written at each node.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from sktrellis import ExactHierarchicalClustering
    >>> from sktrellis.plotting import plot_dendrogram
    >>> X = np.array([[0.0], [0.3], [4.0], [4.4], [4.1]])
    >>> model = ExactHierarchicalClustering().fit(X)
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> ax = plot_dendrogram(model, tree=model.tree_.with_heights(X),
    ...                      labels=["a", "b", "c", "d", "e"], ax=ax, highlight=0.5)
    >>> len(ax.texts)  # the four inner nodes but the root
    3
    >>> len(ax.patches)  # the boxes around {a, b} and {c, d, e}
    2
    """
    for key in ("truncate_mode", "no_plot", "ax"):
        if key in dendrogram_kwargs:
            raise ValueError(f"plot_dendrogram does not support the dendrogram argument {key}=")
    if highlight is not None and not 0 < highlight <= 1:
        raise ValueError(f"highlight must be a support level in (0, 1], got {highlight!r}")
    final = final_step(estimator)
    check_is_fitted(final)
    if not hasattr(final, "linkage_matrix_"):
        raise TypeError(
            f"plot_dendrogram needs a fitted tree in linkage_matrix_; {type(final).__name__} "
            "has none"
        )
    if (annotate or highlight is not None) and not hasattr(final, "cluster_probability"):
        raise TypeError(
            f"{type(final).__name__} has no cluster_probability to annotate the nodes "
            "with; pass annotate=False (and no highlight)"
        )
    if isinstance(tree, Tree):
        tree = tree.to_numpy()
    Z = np.asarray(final.linkage_matrix_ if tree is None else tree, dtype=np.float64)
    if Z.shape != final.linkage_matrix_.shape:
        raise ValueError(
            f"tree must be a linkage matrix over the fitted points, shape "
            f"{final.linkage_matrix_.shape}; got {Z.shape}"
        )
    n_points = len(Z) + 1
    n_clusters = getattr(final, "n_clusters", None)
    if "color_threshold" not in dendrogram_kwargs and isinstance(n_clusters, Integral) \
            and 2 <= n_clusters <= n_points:
        dendrogram_kwargs["color_threshold"] = _cut_height(Z, n_clusters)
    ax = axes(ax)
    info = dendrogram(Z, ax=ax, **dendrogram_kwargs)
    # scipy draws leaf k of its leaf order at 5 + 10 k and each merge midway
    # between its children, at its height.
    position = np.zeros(2 * n_points - 1)
    position[info["leaves"]] = 5.0 + 10.0 * np.arange(n_points)
    merges = merges_from_tree(Z, n_points)
    for row, (a, b) in enumerate(merges):
        position[n_points + row] = (position[a] + position[b]) / 2
    orientation = dendrogram_kwargs.get("orientation", "top")
    if highlight is not None:
        _draw_boxes(ax, final.supported_clades(highlight, tree=Z), position, Z, orientation)
    if not annotate:
        return ax
    masks = masks_from_merges(merges, n_points)
    bits = np.arange(n_points)
    style = {
        "top": ((0, 2), "center", "bottom"),
        "bottom": ((0, -2), "center", "top"),
        "left": ((-2, 0), "right", "center"),
        "right": ((2, 0), "left", "center"),
    }[orientation]
    written = []
    # Highest nodes first: where labels collide, the larger clade keeps its own.
    for row in np.argsort(-Z[:-1, 2], kind="stable"):
        members = bits[(masks[n_points + row] >> bits) & 1 == 1]
        text = fmt.format(final.cluster_probability(members))
        xy = (position[n_points + row], Z[row, 2])
        if orientation in ("left", "right"):
            xy = xy[::-1]
        label = ax.annotate(
            text, xy, xytext=style[0], textcoords="offset points",
            ha=style[1], va=style[2], fontsize="small",
        )
        extent = _extent(label)
        if extent is not None and any(extent.overlaps(other) for other in written):
            label.remove()
        elif extent is not None:
            written.append(extent)
    return ax


def _cut_height(Z, n_clusters):
    """A height between the merges that cutting the tree into n_clusters keeps and undoes."""
    heights = np.sort(Z[:, 2])
    if n_clusters == len(Z) + 1:
        return heights[0] / 2
    return (heights[-n_clusters] + heights[-n_clusters + 1]) / 2


def _extent(text):
    """The text's box on the canvas, or None for a backend that cannot tell before drawing."""
    try:
        return text.get_window_extent()
    except (AttributeError, RuntimeError):
        return None


def _draw_boxes(ax, clades, position, Z, orientation):
    """pvrect's boxes: each clade's leaves, from the baseline to just above its merge."""
    from matplotlib.patches import Rectangle

    top = Z[:, 2].max()
    margin = 0.02 * top if top > 0 else 0.1
    leaf_position = position[: len(Z) + 1]
    heights = {frozenset(members.tolist()): height
               for members, height in zip(Tree(Z).clusters(), Z[:, 2])}
    for members, _ in clades:
        left, right = leaf_position[members].min() - 4, leaf_position[members].max() + 4
        height = heights[frozenset(members.tolist())] + margin
        corner, width, extent = (left, -margin), right - left, height + margin
        if orientation in ("left", "right"):
            corner, width, extent = corner[::-1], extent, width
        ax.add_patch(Rectangle(corner, width, extent, fill=False, edgecolor="red",
                               linewidth=1.2))


def plot_pairwise_probability(probabilities, *, ax=None, order="dendrogram", labels=None,
                              cmap="viridis", colorbar=True):
    """Heatmap of pairwise co-clustering probabilities P(i ~ j | X).

    Entry (i, j) is the posterior probability that points i and j fall in
    the same cluster, as an exact flat clustering computes it
    (``pairwise_probability_``). In dendrogram order, well-supported
    clusters show as bright blocks on the diagonal and points the posterior
    is unsure about as off-diagonal stripes.

    Parameters
    ----------
    probabilities : array-like of shape (n_samples, n_samples) or estimator
        A matrix, or a fitted estimator (or Pipeline) with
        ``pairwise_probability_``, e.g. an exact flat clustering.
    ax : matplotlib Axes, default=None
        Where to draw; None uses the current Axes.
    order : "dendrogram", None or array-like of shape (n_samples,), default="dendrogram"
        Order of rows and columns. "dendrogram": the leaf order of an
        average-linkage tree on ``1 - P``, which puts points that are likely
        clustered together next to each other so that clusters show as
        blocks (needs a symmetric matrix with entries in [0, 1]); None: as
        given; or a permutation of ``range(n_samples)``.
    labels : list of str, default=None
        Names of the points for the tick labels, in the original order.
        None shows the point indices when there are at most 40 points.
    cmap : str or Colormap, default="viridis"
        Colour map.
    colorbar : bool, default=True
        Add a colour bar.

    Returns
    -------
    ax : matplotlib Axes
        The Axes drawn on, holding the heatmap (rows and columns permuted
        by ``order``, tick labels in that order).

    Raises
    ------
    ImportError
        If matplotlib is not installed.
    TypeError
        If an estimator is passed that has no ``pairwise_probability_``.
    ValueError
        If the matrix is not square and finite, ``order`` is not a
        permutation of its rows (or ``"dendrogram"`` for a matrix that is
        not symmetric with entries in [0, 1]), or ``labels`` does not name
        every point.

    See Also
    --------
    sktrellis.ExactFlatClustering : Its ``pairwise_probability_`` is exact.
    sktrellis.baselines.TransitivePropagation : An approximate
        ``pairwise_probability_`` by belief propagation.
    plot_dendrogram : The posterior over trees, as an annotated dendrogram.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from sktrellis.plotting import plot_pairwise_probability
    >>> P = np.array([[1.0, 0.1, 0.9], [0.1, 1.0, 0.2], [0.9, 0.2, 1.0]])
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> ax = plot_pairwise_probability(P, ax=ax)
    >>> [tick.get_text() for tick in ax.get_xticklabels()]  # 0 and 2 side by side
    ['1', '0', '2']
    """
    if hasattr(probabilities, "fit"):
        final = final_step(probabilities)
        check_is_fitted(final)
        if not hasattr(final, "pairwise_probability_"):
            raise TypeError(
                f"{type(final).__name__} has no pairwise_probability_; pass a fitted flat "
                "clusterer or an (n_samples, n_samples) matrix"
            )
        probabilities = final.pairwise_probability_
    matrix = np.asarray(probabilities, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] == 0:
        raise ValueError(
            f"probabilities must be a non-empty square matrix, got shape {matrix.shape}"
        )
    if not np.all(np.isfinite(matrix)):
        raise ValueError("probabilities contain NaN or infinity")
    n_points = matrix.shape[0]
    unit = bool(matrix.min() >= 0 and matrix.max() <= 1)
    permutation = _order(matrix, order, unit)
    if labels is not None and len(labels) != n_points:
        raise ValueError(f"labels has {len(labels)} names for n_samples={n_points} points")

    ax = axes(ax)
    limits = {"vmin": 0.0, "vmax": 1.0} if unit else {}
    image = ax.imshow(matrix[np.ix_(permutation, permutation)], cmap=cmap,
                      interpolation="nearest", **limits)
    names = labels if labels is not None else (range(n_points) if n_points <= 40 else None)
    if names is not None:
        names = [str(name) for name in names]
        ticks = np.arange(n_points)
        ax.set_xticks(ticks, [names[i] for i in permutation], rotation=90)
        ax.set_yticks(ticks, [names[i] for i in permutation])
    if colorbar:
        ax.figure.colorbar(image, ax=ax, label="P(same cluster)" if unit else None)
    return ax


def _order(matrix, order, unit):
    n_points = matrix.shape[0]
    if order is None:
        return np.arange(n_points)
    if isinstance(order, str):
        if order != "dendrogram":
            raise ValueError(f"order must be 'dendrogram', None or a permutation, got {order!r}")
        if not (unit and np.allclose(matrix, matrix.T)):
            raise ValueError(
                "order='dendrogram' needs a symmetric matrix of probabilities in [0, 1]; "
                "pass order=None to plot another matrix as given"
            )
        if n_points < 3:
            return np.arange(n_points)
        distances = 1.0 - (matrix + matrix.T) / 2
        np.fill_diagonal(distances, 0.0)
        return leaves_list(linkage(squareform(distances, checks=False), "average"))
    permutation = np.asarray(order)
    if permutation.shape != (n_points,) or not np.array_equal(
        np.sort(permutation), np.arange(n_points)
    ):
        raise ValueError(f"order must be a permutation of range({n_points}), got {order!r}")
    return permutation
