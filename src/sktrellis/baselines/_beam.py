"""Beam search over partial hierarchical clusterings, under any hierarchical energy."""
from numbers import Integral

from sklearn.base import BaseEstimator, ClusterMixin, _fit_context
from sklearn.utils._param_validation import HasMethods, Interval

from .._estimator import EnergyEstimatorMixin, check_built_for, clears_fit_state_on_failure
from ..energies import Dasgupta
from .._engine.agglomerative.search import beam_search


class BeamSearchHierarchicalClustering(EnergyEstimatorMixin, ClusterMixin, BaseEstimator):
    """Bottom-up beam search: keep the best ``beam_width`` partial clusterings.

    The variant of Greenberg et al. (2021): starting from the points, each of
    the kept forests (partial clusterings) proposes its ``beam_width`` best
    merges; of all proposals, the ``beam_width`` with the highest total merge
    score that give *distinct* forests survive (two merge orders reaching the
    same clusters count once, so the beam is not filled with copies). After
    N - 1 merges the surviving tree of highest log potential is returned.
    Merge scores are those of :class:`GreedyHierarchicalClustering`, which
    this search equals for ``beam_width=1``; a width at least the number of
    partial clusterings makes it exhaustive.

    Each forest keeps, per cluster, its best partners among the others and
    the model's cross statistics, shared between forests, so a step costs
    O(beam_width * N) score evaluations.

    Parameters
    ----------
    energy : HierarchicalEnergy, default=None
        Energy model scoring each split (see :mod:`sktrellis.energies`);
        None means ``Dasgupta()``.
    beam_width : int, default=10
        Number of partial clusterings kept, and of merges each proposes.
    n_clusters : int, default=2
        Number of flat clusters of ``labels_``, cut from the tree.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        The tree cut into ``n_clusters`` clusters.
    linkage_matrix_ : ndarray of shape (n_samples - 1, 4)
        The best surviving tree in scipy format, heights as in
        :class:`~sktrellis.ExactHierarchicalClustering`.
    children_ : ndarray of shape (n_samples - 1, 2)
        The merges of ``linkage_matrix_``, as in ``AgglomerativeClustering``.
    distances_ : ndarray of shape (n_samples - 1,)
        The heights of ``linkage_matrix_``.
    n_leaves_ : int
        Number of points.
    map_log_potential_ : float
        Log potential of the returned tree.
    n_features_in_ : int
        Number of features (columns) of X.

    See Also
    --------
    GreedyHierarchicalClustering : The beam of width one.
    sktrellis.SparseTrellisClustering : The best tree and log Z over all
        trees the beam's trees span.

    References
    ----------
    C. S. Greenberg, S. Macaluso, N. Monath, J.-A. Lee, P. Flaherty, K. Cranmer,
    A. McGregor, A. McCallum. Data structures & algorithms for exact inference
    in hierarchical clustering. AISTATS 2021.

    Examples
    --------
    >>> from sktrellis.baselines import BeamSearchHierarchicalClustering
    >>> from sktrellis.datasets import make_jets
    >>> from sktrellis.energies import GinkgoLikelihood
    >>> jet = make_jets(n_leaves=7, random_state=0)[0]
    >>> model = BeamSearchHierarchicalClustering(GinkgoLikelihood(), beam_width=21)
    >>> model = model.fit(jet.momenta)
    >>> bool(model.map_log_potential_ >= jet.log_likelihood)
    True
    """

    _parameter_constraints = {
        "energy": [HasMethods(["merge_model"]), None],
        "beam_width": [Interval(Integral, 1, None, closed="left")],
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(self, energy=None, *, beam_width=10, n_clusters=2):
        self.energy = energy
        self.beam_width = beam_width
        self.n_clusters = n_clusters

    _default_energy = Dasgupta

    @clears_fit_state_on_failure
    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None):
        """Run the beam search on X and keep its best tree.

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
        energy = self._energy()
        model = check_built_for(energy.merge_model(X), len(X), energy, "merge_model")
        best = beam_search(model, self.beam_width)[0]
        self._set_tree_from_merges(best.merges, best.log_potentials, energy)
        return self
