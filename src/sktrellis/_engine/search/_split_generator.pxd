# The lazy split generator of one cluster (_split_generator.pyx): a
# best-first search over partial assignments of the cluster's points to the
# sides A and B, keyed by the bound's lower bound on every split completing
# the assignment.

from libc.math cimport INFINITY
from libc.stdint cimport int64_t, uint64_t
from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector

from ._search_bounds cimport MAX_SEARCH_POINTS, SearchBound


cdef struct PartialState:
    double key
    int64_t order      # ties go to the newest state: depth first
    uint64_t sides
    double assigned    # what the assigned points pay already
    int n_assigned
    int penalties      # slot of its penalties in the pool of its size, -1 none

cdef struct Generator:
    int m
    int members[MAX_SEARCH_POINTS]
    double base
    int64_t n_pushed
    # Complete splits whose key was computed (the bound of both parts): the
    # generator's work, reported live while a large cluster is enumerated.
    int64_t n_keys
    vector[PartialState] heap
    # A state with r points still unassigned keeps pen_A and pen_B of just
    # those points, 2 r doubles in pool r (only they are read again), so a
    # deep state costs little; a bound blind to the assignment (scale 0)
    # keeps none.
    bint keeps_penalties
    # Whether the bound's partial_key_ keys the partial states.
    bint sees_sides
    vector[vector[double]] pool
    vector[vector[int]] free_slots
    # The search's clusters and their lower bounds, for the complete-split
    # keys of a refining bound (NULL outside a search).
    unordered_map[uint64_t, int]* known_clusters
    const vector[double]* known_lower
    # By size classes (a bound blind to the assignment, with a bound per
    # size of the smaller side: ``SearchBound.size_classes_``): the classes
    # in order of their key, the one being enumerated (``current``), the
    # last of its sides enumerated (``cursor``, 0 before the first), and
    # the heap holds complete splits only.
    bint by_class
    int n_classes, current
    int class_size[MAX_SEARCH_POINTS]
    double class_key[MAX_SEARCH_POINTS]
    uint64_t cursor



cdef int start_generator(Generator* g, SearchBound bound, uint64_t mask, double ceiling,
                         unordered_map[uint64_t, int]* known_clusters,
                         const vector[double]* known_lower) except -1 nogil
cdef int pop_split(Generator* g, SearchBound bound, double ceiling,
                   uint64_t* sides_out) except -1 nogil
cdef size_t release_generator(Generator* g) noexcept nogil


cdef inline double next_key(const Generator* g) noexcept nogil:
    """A lower bound on the key of every split not generated yet."""
    cdef double key = g.heap[0].key if not g.heap.empty() else INFINITY
    if g.by_class and g.current < g.n_classes and g.class_key[g.current] < key:
        # The classes are in order of their key: the current one bounds
        # the splits of every class not enumerated yet.
        return g.class_key[g.current]
    return key
