"""Perturb-and-MAP pairwise marginals of correlation clustering (Kappes et al. 2015)."""
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import validate_data

from .._engine.tables import subset_pair_sums
from .._engine.trellis.flat_trellis import map_partition
from .._engine.resources import check_exact_size, effective_n_threads, flat_fit_bytes
from .._validation import check_no_overflow, check_square_matrix
from ..energies import CorrelationClustering


class PerturbAndMAPClustering(ClusterMixin, BaseEstimator):
    """Pairwise co-clustering probabilities of correlation clustering by Perturb-and-MAP.

    The target is the distribution of flat correlation clustering over all
    partitions, ``P(partition) ~ exp(beta * sum of w_ij over the pairs inside
    its clusters)``, the distribution that
    ``ExactFlatClustering(CorrelationClustering(affinity="precomputed",
    beta=beta))`` represents exactly. Perturb-and-MAP (Papandreou & Yuille
    2011) approximates it by the distribution of the MAP partition under
    random perturbations of the energy; with one perturbation per pair, as
    Kappes et al. (2015) propose for multicuts, each draw

    1. adds independent standard Gumbel noise to the log potentials of both
       states of every pair, ``beta * w_ij`` for "same cluster" and 0 for
       "different clusters", so that the pair's weight becomes
       ``beta * w_ij + g_same - g_different``: a standard logistic
       perturbation;
    2. finds the exact MAP partition of the perturbed weights with the flat
       cluster trellis.

    ``pairwise_probability_`` is the fraction of draws whose MAP partition
    puts i and j together: the Perturb-and-MAP estimate of the marginal
    ``P(i and j in one cluster)`` that Greenberg et al. (2018, Fig. 3)
    compare with the exact marginals.

    The estimate is not exact even with infinitely many draws: one Gumbel
    per pair instead of one per partition makes the draws follow a
    different distribution, exact only for two points (one pair); the
    transitivity of partitions couples the pairs, and the paper observes
    that the estimate overestimates many marginals. Each draw costs an exact
    MAP over all partitions, ``O(3**N)``, so N is limited as for
    ``ExactFlatClustering``.

    Parameters
    ----------
    beta : float, default=1.0
        Inverse temperature: the pairwise log potentials are ``beta * X``.
    n_perturbations : int, default=100
        Number of perturbed MAP problems solved; the Monte-Carlo standard
        error of each probability is at most ``0.5 / sqrt(n_perturbations)``.
    random_state : int, RandomState instance or None, default=None
        Seed of the Gumbel perturbations.
    n_jobs : int, default=None
        OpenMP threads of the MAP kernels; None uses all available cores,
        -1 as well, -2 all but one.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        The MAP partition of the unperturbed weights (the ``labels_`` of
        ``ExactFlatClustering`` on the same problem), labels 0, 1, ... in
        order of each cluster's first point.
    pairwise_probability_ : ndarray of shape (n_samples, n_samples)
        Fraction of the perturbed MAP partitions in which i and j share a
        cluster; symmetric, ones on the diagonal.
    perturbed_labels_ : ndarray of shape (n_perturbations, n_samples)
        The MAP partition of each perturbed problem, labelled as ``labels_``.
    log_partition_upper_bound_ : float
        Mean over the draws of the perturbed MAP value with zero-mean Gumbel
        noise: an estimate of an upper bound on the log partition function
        of the target distribution (Hazan & Jaakkola 2012), equal to it for
        two points. Compare with ``ExactFlatClustering(...).log_partition_``.
    n_features_in_ : int
        Number of columns of X (n_samples).

    See Also
    --------
    sktrellis._flat.ExactFlatClustering : The exact pairwise marginals of the
        same distribution, ``pairwise_probability_``.
    TransitivePropagation : Loopy sum-product estimates of the same marginals
        (``method="sum-product"``), in ``O(N**3)`` per iteration.

    References
    ----------
    J. H. Kappes, P. Swoboda, B. Savchynskyy, T. Hazan, C. Schnörr.
    Probabilistic correlation clustering and image partitioning using
    perturbed multicuts. SSVM 2015.
    G. Papandreou, A. L. Yuille. Perturb-and-MAP random fields: using
    discrete optimization to learn and sample from energy models. ICCV 2011.
    T. Hazan, T. Jaakkola. On the partition function and random maximum
    a-posteriori perturbations. ICML 2012.
    C. S. Greenberg, N. Monath, A. Kobren, P. Flaherty, A. McGregor,
    A. McCallum. Compact representation of uncertainty in clustering.
    NeurIPS 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from sktrellis.baselines import PerturbAndMAPClustering
    >>> W = np.array([[0.0, 4.0, -4.0, -4.0],
    ...               [4.0, 0.0, -4.0, -4.0],
    ...               [-4.0, -4.0, 0.0, 0.5],
    ...               [-4.0, -4.0, 0.5, 0.0]])
    >>> model = PerturbAndMAPClustering(n_perturbations=200, random_state=0).fit(W)
    >>> model.labels_.tolist()
    [0, 0, 1, 1]
    >>> model.pairwise_probability_.shape
    (4, 4)
    >>> bool(model.pairwise_probability_[0, 1] > 0.95)
    True
    """

    _parameter_constraints = {
        "beta": [Interval(Real, 0, None, closed="left")],
        "n_perturbations": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "n_jobs": [Integral, None],
    }

    def __init__(self, *, beta=1.0, n_perturbations=100, random_state=None, n_jobs=None):
        self.beta = beta
        self.n_perturbations = n_perturbations
        self.random_state = random_state
        self.n_jobs = n_jobs

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = True
        return tags

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Solve ``n_perturbations`` perturbed MAP problems and count co-clustering.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_samples)
            Symmetric signed pairwise weights ``w_ij`` (positive: attract);
            the diagonal is ignored.
        y : Ignored
            Not used, present for API consistency.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        X = validate_data(self, X, dtype=np.float64)
        weights = check_square_matrix(X, "weight", allow_negative=True).copy()
        np.fill_diagonal(weights, 0.0)
        n_points = len(weights)
        owner = type(self).__name__
        check_exact_size(
            n_points, flat_fit_bytes(CorrelationClustering(affinity="precomputed"), n_points),
            owner, way_out='TransitivePropagation(method="sum-product")',
        )
        with np.errstate(over="ignore"):
            bound = self.beta * np.abs(weights).sum()
        check_no_overflow(
            bound, owner, "beta * (sum of the |weights|)", "rescale X or lower beta"
        )
        log_potential = self.beta * weights
        n_threads = effective_n_threads(self.n_jobs)
        self.labels_, _ = map_partition(subset_pair_sums(log_potential), n_threads)

        rng = check_random_state(self.random_state)
        rows, columns = np.triu_indices(n_points, 1)
        self.perturbed_labels_ = np.empty((self.n_perturbations, n_points), dtype=np.int64)
        together = np.zeros((n_points, n_points))
        perturbed_values = np.empty(self.n_perturbations)
        for draw in range(self.n_perturbations):
            same, different = perturbations(len(rows), rng)
            perturbed = log_potential.copy()
            perturbed[rows, columns] += same - different
            perturbed[columns, rows] = perturbed[rows, columns]
            labels, map_log_potential = map_partition(subset_pair_sums(perturbed), n_threads)
            self.perturbed_labels_[draw] = labels
            together += labels[:, None] == labels[None, :]
            # The value of the perturbed MAP on the two-state pair variables:
            # every pair pays its "different" noise, and the pairs inside
            # clusters trade it for beta * w + their "same" noise.
            perturbed_values[draw] = map_log_potential + different.sum()
        self.pairwise_probability_ = together / self.n_perturbations
        self.log_partition_upper_bound_ = float(perturbed_values.mean())
        return self


def perturbations(n_pairs, random_state):
    """Zero-mean Gumbel noise for the "same" and "different" state of each pair.

    Parameters
    ----------
    n_pairs : int
        Number of pairs i < j, in ``np.triu_indices`` order.
    random_state : numpy.random.RandomState
        Source of the noise; one draw of :class:`PerturbAndMAPClustering`
        takes two arrays of ``n_pairs`` from it, "same" first.

    Returns
    -------
    same, different : ndarray of shape (n_pairs,)
        Gumbel(-gamma, 1) variables (gamma the Euler-Mascheroni constant),
        so that each has mean zero as the log-partition bound requires.
    """
    same = random_state.gumbel(-np.euler_gamma, 1.0, size=n_pairs)
    different = random_state.gumbel(-np.euler_gamma, 1.0, size=n_pairs)
    return same, different
