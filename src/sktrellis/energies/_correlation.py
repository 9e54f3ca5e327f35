"""Correlation clustering: signed pairwise weights, flat and hierarchical."""
from numbers import Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from .._engine.potential._split_potential import SplitPotential
from .._engine.search._correlation_bound import CorrelationBound
from .._engine.tables import subset_pair_sums
from .._validation import check_no_overflow
from ._affinity import similarity_matrix
from ._base import (
    FlatEnergy, HierarchicalEnergy, TemperatureMixin, cluster_indicator_blocks,
)
from ._merge import PairwiseMergeModel
from ._tree_prior import (
    TREE_PRIORS,
    add_prior_cluster_term,
    prior_search_bound,
    split_log_prior,
)


class CorrelationClustering(TemperatureMixin, HierarchicalEnergy, FlatEnergy):
    """Correlation clustering energy over signed pairwise weights.

    Hierarchical (HCC, Greenberg et al. 2021 section 4.3): a split pays for
    the positive weight it cuts and for the negative weight it keeps inside
    its children,
    ``log psi(A, B) = -beta * (sum of w_ij > 0 across A, B
    + sum of |w_ij| for w_ij < 0 inside A and inside B)``.

    Flat (Bansal et al. 2004; Greenberg et al. 2018): a cluster's log potential
    is ``beta * sum of w_ij inside it``.

    Parameters
    ----------
    affinity : {"exponential", "rbf", "precomputed"}, default="exponential"
        From features, the similarity ``exp(-gamma * ||x_i - x_j||)`` (or the
        RBF kernel) minus its mean over all pairs, so about half the pairs
        attract and half repel, as in the gene-expression experiment of the
        flat trellis paper; with one group far from the others more do, and
        groups near each other attract (iris' versicolor and virginica:
        user guide, "Reading a posterior", "Few features over partitions").
        With "precomputed", X is an (n, n) symmetric matrix of signed
        weights used as given.
    gamma : float, default=None
        Kernel coefficient; None uses the inverse median pairwise distance
        (squared for "rbf").
    beta : float or "auto", default="auto"
        Inverse temperature: larger values concentrate the posterior on
        low-loss trees and partitions. ``"auto"`` lets the estimator's ``fit`` calibrate it
        (stored as its ``beta_``): the posterior's expected excess loss over
        the MAP matches that of the MAP structures of bootstrap resamples of
        the feature columns (loss-likelihood bootstrap; Lyddon, Holmes &
        Walker 2019; user guide "Reading a posterior"); the exact and the
        sparse estimators calibrate, and record how in ``calibration_``.
        The exact estimators then cap it by a reference null: beta is at
        most the largest value at which the posterior over X with each
        column permuted across the rows (structureless data with the same
        columns) gives no cluster of 3..N-1 points, or no three points
        together, more than 0.3. ``"auto"`` means 1, with a warning, where
        there is nothing to calibrate against: with
        ``affinity="precomputed"`` or fewer than 10 distinct feature
        columns (copies of a column count once; over all trees and all
        partitions, ``ExactHierarchicalClustering`` and
        ``ExactFlatClustering``, these are tempered instead by "test, then
        temper", with a warning: "Reading a posterior", "Few features");
        and without a warning
        below three points, in the search estimators (greedy, beam,
        best-first: no posterior to calibrate), and for the energy used on
        its own.
    tree_prior : {"yule", "uniform"}, default="yule"
        Prior over tree shapes in the posterior over trees. ``"yule"``: a
        cluster of n points splits into k and n - k points with k uniform
        on 1..n-1 (Harding 1971), a factor ``1 / (|S| - 1)`` in the
        potential of every split of a cluster S; ``"uniform"``: every
        labelled tree equally likely, the potential above alone. The
        uniform measure puts more than half of its mass on trees whose
        root splits one point off, so that on structureless data the
        cluster of all points but the most distant one gets high support
        (user guide, "Reading a posterior").

    See Also
    --------
    Dasgupta : Non-negative similarities, hierarchical only.
    sktrellis.ExactFlatClustering : The exact posterior over partitions.
    sktrellis.baselines.PerturbAndMAPClustering : Approximate pairwise marginals.

    References
    ----------
    N. Bansal, A. Blum, S. Chawla. Correlation clustering. Machine Learning 2004.
    C. S. Greenberg, S. Macaluso, N. Monath, J.-A. Lee, P. Flaherty, K. Cranmer,
    A. McGregor, A. McCallum. Data structures & algorithms for exact inference
    in hierarchical clustering. AISTATS 2021.
    C. S. Greenberg, N. Monath, A. Kobren, P. Flaherty, A. McGregor,
    A. McCallum. Compact representation of uncertainty in clustering.
    NeurIPS 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from sktrellis import ExactHierarchicalClustering
    >>> from sktrellis.energies import CorrelationClustering
    >>> W = np.array([[0, 1, -1, -1], [1, 0, -1, -1],
    ...               [-1, -1, 0, 1], [-1, -1, 1, 0]], dtype=float)
    >>> model = ExactHierarchicalClustering(
    ...     CorrelationClustering(affinity="precomputed")).fit(W)
    >>> model.labels_.tolist()
    [0, 0, 1, 1]

    Flat: the exact distribution over all partitions.

    >>> from sktrellis import ExactFlatClustering
    >>> flat = ExactFlatClustering(CorrelationClustering(affinity="precomputed")).fit(W)
    >>> flat.labels_.tolist()
    [0, 0, 1, 1]
    >>> round(float(flat.pairwise_probability_[0, 1]), 3)
    0.639
    """

    _parameter_constraints = {
        "affinity": [StrOptions({"rbf", "exponential", "precomputed"})],
        "gamma": [Interval(Real, 0, None, closed="neither"), None],
        "beta": [Interval(Real, 0, None, closed="left"), StrOptions({"auto"})],
        "tree_prior": [StrOptions(set(TREE_PRIORS))],
    }

    potential_kind = "separable"

    def __init__(self, affinity="exponential", gamma=None, beta="auto", tree_prior="yule"):
        self.affinity = affinity
        self.gamma = gamma
        self.beta = beta
        self.tree_prior = tree_prior

    def weights(self, X):
        """The (n, n) signed weight matrix of X (zero diagonal).

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features) or (n_samples, n_samples)
            Features, or signed weights with ``affinity="precomputed"``.

        Returns
        -------
        weights : ndarray of shape (n_samples, n_samples)
            Symmetric signed weights, zero diagonal: positive pairs attract.
        """
        self._validate_params()
        weights = similarity_matrix(X, self.affinity, self.gamma, allow_negative=True)
        if self.affinity != "precomputed":
            n_points = len(weights)
            if n_points > 1:
                mean = weights.sum() / (n_points * (n_points - 1))
                weights = weights - mean
        # Self-pairs never sit on either side of a split or inside a cluster
        # twice; zero them so a precomputed diagonal cannot leak in.
        weights = weights.copy()
        weights.flat[:: len(weights) + 1] = 0.0
        # Every log potential is at most beta * (sum of all |weights|).
        with np.errstate(over="ignore"):
            bound = self._beta_value() * np.abs(weights).sum()
        check_no_overflow(
            bound, "CorrelationClustering",
            "beta * (sum of the |weights|)", "rescale the precomputed weights or lower beta",
        )
        return weights

    def split_potential(self, X):
        """Validate X and tabulate the hierarchical (HCC) split potential: a separable potential.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features) or (n_samples, n_samples)
            Features, or signed weights with ``affinity="precomputed"``.

        Returns
        -------
        potential : SplitPotential
            ``-beta (positive weight cut + |negative weight kept inside|)`` plus
            the tree prior's log factor, as ``f(S) + c(|S|) (g(A) + g(B))``,
            which the kernels sum in linear space.
        """
        weights = self.weights(X)
        positive = subset_pair_sums(weights.clip(min=0))
        signed = subset_pair_sums(weights)
        # -beta (P(S) - P(A) - P(B) - N(A) - N(B)) with P, N the positive and
        # negative weight inside: f(S) = -beta P(S), g = P + N = signed, c = beta.
        # Plus the tree prior's log factor of S in f.
        n_points = len(weights)
        return SplitPotential.separable(
            n_points, add_prior_cluster_term(-self._beta_value() * positive, self.tree_prior),
            signed, [self._beta_value()] * (n_points + 1),
        )

    def cluster_potential(self, X):
        """Tabulate the flat log potential ``beta * sum of w_ij inside C`` of every subset.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features) or (n_samples, n_samples)
            Features, or the signed weights with ``affinity="precomputed"``.

        Returns
        -------
        log_potential : ndarray of shape (2**n_samples,)
            ``beta`` times the signed weight inside each subset mask.
        """
        weights = self.weights(X)
        return self._beta_value() * subset_pair_sums(weights)

    def cluster_scorer(self, X):
        """Validate X and return a function scoring explicit clusters (flat potential).

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features) or (n_samples, n_samples)
            Features, or the signed weights with ``affinity="precomputed"``.

        Returns
        -------
        score : callable
            ``score(clusters)``: ``beta`` times the signed weight inside each
            cluster, given as an array of row indices.
        """
        weights = self.weights(X)
        beta = self._beta_value()

        def score(clusters):
            values = np.empty(len(clusters))
            for first, indicator in cluster_indicator_blocks(clusters, len(weights)):
                inside = np.asarray(indicator.multiply(indicator @ weights).sum(axis=1)).ravel()
                values[first : first + len(inside)] = 0.5 * beta * inside
            return values

        return score

    def merge_model(self, X):
        """Incremental statistics for agglomerative search and sparse trellises.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Already checked to be finite 2-d float64 by the estimator.

        Returns
        -------
        model : MergeModel
            See :mod:`sktrellis.energies._merge`.
        """
        weights = self.weights(X)
        return _CorrelationMergeModel(
            [weights.clip(min=0), weights.clip(max=0)], self._beta_value(), self.tree_prior
        )

    def search_bound(self, X):
        """Validate X and build the admissible bound of best-first search.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Already checked to be finite 2-d float64 by the estimator.

        Returns
        -------
        bound : SearchBound
            A ``CorrelationBound``, proven admissible in its class docstring,
            with the tree prior's split costs added (``SizePriorBound``).
        """
        weights = self.weights(X)
        return prior_search_bound(CorrelationBound(weights, self._beta_value()),
                                  len(weights), self.tree_prior)


class _CorrelationMergeModel(PairwiseMergeModel):
    """Hierarchical correlation clustering on (positive, negative) weight parts.

    ``log psi = -beta (positive cross weight + |negative weight inside A and B|)``
    plus the tree prior's log factor.
    Every positive pair is cut exactly once in any tree and a negative pair
    is paid at every internal node above the one that first holds it, so a
    tree's log potential is ``-beta (P + sum over the internal nodes but the
    root of |negative weight inside|)``, P the total positive weight: with
    h(C) = beta * (signed weight inside C), a merge scores
    ``-beta |negative weight inside A | B|`` plus the tree prior's log factor.
    """

    def __init__(self, matrices, beta, tree_prior):
        super().__init__(matrices)
        self.beta = beta
        self.tree_prior = tree_prior

    def _log_psi(self, size_a, size_b, inside_a, inside_b, cross):
        return (-self.beta * (cross[0] - inside_a[1] - inside_b[1])
                + split_log_prior(size_a + size_b, self.tree_prior))

    def _score(self, size_a, size_b, inside_a, inside_b, cross):
        return (self.beta * (inside_a[1] + inside_b[1] + cross[1])
                + split_log_prior(size_a + size_b, self.tree_prior))
