"""The public tree result: one binary hierarchy and its exports.

Inside the package a tree is a preorder list of splits (``sktrellis._engine.tree.conversion``);
at the public boundary it is a :class:`Tree`, which holds the scipy linkage
matrix and converts it to what other tools read.
"""
import numpy as np
from scipy.cluster.hierarchy import is_valid_linkage
from scipy.spatial.distance import pdist, squareform

from ._engine.tree.conversion import masks_from_merges, merges_from_tree, to_newick
from ._utils import axes

__all__ = ["Tree"]


class Tree:
    """A binary hierarchy over ``n_leaves`` points, with its exports.

    Every tree estimator of sktrellis stores its tree as ``tree_``; build
    one from any scipy linkage matrix (``Tree(Z)``) or scikit-learn
    ``children_`` array (:meth:`from_children`).

    Parameters
    ----------
    linkage : array-like of shape (n_leaves - 1, 4)
        A valid scipy linkage matrix (children first, monotone heights are
        not required).
    names : sequence of str, default=None
        Leaf names for :meth:`to_newick`; None names leaves by index.

    Attributes
    ----------
    n_leaves : int
        Number of points.
    names : list of str or None
        Leaf names, one per point, or None for leaves named by index.

    See Also
    --------
    sktrellis.ExactHierarchicalClustering : Its ``tree_`` is the MAP tree.
    sktrellis.plotting.plot_dendrogram : A dendrogram annotated with posterior support.
    sktrellis.metrics.dendrogram_purity : How well a tree separates known classes.
    scipy.cluster.hierarchy.linkage : The linkage matrix a Tree holds.

    Examples
    --------
    >>> import numpy as np
    >>> from sktrellis import Tree
    >>> tree = Tree([[0, 1, 1.0, 2], [2, 3, 2.0, 3]], names=["a", "b", "c"])
    >>> tree.to_newick()
    '(c:2,(a:1,b:1):1);'
    >>> [members.tolist() for members in tree.clusters()]
    [[0, 1], [0, 1, 2]]
    >>> tree.to_numpy().shape
    (2, 4)
    >>> tree.with_heights([[0.0], [1.0], [5.0]]).to_numpy()[:, 2].tolist()
    [1.0, 4.5]
    """

    def __init__(self, linkage, names=None):
        linkage = np.array(linkage, dtype=np.float64)
        if linkage.ndim != 2 or linkage.shape[1] != 4 or len(linkage) < 1:
            raise ValueError(
                f"a tree is a linkage matrix of shape (n_leaves - 1, 4) with at least "
                f"one row, got shape {linkage.shape}"
            )
        is_valid_linkage(linkage, throw=True, name="linkage")
        self._linkage = linkage
        self.n_leaves = len(linkage) + 1
        if names is not None:
            names = [str(name) for name in names]
            if len(names) != self.n_leaves:
                raise ValueError(
                    f"names must have one entry per leaf ({self.n_leaves}), got {len(names)}"
                )
        self.names = names

    @classmethod
    def from_children(cls, children, names=None):
        """The tree of a scikit-learn ``children_`` array (heights 1, 2, ...).

        Parameters
        ----------
        children : array-like of shape (n_leaves - 1, 2)
            Children first: leaves are 0..n-1 and row k is node n + k.
        names : sequence of str, default=None
            Leaf names for :meth:`to_newick`; None names leaves by index.

        Returns
        -------
        tree : Tree
            The same hierarchy, with row k of the linkage at height k + 1.

        Examples
        --------
        >>> from sktrellis import Tree
        >>> Tree.from_children([[0, 1], [2, 3]]).to_newick()
        '(2:2,(0:1,1:1):1);'
        """
        children = np.asarray(children)
        merges = merges_from_tree(children, len(children) + 1)
        sizes = [len(members) for members in _members(merges)]
        linkage = np.column_stack(
            [np.sort(merges, axis=1), np.arange(1.0, len(merges) + 1), sizes]
        )
        return cls(linkage, names)

    def to_numpy(self):
        """The scipy linkage matrix (a copy).

        Returns
        -------
        linkage : ndarray of shape (n_leaves - 1, 4)
            Row k merges the clusters ``linkage[k, 0]`` and ``linkage[k, 1]``
            into cluster ``n_leaves + k`` at height ``linkage[k, 2]``, with
            ``linkage[k, 3]`` leaves, as :mod:`scipy.cluster.hierarchy` reads it.
        """
        return self._linkage.copy()

    def with_heights(self, X, *, method="average", metric="euclidean"):
        """The same tree with heights in the data's own distance.

        The heights of a fitted tree (``linkage_matrix_``) are cumulative
        energies: they order the merges but are no distance, so noise
        looks as deep as structure. This puts every merge at a distance
        between points instead, the scale a reader of a dendrogram expects
        (and what ``scipy.cluster.hierarchy.cophenet`` and
        ``fcluster(..., criterion="distance")`` assume).

        Parameters
        ----------
        X : array-like of shape (n_leaves, n_features) or (n_leaves, n_leaves)
            The points, or a square matrix of distances with
            ``metric="precomputed"``.
        method : {"average", "complete"}, default="average"
            "average": the mean distance between the points of the two
            children (UPGMA's height, Sokal & Michener 1958); "complete":
            the diameter of the cluster, the largest distance between two of
            its points. The diameter never decreases from a cluster to its
            parent. The mean distance can (the tree was not built by
            average linkage), so each height is raised to the largest
            height below it: the monotone envelope, heights never decrease
            from child to parent, as a dendrogram needs.
        metric : str, default="euclidean"
            Any metric of :func:`scipy.spatial.distance.pdist`, or
            "precomputed".

        Returns
        -------
        tree : Tree
            The same merges and leaf names, heights in the units of the
            metric, monotone (``linkage[k, 2]`` is at least the heights of
            the rows below it).

        Raises
        ------
        ValueError
            If X does not hold one finite row per leaf (a symmetric
            non-negative square matrix with ``metric="precomputed"``),
            ``method`` is unknown, or the distances pass float64's limit.

        Examples
        --------
        >>> from sktrellis import Tree
        >>> tree = Tree([[0, 1, 7.0, 2], [2, 3, 9.0, 3]])
        >>> tree.with_heights([[0.0], [1.0], [5.0]], method="complete").to_numpy()[:, 2]
        array([1., 5.])
        """
        if method not in ("average", "complete"):
            raise ValueError(f"method must be 'average' or 'complete', got {method!r}")
        distances, exponent = _distance_matrix(X, metric, self.n_leaves)
        linkage = self._linkage.copy()
        members = self.clusters()
        points = list(range(self.n_leaves)) + [m.tolist() for m in members]
        heights = np.zeros(2 * self.n_leaves - 1)
        for row, (a, b) in enumerate(linkage[:, :2].astype(np.int64)):
            left, right = np.atleast_1d(points[a]), np.atleast_1d(points[b])
            if method == "average":
                height = distances[np.ix_(left, right)].mean()
            else:
                height = distances[np.ix_(members[row], members[row])].max()
            # The monotone envelope: never below a child's height.
            height = max(height, heights[a], heights[b])
            heights[self.n_leaves + row] = height
        with np.errstate(over="ignore"):
            linkage[:, 2] = np.ldexp(heights[self.n_leaves:], exponent)
        if not np.all(np.isfinite(linkage[:, 2])):
            raise ValueError(
                "the distances between the points of X pass float64's limit of 1.8e308; "
                "rescale X"
            )
        return Tree(linkage, self.names)

    def to_newick(self, support=None, *, fmt="{:.3g}"):
        """The tree in Newick format, branch lengths from the heights.

        Parameters
        ----------
        support : array-like of shape (n_leaves - 1,), default=None
            A value per inner node, aligned with the linkage rows (such as
            an estimator's ``clade_support()``), written as the node's
            label after its closing parenthesis, the place where
            phylogenetics tools read bootstrap or posterior support: ape's
            ``read.tree`` puts it in ``phy$node.label``, treeio/ggtree in the
            ``label`` of inner nodes (``geom_nodelab()``), Bio.Phylo in
            ``clade.confidence``, ETE (``format=0``) in ``node.support``,
            DendroPy (``schema="newick"``) in ``node.label``. None writes no
            inner labels.
        fmt : str, default="{:.3g}"
            Format of the support values.

        Returns
        -------
        newick : str
            The tree ending in ``;``: leaves by name (or index), each branch
            as long as its parent's height minus its own (leaves at 0).

        Raises
        ------
        ValueError
            If ``support`` does not hold one finite value per inner node.

        Examples
        --------
        >>> from sktrellis import Tree
        >>> tree = Tree([[0, 1, 1.0, 2], [2, 3, 2.0, 3]], names=["a", "b", "c"])
        >>> tree.to_newick(support=[0.87, 1.0])
        '(c:2,(a:1,b:1)0.87:1)1;'
        """
        labels = None
        if support is not None:
            support = np.asarray(support, dtype=np.float64)
            if support.shape != (self.n_leaves - 1,) or not np.all(np.isfinite(support)):
                raise ValueError(
                    f"support must hold one finite value per inner node "
                    f"({self.n_leaves - 1},), got shape {support.shape}"
                )
            labels = [fmt.format(value) for value in support]
        return to_newick(self._linkage, self.names, labels)

    def clusters(self):
        """The points of every inner node, aligned with the linkage rows.

        Returns
        -------
        clusters : list of ndarray of int
            ``clusters()[k]`` holds the leaves under row k, in increasing order.
        """
        return _members(self._linkage[:, :2].astype(np.int64))

    def plot(self, ax=None, **dendrogram_kwargs):
        """Draw the tree with :func:`scipy.cluster.hierarchy.dendrogram`.

        Parameters
        ----------
        ax : matplotlib Axes, default=None
            None draws on the current Axes.
        **dendrogram_kwargs
            Passed on (``labels`` defaults to ``names``).

        Returns
        -------
        ax : matplotlib Axes
            The Axes drawn on, as :func:`sktrellis.plotting.plot_dendrogram`
            returns it.

        Examples
        --------
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from sktrellis import Tree
        >>> ax = Tree([[0, 1, 1.0, 2], [2, 3, 2.0, 3]], names=["a", "b", "c"]).plot()
        >>> [label.get_text() for label in ax.get_xticklabels()]
        ['c', 'a', 'b']
        """
        from scipy.cluster.hierarchy import dendrogram

        dendrogram_kwargs.setdefault("labels", self.names)
        ax = axes(ax)
        dendrogram(self._linkage, ax=ax, **dendrogram_kwargs)
        return ax

    def __repr__(self):
        return f"Tree(n_leaves={self.n_leaves})"


# Metrics homogeneous of degree one: d(cX, cY) = c d(X, Y).
_SCALED_METRICS = ("euclidean", "cityblock", "chebyshev", "minkowski")


def _distance_matrix(X, metric, n_points):
    """The square matrix of distances between the points of X (or X itself, precomputed)."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or len(X) != n_points or not np.all(np.isfinite(X)):
        raise ValueError(
            f"X must be a finite 2-D array with one row per leaf (n_samples={n_points}), "
            f"got shape {X.shape}"
        )
    if metric != "precomputed":
        # Scaled by a power of two (exact) so that values near float64's limits
        # do not overflow while squared; the heights scale back at the end.
        exponent = int(np.frexp(np.abs(X).max())[1]) if metric in _SCALED_METRICS else 0
        return squareform(pdist(np.ldexp(X, -exponent), metric=metric)), exponent
    if X.shape != (n_points, n_points) or np.any(X < 0) or not np.allclose(X, X.T):
        raise ValueError(
            "with metric='precomputed' X must be a symmetric non-negative (n_samples, "
            f"n_samples) matrix of distances, got shape {X.shape}"
        )
    return X, 0


def _members(merges):
    """Sorted leaves under each merge of a children-first merge array."""
    n_points = len(merges) + 1
    masks = masks_from_merges(merges, n_points)[n_points:]
    points = np.arange(n_points)
    return [points[[(mask >> i) & 1 == 1 for i in range(n_points)]] for mask in masks]
