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

The same graph bounds the partition function ``Z(S) = sum over trees of
prod psi`` of every cluster from both sides (E. Dechter and R. Dechter, "A
note on bounding the partition function by search"), see
``BestFirstSearch.log_partition_bounds``; with ``objective="log_partition"``
the walks go where that bracket is widest instead of along the best split.

Costs are ``-log psi``; everything runs without the GIL, and a call of
``BestFirstSearch.run`` returns within about ``seconds`` so that the
Python driver can report progress, check its budget and let Ctrl-C in.
"""
from cython.operator cimport dereference as deref
from libc.math cimport INFINITY, exp, fabs, isfinite, log, log1p
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcpy, memset
from libcpp.algorithm cimport pop_heap, push_heap, sort
from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

import numpy as np

from ._search_bounds cimport MAX_SEARCH_POINTS, SearchBound

from ..tree.conversion import masks_from_merges


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


cdef inline double log_add(double x, double y) noexcept nogil:
    """log(exp(x) + exp(y)), -inf absorbing."""
    if x < y:
        x, y = y, x
    if y == -INFINITY:
        return x
    return x + log1p(exp(y - x))


cdef inline double log_sub(double x, double y) noexcept nogil:
    """log(exp(x) - exp(y)) for y <= x (-inf when equal)."""
    if y >= x:
        return -INFINITY
    if y == -INFINITY:
        return x
    return x + log1p(-exp(y - x))


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


# Objectives of the walk.
cdef enum:
    MAP_OBJECTIVE = 0
    LOG_PARTITION_OBJECTIVE = 1

# Largest cluster solved exactly on creation (3**20 / 2 splits).
MAX_EXACT_SIZE = 20


cdef enum:
    # Reasons ``run`` returns.
    SOLVED = 0
    SLICE_OVER = 1
    STATE_CAP = 2


cdef class BestFirstSearch:
    """AO*-style best-first search for the minimum-cost tree over N <= 64 points.

    Not thread-safe: ``run`` changes the search without the GIL, so one
    object must not be run from two threads at once.

    Every cluster also carries a bracket ``z_low <= log Z(S) <= z_high`` on
    its partition function ``Z(S)``, the sum over the trees over S of the
    product of their split potentials (see ``log_partition_bounds``).

    Parameters
    ----------
    bound : SearchBound
        The energy's admissible bound.
    n_points : int
        Number of points, 1 to 64.
    objective : {"map", "log_partition"}, default="map"
        Where the walks go: along the split of least lower bound until the
        best tree is proven ("map"; splits that cannot beat the best known
        tree are never generated), or to the largest contribution to the
        width of the log Z bracket until the bracket closes
        ("log_partition"; no split is pruned).
    exact_size : int, default=-1
        Clusters of at most this many points (0 to 20) are solved exactly,
        for their best tree and their log Z, by the trellis recursion over
        their subsets when the search creates them; -1 takes the bound's
        ``exact_size``. Two points are always solved.

    Attributes
    ----------
    n_states : int
        Clusters plus open partial states of the split generators (plus,
        for "log_partition", the generated splits, about as large): what the
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
    # The partition-function bracket of each cluster (log space), whether it
    # is exact, the least cost of a tree under a split not generated yet as
    # last known (it only rises), and the number of trees under the
    # generated splits, sum of #trees(A) #trees(B).
    cdef vector[double] z_low, z_high, rest_key, generated_trees
    cdef vector[char] z_exact
    # #trees over k points, (2k - 3)!!, k = 0..64 (1e108 at most).
    cdef double trees[MAX_SEARCH_POINTS + 1]
    cdef int objective_
    cdef readonly int exact_size
    # Set when an allocation failed inside a walk: the clusters and splits
    # made before it are whole (a split is stored after its clusters, the
    # best tree is read through stored splits only), but the walk's own
    # cluster, split or generator may be half made, so the search neither
    # runs again nor revises its brackets; the root's bounds, from earlier
    # walks, still hold.
    cdef readonly bint out_of_memory

    def __init__(self, SearchBound bound, int n_points, objective="map", int exact_size=-1):
        cdef int k
        if not 1 <= n_points <= MAX_SEARCH_POINTS:
            raise ValueError(f"n_points must be 1 to {MAX_SEARCH_POINTS}, got {n_points}")
        if objective not in ("map", "log_partition"):
            raise ValueError(
                f"objective must be 'map' or 'log_partition', got objective={objective!r}")
        if not -1 <= exact_size <= MAX_EXACT_SIZE:
            raise ValueError(
                f"exact_size must be -1 (the bound's) or 0 to {MAX_EXACT_SIZE} (3**k / 2 "
                f"splits per cluster), got exact_size={exact_size}")
        self.bound = bound
        self.n_points = n_points
        self.objective_ = MAP_OBJECTIVE if objective == "map" else LOG_PARTITION_OBJECTIVE
        self.exact_size = bound.exact_size if exact_size < 0 else exact_size
        self.trees[0] = self.trees[1] = 1.0
        for k in range(2, MAX_SEARCH_POINTS + 1):
            self.trees[k] = self.trees[k - 1] * (2 * k - 3)
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
        self.z_low.push_back(-INFINITY)
        self.z_high.push_back(INFINITY)
        self.rest_key.push_back(-INFINITY)
        self.generated_trees.push_back(0.0)
        self.z_exact.push_back(0)
        self.n_states += 1
        if m == 1:
            self.lower_bound[node] = 0.0
            self.upper_bound[node] = 0.0
            self.solved_flag[node] = 1
            self.z_low[node] = self.z_high[node] = 0.0
            self.z_exact[node] = 1
        elif m <= self.enumerated_size():
            self.solve_exactly(node, members, m)
        else:
            # Unexpanded: every tree costs at least the lower bound (the
            # rest term with no split generated), and the bound may know
            # better (computed for the log Z walk only: it costs as much as
            # the lower bound).
            self.rest_key[node] = self.lower_bound[node]
            self.z_high[node] = self.rest_term(node)
            if self.objective_ == LOG_PARTITION_OBJECTIVE and self.bound.bounds_log_z:
                self.z_high[node] = min(self.z_high[node], self.bound.log_z_upper_(members, m))
        return node

    cdef inline int enumerated_size(self) noexcept nogil:
        """Clusters of at most this many points are solved by ``solve_exactly``."""
        return self.exact_size if self.exact_size > 2 else 2

    cdef int solve_exactly(self, int node, const int* members, int m) except -1 nogil:
        """Solve a cluster by trying every split, its parts solved the same way.

        The parts are clusters of the map, so each subset is solved once
        however many clusters share it: the trellis recursion over the
        subsets of the small clusters the search reaches, for the best tree
        (max) and for log Z (log-sum-exp) at once. A split of zero potential
        creates no cluster: no tree of non-zero potential holds its parts
        through it.
        """
        cdef uint64_t sides, a, full = self.mask[node]
        cdef Split split, best
        cdef double value, best_value = INFINITY, log_z = -INFINITY
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
            log_z = log_add(log_z, self.z_low[split.a] + self.z_low[split.b] - split.cost)
        self.n_splits += ((<uint64_t>1) << (m - 1)) - 1
        self.lower_bound[node] = best_value
        self.upper_bound[node] = best_value
        self.z_low[node] = self.z_high[node] = log_z
        self.z_exact[node] = 1
        if best.a >= 0:
            self.splits[node].push_back(best)
            self.best[node] = 0
        self.solved_flag[node] = 1
        return 0

    def add_tree(self, merges):
        """Seed the upper bounds with a tree, given by its merges.

        ``merges`` is (n_points - 1, 2), children first: row k joins nodes
        ``merges[k]`` into node ``n_points + k`` (points are nodes 0..N-1),
        as the agglomerative searches and ``merges_from_tree`` give them.
        """
        cdef uint64_t a, b, low
        cdef int members[MAX_SEARCH_POINTS]
        cdef int node, m, k
        cdef uint64_t sides
        cdef Split split
        masks = masks_from_merges(merges, self.n_points)
        masks_a = [masks[a] for a, _ in merges]
        masks_b = [masks[b] for _, b in merges]
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
        self.generated_trees[node] += self.trees[self.size[split.a]] * self.trees[self.size[split.b]]
        if self.objective_ == LOG_PARTITION_OBJECTIVE:
            # Nothing is pruned: the splits, not the open states, fill memory.
            self.n_states += 1
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
        if (not self.solved_flag[node]
                and self.lower_bound[node] >= self.upper_bound[node] - tolerance(self.upper_bound[node])):
            self.lower_bound[node] = self.upper_bound[node]
            self.solved_flag[node] = 1
            # The log Z walk still needs the splits of a cluster whose best
            # tree is known.
            if self.objective_ == MAP_OBJECTIVE:
                if self.generator[node] >= 0:
                    # Its open partial splits and the generator itself.
                    self.n_states -= release_generator(&self.generators[self.generator[node]]) + 1
                vector[SplitKey]().swap(heap[0])
        if follow_value != NULL:
            follow_value[0] = best_value
            next_out[0] = key
        return follow

    cdef inline double ceiling(self, int node) noexcept nogil:
        """Splits whose key reaches this are never generated (MAP only)."""
        return self.upper_bound[node] if self.objective_ == MAP_OBJECTIVE else INFINITY

    cdef int expand(self, int node) except -1 nogil:
        """Generate the next split of ``node`` (and its two clusters); 1 if one was."""
        cdef Generator* g
        cdef uint64_t sides, a
        cdef Split split
        cdef int before, found
        if self.generator[node] < 0:
            self.generator[node] = <int>self.generators.size()
            self.generators.resize(self.generators.size() + 1)
            start_generator(&self.generators.back(), self.bound, self.mask[node],
                            self.ceiling(node), &self.index, &self.lower_bound)
            self.n_expanded += 1
            self.n_states += 1
        g = &self.generators[self.generator[node]]
        while True:
            before = <int>g.heap.size()
            found = pop_split(g, self.bound, self.ceiling(node), &sides)
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
            return 1

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

    ###########################################################################
    # The partition function

    cdef double open_rest_key(self, int node) noexcept nogil:
        """A lower bound on the cost of every tree under a split not generated yet.

        Unexpanded: the cluster's lower bound, which holds for every tree
        over it. Expanded: the generator's smallest open key bounds
        ``cost + lower(A) + lower(B)`` of every split under its open states
        (keys never decrease along an assignment); in MAP mode the states
        dropped for reaching the cluster's ceiling had keys at least the
        ceiling then, and the ceiling only falls, so at least ``ceiling -
        tolerance`` now (``c - tolerance(c)`` increases with c). A cluster
        whose best tree is proven has every tree at least its cost.
        """
        cdef double key
        if self.generator[node] < 0:
            return self.lower_bound[node]
        key = next_key(&self.generators[self.generator[node]])
        if self.objective_ == MAP_OBJECTIVE:
            key = min(key, self.upper_bound[node] - tolerance(self.upper_bound[node]))
        return max(key, self.lower_bound[node])

    cdef inline double rest_term(self, int node) noexcept nogil:
        """log of an upper bound on the sum over the trees under ungenerated splits.

        Each such tree costs at least ``rest_key``, and there are
        ``#trees(S) - sum over the generated splits of #trees(A) #trees(B)``
        of them (every tree over S lies under exactly one split, and the
        split (A, B) carries #trees(A) #trees(B) trees). The count is
        rounded up by the float error of that sum, at most (|G| + 4) eps
        #trees(S) for |G| generated splits, and the key lowered by 64
        tolerances: a solved cluster's lower bound is raised to its cost
        when within one tolerance of it, and such raised bounds can nest
        once per level of the tree (64 at most) through the keys built from
        the parts' bounds.
        """
        cdef int m = self.size[node]
        cdef double count
        if self.rest_key[node] == INFINITY:
            return -INFINITY
        count = max(self.trees[m] - self.generated_trees[node], 0.0)
        count += (self.splits[node].size() + 4) * 2.3e-16 * self.trees[m]
        return log(count) - (self.rest_key[node] - 64 * tolerance(self.rest_key[node]))

    cdef int z_revise(self, int node) except -1 nogil:
        """Revise the log Z bracket of ``node`` from its splits' and parts' brackets.

        Lower: the sum over the generated splits of ``psi * Z_low(A) *
        Z_low(B)`` counts only trees of the explored graph, each once (the
        splits of S are distinct and the trees under one split are the
        products of the parts' trees); a known tree of cost ``upper``
        alone gives ``-upper``. Upper: the same sum with ``Z_high`` plus
        ``rest_term`` for the splits not generated yet. Parts' brackets
        only narrow, so the new bracket is intersected with the old one
        (which may hold the bound's own ``log_z_upper`` of the cluster).
        The bracket closes (exact) when no split is left and every part is
        exact: both sums then add the same numbers.
        """
        cdef Split* split
        cdef double low = -INFINITY, high = -INFINITY, rest
        cdef bint exact = True
        cdef size_t k
        if self.z_exact[node]:
            return 0
        for k in range(self.splits[node].size()):
            split = &self.splits[node][k]
            low = log_add(low, self.z_low[split.a] + self.z_low[split.b] - split.cost)
            high = log_add(high, self.z_high[split.a] + self.z_high[split.b] - split.cost)
            exact = exact and self.z_exact[split.a] and self.z_exact[split.b]
        self.rest_key[node] = max(self.rest_key[node], self.open_rest_key(node))
        rest = self.rest_term(node)
        if exact and rest == -INFINITY:
            self.z_low[node] = self.z_high[node] = low
            self.z_exact[node] = 1
            return 0
        high = log_add(high, rest)
        if isfinite(self.upper_bound[node]):
            low = max(low, -self.upper_bound[node])
        if low > self.z_low[node]:
            self.z_low[node] = low
        if high < self.z_high[node]:
            self.z_high[node] = high
        return 0

    cdef int z_refresh_all(self) except -1 nogil:
        """Revise every cluster's bracket, parts before the clusters they split."""
        cdef vector[vector[int]] by_size
        cdef int node, k
        by_size.resize(self.n_points + 1)
        for node in range(<int>self.mask.size()):
            by_size[self.size[node]].push_back(node)
        for k in range(self.n_points + 1):
            for node in by_size[k]:
                self.z_revise(node)
        return 0

    cdef int z_step(self) except -1 nogil:
        """One walk to the widest part of the log Z bracket, then revise the path.

        At each cluster the bracket's width ``Z_high - Z_low`` is the sum of
        the widths of its generated splits and of the ungenerated rest. The
        walk generates more splits where the rest is widest (one, or a
        quarter as many as it has, so that revising a cluster of many splits
        stays a small share of the work), and otherwise goes down the widest
        split into its part with the wider bracket.
        """
        cdef int node = self.root, choice, a, b, k, n_new
        cdef double widest, width
        cdef Split* split
        self.path.clear()
        self.path_split.clear()
        while not self.z_exact[node]:
            self.revise(node, -1, NULL, NULL)
            self.z_revise(node)
            if self.z_exact[node]:
                break
            widest = self.rest_term(node)
            choice = -1
            for k in range(<int>self.splits[node].size()):
                split = &self.splits[node][k]
                if self.z_exact[split.a] and self.z_exact[split.b]:
                    continue
                width = log_sub(self.z_high[split.a] + self.z_high[split.b] - split.cost,
                                self.z_low[split.a] + self.z_low[split.b] - split.cost)
                # A bracket narrower than rounding still needs its parts
                # closed before the cluster counts as exact.
                if width > widest or (choice < 0 and widest == -INFINITY):
                    widest, choice = width, k
            if choice < 0:
                n_new = 1 + <int>self.splits[node].size() // 4
                for k in range(n_new):
                    if not self.expand(node):
                        break
                self.revise(node, -1, NULL, NULL)
                self.z_revise(node)
                break
            self.path.push_back(node)
            self.path_split.push_back(choice)
            a = self.splits[node][choice].a
            b = self.splits[node][choice].b
            if self.z_exact[a] or (not self.z_exact[b] and self.z_high[b] - self.z_low[b]
                                   > self.z_high[a] - self.z_low[a]):
                node = b
            else:
                node = a
        for k in range(<int>self.path.size() - 1, -1, -1):
            self.revise(self.path[k], self.path_split[k], NULL, NULL)
            self.z_revise(self.path[k])
        self.n_iterations += 1
        return 0

    def log_partition_bounds(self):
        """(lower, upper) bounds on log Z, the log sum over every tree of its potential.

        Certified at any time (E. Dechter and R. Dechter, "A note on
        bounding the partition function by search"). By induction on the
        size of clusters, ``z_low(S) <= log Z(S) <= z_high(S)`` for every
        cluster S of the map: singletons have Z = 1; clusters solved by
        ``solve_exactly`` sum every split over exact parts; for the others,
        ``Z(S) = sum over the splits (A, B) of psi(A, B) Z(A) Z(B)``, and
        ``z_revise`` bounds the generated splits' terms by their parts'
        brackets (induction) and the ungenerated ones, from below by 0 and
        from above by ``rest_term`` (each tree under them costs at least
        ``rest_key``, and there are at most that many trees). Any single
        known tree also bounds Z from below. Every bracket is first revised
        from its parts, smallest clusters first.

        Returns
        -------
        lower, upper : float
            ``lower <= log Z <= upper``; equal when the search has summed
            every tree (``log_partition_solved``).
        """
        if not self.out_of_memory:
            self.z_refresh_all()
        return self.z_low[self.root], self.z_high[self.root]

    @property
    def root_log_partition_bracket(self):
        """The root's (lower, upper) as last revised: valid, cheap, maybe a little wide.

        ``log_partition_bounds`` first revises every cluster; this reads the
        root's bracket as the walks left it (brackets only narrow, so a
        stale one still holds).
        """
        return self.z_low[self.root], self.z_high[self.root]

    @property
    def log_partition_solved(self):
        """Whether log Z is known exactly (the bracket has closed)."""
        return bool(self.z_exact[self.root])

    @property
    def finished(self):
        """Whether the objective is reached: MAP proven, or log Z exact."""
        if self.objective_ == MAP_OBJECTIVE:
            return bool(self.solved_flag[self.root])
        return bool(self.z_exact[self.root])

    cdef double exact_with(self, uint64_t cluster, uint64_t target,
                           unordered_map[uint64_t, double]* memo) except? -2 nogil:
        """log of the sum over the trees over ``cluster`` that hold ``target`` as a node.

        For a cluster solved by ``solve_exactly`` (whose sub-clusters of
        non-zero potential are all in the map, with exact log Z), by the
        recursion: ``W(target) = Z(target)`` and, for target < X,
        ``W(X) = sum over the splits (A, B) of X with target <= A of psi(A,
        B) W(A) Z(B)`` (a tree over X holds the target iff the part that
        contains it does).
        """
        cdef unordered_map[uint64_t, double].iterator found
        cdef unordered_map[uint64_t, int].iterator part
        cdef int members[MAX_SEARCH_POINTS]
        cdef uint64_t rest, side_b, sides, full
        cdef int m, k
        cdef double total = -INFINITY, cost, with_a
        if cluster == target:
            part = self.index.find(target)
            return self.z_low[deref(part).second] if part != self.index.end() else -INFINITY
        found = memo.find(cluster)
        if found != memo.end():
            return deref(found).second
        m = members_of(cluster, members)
        full = ((<uint64_t>1) << (m - 1) << 1) - 1
        rest = cluster & ~target
        side_b = rest
        while side_b:
            sides = 0
            for k in range(m):
                if side_b >> members[k] & 1:
                    sides |= (<uint64_t>1) << k
            if sides & 1:
                sides ^= full
            cost = self.bound.split_cost_(members, m, sides)
            if cost < INFINITY:
                part = self.index.find(side_b)
                with_a = self.exact_with(cluster ^ side_b, target, memo)
                if part != self.index.end() and with_a > -INFINITY:
                    total = log_add(total, with_a + self.z_low[deref(part).second] - cost)
            side_b = (side_b - 1) & rest
        memo[0][cluster] = total
        return total

    cdef int with_bounds(self, int node, uint64_t target, double* low, double* high,
                         unordered_map[uint64_t, int]* seen, vector[double]* values,
                         unordered_map[uint64_t, double]* memo) except -1 nogil:
        """Bracket the log sum over the trees over ``node`` that hold ``target``."""
        cdef unordered_map[uint64_t, int].iterator found
        cdef Split* split
        cdef double part_low, part_high, total_low = -INFINITY, total_high = -INFINITY
        cdef uint64_t cluster = self.mask[node]
        cdef size_t k
        if cluster & target != target:
            low[0] = high[0] = -INFINITY
            return 0
        if cluster == target:
            low[0], high[0] = self.z_low[node], self.z_high[node]
            return 0
        found = seen.find(cluster)
        if found != seen.end():
            low[0] = values[0][2 * deref(found).second]
            high[0] = values[0][2 * deref(found).second + 1]
            return 0
        if self.size[node] <= self.enumerated_size():
            total_low = total_high = self.exact_with(cluster, target, memo)
        else:
            for k in range(self.splits[node].size()):
                split = &self.splits[node][k]
                if self.mask[split.a] & target == target:
                    self.with_bounds(split.a, target, &part_low, &part_high, seen, values, memo)
                    part_low += self.z_low[split.b]
                    part_high += self.z_high[split.b]
                elif self.mask[split.b] & target == target:
                    self.with_bounds(split.b, target, &part_low, &part_high, seen, values, memo)
                    part_low += self.z_low[split.a]
                    part_high += self.z_high[split.a]
                else:
                    continue
                total_low = log_add(total_low, part_low - split.cost)
                total_high = log_add(total_high, part_high - split.cost)
            # Trees under ungenerated splits may hold the target: all of them count.
            total_high = log_add(total_high, self.rest_term(node))
            total_low = max(total_low, -INFINITY)
            total_high = min(total_high, self.z_high[node])
        seen[0][cluster] = <int>(values.size() // 2)
        values.push_back(total_low)
        values.push_back(total_high)
        low[0], high[0] = total_low, total_high
        return 0

    def cluster_log_probability_bounds(self, uint64_t target):
        """(lower, upper) bounds on log P(target is a node of the tree), for Gibbs P.

        ``P(C) = W(root) / Z(root)`` with ``W(S)`` the sum over the trees
        over S that hold C. W is bracketed by induction like Z: ``W(C) =
        Z(C)``, ``W(S) = 0`` unless C <= S; for a cluster solved exactly, W
        is summed exactly (``exact_with``); otherwise the generated splits
        with C inside a part contribute ``psi * W(part) * Z(other part)``,
        bounded by the parts' brackets, and the ungenerated splits at most
        ``rest_term`` (every tree under them, holding C or not), and ``W(S)
        <= Z(S)``. Then ``W_low / Z_high <= P(C) <= W_high / Z_low``
        (capped at 1).

        Parameters
        ----------
        target : int
            The cluster's mask, at least one point.

        Returns
        -------
        lower, upper : float
            Bounds on the log probability (-inf lower when the explored
            graph has no tree holding the cluster yet).
        """
        cdef unordered_map[uint64_t, int] seen
        cdef vector[double] values
        cdef unordered_map[uint64_t, double] memo
        cdef double low, high
        if self.out_of_memory:
            # Nothing can be walked safely: the bounds every cluster has.
            return -INFINITY, 0.0
        self.z_refresh_all()
        with nogil:
            self.with_bounds(self.root, target, &low, &high, &seen, &values, &memo)
        return low - self.z_high[self.root], min(0.0, high - self.z_low[self.root])

    def run(self, double seconds=INFINITY, int64_t max_states=-1):
        """Iterate until the objective is reached, for about ``seconds``, or to the state cap.

        Returns "optimal" (MAP proven, or log Z exact), "slice" (``seconds``
        used up) or "max_states" (``n_states`` reached ``max_states``, if not
        negative).
        """
        cdef int reason
        cdef double deadline
        cdef bint by_map = self.objective_ == MAP_OBJECTIVE
        cdef Py_ssize_t k
        if self.out_of_memory:
            return "max_states"
        try:
            with nogil:
                deadline = now_seconds() + seconds
                while True:
                    if (self.solved_flag[self.root] if by_map else self.z_exact[self.root]):
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
                    if by_map:
                        self.step()
                    else:
                        self.z_step()
        except MemoryError:
            # std::bad_alloc in a walk: the memory cap, found the hard way.
            # The open partial splits (most of the memory) are never read
            # again: freed, so that the best tree can still be built.
            self.out_of_memory = True
            for k in range(<Py_ssize_t>self.generators.size()):
                release_generator(&self.generators[k])
            for k in range(<Py_ssize_t>self.split_heap.size()):
                vector[SplitKey]().swap(self.split_heap[k])
            reason = STATE_CAP
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
