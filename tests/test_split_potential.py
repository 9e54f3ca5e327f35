"""The public C contract of split potentials, through a user's own compiled Cython module.

The module is compiled once per session, as a user would (``cythonize -i``
against the installed ``sktrellis/energies/__init__.pxd``), and must give
the log Z, MAP tree, tree count and cluster marginals of enumeration.
"""
import importlib
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sktrellis
from sktrellis import ExactHierarchicalClustering
from sktrellis.energies import HierarchicalEnergy, SplitPotential

from .common import brute_force, cluster_marginals, run_pytest_in_subprocess, tree_splits_set

_MODULE = "sktrellis_test_split_potential"
_SOURCE = '''
from sktrellis.energies cimport SplitData, mask_t
from sktrellis.energies import register_split_function


cdef api double tabulated_log_psi(const SplitData* data, mask_t parent,
                                  mask_t left) noexcept nogil:
    # Any potential at all: one table entry per (parent, left), times a scale.
    return data.params[0] * data.tables[0][(<Py_ssize_t>parent << data.n_points) | left]


cdef api double undeclared_log_psi(const SplitData* data, mask_t parent,
                                   mask_t left) noexcept nogil:
    return 0.0


cdef api double not_a_split_potential(double x) noexcept nogil:
    return x


register_split_function(__name__, "tabulated_log_psi", tables={"psi": "4**n"}, n_params=1)
'''


@pytest.fixture(scope="session")
def user_module(tmp_path_factory):
    pytest.importorskip("Cython")
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    directory = tmp_path_factory.mktemp("user_energy")
    (directory / f"{_MODULE}.pyx").write_text(_SOURCE)
    # Cython finds sktrellis/energies/__init__.pxd on the path; an editable
    # install (README, "For developers") serves the package by an import
    # hook, which Cython does not consult, so its directory is put there.
    package_root = str(Path(sktrellis.__file__).resolve().parents[1])
    result = subprocess.run(
        [sys.executable, "-m", "Cython.Build.Cythonize", "-i", "-q", f"{_MODULE}.pyx"],
        cwd=directory, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": package_root},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    sys.path.insert(0, str(directory))
    try:
        yield importlib.import_module(_MODULE)
    finally:
        sys.path.remove(str(directory))


class _Tabulated(HierarchicalEnergy):
    """log psi(S; A, B) = scale * psi[S, A], from the user's compiled function."""

    potential_kind = "function"

    def __init__(self, module=None, psi=None, scale=1.0):
        self.module = module
        self.psi = psi
        self.scale = scale

    def split_potential(self, X):
        return SplitPotential.from_cython(
            len(X), self.module, "tabulated_log_psi", {"psi": self.psi.ravel()}, [self.scale]
        )


def _random_psi(n_points, rng, forbidden=0.2):
    """A random (2**N, 2**N) table of log psi[parent, left], some splits -inf.

    The caterpillar {0..k} = {0..k-1} + {k} stays possible, so some tree is.
    """
    psi = rng.normal(scale=3.0, size=(1 << n_points, 1 << n_points))
    psi[rng.random(psi.shape) < forbidden] = -np.inf
    for k in range(1, n_points):
        psi[(1 << (k + 1)) - 1, (1 << k) - 1] = rng.normal()
    return psi


@pytest.mark.parametrize("n_points", [2, 3, 5, 7])
def test_a_cython_potential_gives_the_exact_posterior(
    user_module, n_points, global_random_seed, kernel_threads
):
    rng = np.random.default_rng(global_random_seed + 100 * n_points)
    energy = _Tabulated(user_module, _random_psi(n_points, rng), scale=0.7)
    X = np.zeros((n_points, 1))
    potential = energy.split_potential(X)
    log_z, best, trees, values = brute_force(potential, n_points)
    model = ExactHierarchicalClustering(energy, n_clusters=1).fit(X)

    assert model.log_partition_ == pytest.approx(log_z, rel=1e-12, abs=1e-12)
    assert model.map_log_potential_ == pytest.approx(best, rel=1e-12, abs=1e-12)
    assert model.n_trees_ == int(np.isfinite(values).sum())
    map_splits = tree_splits_set(model.linkage_matrix_, n_points)
    assert [v for t, v in zip(trees, values) if set(t) == map_splits] == [
        pytest.approx(best, rel=1e-12, abs=1e-12)
    ]

    marginal = cluster_marginals(trees, values, log_z, n_points)
    for subset in range(1, 1 << n_points):
        members = [i for i in range(n_points) if subset >> i & 1]
        assert model.cluster_probability(members) == pytest.approx(marginal[subset], abs=1e-12)


def test_the_function_reads_its_tables_and_parameters(user_module):
    n_points = 4
    psi = np.random.default_rng(0).normal(size=(16, 16))
    potential = SplitPotential.from_cython(
        n_points, user_module.__name__, "tabulated_log_psi", {"psi": psi.ravel()}, [2.0]
    )
    parents = np.array([0b1111, 0b1111, 0b0110], dtype=np.uint32)
    lefts = np.array([0b0001, 0b1110, 0b0100], dtype=np.uint32)  # either child may be given
    canonical = np.array([0b0001, 0b0001, 0b0010])
    np.testing.assert_array_equal(potential.evaluate(parents, lefts), 2.0 * psi[parents, canonical])
    assert potential.nbytes == psi.nbytes
    restored = pickle.loads(pickle.dumps(potential))
    np.testing.assert_array_equal(restored.evaluate(parents, lefts), potential.evaluate(parents, lefts))


def test_a_wrong_function_is_refused_by_name_and_signature(user_module):
    tables = {"psi": np.zeros(16 * 16)}
    with pytest.raises(ValueError, match="exports no C function 'missing'"):
        SplitPotential.from_cython(4, user_module, "missing", tables, [1.0])
    with pytest.raises(ValueError, match="'not_a_split_potential' .* has the signature 'double"):
        SplitPotential.from_cython(4, user_module, "not_a_split_potential", tables, [1.0])
    with pytest.raises(ValueError, match="'psi' has a non-finite entry nan"):
        SplitPotential.from_cython(4, user_module, "tabulated_log_psi", {"psi": [0.0, np.nan]})
    with pytest.raises(ValueError, match="'psi' must be a non-empty 1-d array"):
        SplitPotential.from_cython(4, user_module, "tabulated_log_psi", {"psi": np.zeros((2, 2))})
    with pytest.raises(ValueError, match="parameters must not be NaN"):
        SplitPotential.from_cython(4, user_module, "tabulated_log_psi", tables, [np.nan])


# The compiled boundary. Every mask and table a kernel reads is
# checked before it reads it; a pickle resolves only registered functions.

def _ginkgo(n_points=3):
    from sktrellis._engine.potential._ginkgo import ginkgo_potential

    return ginkgo_potential(n_points, np.arange(1 << n_points, dtype=np.float64), 1.0, 0.1)


@pytest.mark.parametrize(
    "parents, lefts, match",
    [
        ([(1 << 30) - 1], [1], r"parents\[0\]=1073741823 is not a non-empty subset .* \[1, 16\)"),
        ([1 << 20], [1], r"parents\[0\]=1048576 is not a non-empty subset"),
        ([0], [0], r"parents\[0\]=0 is not a non-empty subset"),
        ([-1], [1], r"parents\[0\]=-1"),
        ([0b1111], [1 << 40], r"lefts\[0\]=1099511627776 is not a non-empty subset"),
        ([0b011], [0b100], r"lefts\[0\]=4 is not a child of parents\[0\]=3"),
        ([0b111], [0b111], r"lefts\[0\]=7 is not a child of parents\[0\]=7: .* non-empty proper"),
        ([0b001], [0b001], r"lefts\[0\]=1 is not a child"),  # a singleton has no split
        ([0b111, 0b110], [0b001], "same length"),
        ([1.5], [1], "integer subset masks"),
        ([[7]], [[1]], "1-d array"),
    ],
)
def test_evaluate_refuses_masks_outside_the_tables(parents, lefts, match):
    potential = SplitPotential.separable(4, np.zeros(16), np.zeros(16), np.zeros(5))
    with pytest.raises(ValueError, match=match):
        potential.evaluate(parents, lefts)


def test_evaluate_accepts_either_child_and_any_integer_dtype():
    potential = _ginkgo(3)
    expected = potential.evaluate([0b111], [0b001])
    for dtype in (np.uint8, np.int32, np.int64, np.uint64):
        np.testing.assert_array_equal(
            potential.evaluate(np.array([7, 7], dtype), np.array([1, 6], dtype)),
            np.r_[expected, expected])
    assert potential.evaluate([], []).shape == (0,)


@pytest.mark.parametrize(
    "tables, params, match",
    [
        ({"mass2": np.zeros(8)}, [1.0] * 5, r"reads the tables \['mass2', 'sqrt_mass2'\]; .*"
                                             r"missing \['sqrt_mass2'\]"),
        ({"mass2": np.zeros(8), "sqrt_mass2": np.zeros(8), "extra": np.zeros(8)}, [1.0] * 5,
         r"unknown \['extra'\]"),
        ({"mass2": np.zeros(8), "sqrt_mass2": np.zeros(2)}, [1.0] * 5,
         r"'sqrt_mass2' .* must have 2\*\*n = 8 entries at n_points=3, got 2"),
        ({"mass2": np.zeros(8), "sqrt_mass2": np.zeros(8)}, [], "reads 5 parameters; got params "
                                                               r"of shape \(0,\)"),
        ({"mass2": np.zeros(8), "sqrt_mass2": np.zeros(8)}, [1.0] * 6, "reads 5 parameters"),
        ({"mass2": np.zeros(8), "sqrt_mass2": np.zeros(8)}, [[1.0] * 5], "reads 5 parameters"),
        ({"mass2": np.zeros(8), "sqrt_mass2": np.zeros(8)}, ["a"] * 5, "params must be"),
        ([np.zeros(8), np.zeros(8)], [1.0] * 5, "tables must be a dict .* got list"),
    ],
)
def test_from_cython_checks_what_the_ginkgo_function_declares(tables, params, match):
    """One table (the second pointer read uninitialised) or no parameters gave garbage."""
    with pytest.raises(ValueError, match=match):
        SplitPotential.from_cython(
            3, "sktrellis._engine.potential._ginkgo", "ginkgo_log_psi", tables, params)


def test_from_cython_checks_lengths_in_terms_of_n(user_module):
    # The test function declares one table of 4**n entries (indexed by parent and left).
    with pytest.raises(ValueError, match=r"'psi' .* must have 4\*\*n = 1099511627776 entries at "
                                         r"n_points=20, got 2"):
        SplitPotential.from_cython(20, user_module, "tabulated_log_psi", {"psi": [0.0, 1.0]},
                                   [1.0])
    with pytest.raises(ValueError, match="reads 1 parameters"):
        SplitPotential.from_cython(2, user_module, "tabulated_log_psi",
                                   {"psi": np.zeros(16)}, [])


def test_an_undeclared_function_is_refused_with_the_line_to_add(user_module):
    with pytest.raises(ValueError, match=r"'undeclared_log_psi' .* does not declare what it "
                                         r"reads: call register_split_function\(__name__"):
        SplitPotential.from_cython(2, user_module, "undeclared_log_psi", {}, [])
    with pytest.raises(ValueError, match="is not imported: import it first"):
        SplitPotential.from_cython(2, "sktrellis_no_such_module", "f", {}, [])


@pytest.mark.parametrize(
    "expression, n_points, length",
    [("2**n", 3, 8), ("4**n", 2, 16), ("n + 1", 5, 6), ("n*(n-1)//2 + 1", 4, 7), (12, 30, 12),
     ("2 ** n - 1", 1, 1)],
)
def test_declared_lengths_are_expressions_in_n(expression, n_points, length):
    from sktrellis._engine.potential._split_potential import _table_lengths

    assert _table_lengths("t", expression)[n_points - 1] == length


@pytest.mark.parametrize(
    "expression, match",
    [("n - 1", "is 0 at n=1"), ("__import__('os')", "not an expression in n"),
     ("m + 1", "not an expression in n"), ("2**(n*n)", "not an expression in n"),
     ("n / 2", "not an expression in n"), (2.5, "give it as an int"), ("n +", "not an expr")],
)
def test_bad_length_declarations_are_refused(user_module, expression, match):
    from sktrellis.energies import register_split_function

    with pytest.raises(ValueError, match=match):
        register_split_function(user_module, "undeclared_log_psi", tables={"t": expression},
                                n_params=0)


def test_registration_is_checked(user_module):
    from sktrellis.energies import register_split_function

    with pytest.raises(ValueError, match="already registered with tables={'psi': '4\\*\\*n'}"):
        register_split_function(user_module, "tabulated_log_psi", tables={"psi": "2**n"},
                                n_params=1)
    # The same declaration again (a reload) is fine.
    register_split_function(user_module, "tabulated_log_psi", tables={"psi": "4**n"}, n_params=1)
    with pytest.raises(ValueError, match="is not imported; a module registers"):
        register_split_function("sktrellis_no_such_module", "f", tables={}, n_params=0)
    with pytest.raises(ValueError, match="has the signature"):
        register_split_function(user_module, "not_a_split_potential", tables={}, n_params=0)
    with pytest.raises(ValueError, match="tables must be a dict"):
        register_split_function(user_module, "undeclared_log_psi", tables=["t"], n_params=0)
    with pytest.raises(ValueError, match="n_params must be a non-negative int"):
        register_split_function(user_module, "undeclared_log_psi", tables={}, n_params=-1)


class _AllowListUnpickler(pickle.Unpickler):
    """The usual loader of trusted model files: only sktrellis and numpy names."""

    def find_class(self, module, name):
        if module.split(".")[0] not in ("sktrellis", "numpy"):
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed")
        return super().find_class(module, name)


def _allow_list_loads(data):
    import io

    return _AllowListUnpickler(io.BytesIO(data)).load()


def _call_pickle(function, *args):
    """A pickle that calls ``function(*args)`` on load: what an attacker can write.

    Names the function by module and qualified name (STACK_GLOBAL), so even
    a classmethod such as ``SplitPotential.from_cython`` is reachable by an
    unpickler that admits its module.
    """

    def text(value):
        encoded = value.encode()
        return b"\x8c" + bytes([len(encoded)]) + encoded  # SHORT_BINUNICODE

    arguments = pickle.dumps(args, protocol=3)[2:-1]  # without PROTO and STOP (no frames)
    return (b"\x80\x04" + text(function.__module__) + text(function.__qualname__) + b"\x93"
            + arguments + b"R.")


@pytest.fixture
def probe_module(tmp_path, monkeypatch):
    """An importable module that records being imported: it must never be."""
    name = "sktrellis_test_import_probe"
    marker = tmp_path / "imported"
    (tmp_path / f"{name}.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name, marker
    assert name not in sys.modules and not marker.exists(), "the unpickler imported the probe"


def test_an_allow_list_unpickler_loads_function_potentials(user_module):
    potential = _ginkgo(4)
    restored = _allow_list_loads(pickle.dumps(potential))
    parents, lefts = np.full(7, 0b1111), np.arange(1, 15, 2)
    np.testing.assert_array_equal(restored.evaluate(parents, lefts),
                                  potential.evaluate(parents, lefts))
    user = SplitPotential.from_cython(2, user_module, "tabulated_log_psi",
                                      {"psi": np.arange(16.0)}, [0.5])
    assert _allow_list_loads(pickle.dumps(user)).evaluate([3], [1]).tolist() == [0.5 * 13]


def test_an_allow_list_unpickler_cannot_be_made_to_import_a_module(probe_module):
    """A function potential's pickle imported the module it named."""
    from sktrellis.energies import register_split_function

    name, _ = probe_module
    function_kind = 1
    attempts = [
        _call_pickle(SplitPotential, 3, function_kind, {}, {"module": name, "function": "f",
                                                             "values": ()}),
        _call_pickle(SplitPotential.from_cython, 3, name, "f", {}, ()),
        _call_pickle(register_split_function, name, "f", {}, 0),
    ]
    for attempt in attempts:
        with pytest.raises((ValueError, TypeError)):
            _allow_list_loads(attempt)
    # The call really happens: a registered name loads through the same path.
    loaded = _allow_list_loads(_call_pickle(
        SplitPotential.from_cython, 3, "sktrellis._engine.potential._ginkgo", "ginkgo_log_psi",
        {"mass2": np.arange(8.0), "sqrt_mass2": np.sqrt(np.arange(8.0))},
        tuple(_ginkgo(3).params["values"])))
    np.testing.assert_array_equal(loaded.evaluate([7], [1]), _ginkgo(3).evaluate([7], [1]))


def test_a_crafted_pickle_cannot_make_a_kernel_read_past_a_table():
    """Through a pickle, the Ginkgo function given one 2-entry table: refused, not read."""
    crafted = _call_pickle(SplitPotential, 20, 1, {"mass2": np.zeros(2)}, {
        "module": "sktrellis._engine.potential._ginkgo", "function": "ginkgo_log_psi",
        "values": (1.0,)})
    with pytest.raises(ValueError, match="reads the tables"):
        _allow_list_loads(crafted)


@pytest.mark.parametrize("fill, what", [(0.0, "nan"), (1.0, "inf")])
def test_a_function_returning_nan_or_inf_is_named(user_module, fill, what):
    """NaN or +inf from a split function was "every tree has zero potential"."""
    energy = _Tabulated(user_module, np.full((8, 8), fill), scale=np.inf)  # 0 * inf, 1 * inf
    with pytest.raises(ValueError, match=rf"NaN or \+inf for some split of the points \[0, 1\] "
                                         rf"\(n_samples=3; their log Z is {what}\): .*evaluate"):
        ExactHierarchicalClustering(energy, n_clusters=1).fit(np.zeros((3, 1)))


def test_a_nan_split_deep_in_the_trellis_is_not_taken_for_a_forbidden_one(user_module):
    """One NaN split of {1, 2} among forbidden ones: named, not dropped as a -inf."""
    psi = np.full((16, 16), -1.0)  # times inf: every split forbidden...
    psi[0b0110, 0b0010] = 0.0  # ...but this one, 0 * inf = NaN
    energy = _Tabulated(user_module, psi, scale=np.inf)
    with pytest.raises(ValueError, match=r"some split of the points \[1, 2\] .* log Z is nan"):
        ExactHierarchicalClustering(energy, n_clusters=1).fit(np.zeros((4, 1)))


###############################################################################
# The net: random masks, tables and parameter blocks give the
# correct value or a clear error, never a crash. The hypothesis test runs in
# a subprocess (so a segfault fails this test instead of killing the run);
# an oracle in NumPy says which inputs are valid and what they must give.

_IN_SUBPROCESS = os.environ.get("SKTRELLIS_IN_SUBPROCESS") == "1"


@pytest.mark.slow
def test_random_potentials_and_masks_never_crash(user_module):
    directory = os.path.dirname(user_module.__file__)
    path = os.pathsep.join([directory] + sys.path)
    run_pytest_in_subprocess(
        f"{__file__}::test_random_potentials_and_masks_in_this_process",
        env={"PYTHONPATH": path},
    )


@pytest.mark.skipif(not _IN_SUBPROCESS, reason="run by test_random_potentials_and_masks_never_crash")
def test_random_potentials_and_masks_in_this_process():
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from sktrellis._engine.potential._ginkgo import ginkgo_params, log_psi_of_mass_arrays

    user = importlib.import_module(_MODULE)
    values = st.one_of(st.floats(-5, 5), st.sampled_from([np.nan, np.inf, -np.inf, 0.0]))

    @st.composite
    def tables(draw, length):
        """A float table, often of the declared length, sometimes not, sometimes with NaN/inf."""
        size = draw(st.one_of(st.just(length), st.integers(0, 70)))
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        table = rng.normal(size=size)
        if size and draw(st.booleans()):
            table[rng.integers(size)] = draw(values)
        return table

    @st.composite
    def potentials(draw):
        """(what to build, its arguments, the NumPy oracle of log psi or None if invalid)."""
        n_points = draw(st.one_of(st.integers(1, 5), st.sampled_from([0, -1, 31, 64])))
        kind = draw(st.sampled_from(["separable", "user", "ginkgo"]))
        n_ok = 1 <= n_points <= 30
        n_tab = min(max(n_points, 0), 5)
        if kind == "separable":
            f, g = draw(tables(1 << n_tab)), draw(tables(1 << n_tab))
            c = draw(tables(n_tab + 1))
            valid = n_ok and len(f) == len(g) == 1 << n_points and len(c) == n_points + 1 and all(
                np.isfinite(t).all() for t in (f, g, c))

            def oracle(parent, left):
                return f[parent] + c[bin(parent).count("1")] * (g[left] + g[parent ^ left])

            return n_points, ("separable", f, g, c), oracle if valid else None
        names = ["psi"] if kind == "user" else ["mass2", "sqrt_mass2"]
        length = 1 << (2 * n_tab) if kind == "user" else 1 << n_tab
        chosen = draw(st.one_of(st.just(names), st.lists(st.sampled_from(names + ["x"]),
                                                         unique=True, max_size=3)))
        arrays = {name: draw(tables(length)) for name in chosen}
        n_params = 1 if kind == "user" else 5
        params = draw(st.one_of(st.lists(st.floats(0.1, 3), min_size=n_params,
                                         max_size=n_params),
                                st.lists(values, max_size=7)))
        if kind == "ginkgo" and draw(st.booleans()) and "mass2" in arrays:
            arrays["mass2"] = np.abs(arrays["mass2"])
            arrays["sqrt_mass2"] = np.sqrt(arrays["mass2"])
            params = ginkgo_params(draw(st.floats(0.1, 3)), draw(st.floats(0, 1)))
        if draw(st.integers(0, 9)) == 0:
            arrays = list(arrays.values())  # not a dict
        declared = 4**n_points if kind == "user" else 2**n_points
        valid = (n_ok and isinstance(arrays, dict) and sorted(arrays) == sorted(names)
                 and all(len(t) == declared and not np.isnan(t).any() and not (t == np.inf).any()
                         for t in arrays.values())
                 and len(params) == n_params and not np.isnan(params).any())
        oracle = None
        if valid and kind == "user":
            def oracle(parent, left):
                return params[0] * arrays["psi"][(parent << n_points) | left]
        elif valid and kind == "ginkgo" and np.array_equal(
                arrays["sqrt_mass2"], np.sqrt(np.maximum(arrays["mass2"], 0.0))) and (
                list(params) == ginkgo_params(params[0], params[1])):
            def oracle(parent, left):
                mass2 = arrays["mass2"]
                return log_psi_of_mass_arrays(mass2[parent], mass2[left], mass2[parent ^ left],
                                              params[0], params[1])
        elif valid:
            oracle = "any"  # a valid Ginkgo call of arbitrary tables: any value, no crash
        module, function = ((user, "tabulated_log_psi") if kind == "user" else
                            ("sktrellis._engine.potential._ginkgo", "ginkgo_log_psi"))
        return n_points, ("function", module, function, arrays, params), oracle

    masks = st.one_of(st.integers(-3, 40), st.integers(0, 2**64 - 1))

    @settings(max_examples=200, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(potentials(), st.lists(st.tuples(masks, masks), max_size=6), st.booleans())
    def check(potential, pairs, canonical_pairs):
        n_points, build, oracle = potential
        try:
            if build[0] == "separable":
                made = SplitPotential.separable(n_points, *build[1:])
            else:
                made = SplitPotential.from_cython(n_points, *build[1:])
        except (ValueError, OverflowError) as error:
            assert str(error)
            assert oracle is None, f"valid input refused: {error}"
            return
        assert oracle is not None, "invalid input accepted"
        if canonical_pairs:  # valid pairs: any parent, a proper non-empty child
            full = (1 << n_points) - 1
            pairs = [(p % full + 1, ((p % full + 1) & (c | 1)) or 1) for p, c in pairs]
        parents = [p for p, _ in pairs]
        lefts = [c for _, c in pairs]
        pairs_valid = all(
            0 < p < 1 << n_points and 0 < c and c & ~p == 0 and c != p for p, c in pairs)
        try:
            result = made.evaluate(parents, lefts)
        except ValueError as error:
            assert str(error)
            assert not pairs_valid, f"valid masks refused: {error}"
            return
        assert pairs_valid, "invalid masks accepted"
        assert result.shape == (len(pairs),)
        if oracle == "any":
            return
        for (parent, left), value in zip(pairs, result):
            low = parent & -parent
            canonical = left if left & low else parent ^ left
            np.testing.assert_array_equal(value, oracle(parent, canonical))
        restored = pickle.loads(pickle.dumps(made))
        np.testing.assert_array_equal(restored.evaluate(parents, lefts), result)

    check()


###############################################################################
# What a loaded pickle can reach: the registry of split functions is private,
# a declaration cannot be changed, and every length is bounded before any
# allocation.

_GINKGO = ("sktrellis._engine.potential._ginkgo", "ginkgo_log_psi")


def _global_pickle(module, name, tail):
    """A protocol-4 pickle pushing the global ``module.name`` and then ``tail``."""

    def text(value):
        encoded = value.encode()
        return b"\x8c" + bytes([len(encoded)]) + encoded

    return b"\x80\x04" + text(module) + text(name) + b"\x93" + tail


def _ginkgo_still_checked():
    """The Ginkgo declaration as registered at import: two 2**n tables and 5 parameters."""
    with pytest.raises(ValueError, match=r"'sqrt_mass2' .* must have 2\*\*n = 8 entries"):
        SplitPotential.from_cython(3, *_GINKGO, {"mass2": np.zeros(8), "sqrt_mass2": np.zeros(2)},
                                   [1.0] * 5)
    np.testing.assert_array_equal(_ginkgo(3).evaluate([7], [1]), _ginkgo(3).evaluate([7], [1]))


def test_the_registry_of_split_functions_is_out_of_reach():
    """A pickle took the live Ginkgo declaration and rewrote its lengths (then a segfault)."""
    from sktrellis._engine.potential import _split_potential

    for name in ("_registered_split_function", "_SPLIT_FUNCTIONS", "_split_functions",
                 "_split_function_capsule", "_BUILTIN_SPLIT_FUNCTION_MODULES"):
        assert not hasattr(_split_potential, name), name
    # The pickle: REDUCE on the lookup, then BUILD with new lengths.
    poison = b"}\x8c\x08n_params\x4b\x00s\x8c\x08_lengths}sb."
    crafted = _global_pickle("sktrellis._engine.potential._split_potential",
                             "_registered_split_function",
                             b"\x8c" + bytes([len(_GINKGO[0])]) + _GINKGO[0].encode()
                             + b"\x8c" + bytes([len(_GINKGO[1])]) + _GINKGO[1].encode()
                             + b"\x86R" + poison)
    with pytest.raises(AttributeError, match="_registered_split_function"):
        _allow_list_loads(crafted)
    _ginkgo_still_checked()


def test_a_declaration_cannot_be_changed():
    from sktrellis._engine.potential._split_potential import SplitFunction

    assert register_split_function_returns_nothing()
    declaration = SplitFunction(*_GINKGO, {"mass2": "2**n", "sqrt_mass2": "2**n"}, 5)
    for attribute, value in (("n_params", 0), ("table_lengths", {}), ("module", "x"),
                             ("_lengths", {}), ("lengths", {})):
        with pytest.raises(AttributeError):
            setattr(declaration, attribute, value)
    with pytest.raises(TypeError):
        declaration.table_lengths["mass2"] = "1"
    with pytest.raises(TypeError, match="not pickled"):
        pickle.dumps(declaration)
    # Built by a pickle and given a state: refused, and nothing registered.
    crafted = _global_pickle(
        "sktrellis._engine.potential._split_potential", "SplitFunction",
        pickle.dumps((_GINKGO[0], _GINKGO[1], {"mass2": 1}, 0), protocol=3)[2:-1]
        + b"R}\x8c\x08n_params\x4b\x00sb.")
    with pytest.raises(AttributeError):
        _allow_list_loads(crafted)
    _ginkgo_still_checked()


def register_split_function_returns_nothing():
    from sktrellis.energies import register_split_function

    return register_split_function(
        _GINKGO[0], _GINKGO[1], tables={"mass2": "2**n", "sqrt_mass2": "2**n"},
        n_params=5) is None


@pytest.mark.parametrize(
    "expression, match",
    [("(((((2**64)**64)**64)**64)**64)", "passes 2\\*\\*64"),
     ("2**64 * 2", "passes 2\\*\\*64"), ("n" + " + n" * 200, "at most 200 are read"),
     (2**65, "at most 2\\*\\*64"), ("n**n**n", "exponent .* out of range")],
)
def test_a_length_expression_stops_past_two_to_the_64(expression, match):
    """A 134-byte pickle of such an expression kept a core busy for minutes."""
    from sktrellis._engine.potential._split_potential import SplitFunction, _table_lengths

    with pytest.raises(ValueError, match=match):
        _table_lengths("t", expression)
    crafted = _global_pickle(
        "sktrellis._engine.potential._split_potential", "SplitFunction",
        pickle.dumps((_GINKGO[0], _GINKGO[1], {"mass2": expression}, 0), protocol=3)[2:-1]
        + b"R.")
    with pytest.raises(ValueError, match=match):
        _allow_list_loads(crafted)
    assert SplitFunction  # the class stays importable for the checks above


@pytest.mark.parametrize("n_points", [30, 25])
def test_a_split_table_is_measured_before_its_layout_is_built(n_points):
    """SplitPotential.table(30, ...) built a 4 GiB layout before it checked the table."""
    with pytest.raises(ValueError, match=rf"'split_table' must have shape \(\d+,\) at "
                                         rf"n_points={n_points}, got \(1,\)"):
        SplitPotential.table(n_points, np.zeros(1), np.zeros(n_points + 1), np.zeros(1))
    crafted = _call_pickle(SplitPotential, n_points, 2, {"split_table": np.zeros(1)}, {})
    with pytest.raises(ValueError, match="'split_table' must have shape"):
        _allow_list_loads(crafted)


def test_a_split_table_of_the_right_length_still_loads():
    from sktrellis._engine._subsets import split_table_layout

    level_offset, rank_in_level, length = split_table_layout(4)
    potential = SplitPotential.table(4, np.arange(float(length)), level_offset, rank_in_level)
    assert length == (3**4 + 1) // 2 - 2**4
    restored = _allow_list_loads(pickle.dumps(potential))
    np.testing.assert_array_equal(restored.evaluate([15], [1]), potential.evaluate([15], [1]))
    with pytest.raises(ValueError, match="'rank_in_level' must have shape \\(16,\\)"):
        SplitPotential.table(4, np.arange(float(length)), level_offset, rank_in_level[:3])
