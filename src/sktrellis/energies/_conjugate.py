"""Conjugate log marginal likelihoods from sufficient statistics, vectorised.

Each function takes the sufficient statistics of many groups of points at
once (one row per group: a cluster, a subset, a tree node) and returns the
log marginal likelihood ``log p(x_1, ..., x_n)`` of every group, the model
parameters integrated out under a conjugate prior. Groups with no points
have log marginal likelihood 0. Used by the Dirichlet process mixture energy
(every subset of the trellis) and by Bayesian hierarchical clustering (the
p(D_k) term of every merge).
"""
import numpy as np
from scipy.special import betaln, gammaln


def multivariate_gammaln(a, dim):
    """log of the multivariate gamma function Gamma_dim(a), elementwise in a.

    Parameters
    ----------
    a : array-like
        Arguments, all > (dim - 1) / 2.
    dim : int
        Dimension.

    Returns
    -------
    values : ndarray of the shape of a

    Examples
    --------
    >>> from scipy.special import multigammaln
    >>> from sktrellis.energies._conjugate import multivariate_gammaln
    >>> bool(abs(multivariate_gammaln(3.5, 3) - multigammaln(3.5, 3)) < 1e-12)
    True
    """
    a = np.asarray(a, dtype=np.float64)
    shifts = (1.0 - np.arange(1, dim + 1)) / 2.0
    return dim * (dim - 1) / 4.0 * np.log(np.pi) + gammaln(a[..., None] + shifts).sum(axis=-1)


def normal_inverse_wishart_log_marginal(counts, sums, outer_sums, *, mean, mean_precision,
                                        degrees_of_freedom, scale):
    """log p(X) of Gaussian data with unknown mean and covariance, NIW prior.

    The covariance is drawn from an inverse Wishart with ``scale`` Psi_0
    and ``degrees_of_freedom`` nu_0, the mean from N(mean, covariance /
    mean_precision), and the points i.i.d. from N(mean, covariance). With n
    points, kappa_n = kappa_0 + n, nu_n = nu_0 + n and Psi_n the posterior
    scale (Murphy 2007, eq. 266)::

        log p(X) = -n d / 2 log(pi) + log Gamma_d(nu_n / 2) - log Gamma_d(nu_0 / 2)
                   + nu_0 / 2 log|Psi_0| - nu_n / 2 log|Psi_n|
                   + d / 2 (log kappa_0 - log kappa_n)

    Parameters
    ----------
    counts : array-like of shape (n_groups,)
        Number of points n of every group.
    sums : array-like of shape (n_groups, n_features)
        Sum of the points of every group.
    outer_sums : array-like of shape (n_groups, n_features, n_features)
        Sum of the outer products x x^T of the points of every group. For
        accuracy, give statistics of data centred near ``mean`` (then the
        shift to ``mean`` cancels nothing large).
    mean : array-like of shape (n_features,)
        Prior mean of the cluster means, mu_0.
    mean_precision : float
        kappa_0 > 0: how many points' worth of confidence the prior mean has.
    degrees_of_freedom : float
        nu_0 > n_features - 1.
    scale : array-like of shape (n_features, n_features)
        Psi_0, symmetric positive definite.

    Returns
    -------
    log_marginal : ndarray of shape (n_groups,)

    References
    ----------
    K. P. Murphy. Conjugate Bayesian analysis of the Gaussian distribution,
    2007, section 9.

    Examples
    --------
    One point in one dimension, unit prior: a Student t density at the point.

    >>> import numpy as np
    >>> from scipy.stats import t
    >>> from sktrellis.energies._conjugate import normal_inverse_wishart_log_marginal
    >>> x = 0.7
    >>> value = normal_inverse_wishart_log_marginal(
    ...     [1], [[x]], [[[x * x]]], mean=[0.0], mean_precision=1.0,
    ...     degrees_of_freedom=3.0, scale=[[2.0]])[0]
    >>> # t with nu_0 - d + 1 = 3 dof, scale**2 = Psi_0 (kappa_0 + 1) / (kappa_0 * 3)
    >>> bool(np.isclose(value, t.logpdf(x, df=3.0, scale=np.sqrt(2.0 * 2.0 / 3.0))))
    True
    """
    counts = np.asarray(counts, dtype=np.float64)
    sums = np.asarray(sums, dtype=np.float64)
    outer_sums = np.asarray(outer_sums, dtype=np.float64)
    mean = np.asarray(mean, dtype=np.float64)
    scale = np.asarray(scale, dtype=np.float64)
    dim = mean.shape[0]
    kappa_n = mean_precision + counts
    nu_n = degrees_of_freedom + counts
    # Statistics of x - mu_0; then Psi_n = Psi_0 + sum (x - mu_0)(x - mu_0)^T
    # - s s^T / kappa_n with s = sum (x - mu_0): the scatter about the sample
    # mean plus the sample mean's pull away from mu_0.
    shifted = sums - counts[:, None] * mean
    shifted_outer = (
        outer_sums
        - sums[:, :, None] * mean[None, None, :]
        - mean[None, :, None] * sums[:, None, :]
        + counts[:, None, None] * np.outer(mean, mean)
    )
    posterior_scale = (
        scale + shifted_outer - shifted[:, :, None] * shifted[:, None, :] / kappa_n[:, None, None]
    )
    _, log_det_posterior = np.linalg.slogdet(posterior_scale)
    _, log_det_prior = np.linalg.slogdet(scale)
    return (
        -0.5 * counts * dim * np.log(np.pi)
        + multivariate_gammaln(nu_n / 2.0, dim)
        - multivariate_gammaln(degrees_of_freedom / 2.0, dim)
        + 0.5 * degrees_of_freedom * log_det_prior
        - 0.5 * nu_n * log_det_posterior
        + 0.5 * dim * (np.log(mean_precision) - np.log(kappa_n))
    )


def beta_bernoulli_log_marginal(counts, ones, *, a, b):
    """log p(X) of binary data, each feature Bernoulli with a Beta(a, b) prior.

    Features are independent; feature f of a group with n points of which
    k_f are 1 contributes ``log B(a + k_f, b + n - k_f) - log B(a, b)``.

    Parameters
    ----------
    counts : array-like of shape (n_groups,)
        Number of points n of every group.
    ones : array-like of shape (n_groups, n_features)
        Number of points with a 1 in each feature.
    a, b : float or array-like of shape (n_features,)
        Beta prior pseudo-counts of ones and zeros, > 0.

    Returns
    -------
    log_marginal : ndarray of shape (n_groups,)

    Examples
    --------
    Under a uniform prior, a sequence with k ones among n has probability
    k! (n - k)! / (n + 1)!.

    >>> import math
    >>> from sktrellis.energies._conjugate import beta_bernoulli_log_marginal
    >>> value = beta_bernoulli_log_marginal([5], [[2]], a=1.0, b=1.0)[0]
    >>> bool(abs(value - math.log(2 * 6 / 720)) < 1e-12)
    True
    """
    counts = np.asarray(counts, dtype=np.float64)
    ones = np.asarray(ones, dtype=np.float64)
    zeros = counts[:, None] - ones
    return np.sum(betaln(a + ones, b + zeros) - betaln(a, b), axis=1)
