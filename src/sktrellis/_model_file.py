"""Loading a pickled model without letting the file change anything else.

``pickle.load`` runs whatever a file names. An unpickler that admits whole
packages ("every name under ``sktrellis`` and ``numpy``") is not safe either:
a pickle may name any attribute of an admitted module
(``sktrellis._engine.resources`` imports ``os``, so ``os.system`` is reachable
as ``sktrellis._engine.resources``'s ``os.system``), take a module itself and
rewrite its globals with ``BUILD``, or call a module-level function that hands
out internal state. :func:`load` admits exactly the globals a model pickle
needs (:data:`PICKLE_GLOBALS`), calls only those, and never lets ``BUILD`` set
attributes on a class, module or function, so that loading a model file cannot
change what later code trusts.
"""
import os
import pickle
import struct
import types

#: The globals a pickle of a fitted sktrellis model needs, as "module.name":
#: the estimators, energies and engine objects a fitted model holds, and
#: NumPy's arrays, scalars and random generators (under both spellings of
#: NumPy's core module, ``numpy.core`` before 2.0 and ``numpy._core`` since).
PICKLE_GLOBALS = frozenset({
    # Estimators.
    "sktrellis._hierarchical.ExactHierarchicalClustering",
    "sktrellis._flat.ExactFlatClustering",
    "sktrellis._sparse.SparseTrellisClustering",
    "sktrellis._sparse_flat.SparseFlatClustering",
    "sktrellis._certified.CertifiedFlatClustering",
    "sktrellis._best_first.BestFirstHierarchicalClustering",
    "sktrellis.baselines._greedy.GreedyHierarchicalClustering",
    "sktrellis.baselines._beam.BeamSearchHierarchicalClustering",
    "sktrellis.baselines._bhc.bhc.BayesianHierarchicalClustering",
    "sktrellis.baselines._transitive_propagation.TransitivePropagation",
    "sktrellis.baselines._perturb_and_map.PerturbAndMAPClustering",
    "sktrellis._tree.Tree",
    # Energies and what a fitted model keeps of them.
    "sktrellis.energies._dasgupta.Dasgupta",
    "sktrellis.energies._dasgupta._DasguptaMergeModel",
    "sktrellis.energies._correlation.CorrelationClustering",
    "sktrellis.energies._correlation._CorrelationMergeModel",
    "sktrellis.energies._ginkgo.GinkgoLikelihood",
    "sktrellis.energies._ginkgo._GinkgoMergeModel",
    "sktrellis.energies._dpm.DirichletProcessMixture",
    "sktrellis.energies._dpm.ConjugateComponent",
    # The engine's posterior tables (checked by their constructors).
    "sktrellis._engine.potential._split_potential.SplitPotential",
    "sktrellis._engine.trellis.hierarchical_trellis.HierarchicalTrellis",
    "sktrellis._engine.trellis.flat_trellis.FlatTrellis",
    "sktrellis._engine.sparse.sparse_trellis.SparseTrellis",
    "sktrellis._engine.sparse.sparse_trellis.BaggedTrellis",
    "sktrellis._engine.sparse.sparse_flat.SparseFlatTrellis",
    # NumPy.
    "numpy.ndarray",
    "numpy.dtype",
    "numpy._core.multiarray._reconstruct",
    "numpy._core.multiarray.scalar",
    "numpy._core.numeric._frombuffer",
    "numpy.core.multiarray._reconstruct",
    "numpy.core.multiarray.scalar",
    "numpy.core.numeric._frombuffer",
    "numpy.random._pickle.__randomstate_ctor",
    "numpy.random._pickle.__generator_ctor",
    "numpy.random._pickle.__bit_generator_ctor",
    "numpy.random._mt19937.MT19937",
    "numpy.random._pcg64.PCG64",
    "numpy.random._pcg64.PCG64DXSM",
    "numpy.random._philox.Philox",
    "numpy.random._sfc64.SFC64",
})

# What BUILD must never set attributes on: a global the pickle named, or any
# class, module or function (their attributes are what later code trusts).
_SHARED_TYPES = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
                 types.MethodType, types.BuiltinMethodType)


class _ModelUnpickler(pickle._Unpickler):
    """The pure-Python unpickler, restricted: its opcode table can be checked per opcode."""

    def __init__(self, file, allowed):
        super().__init__(file)
        self._allowed = allowed
        # By identity: the objects find_class handed out, the only callables
        # a REDUCE, NEWOBJ or OBJ may call.
        self._globals = {}

    def find_class(self, module, name):
        qualified = f"{module}.{name}"
        # Exact names only: a dotted name would reach the attributes of the
        # object it starts from.
        if "." in name:
            raise pickle.UnpicklingError(
                f"{name!r} of {module} is an attribute path; a model pickle names "
                "classes and functions directly (sktrellis.PICKLE_GLOBALS)")
        if qualified not in self._allowed:
            raise pickle.UnpicklingError(
                f"{qualified} is not one of the globals a model pickle needs "
                "(sktrellis.PICKLE_GLOBALS); if this file holds an object you trust that "
                f"needs it, load it with sktrellis.load(file, trusted=[{qualified!r}])"
            )
        found = super().find_class(module, name)
        self._globals[id(found)] = found
        return found

    def _check_callable(self, function, opcode):
        if id(function) not in self._globals:
            raise pickle.UnpicklingError(
                f"{opcode} calls {type(function).__name__!r}, which is not a global of "
                "sktrellis.PICKLE_GLOBALS")

    def load_reduce(self):
        self._check_callable(self.stack[-2], "REDUCE")
        super().load_reduce()

    def load_newobj(self):
        self._check_callable(self.stack[-2], "NEWOBJ")
        super().load_newobj()

    def load_newobj_ex(self):
        self._check_callable(self.stack[-3], "NEWOBJ_EX")
        super().load_newobj_ex()

    def _instantiate(self, klass, args):
        # INST and OBJ (protocols 0 and 1) call the class through here.
        self._check_callable(klass, "OBJ")
        super()._instantiate(klass, args)

    def load_build(self):
        target = self.stack[-2]
        if id(target) in self._globals or isinstance(target, _SHARED_TYPES):
            raise pickle.UnpicklingError(
                f"BUILD would set attributes of {getattr(target, '__name__', target)!r}, a "
                "class, module or function shared by all later code; a model file only "
                "builds objects of its own")
        super().load_build()

    dispatch = dict(pickle._Unpickler.dispatch)
    dispatch[pickle.REDUCE[0]] = load_reduce
    dispatch[pickle.NEWOBJ[0]] = load_newobj
    dispatch[pickle.NEWOBJ_EX[0]] = load_newobj_ex
    dispatch[pickle.BUILD[0]] = load_build


def load(file, *, trusted=()):
    """Load a pickled sktrellis model, admitting only the globals a model needs.

    Use this instead of ``pickle.load`` for a model file you did not write
    yourself. Only the names of :data:`sktrellis.PICKLE_GLOBALS` (the
    package's estimators, energies and posterior tables, NumPy arrays,
    scalars and random generators) are looked up, only they are called,
    and no class, module or function is modified, so loading a file cannot
    run other code or change any state that later code relies on: a file
    naming anything else is refused with :class:`pickle.UnpicklingError`.
    The objects built are checked by their own constructors (a split
    potential's tables against their declaration, for instance).

    One estimator object is fitted by one thread at a time; a loaded model,
    like a fitted one, answers queries from any thread.

    Parameters
    ----------
    file : str, path-like or binary file object
        The pickle: a path, or a file opened for reading in binary mode.
    trusted : iterable of str, default=()
        Further globals, as ``"module.name"``, that you trust: those your own
        energy needs (e.g. the function of a ``SplitEnergy``). Only exact
        names; never a whole module.

    Returns
    -------
    model : object
        The unpickled model.

    Raises
    ------
    pickle.UnpicklingError
        If the file names a global outside the list, calls anything else,
        or would set attributes on a class, module or function.

    See Also
    --------
    PICKLE_GLOBALS : The globals admitted.

    Examples
    --------
    >>> import io, pickle
    >>> import numpy as np
    >>> import sktrellis
    >>> X = np.random.default_rng(0).normal(size=(6, 2))
    >>> model = sktrellis.ExactHierarchicalClustering().fit(X)
    >>> loaded = sktrellis.load(io.BytesIO(pickle.dumps(model)))
    >>> bool(loaded.log_partition_ == model.log_partition_)
    True
    """
    if isinstance(trusted, str):
        raise TypeError(f"trusted must be a list of 'module.name' strings, got {trusted!r}")
    trusted = list(trusted)
    if not all(isinstance(name, str) and "." in name for name in trusted):
        raise TypeError(f"trusted must be a list of 'module.name' strings, got {trusted!r}")
    allowed = PICKLE_GLOBALS | frozenset(trusted)
    if isinstance(file, (bytes, bytearray, memoryview)):
        raise TypeError("file must be a path or a binary file; for bytes, use io.BytesIO(data)")
    if isinstance(file, (str, os.PathLike)):
        with open(file, "rb") as opened:
            return _load(opened, allowed)
    return _load(file, allowed)


def _load(file, allowed):
    try:
        return _ModelUnpickler(file, allowed).load()
    except (struct.error, EOFError, UnicodeDecodeError, IndexError, KeyError) as error:
        # The pure-Python unpickler's own errors on a damaged stream.
        raise pickle.UnpicklingError(
            f"the file is not a whole, valid pickle ({type(error).__name__}: {error})"
        ) from None
    except SystemError as error:
        # A C extension's __setstate__ given a state it never wrote can fail
        # without saying why (NumPy's dtypes return NULL with no exception).
        raise pickle.UnpicklingError(
            f"the file holds a state that an object of the model refuses ({error})"
        ) from None
