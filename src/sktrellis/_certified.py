"""Past the flat trellis with a certificate: the MAP partition of correlation clustering."""
import time
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import HasMethods, Interval

from ._engine.multicut import max_agreement
from ._estimator import EnergyEstimatorMixin, clears_fit_state_on_failure
from .energies import CorrelationClustering


class CertifiedFlatClustering(EnergyEstimatorMixin, ClusterMixin, BaseEstimator):
    """The exact MAP partition of correlation clustering by integer programming.

    Finds the partition of largest flat log potential ``beta * sum of w_ij
    over the pairs inside clusters`` -- the MAP partition of
    :class:`~sktrellis.ExactFlatClustering` with a
    :class:`~sktrellis.energies.CorrelationClustering` energy -- past the
    trellis's 25 points, with a certificate. The classical integer program
    of correlation clustering (Groetschel & Wakabayashi 1989) has a 0/1
    variable ``x_ij`` per pair (1: same cluster), maximises ``sum w_ij
    x_ij`` and keeps the pairs transitive by the triangle inequalities
    ``x_ij + x_jk - x_ik <= 1``. Of these 3 C(N, 3) inequalities only
    those that solutions violate are added: LP relaxations first, then
    integer programs, each solved by HiGHS (``scipy.optimize.milp``),
    until a solution is transitive and hence optimal. Two exact reductions
    come first: some optimal partition splits no cluster along the
    connected components of the positive pairs, so these are solved
    separately; and positive pairs that are already transitive are the
    answer.

    Anytime: every relaxation's optimum bounds the best log potential from
    above, and every solution, rounded to a partition (connected
    components of its pairs, then single-point moves), bounds it from
    below, as does the greedy merge of the clusters of largest positive
    cross weight, the first incumbent. When ``max_time`` or ``max_iter``
    stops the solver, ``labels_`` is the best partition found and
    ``optimality_gap_`` the difference to the upper bound; 0 means proven
    optimal (within HiGHS's tolerances, about 1e-6 of the largest
    ``|beta w_ij|``).

    Clustered data are easy: 250 noisy reads of 50 random templates (the
    transitive-propagation paper's data) with up to 10 % bit errors are
    proven optimal in seconds; at 15 % the certificate stays loose after
    minutes (``benchmarks/bench_certified_flat.py``). Dense random weights
    are the hard case: at N = 20 an optimum takes seconds, at N = 25 a
    minute or more (the flat trellis takes minutes there, and about 8 GB).
    Each round costs O(N**3) to find the violated triangles, so N is
    limited to hundreds of points.

    Parameters
    ----------
    energy : CorrelationClustering, default=None
        The signed pairwise weights (see
        :class:`~sktrellis.energies.CorrelationClustering`); None means
        ``CorrelationClustering()``. For the log likelihood ratios of
        :class:`~sktrellis.baselines.TransitivePropagation` (same cluster
        against different clusters), use
        ``CorrelationClustering(affinity="precomputed", beta=1.0)`` on the
        ratio matrix: the objective is then the same sum.
    max_time : float, default=None
        Seconds after which the solver stops and the best partition found
        is returned with its ``optimality_gap_``; None means no limit, which
        on structureless data (noise, dense random weights) of more than
        about 25 points can mean hours: set it there. Checked between
        rounds and passed to the solver; the last round's rounding and
        search for violated triangles may add a few seconds at N = 250.
    max_iter : int, default=None
        Largest number of LP and integer programs solved; None means no
        limit.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        The best partition found (the MAP partition when
        ``optimality_gap_`` is 0), labels 0, 1, ... by first appearance.
    map_log_potential_ : float
        Its log potential, ``beta`` times the sum of ``w_ij`` over its pairs
        inside clusters, as ``ExactFlatClustering.map_log_potential_``.
    optimality_gap_ : float
        Upper bound on how much larger the MAP partition's log potential
        is: 0 when ``labels_`` is proven optimal.
    log_potential_upper_bound_ : float
        ``map_log_potential_ + optimality_gap_``: no partition's log
        potential exceeds it.
    stop_reason_ : str
        "optimal", or "max_time" or "max_iter" if that stopped the solver.
    n_iter_ : int
        Number of LP and integer programs solved (0 when the positive pairs
        were transitive).
    n_constraints_ : int
        Number of triangle inequalities added.
    beta_ : float
        The inverse temperature used (``beta="auto"`` means 1 here: there
        is no posterior to calibrate).
    n_features_in_ : int
        Number of features (columns) of X.

    See Also
    --------
    sktrellis.ExactFlatClustering : The whole posterior over partitions, N <= 25.
    sktrellis.baselines.TransitivePropagation : Message passing for the same objective.
    sktrellis.BestFirstHierarchicalClustering : The certified MAP tree.

    References
    ----------
    M. Groetschel, Y. Wakabayashi. A cutting plane algorithm for a clustering
    problem. Mathematical Programming 45, 1989.
    N. Bansal, A. Blum, S. Chawla. Correlation clustering. Machine Learning 2004.

    Examples
    --------
    >>> import numpy as np
    >>> from sktrellis import CertifiedFlatClustering
    >>> from sktrellis.energies import CorrelationClustering
    >>> W = np.array([[0, 2, -1, -1], [2, 0, -1, 1],
    ...               [-1, -1, 0, 3], [-1, 1, 3, 0]], dtype=float)
    >>> model = CertifiedFlatClustering(
    ...     CorrelationClustering(affinity="precomputed", beta=1.0)).fit(W)
    >>> model.labels_.tolist(), model.map_log_potential_, model.optimality_gap_
    ([0, 0, 1, 1], 5.0, 0.0)
    """

    _parameter_constraints = {
        "energy": [HasMethods(["weights", "cluster_potential"]), None],
        "max_time": [Interval(Real, 0, None, closed="neither"), None],
        "max_iter": [Interval(Integral, 1, None, closed="left"), None],
    }

    def __init__(self, energy=None, *, max_time=None, max_iter=None):
        self.energy = energy
        self.max_time = max_time
        self.max_iter = max_iter

    _default_energy = CorrelationClustering

    @clears_fit_state_on_failure
    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X, y=None):
        """Solve the integer program of X's weights.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features, or an (n, n) symmetric matrix of signed weights with
            ``CorrelationClustering(affinity="precomputed")``.
        y : Ignored
            Not used, present for API consistency.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        start = time.perf_counter()
        X = self._validate_training_data(X, ensure_min_samples=1)
        energy = self._uncalibrated_energy()
        weights = np.asarray(energy.weights(X), dtype=np.float64)
        beta = float(getattr(self, "beta_", 1.0))
        max_time = None if self.max_time is None else self.max_time - (
            time.perf_counter() - start
        )
        result = max_agreement(weights, max_time, self.max_iter)
        self.labels_ = result.labels
        self.map_log_potential_ = beta * result.objective
        self.optimality_gap_ = 0.0 if result.proven else beta * (
            result.upper_bound - result.objective
        )
        self.log_potential_upper_bound_ = self.map_log_potential_ + self.optimality_gap_
        self.stop_reason_ = "optimal" if result.proven else result.stopped_by
        self.n_iter_ = result.n_iter
        self.n_constraints_ = result.n_constraints
        if not result.proven:
            warnings.warn(
                f"{type(self).__name__} stopped ({self.stop_reason_}) before proving the "
                f"partition optimal: its log potential is within {self.optimality_gap_:.6g} "
                "of the best; raise max_time or max_iter to close the gap",
                ConvergenceWarning,
                stacklevel=3,
            )
        return self
