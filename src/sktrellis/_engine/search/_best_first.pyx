"""Best-first AND/OR search (AO*) for the minimum-cost tree over up to 64 points.

Clusters live in a hash map keyed by their 64-bit mask; nothing is sized
by 2**N. Each iteration walks from the root along the splits of smallest
lower bound (``cost + lower(A) + lower(B)``) to a cluster whose next
ungenerated split could be the best, generates that one split, and revises
the bounds of the clusters on the path bottom-up. A cluster's lower bound
is the smallest over its generated splits and its generator's next key, so
it stays admissible; bounds of clusters off the path are revised when the
walk next passes them (they can only be too low, never too high). A
cluster is solved when its lower bound meets the cost of its best known
subtree; the search ends when the root is solved, or at a budget with the
certified gap between the two.

The splits of a cluster come from a lazy generator: a best-first search
over partial assignments of the cluster's points (in the order the bound
chooses; the first always on side A) to the sides A and B, keyed by the
bound's lower bound on every split completing the assignment
(``_search_bounds.pxd``). The key never decreases along an assignment, so
splits leave the generator in order of their bound and its smallest open
key bounds every split not yet generated. With a bound that sees the
assignment (Dasgupta, correlation clustering) the 2**(|S| - 1) splits of a
large cluster are never all held; with one blind to it (Ginkgo) every
partial key is the same and a generator holds all its complete splits
before the first leaves it.

Costs are ``-log psi``; everything runs without the GIL, and a call of
``BestFirstSearch.run`` returns within about ``seconds`` so that the
Python driver can report progress, check its budget and let Ctrl-C in.
"""
from cython.operator cimport dereference as deref
from libc.math cimport INFINITY, fabs, isfinite
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcpy, memset
from libcpp.algorithm cimport pop_heap, push_heap
from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

import numpy as np

from ._search_bounds cimport MAX_SEARCH_POINTS, SearchBound


#: Most points a search takes: clusters are keyed by 64-bit masks.
MAX_POINTS = MAX_SEARCH_POINTS


cdef inline double now_seconds() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + 1e-9 * ts.tv_nsec


cdef inline double tolerance(double value) noexcept nogil:
    """Slack for float sums: a bound within this of a cost counts as meeting it."""
    if not isfinite(value):
        return 0.0
    return 1e-9 * max(1.0, fabs(value))


cdef inline int members_of(uint64_t mask, int* members) noexcept nogil:
    """The sorted points of ``mask``; returns their number."""
    cdef int m = 0, i = 0
    while mask:
        if mask & 1:
            members[m] = i
            m += 1
        mask >>= 1
        i += 1
    return m


cdef inline uint64_t side_a_mask(const int* members, int m, uint64_t sides) noexcept nogil:
    cdef uint64_t mask = 0
    cdef int k
    for k in range(m):
        if not (sides >> k) & 1:
            mask |= (<uint64_t>1) << members[k]
    return mask


###############################################################################
# Lazy split generation

# Partial states one generator call may pop before handing back control, so
# a single expansion never outlasts the driver's time slice by much.
cdef enum:
    MAX_POPS = 4096

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
    vector[PartialState] heap
    # A state with r points still unassigned keeps pen_A and pen_B of just
    # those points, 2 r doubles in pool r (only they are read again), so a
    # deep state costs little; a bound blind to the assignment (scale 0)
    # keeps none.
    bint keeps_penalties
    vector[vector[double]] pool
    vector[vector[int]] free_slots
    # The search's clusters and their lower bounds, for the complete-split
    # keys of a refining bound (NULL outside a search).
    unordered_map[uint64_t, int]* known_clusters
    const vector[double]* known_lower


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
    size[0] = size[1] = 0
    mask[0] = mask[1] = 0
    for k in range(g.m):
        side = (sides >> k) & 1
        part[side][size[side]] = g.members[k]
        size[side] += 1
        mask[side] |= (<uint64_t>1) << g.members[k]
    for side in range(2):
        if g.known_clusters != NULL:
            found = g.known_clusters.find(mask[side])
            if found != g.known_clusters.end():
                key += g.known_lower[0][deref(found).second]
                continue
        key += bound.lower_(part[side], size[side])
    return key


cdef int push_state(Generator* g, SearchBound bound, int n_assigned, uint64_t sides,
                    double assigned, const double* pen_a, const double* pen_b,
                    double threshold) except -1 nogil:
    """Store a partial state, unless its key reaches ``threshold``.

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
    g.keeps_penalties = bound.scale != 0.0
    g.pool.resize(g.m + 1)
    g.free_slots.resize(g.m + 1)
    memset(pen_a, 0, g.m * sizeof(double))
    memset(pen_b, 0, g.m * sizeof(double))
    bound.increments_(g.members, g.m, 0, 0, 0, pen_a, pen_b)
    push_state(g, bound, 1, 0, 0.0, pen_a, pen_b, ceiling - tolerance(ceiling))
    return 0


cdef inline double next_key(const Generator* g) noexcept nogil:
    return g.heap[0].key if not g.heap.empty() else INFINITY


cdef int pop_split(Generator* g, SearchBound bound, double ceiling, uint64_t* sides_out) except -1 nogil:
    """Find the next split with key below ``ceiling``: 1 (in ``sides_out``) or 0.

    0 also after MAX_POPS partial states without a complete split; the
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
    for pops in range(MAX_POPS):
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
            push_state(g, bound, n_assigned + 1, new_sides, paid, new_a, new_b, threshold)
    return 0


cdef size_t release_generator(Generator* g) noexcept nogil:
    """Free a generator's states; returns how many were open."""
    cdef size_t n_open = g.heap.size()
    vector[PartialState]().swap(g.heap)
    vector[vector[double]]().swap(g.pool)
    vector[vector[int]]().swap(g.free_slots)
    return n_open


cdef class SplitGenerator:
    """The splits of one cluster, one at a time in order of their bound (for tests).

    Parameters
    ----------
    bound : SearchBound
    members : array-like of int
        The cluster's points, sorted, at most 64 (the generator assigns
        them in the bound's order).
    """

    # A one-element vector, so that the generator's C++ members are
    # constructed and destroyed with the object.
    cdef vector[Generator] g
    cdef SearchBound bound

    def __init__(self, SearchBound bound, members):
        cdef uint64_t mask = 0
        for i in members:
            mask |= (<uint64_t>1) << int(i)
        self.bound = bound
        self.g.resize(1)
        start_generator(&self.g[0], bound, mask, INFINITY, NULL, NULL)

    @property
    def next_key(self):
        """A lower bound on the key of every split not generated yet."""
        return next_key(&self.g[0])

    @property
    def n_open(self):
        """Open partial states."""
        return self.g[0].heap.size()

    def pop_split(self, double ceiling=INFINITY):
        """The next split (boolean ``in_a`` over the members) below ``ceiling``, or None."""
        cdef uint64_t sides, a
        cdef int k
        if not pop_split(&self.g[0], self.bound, ceiling, &sides):
            return None
        a = side_a_mask(self.g[0].members, self.g[0].m, sides)
        # In the order of the sorted members, the lowest on side A.
        in_a = np.array(sorted(self.g[0].members[k] for k in range(self.g[0].m)))
        in_a = np.array([bool(a >> int(i) & 1) for i in in_a])
        return in_a if in_a[0] else ~in_a


###############################################################################
# AND/OR best-first search

cdef struct Split:
    double cost
    int a, b          # cluster ids of the two sides, a holding the lower point

cdef struct SplitKey:
    double key        # cost + lower(A) + lower(B), as last computed
    int index         # into the cluster's splits


cdef bint larger_key(const SplitKey& x, const SplitKey& y) noexcept nogil:
    return y.key < x.key


cdef enum:
    # Reasons ``run`` returns.
    SOLVED = 0
    SLICE_OVER = 1
    STATE_CAP = 2


cdef class BestFirstSearch:
    """AO*-style best-first search for the minimum-cost tree over N <= 64 points.

    Not thread-safe: ``run`` changes the search without the GIL, so one
    object must not be run from two threads at once.

    Parameters
    ----------
    bound : SearchBound
        The energy's admissible bound.
    n_points : int
        Number of points, 1 to 64.

    Attributes
    ----------
    n_states : int
        Clusters plus open partial states of the split generators: what the
        memory cap counts.
    n_clusters, n_expanded, n_splits, n_iterations : int
    """

    cdef SearchBound bound
    cdef readonly int n_points
    cdef unordered_map[uint64_t, int] index
    # One entry per cluster id.
    cdef vector[uint64_t] mask
    cdef vector[int] size
    cdef vector[double] lower_bound, upper_bound
    cdef vector[int] best          # index into splits[id] of the best subtree's split, or -1
    cdef vector[int] generator     # index into generators, or -1
    cdef vector[char] solved_flag
    cdef vector[uint64_t] seed     # mask A of the incumbent's split, generated again later
    cdef vector[vector[Split]] splits
    cdef vector[vector[SplitKey]] split_heap   # the open splits, see ``revise``
    cdef vector[Generator] generators
    cdef vector[int] path, path_split
    cdef readonly int64_t n_states, n_expanded, n_splits, n_iterations
    cdef int root

    def __init__(self, SearchBound bound, int n_points):
        if not 1 <= n_points <= MAX_SEARCH_POINTS:
            raise ValueError(f"n_points must be 1 to {MAX_SEARCH_POINTS}, got {n_points}")
        self.bound = bound
        self.n_points = n_points
        self.root = self.cluster(((<uint64_t>1) << (n_points - 1) << 1) - 1)

    cdef int cluster(self, uint64_t mask) except -1 nogil:
        """The id of the cluster ``mask``, created with its bounds on first use."""
        cdef unordered_map[uint64_t, int].iterator found = self.index.find(mask)
        cdef int members[MAX_SEARCH_POINTS]
        cdef int node, m
        if found != self.index.end():
            return deref(found).second
        node = <int>self.mask.size()
        self.index[mask] = node
        m = members_of(mask, members)
        self.mask.push_back(mask)
        self.size.push_back(m)
        self.lower_bound.push_back(self.bound.lower_(members, m))
        self.upper_bound.push_back(INFINITY)
        self.best.push_back(-1)
        self.generator.push_back(-1)
        self.solved_flag.push_back(0)
        self.seed.push_back(0)
        self.splits.push_back(vector[Split]())
        self.split_heap.push_back(vector[SplitKey]())
        self.n_states += 1
        if m == 1:
            self.lower_bound[node] = 0.0
            self.upper_bound[node] = 0.0
            self.solved_flag[node] = 1
        elif m == 2 or m <= self.bound.exact_size:
            self.solve_exactly(node, members, m)
        return node

    cdef int solve_exactly(self, int node, const int* members, int m) except -1 nogil:
        """Solve a cluster by trying every split, its parts solved the same way.

        The parts are clusters of the map, so each subset is solved once
        however many clusters share it: the trellis recursion over the
        subsets of the small clusters the search reaches.
        """
        cdef uint64_t sides, a, full = self.mask[node]
        cdef Split split, best
        cdef double value, best_value = INFINITY
        best.a = best.b = -1
        best.cost = INFINITY
        # sides: bit k set <=> members[k] in B; members[0] stays in A.
        for sides in range(2, (<uint64_t>1) << m, 2):
            split.cost = self.bound.split_cost_(members, m, sides)
            if not split.cost < INFINITY:
                continue
            a = side_a_mask(members, m, sides)
            split.a = self.cluster(a)
            split.b = self.cluster(full ^ a)
            value = split.cost + self.upper_bound[split.a] + self.upper_bound[split.b]
            if value < best_value:
                best_value, best = value, split
        self.n_splits += ((<uint64_t>1) << (m - 1)) - 1
        self.lower_bound[node] = best_value
        self.upper_bound[node] = best_value
        if best.a >= 0:
            self.splits[node].push_back(best)
            self.best[node] = 0
        self.solved_flag[node] = 1
        return 0

    def add_tree(self, masks_a, masks_b):
        """Seed the upper bounds with a tree: the (A, B) masks of its splits, children first."""
        cdef uint64_t a, b, low
        cdef int members[MAX_SEARCH_POINTS]
        cdef int node, m, k
        cdef uint64_t sides
        cdef Split split
        for a_int, b_int in zip(masks_a, masks_b):
            a, b = a_int, b_int
            low = (a | b) & (~(a | b) + 1)
            if not a & low:
                a, b = b, a
            split.a = self.cluster(a)
            split.b = self.cluster(b)
            node = self.cluster(a | b)
            if self.solved_flag[node]:
                continue
            m = members_of(a | b, members)
            sides = 0
            for k in range(m):
                if b >> members[k] & 1:
                    sides |= (<uint64_t>1) << k
            split.cost = self.bound.split_cost_(members, m, sides)
            self.add_split(node, split)
            self.seed[node] = a
            self.revise(node, -1, NULL, NULL)

    cdef int add_split(self, int node, Split split) except -1 nogil:
        cdef SplitKey entry
        entry.index = <int>self.splits[node].size()
        entry.key = split.cost + self.lower_bound[split.a] + self.lower_bound[split.b]
        self.splits[node].push_back(split)
        self.split_heap[node].push_back(entry)
        push_heap(self.split_heap[node].begin(), self.split_heap[node].end(), larger_key)
        self.improve_upper(node, entry.index)
        return 0

    cdef inline void improve_upper(self, int node, int k) noexcept nogil:
        cdef Split* split = &self.splits[node][k]
        cdef double upper = split.cost + self.upper_bound[split.a] + self.upper_bound[split.b]
        if upper < self.upper_bound[node]:
            self.upper_bound[node] = upper
            self.best[node] = k

    cdef int revise(self, int node, int followed, double* follow_value,
                    double* next_out) except -2 nogil:
        """Revise the bounds of ``node``; return the split to follow (or -1).

        The splits sit in a heap keyed by ``cost + lower(A) + lower(B)`` as
        last computed. Lower bounds only rise, so a stale key is still a
        lower bound: refreshing the top until it is current finds the
        smallest without rescanning every split (the root of a Ginkgo search
        holds tens of thousands). The upper bound (a real tree's cost) is
        revised from each split refreshed and from ``followed``, the split
        the walk went down, whose parts' subtrees may have improved.
        """
        cdef vector[SplitKey]* heap = &self.split_heap[node]
        cdef int follow = -1
        cdef double best_value = INFINITY, value, lower, key
        cdef Split* split
        if followed >= 0:
            self.improve_upper(node, followed)
        while not heap.empty():
            follow = heap[0][0].index
            split = &self.splits[node][follow]
            value = split.cost + self.lower_bound[split.a] + self.lower_bound[split.b]
            self.improve_upper(node, follow)
            if value > heap[0][0].key:
                # Stale: take it out and put it back with its current key.
                pop_heap(heap.begin(), heap.end(), larger_key)
                heap[0][heap.size() - 1].key = value
                push_heap(heap.begin(), heap.end(), larger_key)
                continue
            # A key a hair too high (a part's lower bound snapped down to its
            # cost when it was solved) only needs lowering at the top.
            heap[0][0].key = value
            best_value = value
            break
        if self.generator[node] < 0:
            # Not expanded yet: its own bound stands for every split.
            key = self.lower_bound[node]
        else:
            key = next_key(&self.generators[self.generator[node]])
        lower = min(best_value, min(key, self.upper_bound[node]))
        if lower > self.lower_bound[node]:
            self.lower_bound[node] = lower
        if self.lower_bound[node] >= self.upper_bound[node] - tolerance(self.upper_bound[node]):
            self.lower_bound[node] = self.upper_bound[node]
            self.solved_flag[node] = 1
            if self.generator[node] >= 0:
                # Its open partial splits and the generator itself.
                self.n_states -= release_generator(&self.generators[self.generator[node]]) + 1
            vector[SplitKey]().swap(heap[0])
        if follow_value != NULL:
            follow_value[0] = best_value
            next_out[0] = key
        return follow

    cdef int expand(self, int node) except -1 nogil:
        """Generate the next split of ``node`` (and its two clusters)."""
        cdef Generator* g
        cdef uint64_t sides, a
        cdef Split split
        cdef int before, found
        if self.generator[node] < 0:
            self.generator[node] = <int>self.generators.size()
            self.generators.resize(self.generators.size() + 1)
            start_generator(&self.generators.back(), self.bound, self.mask[node],
                            self.upper_bound[node], &self.index, &self.lower_bound)
            self.n_expanded += 1
            self.n_states += 1
        g = &self.generators[self.generator[node]]
        while True:
            before = <int>g.heap.size()
            found = pop_split(g, self.bound, self.upper_bound[node], &sides)
            self.n_states += <int>g.heap.size() - before
            if not found:
                return 0
            a = side_a_mask(g.members, g.m, sides)
            if not a & self.mask[node] & (~self.mask[node] + 1):
                a ^= self.mask[node]
            if a == self.seed[node]:
                continue
            split.cost = self.bound.split_cost_(g.members, g.m, sides)
            # Creating clusters never moves the generators.
            split.a = self.cluster(a)
            split.b = self.cluster(self.mask[node] ^ a)
            self.add_split(node, split)
            self.n_splits += 1
            return 0

    cdef int step(self) except -1 nogil:
        """One walk from the root: generate one split and revise the path's bounds."""
        cdef int node = self.root, follow, a, b, k
        cdef double value, key
        self.path.clear()
        self.path_split.clear()
        while True:
            follow = self.revise(node, -1, &value, &key)
            if self.solved_flag[node]:
                break
            if key <= value:
                self.expand(node)
                self.revise(node, -1, NULL, NULL)
                break
            self.path.push_back(node)
            self.path_split.push_back(follow)
            a = self.splits[node][follow].a
            b = self.splits[node][follow].b
            # Both solved would make ``value`` a tree cost, hence the node solved.
            if self.solved_flag[a] or (not self.solved_flag[b] and self.size[b] > self.size[a]):
                node = b
            else:
                node = a
        for k in range(<int>self.path.size() - 1, -1, -1):
            self.revise(self.path[k], self.path_split[k], NULL, NULL)
        self.n_iterations += 1
        return 0

    def run(self, double seconds=INFINITY, int64_t max_states=-1):
        """Iterate until the root is solved, for about ``seconds``, or to the state cap.

        Returns "optimal", "slice" (``seconds`` used up) or "max_states"
        (``n_states`` reached ``max_states``, if not negative).
        """
        cdef int reason
        cdef double deadline
        with nogil:
            deadline = now_seconds() + seconds
            while True:
                if self.solved_flag[self.root]:
                    reason = SOLVED
                    break
                if max_states >= 0 and self.n_states >= max_states:
                    reason = STATE_CAP
                    break
                # The clock every walk: it costs tens of nanoseconds, a walk
                # microseconds to milliseconds (an exact solve of a cluster).
                if now_seconds() >= deadline:
                    reason = SLICE_OVER
                    break
                self.step()
        return ("optimal", "slice", "max_states")[reason]

    @property
    def solved(self):
        """Whether the root is solved (the best tree is proven optimal)."""
        return bool(self.solved_flag[self.root])

    @property
    def upper(self):
        """Cost of the best tree found (inf if none)."""
        return self.upper_bound[self.root]

    @property
    def lower(self):
        """Lower bound on the cost of every tree."""
        return self.lower_bound[self.root]

    @property
    def gap(self):
        """upper - lower, >= 0; 0 when proven optimal."""
        return max(0.0, self.upper_bound[self.root] - self.lower_bound[self.root])

    @property
    def n_clusters(self):
        """Clusters created (solved or not)."""
        return self.mask.size()

    def merges(self):
        """The best tree found as (merges, log potentials), children first."""
        if not isfinite(self.upper_bound[self.root]):
            raise ValueError("the search has found no tree of non-zero potential yet")
        merges, log_potentials = [], []
        self._build(self.root, merges, log_potentials)
        return np.array(merges, dtype=np.int64).reshape(-1, 2), np.array(log_potentials)

    def _build(self, int node, list merges, list log_potentials):
        cdef Split split
        if self.size[node] == 1:
            return int(self.mask[node]).bit_length() - 1
        split = self.splits[node][self.best[node]]
        left = self._build(split.a, merges, log_potentials)
        right = self._build(split.b, merges, log_potentials)
        merges.append((left, right))
        log_potentials.append(-split.cost)
        return self.n_points + len(merges) - 1
