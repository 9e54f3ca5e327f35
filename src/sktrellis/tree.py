"""The public tree result: one binary hierarchy and its exports.

Inside the package a tree is a preorder list of splits (``sktrellis._engine.tree.conversion``);
at the public boundary it is a :class:`Tree`, which holds the scipy linkage
matrix and converts it to what other tools read.
"""
import numpy as np
from scipy.cluster.hierarchy import is_valid_linkage

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
    >>> from sktrellis.tree import Tree
    >>> tree = Tree([[0, 1, 1.0, 2], [2, 3, 2.0, 3]], names=["a", "b", "c"])
    >>> tree.to_newick()
    '(c:2,(a:1,b:1):1);'
    >>> [members.tolist() for members in tree.clusters()]
    [[0, 1], [0, 1, 2]]
    >>> tree.to_numpy().shape
    (2, 4)
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
        >>> from sktrellis.tree import Tree
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

    def to_newick(self):
        """The tree in Newick format, branch lengths from the heights.

        Returns
        -------
        newick : str
            The tree ending in ``;``: leaves by name (or index), each branch
            as long as its parent's height minus its own (leaves at 0).
        """
        return to_newick(self._linkage, self.names)

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
        dendrogram : dict
            What scipy returns.
        """
        from scipy.cluster.hierarchy import dendrogram

        dendrogram_kwargs.setdefault("labels", self.names)
        return dendrogram(self._linkage, ax=axes(ax), **dendrogram_kwargs)

    def __repr__(self):
        return f"Tree(n_leaves={self.n_leaves})"


def _members(merges):
    """Sorted leaves under each merge of a children-first merge array."""
    n_points = len(merges) + 1
    masks = masks_from_merges(merges, n_points)[n_points:]
    points = np.arange(n_points)
    return [points[[(mask >> i) & 1 == 1 for i in range(n_points)]] for mask in masks]
