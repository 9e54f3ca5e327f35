"""The sparse trellis: clusters of seed trees, grown around the MAP tree, and its queries.

Vertices are kept in insertion order with their content hashes, lowest
point, size and merge-model id; ``solve`` numbers them by size, finds every
split of a vertex into two vertices and runs the kernels of ``_sparse.pyx``.
"""
import sys
from collections import deque
from functools import lru_cache
from itertools import combinations

import numpy as np

from ..tables import check_restored_arrays
from ..tree.conversion import linkage_from_merges
from . import _sparse as kernels

_MASK64 = (1 << 64) - 1


class SparseTrellis:
    """A set of clusters over a merge model and the DP tables of the trees they span.

    Parameters
    ----------
    model : MergeModel
        Statistics of every cluster added (``sktrellis.energies._merge``).
    """

    def __init__(self, model):
        self.model = model
        self.n_points = n_points = model.n_points
        self._point_keys = keys = _point_keys(n_points)
        self._first, self._second = keys[0].tolist(), keys[1].tolist()
        self._low = list(range(n_points))
        self._size = [1] * n_points
        self._model_id = list(range(n_points))
        self._index = {(f, s): i for i, (f, s) in enumerate(zip(self._first, self._second))}

    def __setstate__(self, state):
        # A model file may be crafted: the structure the kernels walk is
        # checked, and what can be derived from it (hash table, point keys,
        # growth lists, the inside pass) is rebuilt, never read from the file.
        _check_restored_structure(state)
        n_points, n_vertices = state["n_points"], len(state["size"])
        self.__init__(state["model"])
        # The solved numbering becomes the insertion order.
        self._first, self._second = state["first"].tolist(), state["second"].tolist()
        self._low, self._size = state["low"].tolist(), state["size"].tolist()
        self._model_id = state["model_id"].tolist()
        self._index = {key: v for v, key in enumerate(zip(self._first, self._second))}
        self.order = np.arange(n_vertices, dtype=np.int64)
        for name in ("size", "low", "first", "second", "model_id", "split_start", "parent",
                     "left", "right", "log_psi"):
            setattr(self, name, state[name])
        self.table = kernels.build_table(self.first, self.second)
        self.log_z, self.log_map, self.best = kernels.inside(
            self.split_start, self.left, self.right, self.log_psi, n_points
        )
        self._log_outside = None

    @property
    def n_vertices(self):
        return len(self._size)

    def _union_handle(self, a, b):
        """Hash key, lowest point and size of the union of vertices a and b."""
        key = ((self._first[a] + self._first[b]) & _MASK64,
               (self._second[a] + self._second[b]) & _MASK64)
        return key, min(self._low[a], self._low[b]), self._size[a] + self._size[b]

    def _add(self, key, low, size, model_id):
        self._index[key] = len(self._size)
        self._first.append(key[0])
        self._second.append(key[1])
        self._low.append(low)
        self._size.append(size)
        self._model_id.append(model_id)

    def add_tree(self, tree):
        """Add the clusters of an AgglomerativeTree of the model."""
        vertex = list(range(self.n_points))
        for (a, b), model_id in zip(tree.merges, tree.clusters):
            key, low, size = self._union_handle(vertex[a], vertex[b])
            if key not in self._index:
                self._add(key, low, size, int(model_id))
            vertex.append(self._index[key])

    def add_unions(self, parts, members, max_vertices, uncut=None):
        """Add the union of every subset of 2 or more, not all, of the disjoint vertices ``parts``.

        Smaller unions go first; none beyond ``max_vertices`` vertices.
        ``members[v]`` gives the points of each part (energies on pairwise
        weights need the cross sums between parts). ``uncut``, a boolean
        (k, N) matrix of clusters, leaves out every union that cuts one of
        them (meets it, and neither holds the other). Returns the number of
        vertices added.
        """
        subsets, indicator = _proper_subsets(len(parts))
        first = indicator @ np.array([self._first[p] for p in parts], dtype=np.uint64)
        second = indicator @ np.array([self._second[p] for p in parts], dtype=np.uint64)
        allowed = np.ones(len(subsets), dtype=bool)
        if uncut is not None and len(uncut):
            # Points of each kept cluster in each part, then in each union.
            shared = np.array([uncut[:, members[p]].sum(axis=1) for p in parts])
            counts = indicator.astype(np.int64)
            inside = counts @ shared
            size = counts @ np.array([len(members[p]) for p in parts])
            allowed = ~np.any((inside > 0) & (inside < uncut.sum(axis=1))
                              & (inside < size[:, None]), axis=1)
        new = [
            row for row, key in enumerate(zip(first.tolist(), second.tolist()))
            if allowed[row] and key not in self._index
        ][: max(0, max_vertices - self.n_vertices)]
        if not new:
            return 0
        ids = self.model.unions(
            [self._model_id[p] for p in parts],
            [subsets[row] for row in new],
            [members[p] for p in parts],
        )
        low = np.array([self._low[p] for p in parts])
        size = np.array([self._size[p] for p in parts])
        for row, model_id in zip(new, ids.tolist()):
            self._add((int(first[row]), int(second[row])), int(low[indicator[row] == 1].min()),
                      int(size @ indicator[row]), model_id)
        return len(new)

    def solve(self):
        """Number vertices by size, find all splits, run the inside pass."""
        size = np.array(self._size, dtype=np.int64)
        low = np.array(self._low, dtype=np.int64)
        # Children before parents; the points first, in point order.
        self.order = order = np.lexsort((low, size))
        self.size = size[order]
        self.low = low[order]
        self.first = np.array(self._first, dtype=np.uint64)[order]
        self.second = np.array(self._second, dtype=np.uint64)[order]
        self.model_id = np.array(self._model_id, dtype=np.int64)[order]
        self.table = kernels.build_table(self.first, self.second)
        groups = np.lexsort((self.size, self.low))
        group_start = np.flatnonzero(np.diff(self.low[groups], prepend=-1, append=-2))
        parent, self.left, self.right = kernels.find_splits(
            self.table, self.size, self.first, self.second, groups, group_start.astype(np.int64)
        )
        self.split_start = np.concatenate(
            [[0], np.cumsum(np.bincount(parent, minlength=len(order)))]
        ).astype(np.int64)
        self.parent = parent
        self.log_psi = np.asarray(
            self.model.split_log_potential(
                self.model_id[parent], self.model_id[self.left], self.model_id[self.right]
            ),
            dtype=np.float64,
        )
        self.log_z, self.log_map, self.best = kernels.inside(
            self.split_start, self.left, self.right, self.log_psi, self.n_points
        )
        self._log_outside = None

    def retempered(self, log_psi):
        """A solved copy over the same vertices and splits with other split log potentials.

        What a calibration trying temperatures needs: the vertices do not
        depend on beta, and rebuilding them costs far more than the inside
        pass. The copy has no merge model (``model`` None), so the queries
        that score a new tree (``subtree_log_probability``) refuse it: its
        draws and marginals are for the calibration, not for a fit.
        """
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy.model = None
        copy.log_psi = np.asarray(log_psi, dtype=np.float64)
        copy.log_z, copy.log_map, copy.best = kernels.inside(
            copy.split_start, copy.left, copy.right, copy.log_psi, copy.n_points
        )
        copy._log_outside = None
        return copy

    @property
    def n_splits(self):
        return len(self.parent)

    @property
    def log_partition(self):
        return float(self.log_z[-1])

    @property
    def map_log_potential(self):
        return float(self.log_map[-1])

    def n_trees(self):
        """Number of spanned trees of non-zero potential, exact."""
        return kernels.count_trees(
            self.split_start, self.left, self.right, self.log_psi, self.n_points
        )[-1]

    def map_splits(self):
        """Split indices of the MAP tree, preorder."""
        return kernels.map_splits(self.best, self.left, self.right, self.n_points)

    def sample_splits(self, n_samples, random_state):
        """Split indices (n_samples, N - 1) of trees drawn exactly from the sparse posterior."""
        uniforms = random_state.random((n_samples, self.n_points - 1))
        return np.asarray(kernels.sample_splits(
            self.split_start, self.left, self.right, self.log_psi, self.log_z, uniforms
        ))

    def sample_linkages(self, n_samples, random_state):
        """Linkage matrices of n_samples trees drawn exactly from the sparse posterior."""
        return [linkage_from_merges(*self.merges(splits))
                for splits in self.sample_splits(n_samples, random_state)]

    def merges(self, splits):
        """Merges (children first, node ids as in scipy) and log psi of a tree's splits."""
        splits = np.asarray(splits)
        splits = splits[np.argsort(self.parent[splits], kind="stable")]
        node = {v: v for v in range(self.n_points)}
        merges = np.empty((len(splits), 2), dtype=np.int64)
        for k, split in enumerate(splits):
            merges[k] = node[self.left[split]], node[self.right[split]]
            node[self.parent[split]] = self.n_points + k
        return merges, self.log_psi[splits]

    def members(self, splits):
        """Points of every vertex of a tree given by its split indices."""
        members = {v: np.array([v]) for v in range(self.n_points)}
        for split in splits[np.argsort(self.parent[splits], kind="stable")]:
            members[self.parent[split]] = np.concatenate(
                [members[self.left[split]], members[self.right[split]]]
            )
        return members

    def grow(self, n_parts, max_vertices):
        """Add the rearrangements of the MAP tree's subtrees as vertices.

        Each inner node v of the MAP tree is cut into up to ``n_parts``
        subtrees, splitting breadth first from v (larger child first), and
        every union of them is added: the trellis then spans every tree over
        those parts, so the next MAP is at least as good as the best
        rearrangement of any node, and of any compatible set of them.
        Returns the number of vertices added.
        """
        splits = self.map_splits()
        members = self.members(splits)
        # In insertion order, the numbering add_unions takes.
        order = self.order
        children = {int(order[self.parent[s]]): (int(order[self.left[s]]),
                                                 int(order[self.right[s]])) for s in splits}
        nodes = [int(order[v]) for v in sorted(self.parent[splits], reverse=True)]
        return self._rearrange(children, {int(order[v]): m for v, m in members.items()},
                               nodes, n_parts, max_vertices)

    def grow_tree(self, merges, n_parts, max_vertices=None, uncut=None):
        """Add the rearrangements of the subtrees of a tree already added (``add_tree``).

        As ``grow``, around the tree given by its merges instead of the MAP
        tree, and without a bound on the vertices when ``max_vertices`` is
        None; no union cuts a cluster of ``uncut`` (see ``add_unions``).
        Returns the number of vertices added.
        """
        if max_vertices is None:
            max_vertices = sys.maxsize
        vertex = list(range(self.n_points))
        members = {v: np.array([v]) for v in range(self.n_points)}
        children = {}
        for a, b in merges:
            va, vb = vertex[a], vertex[b]
            v = self._index[self._union_handle(va, vb)[0]]
            children[v] = (va, vb)
            members[v] = np.concatenate([members[va], members[vb]])
            vertex.append(v)
        return self._rearrange(children, members, vertex[:self.n_points - 1:-1], n_parts,
                               max_vertices, uncut)

    def _rearrange(self, children, members, nodes, n_parts, max_vertices, uncut=None):
        """Add every union of the parts each node of a tree is cut into (insertion numbering).

        ``children[v]`` are the two children of inner node v, ``members[v]``
        its points; ``nodes`` are the inner nodes in the order they are cut,
        as long as ``max_vertices`` allows.
        """
        by_size = {v: sorted(pair, key=lambda c: -self._size[c]) for v, pair in children.items()}
        added = 0
        for v in nodes:
            if self.n_vertices >= max_vertices:
                break
            parts, frontier = [], deque([v])
            while frontier and len(parts) + len(frontier) < n_parts:
                part = frontier.popleft()
                if part < self.n_points:
                    parts.append(part)
                else:
                    frontier.extend(by_size[part])
            parts.extend(frontier)
            if len(parts) > 2:
                added += self.add_unions(parts, {p: members[p] for p in parts}, max_vertices,
                                         uncut)
        return added

    def vertex_of(self, member_lists):
        """Vertex index (solved numbering) of each cluster given by its points, -1 if absent."""
        # uint64 sums wrap around, as the hashes do.
        first = np.array([self._point_keys[0][m].sum() for m in member_lists], dtype=np.uint64)
        second = np.array([self._point_keys[1][m].sum() for m in member_lists], dtype=np.uint64)
        found = kernels.lookup(self.table, first, second)
        sizes = np.array([len(m) for m in member_lists])
        found[(found >= 0) & (self.size[np.maximum(found, 0)] != sizes)] = -1
        return found

    def vertex_members(self, vertex):
        """The points of a vertex, increasing (down any of its splits)."""
        points, stack = [], [int(vertex)]
        while stack:
            v = stack.pop()
            if v < self.n_points:
                points.append(v)
            else:
                split = self.split_start[v]
                stack.extend((int(self.left[split]), int(self.right[split])))
        return np.sort(np.array(points, dtype=np.int64))

    def cluster_log_marginal(self, members):
        """log P(the points ``members`` form a cluster of the tree); -inf if no vertex."""
        if len(members) in (1, self.n_points):
            return 0.0  # a leaf or the root: in every tree
        vertex = self.vertex_of([np.asarray(members)])[0]
        return float(self.cluster_log_marginals()[vertex]) if vertex >= 0 else -np.inf

    def subtree_log_probability(self, members, merges):
        """log P(``members`` is a cluster whose subtree is ``merges``) (posterior interface).

        P(S is a cluster) phi(T_S) / Z(S), over the spanned trees: -inf
        unless every cluster of the subtree is a vertex.
        """
        nodes = [np.array([point]) for point in members]
        for a, b in merges:
            nodes.append(np.concatenate([nodes[a], nodes[b]]))
        vertex = self.vertex_of(nodes)
        if np.any(vertex < 0):
            return -np.inf
        log_potential = 0.0
        if len(merges):
            model_id = self.model_id[vertex]
            log_potential = float(np.sum(self.model.split_log_potential(
                model_id[len(members):], model_id[merges[:, 0]], model_id[merges[:, 1]]
            )))
        if not log_potential > -np.inf:
            return -np.inf
        # Z(S) >= phi(T_S) > 0 here. Rounding must not make a probability exceed one.
        conditional = log_potential - self.log_z[vertex[-1]]
        return float(min(self.cluster_log_marginal(members) + conditional, 0.0))

    def most_probable_clusters(self, n_top, min_size):
        """Members and log marginals of the n_top most probable vertices but the root."""
        log_marginals = self.cluster_log_marginals()
        # Vertices are numbered by size, then lowest point: that is the tie order.
        candidates = np.flatnonzero((self.size >= min_size) & (self.size < self.n_points))
        values = log_marginals[candidates]
        top = np.argsort(-values, kind="stable")[:n_top]
        return [self.vertex_members(v) for v in candidates[top]], values[top]

    def cluster_sums(self, values):
        """Sums of per-point ``values`` over every vertex (posterior interface)."""
        values = np.asarray(values, dtype=np.float64)
        sums = np.zeros((self.n_vertices,) + values.shape[1:])
        sums[: self.n_points] = values
        # Vertices are numbered by size, so any split of a vertex has both
        # children done when a size level starts.
        first_split = self.split_start[:-1]
        for size in range(2, self.n_points + 1):
            vertices = np.flatnonzero(self.size == size)
            splits = first_split[vertices]
            sums[vertices] = sums[self.left[splits]] + sums[self.right[splits]]
        return sums

    def split_blocks(self):
        """(parents, lefts, rights, log P(parent is a node split so)) of every split."""
        log_marginals = self.cluster_log_marginals()
        with np.errstate(invalid="ignore"):
            log_probability = (
                log_marginals[self.parent] - self.log_z[self.parent] + self.log_psi
                + self.log_z[self.left] + self.log_z[self.right]
            )
        log_probability[np.isnan(log_probability)] = -np.inf
        yield self.parent, self.left, self.right, log_probability

    def cluster_log_marginals(self):
        """log P(vertex is a cluster of the tree) under the sparse posterior (cached)."""
        if self._log_outside is None:
            self._log_outside = kernels.outside(
                self.split_start, self.left, self.right, self.log_psi, self.log_z
            )
        with np.errstate(invalid="ignore"):
            marginals = self.log_z + self._log_outside - self.log_partition
        marginals[np.isnan(marginals)] = -np.inf
        return np.minimum(marginals, 0.0)


def _point_keys(n_points):
    """The two 64-bit hash keys of every point, shape (2, n_points)."""
    # The hashes only need to be independent of the data: fixed keys keep
    # fits reproducible.
    return np.random.default_rng(0x7E11).integers(
        0, np.iinfo(np.uint64).max, size=(2, n_points), dtype=np.uint64, endpoint=True)


def _check_restored_structure(state):
    """Check the vertices and splits of an unpickled SparseTrellis before a kernel walks them.

    The kernels trust that every index is a vertex or split, that both
    children of a split come before their parent and partition it, and that
    every cluster but a point has a split: then any tree read down from the
    root has N - 1 inner nodes, the length of the buffers they fill.
    """
    owner = "SparseTrellis"
    n_points, model = state.get("n_points"), state.get("model")
    if not (isinstance(n_points, int) and n_points >= 2):
        raise ValueError(f"a pickled {owner} has n_points={n_points!r}; 2 or more are possible")
    size = state.get("size")
    parent = state.get("parent")
    n_vertices = size.shape[0] if isinstance(size, np.ndarray) and size.ndim == 1 else -1
    n_splits = parent.shape[0] if isinstance(parent, np.ndarray) and parent.ndim == 1 else -1
    if n_vertices <= n_points or n_splits < 0:
        raise ValueError(f"a pickled {owner} has no vertex tables for n_points={n_points}: "
                         "the file is damaged or was not written by sktrellis")
    vertices, splits = (n_vertices,), (n_splits,)
    check_restored_arrays(owner, state, {
        "size": (np.int64, vertices, False), "low": (np.int64, vertices, False),
        "first": (np.uint64, vertices, False), "second": (np.uint64, vertices, False),
        "model_id": (np.int64, vertices, False), "split_start": (np.int64, (n_vertices + 1,), False),
        "parent": (np.int64, splits, False), "left": (np.int64, splits, False),
        "right": (np.int64, splits, False), "log_psi": (np.float64, splits, False)})
    split_start, left, right = state["split_start"], state["left"], state["right"]
    counts = np.diff(split_start)
    if getattr(model, "n_points", None) != n_points:
        raise ValueError(f"a pickled {owner} has a merge model of "
                         f"n_points={getattr(model, 'n_points', None)!r}, not {n_points}")
    n_ids = getattr(model, "n_ids", None)
    # In order: each check may index with what the earlier ones let through.
    problems = {
        "splits that are not grouped by vertex": lambda: (
            split_start[0] != 0 or split_start[-1] != n_splits or np.any(counts < 0)
            or not np.array_equal(parent, np.repeat(np.arange(n_vertices), counts))),
        "a point with a split, or a cluster without one": lambda: (
            np.any(counts[:n_points] != 0) or np.any(counts[n_points:] == 0)),
        "a split whose child is not an earlier vertex": lambda: (
            np.any((left < 0) | (left >= parent) | (right < 0) | (right >= parent))),
        "cluster sizes that are not those of its points and splits": lambda: (
            np.any(size[:n_points] != 1) or np.any(size[n_points:] < 2)
            or size[-1] != n_points or np.any(size[left] + size[right] != size[parent])),
        # The hash of a union is the sum of its parts' (mod 2**64), the points'
        # hashes are their fixed keys: children that partition their parent.
        "splits whose children do not partition it": lambda: any(
            not np.array_equal(hashes[:n_points], keys)
            or np.any(hashes[left] + hashes[right] != hashes[parent])
            for hashes, keys in zip((state["first"], state["second"]), _point_keys(n_points))),
        "split log potentials that are NaN or +inf": lambda: (
            not np.all(state["log_psi"] < np.inf)),
        "lowest points out of range": lambda: (
            np.any((state["low"] < 0) | (state["low"] >= n_points))),
        "merge-model ids out of range": lambda: (
            not isinstance(n_ids, int)
            or np.any((state["model_id"] < 0) | (state["model_id"] >= n_ids))),
    }
    for problem, found in problems.items():
        if found():
            raise ValueError(f"a pickled {owner} has {problem}: the file is damaged or was "
                             "not written by sktrellis")


@lru_cache(maxsize=None)
def _proper_subsets(n_parts):
    """Subsets of 2..n_parts-1 of range(n_parts), smaller first, and their 0/1 matrix."""
    subsets = [
        subset for size in range(2, n_parts)
        for subset in combinations(range(n_parts), size)
    ]
    indicator = np.zeros((len(subsets), n_parts), dtype=np.uint64)
    for row, subset in enumerate(subsets):
        indicator[row, list(subset)] = 1
    return subsets, indicator


class BaggedTrellis:
    """A posterior over trees that averages the exact posteriors of several sparse trellises.

    ``P(T) = sum_b w_b P_b(T)``, with ``P_b`` the exact posterior over the
    trees trellis b spans (its family) and weights ``w_b`` summing to one:
    a draw picks a family with probability ``w_b``, then a tree from that
    family's posterior. Every query is the weighted mean of the families'
    exact answers, so it is exact under the mixture. Unlike a trellis over
    the union of the families, no family gets more weight for spanning
    more trees. Cluster ids are the families' vertices, family after
    family (offsets ``start``); a cluster several families hold has one id
    in each, all with the same (mixture) marginal.

    Parameters
    ----------
    trellises : list of SparseTrellis
        Solved trellises over the same points.
    weights : array-like of shape (len(trellises),), default=None
        Positive weights, normalised here; None weighs the families equally.
    """

    def __init__(self, trellises, weights=None):
        trellises = list(trellises)
        if not trellises or not all(isinstance(t, SparseTrellis) for t in trellises):
            raise ValueError("a BaggedTrellis needs one or more SparseTrellis")
        n_points = {t.n_points for t in trellises}
        if len(n_points) != 1:
            raise ValueError(f"the trellises of a BaggedTrellis span trees over different "
                             f"numbers of points, {sorted(n_points)}")
        weights = np.ones(len(trellises)) if weights is None else np.asarray(weights, float)
        if weights.shape != (len(trellises),) or not np.all((weights > 0) & (weights < np.inf)):
            raise ValueError("the weights of a BaggedTrellis must be one positive finite number "
                             "per trellis")
        self.trellises = trellises
        self.log_weights = np.log(weights / weights.sum())
        self.n_points = n_points.pop()
        sizes = [t.n_vertices for t in trellises]
        self.start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self._log_marginals = None

    def __setstate__(self, state):
        # Each trellis checked itself when it was unpickled; the mixture
        # is rebuilt from them and the weights, never read whole from a file.
        owner = "BaggedTrellis"
        if not isinstance(state, dict) or not isinstance(state.get("trellises"), list):
            raise ValueError(f"a pickled {owner} has no list of trellises: the file is "
                             "damaged or was not written by sktrellis")
        log_weights = state.get("log_weights")
        if not (isinstance(log_weights, np.ndarray) and log_weights.dtype == np.float64):
            raise ValueError(f"a pickled {owner} has no float64 log weights: the file is "
                             "damaged or was not written by sktrellis")
        try:
            self.__init__(state["trellises"], np.exp(log_weights))
        except ValueError as error:
            raise ValueError(f"a pickled {owner} is damaged: {error}") from None

    def __getstate__(self):
        return {"trellises": self.trellises, "log_weights": self.log_weights}

    @property
    def best(self):
        """Index of the family holding the MAP tree."""
        return int(np.argmax([t.map_log_potential for t in self.trellises]))

    @property
    def map_log_potential(self):
        return self.trellises[self.best].map_log_potential

    @property
    def log_partition(self):
        """log Z of the first family (the mixture has no single normaliser)."""
        return self.trellises[0].log_partition

    @property
    def n_vertices(self):
        """Distinct clusters over all families (the N points included)."""
        return len(self._clusters()[0])

    @property
    def n_splits(self):
        return sum(t.n_splits for t in self.trellises)

    def n_trees(self):
        """Trees of non-zero potential, counted once in each family that spans them."""
        return sum(t.n_trees() for t in self.trellises)

    def _mix(self, log_values):
        """log sum_b w_b exp(log_values[b])."""
        log_values = np.asarray(log_values, dtype=np.float64) + self.log_weights
        top = np.max(log_values)
        if not top > -np.inf:
            return -np.inf
        return float(min(top + np.log(np.sum(np.exp(log_values - top))), 0.0))

    def cluster_log_marginal(self, members):
        return self._mix([t.cluster_log_marginal(members) for t in self.trellises])

    def subtree_log_probability(self, members, merges):
        return self._mix([t.subtree_log_probability(members, merges) for t in self.trellises])

    def _clusters(self):
        """The first id of each distinct cluster, and the distinct cluster of every id."""
        keys = np.concatenate([np.stack([t.first, t.second], axis=1) for t in self.trellises])
        _, first_id, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        return first_id, inverse.ravel()

    def _distinct(self):
        """The distinct clusters (inverse map of every id) and their mixture marginals."""
        first_id, inverse = self._clusters()
        probability = np.zeros(len(first_id))
        for b, t in enumerate(self.trellises):
            ids = inverse[self.start[b]:self.start[b + 1]]
            np.add.at(probability, ids, np.exp(t.cluster_log_marginals() + self.log_weights[b]))
        return first_id, inverse, probability

    def cluster_log_marginals(self):
        """log P(cluster id is a cluster of the tree) under the mixture (cached)."""
        if self._log_marginals is None:
            _, inverse, probability = self._distinct()
            with np.errstate(divide="ignore"):
                self._log_marginals = np.minimum(np.log(probability), 0.0)[inverse]
        return self._log_marginals

    def _family_of(self, cluster_id):
        family = int(np.searchsorted(self.start, cluster_id, side="right") - 1)
        return family, int(cluster_id - self.start[family])

    def most_probable_clusters(self, n_top, min_size):
        first_id, _, probability = self._distinct()
        size = np.concatenate([t.size for t in self.trellises])[first_id]
        low = np.concatenate([t.low for t in self.trellises])[first_id]
        candidates = np.flatnonzero((size >= min_size) & (size < self.n_points))
        with np.errstate(divide="ignore"):
            values = np.minimum(np.log(probability[candidates]), 0.0)
        # Ties: smaller clusters first, then by lowest point, as in one trellis.
        top = np.lexsort((low[candidates], size[candidates], -values))[:n_top]
        members = []
        for cluster in first_id[candidates[top]]:
            family, vertex = self._family_of(cluster)
            members.append(self.trellises[family].vertex_members(vertex))
        return members, values[top]

    def cluster_sums(self, values):
        return np.concatenate([t.cluster_sums(values) for t in self.trellises])

    def split_blocks(self):
        for b, t in enumerate(self.trellises):
            for parents, lefts, rights, log_probability in t.split_blocks():
                offset = self.start[b]
                yield (parents + offset, lefts + offset, rights + offset,
                       log_probability + self.log_weights[b])

    def draw_families(self, n_samples, random_state):
        """The family of each of ``n_samples`` draws from the mixture."""
        cumulative = np.cumsum(np.exp(self.log_weights))
        uniforms = random_state.random(n_samples) * cumulative[-1]
        return np.minimum(np.searchsorted(cumulative, uniforms, side="right"),
                          len(self.trellises) - 1)

    def sample_linkages(self, n_samples, random_state):
        """Linkage matrices of n_samples trees drawn exactly from the mixture."""
        families = self.draw_families(n_samples, random_state)
        linkages = [None] * n_samples
        for b in np.unique(families):
            draws = np.flatnonzero(families == b)
            for k, linkage in zip(draws, self.trellises[b].sample_linkages(len(draws),
                                                                            random_state)):
                linkages[k] = linkage
        return linkages
