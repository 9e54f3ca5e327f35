"""The host's resources: memory limits (process, cgroup v1 and v2, host) and the refusals."""
import re

import numpy as np
import pytest

from sktrellis import ExactHierarchicalClustering
from sktrellis._engine import resources

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
