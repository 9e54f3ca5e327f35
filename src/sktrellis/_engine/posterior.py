"""The posterior interface: what a fitted posterior over trees offers its readers.

Estimators, metrics and plots read a fitted trellis (the full
``HierarchicalTrellis`` or a ``SparseTrellis``) only through this protocol,
reached with the estimator's public ``posterior_`` attribute, never through
private attributes. Cluster ids are subset masks for the full trellis and
vertex indices for the sparse one; a reader never needs to know which.
"""
from typing import Iterator, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class TreePosterior(Protocol):
    """An exact posterior over the binary trees of ``n_points`` points.

    Over all (2N-3)!! trees for the full trellis, over the trees a sparse
    trellis spans for the sparse one; every probability below is exact over
    that set.

    Attributes
    ----------
    n_points : int
        Number of points N.
    log_partition : float
        ln Z, the log of the summed potential of every tree.
    map_log_potential : float
        ln phi of the most probable tree.

    See Also
    --------
    sktrellis.ExactHierarchicalClustering : Its ``posterior_`` is over all trees.
    sktrellis.SparseTrellisClustering : Its ``posterior_`` is over a sparse trellis.
    sktrellis.metrics.expected_dendrogram_purity : A reader of ``split_blocks``.
    sktrellis.plotting.plot_dendrogram : A reader of the cluster marginals.

    Examples
    --------
    >>> import numpy as np
    >>> from sktrellis import ExactHierarchicalClustering, TreePosterior
    >>> from sktrellis.energies import Dasgupta
    >>> X = np.array([[0.0], [0.2], [3.0], [3.1]])
    >>> posterior = ExactHierarchicalClustering(Dasgupta(beta=1.0)).fit(X).posterior_
    >>> isinstance(posterior, TreePosterior)
    True
    >>> posterior.n_points
    4
    """

    n_points: int
    log_partition: float
    map_log_potential: float

    def cluster_log_marginal(self, members: np.ndarray) -> float:
        """Log posterior probability that the points ``members`` form a cluster.

        Parameters
        ----------
        members : array-like of int
            Indices of the points of the cluster, each once.

        Returns
        -------
        log_marginal : float
            The log of P(the points ``members`` form a cluster of the tree):
            0 for a single point or all of them (in every tree), -inf for a
            cluster no tree of the posterior has.
        """

    def subtree_log_probability(self, members: np.ndarray, merges: np.ndarray) -> float:
        """Log posterior probability of a sub-hierarchy: a cluster and its subtree.

        The marginal of Greenberg et al. (2021, section 2.4): the summed
        probability of the trees in which the points ``members`` form a
        cluster whose subtree is the tree of ``merges``.

        Parameters
        ----------
        members : ndarray of int
            Indices of the points of the cluster, each once.
        merges : ndarray of shape (len(members) - 1, 2)
            A validated children-first merge array over ``len(members)``
            leaves; leaf i is point ``members[i]``.

        Returns
        -------
        log_probability : float
            The log of P(members is a cluster of the tree, split as
            ``merges`` below it): 0 for a single point, the log probability
            of the whole tree for all points, -inf for a sub-hierarchy of
            zero probability.
        """

    def cluster_log_marginals(self) -> np.ndarray:
        """Log posterior probability of every cluster id being a cluster of the tree.

        Returns
        -------
        log_marginals : ndarray of shape (n_clusters,)
            ``log_marginals[c]`` is log P(c is a cluster of the tree), for
            each cluster id c: a subset mask (n_clusters = 2**n_points) for
            the full trellis, a vertex for a sparse one. Do not write to it:
            it may be cached.
        """

    def cluster_sums(self, values: np.ndarray) -> np.ndarray:
        """Sum of per-point ``values`` over the points of every cluster id.

        Parameters
        ----------
        values : ndarray of shape (n_points,) or (n_points, d)
            One value (or one row of ``d`` values) per point.

        Returns
        -------
        sums : ndarray of shape (n_clusters,) or (n_clusters, d)
            ``sums[c]`` is the sum of ``values[i]`` over the points i of
            cluster id c, aligned with :meth:`cluster_log_marginals`.
        """

    def split_blocks(self) -> Iterator[tuple]:
        """Iterate over every split of non-zero probability, in blocks.

        Together the blocks cover every split (C; A, B) of non-zero
        probability once (splits of probability zero may appear too, with
        log probability -inf).

        Yields
        ------
        parents, lefts, rights : ndarray of shape (n_splits,)
            Cluster ids of the split clusters C and of their children A, B.
        log_probability : ndarray of shape (n_splits,)
            The log of P(C is a node of the tree, split into A and B).
        """

    def most_probable_clusters(self, n_top: int, min_size: int) -> tuple:
        """The ``n_top`` most probable clusters of at least ``min_size`` points.

        Parameters
        ----------
        n_top : int
            Number of clusters to return, at most (fewer if fewer exist).
        min_size : int
            Smallest number of points of a returned cluster.

        Returns
        -------
        members : list of ndarray of int
            The points of each cluster, in increasing order, most probable
            cluster first; the root (all points, in every tree) is left out
            and ties go to smaller clusters first.
        log_marginals : ndarray of shape (len(members),)
            The log of P(cluster of the tree) of each.
        """

    def sample_linkages(self, n_samples: int, random_state) -> list:
        """Draw ``n_samples`` trees exactly from the posterior.

        Parameters
        ----------
        n_samples : int
            Number of trees to draw, independently.
        random_state : numpy.random.RandomState or numpy.random.Generator
            Source of the uniform draws (its ``random`` method).

        Returns
        -------
        linkages : list of ndarray of shape (n_points - 1, 4)
            The scipy linkage matrix of each tree drawn.
        """
