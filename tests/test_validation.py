"""Inputs at the edges of float64: the answer of the same data at unit scale, or a clear error.

Complements tests/test_fuzz.py (which checks that every fit gives a finite
model or a ValueError/TypeError) with the stronger property where it holds:
models that are invariant to the scale of the features give the same
clusters, and the same log Z up to the known Jacobian, at 1e-300 and 1e300.
"""
import re
import warnings

import numpy as np
import pytest

from sktrellis import ExactFlatClustering, ExactHierarchicalClustering, SparseTrellisClustering
from sktrellis.baselines import (
    BayesianHierarchicalClustering,
    BeamSearchHierarchicalClustering,
    GreedyHierarchicalClustering,
    TransitivePropagation,
)
from sktrellis.energies import (
    CorrelationClustering,
    Dasgupta,
    DirichletProcessMixture,
    GinkgoLikelihood,
)


def _check_outputs(estimator):
    for name, value in vars(estimator).items():
        if name.endswith("_") and not name.startswith("_"):
            if isinstance(value, np.ndarray) and value.dtype.kind == "f":
                assert not np.isnan(value).any(), f"{name} has NaN"
            elif isinstance(value, float):
                assert not np.isnan(value), f"{name} is NaN"


###############################################################################
# Reproductions of overflows at extreme scales: overflow gives the right answer or a clear error

FEATURE_ESTIMATORS = [
    lambda: ExactHierarchicalClustering(n_clusters=3),
    lambda: ExactFlatClustering(),
    lambda: ExactFlatClustering(DirichletProcessMixture()),
    lambda: SparseTrellisClustering(n_clusters=3, random_state=0),
    lambda: GreedyHierarchicalClustering(n_clusters=3),
    lambda: BeamSearchHierarchicalClustering(n_clusters=3),
    lambda: BayesianHierarchicalClustering(),
    lambda: BayesianHierarchicalClustering(algorithm="exact"),
]


@pytest.mark.parametrize("make", FEATURE_ESTIMATORS)
@pytest.mark.parametrize("scale", [1e155, 1e300, 1e-300])
def test_features_at_any_scale_give_the_unit_scale_answer(make, scale):
    """Features scaled to float64's edges: the same clusters, no warning, no NaN."""
    X = np.random.default_rng(0).normal(size=(8, 3))
    reference = make().fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        scaled = make().fit(X * scale)
    np.testing.assert_array_equal(scaled.labels_, reference.labels_)
    _check_outputs(scaled)
    if hasattr(reference, "log_partition_") and not isinstance(reference.energy,
                                                                DirichletProcessMixture):
        # Similarities are scale-free (median heuristic): so is log Z.
        assert scaled.log_partition_ == pytest.approx(reference.log_partition_, rel=1e-9)


def test_dpm_evidence_shifts_by_the_jacobian_of_the_scale():
    X = np.random.default_rng(1).normal(size=(6, 2))
    reference = ExactFlatClustering(DirichletProcessMixture()).fit(X)
    scaled = ExactFlatClustering(DirichletProcessMixture()).fit(X * 2.0**900)
    # p(s X) = p(X) / s**(N d): every point's density is in units of s**-d.
    expected = reference.log_partition_ - 6 * 2 * 900 * np.log(2.0)
    assert scaled.log_partition_ == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("scale", [1.0, 1e38, 1e300, 1e-300])
def test_transitive_propagation_at_any_scale(scale):
    """The issue's float32 overflow: all singletons, converged_, NaN beliefs_ at 1e38."""
    llr = np.array([[0, 3.0, -1], [3, 0, 3], [-1, 3, 0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        model = TransitivePropagation().fit(llr * scale)
    assert model.labels_.tolist() == [0, 0, 0]
    assert model.converged_
    assert np.all(np.isfinite(model.beliefs_))
    assert model.objective_ == pytest.approx(5.0 * scale, rel=1e-12)


def test_overflowing_four_momenta_are_refused():
    momenta = np.array([[5.0, 1, 2, 3], [7.0, -2, 1, 4], [6.0, 1, -3, 2]]) * 1e155
    with pytest.raises(ValueError, match="four-momenta up to .* n_samples=3 .* larger units"):
        ExactHierarchicalClustering(GinkgoLikelihood()).fit(momenta)


@pytest.mark.parametrize("make, energy", [
    (ExactHierarchicalClustering, Dasgupta),
    (ExactFlatClustering, CorrelationClustering),
    (ExactFlatClustering, DirichletProcessMixture),
    (SparseTrellisClustering, Dasgupta),
    (GreedyHierarchicalClustering, CorrelationClustering),
    (BeamSearchHierarchicalClustering, Dasgupta),
])
def test_energy_class_instead_of_instance(make, energy):
    X = np.random.default_rng(0).normal(size=(5, 2))
    name = energy.__name__
    with pytest.raises(TypeError, match=f"energy={name} is a class; pass an instance"):
        make(energy=energy).fit(X)


###############################################################################
# The memory guard: process and cgroup limits, not only MemAvailable

@pytest.mark.slow
def test_the_guard_refuses_before_allocating_under_rlimit_as():
    """Under RLIMIT_AS an N=23 fit started and died with a bare MemoryError."""
    import subprocess
    import sys

    program = (
        "import resource, numpy as np\n"
        "from sktrellis import ExactHierarchicalClustering, _validation\n"
        "room = 300 * 2**20 + _validation._status_bytes('VmSize')\n"
        "resource.setrlimit(resource.RLIMIT_AS, (room, resource.RLIM_INFINITY))\n"
        "X = np.random.default_rng(0).normal(size=(23, 2))\n"
        "try:\n"
        "    ExactHierarchicalClustering().fit(X)\n"
        "except ValueError as error:\n"
        "    print('REFUSED', error)\n"
    )
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("REFUSED"), result.stdout + result.stderr[-2000:]
    assert "n_samples=23 requires 704.0 MiB" in result.stdout
    assert "under the process limit RLIMIT_AS (ulimit -v)" in result.stdout
    assert re.search(r"use fewer points \(n_samples=2[01] would fit\) or SparseTrellisClustering, "
                     r"or raise", result.stdout), result.stdout


def _fake_cgroup(tmp_path, monkeypatch, proc_cgroup, files):
    from sktrellis import _validation

    (tmp_path / "proc_cgroup").write_text(proc_cgroup)
    for path, text in files.items():
        (tmp_path / "cg" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "cg" / path).write_text(text)
    monkeypatch.setattr(_validation, "PROC_SELF_CGROUP", str(tmp_path / "proc_cgroup"))
    monkeypatch.setattr(_validation, "CGROUP_ROOT", str(tmp_path / "cg"))
    monkeypatch.setattr(_validation, "PROC_MEMINFO", str(tmp_path / "no_meminfo"))
    return _validation


@pytest.mark.parametrize(
    "proc_cgroup, files, left",
    [
        # v2: the process's cgroup and its parent; the tighter room binds
        ("0::/jobs/me\n", {"jobs/me/memory.max": "max\n", "jobs/me/memory.current": "5\n",
                           "jobs/memory.max": "3000000\n", "jobs/memory.current": "1000000\n"},
         2000000),
        # v2 seen from inside a container: the mount root is the cgroup
        ("0::/\n", {"memory.max": "4000000\n", "memory.current": "1000\n"}, 3999000),
        # v1: memory.limit_in_bytes, with the "no limit" value ignored
        ("4:memory:/box\n0::/\n", {"memory/box/memory.limit_in_bytes": "8000000\n",
                                   "memory/box/memory.usage_in_bytes": "6000000\n",
                                   "memory/memory.limit_in_bytes": "9223372036854771712\n"},
         2000000),
        # no limit anywhere
        ("4:memory:/box\n", {"memory/box/memory.limit_in_bytes": "9223372036854771712\n"}, None),
        ("0::/\n", {"memory.max": "max\n"}, None),
    ],
)
def test_cgroup_limits_v1_and_v2(tmp_path, monkeypatch, proc_cgroup, files, left):
    validation = _fake_cgroup(tmp_path, monkeypatch, proc_cgroup, files)
    assert validation._cgroup_memory_left() == left
    limits = dict(validation.memory_limits())
    assert limits.get("the cgroup's memory.max") == left


def test_a_cgroup_limit_names_itself_in_the_refusal(tmp_path, monkeypatch):
    _fake_cgroup(tmp_path, monkeypatch, "0::/\n",
                 {"memory.max": str(2**20) + "\n", "memory.current": "0\n"})
    with pytest.raises(ValueError, match=r"n_samples=16 requires .* but only 1.0 MiB is "
                                         r"available under the cgroup's memory.max; use fewer "
                                         "points or SparseTrellisClustering, or raise"):
        ExactHierarchicalClustering().fit(np.random.default_rng(0).normal(size=(16, 2)))


def test_one_memory_refusal_for_the_whole_package():
    """The 90 %-of-memory refusal existed twice; it is check_memory, used everywhere."""
    import pathlib

    import sktrellis

    root = pathlib.Path(sktrellis.__file__).parent
    holders = sorted(str(path.relative_to(root)) for path in root.rglob("*.py")
                     if "0.9 * available" in path.read_text() or "available_memory_bytes()"
                     in path.read_text())
    assert holders == ["_validation.py"]
