"""BayesianHierarchicalClustering against enumeration, a naive greedy and the exact DPM."""
import numpy as np
import pytest
from scipy.cluster.hierarchy import fcluster, is_monotonic, is_valid_linkage
from scipy.special import gammaln, logsumexp
from scipy.stats import multivariate_t
from sklearn.metrics import adjusted_rand_score
from sklearn.utils._param_validation import InvalidParameterError

from sktrellis._engine.tree.conversion import masks_from_merges, merges_from_tree
from sktrellis.baselines import BayesianHierarchicalClustering
from sktrellis.energies import Dasgupta, DirichletProcessMixture
from sktrellis import ExactFlatClustering

from .common import all_trees

GAUSSIAN_PRIOR = dict(
    mean_prior=[0.5, -0.2], mean_precision_prior=0.3, degrees_of_freedom_prior=3.5,
    covariance_prior=[[1.2, 0.3], [0.3, 0.7]],
)


def _problem(component, n_points, rng, alpha=0.8):
    """(model, X): clustered Gaussian data or random binary data."""
    if component == "gaussian":
        centres = rng.normal(scale=3.0, size=(3, 2))
        X = centres[rng.integers(3, size=n_points)] + rng.normal(size=(n_points, 2))
        return BayesianHierarchicalClustering(
            DirichletProcessMixture(alpha=alpha, **GAUSSIAN_PRIOR)
        ), X
    X = (rng.random((n_points, 5)) < 0.4).astype(float)
    model = BayesianHierarchicalClustering(
        DirichletProcessMixture(alpha=alpha, component="bernoulli", bernoulli_prior=(0.5, 0.8))
    )
    return model, X


def _one_type(covariance_type, **params):
    """BHC under the default DPM prior of one covariance type (no "auto" choice)."""
    return BayesianHierarchicalClustering(
        DirichletProcessMixture(covariance_type=covariance_type), covariance_type=None, **params
    )


def _cluster_table(model, X):
    """log a(C) = log alpha + log Gamma(|C|) + log p(D_C) of every subset C, under the
    model's energy (of one covariance type: the prior's matrix, or Bernoulli)."""
    return model.energy.cluster_potential(X)


def _log_marginals(model, X):
    """log p(D_C) of every subset, from the energy's table."""
    table = _cluster_table(model, X)
    sizes = np.bitwise_count(np.arange(len(table), dtype=np.uint64)).astype(float)
    sizes[0] = 1.0
    return table - np.log(model.energy.alpha) - gammaln(sizes)


def _subtree_masks(model):
    """Mask of every node of the fitted tree: leaves, then one per linkage row."""
    merges = merges_from_tree(model.linkage_matrix_, model.n_leaves_)
    return merges, masks_from_merges(merges, model.n_leaves_)


def _tree_consistent_partitions(merges, n_points):
    """Every tree-consistent partition of every node, as lists of cluster masks."""
    masks = masks_from_merges(merges, n_points)
    partitions = [[[masks[i]]] for i in range(n_points)]
    for k, (a, b) in enumerate(merges):
        node = n_points + k
        partitions.append(
            [[masks[node]]] + [left + right for left in partitions[a] for right in partitions[b]]
        )
    return partitions


def _log_weight(partition, log_cluster):
    """log prod_C alpha Gamma(|C|) p(D_C) of a partition."""
    return sum(log_cluster[mask] for mask in partition)


@pytest.mark.parametrize("component", ["gaussian", "bernoulli"])
@pytest.mark.parametrize("n_points", [2, 3, 5, 7])
@pytest.mark.parametrize("algorithm", ["sparse", "greedy", "exact"])
def test_recursion_matches_tree_consistent_partitions(component, n_points, algorithm,
                                                       global_random_seed):
    rng = np.random.default_rng(global_random_seed + n_points)
    model, X = _problem(component, n_points, rng)
    model.set_params(algorithm=algorithm).fit(X)
    log_cluster = _cluster_table(model, X)
    merges, masks = _subtree_masks(model)
    partitions = _tree_consistent_partitions(merges, n_points)
    log_alpha = np.log(model.energy.alpha)

    for k in range(n_points - 1):
        node = n_points + k
        weights = np.array([_log_weight(v, log_cluster) for v in partitions[node]])
        # d_k: the same sum with p(D_C) = 1; p(D_k | T_k) = sum of weights / d_k.
        log_d = logsumexp([
            sum(log_alpha + gammaln(bin(mask).count("1")) for mask in v)
            for v in partitions[node]
        ])
        # r_k: the weight of the one-cluster partition over all of them.
        assert model.merge_log_probability_[k] == pytest.approx(
            weights[0] - logsumexp(weights), abs=1e-9
        )
        if node == 2 * n_points - 2:
            log_tree = logsumexp(weights) - log_d
            assert model.log_marginal_likelihood_ == pytest.approx(log_tree, abs=1e-9)
            # The bound: DPM (CRP) prior times likelihood, over these partitions only.
            crp = weights + gammaln(model.energy.alpha) - gammaln(model.energy.alpha + n_points)
            assert model.log_evidence_lower_bound_ == pytest.approx(logsumexp(crp), abs=1e-9)
    # c_k = c_i c_j + 1 tree-consistent partitions (Proposition 1).
    counts = [1] * n_points
    for a, b in merges:
        counts.append(counts[a] * counts[b] + 1)
    assert len(partitions[-1]) == counts[-1]


def _chain_rule_gaussian(X, mean, kappa, nu, scale):
    """log p(x_1..x_n) as a product of multivariate t posterior predictives."""
    dim = X.shape[1]
    total = 0.0
    for n, x in enumerate(X):
        seen = X[:n]
        kappa_n, nu_n = kappa + n, nu + n
        mean_n = (kappa * mean + seen.sum(axis=0)) / kappa_n
        scatter = scale.copy()
        if n:
            centred = seen - seen.mean(axis=0)
            gap = seen.mean(axis=0) - mean
            scatter += centred.T @ centred + kappa * n / kappa_n * np.outer(gap, gap)
        dof = nu_n - dim + 1
        total += multivariate_t.logpdf(
            x, loc=mean_n, shape=scatter * (kappa_n + 1) / (kappa_n * dof), df=dof
        )
    return total


def _chain_rule_bernoulli(X, a, b):
    """log p(x_1..x_n) with each bit predicted by (a + ones) / (a + b + n)."""
    total = 0.0
    for n, x in enumerate(X):
        ones = X[:n].sum(axis=0)
        p_one = (a + ones) / (a + b + n)
        total += np.sum(np.where(x == 1, np.log(p_one), np.log1p(-p_one)))
    return total


@pytest.mark.parametrize("component", ["gaussian", "bernoulli"])
def test_marginal_likelihoods_follow_the_chain_rule_of_predictives(component, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    model, X = _problem(component, 6, rng)
    log_marginal = _log_marginals(model, X)
    for mask in rng.integers(1, 1 << 6, size=12):
        points = X[[i for i in range(6) if mask >> i & 1]]
        points = points[rng.permutation(len(points))]
        if component == "gaussian":
            expected = _chain_rule_gaussian(
                points, np.array(GAUSSIAN_PRIOR["mean_prior"]),
                GAUSSIAN_PRIOR["mean_precision_prior"], GAUSSIAN_PRIOR["degrees_of_freedom_prior"],
                np.array(GAUSSIAN_PRIOR["covariance_prior"]),
            )
        else:
            expected = _chain_rule_bernoulli(points, 0.5, 0.8)
        assert log_marginal[mask] == pytest.approx(expected, rel=1e-10)


def _replay_greedy(merges, log_marginal, n_points, alpha, tolerance=1e-9):
    """Check that the tree's merges can be made in an order that is always greedy.

    Replays BHC's agglomeration, recomputing every pair's r_k at every step:
    some merge of the tree whose two children are current clusters must have
    the largest r_k of all pairs (up to exact ties). Returns the root's log
    p(D | T) computed along the way.
    """
    log_alpha = np.log(alpha)
    masks = masks_from_merges(merges, n_points)
    wanted = {masks[n_points + k] for k in range(n_points - 1)}
    # Each cluster (a mask) holds (log d, log p(D | T)).
    clusters = {1 << i: (log_alpha, log_marginal[1 << i]) for i in range(n_points)}
    while len(clusters) > 1:
        candidates = {}
        keys = sorted(clusters)
        for x, a in enumerate(keys):
            for b in keys[x + 1 :]:
                (log_d_a, log_p_a), (log_d_b, log_p_b) = clusters[a], clusters[b]
                log_one = log_alpha + gammaln(bin(a | b).count("1"))
                log_d = np.logaddexp(log_one, log_d_a + log_d_b)
                merged = log_one - log_d + log_marginal[a | b]
                log_p = np.logaddexp(merged, log_d_a + log_d_b - log_d + log_p_a + log_p_b)
                candidates[a, b] = (merged - log_p, log_d, log_p)
        best = max(value[0] for value in candidates.values())
        chosen = [pair for pair, value in candidates.items()
                  if pair[0] | pair[1] in wanted and value[0] >= best - tolerance]
        assert chosen, "the tree has no merge of largest r_k available"
        a, b = chosen[0]
        del clusters[a], clusters[b]
        clusters[a | b] = candidates[a, b][1:]
    return clusters[(1 << n_points) - 1][1]


@pytest.mark.parametrize("component", ["gaussian", "bernoulli"])
@pytest.mark.parametrize("alpha", [0.1, 1.0, 10.0])
def test_every_merge_is_the_most_probable_one(component, alpha, global_random_seed):
    # Binary data has exact ties (permuting features permutes nothing in
    # the marginals), so the certificate allows any tied merge.
    rng = np.random.default_rng(global_random_seed)
    model, X = _problem(component, 12, rng, alpha=alpha)
    model.set_params(algorithm="greedy").fit(X)
    merges = merges_from_tree(model.linkage_matrix_, len(X))
    log_tree = _replay_greedy(merges, _log_marginals(model, X), len(X), alpha)
    assert model.log_marginal_likelihood_ == pytest.approx(log_tree, abs=1e-9)


def _best_q_by_enumeration(log_cluster, n_points):
    """max over all trees of log q(T), q(T) = a(S) + q(left) q(right), by enumeration."""

    def log_q(subset, splits):
        children = {parent: left for parent, left in splits}
        if subset & (subset - 1) == 0:
            return log_cluster[subset]
        left = children[subset]
        return np.logaddexp(
            log_cluster[subset], log_q(left, splits) + log_q(subset ^ left, splits)
        )

    full = (1 << n_points) - 1
    values = [log_q(full, tree) for tree in all_trees(full)]
    return max(values)


@pytest.mark.parametrize("component", ["gaussian", "bernoulli"])
@pytest.mark.parametrize("n_points", [2, 3, 4, 5, 6])
def test_exact_tree_maximises_the_bound_over_all_trees(component, n_points, global_random_seed):
    rng = np.random.default_rng(global_random_seed + 10 * n_points)
    model, X = _problem(component, n_points, rng, alpha=rng.uniform(0.2, 3.0))
    exact = model.set_params(algorithm="exact").fit(X)
    best = _best_q_by_enumeration(_cluster_table(model, X), n_points)
    shift = gammaln(model.energy.alpha) - gammaln(model.energy.alpha + n_points)
    assert exact.log_evidence_lower_bound_ == pytest.approx(best + shift, abs=1e-9)
    greedy = model.set_params(algorithm="greedy").fit(X)
    assert greedy.log_evidence_lower_bound_ <= exact.log_evidence_lower_bound_ + 1e-9
    sparse = model.set_params(algorithm="sparse").fit(X)
    assert greedy.log_evidence_lower_bound_ - 1e-9 <= sparse.log_evidence_lower_bound_
    assert sparse.log_evidence_lower_bound_ <= exact.log_evidence_lower_bound_ + 1e-9


def _splits_of(merges, n_points):
    """{(parent mask, {left mask, right mask})} of a children-first merge list."""
    masks = masks_from_merges(np.asarray(merges), n_points)
    return {(masks[n_points + k], frozenset((masks[a], masks[b])))
            for k, (a, b) in enumerate(merges)}


@pytest.mark.parametrize("component", ["gaussian", "bernoulli"])
@pytest.mark.parametrize("n_points", [3, 5, 7])
def test_sparse_tree_is_the_best_tree_spanned_by_the_seed_trees(component, n_points,
                                                                 global_random_seed):
    """algorithm="sparse" against enumeration: the best of all trees whose every
    split is a split of the greedy, Ward or average linkage tree."""
    from scipy.cluster.hierarchy import linkage

    rng = np.random.default_rng(global_random_seed + 100 * n_points)
    model, X = _problem(component, n_points, rng, alpha=rng.uniform(0.2, 3.0))
    greedy = model.set_params(algorithm="greedy").fit(X)
    seeds = [merges_from_tree(greedy.linkage_matrix_, n_points)] + [
        linkage(X, method)[:, :2].astype(np.int64) for method in ("ward", "average")
    ]
    allowed = set().union(*(_splits_of(seed, n_points) for seed in seeds))
    log_cluster = _cluster_table(model, X)

    def log_q(subset, children):
        if subset & (subset - 1) == 0:
            return log_cluster[subset]
        left = children[subset]
        return np.logaddexp(log_cluster[subset],
                            log_q(left, children) + log_q(subset ^ left, children))

    full = (1 << n_points) - 1
    spanned = [tree for tree in all_trees(full)
               if all((p, frozenset((a, p ^ a))) in allowed for p, a in tree)]
    best = max(log_q(full, dict(tree)) for tree in spanned)
    sparse = model.set_params(algorithm="sparse").fit(X)
    shift = gammaln(model.energy.alpha) - gammaln(model.energy.alpha + n_points)
    assert sparse.log_evidence_lower_bound_ == pytest.approx(best + shift, abs=1e-9)
    assert _splits_of(merges_from_tree(sparse.linkage_matrix_, n_points), n_points) <= allowed


@pytest.mark.parametrize("component", ["gaussian", "bernoulli"])
@pytest.mark.parametrize("algorithm", ["sparse", "greedy", "exact"])
@pytest.mark.parametrize("alpha", [0.3, 2.0])
def test_bound_is_below_the_exact_dpm_evidence(component, algorithm, alpha, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    model, X = _problem(component, 10, rng, alpha=alpha)
    model.set_params(algorithm=algorithm).fit(X)
    exact = ExactFlatClustering(model.energy_).fit(X)
    assert model.log_evidence_lower_bound_ <= exact.log_evidence_ + 1e-9
    # p(D | T) renormalises the prior over tree-consistent partitions and is
    # not itself a bound; the gap to the bound is log of their prior mass.
    assert model.log_evidence_lower_bound_ <= model.log_marginal_likelihood_ + 1e-9


def _top_down_cut(merges, log_r, n_points):
    """Clusters of the paper's cut: from the root, split every node with r_k < 0.5."""
    masks = masks_from_merges(merges, n_points)
    clusters, stack = [], [2 * n_points - 2]
    while stack:
        node = stack.pop()
        if node < n_points or log_r[node - n_points] >= np.log(0.5):
            clusters.append(masks[node])
        else:
            stack.extend(merges[node - n_points])
    return sorted(clusters)


def _cluster_masks(labels):
    return sorted(
        int(sum(1 << int(i) for i in np.flatnonzero(labels == k))) for k in np.unique(labels)
    )


@pytest.mark.parametrize("component", ["gaussian", "bernoulli"])
@pytest.mark.parametrize("alpha", [0.05, 1.0, 20.0])
def test_labels_are_the_r_cut_and_the_log2_cut_of_the_linkage(component, alpha,
                                                              global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    model, X = _problem(component, 30, rng, alpha=alpha)
    model.fit(X)
    Z = model.linkage_matrix_
    assert is_valid_linkage(Z, throw=True) and is_monotonic(Z)
    merges = merges_from_tree(Z, len(X))
    expected = _top_down_cut(merges, model.merge_log_probability_, len(X))
    assert _cluster_masks(model.labels_) == expected
    assert _cluster_masks(fcluster(Z, np.log(2), "distance")) == expected
    assert model.n_clusters_ == len(expected)
    np.testing.assert_array_equal(model.fit_predict(X), model.labels_)
    np.testing.assert_array_equal(model.children_, Z[:, :2].astype(int))
    np.testing.assert_array_equal(model.distances_, Z[:, 2])


@pytest.mark.parametrize("n_clusters", [1, 2, 5, 30])
def test_n_clusters_gives_exactly_that_many(n_clusters, global_random_seed):
    model, X = _problem("gaussian", 30, np.random.default_rng(global_random_seed))
    model.set_params(n_clusters=n_clusters).fit(X)
    assert len(np.unique(model.labels_)) == n_clusters == model.n_clusters_


def test_separated_blobs_are_recovered(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    truth = np.repeat(np.arange(4), 25)
    centres = 10.0 * np.vstack([np.zeros(3), np.eye(3)])
    X = centres[truth] + rng.uniform(-1.0, 1.0, size=(100, 3))
    model = BayesianHierarchicalClustering(
        DirichletProcessMixture(covariance_prior=1.0, mean_precision_prior=0.1)
    )
    assert adjusted_rand_score(truth, model.fit_predict(X)) == 1.0
    assert model.n_clusters_ == 4


@pytest.mark.slow  # 0.4 s: large data belong in the full suite
def test_large_data_stays_finite_in_log_space(global_random_seed):
    # d_k grows like Gamma(N) and p(D | H1) like exp(-N): both overflow or
    # underflow in linear space long before N = 500.
    rng = np.random.default_rng(global_random_seed)
    X = rng.normal(size=(500, 2))
    model = BayesianHierarchicalClustering().fit(X)
    assert np.isfinite(model.log_marginal_likelihood_)
    assert np.isfinite(model.log_evidence_lower_bound_)
    assert np.all(np.isfinite(model.merge_log_probability_))
    assert np.all(model.merge_log_probability_ <= 1e-12)


def test_default_priors_are_the_dpm_defaults(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    X = rng.normal(size=(9, 3)) * [1.0, 2.0, 0.5]
    alpha = 0.7
    default = BayesianHierarchicalClustering(
        DirichletProcessMixture(alpha=alpha), covariance_type=None
    ).fit(X)
    # The documented rule: G = sum_{i < N} alpha / (alpha + i) clusters
    # expected, E[Sigma] = G**(-2/d) diag(variances) with nu_0 = d + 2, and
    # kappa_0 such that E[Sigma] (1 + 1 / kappa_0) = diag(variances).
    expected_clusters = sum(alpha / (alpha + i) for i in range(len(X)))
    within = expected_clusters ** (-2.0 / X.shape[1])
    explicit = BayesianHierarchicalClustering(DirichletProcessMixture(
        alpha=alpha, mean_prior=X.mean(axis=0), degrees_of_freedom_prior=5,
        covariance_prior=within * np.diag(X.var(axis=0)),
        mean_precision_prior=within / (1.0 - within),
    ), covariance_type=None).fit(X)
    assert default.log_evidence_lower_bound_ == pytest.approx(
        explicit.log_evidence_lower_bound_, rel=1e-12
    )
    params = default.energy_.get_params()
    assert params == DirichletProcessMixture(alpha=alpha).get_params()


@pytest.mark.parametrize("algorithm", ["sparse", "exact"])
def test_auto_keeps_the_covariance_type_of_largest_bound(algorithm, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    X = np.r_[rng.normal(0, 1, (5, 2)) * [1.0, 3.0], rng.normal(4, 0.5, (4, 2))]
    auto = BayesianHierarchicalClustering(algorithm=algorithm).fit(X)
    bounds = {}
    for covariance_type in ("full", "diag", "spherical"):
        model = _one_type(covariance_type, algorithm=algorithm).fit(X)
        bounds[covariance_type] = model.log_evidence_lower_bound_
        if covariance_type == auto.covariance_type_:
            kept = model
    assert auto.covariance_type_lower_bounds_ == pytest.approx(bounds, rel=1e-12)
    assert auto.log_evidence_lower_bound_ == max(bounds.values())
    np.testing.assert_array_equal(auto.linkage_matrix_, kept.linkage_matrix_)
    assert auto.energy_.covariance_type == auto.covariance_type_
    # The bound is below the exact DPM evidence of the kept type.
    exact = ExactFlatClustering(auto.energy_).fit(X)
    assert auto.log_evidence_lower_bound_ <= exact.log_evidence_ + 1e-9


def test_auto_follows_the_type_a_covariance_prior_array_names():
    X = np.random.default_rng(0).normal(size=(8, 2))
    diag = BayesianHierarchicalClustering(DirichletProcessMixture(covariance_prior=[1.0, 2.0]))
    full = BayesianHierarchicalClustering(DirichletProcessMixture(covariance_prior=np.eye(2)))
    diag.fit(X)
    full.fit(X)
    assert list(diag.covariance_type_lower_bounds_) == ["diag"]
    assert list(full.covariance_type_lower_bounds_) == ["full"]


@pytest.mark.parametrize("covariance_type", ["diag", "spherical"])
def test_auto_refuses_to_ignore_the_covariance_type_of_the_energy(covariance_type):
    """An energy of another type than the default would be silently overridden by "auto"."""
    X = np.random.default_rng(0).normal(size=(8, 2))
    energy = DirichletProcessMixture(covariance_type=covariance_type)
    with pytest.raises(ValueError, match=f"covariance_type={covariance_type!r}.* "
                                         "covariance_type=None"):
        BayesianHierarchicalClustering(energy).fit(X)
    model = BayesianHierarchicalClustering(energy, covariance_type=None).fit(X)
    assert list(model.covariance_type_lower_bounds_) == [covariance_type]


def test_exact_verbose_shows_the_progress_of_the_best_tree(capsys, global_random_seed):
    model, X = _problem("gaussian", 6, np.random.default_rng(global_random_seed))
    model.set_params(algorithm="exact", verbose=2).fit(X)
    err = capsys.readouterr().err
    estimate, bar = err.split("\n")[:2]
    assert "best tree over the 2**6 subsets of n_samples=6: 301 splits" in estimate
    assert "100%|" in bar and "subsets of size 6/6" in bar


def test_input_is_not_mutated(global_random_seed):
    model, X = _problem("gaussian", 8, np.random.default_rng(global_random_seed))
    copy = X.copy()
    model.fit(X)
    np.testing.assert_array_equal(X, copy)


@pytest.mark.parametrize(
    "params, X, match",
    [
        ({}, [[0.0, 1.0]], "minimum of 2 is required"),
        ({}, [[0.0, np.nan], [1.0, 2.0]], "NaN"),
        ({"energy": DirichletProcessMixture(component="bernoulli")}, [[0.0, 1.0], [0.5, 1.0]],
         r"binary data .* is 0.5"),
        ({"n_clusters": 3}, [[0.0], [1.0]], "n_clusters=3 must be at most n_samples=2"),
        ({"energy": DirichletProcessMixture(degrees_of_freedom_prior=0.5)},
         [[0.0, 1.0], [1.0, 0.0]], "exceed n_features - 1"),
        ({"energy": DirichletProcessMixture(covariance_prior=[[1.0, 2.0], [2.0, 1.0]])},
         [[0.0, 1.0], [1.0, 0.0]], "positive definite"),
        ({}, [[1.0, 0.0], [1.0, 0.0]], "every feature of X is constant"),
        ({"algorithm": "exact"}, np.arange(62.0).reshape(31, 2),
         r'n_samples=31 .* use algorithm="greedy"'),
    ],
)
def test_bad_input_is_rejected(params, X, match):
    with pytest.raises(ValueError, match=match):
        BayesianHierarchicalClustering(**params).fit(X)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"energy": DirichletProcessMixture(alpha=0.0)}, "alpha"),
        ({"energy": DirichletProcessMixture(component="poisson")}, "component"),
        ({"energy": DirichletProcessMixture(mean_precision_prior=-1.0)}, "mean_precision_prior"),
        ({"energy": Dasgupta()}, "'energy' parameter .*DirichletProcessMixture"),
        ({"energy": DirichletProcessMixture}, "'energy' parameter .*DirichletProcessMixture"),
        ({"covariance_type": "full"}, "covariance_type"),
        ({"n_clusters": 0}, "n_clusters"),
        ({"algorithm": "beam"}, "algorithm"),
    ],
)
def test_bad_parameters_are_rejected(params, match):
    with pytest.raises(InvalidParameterError, match=match):
        BayesianHierarchicalClustering(**params).fit(np.eye(3))


###############################################################################
# Predictive distribution

def _partitions_as_member_lists(children, n_points):
    """Every partition whose clusters are nodes of the tree, as lists of member lists."""
    members = [[i] for i in range(n_points)]
    partitions = [[[[i]]] for i in range(n_points)]
    for a, b in children:
        members.append(members[a] + members[b])
        partitions.append(
            [[members[-1]]] + [pa + pb for pa in partitions[a] for pb in partitions[b]]
        )
    return partitions[-1]


def _brute_force_predictive(energy, X, partitions, log_weights, X_new):
    """sum_P P(P) [sum_C n_C / (N + alpha) p(x | D_C) + alpha / (N + alpha) p(x)]."""
    n_points = len(X)
    component = energy.component_model(X)
    log_prior_predictive = component.log_marginal(component.statistics(X_new))
    weights = np.exp(log_weights - logsumexp(log_weights))
    total = np.zeros(len(X_new))
    for partition, weight in zip(partitions, weights):
        labels = np.empty(n_points, dtype=int)
        for label, cluster in enumerate(partition):
            labels[cluster] = label
        log_pred = energy.log_predictive(X, labels, X_new)
        sizes = np.bincount(labels)
        density = np.exp(log_pred) @ sizes / (n_points + energy.alpha)
        density += energy.alpha / (n_points + energy.alpha) * np.exp(log_prior_predictive)
        total += weight * density
    return np.log(total)


@pytest.mark.parametrize("component", ["gaussian", "bernoulli"])
@pytest.mark.parametrize("algorithm", ["sparse", "greedy", "exact"])
@pytest.mark.parametrize("n_points", [2, 4, 6])
def test_predictive_matches_the_sum_over_tree_consistent_partitions(
    component, algorithm, n_points, global_random_seed
):
    rng = np.random.default_rng(global_random_seed + n_points)
    if component == "gaussian":
        X = np.r_[rng.normal(0, 1, (n_points // 2, 2)), rng.normal(3, 1, (n_points - n_points // 2, 2))]
        X_new = rng.normal(1.5, 2, (5, 2))
    else:
        X = rng.integers(0, 2, (n_points, 4)).astype(float)
        X_new = rng.integers(0, 2, (5, 4)).astype(float)
    model = BayesianHierarchicalClustering(
        DirichletProcessMixture(alpha=0.7, component=component), algorithm=algorithm
    ).fit(X)
    energy = model.energy_
    log_a = energy.cluster_potential(X)            # log alpha Gamma(n_C) p(D_C)
    partitions = _partitions_as_member_lists(model.children_, n_points)
    log_weights = np.array([
        sum(log_a[sum(1 << i for i in cluster)] for cluster in partition)
        for partition in partitions
    ])
    expected = _brute_force_predictive(energy, X, partitions, log_weights, X_new)
    np.testing.assert_allclose(model.score_samples(X_new), expected, rtol=1e-10, atol=1e-10)

    # predict_proba: the same sums restricted to each flat cluster's subtree.
    probabilities = model.predict_proba(X_new)
    assert probabilities.shape == (5, model.n_clusters_)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0)
    np.testing.assert_array_equal(model.predict(X_new), probabilities.argmax(axis=1))

    if n_points == 2:
        # Every partition of two points is consistent with the tree: the
        # exact DPM posterior predictive, from the flat trellis's posterior.
        exact = ExactFlatClustering(energy).fit(X)
        all_partitions = [[[0, 1]], [[0], [1]]]
        log_post = np.array([exact.log_probability(labels) for labels in ([0, 0], [0, 1])])
        np.testing.assert_allclose(
            model.score_samples(X_new),
            _brute_force_predictive(energy, X, all_partitions, log_post, X_new),
            rtol=1e-10,
        )


def test_predictive_rejects_bad_new_points():
    X = np.random.default_rng(0).normal(size=(6, 2))
    model = BayesianHierarchicalClustering().fit(X)
    with pytest.raises(ValueError, match="features"):
        model.predict_proba(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="NaN"):
        model.score_samples([[np.nan, 0.0]])
    binary = BayesianHierarchicalClustering(DirichletProcessMixture(component="bernoulli")).fit(
        np.random.default_rng(0).integers(0, 2, (6, 3)).astype(float)
    )
    with pytest.raises(ValueError, match="binary"):
        binary.predict([[0.0, 0.5, 1.0]])


###############################################################################
# Hyperparameter learning

@pytest.mark.parametrize("component", [pytest.param("gaussian", marks=pytest.mark.slow), "bernoulli"])
def test_learned_hyperparameters_maximise_the_evidence_lower_bound(component):
    rng = np.random.default_rng(0)
    if component == "gaussian":
        X = np.r_[rng.normal(0, 0.5, (4, 2)), rng.normal(3, 0.5, (3, 2))]
    else:
        X = np.r_[rng.random((4, 5)) < 0.85, rng.random((3, 5)) < 0.15].astype(float)
    fixed = BayesianHierarchicalClustering(DirichletProcessMixture(component=component)).fit(X)
    model = BayesianHierarchicalClustering(
        DirichletProcessMixture(component=component), hyperparameters="learn"
    ).fit(X)
    assert model.log_evidence_lower_bound_ >= fixed.log_evidence_lower_bound_ - 1e-12
    # The best E step is kept (later ones improved by less than 1e-9 relative).
    assert model.log_evidence_lower_bound_ == pytest.approx(
        model.hyperparameter_log_likelihoods_.max(), rel=1e-9
    )
    # The search stays in its box: no collapse to alpha -> 0.
    assert 1e-3 <= model.alpha_ <= len(X)
    component_model = model.energy_.component_model(X)

    def value(alpha, scale):
        """The bound by enumeration: sum over tree-consistent partitions of prod a(C)."""
        log_marginal = component_model.rescaled(scale).subset_log_marginals(X)
        partitions = _partitions_as_member_lists(model.children_, len(X))
        return logsumexp([
            sum(np.log(alpha) + gammaln(len(c)) + log_marginal[sum(1 << i for i in c)]
                for c in p) for p in partitions
        ]) + gammaln(alpha) - gammaln(alpha + len(X))

    best = value(model.alpha_, model.prior_scale_)
    assert best == pytest.approx(model.log_evidence_lower_bound_, rel=1e-10)
    # A local maximum over both hyperparameters for the final tree (inside the box).
    for factor_alpha, factor_scale in [(1.05, 1), (0.95, 1), (1, 1.05), (1, 0.95)]:
        alpha = float(np.clip(model.alpha_ * factor_alpha, 1e-3, len(X)))
        scale = float(np.clip(model.prior_scale_ * factor_scale, 1e-4, 1e4))
        assert value(alpha, scale) <= best + 1e-6


def test_binarised_digits_tree_is_purer_than_average_linkage():
    """Bernoulli BHC at its defaults on 3 digit classes x 20 (pixel >= 8)."""
    from scipy.cluster.hierarchy import linkage
    from sklearn.datasets import load_digits

    from sktrellis.metrics import dendrogram_purity

    digits = load_digits()
    X, target = (digits.data >= 8).astype(float), digits.target
    rng = np.random.default_rng(0)
    rows = np.concatenate([rng.choice(np.flatnonzero(target == c), 20, replace=False)
                           for c in range(3)])
    model = BayesianHierarchicalClustering(DirichletProcessMixture(component="bernoulli"))
    model.fit(X[rows])
    purity = dendrogram_purity(target[rows], model.linkage_matrix_)
    assert purity >= dendrogram_purity(target[rows], linkage(X[rows], "average"))
    assert purity >= 0.9


def _previous_gaussian_prior(X):
    """The "full" default before the volume rule: Psi_0 = diag(variances), nu_0 = d."""
    return dict(covariance_prior=np.diag(X.var(axis=0)), degrees_of_freedom_prior=X.shape[1],
                mean_precision_prior=1.0)


def test_overlapping_blobs_at_defaults_give_their_four_clusters():
    """The previous default prior chained these blobs into one cluster (ARI 0).

    Measured: 4 clusters, ARI 0.788, spherical chosen by the bound (-859.5;
    diag -863.1, full -866.8, whose 3 clusters give ARI 0.610, as
    GaussianMixture with full covariances and BIC picks, ARI 0.652); the
    true centres give 0.792.
    """
    from sklearn.datasets import make_blobs

    X, y = make_blobs(200, centers=4, random_state=0)
    model = BayesianHierarchicalClustering().fit(X)
    assert model.n_clusters_ == 4
    assert adjusted_rand_score(y, model.labels_) >= 0.75
    full = _one_type("full").fit(X)
    assert model.log_evidence_lower_bound_ > full.log_evidence_lower_bound_
    previous = BayesianHierarchicalClustering(
        DirichletProcessMixture(**_previous_gaussian_prior(X)), algorithm="greedy"
    ).fit(X)
    assert previous.n_clusters_ == 1


def test_blobs_the_greedy_tree_chains_are_recovered():
    """On these blobs the greedy tree stops at 2 clusters (ARI 0.330).

    Measured: the default (sparse) tree has 4 clusters, ARI 0.874, and a
    DPM lower bound 50.7 nats above the greedy tree's (-872.1 against
    -922.8); KMeans(4) gets 0.896 here.
    """
    from sklearn.datasets import make_blobs

    X, y = make_blobs(200, centers=4, random_state=1)
    model = BayesianHierarchicalClustering().fit(X)
    greedy = BayesianHierarchicalClustering(algorithm="greedy").fit(X)
    assert model.n_clusters_ == 4
    assert adjusted_rand_score(y, model.labels_) >= 0.8
    assert model.log_evidence_lower_bound_ >= greedy.log_evidence_lower_bound_ + 40


@pytest.mark.slow  # 0.6 s; the other defaults tests cover the quick suite
def test_five_centre_blobs_at_defaults_are_split():
    """Make_blobs(200, centers=5), seeds 0-4.

    Measured (sparse): k = 3, 4, 3, 5, 4 and ARI 0.449, 0.741, 0.478,
    0.975, 0.779 (mean 0.684); the greedy tree: k = 2, 3, 3, 4, 4 and ARI
    0.207, 0.578, 0.478, 0.764, 0.779 (mean 0.561); the previous default
    prior: k = 1 on three seeds, mean ARI 0.207.
    """
    from sklearn.datasets import make_blobs

    scores = []
    for seed in range(5):
        X, y = make_blobs(200, centers=5, random_state=seed)
        model = BayesianHierarchicalClustering().fit(X)
        assert model.n_clusters_ >= 3, seed
        scores.append(adjusted_rand_score(y, model.labels_))
    assert np.mean(scores) >= 0.65


@pytest.mark.parametrize("shape", [(200, 2), pytest.param((100, 5), marks=pytest.mark.slow)])
def test_one_gaussian_at_defaults_is_one_cluster(shape):
    """The default prior on structureless data: one Gaussian stays one cluster (seeds 0-4)."""
    for seed in range(5):
        X = np.random.default_rng(seed).normal(size=shape)
        assert BayesianHierarchicalClustering().fit(X).n_clusters_ == 1, seed


def test_iris_at_defaults_is_not_worse_than_the_previous_prior():
    """Measured purity 0.785 (previous default 0.770), 2 clusters, ARI 0.568."""
    from sklearn.datasets import load_iris

    from sktrellis.metrics import dendrogram_purity

    X, y = load_iris(return_X_y=True)
    model = BayesianHierarchicalClustering().fit(X)
    assert dendrogram_purity(y, model.linkage_matrix_) >= 0.77
    assert model.n_clusters_ >= 2
    assert adjusted_rand_score(y, model.labels_) >= 0.55


@pytest.mark.slow
def test_learning_on_overlapping_blobs_keeps_several_clusters():
    """Learning from the previous default fell to alpha = 1e-3 and one cluster.

    Measured (sparse): alpha_ = 0.38, prior_scale_ = 4.6, 3 clusters, ARI
    0.592 (greedy: alpha_ = 1, prior_scale_ = 1, ARI 0.610). On 100 or
    fewer of these points the greedy tree's learning goes to one cluster,
    as GaussianMixture's BIC does.
    """
    from sklearn.datasets import make_blobs

    X, y = make_blobs(200, centers=4, random_state=0)
    # "full", whose learning collapsed (covariance_type="auto" learns each
    # type in turn: three times the cost).
    model = _one_type("full", hyperparameters="learn").fit(X)
    assert model.alpha_ > 0.01
    assert model.n_clusters_ >= 3
    assert adjusted_rand_score(y, model.labels_) >= 0.5


def test_fixed_hyperparameters_are_reported_as_given():
    X = np.random.default_rng(0).normal(size=(6, 2))
    model = BayesianHierarchicalClustering(DirichletProcessMixture(alpha=2.5)).fit(X)
    assert model.alpha_ == 2.5 and model.prior_scale_ == 1.0
    assert len(model.hyperparameter_log_likelihoods_) == 1


@pytest.mark.parametrize("covariance_type", ["full", "diag", "spherical"])
@pytest.mark.parametrize("relative", [1e-150, 1e150])
def test_prior_scale_far_from_the_data_is_fitted_exactly(covariance_type, relative):
    """A scalar covariance_prior 1e150 from the data's scale.

    main failed inside scipy's linkage check (1e-150: NaN merge scores) or
    the energy's guard; the bound must be the enumerated one and stay below
    the exact DPM evidence.
    """
    X = np.random.default_rng(0).normal(size=(6, 2))
    model = BayesianHierarchicalClustering(
        DirichletProcessMixture(covariance_type=covariance_type, covariance_prior=relative),
        covariance_type=None,
    ).fit(X)
    log_marginal = model.energy_.component_model(X).subset_log_marginals(X)
    partitions = _partitions_as_member_lists(model.children_, len(X))
    bound = logsumexp([
        sum(gammaln(len(c)) + log_marginal[sum(1 << i for i in c)] for c in p)
        for p in partitions
    ]) - gammaln(1.0 + len(X))
    assert model.log_evidence_lower_bound_ == pytest.approx(bound, rel=1e-10)
    exact = ExactFlatClustering(model.energy_).fit(X)
    assert np.isfinite(exact.log_evidence_)
    assert model.log_evidence_lower_bound_ <= exact.log_evidence_ + 1e-9


def test_exact_refuses_tables_that_cannot_fit_before_any_work(monkeypatch):
    """14 x 3000 spent 347 s on the leaves of a full covariance before refusing."""
    import sktrellis.baselines._bhc.bhc as bhc

    def no_work(*args, **kwargs):
        raise AssertionError("the tree was started before the memory check")

    monkeypatch.setattr(bhc, "_NodeTable", no_work)
    # Full covariances: 2**20 subsets of 3000**2 statistics, terabytes.
    X = np.random.default_rng(0).normal(size=(20, 3000))
    with pytest.raises(ValueError, match=r"n_samples=20.*covariance_type='diag'"):
        _one_type("full", algorithm="exact").fit(X)
    with pytest.raises(ValueError, match="n_samples=31"):
        BayesianHierarchicalClustering(algorithm="exact").fit(
            np.random.default_rng(0).normal(size=(31, 2)))


def _binarised_digits(n_samples):
    from sklearn.datasets import load_digits

    digits = load_digits()
    keep = np.isin(digits.target, [0, 1, 6])
    return (digits.data[keep][:n_samples] > 7).astype(float), digits.target[keep][:n_samples]


@pytest.mark.slow  # the full-covariance candidate over 64 features, about 10 s
def test_constant_columns_of_binary_data_fit_at_the_defaults():
    """Binarised digits have always-0 pixels; the default prior refused them."""
    from sklearn.metrics import adjusted_rand_score

    X, y = _binarised_digits(24)
    assert np.any(X.std(axis=0) == 0)
    model = BayesianHierarchicalClustering().fit(X)
    assert adjusted_rand_score(y, model.labels_) > 0.5


def test_constant_columns_get_the_mean_variance_as_prior():
    """Binarised digits have always-0 pixels; the default prior refused them."""
    X, _ = _binarised_digits(12)
    model = _one_type("diag").fit(X)
    assert np.isfinite(model.log_evidence_lower_bound_)
    # A constant feature's prior variance is the mean of the others'.
    from sktrellis.energies import DirichletProcessMixture

    variances = DirichletProcessMixture._variances(X, 0)
    constant = X.std(axis=0) == 0
    np.testing.assert_allclose(variances[constant], X.var(axis=0)[~constant].mean())
    np.testing.assert_allclose(variances[~constant], X.var(axis=0)[~constant])


def test_constant_columns_of_structureless_binary_data_fit(global_random_seed):
    X = (np.random.default_rng(global_random_seed).random((30, 20)) < 0.3).astype(float)
    X[:, :5] = 0.0
    model = BayesianHierarchicalClustering().fit(X)
    assert np.isfinite(model.log_evidence_lower_bound_)


def test_exact_auto_leaves_out_the_covariance_types_that_cannot_fit(monkeypatch,
                                                                   global_random_seed):
    from sktrellis._engine import resources

    # 2 GiB left: full covariances over 3000 features need about 5 GiB at
    # N = 12, diagonal ones a few MiB.
    monkeypatch.setattr(resources, "memory_limits", lambda: [("MemAvailable", 2 << 30)])
    X = np.random.default_rng(global_random_seed).normal(size=(12, 3000))
    X[:6] += 1.0
    model = BayesianHierarchicalClustering(algorithm="exact").fit(X)
    assert set(model.covariance_type_lower_bounds_) == {"diag", "spherical"}
###############################################################################
# Memory at the default (sparse) and greedy algorithms: estimated before any
# allocation, with full covariances refused (or, for "auto", left out) when
# their n_features**2 statistics a node would not fit.

@pytest.mark.parametrize("algorithm", ["sparse", "greedy"])
def test_full_covariances_that_would_not_fit_are_refused_naming_the_way_out(
        monkeypatch, algorithm):
    from sktrellis._engine import resources

    X = np.random.default_rng(0).normal(size=(40, 100))
    model = _one_type("full", algorithm=algorithm)
    need = model._fit_bytes(X, "full")
    monkeypatch.setattr(resources, "memory_limits",
                        lambda: [("the process limit RLIMIT_AS (ulimit -v)", need)])
    with pytest.raises(ValueError, match=r'covariance_type="full" statistics of '
                                         r'n_features=100 .* n_samples=40 requires .* use '
                                         r'covariance_type="diag"'):
        model.fit(X)
    # The default leaves full covariances out instead, and fits.
    default = BayesianHierarchicalClustering(algorithm=algorithm).fit(X)
    assert default.covariance_type_ in ("diag", "spherical")
    assert set(default.covariance_type_lower_bounds_) == {"diag", "spherical"}


@pytest.mark.parametrize("n_points, n_features",
                         [(20, 30), pytest.param(40, 60, marks=pytest.mark.slow)])
def test_the_estimate_covers_the_measured_peak(n_points, n_features):
    import tracemalloc

    X = np.random.default_rng(0).normal(size=(n_points, n_features))
    model = _one_type("full")
    tracemalloc.start()
    try:
        model.fit(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= model._fit_bytes(X, "full") + 2**20


def test_scored_pairs_come_in_blocks_bounded_in_bytes():
    from sktrellis.baselines._bhc._recursion import _BLOCK_BYTES, _block_rows

    width = 1 + 400 + 400**2  # full covariances of 400 features
    assert _block_rows(width) == _BLOCK_BYTES // (8 * width) == 52
    assert _block_rows(3) == 1 << 15
    assert _block_rows(10**9) == 1


###############################################################################
# The model parameter: an energy the estimator reads and never changes

@pytest.mark.parametrize("covariance_type", ["auto", None])
@pytest.mark.parametrize("hyperparameters", ["fixed", pytest.param("learn", marks=pytest.mark.slow)])
def test_the_energy_is_not_changed_and_the_fitted_one_is_a_clone(covariance_type,
                                                                  hyperparameters):
    X = np.random.default_rng(0).normal(size=(8, 2))
    energy = DirichletProcessMixture(alpha=0.5, covariance_prior=0.3)
    params = energy.get_params()
    model = BayesianHierarchicalClustering(
        energy, covariance_type=covariance_type, hyperparameters=hyperparameters
    ).fit(X)
    assert model.energy is energy and energy.get_params() == params
    assert model.energy_ is not energy
    assert model.energy_.get_params() == {**params, "covariance_type": model.covariance_type_}
    # The bound of the fixed hyperparameters is the energy_'s: fitting it again gives the same.
    if hyperparameters == "fixed":
        again = BayesianHierarchicalClustering(model.energy_, covariance_type=None).fit(X)
        assert again.log_evidence_lower_bound_ == model.log_evidence_lower_bound_


def test_energy_parameters_are_searched_as_nested_parameters():
    from sklearn.model_selection import GridSearchCV

    X = np.random.default_rng(0).normal(size=(10, 2))
    X[5:] += 3.0
    everything = [(np.arange(len(X)), np.arange(len(X)))]

    def bound(estimator, X, y=None):
        return estimator.log_evidence_lower_bound_

    search = GridSearchCV(BayesianHierarchicalClustering(),
                          {"energy__alpha": [0.01, 1.0, 5.0]}, scoring=bound, cv=everything)
    search.fit(X)
    expected = [
        BayesianHierarchicalClustering(DirichletProcessMixture(alpha=alpha)).fit(X)
        .log_evidence_lower_bound_ for alpha in (0.01, 1.0, 5.0)
    ]
    np.testing.assert_allclose(search.cv_results_["mean_test_score"], expected, rtol=1e-12)
    best = search.best_estimator_
    assert best.alpha_ == best.energy.alpha == search.best_params_["energy__alpha"]
    # energy=None takes the nested parameter on its default energy.
    model = BayesianHierarchicalClustering().set_params(energy__alpha=2.0)
    assert model.energy.get_params() == DirichletProcessMixture(alpha=2.0).get_params()
