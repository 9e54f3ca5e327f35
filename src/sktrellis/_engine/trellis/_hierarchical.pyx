# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Dynamic programs of the hierarchical cluster trellis over all 2**N subsets.

Everything here trusts its input: masks are valid, tables are C-contiguous
float64 of length 2**N, levels are complete. Validation happens once in the
Python layer (``sktrellis._exact_hierarchical``).

For a subset S and a canonical split (A, B = S ^ A), low(S) in A, A != S:

    log Z(S)   = logsumexp_A [log psi(S; A, B) + log Z(A) + log Z(B)]
    log MAP(S) = max_A       [log psi(S; A, B) + log MAP(A) + log MAP(B)]

with log Z({i}) = log MAP({i}) = 0. Subsets are processed by size ("levels");
all subsets of one size are independent, which is what the OpenMP loops use.
"""
from cython.parallel cimport prange, threadid
from cpython.pycapsule cimport PyCapsule_GetName, PyCapsule_GetPointer
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.math cimport INFINITY, exp, log, isfinite
from libc.stdint cimport uint64_t
from libc.string cimport memset

import importlib
from types import MappingProxyType

import numpy as np

from .._subsets import split_table_layout

from sktrellis.energies cimport SplitData, split_log_psi_t

from .._common cimport (
    LINEAR_SUM_FLOOR,
    count_add_product, extract_rank, intp_t, log_add, low_bit, mask_t, next_submask,
    popcount,
)
from ._sampling cimport WeightCache, draw_part

###############################################################################
# Split potentials

# Kinds of split potential. SEPARABLE covers every energy of the form
#     log psi(S; A, B) = f(S) + c(|S|) * (g(A) + g(B)),
# (Dasgupta, hierarchical correlation clustering): its inside pass runs in
# linear space with one multiply-add per split instead of one exp. FUNCTION
# is any other O(1) potential, a compiled function of per-subset tables
# (the public C contract of sktrellis/energies/__init__.pxd; the Ginkgo
# likelihood is one). TABLE holds log psi of every split (O(3**N) memory).
cdef enum:
    SEPARABLE = 0
    FUNCTION = 1
    TABLE = 2


cdef struct SplitTables:
    int kind
    const double* cluster_term      # SEPARABLE: f(S)
    const double* child_term        # SEPARABLE: g(X)
    const double* size_coef         # SEPARABLE: c(k), k = 0..N
    split_log_psi_t function        # FUNCTION: log psi of one split
    SplitData data                  # FUNCTION: the tables and parameters it reads
    const double* split_table       # TABLE: log psi of every canonical split
    const intp_t* level_offset      # TABLE: start of each level in split_table
    const mask_t* rank_in_level     # TABLE: rank of S among subsets of its size


cdef inline double split_log_potential(const SplitTables* t, mask_t parent, mask_t left) noexcept nogil:
    """log psi(parent; left, parent ^ left) for a canonical split (low bit in left)."""
    cdef mask_t low
    cdef int size
    if t.kind == SEPARABLE:
        return t.cluster_term[parent] + t.size_coef[popcount(parent)] * (
            t.child_term[left] + t.child_term[parent ^ left])
    if t.kind == FUNCTION:
        return t.function(&t.data, parent, left)
    size = popcount(parent)
    low = low_bit(parent)
    return t.split_table[t.level_offset[size]
                         + <intp_t>t.rank_in_level[parent] * ((<intp_t>1 << (size - 1)) - 1)
                         + extract_rank(left ^ low, parent ^ low)]


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
    Ginkgo function is declared with the types of the public contract, so
    its signature is the one every split function must have.
    """
    from ..potential._ginkgo import __pyx_capi__ as reference

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
    cdef bytes expected = PyCapsule_GetName(reference["ginkgo_log_psi"])
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
      parameters. The built-in Ginkgo likelihood is one
      (``SplitPotential.ginkgo(n_points, mass2, lam, t_cut)``, DESIGN.md
      section 6); the gallery example "A new O(1) energy in Cython" writes
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
    cdef readonly int n_points
    cdef readonly int kind
    cdef readonly object arrays       # the numpy arrays the pointers refer to
    cdef readonly dict params
    cdef SplitTables tables

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
    def ginkgo(cls, int n_points, mass2, double lam, double t_cut):
        """The Ginkgo splitting likelihood from the invariant mass squared of every subset.

        A function potential of ``sktrellis._engine.potential._ginkgo``.

        Parameters
        ----------
        n_points : int
            Number of particles N, 1 to 30.
        mass2 : array-like of shape (2**n_points,)
            ``t(S) = E**2 - |p|**2`` of the summed four-momenta of every
            subset mask S, zero for single particles.
        lam, t_cut : float
            The rate and the cut of :class:`~sktrellis.energies.GinkgoLikelihood`.

        Returns
        -------
        potential : SplitPotential
        """
        from ..potential._ginkgo import ginkgo_potential

        return ginkgo_potential(n_points, mass2, lam, t_cut)

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


###############################################################################
# Inside pass

def prepare_separable_level(SplitPotential potential, int size,
                            const mask_t[::1] order, const intp_t[::1] level_start,
                            const double[::1] log_z, const double[::1] log_map,
                            double[:, ::1] left_factors, double[:, ::1] right_factors,
                            int n_threads):
    """Per-subset factors that turn the separable inside sum into products.

    With w(X) = c(size) g(X) + log Z(X) and m(a) the largest w over subsets
    of size a, the term of split (A, B) of a parent of `size` is

        exp(w(A) + w(B) - M) = u_left[A] * u_right[B],
        u_left[X] = exp(w(X) + m(size - |X|) - M),  u_right[X] = exp(w(X) - m(|X|)),

    where M = max_a m(a) + m(size - a). Both factors are <= 1, so products
    never overflow. Row X of `left_factors` is (u_left[X], w_map[X]), of
    `right_factors` (u_right[X], w_map[X]), with w_map(X) = c(size) g(X) +
    log MAP(X): the split loop then reads one 16-byte record per child.
    Returns M (the level's log scale).
    """
    cdef const SplitTables* t = &potential.tables
    cdef double coef = t.size_coef[size]
    cdef double[::1] best = np.full(size + 1, -INFINITY)
    cdef double level_scale = -INFINITY, value
    cdef Py_ssize_t i
    cdef int a
    cdef mask_t x
    for a in range(1, size):
        for i in range(level_start[a], level_start[a + 1]):
            x = order[i]
            value = coef * t.child_term[x] + log_z[x]
            if value > best[a]:
                best[a] = value
    for a in range(1, size):
        if best[a] + best[size - a] > level_scale:
            level_scale = best[a] + best[size - a]
    if level_scale == -INFINITY:
        return level_scale
    cdef Py_ssize_t first = level_start[1], stop = level_start[size]
    for i in prange(first, stop, nogil=True, num_threads=n_threads, schedule="static"):
        x = order[i]
        a = popcount(x)
        value = coef * t.child_term[x] + log_z[x]
        if best[a] == -INFINITY or best[size - a] == -INFINITY or value == -INFINITY:
            right_factors[x, 0] = 0.0
            left_factors[x, 0] = 0.0
        else:
            right_factors[x, 0] = exp(value - best[a])
            left_factors[x, 0] = exp(value + best[size - a] - level_scale)
        left_factors[x, 1] = coef * t.child_term[x] + log_map[x]
        right_factors[x, 1] = left_factors[x, 1]
    return level_scale


cdef inline double exact_log_sum(const SplitTables* t, mask_t parent,
                                 const double* log_z) noexcept nogil:
    """log Z(parent) by an online logsumexp over its canonical splits."""
    cdef mask_t low = low_bit(parent), rest = parent ^ low, sub = 0, left
    cdef double acc = -INFINITY, value
    while sub != rest:
        left = low | sub
        value = split_log_potential(t, parent, left) + log_z[left] + log_z[parent ^ left]
        acc = log_add(acc, value)
        sub = next_submask(sub, rest)
    return acc


def inside_level(SplitPotential potential, const mask_t[::1] parents,
                 double[::1] log_z, double[::1] log_map, mask_t[::1] best_left,
                 counts, double level_scale,
                 const double[:, ::1] left_factors, const double[:, ::1] right_factors,
                 int n_threads):
    """Fill log Z, log MAP and the MAP split of `parents` (all of one size >= 2).

    `counts` is None, or a uint64 array of shape (2**N, 2) holding 128-bit
    counts of trees with finite potential (generic kinds only). For the
    separable kind, `level_scale`, `left_factors` and `right_factors` come
    from `prepare_separable_level`.
    """
    cdef const SplitTables* t = &potential.tables
    cdef Py_ssize_t i, n = parents.shape[0]
    cdef uint64_t* count = NULL
    cdef uint64_t[:, ::1] count_view
    cdef mask_t parent, low, rest, sub, left, right, arg, arg_odd, pair_bit
    cdef double acc, acc_odd, best, best_odd, value, top, psi
    cdef double* z = &log_z[0]
    cdef double* m = &log_map[0]
    cdef const double* lf = &left_factors[0, 0]
    cdef const double* rf = &right_factors[0, 0]
    cdef bint with_counts = counts is not None
    # A function potential is called directly, its pointer and data held in
    # registers rather than reloaded from the tables after each opaque call.
    cdef bint is_function = t.kind == FUNCTION
    cdef split_log_psi_t function = t.function
    cdef const SplitData* data = &t.data
    if n == 0:
        return
    if with_counts:
        count_view = counts
        count = &count_view[0, 0]

    if t.kind == SEPARABLE:
        for i in prange(n, nogil=True, num_threads=n_threads, schedule="guided"):
            parent = parents[i]
            low = low_bit(parent)
            rest = parent ^ low
            # Submasks of rest of ranks 2j and 2j + 1 differ by its lowest
            # bit: walking them in pairs gives two independent accumulators,
            # so the multiply-adds do not wait on each other's latency.
            pair_bit = low_bit(rest)
            rest = rest ^ pair_bit
            sub = 0
            acc = 0.0
            acc_odd = 0.0
            best = -INFINITY
            best_odd = -INFINITY
            arg = 0
            arg_odd = 0
            while sub != rest:
                left = low | sub
                right = parent ^ left
                acc = acc + lf[2 * left] * rf[2 * right]
                value = lf[2 * left + 1] + rf[2 * right + 1]
                if value > best:
                    best = value
                    arg = left
                left = left | pair_bit
                right = right ^ pair_bit
                acc_odd = acc_odd + lf[2 * left] * rf[2 * right]
                value = lf[2 * left + 1] + rf[2 * right + 1]
                if value > best_odd:
                    best_odd = value
                    arg_odd = left
                sub = next_submask(sub, rest)
            # Last pair: its odd member would be the parent itself.
            left = low | sub
            right = parent ^ left
            acc = acc + lf[2 * left] * rf[2 * right] + acc_odd
            value = lf[2 * left + 1] + rf[2 * right + 1]
            if value > best:
                best = value
                arg = left
            # Ties go to the first split in increasing order of the left mask.
            if best_odd > best or (best_odd == best and arg_odd < arg):
                best = best_odd
                arg = arg_odd
            if acc > LINEAR_SUM_FLOOR and isfinite(acc):
                z[parent] = t.cluster_term[parent] + level_scale + log(acc)
            else:
                z[parent] = exact_log_sum(t, parent, z)
            m[parent] = t.cluster_term[parent] + best
            best_left[parent] = arg
        return

    # Generic kinds: one log psi evaluation per split and an online
    # logsumexp with one exp per term (the sum is rescaled only when a new
    # largest term appears), so no per-thread buffer of split values.
    for i in prange(n, nogil=True, num_threads=n_threads, schedule="guided"):
        parent = parents[i]
        low = low_bit(parent)
        rest = parent ^ low
        sub = 0
        top = -INFINITY
        acc = 0.0
        best = -INFINITY
        arg = low
        if with_counts:
            count[2 * parent] = 0
            count[2 * parent + 1] = 0
        while sub != rest:
            left = low | sub
            right = parent ^ left
            if is_function:
                psi = function(data, parent, left)
            else:
                psi = split_log_potential(t, parent, left)
            if psi > -INFINITY:
                value = psi + z[left] + z[right]
                if value > top:
                    acc = acc * exp(top - value) + 1.0
                    top = value
                elif value > -INFINITY:
                    acc = acc + exp(value - top)
                value = psi + m[left] + m[right]
                if value > best:
                    best = value
                    arg = left
                if with_counts:
                    count_add_product(&count[2 * parent], &count[2 * left], &count[2 * right])
            sub = next_submask(sub, rest)
        z[parent] = top + log(acc) if top > -INFINITY else -INFINITY
        m[parent] = best
        best_left[parent] = arg


###############################################################################
# Outside pass
#
# O(root) = 1 and, for every other cluster C,
#
#     O(C) = sum over D, a non-empty subset of the complement of C, of
#            O(C | D) psi(C | D; C, D) Z(D),
#
# the total potential of everything in a tree outside C's subtree; the
# marginal of C is Z(C) O(C) / Z(root). A cluster needs only the outside
# sums of strictly larger clusters, so the pass runs level by level from the
# largest clusters down, each split visited once more (3**N terms in all).
#
# For a separable potential, log psi(S; C, D) = f(S) + c(|S|) (g(C) + g(D)),
# and with s = |C| + |D| a term factors into a parent part, a sibling part
# and a cluster part:
#
#     O(S) e^f(S)  *  e^(c(s) g(D)) Z(D)  *  e^(c(s) g(C)).
#
# The first two are tabulated in linear space once per level, each divided
# by its largest value over subsets of its size; the cluster part, with
# those two scales, is a weight per sibling size |D|. The sum over D is then
# one multiply-add per term, no exp, as in the inside pass.

def outside_parent_factors(SplitPotential potential, const mask_t[::1] parents,
                           const double[::1] log_out, double[::1] parent_factor,
                           int n_threads):
    """parent_factor[S] = exp(log O(S) + f(S) - M) for one level; returns M.

    M is the largest log O(S) + f(S) over `parents` (all of one size), so
    every factor is at most 1.
    """
    cdef const SplitTables* t = &potential.tables
    cdef Py_ssize_t i, n = parents.shape[0]
    cdef double level_scale = -INFINITY, value
    cdef mask_t parent
    for i in range(n):
        value = log_out[parents[i]] + t.cluster_term[parents[i]]
        if value > level_scale:
            level_scale = value
    for i in prange(n, nogil=True, num_threads=n_threads, schedule="static"):
        parent = parents[i]
        if level_scale == -INFINITY:
            parent_factor[parent] = 0.0
        else:
            parent_factor[parent] = exp(log_out[parent] + t.cluster_term[parent] - level_scale)
    return level_scale


def outside_sibling_factors(SplitPotential potential, int cluster_size,
                            const mask_t[::1] order, const intp_t[::1] level_start,
                            const double[::1] log_z, double[::1] sibling_factor,
                            double[::1] sibling_scale, int n_threads):
    """sibling_factor[D] = exp(c(k + |D|) g(D) + log Z(D) - m(|D|)), k = cluster_size.

    For every D of size 1 .. N - k, with m(d) (stored in sibling_scale[d])
    the largest exponent over subsets of size d, so every factor is <= 1.
    """
    cdef const SplitTables* t = &potential.tables
    cdef int n_points = potential.n_points, d
    cdef Py_ssize_t i, first = level_start[1], stop = level_start[n_points - cluster_size + 1]
    cdef double value
    cdef mask_t x
    for d in range(1, n_points - cluster_size + 1):
        sibling_scale[d] = -INFINITY
        for i in range(level_start[d], level_start[d + 1]):
            x = order[i]
            value = t.size_coef[cluster_size + d] * t.child_term[x] + log_z[x]
            if value > sibling_scale[d]:
                sibling_scale[d] = value
    for i in prange(first, stop, nogil=True, num_threads=n_threads, schedule="static"):
        x = order[i]
        d = popcount(x)
        if sibling_scale[d] == -INFINITY:
            sibling_factor[x] = 0.0
        else:
            sibling_factor[x] = exp(t.size_coef[cluster_size + d] * t.child_term[x]
                                    + log_z[x] - sibling_scale[d])


cdef inline double exact_log_outside(const SplitTables* t, mask_t cluster, mask_t full,
                                     const double* log_z, const double* log_out) noexcept nogil:
    """log O(cluster) by an online logsumexp (one exp per term) over its parents."""
    cdef mask_t rest = full ^ cluster, other = rest, parent, left
    cdef double top = -INFINITY, acc = 0.0, value
    while other:
        parent = cluster | other
        if log_out[parent] > -INFINITY and log_z[other] > -INFINITY:
            left = cluster if cluster & low_bit(parent) else other
            value = log_out[parent] + split_log_potential(t, parent, left) + log_z[other]
            if value > top:
                acc = acc * exp(top - value) + 1.0
                top = value
            elif value > -INFINITY:
                acc = acc + exp(value - top)
        other = (other - 1) & rest
    return top + log(acc) if top > -INFINITY else -INFINITY


def outside_level(SplitPotential potential, const mask_t[::1] clusters,
                  const double[::1] log_z, double[::1] log_out,
                  const double[::1] parent_factor, const double[::1] parent_scale,
                  const double[::1] sibling_factor, const double[::1] sibling_scale,
                  int n_threads):
    """Fill log O(C) for `clusters` (all of one size k, 1 <= k < N).

    Needs log O of every larger cluster. For the separable kind,
    `parent_factor` / `parent_scale` come from `outside_parent_factors` of
    every larger level (parent_scale[s] for size s) and `sibling_factor` /
    `sibling_scale` from `outside_sibling_factors` for this k; the other
    kinds ignore them and sum in log space.

    The linear sum of a cluster is exact when it is at least
    LINEAR_SUM_FLOOR: every factor is <= 1, so a term lost to underflow is
    below 1e-308, and at most 2**N of them are below the sum's last digit.
    Otherwise the cluster is redone in log space.
    """
    cdef const SplitTables* t = &potential.tables
    cdef int n_points = potential.n_points
    cdef mask_t full = <mask_t>((<uint64_t>1 << n_points) - 1)
    cdef Py_ssize_t i, n = clusters.shape[0]
    cdef int size = popcount(clusters[0]) if n else 0, d, n_sizes = n_points - size
    cdef mask_t cluster, rest, other, pair_bit, sibling
    cdef double acc, acc_odd, top
    cdef double* weight
    cdef double[:, ::1] weights
    cdef double* out = &log_out[0]
    cdef const double* pf = &parent_factor[0]
    cdef const double* sf = &sibling_factor[0]
    if n == 0:
        return
    if t.kind != SEPARABLE:
        for i in prange(n, nogil=True, num_threads=n_threads, schedule="guided"):
            out[clusters[i]] = exact_log_outside(t, clusters[i], full, &log_z[0], out)
        return
    # weight[d] = exp(c(k + d) g(C) + parent_scale[k + d] + sibling_scale[d] - top):
    # the cluster part and both scales of the terms whose sibling has d points.
    weights = np.empty((n_threads, n_sizes + 1))
    for i in prange(n, nogil=True, num_threads=n_threads, schedule="guided"):
        weight = &weights[threadid(), 0]
        cluster = clusters[i]
        top = -INFINITY
        for d in range(1, n_sizes + 1):
            weight[d] = (t.size_coef[size + d] * t.child_term[cluster]
                         + parent_scale[size + d] + sibling_scale[d])
            if weight[d] > top:
                top = weight[d]
        for d in range(1, n_sizes + 1):
            # top = -inf: no parent or no sibling is possible; all weights 0.
            weight[d] = exp(weight[d] - top) if top > -INFINITY else 0.0
        # Siblings D and D | pair_bit (pair_bit the lowest point outside C)
        # are visited together: two independent accumulators, and one
        # popcount per pair.
        rest = full ^ cluster
        pair_bit = low_bit(rest)
        rest = rest ^ pair_bit
        other = rest
        acc = 0.0
        acc_odd = 0.0
        while True:
            sibling = other | pair_bit
            d = popcount(other)
            acc = acc + pf[cluster | sibling] * sf[sibling] * weight[d + 1]
            if other == 0:
                break
            acc_odd = acc_odd + pf[cluster | other] * sf[other] * weight[d]
            other = (other - 1) & rest
        acc = acc + acc_odd
        if acc > LINEAR_SUM_FLOOR and isfinite(acc):
            out[cluster] = top + log(acc)
        elif top == -INFINITY:
            out[cluster] = -INFINITY
        else:
            out[cluster] = exact_log_outside(t, cluster, full, &log_z[0], out)


###############################################################################
# Exact sampling

cdef struct SplitSampling:
    const SplitTables* tables
    const double* log_z


cdef inline double split_log_weight(const void* model, mask_t parent, mask_t left) noexcept nogil:
    """log [psi(parent; left, parent ^ left) Z(left) Z(parent ^ left)], for draw_part."""
    cdef const SplitSampling* m = <const SplitSampling*>model
    return split_log_potential(m.tables, parent, left) + m.log_z[left] + m.log_z[parent ^ left]


def sample_splits(SplitPotential potential, const double[::1] log_z,
                  const double[:, ::1] uniforms, double[::1] cache):
    """Draw trees top-down from P(tree) = prod psi / Z(root).

    Each row of `uniforms` (N-1 numbers in [0, 1)) drives one tree: at each
    inner node the split taken is the first whose cumulative probability
    exceeds the node's uniform. Returns (parents, lefts), each
    (n_samples, N-1): the inner nodes in preorder, left child (the part
    holding the parent's low bit) first.

    Splits are drawn by ``draw_part`` (``_sampling.pxd``), which keeps the
    cumulative split weights of subsets met more than once in `cache` while
    it has room; the caller allocates it, so its size is part of the
    estimator's memory estimate.
    """
    cdef int n_points = potential.n_points
    cdef Py_ssize_t n_samples = uniforms.shape[0], n_inner = n_points - 1
    cdef mask_t full = <mask_t>((<uint64_t>1 << n_points) - 1)
    cdef mask_t[:, ::1] parents = np.zeros((n_samples, n_inner), dtype=np.uint32)
    cdef mask_t[:, ::1] lefts = np.zeros((n_samples, n_inner), dtype=np.uint32)
    cdef intp_t[::1] cache_start = np.full(<Py_ssize_t>1 << n_points, -1, dtype=np.int64)
    cdef WeightCache weights = WeightCache(&cache_start[0], &cache[0], 0, cache.shape[0])
    cdef SplitSampling model = SplitSampling(&potential.tables, &log_z[0])
    cdef Py_ssize_t r, node, top
    cdef mask_t stack[64]
    cdef mask_t parent, left
    with nogil:
        for r in range(n_samples):
            top = 0
            stack[0] = full
            node = 0
            while top >= 0:
                parent = stack[top]
                top -= 1
                if popcount(parent) < 2:
                    continue
                left = draw_part(&model, split_log_weight, parent,
                                 (<Py_ssize_t>1 << (popcount(parent) - 1)) - 1,
                                 log_z[parent], uniforms[r, node], &weights)
                parents[r, node] = parent
                lefts[r, node] = left
                node += 1
                top += 1
                stack[top] = parent ^ left
                top += 1
                stack[top] = left
    return np.asarray(parents), np.asarray(lefts)
