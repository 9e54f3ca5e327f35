"""How the trellises drive their kernels level by level: one policy for all.

Every exact pass processes the subsets of one size ("a level") at a time,
in kernel calls estimated to take at most CHUNK_SECONDS on one thread (and
of at most CHUNK_TERMS terms), so KeyboardInterrupt, the deadline and the
progress bar (LevelProgress) come every fraction of a second whatever a term
costs (a Ginkgo split twenty times a separable one); and a call
runs on one thread below PARALLEL_MIN_TERMS terms, where waking a team of
threads costs more than the work (badly so when the other cores are busy).
"""
import contextlib
import contextvars
import math
import sys
import time

import numpy as np
from tqdm import tqdm

from .._subsets import subsets_by_size

#: A kernel call handles at most about this many terms (splits, or
#: (subset, cluster) pairs)...
CHUNK_TERMS = 1 << 28
#: ... and at most as many as one thread does in this many seconds at the
#: rates of SECONDS_PER_TERM: Ctrl-C is answered within about this long
#: (longer on a loaded machine, whose rate is lower).
CHUNK_SECONDS = 0.25
#: A call of at least this many terms measures the pass's rate (``calls``).
MEASURED_MIN_TERMS = 1 << 16
#: Below this many terms a kernel call runs on one thread.
PARALLEL_MIN_TERMS = 1 << 16
#: One thread's seconds per term, for the estimate that opens a pass's
#: progress: the quiet-machine rates of benchmarks/README.md (2-core AMD
#: EPYC VM, one thread, N = 16-22): 1.0 ns per split of a separable
#: potential with the cache-blocked passes (Dasgupta, N = 21-22; the outside
#: pass about 1.2-1.45x that), 20 ns for a function potential (a user's
#: function may be cheaper or dearer), 3 ns for the Ginkgo inside pass of
#: one vectorised pass per split (a 24-particle jet's pass took 211 s on two
#: quiet threads, 3.0 ns a split, its largest subsets out of cache; about 2x
#: the separable rate at N = 18-22; its outside pass, unchanged, about 1.5x
#: that, so the outside pass's first line is optimistic),
#: 1.0 ns per (subset, cluster) pair of the cache-blocked flat inside pass
#: and 0.6 ns of its MAP-only pass (N = 18-20, one thread, CPU time on the
#: Intel VM, loaded), 3-5 ns for its cluster-count pass. On a loaded machine
#: passes run several times slower (24 ns per separable split measured
#: under a load of 15 on 2 cores): the first line is an estimate, the bar's
#: time left is measured.
SECONDS_PER_TERM = {"separable": 1e-9, "generic": 20e-9, "flat": 1.2e-9, "flat count": 5e-9,
                    "flat map": 0.7e-9, "ginkgo": 3e-9}
#: With verbose=1 progress shows only for
#: passes estimated to take at least this long: the point where one wonders
#: whether the fit hangs, while quick fits (grid searches, fit_many) stay quiet.
PROGRESS_MIN_SECONDS = 10.0


class DeadlinePassed(Exception):
    """A pass stopped between two kernel calls: its deadline passed, or would have.

    The pass gives up as soon as it has passed its deadline, or earlier,
    once a quarter of its terms is done, when the rate of its last
    sixteenth says it would finish after it. Not sooner: the levels of
    small subsets can run at a third of the rate of the middle ones (a
    Ginkgo pass over 22 points ran at 80-280 M splits a second up to
    subsets of 11 points, 500 M later), and a projection from them gave
    up passes that would have ended in time. From a quarter on the rate
    is that of the middle levels, and mostly optimistic (the levels of
    larger subsets, still to come, miss the cache more), so a pass that
    gives up early is unlikely to have finished in time. A pass whose
    last kernel call ends past the deadline has finished: it keeps its
    result.
    """


def threads_for(n_terms, n_threads):
    """Threads worth using for a kernel call over n_terms terms."""
    return n_threads if n_terms >= PARALLEL_MIN_TERMS else 1


def chunk_terms(seconds_per_term):
    """Terms per kernel call at this cost per term (CHUNK_SECONDS, at most CHUNK_TERMS)."""
    return max(1, min(CHUNK_TERMS, int(CHUNK_SECONDS / seconds_per_term)))


def chunk_size(terms_per_subset, seconds_per_term=SECONDS_PER_TERM["separable"]):
    """Subsets per kernel call at this many terms each, each term costing this long."""
    return max(1, chunk_terms(seconds_per_term) // max(1, terms_per_subset))


def level_terms(n_points, sizes, terms_per_subset):
    """Terms of a pass over the levels `sizes`: C(N, size) subsets each."""
    return sum(math.comb(n_points, size) * terms_per_subset(size) for size in sizes)


def _duration(seconds):
    if seconds < 60:
        return f"{seconds:.2g} s"
    if seconds < 3600:
        return f"{seconds / 60:.2g} min"
    return f"{seconds / 3600:.2g} h"


def format_bytes(n_bytes):
    """``n_bytes`` in words for a message: bytes, or KiB ... PiB with one decimal."""
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n_bytes < 1024 or unit == "PiB":
            return f"{n_bytes:.0f} {unit}" if unit == "bytes" else f"{n_bytes:.1f} {unit}"
        n_bytes /= 1024


class LevelProgress:
    """Progress of one level-by-level pass: a first line with its cost, then a tqdm bar.

    The first line gives the pass's terms, an estimate of its time --
    terms x `seconds_per_term` (a calibration constant, see
    SECONDS_PER_TERM) / threads -- and the memory it needs; the bar (on
    stderr) then counts terms and gives the time left at the rate measured
    so far. Shown when ``verbose >= 2``, or when ``verbose == 1`` and the
    estimate is at least PROGRESS_MIN_SECONDS; otherwise nothing is
    printed. Use as a context manager so an interrupted pass closes its bar.

    Parameters
    ----------
    owner : str
        Name at the start of the lines (the estimator).
    stage : str
        What the pass computes.
    n_points : int
    n_terms : int
        Terms of the whole pass (splits, or (subset, cluster) pairs).
    unit : str
        What a term is, for the bar.
    seconds_per_term : float
        One thread's time per term, for the first line's estimate.
    n_threads : int
    n_bytes : int
        Memory of the tables the pass fills.
    verbose : int
    peak_bytes : int, default=None
        Memory of all queries after the pass too, if more.
    deadline : float, default=None
        A ``time.perf_counter()`` value: ``update`` raises DeadlinePassed
        once it has passed, so the pass stops within one kernel call of it
        (at most about CHUNK_SECONDS), or once the pass is seen not to make
        it (see DeadlinePassed). None: no deadline.
    """

    def __init__(self, owner, stage, n_points, n_terms, unit, seconds_per_term,
                 n_threads, n_bytes, verbose, peak_bytes=None, deadline=None):
        self.n_points = n_points
        self.deadline = deadline
        self.n_terms = n_terms
        # (terms done, time) after each kernel call, for the recent rate.
        self.checkpoints = [(0, time.perf_counter())]
        # Seconds per term of the last kernel call, if it was long enough to measure.
        self.measured_rate = None
        estimate = n_terms * seconds_per_term / max(1, n_threads)
        self.bar = None
        if not (verbose >= 2 or (verbose and estimate >= PROGRESS_MIN_SECONDS)):
            return
        tqdm.write(
            f"[{owner}] {stage} over the 2**{n_points} subsets of n_samples={n_points}: "
            f"{n_terms:.3g} {unit}s, about {_duration(estimate)} on {n_threads} "
            f"thread{'s' if n_threads > 1 else ''}, memory {format_bytes(n_bytes)}"
            + (f" (up to {format_bytes(peak_bytes)} with posterior queries)" if peak_bytes else ""),
            file=sys.stderr,
        )
        self.bar = tqdm(
            total=n_terms, desc=f"[{owner}] {stage}", unit=unit, unit_scale=True,
            file=sys.stderr, mininterval=0.5, dynamic_ncols=True,
        )

    def level(self, size):
        """Say which level runs now."""
        if self.bar is not None:
            self.bar.set_postfix_str(f"subsets of size {size}/{self.n_points}", refresh=False)

    @property
    def done(self):
        """Terms done so far (the sum of ``update``'s)."""
        return self.checkpoints[-1][0]

    def rate(self, seconds_per_term):
        """Seconds per term of the pass's last kernel call, if it was long enough to measure.

        Else ``seconds_per_term`` (the calibration rate). A loaded machine,
        or a potential dearer than its calibration rate, makes the next
        calls smaller.
        """
        return seconds_per_term if self.measured_rate is None else self.measured_rate

    def calls(self, items, terms_per_item, seconds_per_term):
        """``items`` in consecutive slices, one kernel call each, of about CHUNK_SECONDS.

        Each slice is sized by ``rate`` when it is asked for. The caller
        runs each slice and then calls ``update``.
        """
        first = 0
        while first < len(items):
            size = max(1, chunk_terms(self.rate(seconds_per_term)) // max(1, terms_per_item))
            yield items[first : first + size]
            first += size

    def update(self, n_terms, kernel_call=True):
        """Count terms done; raise DeadlinePassed if the pass will not end by its deadline.

        `kernel_call`: the terms are those of the kernel call that just
        ended, whose rate then sizes the next calls (``rate``); False for
        terms counted without a call (a level with nothing to compute).
        """
        if self.bar is not None:
            self.bar.update(n_terms)
        now = time.perf_counter()
        then = self.checkpoints[-1][1]
        if kernel_call:
            self.measured_rate = (
                (now - then) / n_terms if n_terms >= MEASURED_MIN_TERMS and now > then else None)
        done = self.checkpoints[-1][0] + n_terms
        self.checkpoints.append((done, now))
        if self.deadline is None or done >= self.n_terms:
            return
        finish = now
        if 4 * done >= self.n_terms:
            # The rate over the last sixteenth of the terms (at least one).
            window = done - max(1, self.n_terms // 16)
            since, then = next(point for point in reversed(self.checkpoints)
                               if point[0] <= window)
            finish += (now - then) / (done - since) * (self.n_terms - done)
        if finish >= self.deadline:
            raise DeadlinePassed(
                f"{done} of {self.n_terms} terms of a pass over n_samples={self.n_points} "
                f"done in {now - self.checkpoints[0][1]:.3g} s: it would end at least "
                f"{finish - self.deadline:.3g} s past its deadline")

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        if self.bar is not None:
            self.bar.close()


# Who reports a model's own long computations (a DPM's per-subset
# statistics, before any pass), and how verbosely: set by the estimator's
# fit, read where the model computes, so that the energy protocol
# (``cluster_potential(X)``) needs no verbosity argument.
_REPORTER = contextvars.ContextVar("sktrellis_reporter", default=("sktrellis", 0))


@contextlib.contextmanager
def reporting(owner, verbose):
    """Within this block, ``model_progress`` reports as `owner` at `verbose`."""
    token = _REPORTER.set((owner, verbose))
    try:
        yield
    finally:
        _REPORTER.reset(token)


def model_progress(stage, n_points, n_terms, unit, seconds_per_term, n_bytes):
    """A LevelProgress for a model's own computation, as the estimator fitting it reports.

    Single-threaded (NumPy); silent outside ``reporting`` (verbose 0).
    """
    owner, verbose = _REPORTER.get()
    return LevelProgress(owner, stage, n_points, n_terms, unit, seconds_per_term, 1,
                         n_bytes, verbose)


class RowBlocks:
    """The work items of the cache-blocked passes, level by level.

    A subset S is (S_hi, S_lo) with S_lo its low `bits` bits. An item is a
    high part S_hi and a size j of the low part: the subsets
    (S_hi << bits) | S_lo for every j-point S_lo, which the blocked kernels
    (``_hierarchical.pyx``, ``_flat.pyx``) finish together, one pair of rows
    at a time.
    """

    def __init__(self, n_points, bits, seconds_per_term=SECONDS_PER_TERM["separable"]):
        self.n_points = n_points
        self.bits = bits
        self.seconds_per_term = seconds_per_term
        self.n_high = n_points - bits
        self.high_order, self.high_start = subsets_by_size(self.n_high)
        self.low_order, self.low_start = subsets_by_size(bits)

    def _items(self, size, low_sizes):
        """(high_parts, low_sizes) of every item of subsets of `size` with those low sizes."""
        high_parts, item_low_sizes = [], []
        for low_size in low_sizes:
            high_size = size - low_size
            if 0 <= high_size <= self.n_high:
                level = self.high_order[self.high_start[high_size] : self.high_start[high_size + 1]]
                high_parts.append(level)
                item_low_sizes.append(np.full(len(level), low_size, dtype=np.int64))
        return np.concatenate(high_parts), np.concatenate(item_low_sizes)

    def _calls(self, high_parts, low_sizes, work, progress):
        """The items in kernel calls of about CHUNK_SECONDS each (at least one item each).

        Each call is sized when it is asked for, by ``progress.rate`` (the
        rate the pass's last call measured; the caller runs each call and
        then updates `progress` with its terms), or without `progress` by
        the calibration rate. Largest items first, so the threads' last
        items are the short ones.
        """
        by_work = np.argsort(-work, kind="stable")
        high_parts, low_sizes, work = high_parts[by_work], low_sizes[by_work], work[by_work]
        starts = np.cumsum(work) - work
        first = 0
        while first < len(work):
            rate = self.seconds_per_term if progress is None else progress.rate(
                self.seconds_per_term)
            # The items that start within the call's terms.
            stop = first + int(np.searchsorted(starts[first:] - starts[first],
                                               chunk_terms(rate), side="left"))
            yield high_parts[first:stop], low_sizes[first:stop]
            first = stop

    def inside_calls(self, size, progress=None):
        """Items of the parents of `size` with S_lo not empty, in calls.

        An item has 2**|S_hi| C(bits, j) 2**(j - 1) splits.
        """
        high_parts, low_sizes = self._items(size, range(1, min(self.bits, size) + 1))
        high_sizes = size - low_sizes
        work = (2.0 ** high_sizes * _comb(self.bits, low_sizes) * 2.0 ** (low_sizes - 1))
        return self._calls(high_parts, low_sizes, work, progress)

    def outside_calls(self, size, progress=None):
        """Items of the clusters of `size`, in calls.

        An item has 2**(N - |C|) C(bits, j) (parent, sibling) terms.
        """
        high_parts, low_sizes = self._items(size, range(0, min(self.bits, size) + 1))
        work = 2.0 ** (self.n_points - size) * _comb(self.bits, low_sizes)
        return self._calls(high_parts, low_sizes, work, progress)

    def outside_scratch(self, n_threads):
        """Per-thread weights of `outside_level_blocked`, for any cluster size."""
        return np.empty((n_threads, math.comb(self.bits, self.bits // 2) * (self.n_points + 2)))

    def n_subsets(self, low_sizes, without_lowest=False):
        """Number of subsets in the items of these low-part sizes (C(bits, j) each).

        `without_lowest`: only those without point 0 (C(bits - 1, j) each),
        the subsets the flat passes of ``flat_trellis._reached`` count.
        """
        return int(_comb(self.bits - without_lowest, low_sizes).sum())

    def high_only_parents(self, size):
        """Parents of `size` with no low bit (S_lo empty)."""
        if size > self.n_high:
            return self.high_order[:0]
        level = self.high_order[self.high_start[size] : self.high_start[size + 1]]
        return level << np.uint32(self.bits)


def _comb(n, ks):
    return np.array([math.comb(n, int(k)) for k in ks], dtype=np.float64)
