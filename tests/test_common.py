"""scikit-learn's common estimator checks, for every public estimator, in one place.

Every estimator of ``sktrellis.__all__`` and ``sktrellis.baselines.__all__``
has an entry in CHECKED (a test fails when a new one has none), with the
instance the checks fit and the checks it is expected to fail, each with its
reason.

The exact estimators (the trellises, exact BHC, Perturb-and-MAP) do 3**N work
per fit: at the 20 points of most checks one check costs seconds, and
scikit-learn runs several fits per check. In these checks their cap on N is
lowered to COMMON_CHECK_CAP, so every check above it meets the size
ValueError, which the test asserts; test_restored_common_checks below (and the
estimators' own test modules) restore what those checks verify, at small N.
"""
import copy
import functools
import inspect
import pickle
import re

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClusterMixin, clone
from sklearn.utils.estimator_checks import parametrize_with_checks

import sktrellis
import sktrellis.baselines
from sktrellis import (
    BestFirstHierarchicalClustering,
    CertifiedFlatClustering,
    ExactFlatClustering,
    ExactHierarchicalClustering,
    SparseFlatClustering,
    SparseTrellisClustering,
)
from sktrellis._engine import resources
from sktrellis._engine.search._best_first import MAX_POINTS
from sktrellis.baselines import (
    BayesianHierarchicalClustering,
    BeamSearchHierarchicalClustering,
    GreedyHierarchicalClustering,
    PerturbAndMAPClustering,
    TransitivePropagation,
)
from sktrellis.energies import Dasgupta, DirichletProcessMixture

from .common import COMMON_CHECK_N_SAMPLES

# 3**12 splits: every check below the cap fits in milliseconds (at 15, the
# one check of 15 points cost exact BHC and Perturb-and-MAP seconds).
COMMON_CHECK_CAP = 12


def _above(cap, why):
    """Expected failures: every check whose data has more than `cap` points."""
    return {
        check: f"uses {n_samples} samples, above {cap}: {why}"
        for check, n_samples in COMMON_CHECK_N_SAMPLES.items()
        if n_samples > cap
    }


_EXACT = _above(
    COMMON_CHECK_CAP,
    "the size ValueError of an exact estimator, whose cap is lowered to this in the common "
    "checks (restored at small N in test_restored_common_checks)",
)
_SEARCH = _above(
    MAX_POINTS,
    "the search keys clusters by 64-bit masks (restored in "
    "tests/test_best_first.py::test_restored_common_checks)",
)
_SQUARE_ONLY = {
    "check_clustering": (
        "passes (n, 2) features; the estimator takes only a square matrix of pairwise "
        "weights (clustering on such input is tested in its own test module)"
    ),
}

# Calibrating beta="auto" costs a bootstrap of 20-100 trees per fit and is
# tested in tests/test_calibration.py; the checks test the estimator's API,
# so the estimators whose fit would calibrate get a fixed beta.
_FIXED_BETA = Dasgupta(beta=1.0)

# Class -> [(instance the checks fit, its expected failures)].
CHECKED = {
    ExactHierarchicalClustering: [(ExactHierarchicalClustering(), _EXACT)],
    ExactFlatClustering: [(ExactFlatClustering(), _EXACT)],
    # The bound on the spanned share of log Z searches for half a second of
    # wall time a fit; it is tested in tests/test_sparse.py. A family grown
    # from one seed tree: the checks test the API (a third of the CPU time of
    # the default five seeds and 8-part resplits), the family is tested there.
    SparseTrellisClustering: [(SparseTrellisClustering(_FIXED_BETA, n_seed_trees=1,
                                                       resplit_parts=2, mass_bound_time=0), {})],
    # Growing the family (up to 50,000 states by default) costs seconds at the
    # checks' 30-150 points; the checks test the API, the growth is tested in
    # tests/test_sparse_flat.py.
    SparseFlatClustering: [(SparseFlatClustering(resplit_parts=0), {})],
    # Structureless data past 25 points can keep the integer program busy
    # for long: one round (half the CPU time of three), whose unproven stop warns.
    CertifiedFlatClustering: [(CertifiedFlatClustering(max_iter=1), {})],
    # The checks fit 30-150 random points: the search alone from the beam's
    # tree, stopped by a state cap (work, not the clock: 0.1 s of max_time
    # cost twice the CPU), whose stop warns.
    BestFirstHierarchicalClustering: [
        (BestFirstHierarchicalClustering(_FIXED_BETA, max_states=500, incumbent="beam",
                                         algorithm="search"), _SEARCH)],
    GreedyHierarchicalClustering: [(GreedyHierarchicalClustering(), {})],
    BeamSearchHierarchicalClustering: [(BeamSearchHierarchicalClustering(_FIXED_BETA), {})],
    BayesianHierarchicalClustering: [
        (BayesianHierarchicalClustering(), {}),
        # One covariance type: "auto" would run the exact tree three times
        # (the default instance above checks "auto").
        (BayesianHierarchicalClustering(DirichletProcessMixture(covariance_type="full"),
                                        covariance_type=None, algorithm="exact"), _EXACT),
    ],
    PerturbAndMAPClustering: [
        (PerturbAndMAPClustering(n_perturbations=2, n_jobs=1), {**_EXACT, **_SQUARE_ONLY})],
    TransitivePropagation: [(TransitivePropagation(), _SQUARE_ONLY)],
}


def public_estimators():
    """Every estimator class the package exports, top level and baselines."""
    classes = set()
    for module in (sktrellis, sktrellis.baselines):
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, type) and issubclass(obj, BaseEstimator):
                classes.add(obj)
    return sorted(classes, key=lambda cls: cls.__name__)


def test_every_public_estimator_is_checked():
    assert set(public_estimators()) == set(CHECKED)


@pytest.mark.parametrize("Estimator", public_estimators(), ids=lambda cls: cls.__name__)
def test_shared_conventions(Estimator):
    """What every sktrellis estimator shares, beyond scikit-learn's checks."""
    parameters = list(inspect.signature(Estimator.__init__).parameters.values())[1:]
    # Keyword-only parameters after the model: only `energy` may be positional.
    positional = [p.name for p in parameters if p.kind != p.KEYWORD_ONLY]
    assert positional in ([], ["energy"]), positional
    defaults = {p.name: p.default for p in parameters}
    if "energy" in defaults:
        assert defaults["energy"] is None  # the estimator's documented default model
    # Silent by default, as in scikit-learn: verbose=1 announces long passes.
    assert defaults.get("verbose", 0) == 0
    assert defaults.get("n_jobs") is None and defaults.get("random_state") is None
    # Every parameter is validated (scikit-learn's _parameter_constraints).
    assert set(defaults) <= set(Estimator._parameter_constraints)
    # Mixins left of BaseEstimator, so that their tags and methods win.
    assert Estimator.__mro__.index(ClusterMixin) < Estimator.__mro__.index(BaseEstimator)


_BOUND_NAME = re.compile(r"[a-z]\w*_(bounds|lower_bounds?|upper_bounds?)_")


@pytest.mark.filterwarnings("ignore:BestFirstHierarchicalClustering stopped")
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("Estimator", public_estimators(), ids=lambda cls: cls.__name__)
def test_bounds_are_named_after_what_they_bound(Estimator):
    """One scheme: `<quantity>_bounds_` is a (lower, upper) pair,
    `<quantity>_lower_bound_` / `<quantity>_upper_bound_` one side."""
    models = [clone(instance) for instance, _ in CHECKED[Estimator]]
    if Estimator is BestFirstHierarchicalClustering:
        models.append(clone(models[0]).set_params(objective="log_partition"))
    for model in models:
        model.fit(_data(model, np.random.default_rng(0), n_points=8))
        bounds = [name for name in vars(model) if "bound" in name and name.endswith("_")]
        for name in bounds:
            assert _BOUND_NAME.fullmatch(name), name
            if re.search(r"_(lower|upper)_bounds?_$", name) is None:
                lower, upper = getattr(model, name)
                assert lower <= upper, name


def _expected_failures(estimator):
    for instance, failures in CHECKED[type(estimator)]:
        if instance.get_params(deep=False) == estimator.get_params(deep=False):
            return failures
    raise AssertionError(f"{estimator!r} is not one of CHECKED's instances")


def _above_the_cap(estimator, name):
    """Whether check `name` is expected to meet the lowered cap's size ValueError."""
    return name in _EXACT and _expected_failures(estimator).get(name) == _EXACT[name]


def _marked_failures(estimator):
    """The expected failures pytest marks xfail: all but the size ValueError's.

    The test asserts that one itself: pytest formats the traceback of every
    expected failure, about a fifth of a CPU second in scikit-learn's checks
    (it parses their module for each frame), and nearly all of them are the cap's.
    """
    return {name: why for name, why in _expected_failures(estimator).items()
            if not _above_the_cap(estimator, name)}


@pytest.fixture
def common_check_cap(monkeypatch):
    monkeypatch.setattr(resources, "MAX_EXACT_POINTS", COMMON_CHECK_CAP)


# About 10 CPU seconds for the twelve instances: slow, run by the full suite.
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:BestFirstHierarchicalClustering stopped")
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@parametrize_with_checks(
    [instance for instances in CHECKED.values() for instance, _ in instances],
    expected_failed_checks=_marked_failures,
    xfail_strict=True,
)
def test_sklearn_common_checks(estimator, check, common_check_cap):
    name = (check.func if isinstance(check, functools.partial) else check).__name__
    if _above_the_cap(estimator, name):
        with pytest.raises((ValueError, AssertionError)) as raised:
            check(estimator)
        # Some checks wrap what fit raised in an AssertionError of their own.
        error = raised.value if isinstance(raised.value, ValueError) else raised.value.__cause__
        assert isinstance(error, ValueError) and re.search(r"n_samples=\d+", str(error)), (
            raised.value)
    else:
        check(estimator)


###############################################################################
# What the checks above the cap verify, at small N

_CAPPED = [
    instance
    for instances in CHECKED.values()
    for instance, failures in instances
    if set(_EXACT) <= set(failures)
]


def _data(estimator, rng, n_points=10):
    X = rng.normal(size=(n_points, 3))
    if isinstance(estimator, (PerturbAndMAPClustering, TransitivePropagation)):
        weights = rng.normal(size=(n_points, n_points))
        X = weights + weights.T
    return X


@pytest.mark.parametrize("estimator", _CAPPED, ids=lambda e: repr(e).replace(" ", ""))
def test_restored_common_checks(estimator, global_random_seed, tmp_path):
    """check_estimators_dtypes, _fit_returns_self, _overwrite_params, _dict_unchanged,
    check_n_features_in_after_fitting, check_readonly_memmap_input,
    check_f_contiguous_array_estimator and check_fit2d_predict1d's fit, at 10 points."""
    X = _data(estimator, np.random.default_rng(global_random_seed))
    model = clone(estimator)
    if hasattr(model, "random_state"):
        model.set_params(random_state=0)
    params = copy.deepcopy(model.get_params())
    assert model.fit(X) is model
    # check_n_features_in_after_fitting
    assert model.n_features_in_ == X.shape[1]
    # check_estimators_overwrite_params, check_dont_overwrite_parameters
    assert pickle.dumps(model.get_params()) == pickle.dumps(params)
    labels = model.labels_.copy()
    # check_dict_unchanged: the queries of a fitted estimator change nothing.
    state = pickle.dumps(model.__dict__)
    for method in ("predict", "predict_proba", "score_samples", "transform"):
        if hasattr(model, method):
            getattr(model, method)(X)
    assert pickle.dumps(model.__dict__) == state
    # check_estimators_dtypes, check_f_contiguous_array_estimator,
    # check_readonly_memmap_input: the same fit from every layout; other dtypes fit.
    np.save(tmp_path / "X.npy", X)
    readonly = np.load(tmp_path / "X.npy", mmap_mode="r")
    for variant in (np.asfortranarray(X), readonly):
        np.testing.assert_array_equal(clone(model).fit(variant).labels_, labels)
    for dtype in (np.float32, np.int64):
        assert clone(model).fit(np.rint(X * 10).astype(dtype)).labels_.shape == labels.shape
