# The C contract of a split potential, for energies written in Cython.
#
# The exact hierarchical trellis evaluates about 3**N / 2 splits. An energy
# whose log potential is O(1) per split from per-subset tables, but not of
# the separable form f(S) + c(|S|) (g(A) + g(B)), reaches the kernels as a
# C function of this signature, looked up by name in the user's compiled
# module (its __pyx_capi__, as scipy.LowLevelCallable.from_cython does):
#
#     from sktrellis.energies cimport SplitData, mask_t
#     from sktrellis.energies import register_split_function
#
#     cdef api double my_log_psi(const SplitData* data, mask_t parent,
#                                mask_t left) noexcept nogil:
#         ...
#
#     register_split_function(__name__, "my_log_psi",
#                             tables={"sums": "2**n", "sizes": "2**n"},
#                             n_params=1)
#
# The registration declares what the function reads: the tables, in the
# order of data.tables, with their lengths in terms of the number of
# points n ("2**n" for one entry per subset, "4**n", "n + 1", or an int),
# and how many data.params. SplitPotential.from_cython(n_points, module,
# "my_log_psi", tables, params) checks the tables (by name) and parameters
# it is given against it before any kernel calls the function, and finds
# the function only among registered ones (it imports no module by name, so
# loading a pickled potential runs no code the pickle names; import the
# module first). A function that is not registered is refused, with the
# line to add. The kernels then call it once per split visited, from
# several threads at once, without the GIL:
#
# - subsets are N-bit masks, bit i set <=> point i in the subset;
# - `left` is the child holding the lowest point of `parent` (each
#   unordered split is visited once), the other child is parent ^ left;
# - the result is log psi(parent; left, parent ^ left): finite, or -inf for
#   a forbidden split; never NaN or +inf (nothing checks this in the hot
#   loops: a NaN silently corrupts log Z);
# - the function reads only `data`, which it must not write, and no more
#   of it than it declares (no table entry past the declared length).
#
# Only types are declared here, so cimporting this file adds no run-time
# import.

from libc.stdint cimport uint32_t

# A subset of the N <= 30 points.
ctypedef uint32_t mask_t

ctypedef struct SplitData:
    # Number of points N.
    int n_points
    # tables[k] is the data of the k-th declared table, a float64 array of
    # its declared length at this N (usually 2**N entries, indexed by mask).
    const double* const* tables
    # The scalar parameters given to from_cython, as many as declared.
    const double* params

ctypedef double (*split_log_psi_t)(const SplitData* data, mask_t parent,
                                   mask_t left) noexcept nogil
