"""Conjugate log marginal likelihoods from sufficient statistics, vectorised.

Each function takes the sufficient statistics of many groups of points at
once (one row per group: a cluster, a subset, a tree node) and returns the
log marginal likelihood ``log p(x_1, ..., x_n)`` of every group, the model
parameters integrated out under a conjugate prior. Groups with no points
have log marginal likelihood 0. Used by the Dirichlet process mixture energy
(every subset of the trellis) and by Bayesian hierarchical clustering (the
p(D_k) term of every merge).

The Gaussian marginals take the prior scale as a matrix or vector times
``exp(log_scale_factor)`` and add it to the data's scatter in log space
(``log(exp(a) + b)`` as ``logaddexp``), so a prior scale 1e300 times larger
or smaller than the data's scatter gives the model's value, not an overflow
or a singular matrix.
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


def _log_plus(log_a, b):
    """log(exp(log_a) + b) for b >= 0 (negative rounding noise counts as 0), elementwise."""
    with np.errstate(divide="ignore"):
        return np.logaddexp(log_a, np.log(np.maximum(b, 0.0)))


def normal_inverse_wishart_log_marginal(counts, sums, outer_sums, *, mean, mean_precision,
                                        degrees_of_freedom, scale, log_scale_factor=0.0):
    """log p(X) of Gaussian data with unknown mean and full covariance, NIW prior.

    The covariance is drawn from an inverse Wishart with scale Psi_0 =
    ``exp(log_scale_factor) * scale`` and ``degrees_of_freedom`` nu_0, the
    mean from N(mean, covariance / mean_precision), and the points i.i.d.
    from N(mean, covariance). With n points, kappa_n = kappa_0 + n, nu_n =
    nu_0 + n and Psi_n the posterior scale (Murphy 2007, eq. 266)::

        log p(X) = -n d / 2 log(pi) + log Gamma_d(nu_n / 2) - log Gamma_d(nu_0 / 2)
                   + nu_0 / 2 log|Psi_0| - nu_n / 2 log|Psi_n|
                   + d / 2 (log kappa_0 - log kappa_n)

    ``log|Psi_n|`` is computed as ``log|scale| + sum_i log(c + l_i)`` with c
    the scale factor and l_i the eigenvalues of the scatter whitened by
    ``scale``; the scatter of n < d points has rank n, so its d - n smallest
    eigenvalues are zero exactly (not rounding noise), which keeps the value
    right when c is far below the data's scale.

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
        Symmetric positive definite; Psi_0 is this times ``exp(log_scale_factor)``.
    log_scale_factor : float, default=0.0
        log of the factor on ``scale``, for prior scales outside float64.

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
    # Statistics of x - mu_0; the scatter is sum (x - mu_0)(x - mu_0)^T
    # - s s^T / kappa_n with s = sum (x - mu_0): the scatter about the sample
    # mean plus the sample mean's pull away from mu_0.
    shifted = sums - counts[:, None] * mean
    shifted_outer = (
        outer_sums
        - sums[:, :, None] * mean[None, None, :]
        - mean[None, :, None] * sums[:, None, :]
        + counts[:, None, None] * np.outer(mean, mean)
    )
    scatter = shifted_outer - shifted[:, :, None] * shifted[:, None, :] / kappa_n[:, None, None]
    # Whitened by scale = L L^T: Psi_n = L (c I + L^-1 scatter L^-T) L^T.
    root = np.linalg.cholesky(scale)
    whitened = np.linalg.solve(root, np.linalg.solve(root, scatter).swapaxes(-1, -2))
    eigenvalues = np.linalg.eigvalsh((whitened + whitened.swapaxes(-1, -2)) / 2.0)
    # Ascending; the scatter of n points has rank at most n.
    eigenvalues[np.arange(dim)[None, :] < dim - counts[:, None]] = 0.0
    log_det_scale = 2.0 * np.log(np.diagonal(root)).sum()
    log_det_prior = dim * log_scale_factor + log_det_scale
    log_det_posterior = log_det_scale + _log_plus(log_scale_factor, eigenvalues).sum(axis=1)
    return (
        -0.5 * counts * dim * np.log(np.pi)
        + multivariate_gammaln(nu_n / 2.0, dim)
        - multivariate_gammaln(degrees_of_freedom / 2.0, dim)
        + 0.5 * degrees_of_freedom * log_det_prior
        - 0.5 * nu_n * log_det_posterior
        + 0.5 * dim * (np.log(mean_precision) - np.log(kappa_n))
    )


def normal_inverse_gamma_log_marginal(counts, sums, square_sums, *, mean, mean_precision,
                                      degrees_of_freedom, log_scale, shared=False):
    """log p(X) of Gaussian data with a diagonal or spherical covariance, inverse-gamma prior.

    Every feature f has its own mean, drawn from N(mean_f, sigma_f**2 /
    mean_precision), and the points are i.i.d. N(mean_f, sigma_f**2) in
    each feature. Diagonal (``shared=False``): every sigma_f**2 is drawn
    independently from InvGamma(nu_0 / 2, psi_f / 2), so the marginal is
    the product over features of the one-feature Normal-Inverse-Wishart
    marginal. Spherical (``shared=True``): one sigma**2, drawn from
    InvGamma(nu_0 / 2, psi / 2), is shared by all d features. With n
    points, m = n d (spherical) or n (per feature), kappa_n = kappa_0 + n and
    the scatter T = sum (x - mu_0)**2 - (sum (x - mu_0))**2 / kappa_n (summed
    over the features when shared)::

        log p = -m / 2 log(pi) + d' / 2 (log kappa_0 - log kappa_n)
                + log Gamma((nu_0 + m) / 2) - log Gamma(nu_0 / 2)
                + nu_0 / 2 log psi - (nu_0 + m) / 2 log(psi + T)

    summed over the features (d' = 1 per feature) or once with d' = d.

    Parameters
    ----------
    counts : array-like of shape (n_groups,)
        Number of points n of every group.
    sums, square_sums : array-like of shape (n_groups, n_features)
        Sums of x and of x**2 of every group, feature by feature (best
        centred near ``mean``).
    mean : array-like of shape (n_features,)
        Prior mean mu_0.
    mean_precision : float
        kappa_0 > 0.
    degrees_of_freedom : float
        nu_0 > 0.
    log_scale : float or array-like of shape (n_features,)
        log psi_f of every feature (diagonal), or log psi (spherical, a float).
    shared : bool, default=False
        One variance for all features (spherical) instead of one per feature.

    Returns
    -------
    log_marginal : ndarray of shape (n_groups,)

    References
    ----------
    K. P. Murphy. Conjugate Bayesian analysis of the Gaussian distribution,
    2007, section 6 (the normal-inverse-chi-squared prior).

    Examples
    --------
    One feature: the Normal-Inverse-Wishart marginal in one dimension.

    >>> import numpy as np
    >>> from sktrellis.energies._conjugate import (
    ...     normal_inverse_gamma_log_marginal, normal_inverse_wishart_log_marginal)
    >>> x = np.array([[0.3], [-1.2], [0.8]])
    >>> a = normal_inverse_gamma_log_marginal(
    ...     [3], x.sum(0)[None], (x**2).sum(0)[None], mean=[0.1], mean_precision=0.5,
    ...     degrees_of_freedom=3.0, log_scale=np.log([2.0]))[0]
    >>> b = normal_inverse_wishart_log_marginal(
    ...     [3], x.sum(0)[None], (x.T @ x)[None], mean=[0.1], mean_precision=0.5,
    ...     degrees_of_freedom=3.0, scale=[[2.0]])[0]
    >>> bool(np.isclose(a, b))
    True
    """
    counts = np.asarray(counts, dtype=np.float64)
    sums = np.asarray(sums, dtype=np.float64)
    square_sums = np.asarray(square_sums, dtype=np.float64)
    mean = np.asarray(mean, dtype=np.float64)
    log_scale = np.asarray(log_scale, dtype=np.float64)
    kappa_n = mean_precision + counts
    shifted = sums - counts[:, None] * mean
    # sum (x - mu_0)**2 per feature, then the scatter T of each feature.
    shifted_squares = square_sums - 2.0 * mean * sums + counts[:, None] * mean**2
    scatter = shifted_squares - shifted**2 / kappa_n[:, None]
    if shared:
        # One variance for all features: pooled over d features per point.
        n_mean_dims = sums.shape[1]
        scatter = scatter.sum(axis=1)
        n_values = counts * n_mean_dims
    else:
        n_mean_dims = 1
        n_values = counts[:, None]
        kappa_n = kappa_n[:, None]
    nu_n = degrees_of_freedom + n_values
    terms = (
        -0.5 * n_values * np.log(np.pi)
        + 0.5 * n_mean_dims * (np.log(mean_precision) - np.log(kappa_n))
        + gammaln(nu_n / 2.0) - gammaln(degrees_of_freedom / 2.0)
        + 0.5 * degrees_of_freedom * log_scale - 0.5 * nu_n * _log_plus(log_scale, scatter)
    )
    return terms if shared else terms.sum(axis=1)


def beta_bernoulli_log_marginal(counts, ones, *, a, b):
    """log p(X) of binary data, each feature Bernoulli with a Beta(a, b) prior.

    Features are independent; feature f of a group with n points of which
    k_f are 1 contributes ``log B(a_f + k_f, b_f + n - k_f) - log B(a_f, b_f)``.

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
