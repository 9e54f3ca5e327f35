"""Per-subset tables built with NumPy by doubling: O(2**N) memory and time.

Subset masks follow the package convention (bit i <=> point i). Entry
``table[mask]`` of every function here describes the subset ``mask``.
"""
import numpy as np


def subset_sums(values):
    """Sum of ``values[i]`` over the points i of every subset.

    The building block of vectorised energies: the sufficient statistics of
    every cluster (counts, sums of features or of squares) in one table,
    built by doubling in O(2**n_points) time and memory.

    Parameters
    ----------
    values : ndarray of shape (n_points,) or (n_points, d)
        One value (or one row of ``d`` values) per point.

    Returns
    -------
    table : ndarray of shape (2**n_points,) or (2**n_points, d)
        ``table[mask]`` is the sum of ``values[i]`` over the points i of the
        subset ``mask`` (bit i set); 0 for the empty subset.

    See Also
    --------
    subset_pair_sums : Sum of a pairwise weight over the pairs of every subset.
    subset_sizes : Number of points of every subset.
    ClusterEnergy : A flat energy whose potential may be built from these tables.

    Examples
    --------
    >>> from sktrellis.energies import subset_sums
    >>> subset_sums([1.0, 10.0]).tolist()  # subsets {}, {0}, {1}, {0, 1}
    [0.0, 1.0, 10.0, 11.0]
    """
    values = np.asarray(values, dtype=np.float64)
    n_points = values.shape[0]
    table = np.zeros((1 << n_points,) + values.shape[1:])
    for i in range(n_points):
        # Subsets whose highest point is i are those below 2**i plus point i.
        table[1 << i : 2 << i] = table[: 1 << i] + values[i]
    return table


def subset_pair_sums(weights):
    """Sum of ``weights[i, j]`` over the unordered pairs i < j inside every subset.

    The within-cluster similarity of every subset, as correlation clustering
    and Dasgupta's cost use it, built by doubling in O(2**n_points) time and
    memory.

    Parameters
    ----------
    weights : ndarray of shape (n_points, n_points)
        Symmetric; the diagonal is ignored.

    Returns
    -------
    table : ndarray of shape (2**n_points,)
        ``table[mask]`` is the sum of ``weights[i, j]`` over the pairs
        i < j of points of the subset ``mask``; 0 for subsets of fewer than
        two points.

    See Also
    --------
    subset_sums : Sum of per-point values over every subset.
    subset_sizes : Number of points of every subset.
    CorrelationClustering : The flat energy of within-cluster pair weights.

    Examples
    --------
    >>> import numpy as np
    >>> from sktrellis.energies import subset_pair_sums
    >>> weights = np.array([[0, 1.0, 2.0], [1.0, 0, 4.0], [2.0, 4.0, 0]])
    >>> subset_pair_sums(weights)[0b111], subset_pair_sums(weights)[0b101]
    (np.float64(7.0), np.float64(2.0))
    """
    weights = np.asarray(weights, dtype=np.float64)
    n_points = weights.shape[0]
    table = np.zeros(1 << n_points)
    for i in range(1, n_points):
        # Adding point i to a subset of {0..i-1} adds its weights to them.
        table[1 << i : 2 << i] = table[: 1 << i] + subset_sums(weights[i, :i])
    return table


def subset_sizes(n_points):
    """Number of points of every subset, as an int64 table of length 2**n_points.

    The population count of every subset mask, for energies that depend on
    cluster sizes (a Dirichlet-process prior, a per-cluster price).

    Parameters
    ----------
    n_points : int
        Number of points N; the table has one entry per subset of them.

    Returns
    -------
    table : ndarray of int64, shape (2**n_points,)
        ``table[mask]`` is the number of bits set in ``mask``.

    See Also
    --------
    subset_sums : Sum of per-point values over every subset.
    subset_pair_sums : Sum of a pairwise weight over the pairs of every subset.

    Examples
    --------
    >>> from sktrellis.energies import subset_sizes
    >>> subset_sizes(2).tolist()
    [0, 1, 1, 2]
    """
    sizes = np.zeros(1 << n_points, dtype=np.int64)
    for i in range(n_points):
        sizes[1 << i : 2 << i] = sizes[: 1 << i] + 1
    return sizes


def check_restored_arrays(owner, state, arrays):
    """Check arrays of an unpickled engine object: present, of their dtype, shape and layout.

    A model file may come from anywhere (``sktrellis.load``): an array of
    the wrong dtype, length or layout would be read past its end by a
    kernel. Every array must be a C-contiguous ndarray of its dtype and
    shape.

    Parameters
    ----------
    owner : str
        The class restored, for the message.
    state : dict
        Its pickled attributes.
    arrays : dict of str to (dtype, tuple, bool)
        Each array's dtype, its full shape and whether it may be None.

    Returns
    -------
    None
    """
    for name, (dtype, shape, optional) in arrays.items():
        array = state.get(name)
        if array is None and optional:
            continue
        if not (isinstance(array, np.ndarray) and array.dtype == dtype
                and array.shape == shape and array.flags.c_contiguous):
            raise ValueError(
                f"a pickled {owner} has a table {name!r} of "
                f"{getattr(array, 'dtype', type(array).__name__)} "
                f"{getattr(array, 'shape', '')}; it needs {np.dtype(dtype)} of shape "
                f"{shape}: the file is damaged or was not written by sktrellis"
            )


def check_restored_tables(owner, state, n_points, tables):
    """Check the per-subset tables of an unpickled engine object before a kernel reads them.

    Every table must be a C-contiguous array of its dtype with ``2**n_points``
    rows (:func:`check_restored_arrays`); the object's thread count must be
    sane.

    Parameters
    ----------
    owner : str
        The class restored, for the message.
    state : dict
        Its pickled attributes.
    n_points : int
        N, 1 to 30.
    tables : dict of str to (dtype, tuple, bool)
        Each table's dtype, the shape of a row (``()`` for a scalar per
        subset) and whether it may be None.

    Returns
    -------
    None
    """
    if not (isinstance(n_points, int) and 1 <= n_points <= 30):
        raise ValueError(f"a pickled {owner} has n_points={n_points!r}; 1 to 30 are possible")
    check_restored_arrays(owner, state, {
        name: (dtype, (1 << n_points, *row), optional)
        for name, (dtype, row, optional) in tables.items()})
    n_threads = state.get("n_threads")
    if not (isinstance(n_threads, int) and 1 <= n_threads <= 4096):
        raise ValueError(f"a pickled {owner} has n_threads={n_threads!r}")
