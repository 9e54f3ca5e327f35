"""Exact flat clustering: the full cluster trellis over all partitions."""
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, _fit_context, clone
from sklearn.utils import check_random_state
from sklearn.utils._available_if import available_if
from sklearn.utils._param_validation import HasMethods, Interval, validate_params
from sklearn.utils.validation import check_is_fitted, validate_data

from ._engine.tree.conversion import relabel_by_first_appearance
from ._engine.trellis.flat_trellis import FlatTrellis, map_partition
from ._engine.trellis.levels import reporting
from ._estimator import ClusterPosteriorMixin, EnergyEstimatorMixin, clears_fit_state_on_failure
from ._calibration import calibrate_partition_posterior
from ._engine.resources import check_flat_fit, effective_n_threads
from ._validation import check_log_potentials, check_members
from .energies import CorrelationClustering


def _energy_has(name):
    """available_if check: the estimator's energy has the method `name`."""

    def check(estimator):
        return hasattr(estimator._energy(), name)

    return check


class ExactFlatClustering(
    ClusterPosteriorMixin, EnergyEstimatorMixin, ClusterMixin, BaseEstimator
):
    """Exact inference over all partitions with the flat cluster trellis.

    Fits the Gibbs distribution ``P(partition | X) = prod_clusters E(C) / Z``
    over all Bell(N) partitions of N points, given an energy model that
    scores each cluster. A dynamic program over the 2**N subsets (Greenberg
    et al. 2018) gives exactly, in O(3**N) time and O(2**N) memory: the MAP
    partition, the log partition function, the marginal probability of
    every cluster and of every pair of points being clustered together, the
    posterior over the number of clusters, the probability of any
    partition, and i.i.d. posterior samples. Bell(20) is 5.2e13 and Bell(25)
    4.6e18: nothing but the trellis gives these numbers exactly.

    Parameters
    ----------
    energy : FlatEnergy, default=None
        Energy model scoring each cluster (see :mod:`sktrellis.energies`):
        ``CorrelationClustering``, ``DirichletProcessMixture`` or a
        ``ClusterEnergy``. None means ``CorrelationClustering()``
        (exponential similarities minus their mean). Its parameters can be
        searched as ``energy__<name>``.
    n_clusters : int, default=None
        If given, ``labels_`` and ``map_log_potential_`` are the best
        partition into exactly this many clusters; the posterior quantities
        stay over all partitions.
    random_state : int, RandomState instance or None, default=None
        Seed of :meth:`sample` when it is called without one, and of the
        bootstrap calibrating an energy's ``beta="auto"`` (None: a fixed
        seed, so that the same data always get the same ``beta_``).
    verbose : int, default=0
        Progress of the dynamic program, on stderr: a first line with the
        pass's number of (subset, cluster) pairs, its estimated time and
        the memory it needs, then a tqdm bar with the time left. 0: silent,
        as every estimator is by default (fits in a grid search or
        ``fit_many`` print nothing). 1: only for passes estimated to take
        10 s or more (from about N = 22 on one thread), so that a long fit
        says what it will cost before it starts (and can be stopped with
        Ctrl-C) while quick fits stay quiet. 2 or more: always.
    n_jobs : int, default=None
        OpenMP threads of the kernels; None uses all available cores, -1 as
        well, -2 all but one.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        The MAP partition (with ``n_clusters`` clusters when given), labels
        0, 1, ... in order of each cluster's first point.
    log_partition_ : float
        Natural log of Z, the sum of the potentials of all partitions.
    map_log_potential_ : float
        Log potential of the partition in ``labels_``.
    n_partitions_ : int
        Number of partitions with non-zero potential (exact; Bell(N) when
        no cluster is forbidden).
    pairwise_probability_ : ndarray of shape (n_samples, n_samples)
        P(points i and j are in the same cluster | X); the diagonal is 1.
    n_clusters_probability_ : ndarray of shape (n_samples + 1,)
        P(the partition has k clusters | X) at index k (index 0 is 0).
    n_clusters_log_partition_ : ndarray of shape (n_samples + 1,)
        log of the sum of the potentials of the partitions with k clusters,
        at index k (``-inf`` where there are none, as at index 0). Exact in
        log space, also where the probability underflows.
    beta_ : float
        The inverse temperature of the posterior, with an energy that has
        one (``CorrelationClustering``): the energy's ``beta``, or the
        value ``beta="auto"`` calibrated (see
        :class:`~sktrellis.energies.CorrelationClustering`). The
        calibration runs a max-only flat pass on 20 bootstrap resamples,
        the trellis a few times more, and the trellis over 3 permuted
        references 1-4 times each for the cap: 4-31x a plain fit at
        N = 12-16, 24-26x at N = 20 on noise (loaded machine,
        ``benchmarks/bench_calibration.py``); a numeric beta skips it.
        With 1-9 distinct columns the test and a few posteriors replace
        it: 5 where the test finds no structure (12 x 2 noise), 17-19
        and 40 max-only passes where it does (clear groups, N = 10-12;
        ``calibration_["n_reference_fits"]``, seeds 0-5); with the test,
        a few tenths of a second at N = 10-12 (a plain fit: 2 ms), 5x a
        plain fit on noise and about 26x on iris at N = 18 (loaded
        machine, ``benchmarks/bench_few_features.py --only flat-tested``).
    calibration_ : dict
        How ``beta_`` was chosen, with an energy that has a temperature:
        ``method`` ("feature bootstrap"; "tested-null" with 1-9 distinct
        feature columns, with a warning: SigClust's test of X against
        Gaussian references with its covariance (49 at a time, up to 999,
        until its decision is sure), then, where it finds
        structure (p <= 0.05), the beta whose co-clustering best matches
        how often data redrawn from the Gaussian mixture of the MAP
        partition put each pair together, else the largest beta at which
        no three points are together above 0.3; see "Reading a
        posterior", "Few features over partitions"; it records ``p_value``,
        ``n_clusters_tested``, ``n_test_references`` (49-999), ``branch``
        ("mixture bootstrap" or "own posterior"), ``null_level``,
        ``n_reference_fits`` and ``n_resamples``; "fixed" for a numeric
        beta;
        "uncalibrated" when ``beta="auto"`` found nothing to calibrate
        against and means 1, with a warning), and the keys of the feature
        bootstrap and of its reference-null cap as
        ``ExactHierarchicalClustering.calibration_`` documents them
        (``n_effective_features``, ``n_resamples``, ``reason``,
        ``null_cap``, ``null_cap_bound``, ``null_level``,
        ``n_reference_draws``, ``n_reference_fits``, ``rotation_p_value``,
        ``null_reference``, ``n_bootstrap_draws``), the posteriors being
        over partitions: the cap holds three points together, rather than a
        cluster, to ``null_level``.
    log_evidence_ : float
        Only with a ``DirichletProcessMixture`` energy: log p(X), the exact
        marginal likelihood of the data under the DP mixture.
    n_features_in_ : int
        Number of features (columns) of X.
    feature_names_in_ : ndarray of shape (n_features,)
        Names of the features, when X has string column names.

    See Also
    --------
    ExactHierarchicalClustering : The same exact inference over binary trees.
    sklearn.mixture.BayesianGaussianMixture : Variational DP mixture.

    Notes
    -----
    Cost: the inside pass visits the (3**N - 1) / 2 (subset, cluster)
    pairs, at about 1.5 ns per pair on one core for log Z and MAP together.
    ``n_clusters_probability_`` needs a pass with a cluster-count dimension,
    ``|S \\ C|`` multiply-adds per pair, and ``n_clusters`` = k a max-only
    pass k deep; both visit only the subsets without the first point (the
    only ones the recursion from all points reads), a third of the pairs,
    and each costs about as much as the plain fit. N = 18 fits in about
    0.2 s and N = 20 in about 2 s on one core (see
    ``benchmarks/bench_flat.py``). Memory is about ``(128 + 4 N) * 2**N``
    bytes plus 32 MiB for the sampler: 0.2 GiB at N = 20, 0.9 GiB at
    N = 22, 3.5 GiB at N = 24.

    References
    ----------
    C. S. Greenberg, N. Monath, A. Kobren, P. Flaherty, A. McGregor,
    A. McCallum. Compact representation of uncertainty in clustering.
    NeurIPS 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from sktrellis import ExactFlatClustering
    >>> from sktrellis.energies import CorrelationClustering
    >>> X = np.array([[0.0, 0.0], [0.1, 0.0], [4.0, 4.0], [4.1, 4.2], [4.0, 4.3]])
    >>> model = ExactFlatClustering(CorrelationClustering(beta=5.0)).fit(X)
    >>> model.labels_.tolist()
    [0, 0, 1, 1, 1]
    >>> model.n_partitions_
    52
    >>> round(float(model.pairwise_probability_[2, 3]), 3)
    0.935
    >>> model.n_clusters_probability_.round(3).tolist()
    [0.0, 0.001, 0.795, 0.19, 0.014, 0.001]
    >>> round(model.cluster_probability([2, 3, 4]), 3)
    0.899
    >>> model.sample(2, random_state=0).tolist()
    [[0, 0, 1, 1, 1], [0, 0, 1, 1, 1]]
    """

    _parameter_constraints = {
        "energy": [HasMethods(["cluster_potential", "scratch_bytes"]), None],
        "n_clusters": [Interval(Integral, 1, None, closed="left"), None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "n_jobs": [Integral, None],
    }

    def __init__(self, energy=None, *, n_clusters=None, random_state=None, verbose=0,
                 n_jobs=None):
        self.energy = energy
        self.n_clusters = n_clusters
        self.random_state = random_state
        self.verbose = verbose
        self.n_jobs = n_jobs

    _default_energy = CorrelationClustering

    @clears_fit_state_on_failure
    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None):
        """Run the exact flat trellis on X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features, or what the energy expects (an (n, n) matrix of signed
            weights for ``CorrelationClustering(affinity="precomputed")``).
        y : Ignored
            Not used, present for API consistency.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        X = self._validate_training_data(X, ensure_min_samples=1)
        n_points = X.shape[0]
        energy = self._energy()
        owner = type(self).__name__
        check_flat_fit(energy, n_points, X.shape[1], owner)
        n_threads = effective_n_threads(self.n_jobs)
        # The energy's own long computations (a DPM's per-subset statistics)
        # report like the passes.
        with reporting(owner, self.verbose):
            energy, beta, trellis, calibration = calibrate_partition_posterior(
                energy, X, self.random_state,
                lambda log_potential, n_clusters: FlatTrellis(
                    self._check_cluster_potential(log_potential, n_points, energy),
                    n_threads, self.verbose, owner, n_clusters,
                ),
                lambda log_potential: map_partition(
                    self._check_cluster_potential(log_potential, n_points, energy),
                    n_threads, self.verbose, owner,
                )[0],
                self.n_clusters,
            )
        if not trellis.log_partition > -np.inf:
            raise ValueError(
                f"every partition of these n_samples={n_points} points has zero "
                f"potential under {energy!r}: no clusters of finite log potential "
                "cover the points exactly once"
            )
        if self.n_clusters is None:
            self.labels_ = trellis.map_labels
            self.map_log_potential_ = trellis.map_log_potential
        else:
            if trellis.constrained_map_labels is None:
                raise ValueError(
                    f"no partition of these n_samples={n_points} points into "
                    f"n_clusters={self.n_clusters} clusters has non-zero potential "
                    f"under {energy!r}; the feasible numbers of clusters are "
                    f"{np.flatnonzero(trellis.log_partition_by_count > -np.inf).tolist()}"
                )
            self.labels_ = trellis.constrained_map_labels
            self.map_log_potential_ = trellis.constrained_map_log_potential
        self._trellis = trellis
        self._fitted_energy = clone(energy)
        if beta is not None:
            self.beta_ = self._fitted_energy.beta_ = beta
            self.calibration_ = calibration
        self.log_partition_ = trellis.log_partition
        self.n_partitions_ = trellis.n_partitions
        self.pairwise_probability_ = trellis.pairwise_probability()
        if hasattr(energy, "log_evidence"):
            self.log_evidence_ = energy.log_evidence(trellis.log_partition, n_points)
        if hasattr(energy, "log_predictive"):
            self._fit_X = X
        return self

    @property
    def n_clusters_log_partition_(self):
        """Log Z over the partitions into k clusters, k = 0..n_samples.

        Needs a second pass over the trellis with a cluster-count dimension
        (about the cost of ``fit``), run on first access, then kept.
        """
        return self._fitted_posterior().log_partition_by_count

    @property
    def n_clusters_probability_(self):
        """P(number of clusters = k | X), k = 0..n_samples (see ``n_clusters_log_partition_``)."""
        return np.exp(self.n_clusters_log_partition_ - self.log_partition_)

    @staticmethod
    def _check_cluster_potential(log_potential, n_points, energy):
        """The energy's table as C-contiguous float64, or a ValueError naming what is wrong."""
        source = f"{type(energy).__name__}.cluster_potential"
        log_potential = np.asarray(log_potential, dtype=np.float64)
        if log_potential.shape != (1 << n_points,):
            raise ValueError(
                f"{source} must return one log potential per subset, shape "
                f"(2**n_samples,) = ({1 << n_points},) for n_samples={n_points}; got shape "
                f"{log_potential.shape}"
            )
        # Entry 0, the empty set, is never read.
        check_log_potentials(log_potential[1:], source, (len(log_potential) - 1,), "cluster")
        return np.ascontiguousarray(log_potential)

    def together_probability(self, members):
        """Posterior probability that all ``members`` lie in one cluster.

        P(some cluster of the partition holds every point of ``members`` |
        X), the sum of the marginals of the clusters that contain them
        (Greenberg et al. 2018, section 3), exact. Where
        :meth:`cluster_probability` asks for ``members`` to be a cluster
        *exactly*, this allows other points beside them. For two points it
        is ``pairwise_probability_[i, j]``; for one point it is 1. A query
        of k points costs O(2**(N - k)).

        Parameters
        ----------
        members : array-like of int, or array-like of bool of shape (n_samples,)
            The points: their indices, or a mask.

        Returns
        -------
        probability : float
            P(the points ``members`` lie in one cluster | X), in [0, 1].

        Examples
        --------
        >>> import numpy as np
        >>> from sktrellis import ExactFlatClustering
        >>> from sktrellis.energies import CorrelationClustering
        >>> X = np.array([[0.0, 0.0], [0.1, 0.0], [4.0, 4.0], [4.1, 4.2], [4.0, 4.3]])
        >>> model = ExactFlatClustering(CorrelationClustering(beta=5.0)).fit(X)
        >>> together = model.together_probability([2, 3, 4])
        >>> bool(together >= model.cluster_probability([2, 3, 4]))
        True
        >>> bool(np.isclose(model.together_probability([2, 3]), model.pairwise_probability_[2, 3]))
        True
        """
        check_is_fitted(self)
        members = check_members(members, len(self.labels_))
        log_probability = self._fitted_posterior().together_log_probability(members)
        return float(np.exp(log_probability))

    def log_probability(self, labels):
        """Natural log of P(partition | X) for a partition of the fitted points.

        Parameters
        ----------
        labels : array-like of shape (n_samples,)
            Cluster label of every point; any hashable values, only which
            points share a label matters.

        Returns
        -------
        log_probability : float
            ``-inf`` for a partition with a forbidden cluster.
        """
        log_e = self._fitted_posterior().log_e
        masks = self._label_masks(labels)
        # Rounding in log Z must not make a probability exceed one.
        return float(min(log_e[masks].sum() - self.log_partition_, 0.0))

    def _label_masks(self, labels):
        n_points = len(self.labels_)
        labels = np.asarray(labels)
        if labels.shape != (n_points,):
            raise ValueError(
                f"labels must have shape (n_samples,) = ({n_points},), got {labels.shape}"
            )
        if labels.dtype.kind == "f" and np.any(np.isnan(labels)):
            raise ValueError("labels must not contain NaN")
        # Number clusters by their first point, so that any naming of the
        # same partition sums the same terms in the same order.
        cluster_of = relabel_by_first_appearance(labels)
        masks = np.zeros(cluster_of.max() + 1, dtype=np.int64)
        np.bitwise_or.at(masks, cluster_of, np.left_shift(1, np.arange(n_points, dtype=np.int64)))
        return masks

    @validate_params(
        {"n_samples": [Interval(Integral, 1, None, closed="left")],
         "random_state": ["random_state"]},
        prefer_skip_nested_validation=True,
    )
    def sample(self, n_samples=1, random_state=None):
        """Draw partitions exactly from the posterior P(partition | X).

        Parameters
        ----------
        n_samples : int, default=1
            Number of partitions.
        random_state : int, RandomState instance or None, default=None
            Seed; None uses the estimator's ``random_state``.

        Returns
        -------
        labels : ndarray of shape (n_samples, n_points)
            One row of labels per partition, 0, 1, ... in order of each
            cluster's first point.
        """
        posterior = self._fitted_posterior()
        rng = check_random_state(self.random_state if random_state is None else random_state)
        return posterior.sample_labels(int(n_samples), rng)

    @available_if(_energy_has("log_predictive"))
    def predict(self, X):
        """Assign new points to the MAP clusters by their posterior predictive.

        A new point x joins the cluster C of ``labels_`` maximising
        ``|C| p(x | X_C)``, its probability under the DP mixture of joining
        C given the MAP partition (opening a new cluster is not an option).
        Available with an energy that has a predictive distribution
        (``DirichletProcessMixture``).

        Parameters
        ----------
        X : array-like of shape (n_new, n_features)
            New points, with the features of the fitted data.

        Returns
        -------
        labels : ndarray of shape (n_new,)
            Index of the cluster of ``labels_`` each point joins.
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        log_predictive = self._fitted_energy.log_predictive(self._fit_X, self.labels_, X)
        sizes = np.bincount(self.labels_)
        return np.argmax(log_predictive + np.log(sizes), axis=1)
