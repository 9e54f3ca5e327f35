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
        """log P(the points ``members`` form a cluster of the tree); -inf if never."""

    def cluster_log_marginals(self) -> np.ndarray:
        """log P(C is a cluster of the tree) of every cluster id C."""

    def cluster_sums(self, values: np.ndarray) -> np.ndarray:
        """The sum of per-point ``values`` over the points of every cluster id."""

    def split_blocks(self) -> Iterator[tuple]:
        """Blocks ``(parents, lefts, rights, log_probability)`` of cluster ids.

        Together they cover every split (C; A, B) of non-zero probability
        once, with log P(C is a node of the tree split into A and B).
        """

    def most_probable_clusters(self, n_top: int, min_size: int) -> tuple:
        """The ``n_top`` most probable clusters of at least ``min_size`` points.

        Returns (list of member arrays, array of log marginals), most
        probable first.
        """

    def sample_linkages(self, n_samples: int, random_state) -> list:
        """``n_samples`` trees drawn exactly from the posterior, as linkage matrices."""
