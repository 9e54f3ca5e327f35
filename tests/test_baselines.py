"""Merge models, greedy and beam search against the exact split potentials and brute force."""
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.cluster.hierarchy import fcluster, is_monotonic, is_valid_linkage
from sklearn.base import clone
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from sktrellis import ExactHierarchicalClustering
from sktrellis._engine.agglomerative.builders import (
    beam_search,
    greedy_tree,
    gumbel_noise,
    replay_tree,
)
from sktrellis._engine.tree.conversion import (
    linkage_from_merges,
    merges_from_tree,
    splits_from_merges,
)
from sktrellis.baselines import (
    BeamSearchHierarchicalClustering,
    GreedyHierarchicalClustering,
)
from sktrellis.datasets import make_jets
from sktrellis.energies import (
    Dasgupta,
    GinkgoLikelihood,
    HierarchicalEnergy,
)

from .common import KINDS, quick_kinds, random_problem, random_split_energy

# Overflow or invalid values would mean statistics read from memory never
# written (the cross sums of clusters that did not meet).
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")



def _tree_log_potential(energy, X, merges):
    """Log potential of a tree from the exact split potential (masks)."""
    parents, lefts = splits_from_merges(merges, len(X))
    return energy.split_potential(X).evaluate(parents, lefts).sum()


def _random_merges(n_points, rng):
    """Merges (children first) of a uniformly random agglomeration order."""
    active, merges = list(range(n_points)), []
    while len(active) > 1:
        i, j = sorted(rng.choice(len(active), 2, replace=False))
        merges.append((active[i], active[j]))
        active = [a for k, a in enumerate(active) if k not in (i, j)] + [n_points + len(merges) - 1]
    return np.array(merges)


###############################################################################
# Merge models

@pytest.mark.parametrize("kind", KINDS)
def test_merge_model_log_potentials_match_the_exact_split_potentials(kind, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    n_points = 8
    energy, X = random_problem(kind, n_points, rng, forbidden=0.0)
    potential = energy.split_potential(X)
    model = energy.merge_model(X)
    mask = {i: 1 << i for i in range(n_points)}
    members = {i: np.array([i]) for i in range(n_points)}
    active = list(range(n_points))
    while len(active) > 1:
        a, b = (active[i] for i in rng.choice(len(active), 2, replace=False))
        others = [c for c in active if c not in (a, b)]
        score = model.scores([a], [b])[0, 0]
        assert model.scores([b], [a])[0, 0] == pytest.approx(score, rel=1e-12, abs=1e-12)
        cluster, log_psi = model.merge(a, b, others)
        mask[cluster] = mask[a] | mask[b]
        members[cluster] = np.concatenate([members[a], members[b]])
        expected = potential.evaluate([mask[cluster]], [mask[a]])[0]
        assert log_psi == pytest.approx(expected, rel=1e-10, abs=1e-10)
        assert model.split_log_potential([cluster], [b], [a])[0] == pytest.approx(
            expected, rel=1e-10, abs=1e-10
        )
        # The same cluster made from member lists has the same statistics.
        twin = model.unions([a, b], [(0, 1)], [members[a], members[b]])[0]
        assert model.split_log_potential([twin], [a], [b])[0] == pytest.approx(
            expected, rel=1e-10, abs=1e-10
        )
        if others:
            np.testing.assert_allclose(
                model.scores([cluster], others)[0], model.scores(others, [cluster])[:, 0],
                rtol=1e-12, atol=1e-12,
            )
        model.release([a, b])
        active = others + [cluster]


@pytest.mark.parametrize("kind", ["hcc", "ginkgo", "table"])
def test_merge_scores_differ_from_log_potentials_by_a_telescoping_term(kind, global_random_seed):
    """Summed over any tree, score - log psi is the same constant: the posterior is unchanged."""
    rng = np.random.default_rng(global_random_seed)
    n_points = 7
    energy, X = random_problem(kind, n_points, rng, forbidden=0.0)
    offsets = []
    for _ in range(4):
        model = energy.merge_model(X)
        ids, alive, scores, log_psis = list(range(n_points)), set(range(n_points)), [], []
        for a, b in _random_merges(n_points, rng):
            scores.append(model.scores([ids[a]], [ids[b]])[0, 0])
            alive -= {ids[a], ids[b]}
            new, log_psi = model.merge(ids[a], ids[b], sorted(alive))
            log_psis.append(log_psi)
            alive.add(new)
            ids.append(new)
        if kind == "hcc":
            offsets.append(np.sum(scores) - np.sum(log_psis))
        else:
            # Likelihood-type energies are ranked by log psi itself (-inf included).
            np.testing.assert_array_equal(scores, log_psis)
    if kind == "hcc":
        np.testing.assert_allclose(offsets, offsets[0], rtol=1e-9, atol=1e-9)


def test_dasgupta_merge_score_is_average_linkage(global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    X = rng.normal(size=(9, 2))
    energy = Dasgupta(beta=2.0)
    similarities = energy.similarities(X)
    model = energy.merge_model(X)
    a, _ = model.merge(0, 1, list(range(2, 9)))
    b, _ = model.merge(2, 3, [a] + list(range(4, 9)))
    expected = 2.0 * 9 * similarities[np.ix_([0, 1], [2, 3])].mean()
    assert model.scores([a], [b])[0, 0] == pytest.approx(expected, rel=1e-12)


def test_split_energy_merge_model_needs_int64_masks():
    with pytest.raises(ValueError, match=r"at most 62 points: n_samples=63"):
        random_split_energy(3, np.random.default_rng(0)).merge_model(np.zeros((63, 1)))


def test_energy_without_a_merge_model_is_refused():
    class TableOnly(HierarchicalEnergy):
        def split_potential(self, X):
            return Dasgupta().split_potential(X)

    with pytest.raises(NotImplementedError, match="TableOnly has no merge_model"):
        TableOnly().merge_model(np.zeros((3, 2)))
    with pytest.raises(NotImplementedError, match="agglomerative and sparse estimators"):
        GreedyHierarchicalClustering(TableOnly()).fit(np.zeros((3, 2)))


###############################################################################
# Trees: linkage matrices and replays

@pytest.mark.parametrize("kind", KINDS)
def test_linkage_from_merges_matches_the_exact_estimator(kind, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    energy, X = random_problem(kind, 7, rng, forbidden=0.0)
    exact = ExactHierarchicalClustering(energy).fit(X)
    merges = merges_from_tree(exact.linkage_matrix_, 7)
    parents, lefts = splits_from_merges(merges, 7)
    linkage = linkage_from_merges(merges, energy.split_potential(X).evaluate(parents, lefts))
    np.testing.assert_array_equal(linkage[:, [0, 1, 3]], exact.linkage_matrix_[:, [0, 1, 3]])
    np.testing.assert_allclose(linkage[:, 2], exact.linkage_matrix_[:, 2], rtol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_replayed_tree_has_the_exact_log_potential(kind, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    energy, X = random_problem(kind, 8, rng, forbidden=0.0)
    merges = _random_merges(8, rng)
    tree = replay_tree(energy.merge_model(X), merges)
    np.testing.assert_array_equal(tree.merges, merges)
    assert tree.log_potential == pytest.approx(
        _tree_log_potential(energy, X, merges), rel=1e-10, abs=1e-10
    )


###############################################################################
# Greedy and beam search against brute force

@pytest.mark.parametrize("kind", KINDS)
def test_greedy_merges_are_certified_best(kind, global_random_seed):
    """Each merge scores at least as high as every other pair of its forest."""
    rng = np.random.default_rng(global_random_seed)
    n_points = 8
    energy, X = random_problem(kind, n_points, rng, forbidden=0.0)
    tree = greedy_tree(energy.merge_model(X))
    model = energy.merge_model(X)
    node = list(range(n_points))
    active = list(range(n_points))
    for a, b in tree.merges:
        best = max(model.scores([x], [y])[0, 0] for x, y in itertools.combinations(active, 2))
        chosen = model.scores([node[a]], [node[b]])[0, 0]
        assert chosen >= best - 1e-12 * max(1.0, abs(best))
        active = [c for c in active if c not in (node[a], node[b])]
        new, _ = model.merge(node[a], node[b], active)
        node.append(new)
        active.append(new)
    assert tree.log_potential == pytest.approx(
        _tree_log_potential(energy, X, tree.merges), rel=1e-10, abs=1e-10
    )


@pytest.mark.parametrize("kind", quick_kinds("dasgupta", "ginkgo"))
def test_beam_with_a_huge_width_finds_the_exact_map(kind, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    n_points = 6
    energy, X = random_problem(kind, n_points, rng, forbidden=0.0)
    exact = ExactHierarchicalClustering(energy).fit(X)
    trees = beam_search(energy.merge_model(X), 10**6)
    # Every distinct tree survives to the end: an exhaustive search.
    assert len(trees) == 945
    assert trees[0].log_potential == pytest.approx(exact.map_log_potential_, rel=1e-10, abs=1e-10)
    model = BeamSearchHierarchicalClustering(energy, beam_width=10**6, n_clusters=1).fit(X)
    assert model.map_log_potential_ == pytest.approx(exact.map_log_potential_, rel=1e-10, abs=1e-10)


@pytest.mark.parametrize("kind", ["dasgupta", "ginkgo", "table"])
def test_beam_of_width_one_is_greedy(kind, global_random_seed):
    rng = np.random.default_rng(global_random_seed)
    energy, X = random_problem(kind, 9, rng, forbidden=0.0)
    greedy = GreedyHierarchicalClustering(energy).fit(X)
    beam = BeamSearchHierarchicalClustering(energy, beam_width=1).fit(X)
    np.testing.assert_array_equal(beam.linkage_matrix_, greedy.linkage_matrix_)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("width", [1, 3, 20])
def test_searches_never_beat_the_exact_map(kind, width, global_random_seed):
    rng = np.random.default_rng(global_random_seed + width)
    energy, X = random_problem(kind, 8, rng, forbidden=0.0)
    best = ExactHierarchicalClustering(energy).fit(X).map_log_potential_
    trees = beam_search(energy.merge_model(X), width)
    assert len(trees) <= width
    assert len({tuple(map(tuple, t.merges)) for t in trees}) == len(trees)
    for tree in trees:
        assert tree.log_potential <= best + 1e-9
        assert tree.log_potential == pytest.approx(
            _tree_log_potential(energy, X, tree.merges), rel=1e-10, abs=1e-10
        )
    assert [t.log_potential for t in trees] == sorted((t.log_potential for t in trees), reverse=True)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    kind=st.sampled_from(KINDS),
    n_points=st.integers(4, 12),
    width=st.integers(2, 12),
    seed=st.integers(0, 2**31 - 1),
)
def test_beam_search_is_never_below_greedy(kind, n_points, width, seed):
    # Without the greedy path kept, beams of width 10 ended below greedy on
    # 6 of 40 jets of 10 leaves (by up to 3.6 nats) and 12 of 40 of 15.
    energy, X = random_problem(kind, n_points, np.random.default_rng(seed), forbidden=0.0)
    greedy = GreedyHierarchicalClustering(energy).fit(X)
    beam = BeamSearchHierarchicalClustering(energy, beam_width=width).fit(X)
    assert beam.map_log_potential_ >= greedy.map_log_potential_ - 1e-9 * max(
        1.0, abs(greedy.map_log_potential_)
    )
    # The greedy tree itself survives to the end of the engine's beam.
    trees = beam_search(energy.merge_model(X), width, keep_greedy=True)
    greedy_splits = _splits(greedy.children_, n_points)
    assert any(_splits(tree.merges, n_points) == greedy_splits for tree in trees)


def _splits(merges, n_points):
    parents, lefts = splits_from_merges(np.asarray(merges), n_points)
    return set(zip(parents.tolist(), np.minimum(lefts, parents ^ lefts).tolist()))


def _paper_beam_reference(potential, n_points, width):
    """Greenberg et al.'s beam search, literally: forests as lists of masks.

    Every forest proposes its `width` merges of highest log psi; proposals
    are ranked by total log psi; equal totals (to 1e-9) count once.
    """
    beam = [(0.0, tuple(1 << i for i in range(n_points)))]
    for _ in range(n_points - 1):
        proposals = []
        for total, clusters in beam:
            pairs = list(itertools.combinations(clusters, 2))
            log_psi = potential.evaluate(
                np.array([a | b for a, b in pairs], dtype=np.uint32),
                np.array([a for a, _ in pairs], dtype=np.uint32),
            )
            for k in np.argsort(-log_psi, kind="stable")[:width]:
                a, b = pairs[k]
                merged = tuple(c for c in clusters if c not in (a, b)) + (a | b,)
                proposals.append((total + float(log_psi[k]), merged))
        proposals.sort(key=lambda proposal: -proposal[0])
        beam, seen = [], set()
        for total, clusters in proposals:
            if round(total, 9) not in seen:
                seen.add(round(total, 9))
                beam.append((total, clusters))
        beam = beam[:width]
    return max(total for total, _ in beam)


@pytest.mark.parametrize("kind", ["ginkgo", "table"])
@pytest.mark.parametrize("n_points", [5, 7, 9])
def test_paper_variant_is_the_published_beam_search(kind, n_points, global_random_seed):
    # Ginkgo and split tables rank merges by log psi, as the paper's search.
    rng = np.random.default_rng(global_random_seed + n_points)
    energy, X = random_problem(kind, n_points, rng, forbidden=0.0)
    model = BeamSearchHierarchicalClustering(energy, beam_width=None, variant="paper").fit(X)
    width = n_points * (n_points - 1) // 2
    expected = _paper_beam_reference(energy.split_potential(X), n_points, width)
    assert model.map_log_potential_ == pytest.approx(expected, rel=1e-10, abs=1e-10)
    narrow = BeamSearchHierarchicalClustering(energy, beam_width=3, variant="paper").fit(X)
    assert narrow.map_log_potential_ == pytest.approx(
        _paper_beam_reference(energy.split_potential(X), n_points, 3), rel=1e-10, abs=1e-10
    )
    trees = beam_search(energy.merge_model(X), width, distinct="score")
    totals = np.round([tree.log_potential for tree in trees], 9)
    assert len(np.unique(totals)) == len(trees)


@pytest.mark.parametrize("Estimator", [GreedyHierarchicalClustering, BeamSearchHierarchicalClustering])
@pytest.mark.parametrize("n_clusters", [1, 2, 4])
def test_labels_are_the_fcluster_cut_of_a_valid_monotone_linkage(
    Estimator, n_clusters, global_random_seed
):
    X, _ = make_blobs(n_samples=40, centers=4, random_state=global_random_seed)
    model = Estimator(n_clusters=n_clusters).fit(X)
    Z = model.linkage_matrix_
    assert is_valid_linkage(Z, throw=True) and is_monotonic(Z)
    assert np.all(np.diff(Z[:, 2]) > 0)
    assert len(np.unique(model.labels_)) == n_clusters
    assert adjusted_rand_score(model.labels_, fcluster(Z, n_clusters, "maxclust")) == 1.0
    np.testing.assert_array_equal(model.children_, Z[:, :2].astype(int))
    np.testing.assert_array_equal(model.distances_, Z[:, 2])
    assert model.n_leaves_ == 40
    assert model.map_log_potential_ == pytest.approx(
        _tree_log_potential_large(model.energy or Dasgupta(), X, model.children_)
    )


def _tree_log_potential_large(energy, X, children):
    return replay_tree(energy.merge_model(X), merges_from_tree(children, len(X))).log_potential


def test_gumbel_noise_is_a_fixed_function_of_the_pair(global_random_seed):
    noise = gumbel_noise(global_random_seed)
    ids = np.arange(80)
    table = noise(ids, ids)
    np.testing.assert_array_equal(table, table.T)
    np.testing.assert_array_equal(noise(ids[5:9], ids[:3]), table[5:9, :3])
    assert not np.array_equal(table, gumbel_noise(global_random_seed + 1)(ids, ids))
    # Gumbel(0, 1): mean Euler's constant, variance pi**2 / 6 (> 4 standard errors).
    values = table[np.triu_indices(80, 1)]
    assert abs(values.mean() - 0.5772) < 0.1 and abs(values.var() - 1.645) < 0.3


def test_greedy_on_blobs_is_average_linkage_quality():
    """On well separated blobs the greedy tree's top merges join whole blobs."""
    X, y = make_blobs(n_samples=600, centers=4, cluster_std=0.5, random_state=0)
    model = GreedyHierarchicalClustering(n_clusters=4).fit(X)
    assert adjusted_rand_score(y, model.labels_) == 1.0
    beam = BeamSearchHierarchicalClustering(beam_width=3, n_clusters=4).fit(X[:200])
    assert adjusted_rand_score(y[:200], beam.labels_) == 1.0


def test_jets_greedy_and_beam_are_below_the_exact_map(global_random_seed):
    jet = make_jets(n_leaves=8, random_state=global_random_seed)[0]
    energy = GinkgoLikelihood()
    exact = ExactHierarchicalClustering(energy).fit(jet.momenta).map_log_potential_
    greedy = GreedyHierarchicalClustering(energy).fit(jet.momenta).map_log_potential_
    beam = BeamSearchHierarchicalClustering(energy, beam_width=28).fit(jet.momenta)
    assert greedy <= exact + 1e-9
    assert beam.map_log_potential_ <= exact + 1e-9


def test_input_is_not_mutated():
    X = np.random.default_rng(0).normal(size=(12, 2))
    before = X.copy()
    GreedyHierarchicalClustering().fit(X)
    BeamSearchHierarchicalClustering(beam_width=4).fit(X)
    np.testing.assert_array_equal(X, before)


def test_clone_and_params_reach_the_energy():
    model = BeamSearchHierarchicalClustering(Dasgupta(beta=2.0), beam_width=3)
    model.set_params(energy__beta=3.0)
    assert clone(model).energy.beta == 3.0


###############################################################################
# scikit-learn conventions and bad input

@pytest.mark.parametrize("Estimator", [GreedyHierarchicalClustering, BeamSearchHierarchicalClustering])
@pytest.mark.parametrize(
    "params, X, match",
    [
        ({"n_clusters": 5}, np.arange(8.0).reshape(4, 2), "n_clusters=5 must be at most n_samples=4"),
        ({"n_clusters": 0}, np.arange(8.0).reshape(4, 2), "n_clusters"),
        ({"energy": "dasgupta"}, np.arange(8.0).reshape(4, 2), "energy"),
        ({}, np.array([[0.0, np.nan], [1.0, 2.0]]), "NaN"),
        ({}, np.array([[1.0, 2.0]]), "minimum of 2"),
        ({"energy": GinkgoLikelihood()}, np.ones((3, 3)), "four-momenta"),
    ],
)
def test_bad_input(Estimator, params, X, match):
    with pytest.raises(ValueError, match=match):
        Estimator(**params).fit(X)


def test_bad_beam_width():
    with pytest.raises(ValueError, match="beam_width"):
        BeamSearchHierarchicalClustering(beam_width=0).fit(np.arange(8.0).reshape(4, 2))


@pytest.mark.parametrize(
    "Estimator, remedy",
    [(GreedyHierarchicalClustering, "use SparseTrellisClustering"),
     (BeamSearchHierarchicalClustering, "use a larger beam_width or SparseTrellisClustering")],
)
def test_a_tree_of_zero_potential_is_an_error(Estimator, remedy):
    # Every split of these three jets' particles is below t_cut; the advice
    # names only parameters the estimator has.
    momenta = np.array([[10.0, 10, 0, 0], [10.0, 0, 10, 0], [10.0, 0, 0, 10]])
    with pytest.raises(ValueError, match=f"zero potential.*n_samples=3.*{remedy}"):
        Estimator(GinkgoLikelihood(t_cut=1e9)).fit(momenta)
