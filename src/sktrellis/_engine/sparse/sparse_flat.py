"""The sparse flat trellis: the flat DPs over the partitions a family of clusters spans.

A family F of clusters (sets of points) spans the partitions of all points
whose every cluster is in F; a cluster outside F has zero potential
(Greenberg et al. 2018, section 4). Over them the flat recursion of the
exact trellis still holds: with the points in a fixed order and low(S) the
first point of S in it,

    Z(S) = sum over C in F with low(S) in C, C subset of S of E(C) Z(S \\ C),

and Z(empty) = 1. Its *states* S are the sets left after removing the
clusters of a partition one at a time, first point first: all points, then
what a cluster of F leaves, and so on. The paper's closure under recursive
complement makes the states members of F; here they are found from the
family instead, so any family works, the cuts of a tree among them (with
the points in a depth-first order of the tree the states are its N
suffixes). A state is a Python int, bit p for the point at position p of
the order, so that low(S) is its lowest set bit.

Clusters are kept as sorted point arrays; ``solve`` orders the points,
explores the states (the Cython kernel of ``_sparse_flat.pyx``) and runs
the inside pass over them level by level (a state's successors are
smaller), vectorised in NumPy.
"""
import numpy as np
from scipy import sparse

from ..tables import check_restored_arrays
from ..tree.conversion import relabel_by_first_appearance
from . import _sparse_flat as kernels

class TooManyStates(Exception):
    """The family spans partitions through more than ``max_states`` states."""


def _segment_reduce(values, starts, n_segments):
    """Per-segment max, argmax (absolute index) and logsumexp of ``values``.

    ``starts`` are the first indices of n_segments non-empty consecutive
    segments covering ``values``.
    """
    maxima = np.maximum.reduceat(values, starts)
    segment = np.repeat(np.arange(n_segments), np.diff(np.append(starts, len(values))))
    shift = np.where(np.isfinite(maxima), maxima, 0.0)
    with np.errstate(under="ignore"):
        sums = np.add.reduceat(np.exp(values - shift[segment]), starts)
    with np.errstate(divide="ignore"):
        log_sums = np.log(sums) + shift
    # The first edge reaching the maximum: the lowest index among equals.
    is_max = values == maxima[segment]
    first = np.full(n_segments, len(values))
    np.minimum.at(first, segment[is_max], np.flatnonzero(is_max))
    return maxima, first, log_sums


class SparseFlatTrellis:
    """A family of clusters over n_points points and the DP tables of the partitions it spans.

    Parameters
    ----------
    n_points : int
    """

    def __init__(self, n_points):
        self.n_points = int(n_points)
        self.members = []          # sorted point arrays, one per cluster
        self.log_e = np.empty(0)   # log E of each cluster
        self._index = {}           # frozen member bytes -> cluster index
        self._log_outside = None

    @property
    def n_clusters(self):
        return len(self.members)

    @staticmethod
    def _key(members):
        return np.asarray(members, dtype=np.int64).tobytes()

    def new_clusters(self, clusters):
        """The distinct clusters among ``clusters`` (point arrays) not yet in the family."""
        fresh, seen = [], set()
        for cluster in clusters:
            # Point sets without repeats (checked where users give them).
            cluster = np.sort(np.asarray(cluster, dtype=np.int64))
            key = self._key(cluster)
            if cluster.size and key not in self._index and key not in seen:
                seen.add(key)
                fresh.append(cluster)
        return fresh

    def add(self, clusters, log_e):
        """Append new clusters (sorted point arrays, not yet in the family) and their log E."""
        for cluster in clusters:
            self._index[self._key(cluster)] = len(self.members)
            self.members.append(cluster)
        self.log_e = np.concatenate([self.log_e, np.asarray(log_e, dtype=np.float64)])

    def truncate(self, n_clusters):
        """Forget the clusters added after the first ``n_clusters``."""
        for cluster in self.members[n_clusters:]:
            del self._index[self._key(cluster)]
        del self.members[n_clusters:]
        self.log_e = self.log_e[:n_clusters]

    def cluster_index(self, members):
        """Index of the cluster with these points, -1 if not in the family."""
        return self._index.get(self._key(np.sort(np.asarray(members, dtype=np.int64))), -1)

    ###########################################################################
    # Inside pass

    def _bits(self, members, rank=None):
        """The state bits (positions in the order) of a set of points."""
        flags = np.zeros(self.n_points, dtype=np.uint8)
        flags[(self.rank if rank is None else rank)[members]] = 1
        return int.from_bytes(np.packbits(flags, bitorder="little").tobytes(), "little")

    def solve(self, order, max_states):
        """Explore the states with the points in ``order``, then run the inside pass.

        Clusters of log E = -inf are left out (no partition of non-zero
        potential uses them). Past ``max_states`` raises TooManyStates and
        leaves the tables of the last solve as they were, so that the
        clusters added since can be truncated away without solving again.
        """
        n_points = self.n_points
        order = np.asarray(order, dtype=np.int64)
        rank = np.empty(n_points, dtype=np.int64)
        rank[order] = np.arange(n_points)
        words, positions, first = self._words(rank)
        low = np.minimum.reduceat(positions, first)
        usable = np.flatnonzero(self.log_e > -np.inf)
        by_low = usable[np.argsort(low[usable], kind="stable")]
        # Zobrist keys of the positions, fixed so that fits are reproducible.
        keys = np.random.default_rng(0x5F1A7).integers(
            0, np.iinfo(np.uint64).max, size=n_points, dtype=np.uint64, endpoint=True)
        n_states, state_size, parents, clusters, children = kernels.explore(
            words, low >> 6, np.maximum.reduceat(positions, first) >> 6,
            np.bitwise_xor.reduceat(keys[positions], first),
            np.searchsorted(low[by_low], np.arange(n_points + 1)).astype(np.int64),
            by_low.astype(np.int64), keys, int(max_states),
        )
        if n_states < 0:
            raise TooManyStates(max_states)
        self.order, self.rank = order, rank
        self.words = words
        self._bits_cache = None
        self.state_size = state_size
        # Edges grouped by parent, parents by size: a level's successors are done.
        parents = np.array(parents, dtype=np.int64)
        order_edges = np.lexsort((np.arange(len(parents)), parents))
        self.edge_parent = parents[order_edges]
        self.edge_cluster = np.array(clusters, dtype=np.int64)[order_edges]
        self.edge_child = np.array(children, dtype=np.int64)[order_edges]
        self.edge_start = np.searchsorted(self.edge_parent, np.arange(n_states + 1))
        self._inside()
        self._log_outside = None

    def _words(self, rank):
        """Each cluster's state bits as a row of uint64 words, its positions and their starts."""
        sizes = np.array([len(m) for m in self.members], dtype=np.int64)
        first = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        positions = rank[np.concatenate(self.members)]
        rows = np.repeat(np.arange(len(sizes)), sizes)
        n_words = (self.n_points + 63) // 64
        # OR each cluster's bits into its words: group by (cluster, word), reduce.
        slots = rows * n_words + (positions >> 6)
        by_slot = np.argsort(slots, kind="stable")
        slots = slots[by_slot]
        starts = np.flatnonzero(np.diff(slots, prepend=-1))
        words = np.zeros(len(sizes) * n_words, dtype=np.uint64)
        words[slots[starts]] = np.bitwise_or.reduceat(
            np.left_shift(np.uint64(1), (positions[by_slot] & 63).astype(np.uint64)), starts)
        return words.reshape(len(sizes), n_words), positions, first

    def __setstate__(self, state):
        # A model file may be crafted: the family and the edges between states
        # are checked, and what follows from them (index, ranks, state bits,
        # the inside pass) is rebuilt, never read from the file.
        _check_restored_structure(state)
        self.__init__(state["n_points"])
        self.add(state["members"], state["log_e"])
        self.order = state["order"]
        self.rank = np.empty_like(self.order)
        self.rank[self.order] = np.arange(self.n_points)
        self.words = self._words(self.rank)[0]
        self._bits_cache = None
        for name in ("state_size", "edge_parent", "edge_cluster", "edge_child", "edge_start"):
            setattr(self, name, state[name])
        self._inside()

    @property
    def n_states(self):
        return len(self.state_size)

    @property
    def bits(self):
        """Each cluster's state bits as a Python int (under the last solve's order)."""
        if self._bits_cache is None:
            self._bits_cache = [int.from_bytes(row.tobytes(), "little") for row in self.words]
        return self._bits_cache

    @property
    def n_edges(self):
        return len(self.edge_parent)

    def _levels(self):
        """The states with at least one edge, by increasing size: arrays of state indices."""
        has_edges = np.diff(self.edge_start) > 0
        candidates = np.flatnonzero(has_edges)
        sizes = self.state_size[candidates]
        by_size = candidates[np.argsort(sizes, kind="stable")]
        bounds = np.flatnonzero(np.diff(np.sort(sizes))) + 1
        return np.split(by_size, bounds) if len(by_size) else []

    def _level_edges(self, level):
        """Edge indices of the states of a level, grouped by state, and group starts."""
        counts = self.edge_start[level + 1] - self.edge_start[level]
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        edges = np.repeat(self.edge_start[level] - starts, counts) + np.arange(counts.sum())
        return edges, starts

    def _inside(self):
        n_states = self.n_states
        self.log_z = np.full(n_states, -np.inf)
        self.log_map = np.full(n_states, -np.inf)
        self.best_edge = np.full(n_states, -1, dtype=np.int64)
        self.log_z[1] = self.log_map[1] = 0.0
        self.levels = self._levels()
        for level in self.levels:
            edges, starts = self._level_edges(level)
            log_e = self.log_e[self.edge_cluster[edges]]
            child = self.edge_child[edges]
            maxima, first, _ = _segment_reduce(log_e + self.log_map[child], starts, len(level))
            _, _, log_sums = _segment_reduce(log_e + self.log_z[child], starts, len(level))
            self.log_map[level] = maxima
            self.best_edge[level] = np.where(np.isfinite(maxima), edges[np.minimum(
                first, len(edges) - 1)], -1)
            self.log_z[level] = log_sums

    @property
    def log_partition(self):
        return float(self.log_z[0])

    @property
    def map_log_potential(self):
        return float(self.log_map[0])

    def labels_of(self, cluster_ids):
        labels = np.empty(self.n_points, dtype=np.int64)
        for k, c in enumerate(cluster_ids):
            labels[self.members[c]] = k
        return relabel_by_first_appearance(labels)

    def map_clusters(self):
        """Cluster indices of the MAP partition (none if every partition has zero potential)."""
        clusters, state = [], 0
        while state != 1 and self.best_edge[state] >= 0:
            edge = self.best_edge[state]
            clusters.append(int(self.edge_cluster[edge]))
            state = int(self.edge_child[edge])
        return clusters

    def map_block_order(self):
        """The points cluster by cluster of the MAP partition, each in the current order."""
        clusters = self.map_clusters()
        starts = [int(self.rank[self.members[c]].min()) for c in clusters]
        pieces = [np.sort(self.rank[self.members[c]]) for c in np.array(clusters)[np.argsort(starts)]]
        return self.order[np.concatenate(pieces)]

    def map_labels(self):
        return self.labels_of(self.map_clusters())

    def n_partitions(self):
        """Number of spanned partitions of non-zero potential (exact Python int)."""
        count = [0] * self.n_states
        count[1] = 1
        for level in self.levels:
            for state in level.tolist():
                total = 0
                for edge in range(self.edge_start[state], self.edge_start[state + 1]):
                    total += count[self.edge_child[edge]]
                count[state] = total
        return count[0]

    ###########################################################################
    # Outside pass and queries

    def _edge_log_probability(self):
        """log P(the partition's first-point-first path takes each edge)."""
        if self._log_outside is None:
            log_outside = np.full(self.n_states, -np.inf)
            log_outside[0] = 0.0
            for level in reversed(self.levels):
                edges, _ = self._level_edges(level)
                np.logaddexp.at(
                    log_outside, self.edge_child[edges],
                    log_outside[self.edge_parent[edges]] + self.log_e[self.edge_cluster[edges]],
                )
            self._log_outside = log_outside
        with np.errstate(invalid="ignore"):
            values = (self._log_outside[self.edge_parent] + self.log_e[self.edge_cluster]
                      + self.log_z[self.edge_child] - self.log_partition)
        values[np.isnan(values)] = -np.inf
        return values

    def cluster_log_marginals(self):
        """log P(cluster is a cluster of the partition) for every cluster of the family."""
        marginals = np.full(self.n_clusters, -np.inf)
        # A cluster is on at most one edge of a partition's path: the marginal
        # sums its edges.
        np.logaddexp.at(marginals, self.edge_cluster, self._edge_log_probability())
        return np.minimum(marginals, 0.0)

    def cluster_log_marginal(self, members):
        """log P(the points ``members`` form a cluster); -inf if not in the family."""
        c = self.cluster_index(members)
        return float(self.cluster_log_marginals()[c]) if c >= 0 else -np.inf

    def together_log_probability(self, members):
        """log P(the points ``members`` all lie in one cluster)."""
        target = self._bits(np.asarray(members, dtype=np.int64))
        containing = [c for c, bits in enumerate(self.bits) if bits & target == target]
        if not containing:
            return -np.inf
        marginals = self.cluster_log_marginals()[containing]
        top = marginals.max()
        if top == -np.inf:
            return -np.inf
        return float(min(top + np.log(np.exp(marginals - top).sum()), 0.0))

    def most_probable_clusters(self, n_top, min_size):
        """Members and log marginals of the n_top most probable clusters of min_size points or more.

        All points together is a cluster like any other here (unlike in a
        tree). Ties go to smaller clusters, then smaller masks, as in the
        exact flat trellis.
        """
        log_marginals = self.cluster_log_marginals()
        size = np.array([len(m) for m in self.members])
        candidates = np.flatnonzero(size >= min_size)
        if len(candidates) > n_top:
            # Only those at or above the n_top-th value can be returned.
            threshold = np.partition(log_marginals[candidates], -n_top)[-n_top]
            candidates = candidates[log_marginals[candidates] >= threshold]
        candidates = candidates.tolist()
        candidates.sort(key=lambda c: (-log_marginals[c], len(self.members[c]),
                                       sum(1 << int(i) for i in self.members[c])))
        top = candidates[:n_top]
        return [self.members[c].copy() for c in top], log_marginals[top]

    def pairwise_probability(self):
        """P(i and j in one cluster) for every pair: the marginals of the clusters holding both."""
        probability = np.exp(self.cluster_log_marginals())
        used = np.flatnonzero(probability > 0)
        rows = np.repeat(np.arange(len(used)), [len(self.members[c]) for c in used])
        cols = np.concatenate([self.members[c] for c in used]) if len(used) else np.zeros(0, int)
        indicator = sparse.csr_matrix(
            (np.ones(len(rows)), (rows, cols)), shape=(len(used), self.n_points)
        )
        pairwise = (indicator.T @ sparse.diags(probability[used]) @ indicator).toarray()
        pairwise = np.minimum(pairwise, 1.0)
        np.fill_diagonal(pairwise, 1.0)
        return pairwise

    def log_partition_by_count(self):
        """log of the summed potential of the spanned partitions into k clusters, k = 0..N."""
        # Per state, a vector over the numbers of clusters that complete it,
        # from the smallest such number on.
        low = {1: 0}
        table = {1: np.zeros(1)}
        for level in self.levels:
            for state in level.tolist():
                pieces = []
                for edge in range(self.edge_start[state], self.edge_start[state + 1]):
                    child = int(self.edge_child[edge])
                    if child in table:
                        pieces.append((low[child] + 1,
                                       table[child] + self.log_e[self.edge_cluster[edge]]))
                if not pieces:
                    continue
                first = min(p[0] for p in pieces)
                values = np.full(max(p[0] + len(p[1]) for p in pieces) - first, -np.inf)
                for start, piece in pieces:
                    window = values[start - first : start - first + len(piece)]
                    np.logaddexp(window, piece, out=window)
                low[state], table[state] = first, values
        result = np.full(self.n_points + 1, -np.inf)
        if 0 in table:
            result[low[0] : low[0] + len(table[0])] = table[0]
        return result

    def map_clusters_with_count(self, n_clusters):
        """Cluster indices of the best spanned partition into n_clusters clusters (None if none)."""
        # Per state, the best completion by each number of clusters (from
        # the smallest on) and the edge it starts with.
        low = {1: 0}
        best = {1: np.zeros(1)}
        first_edge = {1: np.full(1, -1)}
        for level in self.levels:
            for state in level.tolist():
                pieces = []
                for edge in range(self.edge_start[state], self.edge_start[state + 1]):
                    child = int(self.edge_child[edge])
                    if child in best:
                        pieces.append((low[child] + 1,
                                       best[child] + self.log_e[self.edge_cluster[edge]], edge))
                if not pieces:
                    continue
                start = min(p[0] for p in pieces)
                width = max(p[0] + len(p[1]) for p in pieces) - start
                values = np.full(width, -np.inf)
                edges = np.full(width, -1)
                for offset, piece, edge in pieces:
                    window = slice(offset - start, offset - start + len(piece))
                    # Strictly better only: the first edge among equals, as the MAP.
                    better = piece > values[window]
                    values[window] = np.where(better, piece, values[window])
                    edges[window] = np.where(better, edge, edges[window])
                low[state], best[state], first_edge[state] = start, values, edges
        if 0 not in best:
            return None
        state, remaining, clusters = 0, n_clusters, []
        while state != 1:
            index = remaining - low[state]
            if not 0 <= index < len(best[state]) or best[state][index] == -np.inf:
                return None
            edge = int(first_edge[state][index])
            clusters.append(int(self.edge_cluster[edge]))
            state, remaining = int(self.edge_child[edge]), remaining - 1
        return clusters

    def sample_labels(self, n_samples, random_state):
        """Partitions drawn exactly from the spanned posterior, as label rows."""
        with np.errstate(invalid="ignore"):
            log_p = (self.log_e[self.edge_cluster] + self.log_z[self.edge_child]
                     - self.log_z[self.edge_parent])
        probability = np.exp(np.nan_to_num(log_p, nan=-np.inf))
        labels = np.empty((n_samples, self.n_points), dtype=np.int64)
        state = np.zeros(n_samples, dtype=np.int64)
        step = 0
        while np.any(state != 1):
            # Each sample takes one step: read where they all are first.
            before = state.copy()
            for current in np.unique(before[before != 1]).tolist():
                rows = np.flatnonzero(before == current)
                first, last = self.edge_start[current], self.edge_start[current + 1]
                cumulative = np.cumsum(probability[first:last])
                draws = random_state.random(len(rows)) * cumulative[-1]
                picked = np.minimum(np.searchsorted(cumulative, draws, side="right"),
                                    last - first - 1) + first
                # A draw equal to a cumulative total lands past a run of
                # zero-probability edges: step back to the edge that ends it.
                for row, edge in zip(rows.tolist(), picked.tolist()):
                    while probability[edge] == 0:
                        edge -= 1
                    labels[row, self.members[self.edge_cluster[edge]]] = step
                    state[row] = self.edge_child[edge]
            step += 1
        return np.array([relabel_by_first_appearance(row) for row in labels])

    def log_potential_of(self, labels):
        """Log potential of a partition given by labels; -inf if a cluster is not in F."""
        total = 0.0
        for label in np.unique(labels):
            c = self.cluster_index(np.flatnonzero(labels == label))
            if c < 0:
                return -np.inf
            total += self.log_e[c]
        return float(total)

    ###########################################################################
    # Growing

    def grow_regions(self, tree_nodes, tree_children, n_parts):
        """Clusters that let the family re-partition the MAP around each of its clusters.

        For each cluster B of the MAP partition, the region is the union of
        the MAP clusters meeting U, the smallest node of the tree strictly
        containing B (at most ``n_parts`` of them, those meeting U most).
        The region is cut into up to ``n_parts`` parts: its MAP clusters,
        then the largest part split by the tree (as the tree cuts it) until
        there are n_parts. Every union of parts is returned, so the family
        then spans every partition of the region into unions of its parts,
        with the rest of the MAP partition unchanged.

        ``tree_nodes`` are the nodes' point sets as state bits (leaves then
        merges), ``tree_children`` the merges.
        """
        map_clusters = self.map_clusters()
        blocks = [self.bits[c] for c in map_clusters]
        n_points = self.n_points
        root = len(tree_nodes) - 1
        parent_of = {}
        for k, (a, b) in enumerate(tree_children):
            parent_of[int(a)] = parent_of[int(b)] = n_points + k
        proposals, regions = [], set()
        for block in blocks:
            node = self._smallest_node_containing(block, tree_nodes, tree_children, root)
            if tree_nodes[node] == block and node != root:
                node = parent_of[node]
            around = tree_nodes[node]
            meeting = [b for b in blocks if b & around]
            meeting.sort(key=lambda b: (-(b & around).bit_count(), b != block))
            region_blocks = sorted([block] + [b for b in meeting if b != block][: n_parts - 1])
            region = tuple(region_blocks)
            if region in regions:
                continue
            regions.add(region)
            parts = list(region_blocks)
            while len(parts) < n_parts:
                largest = max(range(len(parts)), key=lambda k: parts[k].bit_count())
                if parts[largest].bit_count() < 2:
                    break
                parts[largest:largest + 1] = self._induced_split(
                    parts[largest], tree_nodes, tree_children, root)
            proposals.extend(_unions(parts))
        return [self._points_of(bits) for bits in proposals]

    def grow_moves(self, tree_nodes, tree_children):
        """Clusters that let the family move subtrees between neighbouring MAP clusters.

        For each node v of the tree inside a MAP cluster A (not all of it),
        and the MAP clusters B meeting the parent of the smallest node that
        meets another MAP cluster above v: A without v, and B with v. The family then
        spans every set of such moves that do not touch the same clusters,
        and the dynamic program picks the best combination; subtrees,
        unlike single points, keep the states few (a node is an interval of
        the tree's depth-first order).
        """
        map_clusters = self.map_clusters()
        block_of = np.empty(self.n_points, dtype=np.int64)
        blocks = [self.bits[c] for c in map_clusters]
        for k, c in enumerate(map_clusters):
            block_of[self.members[c]] = k
        n_points = self.n_points
        parent_of = {}
        for k, (a, b) in enumerate(tree_children):
            parent_of[int(a)] = parent_of[int(b)] = n_points + k
        root = len(tree_nodes) - 1
        proposals = []
        for node in range(len(tree_nodes) - 1):
            bits = tree_nodes[node]
            low = (bits & -bits).bit_length() - 1
            home = blocks[block_of[self.order[low]]]
            if bits & home != bits or bits == home:
                continue
            # Up to the first ancestor that reaches out of the home cluster.
            up = parent_of[node]
            while up != root and tree_nodes[up] & home == tree_nodes[up]:
                up = parent_of[up]
            for other in blocks:
                if other != home and other & tree_nodes[up]:
                    proposals.extend((home ^ bits, other | bits))
        return [self._points_of(bits) for bits in proposals]

    def _points_of(self, bits):
        flags = np.unpackbits(
            np.frombuffer(bits.to_bytes((self.n_points + 7) // 8, "little"), dtype=np.uint8),
            bitorder="little")[: self.n_points]
        return np.sort(self.order[np.flatnonzero(flags)])

    def _smallest_node_containing(self, bits, tree_nodes, tree_children, root):
        node = root
        while node >= self.n_points:
            a, b = tree_children[node - self.n_points]
            if tree_nodes[a] & bits == bits:
                node = int(a)
            elif tree_nodes[b] & bits == bits:
                node = int(b)
            else:
                break
        return node

    def _induced_split(self, bits, tree_nodes, tree_children, root):
        """The two sides of the highest split of the tree that separates points of ``bits``."""
        node = self._smallest_node_containing(bits, tree_nodes, tree_children, root)
        a, b = tree_children[node - self.n_points]
        return [tree_nodes[a] & bits, tree_nodes[b] & bits]

    def tree_node_bits(self, merges):
        """State bits of every node of a tree (leaves then merges) under the current order."""
        nodes = [1 << int(p) for p in self.rank]
        for a, b in merges:
            nodes.append(nodes[a] | nodes[b])
        return nodes


def _check_restored_structure(state):
    """Check the family and the state graph of an unpickled SparseFlatTrellis.

    The passes walk edges from state to state: every index must be a
    cluster or state, and each edge must remove its cluster's points from
    its state, so that every walk from all points ends at the empty state.
    """
    owner = "SparseFlatTrellis"
    n_points, members = state.get("n_points"), state.get("members")
    if not (isinstance(n_points, int) and n_points >= 1):
        raise ValueError(f"a pickled {owner} has n_points={n_points!r}")
    if not (isinstance(members, list) and all(
            isinstance(m, np.ndarray) and m.dtype == np.int64 and m.ndim == 1 and m.size
            and m[0] >= 0 and m[-1] < n_points and np.all(np.diff(m) > 0) for m in members)):
        raise ValueError(f"a pickled {owner} has clusters that are not sorted, non-empty sets "
                         f"of its {n_points} points: the file is damaged or was not written "
                         "by sktrellis")
    state_size, edge_parent = state.get("state_size"), state.get("edge_parent")
    n_states = (state_size.shape[0] if isinstance(state_size, np.ndarray)
                and state_size.ndim == 1 else -1)
    n_edges = (edge_parent.shape[0] if isinstance(edge_parent, np.ndarray)
               and edge_parent.ndim == 1 else -1)
    if n_states < 2 or n_edges < 0:
        raise ValueError(f"a pickled {owner} has no state tables: the file is damaged or was "
                         "not written by sktrellis")
    edges = (n_edges,)
    check_restored_arrays(owner, state, {
        "log_e": (np.float64, (len(members),), False), "order": (np.int64, (n_points,), False),
        "state_size": (np.int64, (n_states,), False), "edge_parent": (np.int64, edges, False),
        "edge_cluster": (np.int64, edges, False), "edge_child": (np.int64, edges, False),
        "edge_start": (np.int64, (n_states + 1,), False)})
    edge_start, cluster, child = state["edge_start"], state["edge_cluster"], state["edge_child"]
    counts = np.diff(edge_start)
    cluster_size = np.array([len(m) for m in members], dtype=np.int64)
    # In order: each check may index with what the earlier ones let through.
    problems = {
        "cluster log potentials that are NaN or +inf": lambda: (
            not np.all(state["log_e"] < np.inf)),
        "an order that is not a permutation of the points": lambda: (
            not np.array_equal(np.sort(state["order"]), np.arange(n_points))),
        "edges that are not grouped by state": lambda: (
            edge_start[0] != 0 or edge_start[-1] != n_edges or np.any(counts < 0)
            or not np.array_equal(edge_parent, np.repeat(np.arange(n_states), counts))),
        "an edge to a cluster or state it does not have": lambda: (
            np.any((cluster < 0) | (cluster >= len(members)) | (child < 0) | (child >= n_states))),
        "edges that do not remove their cluster's points": lambda: (
            state_size[0] != n_points or state_size[1] != 0 or counts[1] != 0
            or np.any(state_size[child] + cluster_size[cluster] != state_size[edge_parent])),
    }
    for problem, found in problems.items():
        if found():
            raise ValueError(f"a pickled {owner} has {problem}: the file is damaged or was "
                             "not written by sktrellis")


def _unions(parts):
    """The union of every non-empty subset of the disjoint ``parts``."""
    unions = [0]
    for part in parts:
        unions += [u | part for u in unions]
    return unions[1:]
