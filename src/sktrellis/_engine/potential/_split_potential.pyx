"""The split potential: the contract between a hierarchical energy and the kernels.

Public as ``sktrellis.energies.SplitPotential``. The struct the kernels read
and its inline evaluation are declared in ``_split_potential.pxd``.
"""
from cpython.pycapsule cimport PyCapsule_GetName, PyCapsule_GetPointer
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.string cimport memset

import importlib
import sys
from types import MappingProxyType

import numpy as np

from .._subsets import split_table_layout

from sktrellis.energies cimport SplitData, split_log_psi_t

from .._common cimport intp_t, low_bit, mask_t


cdef api double signature_witness(const SplitData* data, mask_t parent,
                                  mask_t left) noexcept nogil:
    """Never called: its exported capsule carries the signature every split function must have.

    Cython names an exported function's capsule by its C signature, with the
    typedefs spelled after the .pxd declaring them; a user's function
    declared against the public contract gets the same name.
    """
    return 0.0


# Largest N a SplitPotential accepts: masks are 32-bit, and 2**31 subsets
# of float64 tables are already 16 GiB; the estimators cap N lower.
MAX_POTENTIAL_POINTS = 30


def _check_table(arrays, name, length, *, allow_minus_inf=False):
    """The named float64 table, C-contiguous, finite (or -inf), stored back in `arrays`.

    It must have `length` entries, or be any non-empty 1-d array when
    `length` is None.
    """
    table = arrays.get(name)
    if table is None:
        raise ValueError(f"SplitPotential needs a table {name!r}")
    table = np.ascontiguousarray(table, dtype=np.float64)
    if length is None and (table.ndim != 1 or table.size == 0):
        raise ValueError(
            f"SplitPotential table {name!r} must be a non-empty 1-d array, got shape "
            f"{table.shape}"
        )
    if length is not None and table.shape != (length,):
        raise ValueError(
            f"SplitPotential table {name!r} must have shape ({length},), got {table.shape}"
        )
    bad = np.isnan(table) | (table == np.inf)
    if not allow_minus_inf:
        bad |= table == -np.inf
    if bad.any():
        allowed = "finite or -inf" if allow_minus_inf else "finite"
        index = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"SplitPotential table {name!r} has a non-finite entry {float(table[index])} "
            f"at index {index}; its entries must be {allowed}"
        )
    arrays[name] = table
    return table


def _split_function_capsule(module_name, name):
    """The capsule of the C split log potential `name` of the compiled module `module_name`.

    Cython exports a module's ``cdef api`` functions (and those declared in
    its .pxd) in ``__pyx_capi__``, each capsule named by its C signature,
    with the typedefs spelled after the .pxd declaring them. The built-in
    ``signature_witness`` above is declared with the types of the public
    contract, so its signature is the one every split function must have.
    """
    module = importlib.import_module(module_name)
    exported = getattr(module, "__pyx_capi__", {})
    declaration = (
        f"cdef api double {name}(const SplitData* data, mask_t parent, mask_t left) "
        "noexcept nogil, with SplitData and mask_t cimported from sktrellis.energies"
    )
    if name not in exported:
        raise ValueError(
            f"module {module_name!r} exports no C function {name!r}; a split potential "
            f"function is declared {declaration}"
        )
    capsule = exported[name]
    cdef bytes signature = PyCapsule_GetName(capsule)
    cdef bytes expected = PyCapsule_GetName(
        sys.modules[__name__].__pyx_capi__["signature_witness"])
    if signature != expected:
        raise ValueError(
            f"C function {name!r} of module {module_name!r} has the signature "
            f"{signature.decode()!r}, not {expected.decode()!r}; declare it {declaration}"
        )
    return capsule


cdef class SplitPotential:
    """Per-subset tables from which the kernels evaluate any split in O(1).

    The contract between a hierarchical energy and the exact trellis: an
    energy's ``split_potential(X)`` returns one of these (public as
    ``sktrellis.energies.SplitPotential``). It provides ``log psi(S; A, B)``
    for every canonical split of every subset S of the N points:

    - subsets are masks (bit i set <=> point i in the subset), tables of
      2**N entries are indexed by mask;
    - a split is visited once, as (A, S ^ A) with A holding the lowest
      point of S, so the potential need not be symmetric in its children;
    - ``log psi`` is finite, or -inf for a forbidden split (a tree using it
      has probability zero); never NaN or +inf.

    Build it with a constructor, fastest first:

    - ``SplitPotential.separable(n_points, cluster_term, child_term,
      size_coef)`` for every energy of the form
      ``log psi(S; A, B) = f(S) + c(|S|) (g(A) + g(B))`` (tables f and g of
      length 2**N, c of length N + 1). Dasgupta's cost and hierarchical
      correlation clustering have this form; the kernels then sum in
      linear space with one multiply-add per split.
    - ``SplitPotential.from_cython(n_points, module, name, tables,
      params)`` for any other potential that is O(1) per split: a C
      function of the user's own compiled Cython module, with the
      signature declared in ``sktrellis/energies/__init__.pxd`` (installed
      with the package), reads the given float64 tables and scalar
      parameters. The built-in Ginkgo likelihood
      (:class:`~sktrellis.energies.GinkgoLikelihood`) is one; the gallery example "A new O(1) energy in Cython" writes
      another. It runs at the speed of a built-in energy.
    - ``SplitPotential.table(n_points, split_table, level_offset,
      rank_in_level)`` for any potential, one value per canonical split in
      the layout of ``split_table_layout`` (O(3**N) memory; what
      :class:`~sktrellis.energies.SplitEnergy` builds from a NumPy
      function, no compiler needed).

    Every table is checked on construction: shape, layout, and no NaN or
    +inf (-inf only in a split table or a function's tables), so a faulty
    energy gets a ValueError instead of a wrong answer. A function's own
    results are not checked in the hot loops; ``evaluate`` shows them.

    Parameters
    ----------
    n_points : int
        Number of points N, 1 to 30.
    kind : int
        Internal kind code; use the constructors.
    arrays : dict of ndarray
        The tables of the kind.
    params : dict
        Scalar parameters of the kind.

    Attributes
    ----------
    n_points : int
    arrays : mapping of str to ndarray
        The validated tables (what ``nbytes`` counts), read-only; the
        kernels read them in place, so do not write into them.

    Examples
    --------
    A Ward-like energy: a split of S costs ``|S|`` times the rise in the sum
    of squares, ``log psi = -|S| (SSE(S) - SSE(A) - SSE(B))``, which is
    separable with ``f(S) = -|S| SSE(S)``, ``g = SSE`` and ``c(k) = k``:

    >>> import numpy as np
    >>> from sktrellis.energies import SplitPotential, subset_sizes, subset_sums
    >>> x = np.array([0.0, 0.2, 3.0])
    >>> size = np.maximum(subset_sizes(3), 1)
    >>> sse = subset_sums(x**2) - subset_sums(x) ** 2 / size
    >>> potential = SplitPotential.separable(
    ...     3, cluster_term=-size * sse, child_term=sse, size_coef=np.arange(4.0))
    >>> potential.evaluate([0b111], [0b011]).round(2).tolist()  # {0, 1} | {2}
    [-16.82]
    """
    def __init__(self, int n_points, int kind, dict arrays, dict params):
        cdef const double[::1] view
        cdef const intp_t[::1] offsets
        cdef const mask_t[::1] ranks
        cdef Py_ssize_t k
        if not 1 <= n_points <= MAX_POTENTIAL_POINTS:
            raise ValueError(
                f"SplitPotential supports 1 to {MAX_POTENTIAL_POINTS} points, got "
                f"n_points={n_points}"
            )
        arrays = dict(arrays)
        n_subsets = 1 << n_points
        self._free_function_data()
        memset(&self.tables, 0, sizeof(SplitTables))
        self.tables.kind = kind
        if kind == SEPARABLE:
            view = _check_table(arrays, "cluster_term", n_subsets)
            self.tables.cluster_term = &view[0]
            view = _check_table(arrays, "child_term", n_subsets)
            self.tables.child_term = &view[0]
            view = _check_table(arrays, "size_coef", n_points + 1)
            self.tables.size_coef = &view[0]
        elif kind == FUNCTION:
            capsule = _split_function_capsule(params["module"], params["function"])
            values = np.asarray(params["values"], dtype=np.float64).ravel()
            if np.isnan(values).any():
                raise ValueError(f"SplitPotential parameters must not be NaN, got {values}")
            for name in list(arrays):
                _check_table(arrays, name, None, allow_minus_inf=True)
            self.tables.function = <split_log_psi_t>PyCapsule_GetPointer(
                capsule, PyCapsule_GetName(capsule))
            self.tables.data.n_points = n_points
            # One block each, freed with the object; the tables themselves
            # are the arrays kept in self.arrays.
            table_pointers = <const double**>PyMem_Malloc((len(arrays) + 1) * sizeof(double*))
            param_values = <double*>PyMem_Malloc((len(values) + 1) * sizeof(double))
            if table_pointers == NULL or param_values == NULL:
                PyMem_Free(table_pointers)
                PyMem_Free(param_values)
                raise MemoryError()
            for k, name in enumerate(arrays):
                view = arrays[name]
                table_pointers[k] = &view[0]
            for k in range(len(values)):
                param_values[k] = values[k]
            self.tables.data.tables = table_pointers
            self.tables.data.params = param_values
            params = {"module": params["module"], "function": params["function"],
                      "values": tuple(values.tolist())}
        elif kind == TABLE:
            level_offset, rank_in_level, table_length = split_table_layout(n_points)
            view = _check_table(arrays, "split_table", table_length, allow_minus_inf=True)
            self.tables.split_table = &view[0]
            if not (np.array_equal(arrays.get("level_offset"), level_offset)
                    and np.array_equal(arrays.get("rank_in_level"), rank_in_level)):
                raise ValueError(
                    "SplitPotential.table needs the level_offset and rank_in_level of "
                    "sktrellis._engine._subsets.split_table_layout(n_points)"
                )
            arrays["level_offset"] = level_offset
            arrays["rank_in_level"] = rank_in_level
            offsets = level_offset
            self.tables.level_offset = &offsets[0]
            ranks = rank_in_level
            self.tables.rank_in_level = &ranks[0]
        else:
            raise ValueError(f"unknown split potential kind {kind}")
        self.n_points = n_points
        self.kind = kind
        # The kernels read these arrays through raw pointers: a read-only
        # view, so no entry can be dropped or replaced under them.
        self.arrays = MappingProxyType(arrays)
        self.params = params

    def __dealloc__(self):
        self._free_function_data()

    cdef void _free_function_data(self) noexcept:
        PyMem_Free(<void*>self.tables.data.tables)
        PyMem_Free(<void*>self.tables.data.params)
        self.tables.data.tables = NULL
        self.tables.data.params = NULL

    @classmethod
    def separable(cls, int n_points, cluster_term, child_term, size_coef):
        """A separable potential, ``log psi(S; A, B) = f(S) + c(|S|) (g(A) + g(B))``.

        Parameters
        ----------
        n_points : int
            Number of points N, 1 to 30.
        cluster_term : array-like of shape (2**n_points,)
            f(S) of every subset mask S; finite.
        child_term : array-like of shape (2**n_points,)
            g(X) of every subset mask X; finite.
        size_coef : array-like of shape (n_points + 1,)
            c(k) of every subset size k; finite.

        Returns
        -------
        potential : SplitPotential
        """
        return cls(n_points, SEPARABLE, {
            "cluster_term": cluster_term, "child_term": child_term,
            "size_coef": size_coef}, {})

    @classmethod
    def from_cython(cls, int n_points, module, str name, tables, params=()):
        """log psi(S; A, B) from a C function of a compiled Cython module.

        The function is declared, with the types of the public contract
        ``sktrellis/energies/__init__.pxd``::

            from sktrellis.energies cimport SplitData, mask_t

            cdef api double name(const SplitData* data, mask_t parent,
                                 mask_t left) noexcept nogil:
                ...

        and returns log psi(parent; left, parent ^ left) for the canonical
        split (``left`` holds the lowest point of ``parent``): finite, or
        -inf for a forbidden split, never NaN or +inf. It may be called
        from several threads at once and only reads ``data``:
        ``data.tables[k]`` is the k-th table below, ``data.params[j]`` the
        j-th parameter, ``data.n_points`` is N.

        Parameters
        ----------
        n_points : int
            Number of points N, 1 to 30.
        module : module or str
            The compiled module (or its importable name) exporting the
            function; named in a pickle, so the potential pickles.
        name : str
            Name of the function in the module.
        tables : dict of str to array-like
            Float64 tables the function reads, in order (usually of 2**N
            entries indexed by subset mask); finite or -inf.
        params : sequence of float, default=()
            Scalar parameters the function reads, in order.

        Returns
        -------
        potential : SplitPotential
        """
        module_name = module if isinstance(module, str) else module.__name__
        return cls(n_points, FUNCTION, dict(tables),
                   {"module": module_name, "function": name, "values": params})

    @classmethod
    def table(cls, int n_points, split_table, level_offset, rank_in_level):
        """Tabulated log psi of every canonical split, stored level by level.

        Parameters
        ----------
        n_points : int
            Number of points N, 1 to 30.
        split_table : array-like of float64
            log psi of every canonical split, finite or -inf, in the layout
            of ``sktrellis._engine._subsets.split_table_layout(n_points)``.
        level_offset, rank_in_level : ndarray
            That layout (checked against it).

        Returns
        -------
        potential : SplitPotential
        """
        return cls(n_points, TABLE, {
            "split_table": split_table, "level_offset": level_offset,
            "rank_in_level": rank_in_level}, {})

    @staticmethod
    def table_bytes(kind, int n_points, int bytes_per_subset=0):
        """Bytes of the tables of a potential of `kind`, for memory estimates.

        Parameters
        ----------
        kind : {"separable", "function", "table"}
        n_points : int
        bytes_per_subset : int, default=0
            A function potential's tables are its energy's: this many
            bytes per subset.

        Returns
        -------
        n_bytes : int
        """
        n_subsets = 1 << n_points
        if kind == "separable":
            return 16 * n_subsets + 8 * (n_points + 1)
        if kind == "function":
            return bytes_per_subset * n_subsets
        if kind == "table":
            # the split table, and its layout (int64 offsets, uint32 ranks)
            return 8 * (3**n_points // 2) + 4 * n_subsets + 8 * (n_points + 1)
        raise ValueError(f"unknown split potential kind {kind!r}")

    @property
    def nbytes(self):
        """Bytes held by the potential's tables."""
        return sum(array.nbytes for array in self.arrays.values())

    @property
    def is_separable(self):
        return self.kind == SEPARABLE

    def __reduce__(self):
        return (SplitPotential, (self.n_points, self.kind, dict(self.arrays), self.params))

    def evaluate(self, parents, lefts):
        """log psi of splits given as (parent, child) masks; either child may be given.

        Parameters
        ----------
        parents : array-like of int
            Parent subset masks.
        lefts : array-like of int
            One child of each parent, a submask of it.

        Returns
        -------
        log_psi : ndarray of float64
        """
        cdef const mask_t[::1] parent_view = np.ascontiguousarray(parents, dtype=np.uint32)
        cdef const mask_t[::1] left_view = np.ascontiguousarray(lefts, dtype=np.uint32)
        cdef Py_ssize_t i, n = parent_view.shape[0]
        cdef double[::1] out = np.empty(n, dtype=np.float64)
        cdef mask_t parent, left
        for i in range(n):
            parent = parent_view[i]
            left = left_view[i]
            if not (left & low_bit(parent)):
                left = parent ^ left
            out[i] = split_log_potential(&self.tables, parent, left)
        return np.asarray(out)
