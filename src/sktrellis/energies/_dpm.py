"""The Dirichlet process mixture as a flat energy: its exact posterior over partitions."""
from numbers import Real

import numpy as np
from scipy.special import digamma, gammaln
from sklearn.utils._param_validation import Interval, StrOptions

from .._validation import check_no_overflow, unit_exponent
from ._base import FlatEnergy, cluster_indicator_blocks
from ._conjugate import (
    beta_bernoulli_log_marginal,
    normal_inverse_gamma_log_marginal,
    normal_inverse_wishart_log_marginal,
)
from .._engine.tables import subset_sums
from .._engine.trellis.levels import model_progress

# Per-subset statistics are summed this many doubles at a time (a power of
# two); the marginal likelihoods of a chunk take a few times that in
# temporaries (_TEMPORARY_COPIES of the chunk).
_CHUNK_DOUBLES = 1 << 18
_TEMPORARY_COPIES = 6
# New points are scored against the clusters this many at a time.
_PREDICT_CHUNK = 1024
_LOG_2 = np.log(2.0)
# nu_0 of the per-feature (or shared) inverse-gamma prior by default.
_DIAGONAL_DEGREES_OF_FREEDOM = 5.0
# nu_0 - n_features of the inverse-Wishart prior by default (Fraley &
# Raftery 2007): the least integer for which the prior mean of the
# covariance exists, and then equals Psi_0.
_FULL_EXTRA_DEGREES_OF_FREEDOM = 2.0
# Bayesian Sets' pseudo-count total of the data-dependent Beta prior.
_BETA_PRIOR_STRENGTH = 2.0


# One thread's time for the marginal likelihood of a subset, per statistic
# of its width (measured at N = 16 on the 2-core VM: a d x d Cholesky per
# subset for "full", about 250 ns per statistic at d = 2-20; about 70 ns
# for the others), for the estimate that opens the progress of the phase.
_SECONDS_PER_STATISTIC = {"full": 250e-9, "diag": 70e-9, "spherical": 70e-9}


def _chunk_rows(width):
    """Subsets per chunk: a power of two, so a chunk never straddles two high rows unevenly."""
    rows = max(1, _CHUNK_DOUBLES // max(width, 1))
    return 1 << (rows.bit_length() - 1)


def _subset_statistic_chunks(point_statistics):
    """Sums of per-point statistics over all subsets, yielded in chunks of masks.

    The points are split into a low and a high half; a subset's sums are
    its low part's plus its high part's, so only two tables of 2**(N/2)
    rows are ever tabulated, and a chunk holds at most max(_CHUNK_DOUBLES,
    one row) doubles whatever the number of statistics. Yields (first mask,
    sums) with sums of shape (n_masks, n_statistics) for the consecutive
    masks from first mask on.
    """
    n_points, width = point_statistics.shape
    n_low = n_points // 2
    low = subset_sums(point_statistics[:n_low])
    high = subset_sums(point_statistics[n_low:])
    rows = _chunk_rows(width)
    if rows >= len(low):
        block = rows >> n_low
        for first in range(0, len(high), block):
            sums = high[first : first + block, None, :] + low[None, :, :]
            yield first << n_low, sums.reshape(-1, width)
        return
    for first in range(0, len(high) << n_low, rows):
        offset = first & (len(low) - 1)
        yield first, high[first >> n_low] + low[offset : offset + rows]


class ConjugateComponent:
    """The cluster model of a DirichletProcessMixture with its priors resolved on data.

    Made by :meth:`DirichletProcessMixture.component_model`; it scores any
    group of points from the sums of their sufficient statistics, which
    is how the DPM energy tabulates every subset and how
    :class:`~sktrellis.baselines.BayesianHierarchicalClustering` scores its
    merges, so both score a cluster identically.

    Parameters
    ----------
    component : {"gaussian", "bernoulli"}
    covariance_type : {"full", "diag", "spherical"}
    n_features : int
    prior : dict
        The resolved prior, as built by ``component_model``.

    Examples
    --------
    >>> import numpy as np
    >>> from sktrellis.energies import DirichletProcessMixture
    >>> X = np.array([[0.0, 1.0], [0.2, 0.9], [3.0, -1.0]])
    >>> model = DirichletProcessMixture(covariance_type="diag").component_model(X)
    >>> statistics = model.statistics(X)
    >>> statistics.shape
    (3, 5)
    >>> together = model.log_marginal(statistics[:2].sum(axis=0))
    >>> apart = model.log_marginal(statistics[:2]).sum()
    >>> bool(together > apart)
    True
    """

    def __init__(self, component, covariance_type, n_features, prior):
        self.component = component
        self.covariance_type = covariance_type
        self.n_features = n_features
        self.prior = prior

    @property
    def n_statistics(self):
        """Number of sufficient statistics per point (the width of ``statistics(X)``)."""
        return statistics_width(self.component, self.covariance_type, self.n_features)

    def statistics(self, X, name="X"):
        """Per-point sufficient statistics, one row per point of X.

        Gaussian: the count 1, then x and x**2 (``"diag"``), x and |x|**2
        (``"spherical"``) or x and vec(x x^T) (``"full"``), of x in the
        model's working units: centred at the prior mean and scaled by a
        power of two (and, ``"full"``, whitened by the prior scale).
        Bernoulli: the count 1 and x.

        Parameters
        ----------
        X : array-like of shape (n_points, n_features)
        name : str, default="X"
            How error messages name X.

        Returns
        -------
        statistics : ndarray of shape (n_points, n_statistics)
        """
        X = np.asarray(X, dtype=np.float64)
        ones = np.ones((len(X), 1))
        if self.component == "bernoulli":
            check_binary(X, name)
            return np.hstack([ones, X])
        prior = self.prior
        with np.errstate(over="ignore", invalid="ignore"):
            centred = np.ldexp(X, -prior["unit"]) - prior["mean"]
            if self.covariance_type == "full":
                if prior["root"] is None:
                    centred = centred / np.sqrt(prior["diagonal"])
                else:
                    centred = np.linalg.solve(prior["root"], centred.T).T
            squares = centred**2
            if self.covariance_type == "diag":
                second = squares
            elif self.covariance_type == "spherical":
                second = squares.sum(axis=1, keepdims=True)
            else:
                second = (centred[:, :, None] * centred[:, None, :]).reshape(len(X), -1)
        check_no_overflow(
            squares.sum(axis=0), "DirichletProcessMixture(component='gaussian')",
            "the second moments of X",
            "standardize X (e.g. sklearn.preprocessing.StandardScaler)",
        )
        return np.hstack([ones, centred, second])

    def log_marginal(self, statistics):
        """log p(D) of groups of points given the sums of their statistics.

        Parameters
        ----------
        statistics : array-like of shape (n_groups, n_statistics) or (n_statistics,)
            Sums of ``statistics(X)`` over the points of each group.

        Returns
        -------
        log_marginal : ndarray of shape (n_groups,)
        """
        statistics = np.atleast_2d(np.asarray(statistics, dtype=np.float64))
        d = self.n_features
        prior = self.prior
        counts = statistics[:, 0]
        sums = statistics[:, 1 : 1 + d]
        if self.component == "bernoulli":
            return beta_bernoulli_log_marginal(counts, sums, a=prior["a"], b=prior["b"])
        second = statistics[:, 1 + d :]
        zero = np.zeros(d)
        if self.covariance_type == "full":
            values = normal_inverse_wishart_log_marginal(
                counts, sums, second.reshape(-1, d, d), mean=zero,
                mean_precision=prior["mean_precision"],
                degrees_of_freedom=prior["degrees_of_freedom"], scale=np.eye(d),
                log_scale_factor=prior["log_scale"],
            )
        else:
            shared = self.covariance_type == "spherical"
            if shared:
                # |x|**2 summed: the per-feature squares only enter as their total.
                second = np.broadcast_to(second / d, sums.shape)
            values = normal_inverse_gamma_log_marginal(
                counts, sums, second, mean=zero, mean_precision=prior["mean_precision"],
                degrees_of_freedom=prior["degrees_of_freedom"], log_scale=prior["log_scale"],
                shared=shared,
            )
        # Back from working units: the Jacobian of the power-of-two scaling
        # and, "full", of the whitening, per point.
        return values - counts * prior["log_jacobian"]

    def subset_log_marginals(self, X):
        """log p(X_C) of every subset C of the rows of X (mask C, bit i <=> row i).

        The subsets' statistics are summed in chunks (see the module), never
        all at once.

        Parameters
        ----------
        X : array-like of shape (n_points, n_features)

        Returns
        -------
        log_marginals : ndarray of shape (2**n_points,)
            Entry 0 (no points) is 0.
        """
        table = np.empty(1 << len(X))
        point_statistics = self.statistics(X)
        width = point_statistics.shape[1]
        seconds = _SECONDS_PER_STATISTIC.get(getattr(self, "covariance_type", None), 70e-9)
        with model_progress("per-subset statistics (marginal likelihoods)", len(X),
                            len(table), "subset", seconds * width, table.nbytes) as progress:
            for first, statistics in _subset_statistic_chunks(point_statistics):
                table[first : first + len(statistics)] = self.log_marginal(statistics)
                progress.update(len(statistics))
        table[0] = 0.0
        return table

    def rescaled(self, factor):
        """The same model with its prior scale times factor.

        Gaussian: the covariance prior (Psi_0, or every psi_f) times factor;
        Bernoulli: both Beta pseudo-counts of every feature times factor.

        Parameters
        ----------
        factor : float
            Positive.

        Returns
        -------
        component : ConjugateComponent
        """
        prior = dict(self.prior)
        if self.component == "bernoulli":
            prior["a"], prior["b"] = factor * prior["a"], factor * prior["b"]
        else:
            prior["log_scale"] = prior["log_scale"] + np.log(factor)
        return ConjugateComponent(self.component, self.covariance_type, self.n_features, prior)


def statistics_width(component, covariance_type, n_features):
    """Number of sufficient statistics per point of a component model.

    Parameters
    ----------
    component : {"gaussian", "bernoulli"}
    covariance_type : {"full", "diag", "spherical"}
    n_features : int

    Returns
    -------
    width : int

    Examples
    --------
    >>> from sktrellis.energies._dpm import statistics_width
    >>> statistics_width("gaussian", "full", 3000), statistics_width("gaussian", "diag", 3000)
    (9003001, 6001)
    """
    if component == "bernoulli":
        return 1 + n_features
    return 1 + n_features + {
        "full": n_features * n_features, "diag": n_features, "spherical": 1,
    }[covariance_type]


def expected_number_of_clusters(n_points, alpha):
    """E[K] of the Chinese restaurant process: sum over i < n_points of alpha / (alpha + i).

    Parameters
    ----------
    n_points : int
        Number of points, at least 1.
    alpha : float
        Concentration, positive.

    Returns
    -------
    expected : float
        ``alpha (digamma(alpha + n_points) - digamma(alpha))``.

    Examples
    --------
    >>> from sktrellis.energies._dpm import expected_number_of_clusters
    >>> round(expected_number_of_clusters(3, 1.0), 4)  # 1 + 1/2 + 1/3
    1.8333
    """
    return float(alpha * (digamma(alpha + n_points) - digamma(alpha)))


def check_binary(X, name):
    """A ValueError naming the first entry of X that is neither 0 nor 1."""
    binary = (X == 0.0) | (X == 1.0)
    if not binary.all():
        row, column = np.argwhere(~binary)[0]
        raise ValueError(
            "DirichletProcessMixture(component='bernoulli') needs binary data "
            f"(0 and 1 only); {name}[{row}, {column}] is {float(X[row, column])!r}"
        )


class DirichletProcessMixture(FlatEnergy):
    """Dirichlet process mixture model: the exact posterior over partitions.

    Under a Dirichlet process mixture with concentration ``alpha``, the
    prior over partitions is the Chinese restaurant process, and a cluster's
    points are drawn from a component whose parameters have a conjugate
    prior. The posterior over partitions is then the Gibbs distribution with
    cluster log potential::

        log E(C) = log alpha + log Gamma(|C|) + log p(X_C),

    where p(X_C) is the marginal likelihood of the cluster's points (the
    component's parameters integrated out), and the partition function Z
    gives the evidence ``p(X) = Z Gamma(alpha) / Gamma(alpha + N)``. With
    ``ExactFlatClustering`` every posterior quantity is exact, not sampled.

    The per-subset sufficient statistics are summed in chunks of subsets
    (never all 2**N at once); their number per subset is 1 + d + d**2 for
    ``covariance_type="full"`` and 1 + 2 d or 2 + d for ``"diag"`` and
    ``"spherical"`` (d features) (:meth:`statistics_per_subset`); the exact
    estimators refuse up front, naming the size and the way out
    (``scratch_advice``), when they would not fit in memory
    (:meth:`scratch_bytes`).

    Parameters
    ----------
    alpha : float, default=1.0
        Concentration of the Dirichlet process: larger values favour more
        clusters (the prior expects about ``alpha log(1 + N / alpha)``).
    component : {"gaussian", "bernoulli"}, default="gaussian"
        ``"gaussian"``: normal components with unknown mean and covariance
        (see ``covariance_type``) under conjugate priors; computed in units
        of a power of two near the largest magnitude of X (exact), so
        features anywhere from 1e-300 to 1e300 give the posterior of the
        same data at unit scale, with log p(X) shifted by the Jacobian
        ``-n_samples * n_features * log(scale)``. ``"bernoulli"``:
        independent binary features (X holds only 0 and 1), each with a
        Beta prior on its probability of a 1.
    covariance_type : {"full", "diag", "spherical"}, default="full"
        Gaussian, as in scikit-learn's ``GaussianMixture``: ``"full"``, each
        cluster has its own covariance matrix with a Normal-Inverse-Wishart
        prior; ``"diag"``, its own variance per feature, each with an
        inverse-gamma prior (the product of one-feature models, O(d) per
        subset: the choice for many features); ``"spherical"``, one
        variance shared by all features.
    mean_prior : array-like of shape (n_features,), default=None
        Gaussian: prior mean mu_0 of the cluster means; None uses the mean
        of X.
    mean_precision_prior : float, default=None
        Gaussian: kappa_0, the prior mean's weight in points; a cluster's
        mean is drawn from N(mu_0, covariance / kappa_0), so small values
        let cluster means lie many within-cluster spreads apart. None:
        ``"full"``, ``1 / (G**(2/d) - 1)`` (see ``covariance_prior``), so
        that the prior covariance of one point, E[Sigma] (1 + 1 / kappa_0),
        is diag(v_f), the data's variances (the law of total variance:
        within-cluster plus between-cluster); about 0.2 for 2 features and
        200 points, growing like d / (2 log G) with d features.
        ``"diag"``, ``"spherical"``: 1.
    degrees_of_freedom_prior : float, default=None
        Gaussian: nu_0 of the covariance prior. ``"full"``: nu_0 >
        n_features - 1, None uses n_features + 2 (Fraley & Raftery 2007:
        the least integer for which the prior mean of the covariance,
        Psi_0 / (nu_0 - d - 1), exists; it is then Psi_0).
        ``"diag"``, ``"spherical"``: nu_0 > 0
        of each InvGamma(nu_0 / 2, psi / 2), None uses 5, a moderately
        informative prior (Smyth 2004 estimates about 4 prior degrees of
        freedom for per-gene variances). With thousands of features the
        posterior over partitions is sharp and sensitive to nu_0 and
        ``mean_precision_prior``: on 14 x 3000 planted data (3 groups, 5 %
        of the features shifted by about 2 standard deviations each) and on
        noise, nu_0 in [5, 10] with kappa_0 = 1 recovers the groups and
        gives one cluster on noise, while nu_0 = 20, kappa_0 = 0.5 or
        kappa_0 = 2 do not; compare settings by ``log_evidence_``.
    covariance_prior : float or array-like, default=None
        Gaussian: the scale of the covariance prior. ``"full"``: the
        inverse-Wishart scale matrix Psi_0 of shape (n_features,
        n_features), symmetric positive definite; ``"diag"``: the psi_f of
        every feature, shape (n_features,); ``"spherical"``: the psi of the
        shared variance, a float. A float means that times the identity
        (every psi_f) in any case. Any positive scale is well defined: it
        is combined with the data's scatter in log space, so values 1e150
        times above or below the data's variance give the model's value.

        None is empirical Bayes from X, after Fraley & Raftery 2007's
        conjugate prior for model-based clustering (which also centres the
        prior mean at the data's mean), from the per-feature variances v_f
        of X (a constant feature, whose variance is 0, takes the mean of the
        others', so that binary data with always-0 columns keep a proper
        prior). ``"full"``: Psi_0 = G**(-2/d) diag(v_f), their volume rule (a
        cluster, one of G, takes 1/G of the data's volume, so its variances
        are G**(-2/d) of the data's), with G = sum_{i < N} alpha / (alpha +
        i) the number of clusters the Dirichlet process expects among the N
        points (at least two) and d the number of features; with the
        default nu_0 = d + 2, Psi_0 is the prior mean of every cluster's
        covariance. The diagonal rather than the full covariance of X: it
        stays positive definite with fewer points than features, and the
        full covariance carries the spread between clusters into the shape
        of each one (on standardized wine it split the data into 36
        clusters). A prior as wide as the data (scikit-learn's
        ``BayesianGaussianMixture`` rule, Psi_0 = the data's covariance,
        nu_0 = d), used before, lets one cluster absorb overlapping clusters
        point by point in BHC's greedy tree. ``"diag"``: psi_f = nu_0
        G**(-2/d) v_f, and ``"spherical"``: psi = nu_0 G**(-2/d) mean(v_f),
        the same volume rule stated for the prior mean of every precision,
        G**(2/d) / v_f whatever nu_0; with kappa_0 = 1 (not the law of
        total variance, whose kappa_0 grows like d / (2 log G) and put the
        planted groups below into singletons). At thousands of features
        G**(-2/d) tends to 1 (0.9992 at d = 3000), the prior tuned there
        (psi_f = nu_0 v_f); on few features it lets several clusters fit
        (on ``make_blobs(200, centers=4, random_state=0)``, 4 clusters,
        ARI 0.79, where psi_f = nu_0 v_f gives 2).
        For tight clusters, set ``covariance_prior`` near the expected
        within-cluster variance and a small ``mean_precision_prior``, and
        compare settings by ``log_evidence_`` of ``ExactFlatClustering``.
    bernoulli_prior : tuple of two floats, default=None
        Bernoulli: the (a, b) of the Beta(a, b) prior of every feature's
        probability of a 1 (pseudo-counts of ones and zeros); (1, 1) is
        uniform, (0.5, 0.5) Jeffreys'. None is empirical Bayes from X, the
        rule of Heller & Ghahramani's Bayesian Sets and BHC experiments:
        ``a_f = 2 m_f``, ``b_f = 2 (1 - m_f)`` with m_f the mean of feature
        f (here smoothed as ``(ones_f + 1) / (N + 2)`` so that a constant
        feature keeps a proper prior).

    See Also
    --------
    sktrellis.ExactFlatClustering : The exact posterior over partitions of this energy.
    sktrellis.baselines.BayesianHierarchicalClustering : Greedy DPM trees with the same priors.
    sklearn.mixture.BayesianGaussianMixture : Variational DPM of Gaussians (covariance_type).

    References
    ----------
    R. M. Neal. Markov chain sampling methods for Dirichlet process mixture
    models. JCGS 2000.
    K. P. Murphy. Conjugate Bayesian analysis of the Gaussian distribution,
    2007.
    G. K. Smyth. Linear models and empirical Bayes methods for assessing
    differential expression in microarray experiments. Statistical
    Applications in Genetics and Molecular Biology 2004.
    C. Fraley, A. E. Raftery. Bayesian regularization for normal mixture
    estimation and model-based clustering. Journal of Classification 2007.
    Z. Ghahramani, K. A. Heller. Bayesian sets. NIPS 2005.
    C. S. Greenberg, N. Monath, A. Kobren, P. Flaherty, A. McGregor,
    A. McCallum. Compact representation of uncertainty in clustering.
    NeurIPS 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from sktrellis import ExactFlatClustering
    >>> from sktrellis.energies import DirichletProcessMixture
    >>> X = np.array([[0.0, 0.1], [0.2, 0.0], [0.1, 0.2],
    ...               [5.0, 5.1], [5.2, 4.9], [4.9, 5.0]])
    >>> energy = DirichletProcessMixture(covariance_prior=0.05, mean_precision_prior=0.01)
    >>> model = ExactFlatClustering(energy).fit(X)
    >>> model.labels_.tolist()
    [0, 0, 0, 1, 1, 1]
    >>> round(float(model.n_clusters_probability_[2]), 3)
    0.989
    >>> round(model.log_evidence_, 2)
    -14.66
    >>> model.predict([[0.1, 0.1], [5.1, 5.0]]).tolist()
    [0, 1]

    Many features: ``"diag"`` keeps O(d) statistics per subset.

    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(10, 2000)) + np.repeat([0.0, 1.0], 5)[:, None]
    >>> diag = ExactFlatClustering(DirichletProcessMixture(covariance_type="diag")).fit(X)
    >>> diag.labels_.tolist()
    [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]
    """

    _parameter_constraints = {
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "component": [StrOptions({"gaussian", "bernoulli"})],
        "covariance_type": [StrOptions({"full", "diag", "spherical"})],
        "mean_prior": ["array-like", None],
        "mean_precision_prior": [Interval(Real, 0, None, closed="neither"), None],
        "degrees_of_freedom_prior": [Interval(Real, 0, None, closed="neither"), None],
        "covariance_prior": [Interval(Real, 0, None, closed="neither"), "array-like", None],
        "bernoulli_prior": ["array-like", None],
    }

    def __init__(self, alpha=1.0, component="gaussian", *, covariance_type="full",
                 mean_prior=None, mean_precision_prior=None, degrees_of_freedom_prior=None,
                 covariance_prior=None, bernoulli_prior=None):
        self.alpha = alpha
        self.component = component
        self.covariance_type = covariance_type
        self.mean_prior = mean_prior
        self.mean_precision_prior = mean_precision_prior
        self.degrees_of_freedom_prior = degrees_of_freedom_prior
        self.covariance_prior = covariance_prior
        self.bernoulli_prior = bernoulli_prior

    def component_model(self, X):
        """Validate X against the component and resolve the prior's data-dependent defaults.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The data the defaults are taken from.

        Returns
        -------
        component : ConjugateComponent
            Scores groups of points from the sums of their statistics.

        Examples
        --------
        >>> import numpy as np
        >>> from sktrellis.energies import DirichletProcessMixture
        >>> X = np.array([[0, 1], [1, 1], [0, 0.0]])
        >>> model = DirichletProcessMixture(component="bernoulli").component_model(X)
        >>> model.prior["a"].round(2).tolist(), model.prior["b"].round(2).tolist()
        ([0.8, 1.2], [1.2, 0.8])
        """
        self._validate_params()
        X = np.asarray(X, dtype=np.float64)
        n_points, n_features = X.shape
        if self.component == "bernoulli":
            return ConjugateComponent(
                "bernoulli", self.covariance_type, n_features, self._beta_prior(X)
            )
        return ConjugateComponent(
            "gaussian", self.covariance_type, n_features, self._gaussian_prior(X)
        )

    def _beta_prior(self, X):
        check_binary(X, "X")
        n_points, n_features = X.shape
        if self.bernoulli_prior is None:
            mean = (X.sum(axis=0) + 1.0) / (n_points + 2.0)
            return {"a": _BETA_PRIOR_STRENGTH * mean, "b": _BETA_PRIOR_STRENGTH * (1.0 - mean)}
        prior = np.asarray(self.bernoulli_prior, dtype=np.float64)
        if prior.shape != (2,) or not np.all(prior > 0) or not np.all(np.isfinite(prior)):
            raise ValueError(
                "bernoulli_prior must be two positive pseudo-counts (a, b), got "
                f"{self.bernoulli_prior!r}; or None for the data-dependent prior"
            )
        return {"a": np.full(n_features, prior[0]), "b": np.full(n_features, prior[1])}

    def _gaussian_prior(self, X):
        """The Gaussian prior in working units of 2**unit (an exact rescaling).

        Squares of features anywhere in float64's range, 1e-300 to 1e300,
        stay finite and normal in those units; the prior scale is kept as
        its log (``log_scale``) beside a normalised shape, so a scale far
        from the data's is representable too. ``log_jacobian`` per point
        brings log p back to the units of X.
        """
        n_points, n_features = X.shape
        covariance_type = self.covariance_type
        if self.mean_prior is None:
            unit = unit_exponent(X)
            mean = np.ldexp(X, -unit).mean(axis=0)
        else:
            mean = np.asarray(self.mean_prior, dtype=np.float64)
            if mean.shape != (n_features,) or not np.all(np.isfinite(mean)):
                raise ValueError(
                    f"mean_prior must be {n_features} finite numbers (one per feature), "
                    f"got shape {mean.shape}"
                )
            unit = unit_exponent(X, mean)
            mean = np.ldexp(mean, -unit)
        full = covariance_type == "full"
        dof = self.degrees_of_freedom_prior
        if dof is None:
            dof = (n_features + _FULL_EXTRA_DEGREES_OF_FREEDOM if full
                   else _DIAGONAL_DEGREES_OF_FREEDOM)
        if full and not dof > n_features - 1:
            raise ValueError(
                f"degrees_of_freedom_prior={dof!r} must exceed n_features - 1 = "
                f"{n_features - 1} for a proper inverse-Wishart prior"
            )
        # Fraley & Raftery's volume rule: each of the G clusters the DP prior
        # expects takes 1/G of the data's volume, so its variances are
        # G**(-2/d) of the data's. With at least two points, so that G > 1
        # and the mean precision below is finite.
        log_clusters = np.log(expected_number_of_clusters(max(n_points, 2), self.alpha))
        log_within = -2.0 * log_clusters / n_features
        mean_precision = self.mean_precision_prior
        if mean_precision is None:
            # "full": the prior spread of the cluster means takes the rest of
            # the data's variances, E[Sigma] (1 + 1 / kappa_0) = the variances
            # (the law of total variance) with E[Sigma] = G**(-2/d) of them.
            mean_precision = 1.0 / np.expm1(-log_within) if full else 1.0
        prior = {
            "unit": unit, "mean": mean, "mean_precision": float(mean_precision),
            "degrees_of_freedom": float(dof), "root": None, "diagonal": None,
        }
        unit_log = unit * _LOG_2
        # log psi of every feature (diag), of the shared variance (spherical),
        # or (full) log c and a normalised shape with Psi_0 = c * shape.
        log_scale, root, diagonal = 0.0, None, np.ones(n_features)
        covariance = self.covariance_prior
        if covariance is None:
            # "full": Psi_0 = G**(-2/d) times the variances, E[Sigma] with
            # the default nu_0; "diag", "spherical": nu_0 G**(-2/d) times
            # the variances, so the prior mean precision is G**(2/d) / v
            # (1 / v at thousands of features, where G**(-2/d) -> 1). The
            # law of total variance's kappa_0 is not used there: it grows
            # like d / (2 log G) and, at 14 x 3000, put three planted
            # groups (each shifted on its own 150 features) and noise into singletons (benchmarks/README.md).
            variances = self._variances(X, unit)
            if covariance_type == "diag":
                log_scale = np.log(variances) + np.log(dof) + log_within
            elif covariance_type == "spherical":
                log_scale = float(np.log(variances.mean()) + np.log(dof) + log_within)
            else:
                diagonal = variances * np.exp(log_within)
        elif np.ndim(covariance) == 0:
            log_scale = float(np.log(covariance)) - 2.0 * unit_log
            if covariance_type == "diag":
                log_scale = np.full(n_features, log_scale)
        elif covariance_type == "spherical":
            raise ValueError(
                "covariance_prior of covariance_type='spherical' is the scale of one shared "
                f"variance, a positive float; got an array of shape {np.shape(covariance)}"
            )
        elif covariance_type == "diag":
            values = np.asarray(covariance, dtype=np.float64)
            if values.shape != (n_features,):
                raise ValueError(
                    f"covariance_prior of covariance_type='diag' must have shape "
                    f"({n_features},) (one scale per feature), got {values.shape}"
                )
            if not np.all(np.isfinite(values)) or not np.all(values > 0):
                raise ValueError("covariance_prior must be positive finite numbers")
            log_scale = np.log(values) - 2.0 * unit_log
        else:
            matrix = np.asarray(covariance, dtype=np.float64)
            if matrix.shape != (n_features, n_features):
                raise ValueError(
                    f"covariance_prior must have shape ({n_features}, {n_features}), "
                    f"got {matrix.shape}"
                )
            if not np.all(np.isfinite(matrix)) or not np.allclose(matrix, matrix.T):
                raise ValueError("covariance_prior must be a finite symmetric matrix")
            # Normalised by a power of two (exact) so its Cholesky factor
            # neither overflows nor underflows; the power goes to log_scale.
            exponent = unit_exponent(matrix)
            matrix = np.ldexp(matrix, -exponent)
            try:
                root = np.linalg.cholesky(matrix)
            except np.linalg.LinAlgError:
                raise ValueError("covariance_prior must be positive definite") from None
            log_scale = (exponent - 2 * unit) * _LOG_2
        log_jacobian = n_features * unit_log
        if covariance_type == "full":
            # Whitening x -> L^-1 x multiplies densities by |L| per point.
            if root is None:
                log_jacobian += 0.5 * np.log(diagonal).sum()
            else:
                log_jacobian += np.log(np.diagonal(root)).sum()
        prior.update(log_scale=log_scale, root=root, diagonal=diagonal,
                     log_jacobian=log_jacobian)
        return prior

    @staticmethod
    def _variances(X, unit):
        """Per-feature variances of X in units of 2**unit, all positive (or a ValueError)."""
        with np.errstate(over="ignore", invalid="ignore"):
            variances = np.ldexp(X, -unit).var(axis=0)
        constant = np.flatnonzero(variances <= 0)
        if constant.size and np.ptp(X[:, constant[0]]) > 0:
            raise ValueError(
                f"the variance of feature {constant[0]} of X underflows float64 "
                f"(its values span {np.ptp(X[:, constant[0]])!r}); standardize X "
                "(e.g. sklearn.preprocessing.StandardScaler) or pass covariance_prior"
            )
        if constant.size == variances.size:
            raise ValueError(
                "every feature of X is constant, so the default covariance_prior (the "
                "per-feature variances) is singular; pass covariance_prior"
            )
        # A constant feature (a pixel never inked in binarised images) has no
        # variance of its own to set a proper prior: it takes the mean variance
        # of the other features, the spherical prior's scale.
        variances[constant] = variances[variances > 0].mean()
        return variances

    def statistics_per_subset(self, n_features):
        """Number of sufficient statistics summed per subset: 1 + d + d**2 for "full".

        Parameters
        ----------
        n_features : int
            Number of features d.

        Returns
        -------
        n_statistics : int
            1 + d + d**2 (``covariance_type="full"``), 1 + 2 d ("diag"),
            2 + d ("spherical") or 1 + d (``component="bernoulli"``).
        """
        return statistics_width(self.component, self.covariance_type, n_features)

    def scratch_bytes(self, n_points, n_features=None):
        """Peak memory of the per-subset statistics and their marginal likelihoods, in bytes.

        The per-point statistics, the two half tables of 2**(N/2) rows and
        the temporaries of one chunk of subsets; the table itself is
        ``table_bytes_per_subset`` per subset.

        Parameters
        ----------
        n_points : int
            Number of samples N.
        n_features : int, default=None
            Number of features d (the statistics grow with it, as d**2 for
            ``covariance_type="full"``); None counts one chunk only.

        Returns
        -------
        n_bytes : int
            Peak bytes of the statistics.
        """
        if n_features is None:
            return 8 * _TEMPORARY_COPIES * _CHUNK_DOUBLES
        width = self.statistics_per_subset(n_features)
        n_low = n_points // 2
        rows = n_points + (1 << n_low) + (1 << (n_points - n_low))
        chunk = _TEMPORARY_COPIES * max(_CHUNK_DOUBLES, width)
        if self.component == "gaussian" and self.covariance_type == "full":
            # One d x d matrix per subset of the chunk, several times over.
            chunk = max(chunk, _TEMPORARY_COPIES * _chunk_rows(width) * width)
        return 8 * (rows * width + chunk)

    @property
    def scratch_advice(self):
        """What to change when the statistics of all subsets would not fit in memory."""
        if self.component == "gaussian" and self.covariance_type == "full":
            return (
                "use covariance_type='diag' or 'spherical' (O(n_features) statistics, "
                "where 'full' has O(n_features**2)), or reduce the features "
                "(e.g. sklearn.decomposition.PCA)"
            )
        return "use fewer samples or fewer features (e.g. sklearn.decomposition.PCA)"

    def cluster_potential(self, X):
        """Tabulate ``log alpha + log Gamma(|C|) + log p(X_C)`` for every subset C.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            The data; 0/1 only for ``component="bernoulli"``.

        Returns
        -------
        log_potential : ndarray of shape (2**n_samples,)
            The cluster log potential of every subset mask (entry 0 unused).
        """
        self._validate_params()
        X = np.asarray(X, dtype=np.float64)
        n_points = len(X)
        table = self.component_model(X).subset_log_marginals(X)
        # log alpha + log Gamma(|C|) by size, added a chunk of masks at a time.
        log_size_factor = np.log(self.alpha) + gammaln(np.maximum(np.arange(n_points + 1), 1))
        log_size_factor[0] = 0.0
        for first in range(0, len(table), _CHUNK_DOUBLES):
            masks = np.arange(first, min(first + _CHUNK_DOUBLES, len(table)), dtype=np.uint32)
            table[first : first + len(masks)] += log_size_factor[np.bitwise_count(masks)]
        return table

    def cluster_scorer(self, X):
        """Validate X and return a function scoring explicit clusters.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            The data; 0/1 only for ``component="bernoulli"``.

        Returns
        -------
        score : callable
            ``score(clusters)``: ``log alpha + log Gamma(|C|) + log p(X_C)``
            of each cluster C, given as an array of row indices, from the
            sums of its points' sufficient statistics (the same numbers as
            ``cluster_potential``).
        """
        self._validate_params()
        X = np.asarray(X, dtype=np.float64)
        component = self.component_model(X)
        statistics = component.statistics(X)
        log_alpha = np.log(self.alpha)

        def score(clusters):
            values = np.empty(len(clusters))
            for first, indicator in cluster_indicator_blocks(
                clusters, len(X), statistics.shape[1]
            ):
                sums = indicator @ statistics
                values[first : first + len(sums)] = (
                    log_alpha + gammaln(sums[:, 0]) + component.log_marginal(sums)
                )
            return values

        return score

    def log_evidence(self, log_partition, n_samples):
        """The log evidence log p(X) of the DP mixture from its log partition function.

        The CRP prior of a partition is ``prod_C alpha Gamma(|C|)`` divided by
        ``Gamma(alpha + N) / Gamma(alpha)``, so ``log p(X) = log Z -
        log Gamma(alpha + N) + log Gamma(alpha)``.

        Parameters
        ----------
        log_partition : float
            The log Z of ``cluster_potential(X)``.
        n_samples : int
            N, the number of points.

        Returns
        -------
        log_evidence : float
            The log p(X).
        """
        self._validate_params()
        return float(log_partition - gammaln(self.alpha + n_samples) + gammaln(self.alpha))

    def log_predictive(self, X, labels, X_new):
        """The log predictive log p(x_new | the points of cluster k), every point and cluster.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            The data the clusters were fitted on (it fixes the prior's
            data-dependent defaults).
        labels : ndarray of shape (n_samples,)
            Cluster labels 0..n_clusters-1 of X.
        X_new : ndarray of shape (n_new, n_features)
            The new points.

        Returns
        -------
        log_predictive : ndarray of shape (n_new, n_clusters)
            Row i, column k: log p(X_new[i] | the points of cluster k).
        """
        component = self.component_model(X)
        X = np.asarray(X, dtype=np.float64)
        X_new = np.asarray(X_new, dtype=np.float64)
        n_clusters = int(labels.max()) + 1
        point_statistics = component.statistics(X)
        cluster_statistics = np.zeros((n_clusters, point_statistics.shape[1]))
        np.add.at(cluster_statistics, labels, point_statistics)
        before = component.log_marginal(cluster_statistics)
        out = np.empty((len(X_new), n_clusters))
        for first in range(0, len(X_new), _PREDICT_CHUNK):
            new = component.statistics(X_new[first : first + _PREDICT_CHUNK], "X_new")
            joint = (new[:, None, :] + cluster_statistics[None, :, :]).reshape(
                -1, cluster_statistics.shape[1]
            )
            after = component.log_marginal(joint).reshape(len(new), n_clusters)
            out[first : first + len(new)] = after - before
        return out
