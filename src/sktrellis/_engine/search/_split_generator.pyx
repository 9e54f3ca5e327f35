"""Lazy split generation: the splits of one cluster, one at a time in order of their bound.

A best-first search over partial assignments of the cluster's points (in
the order the bound chooses; the first always on side A) to the sides A and
B, keyed by the bound's lower bound on every split completing the
assignment (``_search_bounds.pxd``). The key never decreases along an
assignment, so splits leave the generator in order of their bound and its
smallest open key (``next_key``) bounds every split not yet generated.

A bound blind to the assignment (``scale`` 0) gives every partial state the
same key; where it bounds the splits by the size of their smaller side
(``size_classes_``), the generator enumerates them class by class in order
of those bounds instead (``start_classes``).
A bound that sees the sides otherwise (``sees_sides``) gives each partial
state its own ``partial_key_`` (at least its parent's key), and the
generator searches over partial assignments by those keys.
"""
from cython.operator cimport dereference as deref
from libc.math cimport INFINITY
from libc.stdint cimport uint64_t
from libc.string cimport memcpy, memset
from libcpp.algorithm cimport pop_heap, push_heap
from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector

from ._search_bounds cimport MAX_SEARCH_POINTS, SearchBound
from ._search_common cimport members_of, tolerance


# Partial states one generator call may pop before handing back control, so
# a single expansion never outlasts the driver's time slice by much.
cdef enum:
    MAX_POPS = 4096
    # With a bound that sees the sides each pop costs two sides' keys
    # (about 20 us at 30 points, 90 us at 60), so fewer pops a call keep
    # it within the same slice.
    MAX_SIDES_POPS = 512
    # Complete splits one call may evaluate by size classes (each costs the
    # bound of both parts: about 30 us for Ginkgo at 22 points, so a call
    # stays within tens of milliseconds).
    MAX_CLASS_SPLITS = 1024


# Whether blind bounds' generators enumerate by size classes
# (``use_size_classes``).
cdef bint size_classes_enabled = True


def use_size_classes(bint enabled):
    """Let blind bounds' generators go by size classes (True, the default) or not; the previous.

    Off, they search over partial assignments whose keys are all equal:
    every split is evaluated before the first leaves (kept for the
    benchmark that compares both).
    """
    global size_classes_enabled
    previous = size_classes_enabled
    size_classes_enabled = enabled
    return previous


# std heaps keep the "largest" entry on top; these comparators make it the
# entry to pop first.
cdef bint popped_later(const PartialState& x, const PartialState& y) noexcept nogil:
    # Smallest key first; ties to the newest state (depth first).
    return y.key < x.key or (y.key == x.key and y.order > x.order)


cdef int heap_push(vector[PartialState]& heap, PartialState state) except -1 nogil:
    heap.push_back(state)
    push_heap(heap.begin(), heap.end(), popped_later)
    return 0


cdef PartialState heap_pop(vector[PartialState]& heap) except * nogil:
    pop_heap(heap.begin(), heap.end(), popped_later)
    cdef PartialState top = heap.back()
    heap.pop_back()
    return top


cdef int store_penalties(Generator* g, int n_assigned, const double* pen_a,
                         const double* pen_b) except -2 nogil:
    """Keep pen_A, pen_B of the unassigned points; returns the slot (-1: nothing kept)."""
    cdef int r = g.m - n_assigned, slot
    if not g.keeps_penalties or r == 0:
        return -1
    if not g.free_slots[r].empty():
        slot = g.free_slots[r].back()
        g.free_slots[r].pop_back()
    else:
        slot = <int>(g.pool[r].size() // (2 * r))
        g.pool[r].resize(g.pool[r].size() + 2 * r)
    memcpy(&g.pool[r][<size_t>slot * 2 * r], &pen_a[n_assigned], r * sizeof(double))
    memcpy(&g.pool[r][<size_t>slot * 2 * r + r], &pen_b[n_assigned], r * sizeof(double))
    return slot


cdef int load_penalties(Generator* g, const PartialState* state, double* pen_a,
                        double* pen_b) except -1 nogil:
    """pen_A, pen_B of a popped state (zero where not kept); frees its slot."""
    cdef int r = g.m - state.n_assigned
    memset(pen_a, 0, g.m * sizeof(double))
    memset(pen_b, 0, g.m * sizeof(double))
    if state.penalties < 0:
        return 0
    memcpy(&pen_a[state.n_assigned], &g.pool[r][<size_t>state.penalties * 2 * r],
           r * sizeof(double))
    memcpy(&pen_b[state.n_assigned], &g.pool[r][<size_t>state.penalties * 2 * r + r],
           r * sizeof(double))
    g.free_slots[r].push_back(state.penalties)
    return 0


cdef double split_key(Generator* g, SearchBound bound, uint64_t sides) noexcept nogil:
    """split_cost + lower(A) + lower(B) of a complete split.

    A part the search knows already as a cluster brings its current lower
    bound (at least the bound's, exact once solved); the others the bound's.
    """
    cdef int part[2][MAX_SEARCH_POINTS]
    cdef int size[2]
    cdef uint64_t mask[2]
    cdef int k, side
    cdef double key = bound.split_cost_(g.members, g.m, sides)
    cdef unordered_map[uint64_t, int].iterator found
    g.n_keys += 1
    mask[0] = mask[1] = 0
    for k in range(g.m):
        mask[(sides >> k) & 1] |= (<uint64_t>1) << g.members[k]
    for side in range(2):
        # Sorted, whatever the bound's order of the members: a part's bound
        # is that of the sorted cluster, as the search computes it.
        size[side] = members_of(mask[side], part[side])
        if g.known_clusters != NULL:
            found = g.known_clusters.find(mask[side])
            if found != g.known_clusters.end():
                key += g.known_lower[0][deref(found).second]
                continue
        key += bound.lower_(part[side], size[side])
    return key


cdef int push_state(Generator* g, SearchBound bound, int n_assigned, uint64_t sides,
                    double assigned, const double* pen_a, const double* pen_b,
                    double threshold, double floor) except -1 nogil:
    """Store a partial state, unless its key reaches ``threshold``.

    Its key is at least ``floor``, the key of the state it extends (a bound
    that sees the sides, ``partial_key_``, gives each state a bound of its
    own: the larger holds, and keys never fall along an assignment).

    The threshold is a hair below the cost of a known tree over the cluster
    (it only falls): no split under such a state can do better, and the
    cluster's lower bound never exceeds that cost anyway, so the state need
    not take memory.
    """
    cdef int k
    cdef double free_part = 0.0
    cdef PartialState state
    for k in range(n_assigned, g.m):
        free_part += pen_a[k] if pen_a[k] < pen_b[k] else pen_b[k]
    state.key = g.base + bound.scale * (assigned + free_part)
    if floor > state.key:
        state.key = floor
    if g.sees_sides and n_assigned < g.m:
        state.key = max(state.key, bound.partial_key_(g.members, g.m, sides, n_assigned))
    if bound.refine and n_assigned == g.m and sides:
        state.key = max(state.key, split_key(g, bound, sides))
    if state.key >= threshold:
        return 0
    g.n_pushed += 1
    state.order = g.n_pushed
    state.sides = sides
    state.assigned = assigned
    state.n_assigned = n_assigned
    state.penalties = store_penalties(g, n_assigned, pen_a, pen_b)
    heap_push(g.heap, state)
    return 0


cdef int start_generator(Generator* g, SearchBound bound, uint64_t mask, double ceiling,
                         unordered_map[uint64_t, int]* known_clusters,
                         const vector[double]* known_lower) except -1 nogil:
    cdef double pen_a[MAX_SEARCH_POINTS]
    cdef double pen_b[MAX_SEARCH_POINTS]
    g.m = members_of(mask, g.members)
    g.known_clusters = known_clusters
    g.known_lower = known_lower
    bound.order_(g.members, g.m)
    g.base = bound.base_(g.members, g.m)
    g.n_pushed = 0
    g.n_keys = 0
    g.keeps_penalties = bound.scale != 0.0
    g.pool.resize(g.m + 1)
    g.free_slots.resize(g.m + 1)
    memset(pen_a, 0, g.m * sizeof(double))
    memset(pen_b, 0, g.m * sizeof(double))
    g.by_class = False
    g.n_classes = g.current = 0
    # Partial keys of their own where the bound sees the sides (and a
    # cluster of two has one split).
    g.sees_sides = bound.sees_sides and g.m >= 3
    if (size_classes_enabled and bound.scale == 0.0 and bound.refine and not g.sees_sides
            and bound.size_classes_(g.members, g.m, pen_a)):
        start_classes(g, pen_a)
        return 0
    bound.increments_(g.members, g.m, 0, 0, 0, pen_a, pen_b)
    push_state(g, bound, 1, 0, 0.0, pen_a, pen_b, ceiling - tolerance(ceiling), -INFINITY)
    return 0


cdef void start_classes(Generator* g, const double* keys) noexcept nogil:
    """Order the size classes p = 1..m // 2 by their key (at least the base).

    A bound blind to the assignment gives every partial state the same
    key, so the search over partial states would hand out no split
    before it had evaluated all 2**(m - 1) (at 25 points, minutes).
    Enumerated class by class in order of their key instead, a split
    leaves once no class left can hold a cheaper one, and the next key
    rises as classes are done (and every class at or above the ceiling
    is never enumerated).
    """
    cdef int p, z
    cdef double key
    g.by_class = True
    g.n_classes = 0
    g.current = 0
    g.cursor = 0
    for p in range(1, g.m // 2 + 1):
        key = keys[p] if keys[p] > g.base else g.base
        z = g.n_classes
        while z > 0 and g.class_key[z - 1] > key:
            g.class_key[z] = g.class_key[z - 1]
            g.class_size[z] = g.class_size[z - 1]
            z -= 1
        g.class_key[z] = key
        g.class_size[z] = p
        g.n_classes += 1


cdef bint next_side(Generator* g) noexcept nogil:
    """Advance ``cursor`` to the next set of the current class's size; False past the last.

    The sets of p of the m positions in increasing order (Gosper's
    hack); the split puts the set on side B, or its complement when the
    set holds position 0 (side A's by the contract). With p = m / 2 a set
    and its complement are one split: only sets without position 0.
    """
    cdef int p = g.class_size[g.current]
    cdef uint64_t x = g.cursor, low, ripple
    while True:
        if x == 0:
            x = ((<uint64_t>1) << p) - 1
        else:
            low = x & (~x + 1)
            ripple = x + low
            x = (((ripple ^ x) >> 2) // low) | ripple
        if x >> g.m:
            return False
        if 2 * p == g.m and x & 1:
            continue
        g.cursor = x
        return True


cdef int pop_class_split(Generator* g, SearchBound bound, double ceiling,
                         uint64_t* sides_out) except -1 nogil:
    """``pop_split`` by size classes (``start_classes``)."""
    cdef double threshold = ceiling - tolerance(ceiling), key
    cdef uint64_t full = ((<uint64_t>1) << (g.m - 1) << 1) - 1, sides
    cdef int evaluated = 0
    cdef PartialState state
    while True:
        while not g.heap.empty() and g.heap[0].key >= threshold:
            heap_pop(g.heap)
        if g.current < g.n_classes and g.class_key[g.current] >= threshold:
            # So is every class after it: none of their splits can do better.
            g.current = g.n_classes
        if not g.heap.empty() and (g.current == g.n_classes
                                   or g.heap[0].key <= g.class_key[g.current]):
            state = heap_pop(g.heap)
            sides_out[0] = state.sides
            return 1
        if g.current == g.n_classes or evaluated == MAX_CLASS_SPLITS:
            return 0
        if not next_side(g):
            g.current += 1
            g.cursor = 0
            continue
        evaluated += 1
        sides = g.cursor if not g.cursor & 1 else full ^ g.cursor
        key = split_key(g, bound, sides)
        if key < g.class_key[g.current]:
            key = g.class_key[g.current]
        if key >= threshold:
            continue
        g.n_pushed += 1
        state.key = key
        state.order = g.n_pushed
        state.sides = sides
        state.assigned = 0.0
        state.n_assigned = g.m
        state.penalties = -1
        heap_push(g.heap, state)


cdef int pop_split(Generator* g, SearchBound bound, double ceiling,
                   uint64_t* sides_out) except -1 nogil:
    """Find the next split with key below ``ceiling``: 1 (in ``sides_out``) or 0.

    0 also after MAX_POPS partial states (MAX_SIDES_POPS where the bound
    sees the sides) without a complete split; the
    heap keeps its place and its top key stays a valid bound. States whose
    key reaches ``ceiling`` (the cost of a known tree over the cluster)
    are dropped, when pushed or, if stored under a higher ceiling, popped:
    no split under them can do better.
    """
    cdef double pen_a[MAX_SEARCH_POINTS]
    cdef double pen_b[MAX_SEARCH_POINTS]
    cdef double new_a[MAX_SEARCH_POINTS]
    cdef double new_b[MAX_SEARCH_POINTS]
    cdef int m = g.m, side, n_assigned, pops
    cdef PartialState state
    cdef uint64_t new_sides
    cdef double threshold = ceiling - tolerance(ceiling), paid
    if g.by_class:
        return pop_class_split(g, bound, ceiling, sides_out)
    for pops in range(MAX_SIDES_POPS if g.sees_sides else MAX_POPS):
        if g.heap.empty():
            return 0
        state = heap_pop(g.heap)
        load_penalties(g, &state, pen_a, pen_b)
        if state.key >= threshold:
            continue
        n_assigned = state.n_assigned
        if n_assigned == m:
            if state.sides:
                sides_out[0] = state.sides
                return 1
            continue
        for side in range(2):
            new_sides = state.sides | ((<uint64_t>side) << n_assigned)
            paid = state.assigned + (pen_a[n_assigned] if side == 0 else pen_b[n_assigned])
            memcpy(new_a, pen_a, m * sizeof(double))
            memcpy(new_b, pen_b, m * sizeof(double))
            bound.increments_(g.members, m, new_sides, n_assigned, side, new_a, new_b)
            push_state(g, bound, n_assigned + 1, new_sides, paid, new_a, new_b, threshold,
                       state.key)
    return 0


cdef size_t release_generator(Generator* g) noexcept nogil:
    """Free a generator's states; returns how many were open."""
    cdef size_t n_open = g.heap.size()
    # No class is left to enumerate either.
    g.current = g.n_classes
    vector[PartialState]().swap(g.heap)
    vector[vector[double]]().swap(g.pool)
    vector[vector[int]]().swap(g.free_slots)
    return n_open
