"""The split potential: the contract between a hierarchical energy and the kernels.

Public as ``sktrellis.energies.SplitPotential``. The struct the kernels read
and its inline evaluation are declared in ``_split_potential.pxd``.
"""
cimport cython
from cpython.pycapsule cimport PyCapsule_GetName, PyCapsule_GetPointer
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.string cimport memset

import ast
import importlib
import operator
import sys
from collections.abc import Mapping
from types import MappingProxyType

import numpy as np

from .._subsets import split_table_layout

from sktrellis.energies cimport SplitData, split_log_psi_t

from .._common cimport index_t, low_bit, mask_t


cdef api double signature_witness(const SplitData* data, mask_t parent,
                                  mask_t left) noexcept nogil:
    """Never called: its exported capsule carries the signature every split function must have.

    Cython names an exported function's capsule by its C signature, with the
    typedefs spelled after the .pxd declaring them; a user's function
    declared against the public contract gets the same name.
    """
    return 0.0


# Largest N a SplitPotential accepts: masks are 32-bit, and 2**31 subsets
# of float64 tables are already 16 GiB; the estimators cap N lower. The
# checks read the C constant; the Python name is for callers.
cdef enum:
    MAX_POINTS = 30
MAX_POTENTIAL_POINTS = MAX_POINTS


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


cdef object _split_function_capsule(object module, str name):
    """The capsule of the C split log potential `name` exported by the compiled `module`.

    Cython exports a module's ``cdef api`` functions (and those declared in
    its .pxd) in ``__pyx_capi__``, each capsule named by its C signature,
    with the typedefs spelled after the .pxd declaring them. The built-in
    ``signature_witness`` above is declared with the types of the public
    contract, so its signature is the one every split function must have.
    """
    module_name = module.__name__
    exported = getattr(module, "__pyx_capi__", {})
    declaration = (
        f"cdef api double {name}(const SplitData* data, mask_t parent, mask_t left) "
        "noexcept nogil, with SplitData and mask_t cimported from sktrellis.energies"
    )
    if not isinstance(exported, Mapping) or name not in exported:
        raise ValueError(
            f"module {module_name!r} exports no C function {name!r}; a split potential "
            f"function is declared {declaration}"
        )
    capsule = exported[name]
    if type(capsule).__name__ != "PyCapsule":
        raise ValueError(f"{name!r} of module {module_name!r} is not an exported C function")
    global _WITNESS_SIGNATURE
    if _WITNESS_SIGNATURE is None:
        _WITNESS_SIGNATURE = PyCapsule_GetName(
            sys.modules[__name__].__pyx_capi__["signature_witness"])
    cdef bytes signature = PyCapsule_GetName(capsule)
    if signature != _WITNESS_SIGNATURE:
        raise ValueError(
            f"C function {name!r} of module {module_name!r} has the signature "
            f"{signature.decode()!r}, not {_WITNESS_SIGNATURE.decode()!r}; declare it "
            f"{declaration}"
        )
    return capsule


# What the kernels trust lives at C level, out of reach of a loaded pickle
# (a BUILD on this module object rewrites its Python globals, not these):
# the registry of split functions, the modules imported to fill it, the
# signature of a split function and the operators of a length expression.
cdef bytes _WITNESS_SIGNATURE = None
cdef dict _split_functions = {}
cdef tuple _BUILTIN_SPLIT_FUNCTION_MODULES = ("sktrellis._engine.potential._ginkgo",)
cdef dict _LENGTH_OPERATORS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow,
}
# A length expression is refused once a value passes this (a table of 2**64
# entries is far past any memory) or its text this many characters: the
# evaluation stays a few microseconds whatever it is given.
cdef object _LARGEST_LENGTH = 2**64
cdef Py_ssize_t _LONGEST_EXPRESSION = 200


def _table_lengths(table, expression):
    """The length of a declared table for every N = 1..30, from "2**n", "n + 1", 16...

    Evaluated here, once, by walking the parsed expression (never ``eval``):
    only integer literals, the name ``n`` and + - * // ** are allowed, and
    the walk stops at the first value past 2**64.
    """
    way_out = ("give it as an int or a string such as '2**n', '4**n' or 'n + 1' "
               "(integers, n, + - * // **)")
    if isinstance(expression, (int, np.integer)) and not isinstance(expression, bool):
        if not 0 <= expression <= _LARGEST_LENGTH:
            raise ValueError(
                f"the length of table {table!r} is {expression!r}; a length is at most 2**64")
        source = str(int(expression))
    elif isinstance(expression, str):
        if len(expression) > _LONGEST_EXPRESSION:
            raise ValueError(
                f"the length of table {table!r} is an expression of {len(expression)} "
                f"characters; at most {_LONGEST_EXPRESSION} are read; {way_out}")
        source = expression
    else:
        raise ValueError(f"the length of table {table!r} is {expression!r}; {way_out}")

    def length(node, n):
        if isinstance(node, ast.Constant) and type(node.value) is int:
            value = node.value
        elif isinstance(node, ast.Name) and node.id == "n":
            value = n
        elif isinstance(node, ast.BinOp) and type(node.op) in _LENGTH_OPERATORS:
            left, right = length(node.left, n), length(node.right, n)
            if isinstance(node.op, ast.Pow) and not 0 <= right <= 64:
                raise ValueError(f"exponent {right} out of range")
            if isinstance(node.op, ast.FloorDiv) and right == 0:
                raise ValueError("division by zero")
            # Both sides are at most 2**64 and an exponent at most 64: the
            # result has at most 4,096 bits, checked before going on.
            value = _LENGTH_OPERATORS[type(node.op)](left, right)
        else:
            raise ValueError(f"{ast.dump(node)} is not allowed")
        if abs(value) > _LARGEST_LENGTH:
            raise ValueError(f"a value passes 2**64 at n={n}")
        return value

    try:
        body = ast.parse(source.strip(), mode="eval").body
        lengths = tuple(length(body, n) for n in range(1, MAX_POINTS + 1))
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        raise ValueError(
            f"the length {expression!r} of table {table!r} is not an expression in n "
            f"({error}); {way_out}"
        ) from None
    if min(lengths) < 1:
        n = lengths.index(min(lengths)) + 1
        raise ValueError(
            f"the length {expression!r} of table {table!r} is {lengths[n - 1]} at n={n}; "
            f"a table the function reads has at least one entry for every n in 1..."
            f"{MAX_POINTS}"
        )
    return lengths


@cython.auto_pickle(False)
@cython.final
cdef class SplitFunction:
    """SplitFunction(module, name, tables, n_params)
--

A C split function and what it reads: an immutable declaration.

    What :func:`register_split_function` records. Nothing can change one
    once built (its attributes are read-only, it has no ``__dict__`` and it
    is never pickled), and the registry that :meth:`SplitPotential.from_cython`
    reads is private to this module: a declaration is looked up there,
    never handed out, so no object a caller or a loaded pickle gets can
    change what a kernel is told to read.

    Parameters
    ----------
    module : module or str
        The compiled module exporting the function; it must be imported.
    name : str
        Name of the ``cdef api`` function in the module.
    tables : dict of str to str or int
        The tables it reads, in the order of ``data.tables``, with their
        lengths as given (e.g. ``"2**n"``).
    n_params : int
        How many entries of ``data.params`` it reads.

    Attributes
    ----------
    module, name : str
    table_lengths : mapping of str to str or int
        Read-only.
    n_params : int

    Examples
    --------
    >>> from sktrellis._engine.potential._split_potential import SplitFunction
    >>> ginkgo = SplitFunction("sktrellis._engine.potential._ginkgo", "ginkgo_log_psi",
    ...                        {"mass2": "2**n", "sqrt_mass2": "2**n"}, 5)
    >>> ginkgo.length("mass2", 3)
    8
    """
    cdef readonly str module
    cdef readonly str name
    cdef readonly object table_lengths
    cdef readonly int n_params
    cdef object capsule
    cdef object lengths

    def __init__(self, module, name, tables, n_params):
        module_name = module if isinstance(module, str) else getattr(module, "__name__", None)
        if not isinstance(module_name, str):
            raise ValueError(f"module must be a module or its name, got {module!r}")
        loaded = sys.modules.get(module_name)
        if loaded is None:
            raise ValueError(
                f"module {module_name!r} is not imported; a module registers its split "
                "functions itself, at import: register_split_function(__name__, ...)"
            )
        if not isinstance(name, str):
            raise ValueError(f"name must be the function's name as a str, got {name!r}")
        if not isinstance(tables, Mapping):
            raise ValueError(
                f"tables must be a dict of table name to length (e.g. {{'mass2': '2**n'}}), "
                f"got {type(tables).__name__}"
            )
        tables = dict(tables)
        if not all(isinstance(table, str) for table in tables):
            raise ValueError(f"table names must be str, got {list(tables)!r}")
        if (isinstance(n_params, bool) or not isinstance(n_params, (int, np.integer))
                or not 0 <= n_params <= 2**20):
            raise ValueError(f"n_params must be a non-negative int, got {n_params!r}")
        self.module = module_name
        self.name = name
        self.table_lengths = MappingProxyType(tables)
        self.n_params = int(n_params)
        self.lengths = MappingProxyType({table: _table_lengths(table, expression)
                                         for table, expression in tables.items()})
        self.capsule = _split_function_capsule(loaded, name)

    def length(self, table, n_points):
        """Number of entries of `table` at N = n_points.

        Parameters
        ----------
        table : str
            A declared table.
        n_points : int
            N, 1 to 30.

        Returns
        -------
        length : int
        """
        return self.lengths[table][n_points - 1]

    def declaration(self):
        """The declaration as text, for messages.

        Returns
        -------
        text : str
        """
        return f"tables={dict(self.table_lengths)!r}, n_params={self.n_params}"

    def __reduce__(self):
        raise TypeError(
            "a SplitFunction is not pickled: a SplitPotential pickles the module and "
            "function names, and loading it looks the declaration up in the registry")

    def __repr__(self):
        return f"SplitFunction({self.module!r}, {self.name!r}, {self.declaration()})"


def register_split_function(module, name, *, tables, n_params):
    """Declare a C split function and what it reads, so ``from_cython`` may call it.

    A compiled module calls this at import, next to the function it
    declares: the tables the function reads (names in the order of
    ``data.tables``, lengths in terms of ``n``, the number of points) and
    how many parameters of ``data.params`` it reads.
    :meth:`SplitPotential.from_cython` (and loading a pickled potential)
    then checks the tables and parameters it is given against this
    declaration before any kernel calls the function, and finds the
    function only here: it never imports a module by name. A declaration
    cannot be changed once made, and the registry holding it is not
    reachable from Python, so nothing loaded later can rewrite it.

    Parameters
    ----------
    module : module or str
        The compiled module exporting the function (``__name__`` inside the
        module itself); it must already be imported.
    name : str
        Name of the ``cdef api`` function in the module.
    tables : dict of str to str or int
        The tables the function reads, in order, each with its length: an
        int, or an expression in ``n`` such as ``"2**n"`` (one entry per
        subset), ``"4**n"`` or ``"n + 1"`` (integers, ``n``, ``+ - * // **``,
        at most 200 characters, no value past 2**64).
    n_params : int
        Number of scalar parameters the function reads.

    Returns
    -------
    None
        Registering the same declaration again is allowed (a module
        reload); a different one is refused with a ValueError.

    See Also
    --------
    SplitPotential.from_cython : The potential of a registered function.

    Examples
    --------
    In the user's Cython module, after the function (the name is imported
    from ``sktrellis.energies``)::

        register_split_function(__name__, "my_log_psi",
                                tables={"pair_sums": "2**n", "sizes": "2**n"},
                                n_params=1)
    """
    cdef SplitFunction function = SplitFunction(module, name, tables, n_params)
    cdef SplitFunction registered = _split_functions.get((function.module, function.name))
    if registered is not None and (dict(registered.table_lengths), registered.n_params) != (
            dict(function.table_lengths), function.n_params):
        raise ValueError(
            f"split function {function.name!r} of module {function.module!r} is already "
            f"registered with {registered.declaration()}; it cannot be declared again with "
            f"{function.declaration()}"
        )
    if registered is None:
        _split_functions[function.module, function.name] = function


cdef SplitFunction _registered_split_function(str module_name, str name):
    """The registered split function, or a ValueError saying how to register it.

    Only the package's own modules are imported here; any other module must
    have been imported, and so have registered its functions, beforehand.
    """
    function = _split_functions.get((module_name, name))
    if function is None and module_name in _BUILTIN_SPLIT_FUNCTION_MODULES:
        importlib.import_module(module_name)
        function = _split_functions.get((module_name, name))
    if function is not None:
        return function
    module = sys.modules.get(module_name)
    if module is None:
        raise ValueError(
            f"no split function {name!r} of module {module_name!r} is registered, and the "
            "module is not imported: import it first (importing it registers its split "
            "functions); SplitPotential never imports a module by name, so that loading a "
            "pickle runs no code it names"
        )
    _split_function_capsule(module, name)  # the clearer error of a wrong name or signature
    raise ValueError(
        f"split function {name!r} of module {module_name!r} does not declare what it "
        f"reads: call register_split_function(__name__, {name!r}, tables={{...}}, "
        "n_params=...) in the module, next to the function (see "
        "sktrellis.energies.register_split_function)"
    )


def _check_function_inputs(function, n_points, arrays, values):
    """The tables in declaration order and the parameters, as the function reads them."""
    if not isinstance(arrays, Mapping):
        raise ValueError(
            f"tables must be a dict of table name to array, with the names "
            f"{list(function.table_lengths)} that {function.name!r} declares; got "
            f"{type(arrays).__name__}"
        )
    declared = list(function.table_lengths)
    unknown = [table for table in arrays if table not in function.table_lengths]
    missing = [table for table in declared if table not in arrays]
    if unknown or missing:
        raise ValueError(
            f"split function {function.name!r} of module {function.module!r} reads the "
            f"tables {declared}; got {list(arrays)} (missing {missing}, unknown {unknown})"
        )
    ordered = {}
    for table in declared:
        ordered[table] = arrays[table]
        length = function.length(table, n_points)
        _check_table(ordered, table, None, allow_minus_inf=True)
        if ordered[table].shape[0] != length:
            raise ValueError(
                f"table {table!r} of split function {function.name!r} must have "
                f"{function.table_lengths[table]} = {length} entries at n_points={n_points}, "
                f"got {ordered[table].shape[0]}"
            )
    try:
        values = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(
            f"params must be a sequence of {function.n_params} floats for "
            f"{function.name!r}, got {values!r}"
        ) from None
    if values.ndim != 1 or values.shape[0] != function.n_params:
        raise ValueError(
            f"split function {function.name!r} of module {function.module!r} reads "
            f"{function.n_params} parameters; got params of shape {values.shape}"
        )
    if np.isnan(values).any():
        raise ValueError(f"SplitPotential parameters must not be NaN, got {values}")
    return ordered, values


def _check_masks(masks, argument, n_points):
    """Subset masks as int64, each in [1, 2**n_points), or a ValueError naming `argument`."""
    masks = np.asarray(masks)
    if masks.ndim != 1 or not (np.issubdtype(masks.dtype, np.integer) or masks.size == 0):
        raise ValueError(
            f"{argument} must be a 1-d array of integer subset masks, got dtype "
            f"{masks.dtype} and shape {masks.shape}"
        )
    if masks.size and masks.dtype == np.uint64 and masks.max() >= 1 << 63:
        index = int(np.argmax(masks >= 1 << 63))
    else:
        masks = masks.astype(np.int64)
        outside = (masks < 1) | (masks >= 1 << n_points)
        index = int(np.argmax(outside)) if outside.any() else -1
    if index >= 0:
        raise ValueError(
            f"{argument}[{index}]={int(masks[index])} is not a non-empty subset of the "
            f"n_points={n_points} points: masks are in [1, 2**{n_points}) = [1, "
            f"{1 << n_points})"
        )
    return masks


cdef class SplitPotential:
    # The first lines are the constructor's signature for inspect (help,
    # numpydoc): a compiled class has no other place to declare it.
    """SplitPotential(n_points, kind, arrays, params)
--

Per-subset tables from which the kernels evaluate any split in O(1).

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

    See Also
    --------
    sktrellis.energies.HierarchicalEnergy : Energies build one in ``split_potential(X)``.
    sktrellis.energies.SplitEnergy : A potential from a vectorised NumPy function.
    sktrellis.energies.register_split_function : Declare a C split function.

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
        cdef const index_t[::1] offsets
        cdef const mask_t[::1] ranks
        cdef Py_ssize_t k
        if not 1 <= n_points <= MAX_POINTS:
            raise ValueError(
                f"SplitPotential supports 1 to {MAX_POINTS} points, got "
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
            module_name, function_name = params.get("module"), params.get("function")
            if not (isinstance(module_name, str) and isinstance(function_name, str)):
                raise ValueError(
                    f"a function potential names its module and function as str, got "
                    f"module={module_name!r}, function={function_name!r}"
                )
            function = _registered_split_function(module_name, function_name)
            arrays, values = _check_function_inputs(
                function, n_points, arrays, params.get("values", ()))
            capsule = function.capsule
            self.tables.function = <split_log_psi_t>PyCapsule_GetPointer(
                capsule, PyCapsule_GetName(capsule))
            self.tables.data.n_points = n_points
            # One block each, freed with the object; the tables themselves
            # are the arrays kept in self.arrays, in the declared order.
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
            params = {"module": module_name, "function": function_name,
                      "values": tuple(values.tolist())}
        elif kind == TABLE:
            # Every length in closed form before the layout (4 GiB of ranks
            # at N = 30) is built: sum over k >= 2 of C(N, k) (2**(k-1) - 1).
            py_n = <object>n_points  # exact integers, not C doubles
            table_length = (3**py_n + 1) // 2 - 2**py_n
            for name, length in (("split_table", table_length),
                                 ("level_offset", n_points + 1),
                                 ("rank_in_level", n_subsets)):
                if np.shape(arrays.get(name)) != (length,):
                    raise ValueError(
                        f"SplitPotential table {name!r} must have shape ({length},) at "
                        f"n_points={n_points}, got {np.shape(arrays.get(name))}"
                    )
            view = _check_table(arrays, "split_table", table_length, allow_minus_inf=True)
            level_offset, rank_in_level, _ = split_table_layout(n_points)
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
            The term f(S) of every subset mask S; finite.
        child_term : array-like of shape (2**n_points,)
            The term g(X) of every subset mask X; finite.
        size_coef : array-like of shape (n_points + 1,)
            The coefficient c(k) of every subset size k; finite.

        Returns
        -------
        potential : SplitPotential
            The potential, its tables checked and stored as float64.
        """
        return cls(n_points, SEPARABLE, {
            "cluster_term": cluster_term, "child_term": child_term,
            "size_coef": size_coef}, {})

    @classmethod
    def from_cython(cls, int n_points, module, str name, tables, params=()):
        """Build ``log psi(S; A, B)`` from a C function of a compiled Cython module.

        The function is declared, with the types of the public contract
        ``sktrellis/energies/__init__.pxd``, and registered with what it
        reads (``sktrellis.energies.register_split_function``) in its
        module::

            from sktrellis.energies cimport SplitData, mask_t

            cdef api double name(const SplitData* data, mask_t parent,
                                 mask_t left) noexcept nogil:
                ...

            register_split_function(__name__, "name",
                                    tables={"t": "2**n"}, n_params=1)

        and returns log psi(parent; left, parent ^ left) for the canonical
        split (``left`` holds the lowest point of ``parent``): finite, or
        -inf for a forbidden split, never NaN or +inf. It may be called
        from several threads at once and only reads ``data``:
        ``data.tables[k]`` is the k-th declared table, ``data.params[j]``
        the j-th parameter, ``data.n_points`` is N. The tables and
        parameters given here are checked against the declaration (names,
        lengths at this N, number of parameters) before any kernel calls the
        function, so it never reads past them.

        Parameters
        ----------
        n_points : int
            Number of points N, 1 to 30.
        module : module or str
            The compiled module (or its name) exporting and registering the
            function; it must be imported already (nothing is imported by
            name). Named in a pickle, so the potential pickles; loading it
            needs the module imported (and so registered) first.
        name : str
            Name of the function in the module.
        tables : dict of str to array-like
            The float64 tables the function declares, by name; finite or
            -inf.
        params : sequence of float, default=()
            The scalar parameters the function reads, in order, as many as
            it declares; not NaN.

        Returns
        -------
        potential : SplitPotential
            The potential, its tables checked and stored as float64.
        """
        module_name = module if isinstance(module, str) else getattr(module, "__name__", None)
        if not isinstance(module_name, str):
            raise ValueError(f"module must be a module or its name, got {module!r}")
        if not isinstance(tables, Mapping):
            raise ValueError(
                f"tables must be a dict of table name to array (the names the function "
                f"declares with register_split_function), got {type(tables).__name__}"
            )
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
            The log psi of every canonical split, finite or -inf, in the layout
            of ``sktrellis._engine._subsets.split_table_layout(n_points)``.
        level_offset, rank_in_level : ndarray
            That layout (checked against it).

        Returns
        -------
        potential : SplitPotential
            The potential, its tables checked and stored as float64.
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
            The kind of potential.
        n_points : int
            Number of points N.
        bytes_per_subset : int, default=0
            A function potential's tables are its energy's: this many
            bytes per subset.

        Returns
        -------
        n_bytes : int
            Bytes of its tables.
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
        """Evaluate log psi of splits given as (parent, child) masks; either child may be given.

        Parameters
        ----------
        parents : array-like of int
            Parent subset masks.
        lefts : array-like of int
            One child of each parent: a non-empty proper submask of it.

        Returns
        -------
        log_psi : ndarray of float64
            The log potential of each split: finite, or -inf if forbidden.

        Raises
        ------
        ValueError
            If a mask is outside ``[1, 2**n_points)`` or a child is not a
            non-empty proper submask of its parent.
        """
        parents = _check_masks(parents, "parents", self.n_points)
        lefts = _check_masks(lefts, "lefts", self.n_points)
        if parents.shape != lefts.shape:
            raise ValueError(
                f"parents and lefts must have the same length, got {parents.shape[0]} "
                f"and {lefts.shape[0]}"
            )
        improper = ((lefts & ~parents) != 0) | (lefts == parents)
        if improper.any():
            index = int(np.argmax(improper))
            raise ValueError(
                f"lefts[{index}]={int(lefts[index])} is not a child of parents[{index}]="
                f"{int(parents[index])}: a child of a split is a non-empty proper submask "
                "of its parent (the other child is the rest)"
            )
        cdef const mask_t[::1] parent_view = parents.astype(np.uint32)
        cdef const mask_t[::1] left_view = lefts.astype(np.uint32)
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
