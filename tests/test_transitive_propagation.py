"""TransitivePropagation against the two-state max-sum messages and known optima."""
import itertools
import warnings

import numpy as np
import pytest
from scipy.stats import binom
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score, euclidean_distances
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import InvalidParameterError

from sktrellis.baselines import TransitivePropagation
from sktrellis._engine import resources
from sktrellis.baselines import _transitive_propagation
from sktrellis.datasets import make_bit_patterns


def naive_max_sum(llr, n_iter, damping, combine=max):
    """Beliefs after n_iter rounds of the paper's eqs. 12-14, two states per edge.

    ``combine=np.logaddexp`` gives sum-product (the paper's extension)
    instead of max-sum.

    H = 0 is "same cluster", H = 1 "different"; S_ij(H) = -H L_ij; a triple
    forbids exactly one "different" edge among its three. Messages to the
    function nodes (rho) and back (alpha) are kept for both states and
    damped as ``alpha <- damping * alpha + (1 - damping) * new``. Returns
    b_ij(0) - b_ij(1), the log odds of "same cluster".
    """
    n = len(llr)
    edges = list(itertools.combinations(range(n), 2))

    def edge(a, b):
        return (min(a, b), max(a, b))

    score = {e: np.array([0.0, -llr[e]]) for e in edges}
    alpha = {(e, k): np.zeros(2) for e in edges for k in range(n) if k not in e}
    valid = [c for c in itertools.product((0, 1), repeat=3) if sum(c) != 1]
    for _ in range(n_iter):
        rho = {
            (e, k): score[e] + sum(alpha[e, m] for m in range(n) if m not in e and m != k)
            for (e, k) in alpha
        }
        new = {}
        for (e, k) in alpha:
            i, j = e
            out = np.full(2, -np.inf)
            for h_ij, h_jk, h_ki in valid:
                out[h_ij] = combine(
                    out[h_ij], rho[edge(j, k), i][h_jk] + rho[edge(k, i), j][h_ki]
                )
            new[e, k] = out
        alpha = {key: damping * alpha[key] + (1 - damping) * new[key] for key in alpha}
    beliefs = np.zeros((n, n))
    for e in edges:
        b = score[e] + sum(alpha[e, k] for k in range(n) if k not in e)
        beliefs[e] = beliefs[e[::-1]] = b[0] - b[1]
    return beliefs


def all_partitions(items):
    """Every partition of a list, as lists of blocks."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for partition in all_partitions(rest):
        yield [[first]] + partition
        for k in range(len(partition)):
            yield partition[:k] + [[first] + partition[k]] + partition[k + 1 :]


def partition_objective(llr, labels):
    together = labels[:, None] == labels[None, :]
    return np.triu(np.where(together, llr, 0.0), 1).sum()


def _random_llr(n_points, rng, scale=2.0):
    weights = rng.normal(scale=scale, size=(n_points, n_points))
    return weights + weights.T


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("n_points", [3, 5, 7])
@pytest.mark.parametrize("damping", [0.0, 0.5, 0.8])
def test_vectorised_update_matches_two_state_max_sum(n_points, damping, global_random_seed):
    rng = np.random.default_rng(global_random_seed + n_points)
    llr = _random_llr(n_points, rng)
    for max_iter in (1, 2, 6):
        model = TransitivePropagation(damping=damping, max_iter=max_iter, convergence_iter=10**9)
        model.fit(llr)
        expected = naive_max_sum(llr, model.n_iter_, damping)
        scale = max(1.0, np.abs(expected).max())
        np.testing.assert_allclose(model.beliefs_, expected, atol=1e-5 * scale)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_rescaling_changes_no_call(monkeypatch, global_random_seed):
    # Beliefs grow geometrically and are divided by a power of two when they
    # get large; with a low threshold that happens every iteration or two,
    # and the beliefs must stay proportional to the unscaled messages.
    monkeypatch.setattr(_transitive_propagation, "_RESCALE_ABOVE", 1.0)
    monkeypatch.setattr(_transitive_propagation, "_RESCALE_BY", 0.25)
    llr = _random_llr(7, np.random.default_rng(global_random_seed))
    model = TransitivePropagation(max_iter=6, convergence_iter=10**9).fit(llr)
    expected = naive_max_sum(llr, model.n_iter_, 0.5)
    ratio = np.abs(expected).max() / np.abs(model.beliefs_).max()
    n_rescales = round(np.log(ratio) / np.log(4.0))
    assert n_rescales >= 1 and ratio == pytest.approx(4.0**n_rescales, rel=1e-5)
    np.testing.assert_allclose(
        model.beliefs_ * ratio, expected, atol=1e-5 * np.abs(expected).max()
    )


def test_planted_blocks_are_recovered():
    labels = np.array([0, 0, 1, 1, 1, 2, 0, 2])
    together = labels[:, None] == labels[None, :]
    llr = np.where(together, 3.0, -3.0)
    np.fill_diagonal(llr, 0.0)
    model = TransitivePropagation().fit(llr)
    np.testing.assert_array_equal(model.labels_, labels)
    assert model.converged_ and model.transitive_
    assert model.objective_ == pytest.approx(3.0 * (3 + 3 + 1))
    np.testing.assert_array_equal(model.fit_predict(llr), labels)


def test_transitivity_overrules_a_weak_repulsion():
    # Thresholding each pair alone would call 0-1 and 1-2 "same" but 0-2
    # "different", which is not a partition; the messages join all three.
    llr = np.array([[0.0, 3.0, -1.0], [3.0, 0.0, 3.0], [-1.0, 3.0, 0.0]])
    model = TransitivePropagation().fit(llr)
    np.testing.assert_array_equal(model.labels_, [0, 0, 0])
    assert model.transitive_
    assert model.beliefs_[0, 2] > 0
    assert model.objective_ == pytest.approx(5.0)


@pytest.mark.filterwarnings("ignore:TransitivePropagation put each:UserWarning")
@pytest.mark.parametrize("sign, expected", [(1.0, [0, 0]), (-1.0, [0, 1])])
def test_two_points_follow_the_sign_of_their_ratio(sign, expected):
    llr = np.array([[0.0, sign], [sign, 0.0]])
    model = TransitivePropagation().fit(llr)
    np.testing.assert_array_equal(model.labels_, expected)
    assert model.n_iter_ == 1 and model.converged_


def test_single_point():
    model = TransitivePropagation().fit([[0.0]])
    np.testing.assert_array_equal(model.labels_, [0])
    assert model.objective_ == 0.0


@pytest.mark.parametrize("error_rate", [0.02, 0.05])
def test_finds_the_exact_optimum_of_small_read_clusterings(error_rate, global_random_seed):
    _, truth, llr = make_bit_patterns(
        3, reads_per_template=3, error_rate=error_rate, random_state=global_random_seed
    )
    model = TransitivePropagation().fit(llr)
    best = max(
        partition_objective(llr, _labels_of(partition, len(llr)))
        for partition in all_partitions(list(range(len(llr))))
    )
    assert model.objective_ == pytest.approx(partition_objective(llr, model.labels_))
    assert model.objective_ <= best + 1e-9
    assert model.objective_ == pytest.approx(best)


def _labels_of(partition, n_points):
    labels = np.empty(n_points, dtype=np.int64)
    for label, block in enumerate(partition):
        labels[block] = label
    return labels


def test_input_is_not_mutated(global_random_seed):
    llr = _random_llr(6, np.random.default_rng(global_random_seed))
    copy = llr.copy()
    TransitivePropagation().fit(llr)
    np.testing.assert_array_equal(llr, copy)


def test_warns_when_not_converged():
    llr = np.array([[0.0, 3.0, -1.0], [3.0, 0.0, 3.0], [-1.0, 3.0, 0.0]])
    with pytest.warns(ConvergenceWarning, match="did not converge in max_iter=1"):
        model = TransitivePropagation(max_iter=1).fit(llr)
    assert not model.converged_ and model.n_iter_ == 1


@pytest.mark.parametrize(
    "llr, message",
    [
        (np.zeros((3, 2)), "must be square"),
        (np.array([[0.0, 1.0], [2.0, 0.0]]), "must be symmetric"),
        (np.array([[0.0, np.nan], [np.nan, 0.0]]), "NaN"),
        (np.array([[0.0, np.inf], [np.inf, 0.0]]), "infinity"),
    ],
)
def test_bad_input_is_rejected(llr, message):
    with pytest.raises(ValueError, match=message):
        TransitivePropagation().fit(llr)


@pytest.mark.parametrize(
    "params, message",
    [
        ({"damping": 1.0}, "damping"),
        ({"damping": -0.1}, "damping"),
        ({"max_iter": 0}, "max_iter"),
        ({"convergence_iter": 0}, "convergence_iter"),
        ({"affinity": "euclidean"}, "affinity"),
        ({"threshold": "median"}, "threshold"),
    ],
)
def test_bad_parameters_are_rejected(params, message):
    with pytest.raises(InvalidParameterError, match=message):
        TransitivePropagation(**params).fit(np.zeros((3, 3)))


def test_memory_limit_names_the_size(monkeypatch):
    monkeypatch.setattr(resources, "memory_limits", lambda: [("MemAvailable", 1000)])
    with pytest.raises(ValueError, match=r"n_samples=20 requires .* but only"):
        TransitivePropagation().fit(np.zeros((20, 20)))


def test_message_bytes_counts_the_allocated_messages():
    # Blocks i = 0..N-3 hold two (N-1-i) x (N-1-i) float32 matrices.
    for n_points in (1, 2, 3, 4, 10):
        blocks = sum(2 * (n_points - 1 - i) ** 2 for i in range(max(n_points - 2, 0)))
        assert _transitive_propagation.message_bytes(n_points) == 4 * blocks
    assert _transitive_propagation.message_bytes(1000) / 2**30 == pytest.approx(2.48, abs=0.01)


def test_bit_patterns_have_the_papers_likelihood_ratios(global_random_seed):
    reads, labels, llr = make_bit_patterns(
        4, length=12, reads_per_template=3, error_rate=0.1, random_state=global_random_seed
    )
    assert reads.shape == (12, 12) and reads.dtype == np.uint8
    assert set(np.unique(reads)) <= {0, 1}
    np.testing.assert_array_equal(np.bincount(labels), [3, 3, 3, 3])
    np.testing.assert_array_equal(llr, llr.T)
    np.testing.assert_array_equal(np.diag(llr), 0.0)
    # f0: distance ~ Binomial(L, 2 p (1 - p)); f1: Binomial(L, 1/2).
    distance = (reads[:, None, :] != reads[None, :, :]).sum(axis=2)
    expected = binom.logpmf(distance, 12, 2 * 0.1 * 0.9) - binom.logpmf(distance, 12, 0.5)
    off_diagonal = ~np.eye(12, dtype=bool)
    np.testing.assert_allclose(llr[off_diagonal], expected[off_diagonal], rtol=1e-12)


def test_bit_pattern_reads_flip_bits_at_the_error_rate(global_random_seed):
    reads, labels, _ = make_bit_patterns(
        50, reads_per_template=10, error_rate=0.1, random_state=global_random_seed
    )
    distance = (reads[:, None, :] != reads[None, :, :]).sum(axis=2)
    same = (labels[:, None] == labels[None, :]) & ~np.eye(len(labels), dtype=bool)
    # Two reads of one template differ in a bit with probability 2 p (1 - p).
    assert distance[same].mean() == pytest.approx(30 * 2 * 0.1 * 0.9, abs=0.5)
    assert distance[~same].mean() == pytest.approx(15.0, abs=0.5)


def test_bit_patterns_are_reproducible_and_optionally_ordered():
    first = make_bit_patterns(3, error_rate=0.05, random_state=7)
    second = make_bit_patterns(3, error_rate=0.05, random_state=7)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    _, labels, _ = make_bit_patterns(3, reads_per_template=2, shuffle=False, random_state=0)
    np.testing.assert_array_equal(labels, [0, 0, 1, 1, 2, 2])


@pytest.mark.parametrize(
    "params, match",
    [
        ({"error_rate": 0.5}, "error_rate"),
        ({"error_rate": 0.0}, "error_rate"),
        ({"length": 0}, "length"),
        ({"reads_per_template": 0}, "reads_per_template"),
    ],
)
def test_bit_pattern_parameters_are_validated(params, match):
    with pytest.raises(InvalidParameterError, match=match):
        make_bit_patterns(2, **params)


@pytest.mark.parametrize("scale", [1e38, 1e300, 1e-300])
def test_extreme_ratios_give_the_calls_of_moderate_ones(scale):
    """Ratios of 1e38 overflowed the float32 messages (NaN beliefs, singletons)."""
    llr = np.array([[0, 3.0, -1], [3, 0, 3], [-1, 3, 0]])
    reference = TransitivePropagation().fit(llr)
    model = TransitivePropagation().fit(llr * scale)
    np.testing.assert_array_equal(model.labels_, reference.labels_)
    assert model.converged_ and np.all(np.isfinite(model.beliefs_))
    assert np.array_equal(model.beliefs_ > 0, reference.beliefs_ > 0)


def test_ratios_whose_sum_overflows_are_named():
    with pytest.raises(ValueError, match="log likelihood ratios.*overflow.*rescale X"):
        TransitivePropagation().fit(np.full((4, 4), 1e308) * (1 - np.eye(4)))


###############################################################################
# Similarities as AffinityPropagation takes them

def _blob_similarities(seed):
    """Three separated unit-variance blobs of 40 points and their negative squared distances."""
    X, truth = make_blobs(
        40, centers=[(-6.0, 0.0), (6.0, 0.0), (0.0, 8.0)], random_state=seed
    )
    return -euclidean_distances(X, squared=True), truth


def test_similarities_with_the_default_threshold_warn_instead_of_silent_singletons(
    global_random_seed,
):
    """Negative squared distances gave 40 singletons and no word of why."""
    similarities, _ = _blob_similarities(global_random_seed)
    expected = r"n_samples=40 points.*threshold=0\.0.*similarities.*-r\*\*2"
    with pytest.warns(UserWarning, match=expected):
        model = TransitivePropagation().fit(similarities)
    np.testing.assert_array_equal(model.labels_, np.arange(40))


@pytest.mark.parametrize("threshold", [-16.0, -25.0])
def test_similarities_with_a_threshold_recover_the_blobs(threshold, global_random_seed):
    """Pairs closer than 4 (or 5) attract: the blobs come back.

    ARI 1.0 for seeds 0-29 at both; at -9 (closer than 3), 9 of 30 seeds
    split off an outlying point or two (ARI 0.895-0.95).
    """
    similarities, truth = _blob_similarities(global_random_seed)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        model = TransitivePropagation(threshold=threshold).fit(similarities)
    assert adjusted_rand_score(truth, model.labels_) >= 0.95
    assert model.converged_
    np.testing.assert_allclose(
        model.objective_, partition_objective(similarities - threshold, model.labels_)
    )


@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e6])
def test_max_sum_calls_depend_on_scores_and_threshold_together(scale, global_random_seed):
    similarities, _ = _blob_similarities(global_random_seed)
    reference = TransitivePropagation(threshold=-9.0).fit(similarities)
    scaled = TransitivePropagation(threshold=-9.0 * scale).fit(similarities * scale)
    np.testing.assert_array_equal(scaled.labels_, reference.labels_)
    shifted = TransitivePropagation().fit(similarities + 9.0)
    np.testing.assert_array_equal(shifted.labels_, reference.labels_)


def test_log_likelihood_ratios_that_all_repel_warn():
    llr = -np.ones((4, 4))
    with pytest.warns(UserWarning, match="0 of the 6 pairs"):
        TransitivePropagation().fit(llr)


def test_a_threshold_that_overflows_is_named():
    with pytest.raises(ValueError, match="threshold=-1e.308.*rescale X and threshold"):
        TransitivePropagation(threshold=-1e308).fit(np.full((3, 3), 1e308))


###############################################################################
# Sum-product marginals

@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("n_points", [3, 5, 6])
@pytest.mark.parametrize("damping", [0.0, 0.5])
def test_sum_product_update_matches_two_state_messages(n_points, damping, global_random_seed):
    rng = np.random.default_rng(global_random_seed + n_points)
    llr = _random_llr(n_points, rng, scale=1.0)
    for max_iter in (1, 3):
        model = TransitivePropagation(method="sum-product", damping=damping, max_iter=max_iter)
        model.fit(llr)
        expected = naive_max_sum(llr, model.n_iter_, damping, combine=np.logaddexp)
        np.testing.assert_allclose(model.beliefs_, expected, atol=1e-5 * max(1, np.abs(expected).max()))


def _exact_pairwise(llr):
    """P(i ~ j) under P(partition) ~ exp(sum of L_ij inside clusters), by enumeration."""
    from scipy.special import logsumexp

    n = len(llr)
    labels = np.array([_labels_of(p, n) for p in all_partitions(list(range(n)))])
    log_weights = np.array([partition_objective(llr, row) for row in labels])
    weights = np.exp(log_weights - logsumexp(log_weights))
    together = labels[:, :, None] == labels[:, None, :]
    return np.einsum("p,pij->ij", weights, together)


@pytest.mark.parametrize("scale", [0.5, 2.0, 1e35])
def test_sum_product_is_exact_on_a_single_triple(scale, global_random_seed):
    """N = 3: one transitivity factor, a tree-shaped factor graph, so BP is exact."""
    llr = _random_llr(3, np.random.default_rng(global_random_seed), scale=1.0) * scale
    model = TransitivePropagation(method="sum-product").fit(llr)
    assert model.converged_
    clipped = np.clip(llr, -1e4, 1e4)
    np.testing.assert_allclose(model.pairwise_probability_, _exact_pairwise(clipped), atol=1e-5)


def test_sum_product_marginals_agree_with_the_flat_trellis_on_clear_clusters():
    """Loopy BP is approximate; on well-separated read clusters it is close to exact."""
    from sktrellis import ExactFlatClustering
    from sktrellis.energies import CorrelationClustering

    _, _, llr = make_bit_patterns(3, reads_per_template=3, error_rate=0.02, random_state=0)
    model = TransitivePropagation(method="sum-product").fit(llr)
    energy = CorrelationClustering(affinity="precomputed", beta=1.0)
    exact = ExactFlatClustering(energy).fit(llr)
    assert model.converged_
    probabilities = model.pairwise_probability_
    assert np.array_equal(probabilities, probabilities.T) and np.all(np.diag(probabilities) == 1)
    assert np.all((probabilities >= 0) & (probabilities <= 1))
    assert np.abs(probabilities - exact.pairwise_probability_).mean() < 0.01


def test_max_sum_has_no_pairwise_probability():
    model = TransitivePropagation().fit(_random_llr(4, np.random.default_rng(0)))
    assert not hasattr(model, "pairwise_probability_")


def _truth_objective(labels, llr):
    together = labels[:, None] == labels[None, :]
    return float(np.triu(np.where(together, llr, 0.0), 1).sum())


@pytest.mark.slow  # 0.4 s; the quick suite checks the exact optimum of small read clusterings
def test_noisy_reads_converge_at_the_defaults():
    """10 templates, p_e = 0.15: at damping 0.5 and 200 iterations the calls still oscillated."""
    _, labels, llr = make_bit_patterns(10, error_rate=0.15, random_state=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = TransitivePropagation().fit(llr)
    assert model.converged_ and model.damping_ > 0.5
    assert model.objective_ >= 0.95 * _truth_objective(labels, llr)


@pytest.mark.parametrize("error_rate", [0.10, 0.15])
def test_paper_noise_levels_converge_at_the_defaults(error_rate, global_random_seed):
    """The K-populations experiment's noise: converged, near the templates' objective."""
    _, labels, llr = make_bit_patterns(8, error_rate=error_rate, random_state=global_random_seed)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = TransitivePropagation().fit(llr)
    assert model.converged_
    assert model.objective_ >= 0.85 * _truth_objective(labels, llr)


def test_clear_problems_stop_early_at_the_first_damping(global_random_seed):
    _, labels, llr = make_bit_patterns(8, error_rate=0.02, random_state=global_random_seed)
    model = TransitivePropagation().fit(llr)
    assert model.damping_ == 0.5 and model.n_iter_ < 25
    assert adjusted_rand_score(labels, model.labels_) == 1.0
    # A fixed damping stays as given.
    assert TransitivePropagation(damping=0.3).fit(llr).damping_ == 0.3


def test_calls_still_changing_at_max_iter_warn():
    """The ConvergenceWarning stays for a real failure: calls changing to the end."""
    _, _, llr = make_bit_patterns(10, error_rate=0.15, random_state=3)
    with pytest.warns(ConvergenceWarning, match=r"max_iter=30 iterations \(damping 0.75\)"):
        model = TransitivePropagation(max_iter=30).fit(llr)
    assert not model.converged_
