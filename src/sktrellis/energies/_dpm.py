"""The Dirichlet process mixture as a flat energy: its exact posterior over partitions."""
from numbers import Real

import numpy as np
from scipy.special import gammaln
from sklearn.utils._param_validation import Interval, StrOptions

from .._validation import check_no_overflow, unit_exponent
from ._base import FlatEnergy
from ._conjugate import beta_bernoulli_log_marginal, normal_inverse_wishart_log_marginal
from .._engine.tables import subset_sums

# Per-subset statistics are built this many doubles at a time; the
# marginal likelihoods of a chunk take a few times that in temporaries.
_CHUNK_DOUBLES = 1 << 18
_CHUNK_BYTES = 6 * 8 * _CHUNK_DOUBLES
# New points are scored against the clusters this many at a time.
_PREDICT_CHUNK = 1024


def _subset_statistic_chunks(point_statistics):
    """Sums of per-point statistics over all subsets, yielded in chunks of masks.

    The points are split into a low and a high half; a subset's sums are
    its low part's plus its high part's, so only two tables of 2**(N/2)
    rows are ever tabulated. Yields (first mask, sums) with sums of shape
    (n_masks, n_statistics) for the consecutive masks from first mask on.
    """
    n_points, width = point_statistics.shape
    n_low = n_points // 2
    low = subset_sums(point_statistics[:n_low])
    high = subset_sums(point_statistics[n_low:])
    block = max(1, _CHUNK_DOUBLES // (width << n_low))
    for first in range(0, len(high), block):
        sums = high[first : first + block, None, :] + low[None, :, :]
        yield first << n_low, sums.reshape(-1, width)


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

    Parameters
    ----------
    alpha : float, default=1.0
        Concentration of the Dirichlet process: larger values favour more
        clusters (the prior expects about ``alpha log(1 + N / alpha)``).
    component : {"gaussian", "bernoulli"}, default="gaussian"
        ``"gaussian"``: multivariate normal with unknown mean and full
        covariance under a Normal-Inverse-Wishart prior; computed in units
        of a power of two near the largest magnitude of X (exact), so
        features anywhere from 1e-300 to 1e300 give the posterior of the
        same data at unit scale, with log p(X) shifted by the Jacobian
        ``-n_samples * n_features * log(scale)``. ``"bernoulli"``:
        independent binary features (X holds only 0 and 1), each with a
        Beta prior on its probability of a 1.
    mean_prior : array-like of shape (n_features,), default=None
        Gaussian: prior mean mu_0 of the cluster means; None uses the mean
        of X.
    mean_precision_prior : float, default=1.0
        Gaussian: kappa_0, the prior mean's weight in points; a cluster's
        mean is drawn from N(mu_0, covariance / kappa_0), so small values
        let cluster means lie many within-cluster spreads apart.
    degrees_of_freedom_prior : float, default=None
        Gaussian: nu_0 > n_features - 1 of the inverse-Wishart prior of the
        covariances; None uses n_features (as scikit-learn's
        ``BayesianGaussianMixture``).
    covariance_prior : float or array-like of shape (n_features, n_features), \
            default=None
        Gaussian: the inverse-Wishart scale matrix Psi_0 (symmetric positive
        definite; a float means that times the identity). None uses the
        diagonal matrix of the per-feature variances of X, which unlike the
        full empirical covariance stays positive definite with fewer points
        than features.

        The defaults follow scikit-learn's ``BayesianGaussianMixture``: broad
        priors whose clusters may be as wide as the whole data set, which on
        a few dozen points favours few clusters. For tight clusters, set
        ``covariance_prior`` near the expected within-cluster variance and
        a small ``mean_precision_prior``; ``log_evidence_`` of
        ``ExactFlatClustering`` compares settings (empirical Bayes).
    bernoulli_prior : tuple of two floats, default=(1.0, 1.0)
        Bernoulli: the (a, b) of the Beta(a, b) prior of every feature's
        probability of a 1 (pseudo-counts of ones and zeros); (1, 1) is
        uniform, (0.5, 0.5) Jeffreys'.

    References
    ----------
    R. M. Neal. Markov chain sampling methods for Dirichlet process mixture
    models. JCGS 2000.
    K. P. Murphy. Conjugate Bayesian analysis of the Gaussian distribution,
    2007.
    C. S. Greenberg, N. Monath, A. Kobren, P. Flaherty, A. McGregor,
    A. McCallum. Compact representation of uncertainty in clustering.
    NeurIPS 2018.

    Examples
    --------
    >>> import numpy as np
    >>> from sktrellis.flat import ExactFlatClustering
    >>> from sktrellis.energies import DirichletProcessMixture
    >>> X = np.array([[0.0, 0.1], [0.2, 0.0], [0.1, 0.2],
    ...               [5.0, 5.1], [5.2, 4.9], [4.9, 5.0]])
    >>> energy = DirichletProcessMixture(covariance_prior=0.05, mean_precision_prior=0.01)
    >>> model = ExactFlatClustering(energy).fit(X)
    >>> model.labels_.tolist()
    [0, 0, 0, 1, 1, 1]
    >>> round(float(model.n_clusters_probability_[2]), 3)
    0.987
    >>> round(model.log_evidence_, 2)
    -15.49
    >>> model.predict([[0.1, 0.1], [5.1, 5.0]]).tolist()
    [0, 1]
    """

    _parameter_constraints = {
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "component": [StrOptions({"gaussian", "bernoulli"})],
        "mean_prior": ["array-like", None],
        "mean_precision_prior": [Interval(Real, 0, None, closed="neither")],
        "degrees_of_freedom_prior": [Interval(Real, 0, None, closed="neither"), None],
        "covariance_prior": [Interval(Real, 0, None, closed="neither"), "array-like", None],
        "bernoulli_prior": ["array-like"],
    }

    def __init__(self, alpha=1.0, component="gaussian", *, mean_prior=None,
                 mean_precision_prior=1.0, degrees_of_freedom_prior=None,
                 covariance_prior=None, bernoulli_prior=(1.0, 1.0)):
        self.alpha = alpha
        self.component = component
        self.mean_prior = mean_prior
        self.mean_precision_prior = mean_precision_prior
        self.degrees_of_freedom_prior = degrees_of_freedom_prior
        self.covariance_prior = covariance_prior
        self.bernoulli_prior = bernoulli_prior

    def _prior(self, X):
        """Validate X against the component and resolve the prior's defaults from it."""
        self._validate_params()
        X = np.asarray(X, dtype=np.float64)
        n_features = X.shape[1]
        if self.component == "bernoulli":
            self._check_binary(X, "X")
            prior = np.asarray(self.bernoulli_prior, dtype=np.float64)
            if prior.shape != (2,) or not np.all(prior > 0) or not np.all(np.isfinite(prior)):
                raise ValueError(
                    "bernoulli_prior must be two positive pseudo-counts (a, b), got "
                    f"{self.bernoulli_prior!r}"
                )
            return {"a": prior[0], "b": prior[1]}

        # The Gaussian model works in units of 2**unit (an exact rescaling)
        # so that squares of features anywhere in float64's range, 1e-300 to
        # 1e300, stay finite and normal; _log_marginal adds back the
        # Jacobian, -|C| n_features unit log 2. "mean" and "scale" are in
        # those units.
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
        dof = self.degrees_of_freedom_prior
        if dof is None:
            dof = n_features
        if not dof > n_features - 1:
            raise ValueError(
                f"degrees_of_freedom_prior={dof!r} must exceed n_features - 1 = "
                f"{n_features - 1} for a proper inverse-Wishart prior"
            )
        if self.covariance_prior is None:
            with np.errstate(over="ignore", invalid="ignore"):
                variances = np.ldexp(X, -unit).var(axis=0)
            constant = np.flatnonzero(variances <= 0)
            if constant.size and np.ptp(X[:, constant[0]]) > 0:
                raise ValueError(
                    f"the variance of feature {constant[0]} of X underflows float64 "
                    f"(its values span {np.ptp(X[:, constant[0]])!r}); standardize X "
                    "(e.g. sklearn.preprocessing.StandardScaler) or pass covariance_prior"
                )
            if constant.size:
                raise ValueError(
                    f"feature {constant[0]} of X is constant, so the default "
                    "covariance_prior (the per-feature variances) is singular; drop "
                    "constant features or pass covariance_prior"
                )
            scale = np.diag(variances)
        elif np.ndim(self.covariance_prior) == 0:
            scale = np.ldexp(float(self.covariance_prior) * np.eye(n_features), -2 * unit)
        else:
            scale = np.asarray(self.covariance_prior, dtype=np.float64)
            if scale.shape != (n_features, n_features):
                raise ValueError(
                    f"covariance_prior must have shape ({n_features}, {n_features}), "
                    f"got {scale.shape}"
                )
            if not np.all(np.isfinite(scale)) or not np.allclose(scale, scale.T):
                raise ValueError("covariance_prior must be a finite symmetric matrix")
            try:
                np.linalg.cholesky(scale)
            except np.linalg.LinAlgError:
                raise ValueError("covariance_prior must be positive definite") from None
            scale = np.ldexp(scale, -2 * unit)
        return {
            "unit": unit,
            "mean": mean, "mean_precision": float(self.mean_precision_prior),
            "degrees_of_freedom": float(dof), "scale": scale,
        }

    @staticmethod
    def _check_binary(X, name):
        binary = (X == 0.0) | (X == 1.0)
        if not binary.all():
            row, column = np.argwhere(~binary)[0]
            raise ValueError(
                "DirichletProcessMixture(component='bernoulli') needs binary data "
                f"(0 and 1 only); {name}[{row}, {column}] is {float(X[row, column])!r}"
            )

    def _point_statistics(self, X, prior):
        """Per-point sufficient statistics: (1, x) or, Gaussian, (1, x, vec(x x^T)) of x - mu_0."""
        ones = np.ones((len(X), 1))
        if self.component == "bernoulli":
            return np.hstack([ones, X])
        # Centring at the prior mean keeps the posterior scale free of
        # cancellation between large raw second moments.
        with np.errstate(over="ignore", invalid="ignore"):
            centred = np.ldexp(X, -prior["unit"]) - prior["mean"]
            outer = centred[:, :, None] * centred[:, None, :]
            moments = np.abs(outer).sum(axis=0)
        check_no_overflow(
            moments, "DirichletProcessMixture(component='gaussian')",
            "the second moments of X",
            "standardize X (e.g. sklearn.preprocessing.StandardScaler)",
        )
        return np.hstack([ones, centred, outer.reshape(len(X), -1)])

    def _log_marginal(self, statistics, prior, n_features):
        """log p(X_C) of groups given the sums of their point statistics."""
        counts = statistics[:, 0]
        sums = statistics[:, 1 : 1 + n_features]
        if self.component == "bernoulli":
            return beta_bernoulli_log_marginal(counts, sums, a=prior["a"], b=prior["b"])
        outer = statistics[:, 1 + n_features :].reshape(-1, n_features, n_features)
        log_marginal = normal_inverse_wishart_log_marginal(
            counts, sums, outer, mean=np.zeros(n_features),
            mean_precision=prior["mean_precision"],
            degrees_of_freedom=prior["degrees_of_freedom"], scale=prior["scale"],
        )
        if prior["unit"]:
            log_marginal -= counts * (n_features * prior["unit"] * np.log(2.0))
        return log_marginal

    def cluster_bytes(self, n_points):
        """Peak memory of the table, its chunked statistics and the flat trellis, in bytes.

        Parameters
        ----------
        n_points : int

        Returns
        -------
        n_bytes : int
        """
        return super().cluster_bytes(n_points) + _CHUNK_BYTES

    def cluster_potential(self, X):
        """Tabulate ``log alpha + log Gamma(|C|) + log p(X_C)`` for every subset C.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)

        Returns
        -------
        log_potential : ndarray of shape (2**n_samples,)
        """
        prior = self._prior(X)
        X = np.asarray(X, dtype=np.float64)
        n_points, n_features = X.shape
        table = np.empty(1 << n_points)
        log_size_factor = np.log(self.alpha) + gammaln(np.arange(1, n_points + 1))
        for first, statistics in _subset_statistic_chunks(self._point_statistics(X, prior)):
            sizes = statistics[:, 0].round().astype(np.int64)
            values = self._log_marginal(statistics, prior, n_features)
            values += log_size_factor[np.maximum(sizes, 1) - 1]
            table[first : first + len(values)] = values
        table[0] = 0.0
        return table

    def log_evidence(self, log_partition, n_samples):
        """log p(X) of the DP mixture from the log partition function of its potentials.

        The CRP prior of a partition is ``prod_C alpha Gamma(|C|)`` divided by
        ``Gamma(alpha + N) / Gamma(alpha)``, so ``log p(X) = log Z -
        log Gamma(alpha + N) + log Gamma(alpha)``.

        Parameters
        ----------
        log_partition : float
            log Z of ``cluster_potential(X)``.
        n_samples : int
            N, the number of points.

        Returns
        -------
        log_evidence : float
        """
        self._validate_params()
        return float(log_partition - gammaln(self.alpha + n_samples) + gammaln(self.alpha))

    def log_predictive(self, X, labels, X_new):
        """log p(x_new | the points of cluster k) for every new point and cluster.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            The data the clusters were fitted on (it fixes the prior's
            data-dependent defaults).
        labels : ndarray of shape (n_samples,)
            Cluster labels 0..n_clusters-1 of X.
        X_new : ndarray of shape (n_new, n_features)

        Returns
        -------
        log_predictive : ndarray of shape (n_new, n_clusters)
        """
        prior = self._prior(X)
        X = np.asarray(X, dtype=np.float64)
        X_new = np.asarray(X_new, dtype=np.float64)
        if self.component == "bernoulli":
            self._check_binary(X_new, "X_new")
        n_features = X.shape[1]
        n_clusters = int(labels.max()) + 1
        point_statistics = self._point_statistics(X, prior)
        cluster_statistics = np.zeros((n_clusters, point_statistics.shape[1]))
        np.add.at(cluster_statistics, labels, point_statistics)
        before = self._log_marginal(cluster_statistics, prior, n_features)
        out = np.empty((len(X_new), n_clusters))
        for first in range(0, len(X_new), _PREDICT_CHUNK):
            new = self._point_statistics(X_new[first : first + _PREDICT_CHUNK], prior)
            joint = (new[:, None, :] + cluster_statistics[None, :, :]).reshape(
                -1, cluster_statistics.shape[1]
            )
            after = self._log_marginal(joint, prior, n_features).reshape(len(new), n_clusters)
            out[first : first + len(new)] = after - before
        return out
