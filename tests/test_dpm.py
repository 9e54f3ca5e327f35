"""Conjugate marginal likelihoods and the Dirichlet process mixture energy.

The closed forms are checked against independent routes: the chain rule of
posterior predictive densities (Student t, Beta-Bernoulli) and numerical
integration over the parameters.
"""
import math

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import gammaln, multigammaln

from sktrellis.energies import DirichletProcessMixture
from sktrellis.energies import _dpm
from sktrellis.energies._conjugate import (
    beta_bernoulli_log_marginal,
    multivariate_gammaln,
    normal_inverse_wishart_log_marginal,
)


def _niw_statistics(X):
    return [len(X)], X.sum(axis=0)[None], (X.T @ X)[None]


def _random_prior(rng, dim):
    root = rng.normal(size=(dim, dim))
    return dict(
        mean=rng.normal(size=dim), mean_precision=rng.uniform(0.1, 3.0),
        degrees_of_freedom=dim - 1 + rng.uniform(0.5, 4.0),
        scale=root @ root.T + dim * np.eye(dim),
    )


def _student_t_chain_rule(X, mean, mean_precision, degrees_of_freedom, scale):
    """sum_i log p(x_i | x_<i) with the NIW posterior predictive (Murphy 2007, eq. 258)."""
    dim = X.shape[1]
    total = 0.0
    for n in range(len(X)):
        seen = X[:n]
        kappa = mean_precision + n
        nu = degrees_of_freedom + n
        if n:
            centre = seen.mean(axis=0)
            scatter = (seen - centre).T @ (seen - centre)
            shift = centre - mean
            posterior_mean = (mean_precision * mean + n * centre) / kappa
            posterior_scale = scale + scatter + mean_precision * n / kappa * np.outer(shift, shift)
        else:
            posterior_mean, posterior_scale = mean, scale
        dof = nu - dim + 1
        shape = posterior_scale * (kappa + 1) / (kappa * dof)
        total += stats.multivariate_t(loc=posterior_mean, shape=shape, df=dof).logpdf(X[n])
    return total


@pytest.mark.parametrize("dim", [1, 2, 3])
@pytest.mark.parametrize("n_points", [1, 2, 5, 9])
def test_niw_marginal_is_the_chain_rule_of_student_t_predictives(
    dim, n_points, global_random_seed
):
    rng = np.random.default_rng(global_random_seed + 10 * dim + n_points)
    prior = _random_prior(rng, dim)
    X = rng.normal(size=(n_points, dim)) * 2.0 + 1.0
    value = normal_inverse_wishart_log_marginal(*_niw_statistics(X), **prior)[0]
    assert value == pytest.approx(_student_t_chain_rule(X, **prior), rel=1e-10)
    # Exchangeable: any order of the points gives the same chain rule.
    shuffled = X[rng.permutation(n_points)]
    assert value == pytest.approx(_student_t_chain_rule(shuffled, **prior), rel=1e-10)


def test_niw_marginal_matches_numerical_integration():
    """1-d: integrate N(x | mu, s2) N(mu | m0, s2 / k0) InvGamma(s2 | nu0 / 2, psi0 / 2)."""
    X = [0.3, -0.8, 1.4]
    m0, k0, nu0, psi0 = 0.2, 0.7, 2.5, 1.3
    shape, rate = nu0 / 2, psi0 / 2

    def integrand(mu, t):
        # Over t = log s2 (Jacobian s2), in log space: the tails are long.
        s2 = math.exp(t)
        squares = sum((x - mu) ** 2 for x in X)
        return math.exp(
            -0.5 * len(X) * math.log(2 * math.pi * s2) - squares / (2 * s2)
            - 0.5 * math.log(2 * math.pi * s2 / k0) - k0 * (mu - m0) ** 2 / (2 * s2)
            + shape * math.log(rate) - math.lgamma(shape) - shape * t - rate / s2
        )

    value, _ = integrate.dblquad(integrand, -12.0, 12.0, -30.0, 30.0, epsabs=0, epsrel=1e-9)
    expected = normal_inverse_wishart_log_marginal(
        *_niw_statistics(np.array(X)[:, None]), mean=[m0], mean_precision=k0,
        degrees_of_freedom=nu0, scale=[[psi0]],
    )[0]
    assert expected == pytest.approx(math.log(value), abs=1e-7)


def test_niw_marginal_of_no_points_is_zero_and_shift_is_exact():
    rng = np.random.default_rng(0)
    prior = _random_prior(rng, 2)
    empty = normal_inverse_wishart_log_marginal(
        [0], np.zeros((1, 2)), np.zeros((1, 2, 2)), **prior
    )
    assert empty[0] == 0.0
    # Statistics of raw data with a prior mean, or of data minus that mean
    # with a zero prior mean: the same model.
    X = rng.normal(size=(6, 2)) + 3.0
    raw = normal_inverse_wishart_log_marginal(*_niw_statistics(X), **prior)[0]
    centred = normal_inverse_wishart_log_marginal(
        *_niw_statistics(X - prior["mean"]), **{**prior, "mean": np.zeros(2)}
    )[0]
    assert raw == pytest.approx(centred, rel=1e-12)


@pytest.mark.parametrize("a, b", [(1.0, 1.0), (0.5, 0.5), (2.0, 0.3)])
def test_beta_bernoulli_marginal_is_the_chain_rule(a, b, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    X = (rng.random((9, 4)) < 0.3).astype(float)
    value = beta_bernoulli_log_marginal([9], X.sum(axis=0)[None], a=a, b=b)[0]
    chain = 0.0
    for n in range(len(X)):
        ones = X[:n].sum(axis=0)
        p_one = (a + ones) / (a + b + n)
        chain += np.sum(np.where(X[n] == 1, np.log(p_one), np.log1p(-p_one)))
    assert value == pytest.approx(chain, rel=1e-12)
    # And numerical integration over each feature's probability.
    integral = 0.0
    for ones in X.sum(axis=0):
        density, _ = integrate.quad(
            lambda p: p**ones * (1 - p) ** (9 - ones) * stats.beta.pdf(p, a, b), 0, 1,
            epsabs=1e-14, limit=200,
        )
        integral += np.log(density)
    assert value == pytest.approx(integral, rel=1e-7)


@pytest.mark.parametrize("dim", [1, 3, 5])
def test_multivariate_gammaln_matches_scipy(dim):
    for a in [dim / 2.0, 1.3 * dim, 17.25]:
        assert multivariate_gammaln(a, dim) == pytest.approx(multigammaln(a, dim), rel=1e-13)


###############################################################################
# The DPM energy's per-subset table

def _direct_log_potential(X, subset, alpha, log_marginal):
    members = X[[i for i in range(len(X)) if subset >> i & 1]]
    return np.log(alpha) + gammaln(len(members)) + log_marginal(members)


@pytest.mark.parametrize("chunk", [None, 64])
def test_gaussian_table_matches_direct_computation_with_documented_defaults(
    chunk, global_random_seed, monkeypatch
):
    if chunk is not None:
        # Many small chunks of subsets: exercises the low/high split.
        monkeypatch.setattr(_dpm, "_CHUNK_DOUBLES", chunk)
    rng = np.random.default_rng(global_random_seed)
    X = rng.normal(size=(9, 3)) * [1.0, 5.0, 0.2] + 40.0
    energy = DirichletProcessMixture(alpha=0.6)
    table = energy.cluster_potential(X)
    # Defaults: data mean, kappa_0 = 1, nu_0 = n_features, diag of variances.
    prior = dict(mean=X.mean(axis=0), mean_precision=1.0, degrees_of_freedom=3.0,
                 scale=np.diag(X.var(axis=0)))

    def log_marginal(members):
        return normal_inverse_wishart_log_marginal(*_niw_statistics(members), **prior)[0]

    for subset in list(range(1, 40)) + list(rng.integers(1, 1 << 9, size=60)):
        assert table[subset] == pytest.approx(
            _direct_log_potential(X, int(subset), 0.6, log_marginal), rel=1e-9
        )


def test_bernoulli_table_matches_direct_computation(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    X = (rng.random((10, 6)) < 0.5).astype(float)
    energy = DirichletProcessMixture(alpha=2.0, component="bernoulli", bernoulli_prior=(0.5, 2.0))
    table = energy.cluster_potential(X)

    def log_marginal(members):
        return beta_bernoulli_log_marginal([len(members)], members.sum(axis=0)[None],
                                           a=0.5, b=2.0)[0]

    for subset in rng.integers(1, 1 << 10, size=100):
        assert table[subset] == pytest.approx(
            _direct_log_potential(X, int(subset), 2.0, log_marginal), rel=1e-12
        )


def test_log_predictive_is_the_student_t_of_each_cluster(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    X = rng.normal(size=(8, 2))
    labels = np.array([0, 0, 1, 1, 1, 0, 2, 1])
    X_new = rng.normal(size=(4, 2))
    energy = DirichletProcessMixture(mean_precision_prior=0.4, covariance_prior=0.8,
                                     degrees_of_freedom_prior=2.5)
    values = energy.log_predictive(X, labels, X_new)
    prior = dict(mean=X.mean(axis=0), mean_precision=0.4, degrees_of_freedom=2.5,
                 scale=0.8 * np.eye(2))
    for k in range(3):
        members = X[labels == k]
        for i, x in enumerate(X_new):
            joint = _student_t_chain_rule(np.vstack([members, x]), **prior)
            alone = _student_t_chain_rule(members, **prior)
            assert values[i, k] == pytest.approx(joint - alone, rel=1e-10)


def test_bernoulli_predictive_rejects_non_binary_new_points():
    X = np.array([[0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    energy = DirichletProcessMixture(component="bernoulli")
    with pytest.raises(ValueError, match=r"X_new\[0, 1\] is 2.0"):
        energy.log_predictive(X, np.array([0, 0, 1]), np.array([[1.0, 2.0]]))
    p_one = energy.log_predictive(X, np.array([0, 0, 1]), np.array([[1.0, 1.0]]))
    # Beta(1, 1): P(1) = (1 + ones) / (2 + n) per feature.
    assert p_one[0, 0] == pytest.approx(np.log(2 / 4) + np.log(3 / 4))
    assert p_one[0, 1] == pytest.approx(np.log(1 / 3) + np.log(1 / 3))


def test_log_evidence_subtracts_the_crp_normaliser():
    energy = DirichletProcessMixture(alpha=0.3)
    assert energy.log_evidence(2.5, 7) == pytest.approx(2.5 - gammaln(7.3) + gammaln(0.3))
