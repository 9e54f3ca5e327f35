"""ExactHierarchicalClustering against brute-force enumeration of all trees."""
import math

import re

import numpy as np
import pytest
from scipy.cluster.hierarchy import fcluster, is_monotonic, is_valid_linkage
from scipy.special import logsumexp
from sklearn.base import clone
from sklearn.metrics import adjusted_rand_score

from sktrellis import ExactHierarchicalClustering
from sktrellis._engine.trellis import levels
from sktrellis.datasets import make_jets
from sktrellis.energies import CorrelationClustering, Dasgupta, GinkgoLikelihood

from .common import (
    assert_draws_follow,
    KINDS,
    all_trees,
    brute_force,
    children_over,
    cluster_marginals,
    random_problem,
    subtree_marginals,
    tree_splits_set,
)


# The 10,395 trees of 7 points cost a few tenths of a second a case to
# enumerate and check: the full suite runs them, the quick suite stops at
# the 945 trees of 6 points.
SEVEN_POINTS = pytest.param(7, marks=pytest.mark.slow)


@pytest.fixture(params=["plain", "blocked"])
def trellis_kernels(request, monkeypatch):
    """The separable and Ginkgo inside and outside passes, plain or cache-blocked at any N.

    Blocked with 2 low bits per row, so problems of 3 points or more have
    row pairs, subsets with an empty low part, and several items per level.
    """
    from sktrellis._engine.trellis import hierarchical_trellis

    blocked = request.param == "blocked"
    monkeypatch.setattr(hierarchical_trellis, "BLOCKED_MIN_POINTS", 0 if blocked else 10**6)
    monkeypatch.setattr(hierarchical_trellis, "BLOCK_BITS", 2)
    monkeypatch.setattr(hierarchical_trellis, "GINKGO_BLOCK_BITS", 2)
    monkeypatch.setattr(hierarchical_trellis, "GINKGO_INSIDE_BLOCK_BITS", 2)
    return request.param


def _fit_or_infeasible(energy, X, log_z):
    model = ExactHierarchicalClustering(energy, n_clusters=1)
    if log_z == -np.inf:
        with pytest.raises(ValueError, match="zero potential"):
            model.fit(X)
        pytest.skip("every tree is forbidden; the error was checked")
    return model.fit(X)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n_points", [2, 3, 4, 5, 6, SEVEN_POINTS])
def test_log_partition_map_and_counts_match_enumeration(
    kind, n_points, global_random_seed, kernel_threads, trellis_kernels
):
    rng = np.random.default_rng(global_random_seed + 1000 * n_points)
    energy, X = random_problem(kind, n_points, rng)
    model = ExactHierarchicalClustering(energy, n_clusters=1)
    potential = energy.split_potential(X)
    log_z, best, trees, values = brute_force(potential, n_points)
    model = _fit_or_infeasible(energy, X, log_z)

    assert model.log_partition_ == pytest.approx(log_z, rel=1e-12, abs=1e-12)
    assert model.map_log_potential_ == pytest.approx(best, rel=1e-12, abs=1e-12)
    assert model.n_trees_ == int(np.isfinite(values).sum())
    assert isinstance(model.n_trees_, int)
    # Certificate: the returned tree is one of the enumerated trees and its
    # potential is the maximum (HCC and Dasgupta have exact ties).
    map_splits = tree_splits_set(model.linkage_matrix_, n_points)
    map_value = [v for t, v in zip(trees, values) if set(t) == map_splits]
    assert map_value == [pytest.approx(best, rel=1e-12, abs=1e-12)]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n_points", [3, 5, 6, SEVEN_POINTS])
def test_cluster_marginals_and_tree_probabilities_match_enumeration(
    kind, n_points, global_random_seed, kernel_threads, trellis_kernels
):
    rng = np.random.default_rng(global_random_seed + 7 * n_points)
    energy, X = random_problem(kind, n_points, rng)
    potential = energy.split_potential(X)
    log_z, _, trees, values = brute_force(potential, n_points)
    model = _fit_or_infeasible(energy, X, log_z)

    marginal = cluster_marginals(trees, values, log_z, n_points)
    for subset in range(1, 1 << n_points):
        members = [i for i in range(n_points) if subset >> i & 1]
        assert model.cluster_probability(members) == pytest.approx(marginal[subset], abs=1e-12)

    for tree, value in list(zip(trees, values))[:: max(1, len(trees) // 50)]:
        children = _children_from_splits(tree, n_points)
        assert model.log_probability(children) == pytest.approx(value - log_z, abs=1e-10)


@pytest.mark.parametrize("beta", [1e-6, 1.0, 1e3, 1e6])
@pytest.mark.parametrize("kind", ["dasgupta", "hcc"])
def test_log_marginals_match_enumeration_at_extreme_calibrations(
    beta, kind, kernel_threads, trellis_kernels
):
    """The linear-space outside pass, and its log-space fallback, in log space.

    At beta >= 1e3 most clusters have marginals below 1e-308: their terms
    underflow against the level's scale and must be redone exactly.
    """
    n_points = 6
    rng = np.random.default_rng(int(beta) % 1000 + len(kind))
    if kind == "dasgupta":
        energy, X = Dasgupta(beta=beta), rng.normal(size=(n_points, 2))
    else:
        weights = rng.normal(size=(n_points, n_points))
        energy, X = CorrelationClustering(affinity="precomputed", beta=beta), weights + weights.T
    potential = energy.split_potential(X)
    log_z, _, trees, values = brute_force(potential, n_points)
    model = ExactHierarchicalClustering(energy).fit(X)
    log_marginals = model._trellis.cluster_log_marginals()
    terms = {subset: [] for subset in range(1, 1 << n_points)}
    for tree, value in zip(trees, values):
        for parent, left in tree:
            terms[left].append(value)
            terms[parent ^ left].append(value)
    for subset, subset_values in terms.items():
        if bin(subset).count("1") in (1, n_points):
            continue
        expected = logsumexp(subset_values) - log_z
        # Marginals are differences of log sums of size ~ log Z: absolute
        # rounding grows with |log Z| (1e6 at beta = 1e6).
        tolerance = 1e-12 * max(1.0, abs(log_z))
        assert log_marginals[subset] == pytest.approx(expected, rel=1e-9, abs=tolerance)
    assert model.log_partition_ == pytest.approx(log_z, rel=1e-12)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n_points", [3, 5, 6, SEVEN_POINTS])
def test_clade_support_and_mcc_tree_match_enumeration(kind, n_points, global_random_seed, kernel_threads):
    """Exact support of any tree's clusters, and the MCC tree.

    Oracle: marginals summed over all enumerated trees; the MCC tree is the
    enumerated tree of largest product of its clusters' marginals.
    """
    from scipy.cluster.hierarchy import linkage as scipy_linkage

    rng = np.random.default_rng(global_random_seed + 3 * n_points)
    energy, X = random_problem(kind, n_points, rng)
    potential = energy.split_potential(X)
    log_z, _, trees, values = brute_force(potential, n_points)
    model = _fit_or_infeasible(energy, X, log_z)
    marginal = np.zeros(1 << n_points)
    for tree, probability in zip(trees, np.exp(values - log_z)):
        for parent, left in tree:
            marginal[left] += probability
            marginal[parent ^ left] += probability
    marginal[(1 << n_points) - 1] = 1.0
    marginal[1 << np.arange(n_points)] = 1.0

    other = scipy_linkage(rng.normal(size=(n_points, 2)), "average")
    for tree in (None, other):
        Z = model.linkage_matrix_ if tree is None else tree
        masks = [1 << i for i in range(n_points)]
        for a, b in Z[:, :2].astype(int):
            masks.append(masks[a] | masks[b])
        expected = marginal[masks[n_points:]]
        np.testing.assert_allclose(model.clade_support(tree), expected, atol=1e-12)

    credibility = [
        np.prod([marginal[c] for c in {p for p, _ in t} | {a for _, a in t} | {p ^ a for p, a in t}])
        for t in trees
    ]
    linkage, log_credibility = model.max_clade_credibility_tree()
    assert np.exp(log_credibility) == pytest.approx(max(credibility), rel=1e-9, abs=1e-300)
    assert is_valid_linkage(linkage)
    assert np.prod(model.clade_support(linkage)) == pytest.approx(max(credibility), rel=1e-9)


def _children_from_splits(tree, n_points):
    """children_ array (children first) of a list of (parent, left) splits."""
    node_of = {1 << i: i for i in range(n_points)}
    children = []
    for parent, left in sorted(tree, key=lambda split: bin(split[0]).count("1")):
        children.append([node_of[left], node_of[parent ^ left]])
        node_of[parent] = n_points + len(children) - 1
    return np.array(children)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n_points", [3, 5, 6, SEVEN_POINTS])
def test_sub_hierarchy_marginals_match_enumeration(kind, n_points, global_random_seed):
    """log_probability(tree, members): every subtree of a few clusters, summed over all trees."""
    rng = np.random.default_rng(global_random_seed + 13 * n_points)
    energy, X = random_problem(kind, n_points, rng)
    potential = energy.split_potential(X)
    log_z, _, trees, values = brute_force(potential, n_points)
    model = _fit_or_infeasible(energy, X, log_z)
    marginal = subtree_marginals(trees, values, log_z, n_points)
    full = (1 << n_points) - 1
    subsets = range(1, full + 1)
    if n_points > 3:
        subsets = [full, 1] + list(rng.choice(np.arange(3, full), size=6, replace=False))
    for subset in subsets:
        members = rng.permutation([i for i in range(n_points) if subset >> i & 1])
        subtrees = all_trees(int(subset))
        if len(subtrees) > 1000:  # the 10,395 trees of 7 points: a random thousand of them
            subtrees = [subtrees[i] for i in rng.choice(len(subtrees), 1000, replace=False)]
        for subtree in subtrees:
            children = children_over(subtree, members)
            expected = marginal.get((int(subset), frozenset(subtree)), 0.0)
            got = model.log_probability(children, members=members)
            assert np.exp(got) == pytest.approx(expected, rel=1e-9, abs=1e-12)
            if subset == full and np.array_equal(np.sort(members), members):
                assert got == model.log_probability(children)
        mask = np.zeros(n_points, dtype=bool)
        mask[members] = True
        sorted_children = children_over(subtree, np.sort(members))
        assert model.log_probability(sorted_children, members=mask) == (
            model.log_probability(sorted_children, members=np.sort(members))
        )


@pytest.mark.parametrize(
    "members, tree, match",
    [
        ([0, 0, 1], [[0, 1], [2, 3]], "repeat"),
        ([0, 7], [[0, 1]], r"\[0, 4\)"),
        ([], np.zeros((0, 2)), "at least one"),
        ([0, 1, 2], [[0, 1]], r"tree over the 3 points of members.*\(2, 4\).*got shape \(1, 2\)"),
        ([0, 1], [[0, 1], [2, 3]], r"tree over the 2 points of members"),
        ([0, 1, 2], [[0, 1], [0, 2]], "exactly once"),
    ],
)
def test_bad_sub_hierarchy_queries(members, tree, match):
    model = ExactHierarchicalClustering(verbose=0).fit(np.arange(8.0).reshape(4, 2))
    with pytest.raises(ValueError, match=match):
        model.log_probability(np.asarray(tree), members=members)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n_points", [4, pytest.param(5, marks=pytest.mark.slow)])
def test_samples_follow_the_exact_posterior(kind, n_points, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    energy, X = random_problem(kind, n_points, rng)
    potential = energy.split_potential(X)
    log_z, _, trees, values = brute_force(potential, n_points)
    model = _fit_or_infeasible(energy, X, log_z)
    n_samples = 20000
    samples = model.sample(n_samples, random_state=global_random_seed)
    index = {frozenset(tree): i for i, tree in enumerate(trees)}
    observed = np.bincount(
        [index[frozenset(tree_splits_set(z, n_points))] for z in samples], minlength=len(trees)
    )
    expected = np.exp(values - log_z) * n_samples
    assert_draws_follow(observed, expected, "tree")
    for z in samples[:20]:
        assert is_valid_linkage(z) and is_monotonic(z)
        assert model.log_probability(z) <= model.map_log_potential_ - model.log_partition_ + 1e-9


@pytest.mark.parametrize("n_clusters", [1, 2, 3, 5])
def test_labels_are_the_fcluster_cut_of_a_valid_monotone_linkage(n_clusters, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    X = rng.normal(size=(9, 2))
    # A numeric beta: the linkage is the MAP tree's at any temperature, and
    # two columns would otherwise calibrate by the test (a tenth of a second).
    model = ExactHierarchicalClustering(Dasgupta(beta=1.0), n_clusters=n_clusters,
                                        labels_from="map_tree").fit(X)
    Z = model.linkage_matrix_
    assert is_valid_linkage(Z, throw=True) and is_monotonic(Z)
    assert np.all(np.diff(Z[:, 2]) > 0)
    assert len(np.unique(model.labels_)) == n_clusters
    scipy_labels = fcluster(Z, n_clusters, criterion="maxclust")
    assert adjusted_rand_score(model.labels_, scipy_labels) == 1.0
    np.testing.assert_array_equal(model.children_, Z[:, :2].astype(int))
    np.testing.assert_array_equal(model.distances_, Z[:, 2])
    assert np.array_equal(model.fit_predict(X), model.labels_)


def test_dasgupta_heights_are_subtree_costs():
    X = np.array([[0.0], [0.2], [3.0], [3.3], [8.0]])
    model = ExactHierarchicalClustering(Dasgupta(gamma=1.0)).fit(X)
    # The root's height is the whole tree's energy: minus its log potential.
    assert model.linkage_matrix_[-1, 2] == pytest.approx(-model.map_log_potential_, rel=1e-7)


def test_ties_are_broken_deterministically():
    X = np.eye(6)  # every pair at the same distance: every tree has the same Dasgupta cost
    energy = Dasgupta(tree_prior="uniform")   # and the same prior
    first = ExactHierarchicalClustering(energy, n_clusters=3).fit(X)
    second = ExactHierarchicalClustering(energy, n_clusters=3).fit(X)
    np.testing.assert_array_equal(first.linkage_matrix_, second.linkage_matrix_)
    # Uniform similarities: all 945 trees cost the same (Dasgupta 2016).
    assert first.log_partition_ == pytest.approx(np.log(945) + first.map_log_potential_)
    assert len(np.unique(first.labels_)) == 3


def test_extreme_energies_do_not_overflow():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(14, 2))
    for beta in [1e-8, 1.0, 1e4, 1e8]:
        model = ExactHierarchicalClustering(Dasgupta(beta=beta)).fit(X)
        assert np.isfinite(model.log_partition_) and np.isfinite(model.map_log_potential_)
        # log Z >= MAP, to the rounding of sums of about 1e10 (a few ulps).
        assert model.log_partition_ >= model.map_log_potential_ - 4 * np.spacing(
            abs(model.map_log_potential_))
        # log Z <= MAP + log(number of trees)
        assert model.log_partition_ <= model.map_log_potential_ + math.log(model.n_trees_) + 1e-6


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_separable_fast_path_matches_the_generic_path(n_jobs, global_random_seed):
    """The linear-space Dasgupta kernel against the same energy tabulated in log space."""
    from sktrellis.energies import SplitEnergy

    rng = np.random.default_rng(global_random_seed)
    X = rng.normal(size=(11, 2))
    energy = Dasgupta(beta=2.0)
    potential = energy.split_potential(X)

    def tabulated(X, left, right):
        return potential.evaluate((left | right).astype(np.uint32), left.astype(np.uint32))

    fast = ExactHierarchicalClustering(energy, n_jobs=n_jobs).fit(X)
    generic = ExactHierarchicalClustering(SplitEnergy(tabulated), n_jobs=n_jobs).fit(X)
    assert fast.log_partition_ == pytest.approx(generic.log_partition_, rel=1e-12)
    assert fast.map_log_potential_ == pytest.approx(generic.map_log_potential_, rel=1e-12)
    np.testing.assert_allclose(fast.linkage_matrix_, generic.linkage_matrix_, rtol=1e-9)
    assert fast.cluster_probability([0, 1]) == pytest.approx(
        generic.cluster_probability([0, 1]), rel=1e-10, abs=1e-14
    )


@pytest.mark.parametrize("scale", ["ties", "1e-3", "1", "1e3", "1e6"])
@pytest.mark.parametrize("n_points, block_bits", [(12, 4), (13, 7), (14, 11)])
def test_blocked_passes_match_the_plain_kernels(
    n_points, block_bits, scale, global_random_seed, kernel_threads, monkeypatch
):
    """The cache-blocked inside and outside passes against the plain kernels, every subset.

    Random separable tables: at large scales most terms underflow against
    the level's scale (factors of 0, log psi of -inf to linear space), so
    sums fall below the floor and are redone in log space; small integer
    tables ("ties") make MAP ties, which both kernels must break alike.
    """
    from sktrellis._engine.potential._split_potential import SplitPotential
    from sktrellis._engine.trellis import hierarchical_trellis
    from sktrellis._engine.trellis.hierarchical_trellis import HierarchicalTrellis

    rng = np.random.default_rng(global_random_seed)
    n_subsets = 1 << n_points
    if scale == "ties":
        tables = [rng.integers(-2, 3, n_subsets), rng.integers(-2, 3, n_subsets),
                  rng.integers(-1, 2, n_points + 1)]
    else:
        tables = [float(scale) * rng.normal(size=n) for n in (n_subsets, n_subsets, n_points + 1)]
    potential = SplitPotential.separable(n_points, *(np.asarray(t, float) for t in tables))
    monkeypatch.setattr(hierarchical_trellis, "BLOCK_BITS", block_bits)
    monkeypatch.setattr(hierarchical_trellis, "BLOCKED_MIN_POINTS", 10**6)
    plain = HierarchicalTrellis(potential, kernel_threads)
    monkeypatch.setattr(hierarchical_trellis, "BLOCKED_MIN_POINTS", 0)
    blocked = HierarchicalTrellis(potential, kernel_threads)
    inner = np.array([bin(x).count("1") >= 2 for x in range(n_subsets)])
    np.testing.assert_allclose(blocked.log_z[inner], plain.log_z[inner], rtol=1e-12, atol=0)
    np.testing.assert_array_equal(blocked.log_map, plain.log_map)
    np.testing.assert_array_equal(blocked.best_left[inner], plain.best_left[inner])
    blocked_marginals = blocked.cluster_log_marginals()
    monkeypatch.setattr(hierarchical_trellis, "BLOCKED_MIN_POINTS", 10**6)
    plain_marginals = plain.cluster_log_marginals()
    possible = plain_marginals > -np.inf
    np.testing.assert_array_equal(blocked_marginals > -np.inf, possible)
    # Differences of log sums of size ~ |log Z|: absolute rounding scales with it.
    tolerance = 1e-12 * max(1.0, abs(plain.log_partition))
    np.testing.assert_allclose(blocked_marginals[possible], plain_marginals[possible],
                               rtol=1e-10, atol=tolerance)


def test_published_ginkgo_jets():
    cases = _published_jets()
    for case in cases:
        momenta = np.array(case["leaves_4momenta"])
        model = ExactHierarchicalClustering(GinkgoLikelihood(
            lam=case["params"]["lambda"], t_cut=case["params"]["t_cut"])).fit(momenta)
        assert model.map_log_potential_ == pytest.approx(case["map_loglik"], abs=1e-9)
        assert model.log_partition_ == pytest.approx(case["log_Z"], abs=1e-9)
        assert model.n_trees_ == case["n_trees"]
        expected = _splits_of_nested(case["map_tree"])
        assert tree_splits_set(model.linkage_matrix_, len(momenta)) == expected


@pytest.fixture(params=["plain", 2, 10])
def ginkgo_blocking(request, monkeypatch):
    """The Ginkgo inside and outside passes plain, or cache-blocked at any N.

    Blocked with 2 low bits per row (rows of one or two splits per parent,
    subsets with an empty low part, several items per level) or 10 (a
    parent's splits in one row pair span more than one run of 256).
    """
    from sktrellis._engine.trellis import hierarchical_trellis

    blocked = request.param != "plain"
    monkeypatch.setattr(hierarchical_trellis, "BLOCKED_MIN_POINTS", 0 if blocked else 10**6)
    if blocked:
        monkeypatch.setattr(hierarchical_trellis, "GINKGO_BLOCK_BITS", request.param)
        monkeypatch.setattr(hierarchical_trellis, "GINKGO_INSIDE_BLOCK_BITS", request.param)
    return request.param


def test_published_ginkgo_jets_by_kernel_and_function(kernel_threads, ginkgo_blocking,
                                                      monkeypatch):
    for case in _published_jets():
        energy = GinkgoLikelihood(lam=case["params"]["lambda"], t_cut=case["params"]["t_cut"])
        potential = energy.split_potential(np.array(case["leaves_4momenta"]))
        _assert_same_trellis(*_ginkgo_kernel_and_function(potential, kernel_threads, monkeypatch))


def _ginkgo_kernel_and_function(potential, n_threads, monkeypatch):
    """The trellis of a Ginkgo potential by its own kernel and through its C function."""
    from sktrellis._engine.trellis import hierarchical_trellis
    from sktrellis._engine.trellis._hierarchical import ginkgo_kernel_applies

    assert ginkgo_kernel_applies(potential)
    trellis = hierarchical_trellis.HierarchicalTrellis
    kernel = trellis(potential, n_threads)
    monkeypatch.setattr(trellis, "use_ginkgo_kernel", False)
    function = trellis(potential, n_threads)
    monkeypatch.setattr(trellis, "use_ginkgo_kernel", True)
    # Its outside pass, on demand, through the C function too.
    function.use_ginkgo_kernel = False
    return kernel, function


def _assert_same_trellis(kernel, function):
    """Same MAP values, MAP splits and counts bit for bit; log Z and marginals to 1e-12.

    The marginals are those of the Ginkgo outside kernel (`kernel`) and of
    the log-space outside pass through the C function.
    """
    n_subsets = 1 << kernel.n_points
    inner = np.array([bin(x).count("1") >= 2 for x in range(n_subsets)])
    np.testing.assert_array_equal(kernel.log_map, function.log_map)
    np.testing.assert_array_equal(kernel.best_left[inner], function.best_left[inner])
    np.testing.assert_array_equal(kernel.counts, function.counts)
    np.testing.assert_array_equal(np.isfinite(kernel.log_z), np.isfinite(function.log_z))
    finite = np.isfinite(function.log_z)
    np.testing.assert_allclose(kernel.log_z[finite], function.log_z[finite], rtol=1e-12,
                               atol=1e-12)
    kernel_marginals = kernel.cluster_log_marginals()
    function_marginals = function.cluster_log_marginals()
    possible = function_marginals > -np.inf
    np.testing.assert_array_equal(kernel_marginals > -np.inf, possible)
    tolerance = 1e-12 * max(1.0, abs(function.log_partition))
    np.testing.assert_allclose(kernel_marginals[possible], function_marginals[possible],
                               rtol=1e-12, atol=tolerance)


@pytest.mark.parametrize("n_points", [2, 3, 6, 10, 11])
@pytest.mark.parametrize(
    "case", ["jet", "massive leaves", "ties and tau = 0", "below the cut", "below the range",
             "above the range", "tiny cut"])
def test_ginkgo_kernel_equals_the_function_potential(n_points, case, global_random_seed,
                                                     kernel_threads, ginkgo_blocking,
                                                     monkeypatch):
    """The linear-space Ginkgo kernel gives what the log-space formula gives.

    10 and 11 points have parents of more than one chunk of 256 splits.
    Random mass tables (not physical) reach every branch: massive leaves
    (no single-particle formula), equal child masses and tau = 0 (a
    forbidden split), parents below the cut, linear sums out of range
    (the exact log-space redo), and single-particle terms too close to
    log(0) for linear space.
    """
    from sktrellis._engine.potential._ginkgo import ginkgo_potential

    rng = np.random.default_rng(global_random_seed + 100 * n_points)
    n_subsets = 1 << n_points
    sizes = np.array([bin(x).count("1") for x in range(n_subsets)])
    lam, t_cut = 1.5, 16.0
    if case == "jet":
        X = make_jets(n_leaves=n_points, random_state=int(rng.integers(2**31)))[0].momenta
        potential = GinkgoLikelihood(lam=lam, t_cut=t_cut).split_potential(X)
    else:
        # Masses grow with the subset so that most splits are allowed.
        mass2 = (sizes * 20.0) ** 2 * rng.uniform(0.5, 1.5, n_subsets)
        mass2[sizes <= 1] = 0.0
        if case == "massive leaves":
            mass2[sizes == 1] = rng.uniform(0.0, 4.0, n_points)
        if case == "ties and tau = 0":
            mass2 = np.round(mass2, -3) + 1000.0 * (sizes >= 2)
            parents = np.flatnonzero(sizes >= 3)
            for parent in rng.choice(parents, size=len(parents) // 3):
                mass2[parent] = mass2[int(parent) & -int(parent) ^ int(parent)]
        if case == "below the cut":
            t_cut = float(np.quantile(mass2[sizes >= 2], 0.3))
        if case == "tiny cut":
            # A single particle's term log(1 - exp(-lam t_cut / tau)): exp
            # within an ulp of 1, or rounding to it (a forbidden split).
            t_cut = 1e-12
        if case == "below the range":
            # psi ~ 1 / tau ~ 1e-280: linear sums below LINEAR_SUM_FLOOR.
            mass2, t_cut = mass2 * 1e280, t_cut * 1e280
        if case == "above the range":
            # psi ~ 1 / tau ~ 1e306: linear sums overflow.
            mass2, t_cut = mass2 * 1e-307, t_cut * 1e-307
        potential = ginkgo_potential(n_points, mass2, lam, t_cut)
    kernel, function = _ginkgo_kernel_and_function(potential, kernel_threads, monkeypatch)
    _assert_same_trellis(kernel, function)


@pytest.mark.parametrize("width", [1, 4, 8])
@pytest.mark.parametrize("case", ["jet", "equal masses"])
def test_ginkgo_vector_paths_agree(width, case, global_random_seed, kernel_threads,
                                   ginkgo_blocking, monkeypatch):
    """The portable, AVX2 and AVX-512 forms of the Ginkgo passes give the same trellis.

    The inside rows and the outside runs (the marginals are computed under
    the same cap). The processor's widest path is what the other tests
    exercise; capped, the narrower ones (on a processor without the wider
    instructions the caps change nothing).
    """
    from sktrellis._engine.potential._ginkgo import ginkgo_potential
    from sktrellis._engine.trellis import _hierarchical as kernels

    rng = np.random.default_rng(global_random_seed)
    n_points = 9
    if case == "jet":
        X = make_jets(n_leaves=n_points, random_state=int(rng.integers(2**31)))[0].momenta
        potential = GinkgoLikelihood().split_potential(X)
    else:
        sizes = np.array([bin(x).count("1") for x in range(1 << n_points)])
        mass2 = np.round((sizes * 20.0) ** 2 * rng.uniform(0.5, 1.5, sizes.size), -3)
        mass2 = (mass2 + 1000.0) * (sizes >= 2)
        potential = ginkgo_potential(n_points, mass2, 1.5, 16.0)
    old = kernels.set_ginkgo_vector_width(width)
    try:
        kernel, function = _ginkgo_kernel_and_function(potential, kernel_threads, monkeypatch)
        _assert_same_trellis(kernel, function)
    finally:
        kernels.set_ginkgo_vector_width(old)


@pytest.mark.parametrize("n_points", [6, 10])
@pytest.mark.parametrize("case", ["both sides of the vector exp", "heavy child above its parent"])
def test_ginkgo_single_particle_splits_match_enumeration(n_points, case, global_random_seed,
                                                         kernel_threads, monkeypatch):
    """The splits into a single particle and the rest: vectorised exp or libm's.

    In the inside and the outside pass, their exp(-lam t_cut / tau) takes
    the vectorised exp where it is at most exp(-1/16) and libm's closer to
    1, as does the inside pass's exp(-lam t_B / t_S) below -700 (a heavy
    child far above its parent): random masses put splits on both sides,
    in runs of more than 8 single particles at 10 points. Against
    enumeration of every tree at 6 points (log Z, MAP, counts, every
    cluster marginal), against the log-space formula at 10 (MAP values,
    splits and counts bit for bit, log Z and marginals to 1e-12). The
    blocked passes read the same terms (the tests above compare them).
    """
    from sktrellis._engine.potential._ginkgo import ginkgo_potential

    rng = np.random.default_rng(global_random_seed + 10 * n_points)
    n_subsets = 1 << n_points
    sizes = np.array([bin(x).count("1") for x in range(n_subsets)])
    lam, t_cut = 1.5, 16.0
    mass2 = (sizes * 20.0) ** 2 * rng.uniform(0.5, 1.5, n_subsets)
    mass2[sizes <= 1] = 0.0
    if case == "heavy child above its parent":
        # Some clusters of two or more points far heavier than their parents.
        heavy = rng.choice(np.flatnonzero((sizes >= 2) & (sizes < n_points)), size=n_subsets // 8)
        mass2[heavy] *= 1e3
    potential = ginkgo_potential(n_points, mass2, lam, t_cut)
    # Which side of each threshold the single-particle splits fall on.
    parents = np.flatnonzero((sizes >= 3) & (mass2 >= t_cut))
    heavies = (parents[:, None] ^ (1 << np.arange(n_points)))[
        (parents[:, None] >> np.arange(n_points)) & 1 == 1]
    parents = np.repeat(parents, sizes[parents])
    tau = (np.sqrt(mass2[parents]) - np.sqrt(mass2[heavies])) ** 2
    c = lam * t_cut / tau[tau > 0]
    assert np.any(c >= 1 / 16) and np.any(c < 1 / 16)
    if case == "heavy child above its parent":
        assert np.any(lam * mass2[heavies] / mass2[parents] > 700)
    kernel, function = _ginkgo_kernel_and_function(potential, kernel_threads, monkeypatch)
    _assert_same_trellis(kernel, function)
    if n_points <= 6:
        log_z, best, trees, values = brute_force(potential, n_points)
        assert kernel.log_partition == pytest.approx(log_z, rel=1e-12, abs=1e-12)
        assert kernel.map_log_potential == pytest.approx(best, rel=1e-12, abs=1e-12)
        assert kernel.n_trees == int(np.isfinite(values).sum())
        marginal = cluster_marginals(trees, values, log_z, n_points)
        np.testing.assert_allclose(np.exp(kernel.cluster_log_marginals()), marginal,
                                   rtol=0, atol=1e-12)


def test_ginkgo_vector_width_is_checked():
    from sktrellis._engine.trellis import _hierarchical as kernels

    with pytest.raises(ValueError, match="width must be 1, 4 or 8"):
        kernels.set_ginkgo_vector_width(2)


@pytest.mark.parametrize("case", ["jet", "massless clusters"])
def test_ginkgo_sampler_draws_what_the_function_draws(case, global_random_seed):
    """The sampler's inline Ginkgo formula: the same trees as through the C function.

    The same uniforms give the same draws, split for split (the weights are
    the same bit for bit), also where the inside kernel declines (a massless
    cluster, when the function computed the tables).
    """
    from sktrellis._engine.potential._ginkgo import ginkgo_potential
    from sktrellis._engine.trellis import _hierarchical as kernels
    from sktrellis._engine.trellis.hierarchical_trellis import HierarchicalTrellis

    rng = np.random.default_rng(global_random_seed)
    n_points = 7
    if case == "jet":
        X = make_jets(n_leaves=n_points, random_state=int(rng.integers(2**31)))[0].momenta
        potential = GinkgoLikelihood().split_potential(X)
    else:
        sizes = np.array([bin(x).count("1") for x in range(1 << n_points)])
        mass2 = (sizes * 20.0) ** 2 * rng.uniform(0.5, 1.5, 1 << n_points)
        mass2[sizes <= 1] = 0.0
        mass2[3] = 0.0
        potential = ginkgo_potential(n_points, mass2, 1.5, 16.0)
    trellis = HierarchicalTrellis(potential)
    uniforms = rng.random((3000, n_points - 1))
    cache = np.empty(1 << 12)
    inline = kernels.sample_splits(potential, trellis.log_z, uniforms, cache, True)
    function = kernels.sample_splits(potential, trellis.log_z, uniforms, cache, False)
    np.testing.assert_array_equal(inline[0], function[0])
    np.testing.assert_array_equal(inline[1], function[1])
    with pytest.raises(ValueError, match="needs the Ginkgo potential"):
        kernels.sample_splits(Dasgupta().split_potential(X if case == "jet" else
                                                         rng.normal(size=(n_points, 2))),
                              trellis.log_z, uniforms, cache, True)


@pytest.mark.parametrize("n_points", [2, 5, 9])
@pytest.mark.parametrize("case", ["jet", "massless clusters", "below the cut"])
def test_ginkgo_subset_tables_entry_point(n_points, case, global_random_seed):
    """The C entry point for small clusters gives every subset's log Z, log MAP and MAP split.

    As the trellis through the C function: MAP values and splits bit for
    bit, log Z to 1e-12; with a massless cluster (every split in log space)
    and parents below the cut.
    """
    from sktrellis._engine.potential._ginkgo import ginkgo_potential
    from sktrellis._engine.trellis import _hierarchical as kernels
    from sktrellis._engine.trellis.hierarchical_trellis import HierarchicalTrellis

    rng = np.random.default_rng(global_random_seed + n_points)
    n_subsets = 1 << n_points
    sizes = np.array([bin(x).count("1") for x in range(n_subsets)])
    if case == "jet":
        X = make_jets(n_leaves=n_points, random_state=int(rng.integers(2**31)))[0].momenta
        potential = GinkgoLikelihood().split_potential(X)
    else:
        mass2 = (sizes * 20.0) ** 2 * rng.uniform(0.5, 1.5, n_subsets)
        mass2[sizes <= 1] = 0.0
        t_cut = 16.0
        if case == "massless clusters":
            mass2[3] = 0.0
        else:
            t_cut = float(np.quantile(mass2[sizes >= 2], 0.3))
        potential = ginkgo_potential(n_points, mass2, 1.5, t_cut)
    log_z, log_map, best_left = kernels.solve_ginkgo_subsets(potential)
    HierarchicalTrellis.use_ginkgo_kernel = False
    try:
        function = HierarchicalTrellis(potential)
    finally:
        HierarchicalTrellis.use_ginkgo_kernel = True
    inner = sizes >= 2
    np.testing.assert_array_equal(log_map[inner], function.log_map[inner])
    np.testing.assert_array_equal(best_left[inner], function.best_left[inner])
    np.testing.assert_array_equal(np.isfinite(log_z), np.isfinite(function.log_z))
    finite = np.isfinite(function.log_z)
    np.testing.assert_allclose(log_z[finite], function.log_z[finite], rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="needs the Ginkgo potential"):
        kernels.solve_ginkgo_subsets(Dasgupta().split_potential(rng.normal(size=(3, 2))))


def test_ginkgo_kernel_declines_massless_clusters():
    """A cluster of zero mass takes the single-particle formula: the C function computes it."""
    from sktrellis._engine.potential._ginkgo import ginkgo_potential
    from sktrellis._engine.trellis._hierarchical import ginkgo_kernel_applies

    mass2 = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 400.0, 400.0, 900.0])
    assert not ginkgo_kernel_applies(ginkgo_potential(3, mass2, 1.5, 16.0))
    mass2[3] = 100.0
    assert ginkgo_kernel_applies(ginkgo_potential(3, mass2, 1.5, 16.0))


def _published_jets():
    import json
    from pathlib import Path

    # ../shared/data beside the repository, from a checkout or a worktree
    # one directory deeper.
    candidates = [parent / "shared" / "data" / "ginkgo_published_jets.json"
                  for parent in Path(__file__).resolve().parents[1:4]]
    path = next((path for path in candidates if path.exists()), None)
    if path is None:
        pytest.skip(f"published jets not found at {candidates[1]}")
    return json.loads(path.read_text())["cases"]


def _splits_of_nested(tree):
    splits = set()

    def walk(node):
        if isinstance(node, int):
            return 1 << node
        left, right = walk(node[0]), walk(node[1])
        parent = left | right
        splits.add((parent, left if left & (parent & -parent) else right))
        return parent

    walk(tree)
    return splits


def test_clone_and_params_reach_the_energy():
    model = ExactHierarchicalClustering(Dasgupta(beta=2.0))
    model.set_params(energy__beta=3.0)
    assert model.get_params()["energy__beta"] == 3.0
    assert clone(model).energy.beta == 3.0


###############################################################################
# Bad input

@pytest.mark.parametrize(
    "X, match",
    [
        (np.array([[0.0, np.nan], [1.0, 2.0]]), "NaN"),
        (np.array([[0.0, np.inf], [1.0, 2.0]]), "infinity"),
        (np.array([[1.0, 2.0]]), "minimum of 2"),
        (np.zeros((3, 2, 2)), "dim"),
    ],
)
def test_bad_arrays_are_rejected(X, match):
    with pytest.raises(ValueError, match=match):
        ExactHierarchicalClustering().fit(X)


@pytest.mark.parametrize("n_points", [30, 40])
def test_too_many_points_names_the_memory_and_the_way_out(n_points, monkeypatch):
    """Above 29 points (128-bit tree counts) the refusal does not depend on the host's memory."""
    from sktrellis._engine import resources

    monkeypatch.setattr(resources, "memory_limits", lambda: [("MemAvailable", 2**60)])
    X = np.zeros((n_points, 2))
    with pytest.raises(ValueError, match=rf"n_samples={n_points}.*SparseTrellisClustering"):
        ExactHierarchicalClustering().fit(X)


@pytest.mark.parametrize("energy", [Dasgupta(), GinkgoLikelihood()])
def test_no_fixed_cap_below_the_structural_limit(energy, monkeypatch):
    """26 points are refused by the memory they need only, naming what would fit."""
    from sktrellis._engine import resources

    memory = resources.hierarchical_fit_bytes(energy, 23) / 0.9 + 1
    monkeypatch.setattr(resources, "memory_limits", lambda: [("MemAvailable", memory)])
    X = make_jets(n_leaves=26, random_state=0)[0].momenta
    needed = resources.format_bytes(resources.hierarchical_fit_bytes(energy, 26))
    with pytest.raises(ValueError, match=(rf"n_samples=26 requires {needed} .*"
                                          r"n_samples=23 would fit\).*SparseTrellisClustering")):
        ExactHierarchicalClustering(energy).fit(X)


def test_memory_limit_below_the_cap_names_the_bytes(monkeypatch):
    from sktrellis._engine import resources

    monkeypatch.setattr(resources, "memory_limits", lambda: [("MemAvailable", 10**6)])
    with pytest.raises(ValueError, match=r"n_samples=16 requires .*MiB.*SparseTrellisClustering"):
        ExactHierarchicalClustering().fit(np.random.default_rng(0).normal(size=(16, 2)))


@pytest.mark.parametrize(
    "energy, X, match",
    [
        (Dasgupta(affinity="precomputed"), np.ones((3, 4)), "square"),
        (Dasgupta(affinity="precomputed"), np.array([[0, 1, 2], [1, 0, 1], [0, 1, 0.0]]), "symmetric"),
        (Dasgupta(affinity="precomputed"), np.array([[0, -1.0], [-1.0, 0]]), "negative"),
        (GinkgoLikelihood(), np.ones((3, 3)), "four-momenta"),
        (GinkgoLikelihood(), np.array([[1.0, 2, 0, 0], [5, 0, 0, 1]]), "E >= |p|"),
    ],
)
def test_energy_input_errors(energy, X, match):
    with pytest.raises(ValueError, match=match):
        ExactHierarchicalClustering(energy).fit(X)


def test_all_infeasible_energy_is_an_error():
    momenta = np.array([[10.0, 10, 0, 0], [10.0, 0, 10, 0], [10.0, 0, 0, 10]])
    with pytest.raises(ValueError, match="zero potential"):
        ExactHierarchicalClustering(GinkgoLikelihood(t_cut=1e9)).fit(momenta)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"n_clusters": 0}, "n_clusters"),
        ({"n_clusters": 5}, "n_clusters=5 must be at most n_samples=4"),
        ({"energy": "dasgupta"}, "energy"),
        ({"energy": Dasgupta(beta=-1.0)}, "beta"),
        ({"energy": Dasgupta(affinity="cosine")}, "affinity"),
    ],
)
def test_bad_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        ExactHierarchicalClustering(**params).fit(np.arange(8.0).reshape(4, 2))


@pytest.mark.parametrize(
    "members, match",
    [([], "at least one"), ([0, 9], r"\[0, 4\)"), ([1, 1], "repeat"), ([0.5], "indices")],
)
def test_bad_cluster_queries(members, match):
    model = ExactHierarchicalClustering().fit(np.arange(8.0).reshape(4, 2))
    with pytest.raises(ValueError, match=match):
        model.cluster_probability(members)


def test_bad_trees_are_rejected():
    model = ExactHierarchicalClustering().fit(np.arange(8.0).reshape(4, 2))
    with pytest.raises(ValueError, match="shape"):
        model.log_probability(np.zeros((2, 4)))
    with pytest.raises(ValueError, match="exactly once"):
        model.log_probability(np.array([[0, 1], [0, 2], [3, 4]]))
    with pytest.raises(ValueError, match="earlier merges"):
        model.log_probability(np.array([[0, 5], [1, 2], [3, 4]]))


def test_input_is_not_mutated():
    X = np.random.default_rng(0).normal(size=(6, 2))
    before = X.copy()
    ExactHierarchicalClustering().fit(X)
    np.testing.assert_array_equal(X, before)


###############################################################################
# What the common checks with 30-150 samples would verify, at small N

def test_restored_common_checks(global_random_seed):
    import pickle

    import pandas as pd
    from sklearn.datasets import make_blobs
    from sklearn.exceptions import NotFittedError
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = make_blobs(n_samples=9, centers=3, cluster_std=0.3, random_state=global_random_seed)
    model = ExactHierarchicalClustering(n_clusters=3)
    with pytest.raises(NotFittedError):
        model.cluster_probability([0])
    labels = model.fit_predict(X)
    # check_clustering: well separated blobs are recovered, labels are ints.
    assert labels.dtype.kind == "i" and labels.shape == (9,)
    assert adjusted_rand_score(y, labels) == 1.0
    # check_fit_idempotent, check_fit_score_takes_y
    again = clone(model).fit(X, y)
    np.testing.assert_array_equal(again.linkage_matrix_, model.linkage_matrix_)
    # check_estimators_pickle
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(restored.labels_, model.labels_)
    assert restored.cluster_probability([0, 1]) == model.cluster_probability([0, 1])
    # check_pipeline_consistency
    pipeline = make_pipeline(StandardScaler(), ExactHierarchicalClustering(n_clusters=3))
    np.testing.assert_array_equal(
        pipeline.fit_predict(X), make_pipeline(StandardScaler(), clone(model)).fit_predict(X)
    )
    # check_n_features_in, check_dtype_object, DataFrame input
    assert model.n_features_in_ == 2
    frame = pd.DataFrame(X, columns=["a", "b"])
    fitted = clone(model).fit(frame)
    assert list(fitted.feature_names_in_) == ["a", "b"]
    np.testing.assert_array_equal(clone(model).fit(X.astype(object)).labels_, labels)
    # check_positive_only_tag_during_fit: negative features are fine.
    clone(model).fit(X - 100.0)


###############################################################################
# Progress, interruption, memory

def _last_percent(err):
    """The percentage of the last state a progress bar printed."""
    return int(re.findall(r"(\d+)%\|", err)[-1])


@pytest.mark.parametrize("verbose", [0, 1])
def test_quick_fits_are_silent_by_default(verbose, capsys):
    X = np.random.default_rng(0).normal(size=(8, 2))
    model = ExactHierarchicalClustering(verbose=verbose).fit(X)
    model.cluster_probability([0, 1])
    model.max_clade_credibility_tree()
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("how", ["verbose=2", "estimate above the threshold"])
def test_progress_opens_with_an_estimate_and_the_bar_finishes(how, capsys, monkeypatch):
    from sktrellis._engine.trellis import levels

    verbose = 2
    if how != "verbose=2":
        # verbose=1 shows passes estimated to take at least this long.
        monkeypatch.setattr(levels, "PROGRESS_MIN_SECONDS", 0.0)
        verbose = 1
    # Labels cut from the MAP tree, so that the outside pass waits for the first query;
    # a numeric beta, so that the one pass is the fit's (a calibration's passes print too).
    model = ExactHierarchicalClustering(Dasgupta(beta=1.0), verbose=verbose, n_jobs=1,
                                        labels_from="map_tree")
    model.fit(np.random.default_rng(0).normal(size=(6, 2)))
    out, err = capsys.readouterr()
    assert out == ""
    first = err.splitlines()[0]
    # 301 = (3**6 - 2**7 + 1) / 2 splits of the subsets of 6 points.
    assert first.startswith("[ExactHierarchicalClustering] inside pass")
    assert "n_samples=6: 301 splits, about " in first and "on 1 thread, memory " in first
    # Two lines, not one per level: the estimate, and the bar redrawn in place (\r).
    assert err.count("\n") == 2
    assert "301/301" in err and _last_percent(err) == 100
    assert "subsets of size 6/6" in err
    model.cluster_probability([0, 1])
    err = capsys.readouterr().err
    assert err.startswith("[ExactHierarchicalClustering] outside pass") and _last_percent(err) == 100
    assert "subsets of size 1/6" in err
    model.max_clade_credibility_tree()
    err = capsys.readouterr().err
    assert err.startswith("[ExactHierarchicalClustering] best tree") and _last_percent(err) == 100


@pytest.mark.slow
def test_ctrl_c_interrupts_a_long_fit(capsys, ctrl_c):
    """KeyboardInterrupt stops the DP between chunks, long before it completes."""
    import _thread
    import threading

    X = np.random.default_rng(0).normal(size=(23, 2))
    model = ExactHierarchicalClustering(verbose=2)
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


@pytest.mark.parametrize("kind", ["dasgupta", "ginkgo", "table"])
def test_memory_estimate_covers_the_peak(kind, monkeypatch):
    """The bytes promised by the size check bound what fit and every query allocate.

    With 16 kernel threads forced (any per-thread buffer would show) and the
    sampler's minimum cache reduced to nothing, so the per-subset terms of
    the estimate are what is checked.
    """
    import tracemalloc

    from sktrellis import _hierarchical as hierarchical
    from sktrellis._engine.resources import hierarchical_fit_bytes
    from sktrellis._engine.trellis import hierarchical_trellis

    monkeypatch.setattr(levels, "PARALLEL_MIN_TERMS", 0)
    monkeypatch.setattr(hierarchical_trellis, "_SAMPLE_CACHE_MIN_DOUBLES", 1)
    monkeypatch.setattr(hierarchical, "effective_n_threads", lambda n_jobs: 16)
    n_points = 11 if kind == "table" else 14
    energy, X = random_problem(kind, n_points, np.random.default_rng(0))
    model = ExactHierarchicalClustering(energy)
    tracemalloc.start()
    try:
        model.fit(X)
        model.cluster_probability([0, 1])
        model.most_probable_clusters(5)
        model.sample(10)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # 64 KiB for Python objects and arrays of O(N) entries.
    assert peak <= hierarchical_fit_bytes(energy, n_points) + 2**16


def test_ctrl_c_interrupts_the_outside_pass(capsys, ctrl_c, monkeypatch):
    """KeyboardInterrupt stops the outside pass between chunks; a later query redoes it.

    The interrupt comes after the outside pass's first kernel call, of
    many (chunks of 4096 splits), so no clock decides whether it came in
    time; 16 points are the fewest the cache-blocked passes take.
    """
    import _thread

    from sktrellis._engine.trellis import hierarchical_trellis

    X = np.random.default_rng(0).normal(size=(hierarchical_trellis.BLOCKED_MIN_POINTS, 2))
    # labels_ cut from the MAP tree: the fit then leaves the outside pass to the query.
    model = ExactHierarchicalClustering(Dasgupta(beta=1.0), labels_from="map_tree",
                                        verbose=2).fit(X)
    expected = clone(model).fit(X).cluster_probability([0, 1])
    capsys.readouterr()
    update = levels.LevelProgress.update

    def ctrl_c_after_the_first_call(progress, *args, **kwargs):
        first = progress.done == 0
        update(progress, *args, **kwargs)
        if first:
            _thread.interrupt_main()

    with monkeypatch.context() as patch:
        patch.setattr(levels, "CHUNK_TERMS", 1 << 12)
        patch.setattr(levels.LevelProgress, "update", ctrl_c_after_the_first_call)
        with pytest.raises(KeyboardInterrupt):
            model.cluster_probability([0, 1])
    assert "100%|" not in capsys.readouterr().err, "the interrupt waited for the whole pass"
    assert model._trellis._log_marginals is None
    assert model.cluster_probability([0, 1]) == expected


###############################################################################
# The kernel boundary: SplitPotential tables are checked before any kernel runs

def _separable_tables(n_points):
    return np.zeros(1 << n_points), np.zeros(1 << n_points), np.ones(n_points + 1)


@pytest.mark.parametrize(
    "position, value, match",
    [
        (0, np.zeros(7), r"'cluster_term' must have shape \(8,\)"),
        (1, np.zeros(9), r"'child_term' must have shape \(8,\)"),
        (2, np.ones(3), r"'size_coef' must have shape \(4,\)"),
        (0, np.array([0, 0, 0, np.nan, 0, 0, 0, 0.0]), "non-finite entry nan at index 3"),
        (1, np.array([0, 0, np.inf, 0, 0, 0, 0, 0.0]), "non-finite entry inf at index 2"),
        (1, np.array([0, 0, 0, 0, 0, -np.inf, 0, 0.0]), "non-finite entry -inf at index 5"),
    ],
)
def test_separable_potential_tables_are_checked(position, value, match):
    from sktrellis._engine.potential._split_potential import SplitPotential

    tables = list(_separable_tables(3))
    tables[position] = value
    with pytest.raises(ValueError, match=match):
        SplitPotential.separable(3, *tables)


def test_tabulated_potential_layout_and_values_are_checked():
    from sktrellis._engine._subsets import split_table_layout
    from sktrellis._engine.potential._split_potential import SplitPotential

    level_offset, rank_in_level, length = split_table_layout(4)
    table = np.zeros(length)
    table[3] = -np.inf  # a forbidden split is legal
    SplitPotential.table(4, table, level_offset, rank_in_level)
    with pytest.raises(ValueError, match=rf"'split_table' must have shape \({length},\)"):
        SplitPotential.table(4, table[:-1], level_offset, rank_in_level)
    bad = table.copy()
    bad[5] = np.nan
    with pytest.raises(ValueError, match="finite or -inf"):
        SplitPotential.table(4, bad, level_offset, rank_in_level)
    with pytest.raises(ValueError, match="level_offset and rank_in_level"):
        SplitPotential.table(4, table, level_offset + 1, rank_in_level)
    with pytest.raises(ValueError, match="level_offset and rank_in_level"):
        SplitPotential.table(4, table, level_offset, rank_in_level[::-1].copy())


def test_ginkgo_potential_parameters_are_checked():
    from sktrellis._engine.potential._ginkgo import ginkgo_potential

    with pytest.raises(ValueError, match="lam > 0"):
        ginkgo_potential(2, np.zeros(4), 0.0, 16.0)
    with pytest.raises(ValueError, match="'mass2' has a non-finite entry nan"):
        ginkgo_potential(2, np.array([0, 0, 0, np.nan]), 1.5, 16.0)
    with pytest.raises(ValueError, match="n_points=31"):
        ginkgo_potential(31, np.zeros(4), 1.5, 16.0)


def test_an_energy_with_a_wrong_table_gets_a_clear_error():
    """A user energy returning a short table is stopped at the kernel boundary."""
    from sktrellis._engine.potential._split_potential import SplitPotential

    class Broken(Dasgupta):
        def split_potential(self, X):
            n_points = len(X)
            return SplitPotential.separable(
                n_points, np.zeros(1 << n_points), np.zeros((1 << n_points) - 1),
                np.ones(n_points + 1),
            )

    with pytest.raises(ValueError, match="'child_term' must have shape"):
        ExactHierarchicalClustering(Broken()).fit(np.eye(4))


###############################################################################
# Public method parameters

def _posterior_estimators():
    from sktrellis import ExactFlatClustering, SparseTrellisClustering

    return [ExactHierarchicalClustering(), ExactFlatClustering(), SparseTrellisClustering()]


@pytest.mark.parametrize("estimator", _posterior_estimators(), ids=lambda e: type(e).__name__)
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_top": -1}, "'n_top' parameter .* must be an int in the range"),
        ({"n_top": 0}, "'n_top' parameter"),
        ({"n_top": 2.5}, "'n_top' parameter"),
        ({"min_size": 0}, "'min_size' parameter"),
    ],
)
def test_most_probable_clusters_parameters_are_validated(estimator, kwargs, match):
    from sklearn.utils._param_validation import InvalidParameterError

    model = estimator.fit(np.random.default_rng(0).normal(size=(6, 2)))
    with pytest.raises(InvalidParameterError, match=match):
        model.most_probable_clusters(**kwargs)


@pytest.mark.parametrize("estimator", _posterior_estimators(), ids=lambda e: type(e).__name__)
def test_most_probable_clusters_are_ranked_and_exclude_certain_clusters(estimator):
    n_points = 6
    model = estimator.fit(np.random.default_rng(1).normal(size=(n_points, 2)))
    clusters = model.most_probable_clusters(n_top=1000, min_size=1)
    probabilities = [p for _, p in clusters]
    assert probabilities == sorted(probabilities, reverse=True)
    for members, probability in clusters:
        assert probability == pytest.approx(model.cluster_probability(members), abs=1e-12)
    if not hasattr(model, "pairwise_probability_"):
        # Trees: neither the root nor (with min_size=2) any singleton is listed.
        assert all(len(m) < n_points for m, _ in clusters)
        assert all(len(m) >= 2 for m, _ in model.most_probable_clusters(n_top=1000))


@pytest.mark.parametrize("estimator", _posterior_estimators(), ids=lambda e: type(e).__name__)
def test_energy_class_instead_of_instance_says_so(estimator):
    from sklearn.base import clone

    from sktrellis.energies import CorrelationClustering

    energy = CorrelationClustering if "Flat" in type(estimator).__name__ else Dasgupta
    with pytest.raises(TypeError, match=rf"energy={energy.__name__} is a class; pass an instance"):
        clone(estimator).set_params(energy=energy).fit(np.zeros((4, 2)) + np.arange(4)[:, None])


def test_log_probability_is_never_positive_at_low_calibration():
    """At beta=1e8 rounding in log Z made log P(MAP tree) positive."""
    X = np.random.default_rng(0).normal(size=(8, 2))
    model = ExactHierarchicalClustering(Dasgupta(beta=1e8)).fit(X)
    assert model.log_probability(model.linkage_matrix_) <= 0.0
    assert model.log_probability(model.linkage_matrix_) == pytest.approx(0.0, abs=1e-6)


def test_exact_tree_counts_fit_their_128_bits_up_to_the_cap():
    """Counts wrapped at N=30; the cap keeps (2N-3)!! below 2**128."""
    from sktrellis._engine.trellis.hierarchical_trellis import double_factorial_trees
    from sktrellis._engine.resources import MAX_EXACT_POINTS

    assert double_factorial_trees(MAX_EXACT_POINTS) < 2**128
    assert double_factorial_trees(30) > 2**128  # why the cap matters


def test_trellis_stops_at_its_deadline():
    """A deadline already past stops the inside pass after its first kernel call."""
    from sktrellis._engine.trellis.hierarchical_trellis import HierarchicalTrellis
    from sktrellis._engine.trellis.levels import DeadlinePassed

    X = np.random.default_rng(0).normal(size=(10, 2))
    potential = Dasgupta(beta=1.0).split_potential(X)
    with pytest.raises(DeadlinePassed, match="n_samples=10"):
        HierarchicalTrellis(potential, deadline=0.0)


def _pass_with_deadline(n_terms, deadline):
    """The progress of a pass of n_terms terms, quiet, with a deadline."""
    return levels.LevelProgress("owner", "pass", 10, n_terms, "split", 1e-9, 1, 0, 0,
                                deadline=deadline)


@pytest.mark.parametrize("deadline, gives_up", [(100.0, True), (1000.0, False)])
def test_pass_gives_up_when_its_rate_misses_the_deadline(fake_clock, deadline, gives_up):
    """From a quarter of the terms on, the recent rate projects the end of the pass."""
    progress = _pass_with_deadline(160, deadline)
    fake_clock["now"] = 20.0
    # An eighth at 1 s a term projects an end at 160 s, past the first
    # deadline: before a quarter no projection is made.
    progress.update(20)
    fake_clock["now"] = 40.0
    # 1 s a term over the last sixteenth: the 120 terms left would end at 160 s.
    if gives_up:
        with pytest.raises(levels.DeadlinePassed, match="at least 60 s past its deadline"):
            progress.update(20)
    else:
        progress.update(20)


def test_pass_projects_its_end_from_its_recent_rate(fake_clock):
    """The rate of the last sixteenth, not the mean: the later levels are the slower."""
    progress = _pass_with_deadline(160, 1000.0)
    fake_clock["now"] = 30.0
    progress.update(30)  # 1 s a term: ends at 160 s
    fake_clock["now"] = 120.0
    # 9 s a term over the last 10 (the mean, 3 s, would end at 480 s):
    # the 120 left end at 1200 s.
    with pytest.raises(levels.DeadlinePassed, match="at least 200 s past its deadline"):
        progress.update(10)


@pytest.mark.parametrize("n_terms", [1, 5, 15])
def test_short_pass_under_a_deadline(fake_clock, n_terms):
    """Fewer than 16 terms: the window is one term, never an empty one."""
    progress = _pass_with_deadline(n_terms, 1000.0)
    for _ in range(n_terms):
        fake_clock["now"] += 1.0
        progress.update(1)


def test_a_finished_pass_keeps_its_result_past_the_deadline(fake_clock):
    """The last kernel call ends after the deadline: the pass is done, nothing is raised."""
    progress = _pass_with_deadline(160, 100.0)
    fake_clock["now"] = 10.0
    progress.update(80)  # ends at 20 s at this rate
    fake_clock["now"] = 100.5
    progress.update(80)



###############################################################################
# Kernel calls sized by their estimated time, not a fixed number of terms: a
# Ginkgo split costs twenty separable ones, so its calls are twenty times
# smaller, and Ctrl-C is answered within about CHUNK_SECONDS either way.

@pytest.mark.parametrize("kind, seconds", [("separable", 1e-9), ("generic", 20e-9),
                                           ("flat count", 5e-9)])
def test_a_kernel_call_is_estimated_to_take_at_most_a_quarter_second(kind, seconds):
    assert levels.SECONDS_PER_TERM[kind] == seconds
    for terms_per_subset in (1, 3, 1 << 10, 1 << 20, 1 << 30):
        chunk = levels.chunk_size(terms_per_subset, seconds)
        assert chunk >= 1
        assert chunk == 1 or chunk * terms_per_subset * seconds <= levels.CHUNK_SECONDS
    assert levels.chunk_terms(20e-9) == 12_500_000  # Ginkgo: 2**28 terms took about 5 s


@pytest.mark.parametrize("kind", ["dasgupta", "ginkgo"])
def test_small_kernel_calls_give_the_same_posterior(monkeypatch, kind):
    """Calls of a few terms each (as a dear potential gets) change no result."""
    from sktrellis._engine.trellis import hierarchical_trellis

    energy, X = random_problem(kind, 9, np.random.default_rng(3))
    whole = ExactHierarchicalClustering(energy).fit(X)
    calls = []

    def counting(kernel):
        def counted(*args):
            calls.append(len(args[1]))
            return kernel(*args)
        return counted

    monkeypatch.setattr(levels, "CHUNK_SECONDS", 50e-9)  # 2 separable, 1 function split
    # Ginkgo potentials run a kernel of their own; every other kind the generic one.
    for name in ("inside_level", "inside_level_ginkgo"):
        monkeypatch.setattr(hierarchical_trellis.kernels, name,
                            counting(getattr(hierarchical_trellis.kernels, name)))
    chunked = ExactHierarchicalClustering(energy).fit(X)
    assert max(calls) <= 50 and len(calls) > 8
    assert chunked.log_partition_ == pytest.approx(whole.log_partition_, rel=1e-12)
    np.testing.assert_array_equal(chunked.linkage_matrix_, whole.linkage_matrix_)
    assert chunked.cluster_probability([0, 1]) == pytest.approx(
        whole.cluster_probability([0, 1]), rel=1e-12)


def test_kernel_calls_follow_the_rate_the_pass_measures(fake_clock):
    """A pass slower than its calibration rate (a loaded machine) shrinks its next calls."""
    progress = _pass_with_deadline(10**12, None)
    calls = progress.calls(np.arange(10**4), 10**6, 1e-9)  # 0.25 s: 249 items of 1M terms
    first = next(calls)
    assert len(first) == 249
    fake_clock["now"] += 1.0  # ... but it took 1 s: 4 ns a term
    progress.update(len(first) * 10**6)
    assert len(next(calls)) == 62
    fake_clock["now"] += 1e-6  # too few terms to measure: the calibration rate again
    progress.update(10)
    assert len(next(calls)) == 249
    fake_clock["now"] += 1.0  # terms counted without a kernel call measure nothing
    progress.update(10**9, kernel_call=False)
    assert len(next(calls)) == 249


def test_cache_blocked_calls_follow_the_rate_the_pass_measures(fake_clock):
    """The blocked passes' calls too: each is sized when it is asked for."""
    n_points, size = 24, 13
    blocks = levels.RowBlocks(n_points, 10, 1e-9)
    progress = _pass_with_deadline(10**12, None)

    def terms(call):
        # Every subset of the level has 2**(size - 1) splits.
        return blocks.n_subsets(call[1]) << (size - 1)

    calls = blocks.inside_calls(size, progress)
    first = terms(next(calls))
    assert levels.chunk_terms(1e-9) <= first < 1.01 * levels.chunk_terms(1e-9)
    fake_clock["now"] += 1.0  # 4 ns a term: a quarter of the terms per call
    progress.update(first)
    second = terms(next(calls))
    assert 0.24 * first <= second < 0.26 * first
    fake_clock["now"] += 1e-6  # too few terms to measure: the calibration rate again
    progress.update(10)
    assert terms(next(calls)) >= first - 1
    # Without a progress, the calibration rate throughout; every item once.
    items = [item for call in blocks.outside_calls(size) for item in zip(*call)]
    high_parts, low_sizes = blocks._items(size, range(0, 11))
    assert sorted(items) == sorted(zip(high_parts.tolist(), low_sizes.tolist()))
