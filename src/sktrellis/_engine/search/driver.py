"""Scheduling the best-first search: its budget, the incumbent, the race with the trellis.

The estimator validates and builds the energy's objects; this module decides
how the search spends its time and memory and returns what it ended with.
"""
import time
from dataclasses import dataclass
from functools import partial
from typing import Callable

import numpy as np

from .. import resources
from ._best_first import BestFirstSearch
from ..trellis.hierarchical_trellis import HierarchicalTrellis, inside_pass_seconds
from ..trellis.levels import DeadlinePassed


# Longest the search kernel runs between two checks of the budget and Ctrl-C.
_SLICE_SECONDS = 0.1
# The revision of every cluster's log Z bracket at the end of a run
# (``final_log_partition_bounds``) gets what is left of the budget, and at
# least this long: it takes milliseconds on the graphs a minute's search
# stores (11 ms for 484,399 clusters of a 20-particle jet, measured in
# benchmarks/README.md), so a run at its deadline still ends with the
# narrowest bracket its graph gives, and late by at most this.
_LEAST_REFRESH_SECONDS = _SLICE_SECONDS
# The log Z search's stop reads the root's bracket after a revision of
# every cluster's bracket from its parts (``BestFirstSearch.
# log_partition_bounds``): a walk revises only its own path, so a part it
# narrowed leaves its other parents as wide as before. The revisions
# between slices take about this share of the time: after one of c
# seconds the walks run for c / share before the next (the graph, and so
# the next revision's cost, grows meanwhile), so the stop comes at most a
# slice plus 100 c after the revised bracket is within tol (c is
# under a millisecond on small graphs, 8-11 ms for 300,000-500,000
# clusters of a 20-particle jet). Measured (benchmarks/README.md): where
# a tol of 0.01-1 nats could be reached, near the end the walked bracket
# was within 0.3 nats of the revised one and reached tol after as many
# walks; on a 25-particle jet the revised bracket was within 80 nats after
# the first slice, the walked one not in 40 s. At a share of 5 % the
# revisions took 3-4 % of a time-bound run's CPU time.
_REVISION_SHARE = 0.01
# Share of the memory this process can still allocate (the tightest of
# host, RLIMIT_AS and cgroup, as the exact estimators' guard finds it) that
# the search's states may take by default, leaving the rest to the process
# and to the trellis that algorithm="auto" may hand over to; 2 GiB when no
# limit is readable. Then a state's size besides its penalties (heap record
# and container slack; measured: 76 bytes for Ginkgo, whose states carry
# none), and its penalties' size per point of the search, with the
# generators' pools growing by doubling (measured peaks over 1M Dasgupta
# states: 627 bytes a state at N = 40, 1,116 at N = 64; this gives 784 and
# 1,216).
_MEMORY_SHARE = 0.5
_UNKNOWN_MEMORY = 2 * 2**30
# The default time budget: a fit at its defaults returns within about a
# minute (plus the incumbent's fit), with the certified gap it reached.
DEFAULT_MAX_TIME = 60.0
_STATE_BYTES = 64
_PENALTY_BYTES_PER_POINT = 18
# Clusters solved exactly by default when bracketing log Z, unless the
# bound has an exact size of its own (Ginkgo's 12: its splits cost 20-28 ns
# each): 14 points, 3**14 / 2 = 2.4M splits at about a nanosecond each.
# Measured on Dasgupta at beta 2 with 60 s (benchmarks/README.md): 14
# brings blobs and a planted hierarchy of 32 and 48 points within 0.5
# nats; 12 stopped blobs of 48 at the state cap 2.9 nats wide, 16 left the
# planted 48 7.8 nats wide (each exact solve of 16 points is 9x dearer).
_LOG_PARTITION_EXACT_SIZE = 14
# The trellis is started only while this many times its estimated time is
# left: the estimate is the quiet-machine rate, and large passes run
# slower once their tables leave the cache.
_TRELLIS_MARGIN = 1.25


@dataclass(frozen=True)
class TrellisFallback:
    """The exact trellis over every subset, which the search may hand over to.

    Built by the caller, who knows the energy and the host; the driver only
    decides when to try it.

    Parameters
    ----------
    rate : {"separable", "generic", "ginkgo"}
        The kind of potential, for ``inside_pass_seconds``.
    fits : callable
        ``() -> bool``: whether the trellis's tables fit in the memory
        available now (asked at the start and again after the search).
    split_potential : callable
        ``() -> potential``: the split potential the trellis runs on, built
        only if the trellis runs.
    n_threads : int
        OpenMP threads of the trellis.
    """

    rate: str
    fits: Callable[[], bool]
    split_potential: Callable[[], object]
    n_threads: int = 1


@dataclass
class SearchResult:
    """What a driven search ended with.

    Attributes
    ----------
    stop_reason : {"optimal", "max_time", "max_states", "interrupted"}
        "optimal": the MAP proven (or the log Z bracket, as revised between
        slices, within ``tol``), by the search or by the trellis.
    search : BestFirstSearch or None
        The search graph, or None when the trellis solved the set (its
        states are then freed).
    trellis : HierarchicalTrellis or None
        The trellis over every subset when it solved the set; its
        feasibility is for the caller to check (it knows the energy).
    incumbent_log_potential : float
        Log potential of the tree the search started from.
    n_iterations, n_expanded, n_splits, n_clusters_stored : int
        The search's counts at its end.
    max_states : int
        The state cap the search ran under.
    trellis_note : str
        Why the trellis did not take over when it was tried and would not
        end in time, for the caller's message; empty otherwise.
    seconds : float
        Wall time from the start of the budget (incumbent included).
    log_partition_bounds : tuple of float
        The search's certified log Z bracket at its end
        (``final_log_partition_bounds``) with ``bracket_log_partition``;
        otherwise, or when the trellis solved the set (its
        ``log_partition`` is exact), ``(-inf, inf)``.
    """

    stop_reason: str
    search: object
    trellis: object
    incumbent_log_potential: float
    n_iterations: int
    n_expanded: int
    n_splits: int
    n_clusters_stored: int
    max_states: int
    trellis_note: str = ""
    seconds: float = 0.0
    log_partition_bounds: tuple = (-np.inf, np.inf)

    @property
    def solver(self):
        """"trellis" if the trellis gave the results, else "search"."""
        return "search" if self.trellis is None else "trellis"


def run_search(bound, n_points, incumbent, *, objective="map", exact_size=None, tol=0.0,
               max_time=None, max_states=None, trellis=None,
               cancelled=None, verbose=0, owner="search", bracket_log_partition=False):
    """Run the best-first search from an incumbent until proof, budget or Ctrl-C.

    With ``trellis``, search for as long as the trellis is estimated to
    take, then solve by the trellis within what is left of the budget, and
    if it cannot (memory, or it will not end in time) search on.

    Parameters
    ----------
    bound : SearchBound
        The energy's admissible bound over these points.
    n_points : int
        Number of points, at most ``MAX_POINTS``.
    incumbent : callable
        ``() -> (merges, log_potential)``: the tree the search starts from,
        built inside the budget (``max_time`` counts it).
    objective : {"map", "log_partition"}, default="map"
    exact_size : int or None, default=None
        Clusters solved exactly by the kernel; None: the bound's choice, and
        14 for "log_partition" where the bound makes none.
    tol : float, default=0.0
        Width of the log Z bracket that ends a "log_partition" search. The
        stop reads the root's bracket after each slice of the walks, every
        cluster's bracket revised from its parts first when a revision is
        due (about ``_REVISION_SHARE`` of the time); the search is
        "optimal" once that certified bracket is within ``tol`` (with 0,
        once log Z is exact).
    max_time : float or None, default=None
        Seconds of budget; None: no limit.
    max_states : int or None, default=None
        Cap on stored search states; None: as many as fit in half the
        memory this process can still allocate (``resources.memory_budget``).
    trellis : TrellisFallback or None, default=None
        The trellis to race the search against; None: the search only.
    cancelled : threading.Event or None, default=None
        Ends the search between slices, as Ctrl-C does ("interrupted"),
        when it runs outside the main thread.
    verbose : int, default=0
        Print the budget, and the bounds about once a second.
    owner : str, default="search"
        Name in the printed lines.
    bracket_log_partition : bool, default=False
        End by revising the log Z brackets within what is left of the
        budget (``final_log_partition_bounds``; after Ctrl-C or a cancel,
        its least slice), for ``SearchResult.log_partition_bounds``.

    Returns
    -------
    result : SearchResult
    """
    if exact_size is None:
        exact_size = -1 if objective == "map" or bound.exact_size > 2 \
            else _LOG_PARTITION_EXACT_SIZE
    search = BestFirstSearch(bound, n_points, objective=objective, exact_size=exact_size)
    max_states = _state_cap(bound, n_points, max_states, max_time, verbose, owner)
    start = time.perf_counter()
    deadline = np.inf if max_time is None else start + max_time
    trellis_seconds = None if trellis is None or not trellis.fits() else \
        inside_pass_seconds(trellis.rate, n_points, trellis.n_threads)
    search_deadline = deadline
    if trellis_seconds is not None:
        # Search for as long as the trellis should take, then solve by
        # it: at most about twice the time of the faster of the two,
        # whichever it is on these data (structured data are proven by
        # the search in a fraction of a trellis pass, flat landscapes
        # never). Only when the budget leaves the trellis its time, with
        # room for the estimate running short (a 24-particle jet's pass
        # took 1.23x its estimate, N = 26 Dasgupta's 1.15x).
        reserved = _TRELLIS_MARGIN * trellis_seconds
        if deadline - reserved > start:
            search_deadline = min(start + trellis_seconds, deadline - reserved)
        else:
            trellis_seconds = None
    merges, incumbent_log_potential = incumbent()
    search.add_tree(merges)
    run = partial(_run, search, max_states, start, objective, tol, cancelled, verbose, owner)
    stop_reason = run(search_deadline)
    if stop_reason in ("max_time", "max_states") and objective == "log_partition" \
            and trellis_seconds is not None:
        # The last revision between slices can be up to 1 / _REVISION_SHARE
        # of its own cost old: one more, of milliseconds, may already
        # bring the bracket within tol, where the trellis takes seconds.
        try:
            lower, upper = final_log_partition_bounds(search, search_deadline)
        except KeyboardInterrupt:
            stop_reason = "interrupted"
        else:
            if upper - lower <= tol:
                stop_reason = "optimal"
    solved, trellis_note = None, ""
    if stop_reason in ("max_time", "max_states") and trellis_seconds is not None:
        reason, solved = _solve_by_trellis(trellis, n_points, deadline, verbose, owner)
        if reason == "max_time":
            trellis_note = (f" (the trellis over the 2**{n_points} subsets was started and "
                            "would not have ended in time)")
        if reason in (None, "max_time") and stop_reason == "max_time":
            # The trellis does not fit in the memory the search has
            # left, or will not end in time: the search goes on for
            # what is left of the budget.
            stop_reason = run(deadline)
        elif reason in ("optimal", "interrupted"):
            stop_reason = reason
    log_partition_bounds = (-np.inf, np.inf)
    if solved is None and bracket_log_partition:
        # After Ctrl-C or a cancel the caller wants out: the revision gets
        # its least slice, not the rest of the budget.
        end = time.perf_counter() if stop_reason == "interrupted" else deadline
        try:
            log_partition_bounds = final_log_partition_bounds(search, end)
        except KeyboardInterrupt:
            # The brackets revised so far are kept, every one certified.
            log_partition_bounds = search.root_log_partition_bracket
            if stop_reason != "optimal":
                stop_reason = "interrupted"
        if objective == "log_partition" and stop_reason in ("max_time", "max_states") \
                and log_partition_bounds[1] - log_partition_bounds[0] <= tol:
            # The stop's own rule: the certified bracket within tol, found
            # by the revision after the budget's last slice.
            stop_reason = "optimal"
    return SearchResult(
        stop_reason=stop_reason,
        # Once the trellis has solved the set, its states (up to the
        # memory cap) are no longer needed.
        search=search if solved is None else None,
        trellis=solved,
        incumbent_log_potential=incumbent_log_potential,
        n_iterations=search.n_iterations,
        n_expanded=search.n_expanded,
        n_splits=search.n_splits,
        n_clusters_stored=search.n_clusters,
        max_states=max_states,
        trellis_note=trellis_note,
        seconds=time.perf_counter() - start,
        log_partition_bounds=log_partition_bounds,
    )


def final_log_partition_bounds(search, deadline):
    """The search's log Z bracket, its clusters revised within the budget.

    The revision (``BestFirstSearch.log_partition_bounds``) runs until
    ``deadline`` (``time.perf_counter()``; inf: to the end) and at least
    ``_LEAST_REFRESH_SECONDS``; cut short, the bracket is still certified.
    It allocates (its order of the clusters) at the end of a run that may
    have filled the memory: failing, it gives the root's bracket as it is.

    Parameters
    ----------
    search : BestFirstSearch
    deadline : float
        End of the budget, on the ``time.perf_counter()`` clock.

    Returns
    -------
    lower, upper : float
        ``lower <= log Z <= upper``.
    """
    try:
        return search.log_partition_bounds(
            seconds=max(deadline - time.perf_counter(), _LEAST_REFRESH_SECONDS))
    except MemoryError:
        return search.root_log_partition_bracket


def _state_cap(bound, n_points, max_states, max_time, verbose, owner):
    """``max_states``, or the states that fit in the memory share; announced at verbose."""
    if max_states is not None:
        return max_states
    memory, available = resources.memory_budget(_MEMORY_SHARE, _UNKNOWN_MEMORY)
    state_bytes = _STATE_BYTES + (_PENALTY_BYTES_PER_POINT * n_points if bound.scale else 0)
    max_states = max(memory // state_bytes, 1)
    if verbose:
        budget = ("no time limit" if max_time is None else
                  f"max_time={max_time:g} s"
                  + (" (the default)" if max_time == DEFAULT_MAX_TIME else ""))
        print(f"[{owner}] budget: {budget}; at most {max_states:,} search "
              f"states, about {resources.format_bytes(max_states * state_bytes)} ("
              + ("no memory limit readable" if available is None else
                 f"half of the {resources.format_bytes(available)} this process can allocate")
              + ")", flush=True)
    return max_states


def _run(search, max_states, start, objective, tol, cancelled, verbose, owner, deadline):
    """Run the search in slices until it finishes or ``deadline``; the stop reason."""
    report = start + 1.0
    reason = "optimal"
    revisions = _Revisions(search) if objective == "log_partition" else None
    try:
        while not search.finished:
            if cancelled is not None and cancelled.is_set():
                reason = "interrupted"
                break
            now = time.perf_counter()
            if now >= deadline:
                reason = "max_time"
                break
            if verbose and now >= report:
                _report(search, start, objective, owner)
                report = now + 1.0
            # The kernel runs without the GIL in slices of at most this
            # long: Ctrl-C, the clock and the report are checked between.
            outcome = search.run(seconds=min(_SLICE_SECONDS, deadline - now),
                                 max_states=max_states)
            if outcome == "max_states":
                reason = "max_states"
                break
            if revisions is not None:
                lower, upper = revisions.bracket(tol, deadline)
                if upper - lower <= tol:
                    break
    except KeyboardInterrupt:
        reason = "interrupted"
    if verbose:
        _report(search, start, objective, owner)
    return reason


class _Revisions:
    """The log Z brackets revised between slices, in about ``_REVISION_SHARE`` of the time.

    Parameters
    ----------
    search : BestFirstSearch
        A "log_partition" search.
    """

    def __init__(self, search):
        self.search = search
        # perf_counter time before which no revision is due.
        self.due = -np.inf
        self.out_of_memory = False

    def bracket(self, tol, deadline):
        """The root's bracket, every cluster's revised first if it is wider than tol and one is due.

        No revision when the bracket is within ``tol`` already, before it is
        due, at or past ``deadline`` (the final revision follows), or once
        one found no memory for its order of the clusters (the walks go on
        with the brackets as they are, every one certified).

        Parameters
        ----------
        tol : float
            The stop's width.
        deadline : float
            End of the run's budget, on the ``time.perf_counter()`` clock:
            the revision is cut there (its brackets still certified).

        Returns
        -------
        lower, upper : float
            ``lower <= log Z <= upper``.
        """
        lower, upper = self.search.root_log_partition_bracket
        now = time.perf_counter()
        if upper - lower <= tol or now < self.due or now >= deadline or self.out_of_memory:
            return lower, upper
        try:
            lower, upper = self.search.log_partition_bounds(seconds=deadline - now)
        except MemoryError:
            self.out_of_memory = True
            return self.search.root_log_partition_bracket
        end = time.perf_counter()
        self.due = end + (end - now) / _REVISION_SHARE
        return lower, upper


def _solve_by_trellis(trellis, n_points, deadline, verbose, owner):
    """The exact inside pass over every subset, within the deadline.

    Returns ``(reason, solved)``: "optimal" with the HierarchicalTrellis,
    or why it stopped ("max_time": past the deadline, or seen not to end
    by it; "interrupted") with None; ``(None, None)`` if the trellis does
    not fit in the memory the search has left.
    """
    if not trellis.fits():
        return None, None
    if verbose:
        print(f"[{owner}] not finished by search: solving the 2**{n_points} "
              "subsets by the trellis", flush=True)
    potential = trellis.split_potential()
    try:
        solved = HierarchicalTrellis(
            potential, trellis.n_threads, verbose, owner,
            deadline=deadline if np.isfinite(deadline) else None)
    except DeadlinePassed as stop:
        if verbose:
            print(f"[{owner}] trellis given up: {stop}", flush=True)
        return "max_time", None
    except KeyboardInterrupt:
        return "interrupted", None
    return "optimal", solved


def _report(search, start, objective, owner):
    print(
        f"[{owner}] {search.n_iterations} iterations, "
        f"{search.n_clusters} clusters, {search.n_splits} splits, "
        f"{search.n_split_keys} split bounds ({search.root_split_keys} of the root's "
        f"{2 ** (search.n_points - 1) - 1}): log potential "
        f"{-search.upper:.6g}, bound {-search.lower:.6g}, gap "
        f"{search.gap:.4g}, {time.perf_counter() - start:.2f} s"
        # The root's bracket as the last revision and the walks since left it.
        + (", {:.6g} <= log Z <= {:.6g}".format(*search.root_log_partition_bracket)
           if objective == "log_partition" else ""),
        flush=True,
    )
