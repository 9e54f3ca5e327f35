"""Transitive propagation (Kumar & Levy 2015): max-sum clustering of pairwise likelihood ratios."""
import warnings
from numbers import Integral, Real

import numpy as np
from scipy.sparse.csgraph import connected_components
from scipy.special import expit
from sklearn.base import BaseEstimator, ClusterMixin, _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import validate_data

from .._engine.tree.conversion import relabel_by_first_appearance
from .._estimator import clears_fit_state_on_failure
from .._engine.resources import check_memory
from .._validation import (
    check_no_overflow,
    check_square_matrix,
    data_sketch,
)

# Max-sum: beliefs above this are scaled down by _RESCALE_BY (powers of two: exact).
_RESCALE_ABOVE = 2.0**64
_RESCALE_BY = 2.0**-64
# Sum-product: log odds beyond +-1e4 are certainties (a probability within
# e**-10000 of 0 or 1); ratios and beliefs are clipped there, so that loopy
# reinforcement of certain pairs cannot overflow the float32 messages.
_LOG_ODDS_CLIP = 1e4
# Sum-product has converged when no pairwise probability moves by more than this.
_SUM_PRODUCT_TOLERANCE = 1e-6
# damping="auto": start at 0.5; each _DAMPING_PATIENCE iterations without
# convergence, halve 1 - damping (0.5, 0.75, 0.875, ...), up to _DAMPING_MAX.
# On noisy reads (p_e >= 0.10) undamped messages let calls oscillate with
# long periods; damped ones settle (benchmarks/bench_tp_convergence.py).
_DAMPING_START = 0.5
_DAMPING_PATIENCE = 25
_DAMPING_MAX = 0.95
# Max-sum has also converged when no call has changed for this many iterations.
_STABLE_CALLS_ITER = 30


def message_bytes(n_points):
    """Bytes of the float32 messages of transitive propagation for n_points.

    Triple {i, j, k} (i < j < k) sends one message to each of its three
    edges. They are stored in one block per smallest point i: an (n, n)
    matrix for the messages to the edges (i, j) from k and an (n, n)
    symmetric matrix for the messages to the edges (j, k) from i, with
    n = N - 1 - i, so 2 * sum_n n**2 ~ 2 N**3 / 3 floats.
    """
    sizes = np.arange(2, max(n_points, 2), dtype=np.int64)
    return 4 * 2 * int(np.sum(sizes * sizes))


def _max_sum_update(p, q, out, work):
    """out = max(0, p + q) - max(0, p, q): a triple's message to its third edge.

    p and q are the beliefs of the triple's other two edges without this
    triple's messages to them; ``work`` is scratch of the same shape.
    """
    np.add(p, q, out=out)
    np.maximum(out, 0, out=out)
    np.maximum(p, q, out=work)
    np.maximum(work, 0, out=work)
    np.subtract(out, work, out=out)
    return out


def _sum_product_update(p, q, out, work):
    """out = log(1 + e^(p + q)) - log(1 + e^p + e^q): the sum-product message.

    The same triple as :func:`_max_sum_update` with sums in place of
    maxima: given the log odds p and q of the other two edges, the allowed
    configurations are all three "same" or the third edge "same" alone
    (numerator, this edge "same") against none, or either other edge alone
    (denominator, this edge "different").
    """
    np.add(p, q, out=out)
    np.logaddexp(out, 0, out=out)
    np.logaddexp(p, q, out=work)
    np.logaddexp(work, 0, out=work)
    np.subtract(out, work, out=out)
    return out


class TransitivePropagation(ClusterMixin, BaseEstimator):
    """Clustering by transitive propagation of pairwise likelihood ratios.

    Given, for every pair of points, the log likelihood ratio ``L_ij = log
    f0(i, j) / f1(i, j)`` of "same cluster" (f0) against "different
    clusters" (f1), looks for the partition maximising the sum of ``L_ij``
    over the pairs inside clusters (the likelihood of the pairwise
    hypotheses under a uniform prior over partitions, Kumar & Levy 2015
    eq. 8) by max-sum message passing on the factor graph of the pairwise
    decisions and their transitivity constraints. In the simplified form of
    the paper's Appendix B there is one message ``A_ijk`` per triple and
    edge and one belief ``B_ij = L_ij + sum_k A_ijk`` per pair; each
    iteration updates every message at once,

        A_ijk <- damping * A_ijk + (1 - damping) * (max(0, P + Q) - max(0, P, Q)),
        P = B_jk - A_jki,  Q = B_ki - A_kij,

    in O(N**3) time, vectorised over all triples. The pair (i, j) is called
    "same cluster" when ``B_ij > 0``, and ``labels_`` are the connected
    components of these calls.

    Loopy max-sum is a heuristic: the result need not be the optimal
    partition, nor its calls transitive (``transitive_``).
    ``ExactFlatClustering(CorrelationClustering(affinity="precomputed", beta=1.0))``
    on the same matrix gives the exact optimum for small N.

    Parameters
    ----------
    damping : float or "auto", default="auto"
        Weight of a message's previous value in each update, in [0, 1); the
        paper's lambda is ``1 - damping``. Larger values damp oscillations
        more but need more iterations. ``"auto"``: 0.5, raised by the data's
        own behaviour: after every 25 iterations without convergence
        ``1 - damping`` is halved (0.75, 0.875, ... up to 0.95), so clear
        problems stop in a few iterations at 0.5 and noisy ones, whose calls
        oscillate undamped, settle (the value reached is ``damping_``).
    max_iter : int, default=200
        Maximum number of iterations.
    convergence_iter : int, default=1000
        The paper's stopping rule with its M = 1000: after each iteration,
        the number of iterations after which the first call would flip if
        every ``B_ij`` kept changing at its current rate is estimated; the
        messages have converged when no call is heading for a flip or the
        first flip is at least ``convergence_iter`` iterations away, and
        the calls are transitive (see Notes). Max-sum has also converged
        when no call has changed for 30 iterations (as
        ``AffinityPropagation``'s ``convergence_iter``), transitive or not
        (``transitive_`` says which).
    method : {"max-sum", "sum-product"}, default="max-sum"
        ``"max-sum"``: the paper's algorithm, for the MAP partition.
        ``"sum-product"``: the extension the paper proposes, loopy belief
        propagation with sums in place of maxima (the same triple messages,
        ``log(1 + e^(P+Q)) - log(1 + e^P + e^Q)``), whose beliefs are the
        log odds of the marginal probability that two points share a
        cluster under ``P(partition) ~ exp(sum of L_ij inside clusters)``:
        ``pairwise_probability_``. Exact when the factor graph is a tree
        (N = 3), approximate (loopy) beyond; stops when no belief moves by
        more than 1e-6 in probability. Log odds are clipped at +-1e4
        (certainties), so ratios beyond that count as certain.
    affinity : {"precomputed"}, default="precomputed"
        X is an (n, n) symmetric matrix of pairwise scores, larger meaning
        more alike, turned into log likelihood ratios by ``threshold``. The
        diagonal is ignored.
    threshold : float, default=0.0
        The meaning of X: the score at which a pair is as likely to share a
        cluster as not. The log likelihood ratios are ``X - threshold``.
        The default 0 takes X as log likelihood ratios ``log f0 / f1``
        (positive: same cluster more likely), as
        :func:`~sktrellis.datasets.make_bit_patterns` gives them. Similarities
        as ``AffinityPropagation(affinity="precomputed")`` takes them, such
        as negative squared distances, are all negative: pass the similarity
        above which two points should be together, e.g.
        ``threshold=-radius**2`` for points closer than ``radius``. The
        max-sum calls do not change when X and threshold are multiplied by
        the same positive factor. When every point ends alone, a UserWarning
        names this parameter.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Cluster of each point, 0..k-1 in order of first appearance.
    beliefs_ : ndarray of shape (n_samples, n_samples)
        Final beliefs ``B_ij``, max-marginal log odds that i and j share a
        cluster; zero diagonal. ``beliefs_ > 0`` are the same-cluster calls.
        Only signs and relative sizes are meaningful: loopy max-sum counts
        evidence many times over, so beliefs grow geometrically with the
        iterations, and they are divided by powers of two whenever they
        exceed 2**64 to stay finite.
    pairwise_probability_ : ndarray of shape (n_samples, n_samples)
        ``method="sum-product"`` only: the approximate marginal probability
        ``sigmoid(beliefs_)`` that i and j share a cluster; ones on the
        diagonal. Compare with ``ExactFlatClustering(CorrelationClustering(
        affinity="precomputed", beta=1.0)).fit(X - threshold)
        .pairwise_probability_``, the exact value of the same distribution.
    transitive_ : bool
        Whether the pairwise calls form a partition (every pair of points
        within a connected component is called "same cluster"). When False,
        ``labels_`` merged some pairs that the messages called different.
    objective_ : float
        Sum of ``L_ij = X_ij - threshold`` over the pairs i < j inside the clusters of
        ``labels_``: the log likelihood ratio of the partition against all
        singletons, the objective that transitive propagation maximises.
    n_iter_ : int
        Number of iterations run.
    converged_ : bool
        Whether the stopping rule was met before ``max_iter``.
    damping_ : float
        The damping of the last iteration: ``damping``, or where
        ``damping="auto"`` raised it.
    n_features_in_ : int
        Number of columns of X (n_samples).

    See Also
    --------
    sktrellis._flat.ExactFlatClustering : The exact optimum and pairwise
        marginals of the same objective for small N, with
        ``CorrelationClustering(affinity="precomputed", beta=1.0)`` on ``X - threshold``.
    PerturbAndMAPClustering : Perturb-and-MAP estimates of the same pairwise
        marginals.
    sklearn.cluster.AffinityPropagation : Message passing over exemplars,
        taking similarities.

    Notes
    -----
    Orientation: the paper writes the evidence as ``log f1 / f0`` (its H = 1
    means "different"), but with that orientation its simplified update is
    not the max-sum message of its eqs. 12-14 (eq. 38 maximises over the
    configurations allowed for a "same" edge). The update above is exact
    when A and B are log odds of "same cluster", which is the orientation
    used here; the tests check it against the two-state messages.

    Stopping: the paper's rule alone (no call flipping within
    ``convergence_iter`` iterations at the current rate of change) can stop
    after the first iteration, when every belief still moves away from
    zero although the next round of messages flips some; convergence here
    also requires the calls to be transitive.

    Memory: the messages are float32, 2 * sum_{n=2}^{N-1} n**2 ~ 2 N**3 / 3
    of them: 2.5 GiB for N = 1,000, 20 MiB for N = 200. A larger N than
    the available memory allows is refused with a ValueError. An iteration
    makes about 15 NumPy passes over the messages.

    References
    ----------
    V. Kumar, D. Levy. Clustering by transitive propagation. arXiv
    1506.03072, 2015.

    Examples
    --------
    >>> import numpy as np
    >>> from sktrellis.baselines import TransitivePropagation
    >>> L = np.array([[0.0, 3.0, -1.0],
    ...               [3.0, 0.0, 3.0],
    ...               [-1.0, 3.0, 0.0]])
    >>> model = TransitivePropagation().fit(L)
    >>> model.labels_.tolist()
    [0, 0, 0]
    >>> model.objective_
    5.0
    """

    _parameter_constraints = {
        "damping": [Interval(Real, 0.0, 1.0, closed="left"), StrOptions({"auto"})],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "convergence_iter": [Interval(Integral, 1, None, closed="left")],
        "method": [StrOptions({"max-sum", "sum-product"})],
        "affinity": [StrOptions({"precomputed"})],
        "threshold": [Real],
    }

    def __init__(self, *, damping="auto", max_iter=200, convergence_iter=1000, method="max-sum",
                 affinity="precomputed", threshold=0.0):
        self.damping = damping
        self.max_iter = max_iter
        self.convergence_iter = convergence_iter
        self.method = method
        self.affinity = affinity
        self.threshold = threshold

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = True
        return tags

    @clears_fit_state_on_failure
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Pass messages until the pairwise calls are stable and cluster.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_samples)
            Symmetric pairwise scores; ``X - threshold`` are the log
            likelihood ratios ``log f0(i, j) / f1(i, j)``.
        y : Ignored
            Not used, present for API consistency.

        Returns
        -------
        self : object
            Fitted estimator.
        """
        X = validate_data(self, X, dtype=np.float64)
        self._fit_sketch = data_sketch(X)
        llr = check_square_matrix(X, "log likelihood ratio", allow_negative=True)
        if self.threshold != 0:
            with np.errstate(over="ignore"):
                llr = llr - self.threshold
            if not np.all(np.isfinite(llr)):
                raise ValueError(
                    f"X - threshold overflows float64 (threshold={self.threshold!r}); "
                    "rescale X and threshold together"
                )
        # objective_ sums up to all of them.
        check_no_overflow(
            np.abs(llr).sum(), "TransitivePropagation", "the sum of the |log likelihood ratios|",
            "rescale X",
        )
        n_points = len(llr)
        check_memory(n_points, message_bytes(n_points), "TransitivePropagation",
                     holds="~2 N**3 / 3 float32 messages", way_out="use fewer points")
        beliefs, self.n_iter_, self.converged_, self.damping_ = self._pass_messages(llr)
        if not self.converged_:
            warnings.warn(
                f"TransitivePropagation did not converge in max_iter={self.max_iter} "
                f"iterations (damping {self.damping_:.3g}): some pairwise calls are still "
                "changing; increase max_iter or damping",
                ConvergenceWarning,
            )
        same = beliefs > 0
        np.fill_diagonal(same, True)
        _, labels = connected_components(same, directed=False)
        # By first appearance, so labels do not depend on the graph search.
        self.labels_ = relabel_by_first_appearance(labels)
        together = self.labels_[:, None] == self.labels_[None, :]
        self.transitive_ = bool(np.array_equal(same, together))
        self.objective_ = float(np.triu(np.where(together, llr, 0.0), 1).sum())
        self.beliefs_ = beliefs
        if n_points > 1 and self.labels_.max() == n_points - 1:
            self._warn_all_alone(llr)
        if self.method == "sum-product":
            self.pairwise_probability_ = expit(beliefs)
            np.fill_diagonal(self.pairwise_probability_, 1.0)
        return self

    def _warn_all_alone(self, llr):
        """Every point in its own cluster: most often scores of the wrong meaning."""
        n_points = len(llr)
        off_diagonal = llr[~np.eye(n_points, dtype=bool)]
        n_positive = int(np.count_nonzero(off_diagonal > 0)) // 2
        warnings.warn(
            f"TransitivePropagation put each of the n_samples={n_points} points in a "
            f"cluster of its own: {n_positive} of the {n_points * (n_points - 1) // 2} "
            f"pairs have X - threshold > 0 (threshold={self.threshold!r}). If X holds "
            "similarities rather than log likelihood ratios (for instance negative "
            "squared distances, as AffinityPropagation takes), set threshold to the "
            "similarity above which two points belong together: threshold=-r**2 joins "
            "points closer than r",
            UserWarning,
        )

    def _stable(self, beliefs, change):
        """The stopping rule: no call flips soon and the calls are a partition.

        The paper's rule: m = -min B_ij / Delta B_ij over the calls heading
        for a flip (B and its change of opposite signs) is the number of
        iterations until the first flip at the current rate; stop when there
        is none or m >= convergence_iter. On its own it can stop while the
        calls are not yet transitive (typically after the first iteration,
        when every belief is still growing away from zero although the next
        round of messages will flip some), so the calls must also form a
        partition.
        """
        heading = beliefs * change < 0
        if heading.any() and np.min(-beliefs[heading] / change[heading]) < self.convergence_iter:
            return False
        same = beliefs > 0
        np.fill_diagonal(same, True)
        _, labels = connected_components(same, directed=False)
        return bool(np.array_equal(same, labels[:, None] == labels[None, :]))

    def _pass_messages(self, llr):
        """Run the message updates; returns (B, n_iter, converged, damping)."""
        n_points = len(llr)
        auto = self.damping == "auto"
        damping = _DAMPING_START if auto else self.damping
        step = np.float32(1.0 - damping)
        # B_ij = L_ij + sum_k A_ijk, all messages starting at zero. The
        # update is positively homogeneous, so the evidence is first divided
        # by the power of two that brings its largest entry near 1 (exact,
        # and no call changes): float32 messages then neither overflow on
        # ratios of 1e38 nor underflow on ratios of 1e-300.
        #
        # Sum-product is not homogeneous: the ratios are used as given,
        # clipped where they are certainties anyway.
        evidence = llr.copy()
        np.fill_diagonal(evidence, 0.0)
        sum_product = self.method == "sum-product"
        update = _sum_product_update if sum_product else _max_sum_update
        if sum_product:
            np.clip(evidence, -_LOG_ODDS_CLIP, _LOG_ODDS_CLIP, out=evidence)
            shift = 0
        else:
            largest = np.max(np.abs(evidence)) if evidence.size else 0.0
            shift = int(np.frexp(largest)[1]) if largest > 0 else 0
            evidence = np.ldexp(evidence, -shift)
        sizes = np.arange(n_points - 1, 1, -1)   # n = N - 1 - i for blocks i = 0..N-3
        messages = np.zeros(2 * int(np.sum(sizes * sizes)), dtype=np.float32)
        blocks, offset = [], 0
        for n in sizes:
            to_ij = messages[offset : offset + n * n].reshape(n, n)
            to_jk = messages[offset + n * n : offset + 2 * n * n].reshape(n, n)
            blocks.append((to_ij, to_jk))
            offset += 2 * n * n

        beliefs = evidence.copy()
        # Scratch for one block, reused by every block (no allocation per block).
        scratch = np.empty((5, max(n_points - 1, 0) ** 2), dtype=np.float32)
        converged = False
        n_iter = 0
        calls, unchanged = beliefs > 0, 0
        for n_iter in range(1, self.max_iter + 1):
            if auto and n_iter % _DAMPING_PATIENCE == 1 and n_iter > 1:
                damping = min(1.0 - (1.0 - damping) / 2, _DAMPING_MAX)
                step = np.float32(1.0 - damping)
            current = beliefs.astype(np.float32)
            updated = evidence.copy()
            for i, (to_ij, to_jk) in enumerate(blocks):
                # Block i holds the triples {i, j, k}, i < j, k: to_ij[j, k] is
                # the message to edge (i, j) from k, to_jk[j, k] to edge (j, k)
                # from i (indices shifted by i + 1). A triple's new messages
                # depend only on its own old ones and B, so blocks update in place.
                n = len(to_ij)
                edge_ij, edge_ji, edge_jk, new, work = (
                    array[: n * n].reshape(n, n) for array in scratch
                )
                np.subtract(current[i, i + 1 :, None], to_ij, out=edge_ij)  # B_ij - A_ijk
                np.copyto(edge_ji, edge_ij.T)                                # B_ik - A_ikj
                np.subtract(current[i + 1 :, i + 1 :], to_jk, out=edge_jk)  # B_jk - A_jki
                for block, (p, q) in ((to_ij, (edge_jk, edge_ji)), (to_jk, (edge_ij, edge_ji))):
                    # block <- damping * block + (1 - damping) * new message
                    update(p, q, new, work)
                    new -= block
                    new *= step
                    block += new
                    np.fill_diagonal(block, 0.0)
                sums = to_ij.sum(axis=1, dtype=np.float64)
                updated[i, i + 1 :] += sums
                updated[i + 1 :, i] += sums
                updated[i + 1 :, i + 1 :] += to_jk
            change = updated - beliefs
            beliefs = updated
            if sum_product:
                np.clip(beliefs, -_LOG_ODDS_CLIP, _LOG_ODDS_CLIP, out=beliefs)
                moved = np.abs(expit(beliefs) - expit(beliefs - change))
                if not moved.size or moved.max() <= _SUM_PRODUCT_TOLERANCE:
                    converged = True
                    break
                continue
            if np.abs(beliefs).max() > _RESCALE_ABOVE:
                # On a dense loopy graph with hard constraints the beliefs grow
                # geometrically (each sums N - 2 messages of their own size);
                # the update is positively homogeneous, so scaling messages,
                # beliefs and evidence by a power of two changes no call (and
                # is exact) while keeping float32 far from overflow.
                for array in (beliefs, change, evidence, messages):
                    array *= _RESCALE_BY
            if self._stable(beliefs, change):
                converged = True
                break
            unchanged = unchanged + 1 if np.array_equal(beliefs > 0, calls) else 0
            calls = beliefs > 0
            if unchanged >= _STABLE_CALLS_ITER:
                converged = True
                break
        np.fill_diagonal(beliefs, 0.0)
        # Back to the units of the input where float64 can hold them (the
        # loop's own rescaling already leaves only their ratios meaningful).
        largest = np.max(np.abs(beliefs)) if beliefs.size else 0.0
        headroom = 1000 - int(np.frexp(largest)[1]) if largest > 0 else shift
        return np.ldexp(beliefs, min(shift, headroom)), n_iter, converged, float(damping)
