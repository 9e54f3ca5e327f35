# The split potential as the kernels see it: a struct of table pointers and
# an inline evaluation, shared by the trellis kernels that cimport it.
from sktrellis.energies cimport SplitData, split_log_psi_t

from .._common cimport extract_rank, index_t, low_bit, mask_t, popcount

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
    const index_t* level_offset      # TABLE: start of each level in split_table
    const mask_t* rank_in_level     # TABLE: rank of S among subsets of its size


cdef inline double split_log_potential(const SplitTables* t, mask_t parent,
                                        mask_t left) noexcept nogil:
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
                         + <index_t>t.rank_in_level[parent] * ((<index_t>1 << (size - 1)) - 1)
                         + extract_rank(left ^ low, parent ^ low)]


cdef class SplitPotential:
    cdef readonly int n_points
    cdef readonly int kind
    cdef readonly object arrays
    cdef readonly dict params
    cdef SplitTables tables

    cdef void _free_function_data(self) noexcept
