"""Greedy agglomerative clustering under any hierarchical energy."""
from numbers import Integral

from sklearn.base import BaseEstimator, ClusterMixin, _fit_context
from sklearn.utils._param_validation import HasMethods, Interval

from .._estimator import EnergyEstimatorMixin, check_built_for, clears_fit_state_on_failure
from ..energies import Dasgupta
from .._engine.agglomerative.builders import greedy_tree


class GreedyHierarchicalClustering(EnergyEstimatorMixin, ClusterMixin, BaseEstimator):
    """Bottom-up greedy clustering: always merge the best-scoring pair.

    Starts from the points and merges, N - 1 times, the pair of current
    clusters the energy scores highest (its *merge score*, see below),
    keeping each cluster's best partner and the cross statistics of the
    current clusters up to date, so a merge costs O(N) score evaluations
    and N = 2,000 points take about a second with ``Dasgupta``. The tree is
    a baseline for :class:`~sktrellis.ExactHierarchicalClustering` (small
    N) and a seed of :class:`~sktrellis.SparseTrellisClustering`.

    The merge score is the log potential of the split the merge creates,
    as in the greedy baseline of Greenberg et al. (2021), for
    ``GinkgoLikelihood`` and ``SplitEnergy``; for hierarchical correlation
    clustering that log potential plus a term that telescopes over any tree
    (``-beta |negative weight inside the new cluster|``: the same posterior,
    but costs are charged when they become unavoidable); for ``Dasgupta``
    average linkage, ``beta N W(A, B) / (|A| |B|)``, because a bottom-up
    search on Dasgupta's cost would join the least similar points first.

    Parameters
    ----------
    energy : HierarchicalEnergy, default=None
        Energy model scoring each split (see :mod:`sktrellis.energies`);
        None means ``Dasgupta()``.
    n_clusters : int, default=2
        Number of flat clusters of ``labels_``, cut from the tree.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        The tree cut into ``n_clusters`` clusters.
    linkage_matrix_ : ndarray of shape (n_samples - 1, 4)
        The tree in scipy format, heights as in
        :class:`~sktrellis.ExactHierarchicalClustering` (the total energy
        ``-log psi`` of each subtree, strictly increasing).
    children_ : ndarray of shape (n_samples - 1, 2)
        The merges of ``linkage_matrix_``, as in ``AgglomerativeClustering``.
    distances_ : ndarray of shape (n_samples - 1,)
        The heights of ``linkage_matrix_``.
    n_leaves_ : int
        Number of points.
    map_log_potential_ : float
        Log potential of the tree (the sum of log psi over its splits).
    n_features_in_ : int
        Number of features (columns) of X.

    See Also
    --------
    BeamSearchHierarchicalClustering : Keeps several partial trees.
    sktrellis.ExactHierarchicalClustering : The exact MAP tree, N <= 25 or so.

    References
    ----------
    C. S. Greenberg, S. Macaluso, N. Monath, J.-A. Lee, P. Flaherty, K. Cranmer,
    A. McGregor, A. McCallum. Data structures & algorithms for exact inference
    in hierarchical clustering. AISTATS 2021.
    B. Moseley, J. Wang. Approximation bounds for hierarchical clustering:
    average linkage, bisecting k-means, and local search. NeurIPS 2017.

    Examples
    --------
    >>> import numpy as np
    >>> from sktrellis.baselines import GreedyHierarchicalClustering
    >>> X = np.array([[0.0, 0.0], [0.1, 0.0], [4.0, 4.0], [4.1, 4.2], [4.0, 4.3]])
    >>> model = GreedyHierarchicalClustering(n_clusters=2).fit(X)
    >>> model.labels_.tolist()
    [0, 0, 1, 1, 1]
    >>> model.linkage_matrix_.shape
    (4, 4)
    """

    _parameter_constraints = {
        "energy": [HasMethods(["merge_model"]), None],
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(self, energy=None, *, n_clusters=2):
        self.energy = energy
        self.n_clusters = n_clusters

    _default_energy = Dasgupta

    @clears_fit_state_on_failure
    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None):
        """Build the greedy tree of X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features, or what the energy expects (an (n, n) matrix for
            ``affinity="precomputed"``, (n, 4) four-momenta for Ginkgo).
        y : Ignored
            Not used, present for API consistency.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        X = self._validate_training_data(X)
        energy = self._uncalibrated_energy()
        tree = greedy_tree(check_built_for(energy.merge_model(X), len(X), energy, "merge_model"))
        self._set_tree_from_merges(tree.merges, tree.log_potentials, energy)
        return self
