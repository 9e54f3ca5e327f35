"""Base classes of the energy models: hierarchical (per split) and flat (per cluster)."""
from sklearn.base import BaseEstimator

from .._trellis.flat_trellis import flat_trellis_bytes
from .._trellis.hierarchical_trellis import trellis_bytes_per_subset


class HierarchicalEnergy(BaseEstimator):
    """Base class of energies over binary trees: a log potential per split.

    A tree's log potential is the sum of ``log psi(A, B)`` over its inner
    nodes, where A and B are the two children. Subclasses validate the input
    X they receive and turn it into per-subset tables from which the kernels
    evaluate any split in O(1) (a
    :class:`~sktrellis._trellis._hierarchical.SplitPotential`).
    Parameters are plain constructor arguments, so an estimator's
    ``energy__<name>`` can be grid-searched.
    """

    #: Bytes per subset taken by the energy's own tables.
    table_bytes_per_subset = 16
    #: Whether the split potential has the separable form (fast kernel path).
    separable = False

    def split_bytes(self, n_points):
        """Peak memory of the energy's tables and the trellis, in bytes.

        Parameters
        ----------
        n_points : int
            Number of points.

        Returns
        -------
        n_bytes : int
        """
        per_subset = self.table_bytes_per_subset + trellis_bytes_per_subset(self.separable)
        return per_subset * 2**n_points

    def split_potential(self, X):
        """Validate X and build the per-subset tables of every split potential.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Already checked to be finite 2-d float64 by the estimator.

        Returns
        -------
        potential : SplitPotential
        """
        raise NotImplementedError

    def merge_model(self, X):
        """Validate X and build the incremental statistics of agglomerative search.

        Used by the greedy and beam-search baselines and by
        ``SparseTrellisClustering``, which meet clusters one at a time
        instead of tabulating all 2**N subsets.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Already checked to be finite 2-d float64 by the estimator.

        Returns
        -------
        model : MergeModel
            See :mod:`sktrellis.energies._merge`.
        """
        raise NotImplementedError(
            f"{type(self).__name__} has no merge_model(X), so it only supports the "
            "exact trellis; the agglomerative and sparse estimators need one"
        )


class FlatEnergy(BaseEstimator):
    """Base class of energies over flat partitions: a log potential per cluster.

    A partition's log potential is the sum of ``log E(C)`` over its clusters
    C. Subclasses validate the input X they receive and tabulate log E of
    all 2**N subsets at once (vectorised), which the flat trellis reads in
    O(1). Parameters are plain constructor arguments, so an estimator's
    ``energy__<name>`` can be grid-searched.
    """

    #: Bytes per subset taken by the energy's own table and its temporaries.
    table_bytes_per_subset = 16

    def cluster_bytes(self, n_points):
        """Peak memory of the energy's table and the flat trellis for n_points, in bytes.

        Parameters
        ----------
        n_points : int

        Returns
        -------
        n_bytes : int
        """
        return self.table_bytes_per_subset * 2**n_points + flat_trellis_bytes(n_points)

    def cluster_potential(self, X):
        """Validate X and tabulate the log potential of every cluster.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Already checked to be finite 2-d float64 by the estimator.

        Returns
        -------
        log_potential : ndarray of shape (2**n_samples,)
            ``log E(C)`` of the cluster with mask C (bit i <=> row i of X);
            finite, or -inf for a forbidden cluster. Entry 0 (the empty set)
            is unused.
        """
        raise NotImplementedError
