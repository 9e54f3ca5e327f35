"""Shared fixtures: a seed fixture in the spirit of scikit-learn's global_random_seed."""
import os

import pytest

# The suite runs the kernels on more threads than a CI machine has cores
# (kernel_threads below), and pytest runs nothing beside them: OpenMP
# threads spinning at a barrier while a peer waits for a core burn CPU for
# nothing. Passive waiting changes no result; it is read when the OpenMP
# runtime starts, at the first import of a compiled kernel, after this file.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Likewise NumPy's BLAS (OpenBLAS), whose threads spin between calls: on the
# small matrices of the tests its threads only wait for each other and for
# a core (BHC's full covariances over 64 features: 7.3 CPU s on its default
# threads, 1.9 on one, on this loaded 2-core machine). No test depends on the
# BLAS's threads; the kernels' own threads are the estimators' n_jobs. Read
# when NumPy first loads, after this file; subprocesses inherit it.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _seeds():
    # SKTRELLIS_TESTS_GLOBAL_RANDOM_SEED="all" runs every seed-dependent test
    # with seeds 0..99; "a-b" a range; a number one seed. Default: one fixed
    # seed, so CI is reproducible while no test depends on a lucky value.
    spec = os.environ.get("SKTRELLIS_TESTS_GLOBAL_RANDOM_SEED", "42")
    if spec == "all":
        return list(range(100))
    if "-" in spec:
        low, high = (int(x) for x in spec.split("-"))
        return list(range(low, high + 1))
    return [int(spec)]


@pytest.fixture(params=_seeds())
def global_random_seed(request):
    return request.param


# One thread through the forced parallel path is the full suite's: the quick
# suite keeps three threads, the path with interleaving threads.
@pytest.fixture(params=[pytest.param(1, marks=pytest.mark.slow), 3],
                ids=["1-thread", "3-threads"])
def kernel_threads(request, monkeypatch):
    """Kernel thread count for the exact estimators, the parallel path forced at any N.

    Below a work threshold the trellises run a level on one thread; with the
    threshold at 0 and 3 threads (more than this 2-core machine has, so
    threads interleave), small brute-force problems exercise the OpenMP loops.
    """
    from sktrellis import _flat as flat, _hierarchical as hierarchical
    from sktrellis._engine.trellis import levels

    monkeypatch.setattr(levels, "PARALLEL_MIN_TERMS", 0)
    for module in (hierarchical, flat):
        monkeypatch.setattr(module, "effective_n_threads", lambda n_jobs: request.param)
    return request.param


@pytest.fixture
def fake_clock(monkeypatch):
    """The clock of the level passes, set by hand: ``fake_clock["now"]`` seconds."""
    from sktrellis._engine.trellis import levels

    clock = {"now": 0.0}
    monkeypatch.setattr(levels.time, "perf_counter", lambda: clock["now"])
    return clock


@pytest.fixture
def ctrl_c():
    """``_thread.interrupt_main`` raises KeyboardInterrupt, however pytest was started.

    A shell starts a background job with SIGINT ignored, and then
    ``interrupt_main`` does nothing: Python's own handler is installed for
    the test and the inherited one restored after.
    """
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


# Nodes that could crash the interpreter (fuzzers of compiled code) run in a
# subprocess, so that a crash fails a test instead of ending the run: all of
# a session's in one subprocess (tests/common.py, pytest_in_subprocess).
# A test names its node with @pytest.mark.in_subprocess("name", timeout=...)
# in its own file, and reads the outcome from the fixture subprocess_failure.
_SUBPROCESS_NODES = pytest.StashKey[dict]()


@pytest.hookimpl(trylast=True)  # after -m and -k deselected what will not run
def pytest_collection_modifyitems(config, items):
    nodes = {}
    for item in items:
        marker = item.get_closest_marker("in_subprocess")
        if marker is not None:
            nodes[f"{item.path}::{marker.args[0]}"] = marker.kwargs.get("timeout", 600)
    config.stash[_SUBPROCESS_NODES] = nodes


@pytest.fixture(scope="session")
def _subprocess_outcomes(request):
    from .common import pytest_in_subprocess

    nodes = request.config.stash[_SUBPROCESS_NODES]
    return pytest_in_subprocess(list(nodes), timeout=sum(nodes.values()))


@pytest.fixture
def subprocess_failure(request, _subprocess_outcomes):
    """Why this test's ``in_subprocess`` node did not pass in the session's subprocess, or None."""
    marker = request.node.get_closest_marker("in_subprocess")
    return _subprocess_outcomes[f"{request.node.path}::{marker.args[0]}"]
