"""ExactFlatClustering against brute-force enumeration of all partitions."""
import math
import re

import numpy as np
import pytest
from scipy.special import gammaln, logsumexp
from sklearn.base import clone

from sktrellis._engine.trellis.flat_trellis import FlatTrellis, map_partition
from sktrellis.energies import (
    ClusterEnergy,
    CorrelationClustering,
    DirichletProcessMixture,
)
from sktrellis.energies._conjugate import (
    beta_bernoulli_log_marginal,
    normal_inverse_wishart_log_marginal,
)
from sktrellis import ExactFlatClustering

from .common import (
    assert_draws_follow,
    all_partitions,
    partition_log_potentials,
    partition_masks,
    random_cluster_energy,
)


def _problem(kind, n_points, rng):
    """(energy, X) of each energy kind with random data."""
    if kind == "table":
        energy, _ = random_cluster_energy(n_points, rng)
        return energy, np.zeros((n_points, 1))
    if kind == "correlation":
        weights = rng.normal(size=(n_points, n_points))
        return CorrelationClustering(affinity="precomputed", beta=1.5), weights + weights.T
    if kind == "features":
        return CorrelationClustering(beta=rng.uniform(1, 8)), rng.normal(size=(n_points, 3))
    if kind == "gaussian":
        centres = rng.normal(scale=3.0, size=(3, 2))
        X = centres[rng.integers(3, size=n_points)] + rng.normal(size=(n_points, 2))
        return DirichletProcessMixture(alpha=rng.uniform(0.3, 3),
                                       covariance_prior=rng.uniform(0.3, 2.0)), X
    if kind == "bernoulli":
        X = (rng.random((n_points, 5)) < 0.4).astype(float)
        return DirichletProcessMixture(alpha=1.3, component="bernoulli",
                                       bernoulli_prior=(0.5, 0.8)), X
    raise ValueError(kind)


KINDS = ["table", "correlation", "features", "gaussian", "bernoulli"]

# The 21,147 partitions of 9 points cost a few tenths of a second a case
# to enumerate in the passes compared below: the full suite runs them,
# the quick suite stops at 7 points (877 partitions).
NINE_POINTS = pytest.param(9, marks=pytest.mark.slow)


@pytest.fixture(params=["plain", "blocked"])
def flat_kernels(request, monkeypatch):
    """Every flat pass (inside, MAP-only, counts, k-cluster MAP), plain or blocked at any N.

    Blocked with 2 low bits per row, so problems of 3 points or more have
    row pairs, subsets with an empty low part, and several items per level.
    Tables with a forbidden cluster keep the plain inside pass (its counts).
    """
    from sktrellis._engine.trellis import flat_trellis

    blocked = request.param == "blocked"
    monkeypatch.setattr(flat_trellis, "BLOCKED_MIN_POINTS", 0 if blocked else 10**6)
    monkeypatch.setattr(flat_trellis, "BLOCK_BITS", 2)
    return request.param


def _enumerate(energy, X):
    """Every partition, its log potential and number of clusters, and log Z."""
    log_potential = energy.cluster_potential(X)
    partitions = all_partitions(len(X))
    values = partition_log_potentials(log_potential, partitions)
    return log_potential, partitions, values, partitions.max(axis=1) + 1


def _fit_or_infeasible(model, X, log_z):
    if log_z == -np.inf:
        with pytest.raises(ValueError, match="zero potential"):
            model.fit(X)
        pytest.skip("every partition is forbidden; the error was checked")
    return model.fit(X)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n_points", [1, 2, 3, 5, 7, 9])
def test_log_partition_map_and_counts_match_enumeration(
    kind, n_points, global_random_seed, kernel_threads, flat_kernels
):
    rng = np.random.default_rng(global_random_seed + 1000 * n_points)
    energy, X = _problem(kind, n_points, rng)
    log_potential, partitions, values, _ = _enumerate(energy, X)
    log_z = logsumexp(values)
    model = _fit_or_infeasible(ExactFlatClustering(energy), X, log_z)

    assert model.log_partition_ == pytest.approx(log_z, rel=1e-12, abs=1e-10)
    assert model.map_log_potential_ == pytest.approx(values.max(), rel=1e-12, abs=1e-10)
    assert model.n_partitions_ == int(np.isfinite(values).sum())
    assert isinstance(model.n_partitions_, int)
    # Certificate: the returned labels are canonical and their potential is
    # the maximum (correlation weights can tie).
    labels = model.labels_
    assert labels[0] == 0 and np.all(np.diff(np.maximum.accumulate(labels)) <= 1)
    assert partition_log_potentials(log_potential, labels[None])[0] == pytest.approx(
        values.max(), rel=1e-12, abs=1e-10
    )
    assert np.array_equal(model.fit_predict(X), labels)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n_points", [3, 6, 8])
def test_marginals_counts_and_probabilities_match_enumeration(
    kind, n_points, global_random_seed, kernel_threads, flat_kernels
):
    rng = np.random.default_rng(global_random_seed + 7 * n_points)
    energy, X = _problem(kind, n_points, rng)
    _, partitions, values, n_clusters = _enumerate(energy, X)
    log_z = logsumexp(values)
    model = _fit_or_infeasible(ExactFlatClustering(energy), X, log_z)
    probabilities = np.exp(values - log_z)

    # Every cluster's marginal.
    masks = partition_masks(partitions)
    marginal = np.zeros(1 << n_points)
    np.add.at(marginal, masks.ravel(), np.repeat(probabilities, n_points))
    for subset in range(1, 1 << n_points):
        members = [i for i in range(n_points) if subset >> i & 1]
        assert model.cluster_probability(members) == pytest.approx(marginal[subset], abs=1e-12)

    # Pairwise co-clustering.
    same = partitions[:, :, None] == partitions[:, None, :]
    pairwise = np.einsum("p,pij->ij", probabilities, same)
    np.testing.assert_allclose(model.pairwise_probability_, pairwise, atol=1e-12)
    assert np.array_equal(model.pairwise_probability_, model.pairwise_probability_.T)

    # Posterior and log partition function per number of clusters.
    by_count = np.bincount(n_clusters, weights=probabilities, minlength=n_points + 1)
    np.testing.assert_allclose(model.n_clusters_probability_, by_count, atol=1e-12)
    for k in range(n_points + 1):
        feasible = np.isfinite(values[n_clusters == k])
        if feasible.any():
            assert model.n_clusters_log_partition_[k] == pytest.approx(
                logsumexp(values[n_clusters == k]), rel=1e-12, abs=1e-10
            )
        else:
            assert model.n_clusters_log_partition_[k] == -np.inf

    # Probability of given partitions, under any labelling of them.
    for labels, value in list(zip(partitions, values))[:: max(1, len(values) // 60)]:
        assert model.log_probability(labels) == pytest.approx(value - log_z, abs=1e-10)
        renamed = np.array(["abcdefgh"[::-1][k] for k in labels])
        assert model.log_probability(renamed) == model.log_probability(labels)


@pytest.mark.parametrize("kind", ["table", "correlation", "gaussian"])
@pytest.mark.parametrize("n_points", [1, 4, 7, 9])
def test_together_probability_matches_enumeration(kind, n_points, global_random_seed):
    """P(a set of points lies in one cluster): every set at N <= 7, a sample at N = 9."""
    rng = np.random.default_rng(global_random_seed + 11 * n_points)
    energy, X = _problem(kind, n_points, rng)
    _, partitions, values, _ = _enumerate(energy, X)
    log_z = logsumexp(values)
    model = _fit_or_infeasible(ExactFlatClustering(energy, verbose=0), X, log_z)
    probabilities = np.exp(values - log_z)
    subsets = range(1, 1 << n_points)
    if n_points > 7:
        subsets = rng.choice(np.arange(1, 1 << n_points), size=60, replace=False)
    for subset in subsets:
        members = rng.permutation([i for i in range(n_points) if subset >> i & 1])
        labels = partitions[:, members]
        expected = probabilities[np.all(labels == labels[:, :1], axis=1)].sum()
        assert model.together_probability(members) == pytest.approx(expected, abs=1e-12)
        mask = np.zeros(n_points, dtype=bool)
        mask[members] = True
        assert model.together_probability(mask) == model.together_probability(members)
        if len(members) == 2:
            assert model.together_probability(members) == pytest.approx(
                model.pairwise_probability_[members[0], members[1]], abs=1e-12
            )


def test_together_probability_is_zero_where_every_holding_cluster_is_forbidden():
    """-inf potentials: a set no cluster of finite potential holds has probability 0."""
    n_points = 4
    table = np.zeros(1 << n_points)
    for mask in range(1 << n_points):
        if mask & 0b0011 == 0b0011:  # every cluster holding points 0 and 1
            table[mask] = -np.inf
    energy = ClusterEnergy(lambda X, masks: table[masks])
    model = ExactFlatClustering(energy, verbose=0).fit(np.zeros((n_points, 1)))
    assert model.together_probability([0, 1]) == 0.0
    assert model.together_probability([1, 0, 2]) == 0.0
    assert model.together_probability([0, 2]) > 0.0


@pytest.mark.parametrize("kind", ["table", "correlation", "gaussian"])
@pytest.mark.parametrize("n_points", [4, 8])
def test_map_with_each_number_of_clusters_matches_enumeration(
    kind, n_points, global_random_seed, kernel_threads, flat_kernels
):
    rng = np.random.default_rng(global_random_seed + 31 * n_points)
    energy, X = _problem(kind, n_points, rng)
    log_potential, partitions, values, n_clusters = _enumerate(energy, X)
    if logsumexp(values) == -np.inf:
        pytest.skip("every partition is forbidden")
    unconstrained = ExactFlatClustering(energy).fit(X)
    for k in range(1, n_points + 1):
        model = ExactFlatClustering(energy, n_clusters=k)
        candidates = values[n_clusters == k]
        if not np.isfinite(candidates).any():
            with pytest.raises(ValueError, match=f"n_clusters={k} clusters has non-zero"):
                model.fit(X)
            continue
        model.fit(X)
        assert model.map_log_potential_ == pytest.approx(candidates.max(), rel=1e-12, abs=1e-10)
        assert len(np.unique(model.labels_)) == k
        assert partition_log_potentials(log_potential, model.labels_[None])[0] == pytest.approx(
            candidates.max(), rel=1e-12, abs=1e-10
        )
        # The posterior stays over all partitions.
        assert model.log_partition_ == unconstrained.log_partition_
        np.testing.assert_array_equal(
            model.n_clusters_probability_, unconstrained.n_clusters_probability_
        )


@pytest.mark.parametrize("kind", ["table", "correlation", "gaussian", "bernoulli"])
@pytest.mark.parametrize("n_points", [4, 5])
def test_samples_follow_the_exact_posterior(kind, n_points, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    energy, X = _problem(kind, n_points, rng)
    _, partitions, values, _ = _enumerate(energy, X)
    log_z = logsumexp(values)
    model = _fit_or_infeasible(ExactFlatClustering(energy), X, log_z)
    n_samples = 20000
    samples = model.sample(n_samples, random_state=global_random_seed)
    assert samples.shape == (n_samples, n_points) and samples.dtype == np.int64
    # Canonical labels: every sample is one of the enumerated rows.
    index = {tuple(row): i for i, row in enumerate(partitions)}
    observed = np.bincount([index[tuple(row)] for row in samples], minlength=len(partitions))
    expected = np.exp(values - log_z) * n_samples
    assert_draws_follow(observed, expected, "partition")
    # Certificates: no sample beats the MAP, and seeds reproduce.
    assert max(model.log_probability(s) for s in samples[:200]) <= (
        model.map_log_potential_ - model.log_partition_ + 1e-9
    )
    np.testing.assert_array_equal(
        model.sample(5, random_state=3), model.sample(5, random_state=3)
    )


def _crp_log_prior(partitions, alpha):
    """log P(partition) under the Chinese restaurant process."""
    masks = partition_masks(partitions)
    sizes = np.bitwise_count(masks.astype(np.uint64)).astype(float)
    n_points = partitions.shape[1]
    cluster_terms = np.where(sizes > 0, np.log(alpha) + gammaln(np.maximum(sizes, 1)), 0.0)
    return cluster_terms.sum(axis=1) + gammaln(alpha) - gammaln(alpha + n_points)


@pytest.mark.parametrize("component", ["gaussian", "bernoulli"])
@pytest.mark.parametrize("n_points", [3, 7])
def test_dpm_evidence_matches_direct_enumeration(component, n_points, global_random_seed):
    """log p(X) = log sum over partitions of CRP prior x product of marginal likelihoods."""
    rng = np.random.default_rng(global_random_seed + n_points)
    alpha = 0.8
    if component == "gaussian":
        X = rng.normal(size=(n_points, 2)) + 2.0 * (np.arange(n_points) % 2)[:, None]
        prior = dict(mean=np.array([0.5, -0.2]), mean_precision=0.3, degrees_of_freedom=3.5,
                     scale=np.array([[1.2, 0.3], [0.3, 0.7]]))
        energy = DirichletProcessMixture(
            alpha=alpha, mean_prior=prior["mean"], mean_precision_prior=prior["mean_precision"],
            degrees_of_freedom_prior=prior["degrees_of_freedom"], covariance_prior=prior["scale"],
        )

        def log_marginal(points):
            return normal_inverse_wishart_log_marginal(
                [len(points)], points.sum(axis=0)[None], (points.T @ points)[None], **prior
            )[0]
    else:
        X = (rng.random((n_points, 4)) < 0.5).astype(float)
        energy = DirichletProcessMixture(alpha=alpha, component="bernoulli",
                                         bernoulli_prior=(0.7, 1.9))

        def log_marginal(points):
            return beta_bernoulli_log_marginal(
                [len(points)], points.sum(axis=0)[None], a=0.7, b=1.9
            )[0]

    partitions = all_partitions(n_points)
    joint = _crp_log_prior(partitions, alpha) + np.array([
        sum(log_marginal(X[labels == k]) for k in range(labels.max() + 1))
        for labels in partitions
    ])
    model = ExactFlatClustering(energy).fit(X)
    assert model.log_evidence_ == pytest.approx(logsumexp(joint), rel=1e-10)
    # The posterior of a partition is its joint over the evidence.
    for labels, value in list(zip(partitions, joint))[:: max(1, len(joint) // 20)]:
        assert model.log_probability(labels) == pytest.approx(value - logsumexp(joint), abs=1e-9)


def test_dpm_predict_uses_the_posterior_predictive():
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(size=(5, 2)) * 0.2, rng.normal(size=(5, 2)) * 0.2 + 6.0])
    energy = DirichletProcessMixture(covariance_prior=0.05, mean_precision_prior=0.01)
    model = ExactFlatClustering(energy).fit(X)
    assert model.labels_.tolist() == [0] * 5 + [1] * 5
    new = np.array([[0.1, -0.1], [6.2, 5.9], [2.0, 2.0]])
    log_predictive = energy.log_predictive(X, model.labels_, new)
    expected = np.argmax(log_predictive + np.log([5, 5]), axis=1)
    np.testing.assert_array_equal(model.predict(new), expected)
    assert model.predict(new)[:2].tolist() == [0, 1]
    with pytest.raises(ValueError, match="features"):
        model.predict(np.zeros((2, 3)))
    assert not hasattr(ExactFlatClustering(), "predict")
    assert not hasattr(ExactFlatClustering().fit(X), "log_evidence_")


###############################################################################
# Numerics, threads and estimator conventions

@pytest.mark.parametrize("scale", [1e3, 1e6])
@pytest.mark.parametrize("forbidden", [0.0, 0.1])
def test_extreme_potentials_stay_exact(scale, forbidden, global_random_seed, flat_kernels):
    """Potentials spanning thousands of nats: the log-space fallbacks are exact.

    Also the sums whose tiny products the kernels flush to zero instead of
    computing as subnormal numbers.
    """
    rng = np.random.default_rng(global_random_seed)
    n_points = 8
    energy, table = random_cluster_energy(n_points, rng, forbidden=forbidden, scale=scale)
    X = np.zeros((n_points, 1))
    _, partitions, values, n_clusters = _enumerate(energy, X)
    log_z = logsumexp(values)
    model = _fit_or_infeasible(ExactFlatClustering(energy), X, log_z)
    assert model.log_partition_ == pytest.approx(log_z, rel=1e-12)
    for k in range(1, n_points + 1):
        candidates = values[n_clusters == k]
        expected = logsumexp(candidates) if np.isfinite(candidates).any() else -np.inf
        assert model.n_clusters_log_partition_[k] == pytest.approx(expected, rel=1e-12)
    probabilities = np.exp(values - log_z)
    same = partitions[:, :, None] == partitions[:, None, :]
    np.testing.assert_allclose(
        model.pairwise_probability_, np.einsum("p,pij->ij", probabilities, same), atol=1e-9
    )


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_the_callers_floating_point_mode_is_restored(n_jobs):
    """The kernels flush subnormals to zero inside their parallel regions only."""
    rng = np.random.default_rng(0)
    model = ExactFlatClustering(CorrelationClustering(beta=1e3), n_jobs=n_jobs).fit(
        rng.normal(size=(9, 2)))
    model.n_clusters_probability_
    tiny = np.array([2.5e-308]) * np.array([0.5])   # a subnormal product
    assert tiny[0] > 0.0


@pytest.mark.parametrize("beta", [1e-8, 1.0, 1e3, 1e6])
def test_large_problems_are_consistent(beta, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    X = rng.normal(size=(13, 2))
    model = ExactFlatClustering(CorrelationClustering(beta=beta)).fit(X)
    assert np.isfinite(model.log_partition_) and np.isfinite(model.map_log_potential_)
    # log Z >= MAP, up to rounding of log Z (an ulp of thousands of nats).
    log_z = model.log_partition_
    assert model.map_log_potential_ <= log_z + 1e-15 * abs(log_z) + 1e-15
    assert model.log_partition_ <= model.map_log_potential_ + math.log(model.n_partitions_) + 1e-9
    assert model.n_partitions_ == 27644437  # Bell(13)
    finite = model.n_clusters_log_partition_ > -np.inf
    assert logsumexp(model.n_clusters_log_partition_[finite]) == pytest.approx(
        model.log_partition_, rel=1e-12, abs=1e-12
    )
    assert model.n_clusters_probability_.sum() == pytest.approx(1.0, abs=1e-12)
    pairwise = model.pairwise_probability_
    assert np.all((pairwise >= 0) & (pairwise <= 1)) and np.all(np.diag(pairwise) == 1)
    # Sum over clusters C of P(C) |C| (|C| - 1) / 2 = expected number of
    # co-clustered pairs = sum of the upper triangle.
    clusters = model.most_probable_clusters(n_top=1 << 13, min_size=1)
    expected_pairs = sum(p * len(m) * (len(m) - 1) / 2 for m, p in clusters)
    assert np.triu(pairwise, 1).sum() == pytest.approx(expected_pairs, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("kind", ["table", "correlation", "gaussian"])
@pytest.mark.parametrize("n_points", [5, 7, NINE_POINTS])
def test_count_passes_in_small_chunks_match_enumeration(
    kind, n_points, kernel_threads, global_random_seed, monkeypatch, flat_kernels
):
    """Count and constrained-MAP passes split into many kernel calls per level.

    Both passes visit a filtered part of each level (the subsets without
    point 0); tiny chunks check that every call writes the right rows.
    """
    from sktrellis._engine.trellis import levels

    monkeypatch.setattr(levels, "CHUNK_TERMS", 16)
    rng = np.random.default_rng(global_random_seed + 59 * n_points)
    energy, X = _problem(kind, n_points, rng)
    log_potential, _, values, n_clusters = _enumerate(energy, X)
    log_z = logsumexp(values)
    model = _fit_or_infeasible(ExactFlatClustering(energy), X, log_z)
    for k in range(1, n_points + 1):
        candidates = values[n_clusters == k]
        feasible = np.isfinite(candidates).any()
        expected = logsumexp(candidates) if feasible else -np.inf
        assert model.n_clusters_log_partition_[k] == pytest.approx(expected, rel=1e-12, abs=1e-10)
        if feasible and k in (2, n_points - 1):
            constrained = ExactFlatClustering(energy, n_clusters=k).fit(X)
            assert constrained.map_log_potential_ == pytest.approx(
                candidates.max(), rel=1e-12, abs=1e-10
            )
            assert partition_log_potentials(log_potential, constrained.labels_[None])[0] == (
                pytest.approx(candidates.max(), rel=1e-12, abs=1e-10)
            )


@pytest.mark.parametrize("kind", KINDS + ["ties"])
@pytest.mark.parametrize("n_points", [1, 2, 4, 7, NINE_POINTS])
def test_map_only_pass_is_the_trellis_map(
    kind, n_points, global_random_seed, kernel_threads, flat_kernels, monkeypatch
):
    """The max-only pass gives the full pass's MAP bit for bit, ties broken alike.

    "ties": small integer log potentials (a fifth forbidden), so many
    partitions share the maximum; tiny chunks split every level into many
    kernel calls.
    """
    from sktrellis._engine.trellis import levels

    monkeypatch.setattr(levels, "CHUNK_TERMS", 16)
    rng = np.random.default_rng(global_random_seed + 31 * n_points)
    if kind == "ties":
        log_potential = rng.integers(-2, 3, size=1 << n_points).astype(float)
        log_potential[rng.random(log_potential.shape) < 0.2] = -np.inf
        values = partition_log_potentials(log_potential, all_partitions(n_points))
    else:
        energy, X = _problem(kind, n_points, rng)
        log_potential, _, values, _ = _enumerate(energy, X)
    labels, map_log_potential = map_partition(log_potential, kernel_threads)
    if not np.isfinite(values).any():
        assert labels is None and map_log_potential == -np.inf
        return
    trellis = FlatTrellis(log_potential, kernel_threads)
    assert map_log_potential == trellis.map_log_potential
    np.testing.assert_array_equal(labels, trellis.map_labels)
    assert map_log_potential == pytest.approx(values.max(), rel=1e-12, abs=1e-10)
    assert partition_log_potentials(log_potential, labels[None])[0] == pytest.approx(
        values.max(), rel=1e-12, abs=1e-10
    )


@pytest.mark.parametrize("n_points", [3, 6, NINE_POINTS])
@pytest.mark.parametrize("block_bits", [1, 2, 4])
@pytest.mark.parametrize("scale", ["ties", 3.0, 800.0])
def test_blocked_passes_equal_the_plain_passes(
    n_points, block_bits, scale, kernel_threads, global_random_seed, monkeypatch
):
    """log Z of every subset and per number of clusters to 1e-12, the MAPs exactly.

    "ties": small integer potentials, many equal MAP candidates; 800: terms
    far below the level's scale, so sums underflow and are redone in log
    space.
    """
    from sktrellis._engine.trellis import flat_trellis

    rng = np.random.default_rng(global_random_seed + 13 * n_points)
    n_subsets = 1 << n_points
    if scale == "ties":
        log_e = rng.integers(-2, 3, n_subsets).astype(float)
    else:
        log_e = scale * rng.normal(size=n_subsets)
    monkeypatch.setattr(flat_trellis, "BLOCK_BITS", block_bits)
    monkeypatch.setattr(flat_trellis, "BLOCKED_MIN_POINTS", 10**6)
    plain = FlatTrellis(log_e, kernel_threads)
    plain_map = map_partition(log_e, kernel_threads)
    monkeypatch.setattr(flat_trellis, "BLOCKED_MIN_POINTS", 0)
    blocked = FlatTrellis(log_e, kernel_threads)
    np.testing.assert_allclose(blocked.log_z, plain.log_z, rtol=1e-12, atol=0)
    assert blocked.map_log_potential == plain.map_log_potential
    np.testing.assert_array_equal(blocked.map_labels, plain.map_labels)
    blocked_map = map_partition(log_e, kernel_threads)
    assert blocked_map[1] == plain_map[1] == plain.map_log_potential
    np.testing.assert_array_equal(blocked_map[0], plain.map_labels)
    np.testing.assert_allclose(blocked.pairwise_probability(), plain.pairwise_probability(),
                               rtol=1e-11, atol=1e-14)
    # The count pass runs on first access, under the setting of that moment.
    monkeypatch.setattr(flat_trellis, "BLOCKED_MIN_POINTS", 10**6)
    plain_counts = plain.log_partition_by_count
    monkeypatch.setattr(flat_trellis, "BLOCKED_MIN_POINTS", 0)
    blocked_counts = blocked.log_partition_by_count
    np.testing.assert_array_equal(blocked_counts > -np.inf, plain_counts > -np.inf)
    finite = plain_counts > -np.inf
    np.testing.assert_allclose(blocked_counts[finite], plain_counts[finite], rtol=1e-12, atol=0)
    for n_clusters in range(2, n_points + 1):
        monkeypatch.setattr(flat_trellis, "BLOCKED_MIN_POINTS", 10**6)
        plain = FlatTrellis(log_e, kernel_threads, n_clusters=n_clusters)
        monkeypatch.setattr(flat_trellis, "BLOCKED_MIN_POINTS", 0)
        blocked = FlatTrellis(log_e, kernel_threads, n_clusters=n_clusters)
        assert blocked.constrained_map_log_potential == plain.constrained_map_log_potential
        np.testing.assert_array_equal(
            blocked.constrained_map_labels, plain.constrained_map_labels)


def test_threads_give_identical_results(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    energy, _ = random_cluster_energy(11, rng, forbidden=0.05)
    X = np.zeros((11, 1))
    one = ExactFlatClustering(energy, n_clusters=3, n_jobs=1).fit(X)
    two = ExactFlatClustering(energy, n_clusters=3, n_jobs=2).fit(X)
    for name in ["labels_", "pairwise_probability_", "n_clusters_log_partition_"]:
        np.testing.assert_array_equal(getattr(one, name), getattr(two, name))
    assert one.log_partition_ == two.log_partition_
    assert one.n_partitions_ == two.n_partitions_
    np.testing.assert_array_equal(one.sample(50, random_state=1), two.sample(50, random_state=1))


def test_most_probable_clusters_are_sorted_marginals():
    X = np.array([[0.0], [0.1], [3.0], [3.1], [9.0]])
    model = ExactFlatClustering(CorrelationClustering(beta=4.0)).fit(X)
    top = model.most_probable_clusters(n_top=3)
    probabilities = [p for _, p in top]
    assert probabilities == sorted(probabilities, reverse=True)
    for members, probability in top:
        assert len(members) >= 2
        assert model.cluster_probability(members) == pytest.approx(probability)
    assert [m.tolist() for m, _ in top[:2]] == [[0, 1], [2, 3]]


def _last_percent(err):
    """The percentage of the last state a progress bar printed."""
    return int(re.findall(r"(\d+)%\|", err)[-1])


def test_progress_opens_with_an_estimate_and_the_bar_finishes(capsys):
    model = ExactFlatClustering(CorrelationClustering(beta=1.0), n_clusters=2, verbose=2, n_jobs=1)
    model.fit(np.random.default_rng(0).normal(size=(6, 2)))
    out, err = capsys.readouterr()
    assert out == ""
    # The inside pass, then the pass for the MAP with 2 clusters: an estimate and a bar each.
    lines = err.split("\n")[:-1]
    assert len(lines) == 4
    assert lines[0].startswith("[ExactFlatClustering] inside pass (MAP, log Z) over the 2**6")
    assert lines[2].startswith("[ExactFlatClustering] pass for the MAP with 2 clusters")
    for estimate, bar in (lines[0:2], lines[2:4]):
        assert "n_samples=6: " in estimate and " pairs, about " in estimate
        assert "memory " in estimate
        assert _last_percent(bar) == 100 and "subsets of size 6/6" in bar
    model.n_clusters_probability_
    err = capsys.readouterr().err
    assert err.startswith("[ExactFlatClustering] pass counting clusters")
    assert _last_percent(err) == 100


def test_quick_fits_are_silent_by_default(capsys):
    ExactFlatClustering().fit(np.random.default_rng(0).normal(size=(8, 2))).n_clusters_probability_
    assert capsys.readouterr() == ("", "")


@pytest.mark.slow
def test_ctrl_c_interrupts_a_long_fit(capsys, ctrl_c):
    """KeyboardInterrupt stops the DP between chunks, long before it completes."""
    import _thread
    import threading

    X = np.random.default_rng(0).normal(size=(23, 2))
    model = ExactFlatClustering(verbose=2)
    timer = threading.Timer(0.5, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            model.fit(X)
    finally:
        timer.cancel()
    # An interrupted bar closes showing how far the pass got (if it started).
    assert "100%|" not in capsys.readouterr().err, "the interrupt waited for the whole DP"
    assert not hasattr(model, "labels_")


@pytest.mark.parametrize("kind", ["table", "features", "gaussian", "bernoulli"])
@pytest.mark.parametrize("n_clusters", [None, 4])
def test_memory_estimate_covers_the_peak(kind, n_clusters):
    """The bytes promised by the size check are an upper bound of what fit allocates."""
    import tracemalloc

    from sktrellis._engine.resources import flat_fit_bytes

    n_points = 12
    energy, X = _problem(kind, n_points, np.random.default_rng(0))
    model = ExactFlatClustering(energy, n_clusters=n_clusters)
    tracemalloc.start()
    try:
        model.fit(X)
        model.cluster_probability([0, 1])
        model.most_probable_clusters()
        model.sample(10)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= flat_fit_bytes(energy, n_points) + 2**20


def test_single_point():
    model = ExactFlatClustering().fit([[1.0, 2.0]])
    assert model.labels_.tolist() == [0]
    assert model.n_partitions_ == 1
    assert model.n_clusters_probability_.tolist() == [0.0, 1.0]
    assert model.pairwise_probability_.tolist() == [[1.0]]
    assert model.sample(3).tolist() == [[0], [0], [0]]


def test_clone_and_params_reach_the_energy():
    model = ExactFlatClustering(DirichletProcessMixture(alpha=2.0))
    model.set_params(energy__alpha=3.0)
    assert model.get_params()["energy__alpha"] == 3.0
    assert clone(model).energy.alpha == 3.0


def test_restored_common_checks(global_random_seed):
    """What scikit-learn's common checks with 30-150 samples verify, at small N."""
    import pickle

    import pandas as pd
    from sklearn.datasets import make_blobs
    from sklearn.exceptions import NotFittedError
    from sklearn.metrics import adjusted_rand_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = make_blobs(n_samples=12, centers=[[0, 0], [10, 0], [0, 10]], cluster_std=0.3,
                      random_state=global_random_seed)
    model = ExactFlatClustering(CorrelationClustering(beta=10.0), n_clusters=3)
    with pytest.raises(NotFittedError):
        model.cluster_probability([0])
    labels = model.fit_predict(X)
    assert labels.dtype.kind == "i" and labels.shape == (12,)
    assert adjusted_rand_score(y, labels) == 1.0
    again = clone(model).fit(X, y)
    np.testing.assert_array_equal(again.labels_, labels)
    np.testing.assert_array_equal(again.pairwise_probability_, model.pairwise_probability_)
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(restored.labels_, labels)
    assert restored.cluster_probability([0, 1]) == model.cluster_probability([0, 1])
    np.testing.assert_array_equal(
        restored.sample(3, random_state=0), model.sample(3, random_state=0)
    )
    pipeline = make_pipeline(StandardScaler(), clone(model))
    np.testing.assert_array_equal(
        pipeline.fit_predict(X), make_pipeline(StandardScaler(), clone(model)).fit_predict(X)
    )
    assert model.n_features_in_ == 2
    fitted = clone(model).fit(pd.DataFrame(X, columns=["a", "b"]))
    assert list(fitted.feature_names_in_) == ["a", "b"]
    np.testing.assert_array_equal(clone(model).fit(X.astype(object)).labels_, labels)
    clone(model).fit(X - 100.0)


###############################################################################
# Bad input

@pytest.mark.parametrize(
    "X, match",
    [
        (np.array([[0.0, np.nan], [1.0, 2.0]]), "NaN"),
        (np.array([[0.0, np.inf], [1.0, 2.0]]), "infinity"),
        (np.zeros((0, 2)), "minimum of 1"),
        (np.zeros((3, 2, 2)), "dim"),
    ],
)
def test_bad_arrays_are_rejected(X, match):
    with pytest.raises(ValueError, match=match):
        ExactFlatClustering().fit(X)


def test_too_many_points_names_the_memory_and_the_way_out():
    with pytest.raises(ValueError, match=r"n_samples=40 would need .*SparseTrellisClustering"):
        ExactFlatClustering().fit(np.zeros((40, 2)))


@pytest.mark.parametrize(
    "energy, X, match",
    [
        (CorrelationClustering(affinity="precomputed"), np.ones((3, 4)), "square"),
        (CorrelationClustering(affinity="precomputed"),
         np.array([[0, 1, 2], [1, 0, 1], [0, 1, 0.0]]), "symmetric"),
        (DirichletProcessMixture(component="bernoulli"), np.array([[0, 1], [0.5, 1]]),
         r"binary data .*X\[1, 0\] is 0.5"),
        (DirichletProcessMixture(covariance_prior=[[1.0, 2.0], [2.0, 1.0]]), np.eye(2),
         "positive definite"),
        (DirichletProcessMixture(covariance_prior=np.eye(3)), np.eye(2), r"shape \(2, 2\)"),
        (DirichletProcessMixture(mean_prior=[0.0]), np.eye(2), "mean_prior must be 2"),
        (DirichletProcessMixture(degrees_of_freedom_prior=0.5), np.eye(3),
         "must exceed n_features - 1 = 2"),
        (DirichletProcessMixture(), np.array([[1.0, 2.0], [1.0, 2.0]]),
         "every feature of X is constant"),
        (DirichletProcessMixture(component="bernoulli", bernoulli_prior=(1.0, -1.0)),
         np.eye(2), "two positive pseudo-counts"),
        (ClusterEnergy(lambda X, masks: np.zeros(3)), np.zeros((3, 1)), "one value per cluster"),
        (ClusterEnergy(lambda X, masks: np.full(len(masks), np.nan)), np.zeros((3, 1)),
         "NaN or \\+inf"),
    ],
)
def test_energy_input_errors(energy, X, match):
    with pytest.raises(ValueError, match=match):
        ExactFlatClustering(energy).fit(X)


def test_all_infeasible_energy_is_an_error():
    energy = ClusterEnergy(lambda X, masks: np.where(masks & 1, -np.inf, 0.0))
    with pytest.raises(ValueError, match="n_samples=3 points has zero potential"):
        ExactFlatClustering(energy).fit(np.zeros((3, 1)))


def test_infeasible_number_of_clusters_is_an_error():
    # Only pairs are allowed: 4 points split into exactly 2 clusters.
    energy = ClusterEnergy(lambda X, masks: np.where(np.bitwise_count(masks) == 2, 0.0, -np.inf))
    with pytest.raises(ValueError, match=r"n_clusters=3 clusters .* feasible numbers .* \[2\]"):
        ExactFlatClustering(energy, n_clusters=3).fit(np.zeros((4, 1)))
    model = ExactFlatClustering(energy).fit(np.zeros((4, 1)))
    assert model.n_partitions_ == 3
    assert model.n_clusters_probability_.tolist() == [0.0, 0.0, 1.0, 0.0, 0.0]


@pytest.mark.parametrize(
    "params, match",
    [
        ({"n_clusters": 0}, "n_clusters"),
        ({"n_clusters": 5}, "n_clusters=5 must be at most n_samples=4"),
        ({"energy": "correlation"}, "energy"),
        ({"energy": CorrelationClustering(beta=-1.0)}, "beta"),
        ({"energy": DirichletProcessMixture(alpha=0.0)}, "alpha"),
        ({"energy": DirichletProcessMixture(component="poisson")}, "component"),
        ({"n_jobs": 1.5}, "n_jobs"),
    ],
)
def test_bad_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        ExactFlatClustering(**params).fit(np.arange(8.0).reshape(4, 2))


@pytest.mark.parametrize(
    "members, match",
    [([], "at least one"), ([0, 9], r"\[0, 4\)"), ([1, 1], "repeat"), ([0.5], "indices")],
)
def test_bad_cluster_queries(members, match):
    model = ExactFlatClustering().fit(np.arange(8.0).reshape(4, 2))
    with pytest.raises(ValueError, match=match):
        model.cluster_probability(members)
    with pytest.raises(ValueError, match=match):
        model.together_probability(members)


@pytest.mark.parametrize(
    "labels, match",
    [([0, 1, 1], r"shape \(n_samples,\) = \(4,\)"), ([0.0, np.nan, 1.0, 1.0], "NaN"),
     (np.zeros((4, 1)), "shape")],
)
def test_bad_labels_are_rejected(labels, match):
    model = ExactFlatClustering().fit(np.arange(8.0).reshape(4, 2))
    with pytest.raises(ValueError, match=match):
        model.log_probability(labels)


@pytest.mark.parametrize("n_samples", [0, -1, 2.5, "3"])
def test_bad_sample_sizes(n_samples):
    model = ExactFlatClustering().fit(np.arange(8.0).reshape(4, 2))
    with pytest.raises(ValueError, match="n_samples.*must be an int in the range"):
        model.sample(n_samples)


def test_input_is_not_mutated():
    X = np.random.default_rng(0).normal(size=(6, 2))
    before = X.copy()
    model = ExactFlatClustering(DirichletProcessMixture()).fit(X)
    model.predict(X)
    ExactFlatClustering(n_clusters=2).fit(X)
    np.testing.assert_array_equal(X, before)
    W = X @ X.T
    W_before = W.copy()
    ExactFlatClustering(CorrelationClustering(affinity="precomputed")).fit(W)
    np.testing.assert_array_equal(W, W_before)


@pytest.mark.parametrize("kernel, run", [
    ("inside_level", lambda log_e: FlatTrellis(log_e).log_z),
    ("map_level", lambda log_e: map_partition(log_e)[1]),
    ("count_level", lambda log_e: FlatTrellis(log_e).log_partition_by_count),
    ("constrained_map_level", lambda log_e: FlatTrellis(log_e, n_clusters=3).map_labels),
])
def test_flat_kernel_calls_follow_the_rate_the_pass_measures(kernel, run, fake_clock,
                                                             monkeypatch):
    """A pass slower than its calibration rate (a loaded machine) shrinks its next calls.

    Each kernel call takes 40 ns a (subset, cluster) pair on the fake clock,
    slower than any calibration rate: after the first call of the pass,
    every call holds at most the pairs of CHUNK_SECONDS at 40 ns (at least
    one subset), where the calibration rate alone puts more in some; the
    result is unchanged.
    """
    from sktrellis._engine.trellis import flat_trellis, levels

    log_e = np.random.default_rng(0).normal(size=1 << 9)
    expected = run(log_e)
    monkeypatch.setattr(levels, "CHUNK_SECONDS", 40e-9 * 256)  # 256 pairs at 40 ns
    original, calls = getattr(flat_trellis.kernels, kernel), []

    def timed(parents, *args):
        size = int(parents[0]).bit_count()
        calls.append((size, len(parents)))
        fake_clock["now"] += 40e-9 * len(parents) * (1 << (size - 1))
        return original(parents, *args)

    monkeypatch.setattr(flat_trellis.kernels, kernel, timed)
    for measured_min_terms, follows in [(1, True), (1 << 60, False)]:
        monkeypatch.setattr(levels, "MEASURED_MIN_TERMS", measured_min_terms)
        calls.clear()
        np.testing.assert_array_equal(run(log_e), expected)
        assert len(calls) > 10 or not follows
        within = [n_parents <= max(1, 256 >> (size - 1)) for size, n_parents in calls[1:]]
        assert all(within) if follows else not all(within)
