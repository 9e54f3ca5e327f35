"""Property-based fuzzing of every estimator's fit.

Random shapes, dtypes, scales from 1e-300 to 1e300, NaN/inf placed anywhere,
duplicate points. The invariant: a valid fitted model (finite outputs of the
right shapes) or a ValueError/TypeError with a message -- never another
exception, NaN output or a hang. Deterministic (derandomized) for CI.
"""
import os
import warnings

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from sktrellis import (  # noqa: E402
    ExactFlatClustering,
    ExactHierarchicalClustering,
    SparseTrellisClustering,
)
from sktrellis.energies import (  # noqa: E402
    CorrelationClustering,
    Dasgupta,
    DirichletProcessMixture,
    GinkgoLikelihood,
)
from sktrellis.baselines import (  # noqa: E402
    BayesianHierarchicalClustering,
    BeamSearchHierarchicalClustering,
    GreedyHierarchicalClustering,
    TransitivePropagation,
)

from .common import run_pytest_in_subprocess  # noqa: E402

ESTIMATORS = [
    ExactHierarchicalClustering(n_clusters=1),
    ExactFlatClustering(),
    SparseTrellisClustering(n_clusters=1),
    GreedyHierarchicalClustering(n_clusters=1),
    BeamSearchHierarchicalClustering(n_clusters=1),
    BayesianHierarchicalClustering(),
    BayesianHierarchicalClustering(algorithm="exact"),
    TransitivePropagation(max_iter=20),
    ExactHierarchicalClustering(Dasgupta(affinity="precomputed"), n_clusters=1),
    ExactFlatClustering(CorrelationClustering(affinity="precomputed")),
    ExactFlatClustering(DirichletProcessMixture()),
    ExactHierarchicalClustering(CorrelationClustering(), n_clusters=1),
    ExactHierarchicalClustering(GinkgoLikelihood(), n_clusters=1),
]


@st.composite
def datasets(draw, square):
    n_samples = draw(st.integers(1, 7))
    n_features = n_samples if square else draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_samples, n_features)) * 10.0 ** draw(st.integers(-300, 300))
    if square:
        X = X + X.T
        if draw(st.booleans()):
            X = np.abs(X)                             # similarities
    if draw(st.booleans()) and n_samples > 1:
        X[-1] = X[0]                                  # a duplicate point
        if square:
            X[:, -1] = X[:, 0]
    bad = draw(st.sampled_from([None, np.nan, np.inf, -np.inf]))
    if bad is not None:
        X[rng.integers(n_samples), rng.integers(n_features)] = bad
    dtype = draw(st.sampled_from([np.float64, np.float32, np.int64, object]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dtype is np.int64:
            X = np.nan_to_num(X, nan=0, posinf=2**62, neginf=-(2**62)).clip(-(2**62), 2**62)
        X = X.astype(dtype)
    return X


def _check_fitted(model, n_samples):
    assert model.labels_.shape == (n_samples,)
    assert np.issubdtype(model.labels_.dtype, np.integer)
    for name in ("linkage_matrix_", "log_partition_", "map_log_potential_",
                 "pairwise_probability_", "beliefs_", "log_marginal_likelihood_"):
        value = getattr(model, name, None)
        if value is not None:
            assert np.all(np.isfinite(value)), f"{name} is not finite: {value!r}"


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: repr(e))
def test_fit_gives_a_valid_model_or_a_clear_error(estimator):
    square = isinstance(estimator, TransitivePropagation) or (
        getattr(estimator.get_params().get("energy"), "affinity", None) == "precomputed"
    )

    @settings(max_examples=60, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(datasets(square))
    def check(X):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                model = estimator.fit(X)
            except (ValueError, TypeError) as error:
                assert str(error), "an error without a message"
                return
        # A fit that succeeds must not have overflowed on the way: a NumPy
        # RuntimeWarning raised in sktrellis' own code means a wrong answer
        # (scikit-learn's finiteness checks may warn before refusing input).
        ours = [w for w in caught if issubclass(w.category, RuntimeWarning)
                and "sktrellis" in w.filename]
        assert not ours, f"{ours[0].filename}:{ours[0].lineno}: {ours[0].message}"
        _check_fitted(model, len(X))

    check()


###############################################################################
# The posterior queries: members or trees that do not belong to the
# fitted data give a clear error, valid ones a probability; never a crash.
# Run in a subprocess, so that a segfault fails the test instead of the run.

_IN_SUBPROCESS = os.environ.get("SKTRELLIS_IN_SUBPROCESS") == "1"
POSTERIOR_ESTIMATORS = [
    ExactHierarchicalClustering(n_clusters=2),
    SparseTrellisClustering(n_clusters=2),
    ExactFlatClustering(),
]
_N_FITTED = 5


@pytest.mark.slow
def test_posterior_queries_never_crash():
    run_pytest_in_subprocess(f"{__file__}::test_posterior_queries_in_this_process")


@st.composite
def _members(draw, n_points):
    """(members, valid): indices or a mask, often valid, often not."""
    kind = draw(st.sampled_from(["valid", "indices", "mask", "odd"]))
    if kind == "valid":
        members = draw(st.lists(st.integers(0, n_points - 1), min_size=1, unique=True))
        return np.array(members), True
    if kind == "indices":
        members = np.array(draw(st.lists(st.integers(-2**40, 2**40) | st.integers(-3, 8),
                                         max_size=6)), dtype=np.int64)
        valid = (members.size > 0 and members.min() >= 0 and members.max() < n_points
                 and len(set(members.tolist())) == members.size)
        return members, bool(valid)
    if kind == "mask":
        mask = np.array(draw(st.lists(st.booleans(), min_size=n_points - 1,
                                      max_size=n_points + 1)), dtype=bool)
        return mask, bool(len(mask) == n_points and mask.any())
    odd = draw(st.sampled_from([[0.5], [np.nan], [[0, 1]], "a", [], [1.0, 2.0]]))
    return np.asarray(odd), False


@st.composite
def _trees(draw, n_points):
    """(tree, valid): a random tree of the fitted points, or a damaged/foreign one."""
    size = draw(st.sampled_from([n_points, n_points, n_points - 1, n_points + 1]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    nodes, merges, heights = list(range(size)), [], []
    for k in range(max(size - 1, 0)):
        a, b = rng.choice(len(nodes), 2, replace=False)
        merges.append((nodes[a], nodes[b]))
        nodes = [node for i, node in enumerate(nodes) if i not in (a, b)] + [size + k]
        heights.append(float(k + 1))
    tree = np.array(merges, dtype=np.float64).reshape(-1, 2)
    if draw(st.booleans()):  # a linkage matrix, with counts
        counts = [1] * size
        for a, b in merges:
            counts.append(counts[int(a)] + counts[int(b)])
        tree = np.column_stack([tree, heights, counts[size:]]) if merges else tree.reshape(0, 4)
    damage = draw(st.sampled_from([None, None, "value", "nan", "negative", "huge", "repeat"]))
    if damage and tree.size:
        row, column = rng.integers(len(tree)), rng.integers(2)
        tree[row, column] = {"value": tree[row, column] + 0.5, "nan": np.nan, "negative": -1,
                             "huge": 2**40, "repeat": tree[0, 1 - column]}[damage]
    return tree, bool(size == n_points and not (damage and tree.size))


@pytest.mark.skipif(not _IN_SUBPROCESS, reason="run by test_posterior_queries_never_crash")
@pytest.mark.parametrize("estimator", POSTERIOR_ESTIMATORS, ids=lambda e: type(e).__name__)
def test_posterior_queries_in_this_process(estimator):
    X = np.random.default_rng(0).normal(size=(_N_FITTED, 2))
    model = estimator.fit(X)
    is_tree = hasattr(model, "clade_support")

    @settings(max_examples=80, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])
    @given(_members(_N_FITTED), _trees(_N_FITTED),
           st.one_of(st.integers(-2, 4), st.sampled_from([1.5, "2", None, np.int64(2)])),
           st.integers(0, 10))
    def check(members, tree, n_samples, seed):
        members, members_valid = members
        try:
            probability = model.cluster_probability(members)
        except (ValueError, TypeError) as error:
            assert str(error) and not members_valid, f"valid members refused: {error}"
        else:
            assert members_valid, f"cluster_probability accepted {members!r}"
            assert 0.0 <= probability <= 1.0
        tree, tree_valid = tree
        query = tree if is_tree else np.arange(_N_FITTED)[: len(tree) + 1] % 3
        queries = [("log_probability", query)] + ([("clade_support", tree)] if is_tree else [])
        for name, argument in queries:
            try:
                value = getattr(model, name)(argument)
            except (ValueError, TypeError) as error:
                assert str(error)
                assert not (tree_valid and is_tree), f"{name} refused a valid tree: {error}"
                continue
            if name == "log_probability":
                assert value <= 0.0 and not np.isnan(value)
            else:
                assert value.shape == (_N_FITTED - 1,) and np.all((0 <= value) & (value <= 1))
                assert value[-1] == pytest.approx(1.0)
            if is_tree:
                assert tree_valid, f"{name} accepted a damaged or foreign tree {tree!r}"
        try:
            draws = model.sample(n_samples, random_state=seed)
        except (ValueError, TypeError) as error:
            assert str(error)
            assert not (isinstance(n_samples, (int, np.integer)) and n_samples >= 1)
        else:
            assert isinstance(n_samples, (int, np.integer)) and n_samples >= 1
            assert len(draws) == n_samples

    check()
