"""How the trellises drive their kernels level by level: one policy for all.

Every exact pass processes the subsets of one size ("a level") at a time,
in kernel calls of at most CHUNK_TERMS terms, so KeyboardInterrupt and the
progress bar (LevelProgress) come every fraction of a second; and a call
runs on one thread below PARALLEL_MIN_TERMS terms, where waking a team of
threads costs more than the work (badly so when the other cores are busy).
"""
import math
import sys

from tqdm import tqdm

#: A kernel call handles at most about this many terms (splits, or
#: (subset, cluster) pairs).
CHUNK_TERMS = 1 << 28
#: Below this many terms a kernel call runs on one thread.
PARALLEL_MIN_TERMS = 1 << 16
#: One thread's seconds per term, for the estimate that opens a pass's
#: progress: the quiet-machine rates of benchmarks/README.md (2-core AMD
#: EPYC VM, one thread, N = 16-22): 1.0 ns per split of a separable
#: potential with the cache-blocked passes (Dasgupta, N = 21-22; the outside
#: pass about 1.2-1.45x that), 19 ns for
#: Ginkgo's function potential (a user's function may be cheaper or dearer),
#: 2.2 ns per (subset, cluster) pair of the flat inside pass and 3-5 ns for
#: its cluster-count pass. On a loaded machine passes run several times
#: slower (24 ns per separable split measured under a load of 15 on 2
#: cores): the first line is an estimate, the bar's time left is measured.
SECONDS_PER_TERM = {"separable": 1e-9, "generic": 20e-9, "flat": 2.5e-9, "flat count": 5e-9,
                    "flat map": 1.5e-9}
#: With verbose=1 (the exact estimators' default) progress shows only for
#: passes estimated to take at least this long: the point where one wonders
#: whether the fit hangs, while quick fits (grid searches, fit_many) stay quiet.
PROGRESS_MIN_SECONDS = 10.0


def threads_for(n_terms, n_threads):
    """Threads worth using for a kernel call over n_terms terms."""
    return n_threads if n_terms >= PARALLEL_MIN_TERMS else 1


def chunk_size(terms_per_subset):
    """Subsets per kernel call at this many terms each."""
    return max(1, CHUNK_TERMS // max(1, terms_per_subset))


def level_terms(n_points, sizes, terms_per_subset):
    """Terms of a pass over the levels `sizes`: C(N, size) subsets each."""
    return sum(math.comb(n_points, size) * terms_per_subset(size) for size in sizes)


def _duration(seconds):
    if seconds < 60:
        return f"{seconds:.2g} s"
    if seconds < 3600:
        return f"{seconds / 60:.2g} min"
    return f"{seconds / 3600:.2g} h"


def _size(n_bytes):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.3g} {unit}"
    return f"{n_bytes} B"


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
    """

    def __init__(self, owner, stage, n_points, n_terms, unit, seconds_per_term,
                 n_threads, n_bytes, verbose, peak_bytes=None):
        self.n_points = n_points
        estimate = n_terms * seconds_per_term / max(1, n_threads)
        self.bar = None
        if not (verbose >= 2 or (verbose and estimate >= PROGRESS_MIN_SECONDS)):
            return
        tqdm.write(
            f"[{owner}] {stage} over the 2**{n_points} subsets of n_samples={n_points}: "
            f"{n_terms:.3g} {unit}s, about {_duration(estimate)} on {n_threads} "
            f"thread{'s' if n_threads > 1 else ''}, memory {_size(n_bytes)}"
            + (f" (up to {_size(peak_bytes)} with posterior queries)" if peak_bytes else ""),
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

    def update(self, n_terms):
        """Count terms done."""
        if self.bar is not None:
            self.bar.update(n_terms)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        if self.bar is not None:
            self.bar.close()
