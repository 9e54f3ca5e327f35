# The C contract of a split potential, for energies written in Cython.
#
# The exact hierarchical trellis evaluates about 3**N / 2 splits. An energy
# whose log potential is O(1) per split from per-subset tables, but not of
# the separable form f(S) + c(|S|) (g(A) + g(B)), reaches the kernels as a
# C function of this signature, looked up by name in the user's compiled
# module (its __pyx_capi__, as scipy.LowLevelCallable.from_cython does):
#
#     from sktrellis.energies cimport SplitData, mask_t
#
#     cdef api double my_log_psi(const SplitData* data, mask_t parent,
#                                mask_t left) noexcept nogil:
#         ...
#
# and, in Python, SplitPotential.from_cython(n_points, module, "my_log_psi",
# tables, params). The kernels then call it once per split visited, from
# several threads at once, without the GIL:
#
# - subsets are N-bit masks, bit i set <=> point i in the subset;
# - `left` is the child holding the lowest point of `parent` (each
#   unordered split is visited once), the other child is parent ^ left;
# - the result is log psi(parent; left, parent ^ left): finite, or -inf for
#   a forbidden split; never NaN or +inf (nothing checks this in the hot
#   loops: a NaN silently corrupts log Z);
# - the function reads only `data`, which it must not write.
#
# Only types are declared here, so cimporting this file adds no run-time
# import.

from libc.stdint cimport uint32_t

# A subset of the N <= 30 points.
ctypedef uint32_t mask_t

ctypedef struct SplitData:
    # Number of points N.
    int n_points
    # tables[k] is the data of the k-th table given to from_cython, a
    # float64 array (usually of 2**N entries, indexed by subset mask).
    const double* const* tables
    # The scalar parameters given to from_cython, in order.
    const double* params

ctypedef double (*split_log_psi_t)(const SplitData* data, mask_t parent,
                                   mask_t left) noexcept nogil
