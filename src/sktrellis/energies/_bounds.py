"""Admissible bounds for exact best-first search over trees (issue 14).

The bounds themselves, with their proofs, are Cython classes in
``sktrellis._engine.search._search_bounds`` (the search kernel calls them without
the GIL); this module picks the one of an energy.
"""
from .._engine.search._search_bounds import CorrelationBound, DasguptaBound, GinkgoBound
from ._correlation import CorrelationClustering
from ._dasgupta import Dasgupta
from ._ginkgo import GinkgoLikelihood


def search_bound(energy, X):
    """The admissible bound object of ``energy`` on data X, or a ValueError.

    Parameters
    ----------
    energy : HierarchicalEnergy
        :class:`~sktrellis.energies.Dasgupta`,
        :class:`~sktrellis.energies.CorrelationClustering` or
        :class:`~sktrellis.energies.GinkgoLikelihood`.
    X : ndarray
        Validated data the energy expects.

    Returns
    -------
    bound : DasguptaBound, CorrelationBound or GinkgoBound

    Examples
    --------
    >>> import numpy as np
    >>> from sktrellis.energies import Dasgupta
    >>> from sktrellis.energies._bounds import search_bound
    >>> W = np.array([[0, 1.0, 0.5], [1.0, 0, 2.0], [0.5, 2.0, 0]])
    >>> bound = search_bound(Dasgupta(affinity="precomputed"), W)
    >>> bound.lower(np.array([0, 1, 2]))  # exact for three points: 2*3.5 + 1.5
    8.5
    """
    if isinstance(energy, Dasgupta):
        return DasguptaBound(energy.similarities(X), energy._beta_value())
    if isinstance(energy, CorrelationClustering):
        return CorrelationBound(energy.weights(X), energy._beta_value())
    if isinstance(energy, GinkgoLikelihood):
        energy._validate_params()
        return GinkgoBound(energy.check_momenta(X), energy.lam, energy.t_cut)
    raise ValueError(
        f"best-first search has admissible bounds for Dasgupta, "
        f"CorrelationClustering and GinkgoLikelihood only, got energy={energy!r}; use "
        "ExactHierarchicalClustering (N <= 25) or SparseTrellisClustering"
    )
