"""The host's resources: memory limits (process, cgroup v1 and v2, host) and the refusals."""
import re

import numpy as np
import pytest

from sktrellis import ExactFlatClustering, ExactHierarchicalClustering
from sktrellis._engine import resources
from sktrellis._engine.trellis.flat_trellis import flat_trellis_bytes
from sktrellis._engine.trellis.hierarchical_trellis import hierarchical_trellis_bytes
from sktrellis.energies import (
    CorrelationClustering,
    Dasgupta,
    DirichletProcessMixture,
    GinkgoLikelihood,
    SplitEnergy,
)
from sktrellis.energies._dpm import statistics_width

###############################################################################
# The memory guard: process and cgroup limits, not only MemAvailable

@pytest.mark.slow
def test_the_guard_refuses_before_allocating_under_rlimit_as():
    """Under RLIMIT_AS an N=23 fit started and died with a bare MemoryError."""
    import subprocess
    import sys

    program = (
        "import resource, numpy as np\n"
        "from sktrellis import ExactHierarchicalClustering\n"
        "from sktrellis._engine import resources\n"
        "room = 300 * 2**20 + resources._status_bytes('VmSize')\n"
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
    (tmp_path / "proc_cgroup").write_text(proc_cgroup)
    for path, text in files.items():
        (tmp_path / "cg" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "cg" / path).write_text(text)
    monkeypatch.setattr(resources, "PROC_SELF_CGROUP", str(tmp_path / "proc_cgroup"))
    monkeypatch.setattr(resources, "CGROUP_ROOT", str(tmp_path / "cg"))
    monkeypatch.setattr(resources, "PROC_MEMINFO", str(tmp_path / "no_meminfo"))


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
    _fake_cgroup(tmp_path, monkeypatch, proc_cgroup, files)
    assert resources._cgroup_memory_left() == left
    limits = dict(resources.memory_limits())
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
    assert holders == ["_engine/resources.py"]


###############################################################################
# Thread counts and sizes in words

@pytest.mark.parametrize("n_jobs, expected", [
    (None, 4), (1, 1), (3, 3), (16, 4), (0, 1), (-1, 4), (-2, 3), (-10, 1),
])
def test_thread_counts_follow_joblib_conventions(monkeypatch, n_jobs, expected):
    monkeypatch.setattr(resources.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3},
                        raising=False)
    assert resources.effective_n_threads(n_jobs) == expected


@pytest.mark.parametrize("n_bytes, text", [
    (0, "0 bytes"), (1023, "1023 bytes"), (1536, "1.5 KiB"), (5 * 2**30, "5.0 GiB"),
    (3 * 2**50, "3.0 PiB"), (2**60, "1024.0 PiB"),
])
def test_sizes_in_words(n_bytes, text):
    assert resources.format_bytes(n_bytes) == text


@pytest.mark.parametrize("limits, budget, available", [
    ([("MemAvailable", 1000), ("the cgroup's memory.max", 400)], 200, 400),
    ([], 77, None),
])
def test_a_budget_is_a_share_of_the_tightest_limit(monkeypatch, limits, budget, available):
    monkeypatch.setattr(resources, "memory_limits", lambda: limits)
    assert resources.memory_budget(0.5, unknown=77) == (budget, available)
    # A refusal leaves 10 % of the tightest limit; with no limit known, anything fits.
    assert resources.fits_in_memory(360)
    assert resources.fits_in_memory(361) == (available is None)


###############################################################################
# A fit's peak from what the energy describes; the energies never probe the host

def _no_host(monkeypatch):
    def probe():
        raise AssertionError("an energy's description read the host")

    monkeypatch.setattr(resources, "memory_limits", probe)


@pytest.mark.parametrize("energy", [
    Dasgupta(), GinkgoLikelihood(), SplitEnergy(lambda X, left, right: 0.0 * left),
])
def test_a_hierarchical_fit_counts_the_trellis_and_the_energys_scratch(monkeypatch, energy):
    _no_host(monkeypatch)
    for n_points in range(2, 26):
        trellis = hierarchical_trellis_bytes(energy.potential_kind, n_points,
                                             energy.table_bytes_per_subset)
        assert resources.hierarchical_fit_bytes(energy, n_points) == (
            trellis + energy.scratch_bytes(n_points))
        assert (resources.hierarchical_fit_bytes(energy, n_points + 1)
                > resources.hierarchical_fit_bytes(energy, n_points))
    # A user function is handed batches of splits: their arguments count.
    assert energy.scratch_bytes(20) == (0 if not isinstance(energy, SplitEnergy) else 48 << 20)


@pytest.mark.parametrize("energy", [
    CorrelationClustering(),
    DirichletProcessMixture(),
    DirichletProcessMixture(covariance_type="diag"),
    DirichletProcessMixture(component="bernoulli"),
])
def test_a_flat_fit_counts_the_table_the_trellis_and_the_statistics(monkeypatch, energy):
    _no_host(monkeypatch)
    for n_points in range(1, 26):
        base = resources.flat_fit_bytes(energy, n_points)
        assert base >= (energy.table_bytes_per_subset << n_points) + flat_trellis_bytes(n_points)
        # The statistics grow with the features, as d**2 for full covariances.
        small, large = (resources.flat_fit_bytes(energy, n_points, d) for d in (3, 3000))
        assert small <= large
    if isinstance(energy, DirichletProcessMixture):
        expected = statistics_width(energy.component, energy.covariance_type, 3000)
    else:
        expected = 0
    assert energy.statistics_per_subset(3000) == expected
    assert energy.scratch_advice.startswith("use ")


def test_an_energy_builds_its_table_whatever_the_host_says(monkeypatch):
    """Energies describe their memory; only the estimators refuse, before any allocation."""
    monkeypatch.setattr(resources, "memory_limits", lambda: [("MemAvailable", 1)])
    X = np.random.default_rng(0).normal(size=(6, 2))
    assert DirichletProcessMixture().cluster_potential(X).shape == (64,)
    energy = SplitEnergy(lambda X, left, right: 0.0 * left)
    assert energy.split_potential(X).n_points == 6
    with pytest.raises(ValueError, match=r"ExactFlatClustering needs memory for 2\*\*N subsets: "
                                         r"n_samples=6 requires"):
        ExactFlatClustering(DirichletProcessMixture()).fit(X)


@pytest.mark.parametrize("covariance_type, advice", [
    ("full", r"use covariance_type='diag' or 'spherical' \(O\(n_features\) statistics, "
             r"where 'full' has O\(n_features\*\*2\)\)"),
    ("diag", r"use fewer samples or fewer features"),
])
def test_a_flat_refusal_names_n_first_then_the_statistics(monkeypatch, covariance_type, advice):
    energy = DirichletProcessMixture(covariance_type=covariance_type)
    n_points, n_features = 14, 3000
    # Room for the table and the trellis of 14 points, not for the statistics.
    room = resources.flat_fit_bytes(energy, n_points) / 0.9 + 1
    assert resources.flat_fit_bytes(energy, n_points, n_features) > 0.9 * room
    monkeypatch.setattr(resources, "memory_limits", lambda: [("MemAvailable", room)])
    width = energy.statistics_per_subset(n_features)
    with pytest.raises(ValueError, match=(
            rf"^Owner needs memory for the DirichletProcessMixture statistics of all subsets "
            rf"at n_features=3000 \({width} per subset\): n_samples=14 requires .* but only "
            rf".* is available under MemAvailable; {advice}")):
        resources.check_flat_fit(energy, n_points, n_features, "Owner")
    # Two more points do not fit even without features: what would fit is named.
    with pytest.raises(ValueError, match=r"^Owner needs memory for 2\*\*N subsets: n_samples=16 "
                                         r".*use fewer points \(n_samples=14 would fit\) or "
                                         r"SparseTrellisClustering$"):
        resources.check_flat_fit(energy, 16, n_features, "Owner")
    # Three features' statistics fit where they are counted.
    room = resources.flat_fit_bytes(energy, n_points, 3) / 0.9 + 1
    monkeypatch.setattr(resources, "memory_limits", lambda: [("MemAvailable", room)])
    resources.check_flat_fit(energy, n_points, 3, "Owner")


def test_above_the_structural_limit_the_host_does_not_matter(monkeypatch):
    monkeypatch.setattr(resources, "memory_limits", lambda: [("MemAvailable", 2**70)])
    n_points = resources.MAX_EXACT_POINTS + 1
    with pytest.raises(ValueError, match=rf"^Owner enumerates all 2\*\*N subsets of the points: "
                                         rf"n_samples={n_points} would need .* at most "
                                         rf"{resources.MAX_EXACT_POINTS} points .* use "
                                         r"SparseTrellisClustering for larger data$"):
        resources.check_hierarchical_fit(Dasgupta(), n_points, "Owner")
