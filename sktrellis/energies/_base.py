"""Base class of the hierarchical energy models."""
from sklearn.base import BaseEstimator

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
        """Peak memory of the energy's tables and the trellis for n_points, in bytes."""
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
