"""``beta="auto"``: the temperature of a Gibbs posterior, calibrated by a bootstrap over features.

The energies ``Dasgupta`` and ``CorrelationClustering`` define a Gibbs
posterior ``P_beta(T | X) ~ pi(T) exp(-beta * C(T))`` over trees (or
partitions) T, C the energy's loss at ``beta = 1`` and pi its prior over
tree shapes (``tree_prior``; uniform over partitions). The minimum-loss
structure does not depend on beta, but every posterior number does: the
clade support, P(K), the co-clustering. ``beta="auto"`` picks beta from the
data so that the posterior is as uncertain as the estimator itself is under
resampling.

The principle is the loss-likelihood bootstrap of Lyddon, Holmes & Walker
(2019): the minimisers of the loss on bootstrap resamples of the data are
approximate draws from a Gibbs posterior at a well-calibrated temperature;
Syring & Martin (2019) choose the temperature so that the Gibbs posterior
reproduces such a bootstrap. The data are resampled the way pvclust does
it: the feature columns, with replacement (points stay the points being
clustered). Concretely:

1. ``T*``, the minimum-loss structure of X (exact);
2. ``T_b``, the exact minimum-loss structure of each of B resamples of
   the columns of X (best-first search for trees, the flat trellis's
   max-only pass for partitions), and the bootstrap's mean excess loss on
   the full data, ``D = mean_b [C(T_b) - C(T*)]`` (exactly 0 when every
   resample's minimum is ``T*``). Over trees B is sequential: at least
   ``MIN_BOOTSTRAP`` resamples, then more until the Monte Carlo standard
   error of D is at most ``BOOTSTRAP_RELATIVE_ERROR`` of D, or
   ``MAX_TREE_BOOTSTRAP``. With a fixed 20 the error was 8-13 % of D on
   noise (3000 features, N = 12-16), and it carried straight into beta_ and
   into every clade support near 0.5. Over partitions B is
   ``MAX_PARTITION_BOOTSTRAP`` = 20, for its cost;
3. beta such that the posterior's expected excess loss matches it:
   ``E_beta[C(T)] - C(T*) = D``.

The left side is strictly decreasing in beta (its derivative is
``-Var_beta(C)``), so the root is unique; it is found by a secant search
in (log beta, log excess), bracketed, within a relative tolerance
``TOLERANCE``, and capped to ``BETA_RANGE``. The expectation is exact for
flat correlation clustering (the loss is a sum over pairs, so it needs only
the co-clustering probabilities) and, over trees, the mean of
``N_POSTERIOR_SAMPLES`` exact posterior draws. Everything random is seeded
by the estimator's ``random_state`` (None: a fixed seed, so that the same
data always get the same ``beta_``). The last trellis evaluated is the
one fitted, so the calibration costs a few inside passes plus the
bootstrap (see ``benchmarks/bench_calibration.py``).

The feature bootstrap counts distinct columns (``distinct_columns``):
copies of a column (equal up to scale, shift and sign) form one group and
are drawn together, constant columns are dropped, so that twelve copies of
one column are one column, not twelve agreeing measurements. Strongly
correlated columns that are not copies still count one each; how many
independent directions the columns span (``effective_n_features``) is
recorded in ``calibration_``; it is acted on only where the rotation test
(below) finds no cluster structure, since cluster structure correlates
columns too (standardised wine: 13 columns, about 6 directions), and only
by the sparse estimators: the trees' bootstrap (they have no reference
cap) and the flat family's consensus units (``effective_bootstrap_draws``).

The bootstrap can be confident where the data are not structured: on
20 x 3000 noise the flat MAP partitions of the column resamples are
stable (3000 genes make the distances precise; the rows nearer the
centroid form a stable block), and a posterior matched to them put three
noise points together at 0.45-0.95. So beta is capped by a reference null
(as in M3C, John et al. 2020, and the gap statistic, Tibshirani, Walther &
Hastie 2001): ``reference_data`` permutes each column of X across the
rows (each column keeps its values, the structure shared by the columns
is gone; copies are permuted together), and ``reference_null_cap`` finds
the largest beta at which the estimator's posterior over such a reference
is humble -- its largest support of a cluster of 3..N-1 points (trees),
its largest probability that three points all co-cluster (partitions:
the requirement itself, read off the co-clustering matrix at no extra
cost; the largest pairwise co-clustering would be stricter than needed,
since pairs of near points co-cluster on any data) at most
``NULL_LEVEL`` = 0.3 -- the smallest over ``N_REFERENCE_DRAWS`` = 3
permutations, to ``CAP_TOLERANCE`` (steps of ``CAP_STEP`` from the
bootstrap's beta, then bisection on log beta: the support rises with beta,
and only betas found humble are kept; over trees each check is first
screened by posterior draws, ``screened_clade_support``, which spares the
outside pass away from the level). beta_ is the smaller of the two.
Permuting each column on its own also destroys the columns' correlation,
so on structureless data whose genes come in correlated blocks the
permuted references are humbler than the data's own null and the cap did
not bind (a cluster of 3..11 points at 0.47-1.00 on 12 x 3000 block
noise). So, unless X shows cluster structure, the cap of the exact
estimators (over all trees, all partitions) is also taken over rotated
references (``rotation_reference``: ``Q @ X``, Q a random
rotation of the samples that keeps their mean; the columns' cross-products
are X's exactly, and for i.i.d. Gaussian samples with any covariance the
reference has X's own distribution). Whether X shows structure is an
exact test of that null (``rotation_pvalue``: X's 2-means cluster index
against ``N_ROTATION_REFERENCES`` = 99 rotations, at ``ROTATION_ALPHA`` =
0.05). Rotated references alone would cap planted subtypes to 0.2: at
N = 12 the posterior supports them hardly more than a Gaussian with their
covariance; the test finds them (p = 0.01) and leaves them as they were
(``benchmarks/bench_correlated_genes.py``; doc/reading_a_posterior.rst,
"Copies and correlated columns").
The level leaves margin on the data themselves: at N = 12, 3000 genes,
the flat posterior on noise then puts three points together at 0.21-0.36
(10 seeds; at levels 0.35-0.4 up to 0.45, at 0.45 up to 0.59), and
and planted subtypes keep a co-clustering of 0.70-0.96 within a subtype
(1.00 uncapped; below 0.8 in 1 seed of 10, 2 of 30; 0.84-0.96 at levels
0.35-0.4: the flat posterior turns from spread to
committed within a factor of about 2 in beta, on noise and on subtypes
alike, so the level trades one side against the other). The
sparse trellis takes no cap: grown around its MAP tree, a permuted
reference had a cluster above 0.3 even at beta = 0.001 (its spanned trees
share it), so no beta was humble; calibrated, its posterior is bagged
instead (``SparseTrellisClustering``): the mean of exact posteriors over
the MAP tree's family and over each bootstrap resample's tree with its
rotations, so that each resample weighs once, which is what makes it
humble on noise (0.10-0.19 at N = 40-200), and a reference would need a
bootstrap of its own.

Where the bootstrap has nothing to work with -- ``affinity="precomputed"``
(no features), fewer than ``MIN_FEATURES`` distinct columns (two columns
have three distinct resamples: too coarse to calibrate against), fewer
than three points -- ``beta_ = 1``, the loss at the scale given, with a
warning (not below three points, where the temperature hardly matters)
and the reason in ``calibration_``; over all trees and all partitions
few distinct columns are instead tempered by "test, then temper" (below).
Other principles measured for few columns before that rule: the
Dirichlet-weighted bootstrap over few columns was tried and left noise of
4 features with clusters at 0.64-0.86. The reference-null cap alone was
tried too (beta_ = the cap): it kept 12 x 4 noise below 0.26, but with 4
features no beta gives clear groups support >= 0.9 while keeping noise
below 0.5 (at beta = 3 groups shifted by 4 standard deviations get 1.0
and noise clusters 0.76-0.97; at the cap, 0.2-0.6, the groups got at
most 0.03, iris species 0.001, and two clear groups of 5 points in 2
features 0.28 instead of 0.73); and with one distinct column the
permuted reference is X itself with its rows relabelled. Five
data-dependent principles without column resampling each failed one side
over 5 seeds: matching the excess loss of the Bayesian bootstrap over the
points, of a perturbation at the within-cluster scale, or of
``DirichletProcessMixture()``'s posterior, matching the MAP clusters'
supports to their perturbation frequencies (the closest: noise humble,
clear groups below 0.9 in 3 of 10), a cap that lets clusters
significant against Gaussian references through, and a SigClust-style
Gaussian null with the within-cluster covariance at X's kernel width
(alone) (``benchmarks/bench_few_features.py``; doc/reading_a_posterior.rst,
"Few features"). Over all trees
(``calibrate_tree_posterior``) 1-9 distinct columns are calibrated by
"test, then temper" (``tested_null_beta``): SigClust's test (Liu, Hayes,
Nobel & Marron 2008) of X's cluster index against Gaussian references
with X's covariance, drawn 49 at a time (up to 999) until the p-value's
99 % interval lies on one side of the level (``structure_pvalue``);
significant at 0.05, beta is the largest at which
Gaussian references with X's pooled within-cluster covariance, clustered
at X's kernel width, show no cluster of 3..N-1 points above 0.5 (the
2nd smallest of 7 references' such betas, so that about a quarter of
such references would show one: the quarter the minimum of 3 stood for,
with less spread); otherwise the largest at which X's own posterior
shows none above 0.3. Measured over 30 seeds (noise 60) it is two-sided
on noise in 3 and 4 features and on two groups of 5 in 2 and 3 features
(one of them pure noise), but it is not a guarantee: a false positive of
the test on noise is proud (12 x 2: 2 of 60), three groups of 4 get a
Gaussian-null beta too low for them in 1 of 30 (in 3 and in 4
features; 3 and 2 with the minimum of 3), and setosa falls below 0.9 in
12 of 30 subsamples of 12 iris flowers (in 8 the test is not
significant: its cluster index lacks power for 4 tight flowers against
8 spread ones, and robust covariances for its references lower it
further; in 4 the Gaussian-null beta is too low) and in 7 of 30 of 18
flowers (1 not significant; in 2 the Gaussian-null beta is too low; in
4 X's correlation-clustering MAP partition joins a versicolor flower to
setosa; with the null's partition from ``tied_mixture_partition``: 11
and 7). Those failures are what the data allow this rule
(``bench_few_features.py --only setosa-bounds``): told the species'
labels the test would be significant in 30 of 30, but no general
statistic measured finds more without losing clear groups or calling
iris-shaped Gaussian noise clustered; and at 18 flowers setosa reaches 0.9 only at betas at
which half to nearly all Gaussian references with X's within-cluster
noise show a cluster above 0.5 (the 4th-7th smallest of the 7), while
the species' own partition lowers the null's beta. The partitions' rule
behind the test -- beta matched to the clade frequencies of the MAP
trees of data redrawn from X's mixture -- was measured against it and
lost on clear groups (three groups of 4: 7
and 5 of 30 below 0.9 instead of 1 and 1; setosa, 18 flowers: 13 of 30
instead of 7), so the fit warns and
``calibration_`` records the p-value and
the branch. Over partitions the same rule fails clear groups
(4 and 8 of 10): with few features the flat loss weighs noise clumps as
much as clear groups, and the Gaussian null tempers the groups too hot.
Over all partitions (``calibrate_few_feature_partitions``) the same
sequential test is followed by a parametric bootstrap where it finds
structure (``tested_mixture_beta``): beta is the one whose co-clustering
best matches (least squares) that of the MAP partitions of 40 data sets
redrawn from the Gaussian mixture of X's MAP partition; where it finds
none, the largest beta at which no three points are together above 0.3.
Over 30 seeds it fails noise only where the test gives a false positive,
about as often as its level, 0.05, allows (one noise column, alone or
copied 12 times: 35 of 600 seeds), and groups where the matched beta is
too hot for one (three groups of 4 in 3 features: 1 of 30; iris setosa 1
of 30) or the test misses them (iris setosa: 1 of 30). It tempers the
loss; it does not correct its MAP: overlapping groups the loss joins stay
joined with confidence (iris, 18 flowers: a versicolor and a virginica
flower together above 0.75 in 29 of 30 subsamples, and in data redrawn
from the species' own mixture too, so no choice of redrawn partition
would separate them; other redraws -- the tied-covariance mixture's
partition, the points drawn with replacement, plain or smoothed, the
mixture's parameters redrawn too -- lost planted groups, 7-38 of 120
seeds against 1, and the coldest beta keeping setosa at 0.9 lowers the
mean pair across only from a median 0.83 to 0.79, ``bench_few_features.py
--only flat-redraws``; on standardised columns the MAP splits setosa in 5
of 30, and the posterior with it); doc/reading_a_posterior.rst, "Few
features over partitions". All rows identical is an error,
identical rows a warning (``check_rows``). The search estimators
(greedy, beam search, best-first) compute no posterior to calibrate:
``beta="auto"`` gives ``beta_ = 1`` there. The sparse trellis calibrates
its bagged posterior over the resamples' families
(``SparseTrellisClustering``), through ``calibrate``, the entry point for
any estimator with a posterior.

References
----------
S. P. Lyddon, C. C. Holmes, S. G. Walker. General Bayesian updating and the
loss-likelihood bootstrap. Biometrika 106(2), 2019.
N. Syring, R. Martin. Calibrating general posterior credible regions.
Biometrika 106(2), 2019.
R. Suzuki, H. Shimodaira. Pvclust: an R package for assessing the uncertainty in
hierarchical clustering. Bioinformatics 22(12), 2006.
A. C. Davison, D. V. Hinkley. Bootstrap Methods and their Application.
Cambridge University Press, 1997.
B. Efron, R. J. Tibshirani. An Introduction to the Bootstrap. Chapman &
Hall, 1993.
C. R. John, D. Watson, D. Russ et al. M3C: Monte Carlo reference-based consensus
clustering. Scientific Reports 10, 1816 (2020).
R. Tibshirani, G. Walther, T. Hastie. Estimating the number of clusters in a
data set via the gap statistic. JRSS B 63(2), 2001.
J. Besag, P. Clifford. Sequential Monte Carlo p-values. Biometrika 78(2), 1991.
A. Gandy. Sequential implementation of Monte Carlo tests with uniformly bounded
resampling risk. Journal of the American Statistical Association 104(488), 2009.
D. R. Nyholt. A simple correction for multiple testing for single-nucleotide
polymorphisms in linkage disequilibrium with each other. American Journal
of Human Genetics 74(4), 2004.
"""
import functools
import os
import sys
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext

import numpy as np
from scipy.spatial.distance import pdist
from scipy.stats import beta as beta_distribution
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from ._engine.agglomerative.builders import greedy_tree
from ._engine.multicut import greedy_agglomeration
from ._engine.search.driver import run_search
from ._engine.tree.conversion import splits_from_merges
from ._engine.trellis.flat_trellis import map_partition
from .energies import CorrelationClustering
from .energies._base import TemperatureMixin
from ._engine.resources import memory_limits

#: Fewest effectively independent feature columns (``effective_n_features``)
#: the bootstrap calibrates with.
MIN_FEATURES = 10
#: Fewest bootstrap resamples of the feature columns.
MIN_BOOTSTRAP = 20
#: Most resamples over trees: a best-first search each, about a tenth of a
#: plain fit at N = 20.
MAX_TREE_BOOTSTRAP = 100
#: Most resamples over partitions: a max-only flat pass each, about a fifth
#: of a plain fit, so 100 would cost 20 fits (measured: 20x a plain fit on
#: noise at N = 20); the flat calibration stays at MIN_BOOTSTRAP.
MAX_PARTITION_BOOTSTRAP = MIN_BOOTSTRAP
#: Resampling stops once the standard error of D is at most this fraction of D.
BOOTSTRAP_RELATIVE_ERROR = 0.05
#: Exact posterior draws estimating the expected loss over trees.
N_POSTERIOR_SAMPLES = 200
#: Range beta is capped to (the root is clipped to it).
BETA_RANGE = (1e-3, 1e3)
#: Relative tolerance on the matched excess loss (log scale).
TOLERANCE = 0.05
#: Most inside passes the search may run.
MAX_EVALUATIONS = 8
#: Seed of the calibration when the estimator's random_state is None.
DEFAULT_SEED = 0
#: The reference-null cap: beta_ is at most the largest beta at which the
#: posterior over each of ``N_REFERENCE_DRAWS`` structureless references
#: (the columns of X permuted across the rows) gives no structure it should
#: not support more than ``NULL_LEVEL`` (``reference_null_cap``).
NULL_LEVEL = 0.3
#: Structureless references the cap is the smallest over (0: no cap).
N_REFERENCE_DRAWS = 3
#: Rotation test of the reference-null cap (``rotation_pvalue``): where X's
#: cluster index is not significant at this level against rotations of its
#: samples, the cap is also taken over rotated references, which keep the
#: columns' correlation (``rotation_reference``).
ROTATION_ALPHA = 0.05
#: Rotated references the cap is also the smallest over. X is one more draw
#: of their null, and the smallest humble beta of 3 was above the beta at
#: which X itself reached 0.5 on 1 of 15 data sets (structureless 12 x 3000
#: genes in blocks of 10; the humble betas of 12 rotations of that one:
#: 3.4-9.5, X's 0.5 at about 7.5); see benchmarks/bench_correlated_genes.py.
N_ROTATED_REFERENCE_DRAWS = 6
#: Rotations of the test (p-values in steps of 1 / 100).
N_ROTATION_REFERENCES = 99
#: The bootstrap of an estimator without a reference-null cap draws
#: ``effective_n_features(X)`` columns a resample where that is below this
#: share of the distinct columns and the rotation test finds no structure
#: (``effective_bootstrap_draws``).
EFFECTIVE_SHARE = 0.5
#: Rotations of that test: p = 0.05, significant, when X's index is below
#: all 19 (still an exact test). It runs on every planted data set of the
#: sparse estimators, where 99 took 60-85 s at N = 200 (and 1.7 s at 16).
N_EFFECTIVE_TEST_REFERENCES = 19
#: Trees drawn from a reference posterior to screen it before the exact
#: check of the cap (``screened_clade_support``).
N_SCREEN_SAMPLES = 1000
#: A sampled largest clade frequency at least this far from NULL_LEVEL
#: decides the check without the outside pass.
SCREEN_MARGIN = 0.1
#: Factor between the betas tried while the cap is not bracketed.
CAP_STEP = 4.0
#: The cap is found to within this factor (from its humble side).
CAP_TOLERANCE = 1.25
#: Few distinct columns (fewer than ``MIN_FEATURES``), over trees: "test,
#: then temper" (``tested_null_beta``). Significance level of the test.
STRUCTURE_ALPHA = 0.05
#: Gaussian references of the test drawn at a time: the test is sequential
#: (``structure_pvalue``), a batch at a time until its decision is sure.
N_STRUCTURE_REFERENCES = 49
#: Most Gaussian references of the test (p-values in steps of 1 / 1000 there).
MAX_STRUCTURE_REFERENCES = 999
#: The test stops once this confidence interval (Clopper-Pearson) of its
#: p-value lies on one side of ``STRUCTURE_ALPHA``.
STRUCTURE_CONFIDENCE = 0.99
#: Level the Gaussian references must stay at or below where the test
#: finds structure (0.4 left one seed of three clear groups at 0.84).
GAUSSIAN_NULL_LEVEL = 0.5
#: EM starts of each tied-covariance Gaussian mixture the Gaussian null's
#: partition is chosen among (``tied_mixture_partition``), and its covariance
#: floor (X near unit scale).
N_MIXTURE_STARTS = 10
_MIXTURE_COVARIANCE_FLOOR = 1e-9
#: Gaussian references of the Gaussian null, and the rank of its beta among
#: theirs: the 2nd smallest of 7 humble betas. At the r-th smallest of n
#: i.i.d. references, the share of such references that would show a
#: cluster above ``GAUSSIAN_NULL_LEVEL`` is Beta(r, n - r + 1) distributed:
#: mean r / (n + 1) = 1/4, as for the minimum of 3 used before, with a
#: standard deviation of 0.14 instead of 0.19, so that one low reference no
#: longer sets beta (``benchmarks/bench_few_features.py --only null-rank``).
N_GAUSSIAN_REFERENCES = 7
GAUSSIAN_NULL_RANK = 2
#: k-means++ starts of the test's cluster index beyond exact 2-splits: with
#: 100, on 50 Gaussian sets of N = 12-18 points in 2-4 dimensions, k = 3-6,
#: the best of them was at most 2.5 % above scikit-learn's KMeans with 10
#: greedy starts (in 2 % of sets) and below it in 12-74 %; with 30 up to
#: 14 % above.
N_KMEANS_STARTS = 100
#: Few distinct columns, over partitions: data sets redrawn from the Gaussian
#: mixture of X's MAP partition when the test finds structure
#: (``mixture_bootstrap_frequencies``; co-clustering frequencies in steps of
#: 1 / 40).
N_MIXTURE_RESAMPLES = 40
# Up to this many points the 2-means cluster index is exact over all
# 2**(N-1) - 1 splits (32,767 at 16, a few milliseconds a reference);
# above, ``N_KMEANS_STARTS`` k-means++ starts.
_EXACT_SPLIT_POINTS = 16
# For k >= 3 the index is exact over every partition into k clusters when
# there are at most this many (Stirling numbers: 966 at 8 points and k = 3,
# 350 at 7 points and k = 4): there one product over the partitions costs
# less than the k-means starts (0.8 against 18 ms for 49 references of 6
# points, 12 against 23 at 8), and is the optimum they look for.
_EXACT_PARTITIONS = 1_000
# States of one bootstrap MAP search (about 1 KiB each) before it settles
# for the best tree found so far.
_MAX_SEARCH_STATES = 200_000
# Bytes one bootstrap search may hold at that cap (627 to 1,116 bytes a
# state measured at N = 40 to 64).
_SEARCH_BYTES = _MAX_SEARCH_STATES * 1024
# Most bytes of the flat trellises (two tables of 2**N doubles each) the
# few-feature calibration keeps to reuse the one at the beta it chooses:
# all of them up to 17 points, the 16 most recent at 18.
_KEPT_TRELLIS_BYTES = 64 * 2**20


def is_auto(energy):
    """Whether the energy's temperature is left to the calibration."""
    return isinstance(energy, TemperatureMixin) and isinstance(energy.beta, str) \
        and energy.beta == "auto"


def fixed_energy(energy):
    """The energy to use without calibration, and beta_ (None without a temperature).

    ``beta="auto"`` means 1 here (the energy's own methods read it so, see
    ``TemperatureMixin``): for estimators that compute no posterior over
    all structures, and for the fallbacks of the module docstring. The
    energy itself is returned, not a copy.
    """
    if not isinstance(energy, TemperatureMixin):
        return energy, None   # no temperature of the package's (a user's energy)
    energy._validate_params()   # a bad beta is named before it is read
    return energy, energy._beta_value()


def _has_features(energy):
    """Whether the energy reads X as features (not a precomputed matrix) and has a temperature."""
    return isinstance(energy, TemperatureMixin) \
        and getattr(energy, "affinity", None) != "precomputed"


def _unit_columns(X):
    """The columns of X centred and scaled to unit norm (each brought near 1 first, so that
    values near the float limits neither overflow nor underflow)."""
    X = X / np.max(np.abs(X), axis=0)
    X = X - X.mean(axis=0)
    return X / np.linalg.norm(X, axis=0)


def effective_n_features(X):
    """How many effectively independent feature columns X has.

    The participation ratio of the column correlation spectrum,
    ``(sum lambda)**2 / sum lambda**2 = p**2 / tr(R**2)`` over the p columns
    that vary (R their correlation matrix; cf. the effective number of
    independent variables of Nyholt 2004), with the
    correlation that N rows show by chance subtracted: ``E[r**2] = 1 / (N - 1)``
    for independent columns, so ``tr(R**2)`` counts only the excess of the
    off-diagonal ``r**2`` over ``p (p - 1) / (N - 1)``. It is p for
    independent columns (up to sampling error, about 10 % at N = 20), 1 for
    any number of copies of one column, about k for k groups of copies, and
    0 when no column varies. Computed from the Gram matrix of the smaller
    side of the standardised data (N x N or p x p), so either may be large.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)

    Returns
    -------
    n_effective : float
    """
    X = np.asarray(X, dtype=np.float64)
    varying = X[:, np.ptp(X, axis=0) > 0] if X.size else X
    n_points, n_features = varying.shape
    if n_features < 2 or n_points < 3:
        return float(n_features)
    standardised = _unit_columns(varying)
    # The Gram matrix of the smaller side (N x N rows, or p x p columns):
    # the squared entries of either sum to tr(R**2), and a sparse
    # estimator's 20,000 rows would otherwise ask for 3 GiB. einsum, not a
    # threaded BLAS product: that took 0.4 s for 18 x 3000 on a busy
    # machine, einsum 0.3 ms.
    if n_points <= n_features:
        gram = np.einsum("ik,jk->ij", standardised, standardised)
    else:
        gram = np.einsum("ki,kj->ij", standardised, standardised)
    off_diagonal = float(np.sum(gram ** 2)) - n_features   # sum of r_ij**2 over i != j
    chance = n_features * (n_features - 1) / (n_points - 1)
    return n_features ** 2 / (n_features + max(off_diagonal - chance, 0.0))


def _warn_caller(message):
    """A UserWarning attributed to the first caller outside the package and scikit-learn.

    The fits reach the calibration through decorators and wrappers of
    varying depth; the user's line is the one to show.
    """
    frame, level = sys._getframe(1), 2
    while frame is not None and any(
            f"{os.sep}{package}{os.sep}" in frame.f_code.co_filename
            for package in ("sktrellis", "sklearn")):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, UserWarning, stacklevel=level)


def check_rows(energy, X):
    """Refuse data without variation; warn about identical rows.

    For an energy with a temperature that reads X as features. All rows
    identical leave nothing to cluster: every structure is as good as any
    other, and a fit would report a posterior of the cluster trellis's
    arbitrary tie-breaking (before this check: ``beta_ = 1000`` and
    log Z = -2.7e6 on 20 equal rows). Identical rows are legitimate but
    worth knowing: identical points are as similar as points can be, so
    they form a cluster with high support whatever the other points say.
    """
    if not _has_features(energy) or len(X) < 2:
        return
    rows, inverse, counts = np.unique(X, axis=0, return_inverse=True, return_counts=True)
    inverse = np.ravel(inverse)
    if len(rows) == 1:
        raise ValueError(
            f"X has no variation: all {len(X)} rows are identical, so every clustering "
            "of them is equally good and none is supported; check the input (a constant "
            "or empty feature matrix?), there is nothing to cluster"
        )
    repeated = np.flatnonzero(counts > 1)
    if len(repeated):
        groups = [np.flatnonzero(inverse == k).tolist() for k in repeated]
        shown = "; ".join(str(group) for group in groups[:3]) + ("; ..." if len(groups) > 3 else "")
        _warn_caller(
            f"X has {len(groups)} group(s) of identical rows ({shown}): identical points "
            "cluster together with high support whatever the other points say; drop "
            "repeated measurements of one sample (np.unique(X, axis=0)) unless each row "
            "is a sample of its own")


def distinct_columns(X):
    """The varying columns of X in groups of copies: columns equal up to scale, shift and sign.

    A copy of a column (the same measurement in other units, a duplicated
    gene) adds no information; a constant column adds none at all and
    changes no distance. The feature bootstrap counts the groups, not the
    columns, and draws whole groups (``_bootstrap_columns``).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)

    Returns
    -------
    groups : list of ndarray of int
        Column indices of each group, in order of first column.
    """
    X = np.asarray(X, dtype=np.float64)
    varying = np.flatnonzero(np.ptp(X, axis=0) > 0) if X.size else np.arange(0)
    if len(varying) == 0:
        return []
    standardised = _unit_columns(X[:, varying])
    # The sign of each column's first clearly non-zero entry made positive,
    # then rounded far above rounding error and far below any real difference.
    first = np.argmax(np.abs(standardised) > 1e-6, axis=0)
    standardised *= np.sign(standardised[first, np.arange(len(varying))])
    _, first_column, inverse = np.unique(np.round(standardised, 9), axis=1, return_index=True,
                                         return_inverse=True)
    inverse = np.ravel(inverse)
    return [varying[inverse == group] for group in np.argsort(first_column)]


def calibration_plan(energy, X, tested_null=False):
    """How ``beta="auto"`` is resolved on X: a calibration record.

    Parameters
    ----------
    energy : Energy
    X : ndarray of shape (n_samples, n_features)
    tested_null : bool, default=False
        Whether the estimator resolves fewer than ``MIN_FEATURES`` distinct
        columns by ``tested_null_beta`` (over all trees) rather than beta = 1.

    Returns
    -------
    calibration : dict
        ``method``: "feature bootstrap" (calibrated), "tested-null" (few
        distinct columns, ``tested_null_beta``), "fixed" (a numeric
        beta), "uncalibrated" (``"auto"`` means beta = 1, for ``reason``)
        or None (an energy without a temperature); ``p_value``,
        ``n_clusters_tested``, ``n_test_references``, ``branch`` and
        ``n_null_clusters`` (the test's p-value, its k, its Gaussian
        references, the rule it chose and, over trees, the clusters of the
        Gaussian null's partition; None but for "tested-null");
        ``n_distinct_features``
        (groups of ``distinct_columns``: what the bootstrap counts and
        draws), ``n_effective_features`` (``effective_n_features``: how
        many independent directions the columns span; it counts cluster
        structure as correlation too, so only ``effective_bootstrap_draws``
        acts on it, after a test), ``n_resamples`` (bootstrap resamples
        drawn) and
        ``reason`` (None, or why beta = 1); ``null_cap``,
        ``null_cap_bound``, ``null_level``, ``n_reference_draws``,
        ``n_reference_fits`` (posteriors fitted to find the cap; None
        here, filled by ``calibrate`` when the reference-null cap is
        sought); ``null_reference`` ("permutation", or "permutation and
        rotation" where ``rotation_p_value``, the p-value of
        ``rotation_pvalue``, finds no cluster structure: the kinds of
        reference the cap was taken over; None here, filled by
        ``calibrate``); ``n_bootstrap_draws`` (the columns or groups each
        resample draws where fewer than all, ``calibrate``'s
        ``effective_resamples``; else None); ``groups`` (private to the
        calibration) is removed before the record is stored.
    """
    plan = {"method": None, "n_distinct_features": None, "n_effective_features": None,
            "n_resamples": None, "reason": None, "null_cap": None, "null_cap_bound": None,
            "null_level": None, "n_reference_draws": None, "n_reference_fits": None,
            "p_value": None, "n_clusters_tested": None, "n_test_references": None,
            "branch": None, "null_reference": None, "rotation_p_value": None,
            "n_bootstrap_draws": None, "n_null_clusters": None}
    if not isinstance(energy, TemperatureMixin):
        return plan
    if not is_auto(energy):
        plan["method"] = "fixed"
        return plan
    plan["method"] = "uncalibrated"
    if getattr(energy, "affinity", None) == "precomputed":
        plan["reason"] = "affinity='precomputed': there are no features to resample"
        return plan
    groups = distinct_columns(X)
    plan["n_distinct_features"] = len(groups)
    plan["n_effective_features"] = effective_n_features(X)
    plan["groups"] = groups
    if X.shape[0] < 3:
        plan["reason"] = "fewer than three points"
    elif len(groups) < MIN_FEATURES and tested_null:
        plan["method"] = "tested-null"
    elif len(groups) < MIN_FEATURES:
        plan["reason"] = (
            f"X has {len(groups)} distinct feature column(s) (of {X.shape[1]}; copies of a "
            f"column and constant columns count once or not at all), fewer than the "
            f"{MIN_FEATURES} the feature bootstrap needs, and no other principle measured "
            "calibrates so few (doc: reading_a_posterior, 'Few features')"
        )
    else:
        plan["method"] = "feature bootstrap"
    return plan


def uncalibrated_energy(energy, X, why):
    """The energy of an estimator with a posterior but no calibration of its own yet.

    ``beta="auto"`` means beta = 1 there, said in a warning (as where the
    feature bootstrap cannot run) and recorded in the returned
    ``calibration_`` record, whose ``reason`` is ``why``.

    Returns
    -------
    energy : Energy
    beta : float or None
    calibration : dict
        ``calibration_plan``'s record.
    """
    plan = calibration_plan(energy, X)
    plan.pop("groups", None)
    if plan["method"] in ("feature bootstrap", "uncalibrated"):
        plan["method"], plan["reason"] = "uncalibrated", why
    energy, beta = _uncalibrated(energy, plan)
    return energy, beta, plan


def _uncalibrated(energy, plan):
    """beta = 1 for an uncalibrated "auto", said in a warning (not for fewer than three points).

    Below three points there is one tree and at most two partitions: the
    temperature hardly matters there and the warning would only be noise.
    """
    if plan["method"] == "uncalibrated" and plan["reason"] != "fewer than three points":
        _warn_caller(
            f"beta='auto' could not be calibrated: {plan['reason']}. beta_ = 1 (the loss "
            "at the scale given) and the posterior probabilities are not calibrated: on "
            "structureless data they can exceed 0.5, and clear groups can get little "
            "support. Pass a numeric beta, or more "
            "independent features; calibration_ records this")
    return fixed_energy(energy)


def _rngs(random_state):
    """Random streams of the bootstrap and of the posterior draws.

    Three streams (bootstrap, posterior draws, reference nulls), so that
    how many resamples the bootstrap drew (in batches of the thread count)
    leaves the others unchanged.
    """
    seeds = check_random_state(DEFAULT_SEED if random_state is None else random_state) \
        .randint(np.iinfo(np.int32).max, size=3)
    return tuple(np.random.RandomState(seed) for seed in seeds)


def _bootstrap_columns(X, rng, groups=None, n_draws=None):
    """Resamples of the columns of X, with replacement, without end.

    With ``groups`` (``distinct_columns``), the groups of copies are drawn
    instead, each bringing all its columns: a copy of a column is no new
    draw, so resampling columns one by one would understate how the data
    could vary (the cluster bootstrap over groups; Davison & Hinkley 1997,
    section 3.8). Without copies this is the plain column bootstrap, with
    the same draws.

    With ``n_draws`` fewer than the columns (or groups), each resample
    draws only ``n_draws`` of them, each repeated so that the resample has
    about X's columns (the m-out-of-n bootstrap at X's scale): a resample
    then varies as much as ``n_draws`` independent columns do, for
    columns that are correlated without being copies (``calibrate``'s
    ``effective_resamples``).
    """
    n_features = X.shape[1]
    units = [np.array([j]) for j in range(n_features)] if groups is None else groups
    if n_draws is not None and n_draws < len(units):
        repeats = max(1, round(len(units) / n_draws))
        while True:
            drawn = rng.randint(len(units), size=n_draws)
            yield X[:, np.repeat(np.concatenate([units[g] for g in drawn]), repeats)]
    if groups is None or len(groups) == n_features:
        while True:
            yield X[:, rng.randint(n_features, size=n_features)]
    while True:
        drawn = rng.randint(len(groups), size=len(groups))
        yield X[:, np.concatenate([groups[g] for g in drawn])]


def effective_bootstrap_draws(X, groups, n_effective, rng):
    """How many columns (groups of copies) each feature-bootstrap resample draws; None: all.

    A column resample of genes in correlated blocks varies as little as one
    of as many independent genes, though it holds far fewer independent
    draws: its MAP structures agree, and a posterior matched to them is
    confident on structureless data (``SparseTrellisClustering``: clusters
    of 3..39 points at 0.41-1.00 on 40 x 3000 genes in blocks,
    ``benchmarks/bench_correlated_genes.py``). Where the columns span fewer
    independent directions (``effective_n_features``) than
    ``EFFECTIVE_SHARE`` of their number (distinct columns) and X shows no more cluster structure than
    rotations of its samples (``rotation_pvalue`` above ``ROTATION_ALPHA``),
    a resample draws only ``n_effective`` of them (at least
    ``MIN_FEATURES``; the plain bootstrap where that is not fewer than the
    distinct columns; ``_bootstrap_columns``), so it varies as much as that
    many independent columns. The test has ``N_EFFECTIVE_TEST_REFERENCES``
    rotations, the fewest with which it can reject at 0.05. Cluster
    structure correlates the columns too (planted subtypes: about 450
    directions of 3000 genes), which is why a
    significant test keeps the plain bootstrap; above the share, the plain
    one is kept untested (independent genes come out within about 10 % of
    their number).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    groups : list of ndarray of int
        ``distinct_columns(X)``.
    n_effective : float
        ``effective_n_features(X)``.
    rng : RandomState
        The rotation test's.

    Returns
    -------
    n_draws : int or None
        None: every resample draws as many columns as X has.
    p_value : float or None
        The rotation test's; None where it was not needed.
    """
    if n_effective >= EFFECTIVE_SHARE * len(groups):
        return None, None
    p_value = rotation_pvalue(X, rng, N_EFFECTIVE_TEST_REFERENCES)
    n_draws = max(MIN_FEATURES, round(n_effective))
    if p_value <= ROTATION_ALPHA or n_draws >= len(groups):
        return None, p_value
    return n_draws, p_value


def _enough_resamples(excess, max_resamples):
    """Whether the bootstrap's mean excess loss D is known well enough to match.

    The standard error of the mean, within ``BOOTSTRAP_RELATIVE_ERROR`` of
    D: beta_ is about proportional to 1 / D, so this bounds the bootstrap's
    share of the error of beta_. D = 0 (every resample agrees) is exact.
    """
    n_resamples = len(excess)
    if n_resamples < MIN_BOOTSTRAP:
        return False
    if n_resamples >= max_resamples:
        return True
    mean = np.mean(excess)
    standard_error = np.std(excess, ddof=1) / np.sqrt(n_resamples)
    return standard_error <= BOOTSTRAP_RELATIVE_ERROR * mean


def _bootstrap_excess(resample_loss, X, map_loss, rng, max_resamples, n_threads=1,
                      groups=None, cancelled=None, n_draws=None):
    """D, the resamples' minimisers' mean excess loss over the full-data minimiser, and B.

    ``resample_loss(Xb)`` is the full-data loss of the minimiser of the
    resample Xb. Resamples are drawn until ``_enough_resamples``, and their
    minimisers found ``n_threads`` at a time (the tree search is one thread
    and runs without the GIL). The rule is applied to the losses in the
    order the resamples were drawn, so D does not depend on ``n_threads``;
    ``rng`` serves the resamples alone. D is the mean of the differences,
    not the difference of the means: a resample whose minimiser is the
    full-data one adds exactly 0, so D is exactly 0 when every resample
    agrees (the mean of 20 equal losses can round away from the loss, and a
    D of 1e-16 would send the search chasing rounding noise instead of
    taking the coldest beta). ``cancelled``, an Event the searches of
    ``resample_loss`` watch, is set on Ctrl-C. ``n_draws``: as for
    ``_bootstrap_columns``.
    """
    resamples = _bootstrap_columns(X, rng, groups, n_draws)
    excess = []
    # One thread: the searches run in this thread, where the kernels see
    # Ctrl-C at once. Several: Ctrl-C reaches the waiting main thread, which
    # tells the searches under way to stop (they look between slices of
    # 0.1 s) before the pool waits for them.
    with ThreadPoolExecutor(n_threads) if n_threads > 1 else nullcontext() as pool:
        losses = pool.map if n_threads > 1 else map
        try:
            while True:
                for loss in losses(resample_loss, [next(resamples) for _ in range(n_threads)]):
                    excess.append(loss - map_loss)
                    if _enough_resamples(excess, max_resamples):
                        return float(np.mean(excess)), len(excess)
        except KeyboardInterrupt:
            if cancelled is not None:
                cancelled.set()
            raise


def _solve(evaluate, target, n_points):
    """beta in BETA_RANGE with log excess(beta) within TOLERANCE of log target.

    ``evaluate(beta)`` returns the posterior's expected excess loss
    (decreasing in beta). Secant steps in (log beta, log excess), kept
    inside the bracket of the points seen. Returns the last beta evaluated.
    """
    low_bound, high_bound = np.log(BETA_RANGE[0]), np.log(BETA_RANGE[1])
    if not target > 0:
        # Every resample gave the full-data MAP: as cold as allowed.
        evaluate(BETA_RANGE[1])
        return BETA_RANGE[1]
    log_target = np.log(target)
    # An excess loss of about n_points / beta is typical of a posterior
    # spread over a few alternatives per inner node: the first guess.
    beta_start = n_points / target
    below, above = (high_bound, None), (low_bound, None)  # excess too small / too large
    log_beta = float(np.clip(np.log(beta_start), low_bound, high_bound))
    previous = None
    for _ in range(MAX_EVALUATIONS):
        excess = evaluate(np.exp(log_beta))
        gap = (np.log(excess) if excess > 0 else -np.inf) - log_target
        if abs(gap) <= TOLERANCE:
            break
        if gap < 0:   # too cold
            below = min(below, (log_beta, gap), key=lambda point: point[0])
        else:
            above = max(above, (log_beta, gap), key=lambda point: point[0])
        if gap < 0 and log_beta <= low_bound or gap > 0 and log_beta >= high_bound:
            break
        # Excess ~ 1 / beta far from the root; the secant of the last two
        # points nearer it; bisection when a step would leave the bracket.
        slope = -1.0
        if (previous is not None and np.isfinite(gap) and previous[1] != gap
                and previous[0] != log_beta):
            slope = min((gap - previous[1]) / (log_beta - previous[0]), -0.05)
        previous = (log_beta, gap) if np.isfinite(gap) else previous
        step = log_beta - gap / slope if np.isfinite(gap) else log_beta - 1.0
        # Past a bracket end: the end itself while it is an unevaluated
        # bound of BETA_RANGE (the root may lie beyond it), else bisection.
        if step <= above[0]:
            step = above[0] if above[1] is None else 0.5 * (above[0] + below[0])
        elif step >= below[0]:
            step = below[0] if below[1] is None else 0.5 * (above[0] + below[0])
        log_beta = float(np.clip(step, low_bound, high_bound))
    return float(np.exp(log_beta))


def reference_data(X, groups, rng):
    """A structureless reference made from X: each column permuted across the rows.

    Every column keeps its values (its marginal distribution), but which
    row has which value is drawn independently for each column, so any
    structure shared by the columns -- the clusters -- is gone (the null of
    M3C and of the gap statistic's reference distribution made from the
    data). The columns of a group of copies (``distinct_columns``) are
    permuted together, so that they stay copies; constant columns stay.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    groups : list of ndarray of int
        ``distinct_columns(X)``.
    rng : RandomState

    Returns
    -------
    reference : ndarray of shape (n_samples, n_features)
    """
    X = np.asarray(X, dtype=np.float64)
    reference = X.copy()
    if not groups:
        return reference
    # One permutation per group: the argsort of uniform keys, a column of keys a group.
    orders = np.argsort(rng.random_sample((len(X), len(groups))), axis=0)
    columns = np.concatenate(groups)
    group_of = np.repeat(np.arange(len(groups)), [len(group) for group in groups])
    reference[:, columns] = X[orders[:, group_of], columns]
    return reference


def rotation_reference(X, groups, rng):
    """A structureless reference that keeps X's column covariance: its rows randomly rotated.

    ``Q @ X``, Q a uniformly random (Haar) orthogonal N x N matrix that
    keeps the all-ones vector (a random rotation of the centred rows' space,
    the mean row kept). The columns' cross-products about their means are
    X's exactly (``X.T @ P @ X``, P the centring), so correlated columns
    stay as correlated as in X, copies stay copies (a column ``a x + b``
    becomes ``a Q x + b``) and constant columns constant; but which sample
    is where is drawn anew. When the samples are i.i.d. Gaussian with any
    covariance -- structureless data, correlated or not -- Q X has exactly
    the distribution of X (the centred data matrix's distribution is
    invariant under rotations of the samples), so the reference is a draw
    of the very null X would be. Clusters become continuous directions: the
    between-cluster variance stays, but as Gaussian scores, not groups.
    ``groups`` is unused (the signature of ``reference_data``).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    groups : list of ndarray of int
    rng : RandomState

    Returns
    -------
    reference : ndarray of shape (n_samples, n_features)
    """
    X = np.asarray(X, dtype=np.float64)
    n_points = len(X)
    # An orthonormal basis of the centred space (orthogonal to the ones),
    # then a Haar rotation within it (QR of a Gaussian matrix, signs fixed).
    basis = np.linalg.qr(np.eye(n_points) - 1.0 / n_points)[0][:, :n_points - 1]
    rotation, upper = np.linalg.qr(rng.standard_normal((n_points - 1, n_points - 1)))
    rotation *= np.sign(np.diag(upper))
    rotated = basis @ rotation @ basis.T + 1.0 / n_points
    return rotated @ X


def rotation_pvalue(X, rng, n_references=N_ROTATION_REFERENCES):
    """p-value of X's 2-means cluster index against rotations of its samples.

    An exact Monte Carlo test of "the samples are i.i.d. Gaussian, with any
    covariance": under that null ``rotation_reference(X)`` has X's own
    distribution, so X's cluster index (``cluster_indices``: the best
    2-means within sum of squares over the total; exact over all splits up
    to 16 points) is one more draw among the references' (Besag &
    Clifford's exact test, whatever the covariance). k = 2 rather than the
    MAP partition's k: as powerful on the planted subtypes (p = 0.01, the
    smallest, in 6 of 6 seeds at N = 12 with either), and exact where k = 3
    needs k-means starts (0.7 s a test at N = 12).
    It is SigClust's question (Liu, Hayes, Nobel & Marron 2008) without
    estimating a covariance, which N points cannot do in thousands of
    dimensions. The indices are computed on an isometric N x N embedding of
    the centred rows (from their Gram matrix), so its cost hardly grows with
    the columns.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    rng : RandomState
    n_references : int, default=N_ROTATION_REFERENCES

    Returns
    -------
    p_value : float
        ``(1 + exceedances) / (1 + n_references)``.
    """
    X = np.asarray(X, dtype=np.float64)
    centred = X - X.mean(axis=0)
    values, vectors = np.linalg.eigh(centred @ centred.T)
    embedded = vectors * np.sqrt(np.clip(values, 0.0, None))
    observed = cluster_indices(embedded[None], 2, rng)[0]
    null = cluster_indices(np.stack([rotation_reference(embedded, None, rng)
                                     for _ in range(n_references)]), 2, rng)
    return (1 + int(np.sum(null <= observed))) / (1 + n_references)


def largest_clade_support(posterior, n_points):
    """The largest posterior probability of a cluster of 3..N-1 points (a trellis over trees).

    The clusters no structureless data should support: singletons and the
    whole set are in every tree, and pairs of the nearest points are
    supported on any data.
    """
    members, log_marginals = posterior.most_probable_clusters(2, 3)
    return max((float(np.exp(min(value, 0.0))) for m, value in zip(members, log_marginals)
                if len(m) < n_points), default=0.0)


def largest_together(pairwise):
    """The largest co-clustering probability that some three points all reach with each other.

    ``max over i, j, k of min(p_ij, p_ik, p_jk)`` from the (n, n)
    co-clustering matrix, in O(n**3) (a thousand triples at n = 20: nothing
    next to the trellis that gave the matrix).
    """
    pairwise = np.array(pairwise, dtype=np.float64)
    if len(pairwise) < 3:
        return 0.0
    np.fill_diagonal(pairwise, 0.0)
    # For each pair i, j: the best third point k, then the pair's own probability.
    third = np.max(np.minimum(pairwise[:, None, :], pairwise[None, :, :]), axis=2)
    return float(np.max(np.minimum(pairwise, third)))


def screened_clade_support(posterior, n_points, level=NULL_LEVEL):
    """``largest_clade_support``, or a sampled value where that decides the cap's check as surely.

    The reference-null cap only asks whether the largest support of a
    cluster of 3..N-1 points is at most ``NULL_LEVEL``, and its exact value
    needs the outside pass, as long as the inside pass that built the
    posterior. ``N_SCREEN_SAMPLES`` exact posterior draws (a few
    milliseconds) answer most checks: when the largest frequency of such a
    cluster among the draws is at least ``SCREEN_MARGIN`` from the level,
    it is returned, otherwise the exact support. By Chernoff's bound a
    cluster of support at most 0.3 reaches a frequency of 0.4 in 1000 draws
    with probability below exp(-1000 KL(0.4 || 0.3)) = 1.5e-10, and one of
    support at least 0.3 falls to 0.2 with probability below 7e-12. A
    tree has at most N - 2 clusters of 3..N-1 points, so at most
    (N - 2) / 0.15 clusters have support above 0.15 (below it the bound is
    under e**-180), and at N <= 25 the screen decides differently from the
    exact support with probability below 1e-7 per check. The draws are
    seeded (``DEFAULT_SEED``), so the cap stays a function of the data and
    ``random_state``.

    Parameters
    ----------
    posterior : HierarchicalTrellis
    n_points : int
    level : float, default=NULL_LEVEL
        The level checked (``GAUSSIAN_NULL_LEVEL`` for the Gaussian null
        of few features: at 0.5 the same bounds are below 2e-9).

    Returns
    -------
    support : float
        A sampled frequency or the exact largest support; either is on the
        same side of ``level`` as the exact one.
    """
    parents, _ = posterior.sample_splits(N_SCREEN_SAMPLES, np.random.RandomState(DEFAULT_SEED))
    masks, counts = np.unique(parents, return_counts=True)
    sizes = np.bitwise_count(masks)
    counts = counts[(sizes >= 3) & (sizes < n_points)]
    sampled = counts.max() / N_SCREEN_SAMPLES if len(counts) else 0.0
    if abs(sampled - level) >= SCREEN_MARGIN:
        return float(sampled)
    return largest_clade_support(posterior, n_points)


def _largest_humble_beta(humility, start, upper, level=NULL_LEVEL):
    """The largest beta (within CAP_TOLERANCE, from below) with humility(beta) <= level.

    ``humility`` is monotone-ish increasing in beta: steps of ``CAP_STEP``
    from ``start`` bracket the crossing, then bisection on log beta. Only
    betas found humble are returned, so a non-monotone stretch costs
    precision, never a proud cap. None when even ``BETA_RANGE[0]`` is not
    humble (the posterior supports something at any temperature), and
    ``upper`` when it is humble there. Returns (beta, fits).
    """
    low_bound, high_bound = np.log(BETA_RANGE[0]), np.log(upper)
    humble, proud, fits = None, None, 0

    def humble_at(log_beta):
        nonlocal fits
        fits += 1
        return humility(float(np.exp(log_beta))) <= level

    log_beta = float(np.clip(np.log(start), low_bound, high_bound))
    while True:
        if humble_at(log_beta):
            humble = log_beta
            if log_beta >= high_bound or proud is not None:
                break
            log_beta = min(log_beta + np.log(CAP_STEP), high_bound)
        else:
            proud = log_beta
            if log_beta <= low_bound:
                return None, fits
            if humble is not None:
                break
            log_beta = max(log_beta - np.log(CAP_STEP), low_bound)
    while proud is not None and proud - humble > np.log(CAP_TOLERANCE):
        middle = 0.5 * (humble + proud)
        if humble_at(middle):
            humble = middle
        else:
            proud = middle
    return (float(upper) if humble >= high_bound else float(np.exp(humble))), fits


def reference_null_cap(humility, X, groups, rng, start, upper=BETA_RANGE[1],
                       make_reference=None, n_draws=None):
    """The largest beta at which the posterior over structureless references stays humble.

    The smallest, over ``N_REFERENCE_DRAWS`` references (``reference_data``),
    of the largest beta (up to ``upper``) at which ``humility(beta,
    reference)`` -- the largest probability the posterior over the
    reference gives to a structure structureless data should not show --
    is at most ``NULL_LEVEL``. Each draw after the first starts from the
    cap so far: when it is humble there, one fit settles it.

    Parameters
    ----------
    humility : callable
        ``humility(beta, data)``, a probability.
    X : ndarray of shape (n_samples, n_features)
    groups : list of ndarray of int
        ``distinct_columns(X)``.
    rng : RandomState
    start : float
        First beta tried.
    upper : float, default=BETA_RANGE[1]
        Largest beta considered.
    make_reference : callable or None, default=None
        ``make_reference(X, groups, rng)``, a reference; None:
        ``reference_data`` (``rotation_reference`` for correlated columns).
    n_draws : int or None, default=None
        References drawn; None: ``N_REFERENCE_DRAWS``.

    Returns
    -------
    cap : float or None
        None when some reference is not humble even at ``BETA_RANGE[0]``.
    fits : int
        Posteriors fitted.
    """
    cap, fits = upper, 0
    for _ in range(N_REFERENCE_DRAWS if n_draws is None else n_draws):
        reference = (reference_data if make_reference is None else make_reference)(
            X, groups, rng)
        cap, draw_fits = _largest_humble_beta(lambda beta: humility(beta, reference),
                                              min(start, cap), cap)
        fits += draw_fits
        if cap is None:
            break
    return cap, fits


def correlation_map_labels(X):
    """Labels of the MAP partition of X under ``CorrelationClustering()`` at beta = 1.

    Its number of clusters is the k of SigClust's test (``tested_null_beta``;
    the Gaussian null's partition has at least that many): the loss's own
    reading of how many groups X has, with no k to choose.
    """
    unit = _unit_loss(CorrelationClustering())
    return np.asarray(map_partition(unit.cluster_potential(X))[0])


def gaussian_reference(covariance, n_points, rng):
    """N(0, covariance) draws through the eigendecomposition (copies of a column stay copies)."""
    values, vectors = np.linalg.eigh(covariance)
    root = vectors * np.sqrt(np.clip(values, 0.0, None))
    return rng.standard_normal((n_points, len(values))) @ root.T


def _split_masks(n_points):
    """The 2**(n-1) - 1 splits of n points into two non-empty sides, as 0/1 rows (point 0 out)."""
    codes = np.arange(1, 2 ** (n_points - 1))
    return ((codes[:, None] >> np.arange(n_points)) & 1).astype(np.float64)


def _stirling2(n, k):
    """The number of partitions of n points into k non-empty clusters."""
    rows = [1] + [0] * k
    for _ in range(n):
        rows = [0] + [j * rows[j] + rows[j - 1] for j in range(1, k + 1)]
    return rows[k]


@functools.lru_cache(maxsize=16)
def _partition_blocks(n_points, k):
    """Every partition of n points into k clusters, as (M, k, n) 0/1 membership rows.

    Restricted growth strings: point 0 in cluster 0, each later point in a
    used cluster or the next new one, so each partition appears once.
    """
    labels = [[0]]
    for point in range(1, n_points):
        labels = [row + [label] for row in labels
                  for label in range(min(max(row) + 2, k))
                  if max(max(row), label) + 1 + (n_points - point - 1) >= k]
    labels = np.array([row for row in labels if max(row) == k - 1])
    blocks = (labels[:, None, :] == np.arange(k)[None, :, None]).astype(np.float64)
    blocks.flags.writeable = False
    return blocks


def _kmeans(data, k, rng, n_init=N_KMEANS_STARTS, max_iter=100):
    """The least k-means within sum of squares of each data set, over ``n_init`` starts.

    Returned with the labels (n_sets, N) of the start that reached it.
    Lloyd's algorithm from k-means++ starts (Arthur & Vassilvitskii 2007),
    on every data set and start at once: ``data`` is (R, N, p).
    scikit-learn's KMeans, one data set at a time, took 35 ms each at
    N = 12 (1.8 s for a test, where the trellis fits take milliseconds).
    """
    points = np.repeat(data, n_init, axis=0)
    n_sets, n_points, _ = points.shape
    rows = np.arange(n_sets)
    centres = [points[rows, rng.randint(n_points, size=n_sets)]]
    closest = ((points - centres[0][:, None]) ** 2).sum(axis=2)
    for _ in range(1, k):
        total = closest.sum(axis=1, keepdims=True)
        weights = np.where(total > 0, closest / np.where(total > 0, total, 1.0), 1.0 / n_points)
        drawn = (np.cumsum(weights, axis=1) < rng.random_sample((n_sets, 1))).sum(axis=1)
        centres.append(points[rows, np.minimum(drawn, n_points - 1)])
        closest = np.minimum(closest, ((points - centres[-1][:, None]) ** 2).sum(axis=2))
    centres = np.stack(centres, axis=1)   # (sets, k, p)
    # Lloyd's steps on the starts still moving only: most settle in a few
    # steps, and a set's centres, once fixed, stay fixed.
    active = np.arange(n_sets)
    for _ in range(max_iter):
        moving, current = points[active], centres[active]
        distances = ((moving[:, :, None] - current[:, None]) ** 2).sum(axis=3)
        members = distances.argmin(axis=2)[:, :, None] == np.arange(k)   # (sets, N, k)
        counts = members.sum(axis=1)[:, :, None]
        sums = np.einsum("snk,snp->skp", members, moving)
        # An emptied cluster keeps its centre.
        moved = np.where(counts > 0, sums / np.maximum(counts, 1), current)
        still = np.any(moved != current, axis=(1, 2))
        centres[active] = moved
        active = active[still]
        if not len(active):
            break
    distances = ((points[:, :, None] - centres[:, None]) ** 2).sum(axis=3)
    inertia = distances.min(axis=2).sum(axis=1).reshape(len(data), n_init)
    best = inertia.argmin(axis=1)
    labels = distances.argmin(axis=2).reshape(len(data), n_init, n_points)
    return inertia[np.arange(len(data)), best], labels[np.arange(len(data)), best]


def cluster_indices(data, k, rng):
    """SigClust's cluster index of each data set: the best k-means within sum of squares over the total.

    Exact over all splits for k = 2 up to ``_EXACT_SPLIT_POINTS`` points
    (the between sum of squares of a side S is ``|sum_S x|**2 N / (|S|
    (N - |S|))`` for centred x: one product over the splits), and for k >=
    3 over all partitions into k clusters where there are at most
    ``_EXACT_PARTITIONS``; else ``_kmeans`` (``N_KMEANS_STARTS`` starts).

    Parameters
    ----------
    data : ndarray of shape (n_sets, n_samples, n_features)
    k : int
    rng : RandomState
        Starts of k-means (unused when exact).

    Returns
    -------
    indices : ndarray of shape (n_sets,)
    """
    return _best_partitions(data, k, rng, with_labels=False)[0]


def index_partition(X, k, rng):
    """Labels of the partition of X into k clusters whose cluster index the test measures.

    The least k-means within sum of squares (``cluster_indices``: exact
    where the index is, else the best of ``N_KMEANS_STARTS`` k-means++
    starts), so that the Gaussian null's within-cluster noise comes from
    the partition the test found significant.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    k : int
    rng : RandomState
        Starts of k-means (unused when exact).

    Returns
    -------
    labels : ndarray of shape (n_samples,)
    """
    return _best_partitions(X[None], k, rng)[1][0]


def _best_partitions(data, k, rng, with_labels=True):
    """``cluster_indices`` of each data set, and the labels of its best partition (n_sets, N).

    With ``with_labels=False`` the labels are None and the exact paths take
    the best index alone, as the test's references need: finding which
    partition it is cost up to a fifth more at 16-18 points.
    """
    centred = data - data.mean(axis=1, keepdims=True)
    totals = (centred ** 2).sum(axis=(1, 2))
    n_sets, n_points, n_features = data.shape
    if k > 2 and _stirling2(n_points, k) <= _EXACT_PARTITIONS:
        # The between sum of squares of a partition of centred x is the sum
        # over its clusters S of |sum_S x|**2 / |S|.
        blocks = _partition_blocks(n_points, k)
        sizes = blocks.sum(axis=2)
        best, chosen = np.empty(n_sets), np.empty(n_sets, dtype=np.intp)
        chunk = max(1, 2 ** 21 // (blocks.shape[0] * k * n_features))
        for first in range(0, n_sets, chunk):
            sums = np.einsum("mkn,snp->smkp", blocks, centred[first:first + chunk])
            between = ((sums ** 2).sum(axis=3) / sizes).sum(axis=2)
            if with_labels:
                chosen[first:first + chunk] = between.argmax(axis=1)
            best[first:first + chunk] = between.max(axis=1)
        return (totals - best) / totals, (blocks[chosen].argmax(axis=1) if with_labels
                                          else None)
    if k > 2 or n_points > _EXACT_SPLIT_POINTS:
        # Sets in chunks of about 2**22 point-centre differences (32 MiB).
        chunk = max(1, 2 ** 22 // (N_KMEANS_STARTS * n_points * k * n_features))
        inertias, labels = zip(*(_kmeans(data[first:first + chunk], k, rng)
                                 for first in range(0, n_sets, chunk)))
        return np.concatenate(inertias) / totals, np.concatenate(labels)
    masks = _split_masks(n_points)
    sizes = masks.sum(axis=1)
    best, chosen = np.empty(n_sets), np.empty(n_sets, dtype=np.intp)
    # Sets in chunks of about 2**21 split sums (16 MiB).
    chunk = max(1, 2 ** 21 // (len(masks) * n_features))
    for first in range(0, n_sets, chunk):
        sums = np.matmul(masks, centred[first:first + chunk])   # BLAS: 60x einsum
        between = (sums ** 2).sum(axis=2) * n_points / (sizes * (n_points - sizes))
        if with_labels:
            chosen[first:first + chunk] = between.argmax(axis=1)
        best[first:first + chunk] = between.max(axis=1)
    return (totals - best) / totals, masks[chosen].astype(np.intp) if with_labels else None


def _pvalue_interval(exceedances, n_references, confidence=STRUCTURE_CONFIDENCE):
    """Clopper-Pearson interval of a Monte Carlo p-value from its exceedance count."""
    tail = (1.0 - confidence) / 2.0
    low = beta_distribution.ppf(tail, exceedances, n_references - exceedances + 1) \
        if exceedances > 0 else 0.0
    high = beta_distribution.ppf(1.0 - tail, exceedances + 1, n_references - exceedances) \
        if exceedances < n_references else 1.0
    return float(low), float(high)


def structure_pvalue(X, rng, labels=None, batch=N_STRUCTURE_REFERENCES,
                     max_references=MAX_STRUCTURE_REFERENCES):
    """p-value of X's cluster index against Gaussian references with X's covariance, and k.

    SigClust (Liu, Hayes, Nobel & Marron 2008) with the sample covariance
    (few features need no background-noise estimate): k is the number of
    clusters of ``correlation_map_labels(X)`` (at least 2, at most the
    distinct rows), the same k for X and every reference.

    The references are drawn ``batch`` at a time until the
    ``STRUCTURE_CONFIDENCE`` Clopper-Pearson interval of the p-value (the
    probability that a reference's index is at most X's, estimated by the
    share of references that are) lies on one side of
    ``STRUCTURE_ALPHA``, or ``max_references`` are drawn: a sequential
    Monte Carlo test with a bounded risk of deciding otherwise than the
    exact p-value would (Gandy 2009; Besag & Clifford 1991 stop on the
    count of exceedances alone). A fixed 49 references decided on too few:
    two groups of 5 in 3 features (one of them noise) had exact p-values
    of 0.001-0.035 over 12 seeds, yet 2-4 of the default stream's first 49
    references fell below them, so 14 of 30 such data sets were declared
    structureless (``benchmarks/bench_few_features.py``). Structureless
    data stop after the first batch unless their p-value is near the level.

    The references keep X's covariance, between-cluster variance included
    (SigClust's conservative choice): with the pooled within covariance of
    X's own best k-partition instead, the test found setosa in 29 of 30
    subsamples of 12 iris flowers (22 with X's) but also called 41 of 60
    Gaussian noise sets clustered whose covariance is shaped as iris's
    (``bench_few_features.py --only test-power``).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    rng : RandomState
    labels : ndarray of shape (n_samples,) or None
        ``correlation_map_labels(X)``, when known.
    batch : int, default=N_STRUCTURE_REFERENCES
        References drawn between two looks at the p-value's interval.
    max_references : int, default=MAX_STRUCTURE_REFERENCES
        Most references drawn; with ``batch`` equal to it, a fixed number
        (the test over partitions).

    Returns
    -------
    p_value : float
        ``(1 + exceedances) / (1 + references)``.
    k : int
        Clusters of the index, of X and of every reference.
    n_references : int
        References drawn.
    """
    labels = correlation_map_labels(X) if labels is None else labels
    k = int(min(max(2, len(np.unique(labels))), len(np.unique(X, axis=0))))
    covariance = np.atleast_2d(np.cov(X.T))
    observed = cluster_indices(X[None], k, rng)[0]
    exceedances, n_references = 0, 0
    while n_references < max_references:
        size = min(batch, max_references - n_references)
        null = cluster_indices(np.stack([gaussian_reference(covariance, len(X), rng)
                                         for _ in range(size)]), k, rng)
        exceedances += int(np.sum(null <= observed))
        n_references += size
        low, high = _pvalue_interval(exceedances, n_references)
        if high <= STRUCTURE_ALPHA or low > STRUCTURE_ALPHA:
            break
    return (1 + exceedances) / (1 + n_references), k, n_references


def _cluster_means(X, labels):
    """Each point's cluster mean under ``labels`` (n_samples, n_features), and the cluster count."""
    _, inverse = np.unique(labels, return_inverse=True)
    inverse = np.ravel(inverse)
    n_clusters = inverse.max() + 1
    means = np.zeros((n_clusters, X.shape[1]))
    np.add.at(means, inverse, X)
    means /= np.bincount(inverse)[:, None]
    return means[inverse], n_clusters


def tied_mixture_partition(X, k, rng):
    """Labels of the Gaussian null's partition: the tied-covariance mixture of k or more clusters.

    Gaussian mixtures whose clusters share one covariance (SigClust's
    model of clustered data: the shared covariance is the pooled
    within-cluster covariance of their partition) with k..max(k, N // 3)
    clusters, k the test's, each fitted by EM (``N_MIXTURE_STARTS``
    starts), and the one BIC prefers; at least k clusters, so that groups
    the test found are not counted as noise. The correlation clustering's
    MAP partition, the null's partition before, merged versicolor with
    virginica on 18 iris flowers and held beta at 0.2-0.6, where setosa
    needs 1-3 (``benchmarks/bench_few_features.py --only
    null-partition-trees``).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Near unit scale.
    k : int
        The test's number of clusters (at most the distinct rows).
    rng : RandomState
        Seeds the EM starts.

    Returns
    -------
    labels : ndarray of shape (n_samples,)
    """
    # Imported here: scikit-learn's mixtures (and the clustering they start
    # from) cost a few tenths of a second to import, needed only with few
    # features.
    from sklearn.mixture import GaussianMixture

    seed = rng.randint(2 ** 31)
    with warnings.catch_warnings():
        # A mixture with more components than X supports may stop early:
        # BIC then prefers another.
        warnings.simplefilter("ignore", ConvergenceWarning)
        fits = [GaussianMixture(n_clusters, covariance_type="tied", n_init=N_MIXTURE_STARTS,
                                reg_covar=_MIXTURE_COVARIANCE_FLOOR, random_state=seed).fit(X)
                for n_clusters in range(k, max(k, len(X) // 3) + 1)]
    return min(fits, key=lambda fit: fit.bic(X)).predict(X)


def within_covariance(X, labels):
    """Pooled within-cluster covariance of X under ``labels`` (X's own when all are alone)."""
    point_means, n_clusters = _cluster_means(X, labels)
    residuals = X - point_means
    dof = len(X) - n_clusters
    return residuals.T @ residuals / dof if dof > 0 else np.atleast_2d(np.cov(X.T))


def gaussian_null_beta(humility, X, rng, labels=None, level=GAUSSIAN_NULL_LEVEL,
                       n_references=N_GAUSSIAN_REFERENCES, rank=GAUSSIAN_NULL_RANK):
    """The largest beta at which Gaussian references with X's within-cluster noise stay humble.

    A SigClust-style null: each reference is N draws of N(0, S), S the
    pooled within-cluster covariance of X under ``labels`` (the trees'
    default: ``tied_mixture_partition``), to be clustered at X's own kernel width
    (``humility``'s energy), so that between clear groups S is small next
    to the kernel and the reference's posterior spread. Per reference, the
    largest beta (``_largest_humble_beta``) at which ``humility(beta,
    reference, level)`` is at most ``level``; beta is the ``rank``-th
    smallest of them, an estimate of their ``rank / (n_references + 1)``
    quantile: the expected share of such references that would show a
    cluster above ``level`` at beta (1/4 at the defaults). Only the
    ``rank`` smallest matter, so each reference is searched up to the
    ``rank``-th smallest so far, as the reference-null cap.

    Parameters
    ----------
    humility : callable
        ``humility(beta, data, level)``, a probability.
    X : ndarray of shape (n_samples, n_features)
    rng : RandomState
    labels : ndarray of shape (n_samples,) or None
        The partition of the within-cluster noise; None:
        ``correlation_map_labels(X)``.
    level : float, default=GAUSSIAN_NULL_LEVEL
    n_references : int, default=N_GAUSSIAN_REFERENCES
    rank : int, default=GAUSSIAN_NULL_RANK
        1 is the minimum over the references, ``(n_references + 1) // 2``
        their median (odd ``n_references``).

    Returns
    -------
    beta : float
    fits : int
        Posteriors fitted.
    """
    labels = correlation_map_labels(X) if labels is None else labels
    covariance = within_covariance(X, labels)
    caps, fits = [], 0
    for _ in range(n_references):
        reference = gaussian_reference(covariance, len(X), rng)
        upper = sorted(caps)[rank - 1] if len(caps) >= rank else BETA_RANGE[1]
        found, draw_fits = _largest_humble_beta(
            lambda beta: humility(beta, reference, level), min(1.0, upper), upper, level)
        fits += draw_fits
        caps.append(BETA_RANGE[0] if found is None else found)
    return sorted(caps)[rank - 1], fits


def own_humble_beta(humility, X, level=NULL_LEVEL):
    """The largest beta at which X's own posterior shows nothing above ``level``, and the fits."""
    found, fits = _largest_humble_beta(lambda beta: humility(beta, X, level), 1.0,
                                       BETA_RANGE[1], level)
    return (BETA_RANGE[0] if found is None else found), fits


def tested_null_beta(humility, X, test_rng, reference_rng):
    """Few features: test, then temper.

    SigClust's test (``structure_pvalue``) decides whether X shows cluster
    structure that Gaussian noise with its covariance does not. Where it
    does (p <= ``STRUCTURE_ALPHA``), beta is the Gaussian-null beta
    (``gaussian_null_beta``: the within-cluster noise of
    ``tied_mixture_partition``, level ``GAUSSIAN_NULL_LEVEL``, the
    ``GAUSSIAN_NULL_RANK``-th smallest over ``N_GAUSSIAN_REFERENCES``);
    where it does not, the largest beta at
    which X's own posterior shows nothing above ``NULL_LEVEL``
    (``own_humble_beta``): the test found no structure, and the posterior
    is made to agree.

    Parameters
    ----------
    humility : callable
        ``humility(beta, data, level)``: the largest support of a cluster
        of 3..N-1 points of the posterior over ``data`` at ``beta``, at X's
        kernel width (exact, or screened against ``level``).
    X : ndarray of shape (n_samples, n_features)
    test_rng, reference_rng : RandomState
        Streams of the test's and of the null's Gaussian references.

    Returns
    -------
    beta : float
    record : dict
        ``p_value``, ``n_clusters_tested`` (k), ``branch`` ("gaussian null"
        or "own posterior"), ``null_level``, ``n_reference_fits``,
        ``n_test_references`` (the test's references, 49-999) and
        ``n_null_clusters`` (the clusters of the null's partition; None on
        the own-posterior branch).
    """
    labels = correlation_map_labels(X)
    p_value, k, n_test_references = structure_pvalue(X, test_rng, labels)
    if p_value <= STRUCTURE_ALPHA:
        # The constants as they stand at the call: the defaults bound at import.
        null_labels = tied_mixture_partition(X, k, test_rng)
        beta, fits = gaussian_null_beta(humility, X, reference_rng, null_labels,
                                        n_references=N_GAUSSIAN_REFERENCES,
                                        rank=GAUSSIAN_NULL_RANK)
        branch, level = "gaussian null", GAUSSIAN_NULL_LEVEL
        n_null_clusters = len(np.unique(null_labels))
    else:
        beta, fits = own_humble_beta(humility, X)
        branch, level, n_null_clusters = "own posterior", NULL_LEVEL, None
    return beta, {"p_value": p_value, "n_clusters_tested": k, "branch": branch,
                  "null_level": level, "n_reference_fits": fits,
                  "n_test_references": n_test_references, "n_null_clusters": n_null_clusters}


def _near_unit_scale(energy, X):
    """X divided by a power of two that brings it near 1, where the kernel width is X's own.

    The width follows X (``gamma=None``), so the division (exact) leaves
    every posterior unchanged, while the covariances of the few-feature
    test and of its references neither underflow nor overflow at 1e-300
    or 1e300. X itself for a given ``gamma``.
    """
    if energy.get_params().get("gamma", 0) is not None:
        return X
    return np.ldexp(X, -int(np.frexp(np.max(np.abs(X)))[1]))


def _at_kernel_width(energy, X):
    """The energy with its data-driven kernel width fixed at X's (the median heuristic).

    A reference must be clustered at X's width, not its own: that is what
    makes a Gaussian null with small within-cluster noise spread. Unchanged
    for a given gamma, or where the width does not come out finite.
    """
    params = energy.get_params()
    if params.get("gamma", 0) is not None or params.get("affinity") not in ("rbf", "exponential"):
        return energy
    with np.errstate(over="ignore", divide="ignore"):
        median = np.median(pdist(X, "sqeuclidean" if params["affinity"] == "rbf"
                                 else "euclidean"))
        gamma = 1.0 / median if median > 0 else 1.0
    return clone(energy).set_params(gamma=gamma) if np.isfinite(gamma) and gamma > 0 else energy


def _tested_null_warning(plan, beta):
    branch = ("the largest beta at which Gaussian references with X's within-cluster covariance "
              f"(under the tied-covariance Gaussian mixture of {plan['n_null_clusters']} "
              f"clusters BIC prefers) show no cluster above {GAUSSIAN_NULL_LEVEL} (ranked "
              f"{GAUSSIAN_NULL_RANK} from "
              f"the smallest among {N_GAUSSIAN_REFERENCES} references)"
              if plan["branch"] == "gaussian null"
              else f"the largest beta at which X's own posterior shows no cluster above "
              f"{NULL_LEVEL}")
    _warn_caller(
        f"beta='auto': X has {plan['n_distinct_features']} distinct feature column(s), "
        f"fewer than the {MIN_FEATURES} the feature bootstrap needs, so beta is set by 'test, then "
        f"temper': SigClust's cluster-index test against Gaussian references with X's "
        f"covariance gave p = {plan['p_value']:.2g}, so beta_ = {beta:.3g} is "
        f"{branch}. Measured on synthetic data (30 seeds; noise 60), it is not a guarantee: "
        "a false positive of the test makes noise proud (12 x 2: 2 of 60), three clear groups "
        "of 4 get support below 0.9 in 1 of 30, and iris setosa falls below 0.9 in 11 of "
        "30 subsamples of 12 flowers and 7 of 30 of 18 (the test has little power, or setosa "
        "needs a beta at which Gaussian noise with X's within-cluster spread shows clusters "
        "too); calibration_ records the test and the branch")


def calibrate(energy, X, random_state, fit, map_loss, expected_loss, *,
              humility=None, max_resamples=MIN_BOOTSTRAP, n_threads=1, solve=None,
              few_features=None, rotated_references=False, effective_resamples=False):
    """Resolve ``beta="auto"`` by the feature bootstrap, capped by a reference null.

    The one calibration of the package: the exact estimators (over all
    trees, all partitions) and the sparse ones (over the structures their
    trellis spans) call it with callables of their own. It checks the rows
    (``check_rows``), decides whether the feature bootstrap applies
    (``calibration_plan``), draws the bootstrap, and solves for the beta
    whose posterior expected excess loss matches the bootstrap's (module
    docstring); then caps beta by ``reference_null_cap`` (given
    ``humility``). Where the bootstrap does not apply, beta = 1 with a
    warning.

    Parameters
    ----------
    energy : Energy
        The estimator's energy. A numeric beta, or an energy without a
        temperature, is used as given.
    X : ndarray of shape (n_samples, n_features)
        Validated data.
    random_state : int, RandomState instance or None
        The estimator's; None is a fixed seed.
    fit : callable
        ``fit(energy, calibrating)``: the fitted posterior over X (a
        trellis, say) for an energy with a numeric beta. ``calibrating``
        is False for the one fit of an energy used as given.
    map_loss : callable
        ``map_loss(unit, data, cancelled=None)``: the loss on the full data
        X, under the unit energy ``unit`` (beta 1, no tree prior), of the
        minimum-loss structure the estimator finds on ``data`` -- X itself
        or a resample of its columns. The same search for both, so that D
        is 0 when every resample agrees. ``cancelled`` is an Event set on
        Ctrl-C, which a search running in a worker thread should watch.
    expected_loss : callable
        ``expected_loss(fitted, rng)``: the posterior expectation of that
        full-data unit loss under a fitted posterior (exact, or a mean of
        draws from ``rng``).
    humility : callable or None, default=None
        ``humility(energy, data)``: the largest probability the estimator's
        posterior over ``data`` (same shape as X) under ``energy`` gives to
        a structure that structureless data should not show (a cluster of
        3..N-1 points; three points together). None: no cap.
    max_resamples : int, default=MIN_BOOTSTRAP
        Most bootstrap resamples (at least ``MIN_BOOTSTRAP`` are drawn).
    n_threads : int, default=1
        Resamples whose ``map_loss`` runs at once (it must release the GIL
        to gain from more than one).
    solve : callable or None, default=None
        ``solve(evaluate, target, n_points)`` -> beta; None is ``_solve``.
    few_features : callable or None, default=None
        ``few_features(energy, data, level)``: as ``humility``, screened
        against ``level``. Given, fewer than ``MIN_FEATURES`` distinct
        columns are calibrated by ``tested_null_beta`` with a warning;
        None: beta = 1 there, with a warning.
    rotated_references : bool, default=False
        Whether the cap is also taken over ``N_ROTATED_REFERENCE_DRAWS``
        of ``rotation_reference``'s where ``rotation_pvalue`` finds no
        cluster structure (the exact estimators; on ``SparseFlatClustering``
        they changed nothing measured: its rotated references' families
        kept blocks of points whole and were humble at no beta, which
        ``effective_bootstrap_draws`` in its units fixed instead).
    effective_resamples : bool, default=False
        Whether each bootstrap resample draws only
        ``effective_bootstrap_draws`` columns: for an estimator with no
        reference-null cap, whose bootstrap alone sets how confident it is
        (``SparseTrellisClustering``), on genes in correlated blocks. Not
        with ``rotated_references``: its test's p-value (19 rotations)
        would then decide the cap's references in place of the cap's own
        test (99).

    Returns
    -------
    energy : Energy
        The energy with a numeric beta (a clone when it was "auto").
    beta : float or None
        ``beta_``; None for an energy without a temperature.
    fitted : object
        What ``fit`` returned for that energy.
    calibration : dict
        ``calibration_plan``'s record, with ``n_resamples`` when a
        bootstrap ran and the cap's record when it was sought.
    """
    plan = calibration_plan(energy, X, tested_null=few_features is not None)
    groups = plan.pop("groups", None)
    check_rows(energy, X)
    if plan["method"] == "tested-null":
        test_rng, _, reference_rng = _rngs(random_state)
        data = _near_unit_scale(energy, X)
        at_width = _at_kernel_width(energy, data)
        beta, record = tested_null_beta(
            lambda beta, reference, level: few_features(
                clone(at_width).set_params(beta=beta), reference, level),
            data, test_rng, reference_rng)
        plan.update(record)
        _tested_null_warning(plan, beta)
        scaled = clone(energy).set_params(beta=beta)
        return scaled, beta, fit(scaled, True), plan
    if plan["method"] != "feature bootstrap":
        energy, beta = _uncalibrated(energy, plan)
        return energy, beta, fit(energy, False), plan
    bootstrap_rng, rng, reference_rng = _rngs(random_state)
    fitted = {}

    def evaluate(beta):
        fitted.clear()   # one posterior at a time: the memory check counted one
        scaled = clone(energy).set_params(beta=beta)
        fitted.update(energy=scaled, posterior=fit(scaled, True))
        # Rounding (or a search stopped at its state budget) may put the
        # expectation a hair below the minimum loss found.
        return max(expected_loss(fitted["posterior"], rng) - full_loss, 0.0)

    unit = _unit_loss(energy)
    full_loss = map_loss(unit, X)
    cancelled = threading.Event()
    if effective_resamples:
        plan["n_bootstrap_draws"], plan["rotation_p_value"] = effective_bootstrap_draws(
            X, groups, plan["n_effective_features"], reference_rng)
    target, plan["n_resamples"] = _bootstrap_excess(
        lambda Xb: map_loss(unit, Xb, cancelled), X, full_loss, bootstrap_rng, max_resamples,
        n_threads, groups, cancelled, plan["n_bootstrap_draws"])
    beta = (_solve if solve is None else solve)(evaluate, target, len(X))
    if humility is not None and N_REFERENCE_DRAWS > 0:
        fitted.clear()   # the references' posteriors take its memory
        reference_humility = (
            lambda beta, data: humility(clone(energy).set_params(beta=beta), data))
        cap, n_fits = reference_null_cap(reference_humility, X, groups, reference_rng, beta,
                                         beta)
        # Permuting each column on its own also destroys the columns'
        # correlation, which structureless data can have (genes in
        # correlated blocks): such references are humbler than the data's
        # own null, and the cap did not bind (largest support 0.47-1.00 on
        # 12 x 3000 block noise). Unless X shows more cluster structure than
        # rotations of its samples, references that keep the correlation cap
        # beta too (``benchmarks/bench_correlated_genes.py``).
        plan["null_reference"], plan["n_reference_draws"] = "permutation", N_REFERENCE_DRAWS
        if rotated_references and plan["rotation_p_value"] is None:
            plan["rotation_p_value"] = rotation_pvalue(X, reference_rng)
        if rotated_references and plan["rotation_p_value"] > ROTATION_ALPHA and cap is not None:
            plan["null_reference"] = "permutation and rotation"
            cap, rotation_fits = reference_null_cap(reference_humility, X, groups,
                                                    reference_rng, cap, cap,
                                                    make_reference=rotation_reference,
                                                    n_draws=N_ROTATED_REFERENCE_DRAWS)
            n_fits += rotation_fits
            plan["n_reference_draws"] += N_ROTATED_REFERENCE_DRAWS
        plan.update(null_level=NULL_LEVEL, null_cap=cap,
                    null_cap_bound=cap is not None and cap < beta, n_reference_fits=n_fits)
        if plan["null_cap_bound"]:
            beta = cap
        elif cap is None:
            # No temperature keeps the reference humble: the structures the
            # estimator can put its mass on show clusters even in permuted
            # data, so its probabilities cannot be made to mean "no
            # structure" on noise. Say so rather than drop the cap quietly.
            _warn_caller(
                f"beta='auto': the data with their columns permuted get a probability above "
                f"{NULL_LEVEL} for a cluster that structureless data should not show at every "
                f"beta down to {BETA_RANGE[0]:g}, so beta_ = {beta:.4g} (the feature "
                "bootstrap's) is not capped and probabilities on structureless data can "
                "exceed 0.5; calibration_ records this (null_cap None)")
    if fitted.get("energy") is None or fitted["energy"].beta != beta:
        scaled = clone(energy).set_params(beta=beta)
        fitted.update(energy=scaled, posterior=fit(scaled, True))
    return fitted["energy"], beta, fitted["posterior"], plan


def calibrate_tree_posterior(energy, X, random_state, make_trellis, n_threads=1):
    """Resolve ``beta="auto"`` of a hierarchical energy and build its trellis.

    ``calibrate`` over all trees: each MAP by exact best-first search, the
    expected loss from ``N_POSTERIOR_SAMPLES`` exact posterior draws.

    Parameters
    ----------
    energy : HierarchicalEnergy
    X : ndarray of shape (n_samples, n_features)
        Validated data.
    random_state : int, RandomState instance or None
    make_trellis : callable
        SplitPotential -> HierarchicalTrellis (the estimator's threads, verbosity).
    n_threads : int, default=1
        Bootstrap searches run at once.

    Returns
    -------
    energy : HierarchicalEnergy
        The energy with a numeric beta (a clone when it was "auto").
    beta : float or None
        ``beta_``; None for an energy without a temperature.
    potential : SplitPotential
    trellis : HierarchicalTrellis
    calibration : dict
        See ``calibrate``.
    """
    n_points = len(X)
    unit_potential = {}   # the full data's, tabulated once, when first needed

    def map_loss(unit, data, cancelled=None):
        if not unit_potential:
            unit_potential["X"] = unit.split_potential(X)
        return -_tree_log_potential(unit_potential["X"], _search_map_merges(unit, data, cancelled),
                                    n_points)

    def fit(scaled, calibrating):
        potential = scaled.split_potential(X)
        return potential, make_trellis(potential)

    def expected_loss(fitted, rng):
        parents, lefts = fitted[1].sample_splits(N_POSTERIOR_SAMPLES, rng)
        losses = -unit_potential["X"].evaluate(parents.ravel(), lefts.ravel()).reshape(
            parents.shape).sum(axis=1)
        return float(losses.mean())

    def humility(scaled, data, level=NULL_LEVEL):
        return screened_clade_support(make_trellis(scaled.split_potential(data)), n_points,
                                      level)

    energy, beta, (potential, trellis), calibration = calibrate(
        energy, X, random_state, fit, map_loss, expected_loss, humility=humility,
        max_resamples=MAX_TREE_BOOTSTRAP, n_threads=_search_threads(n_threads),
        few_features=humility, rotated_references=True)
    return energy, beta, potential, trellis, calibration


def _search_threads(n_threads):
    """Bootstrap searches to run at once: the threads, while half the memory holds their caps.

    The other half is left to the trellis the calibration builds next.
    """
    limits = memory_limits()
    if not limits:
        return n_threads
    available = min(available for _, available in limits)
    return int(max(1, min(n_threads, available // (2 * _SEARCH_BYTES))))


def _unit_loss(energy):
    """The energy's loss alone: beta 1 and, over trees, no prior over tree shapes.

    The loss-likelihood bootstrap compares loss minimisers, and the excess
    loss is the loss's: the prior enters the posterior only.
    """
    unit = clone(energy).set_params(beta=1.0)
    if "tree_prior" in unit.get_params():
        unit.set_params(tree_prior="uniform")
    return unit


def _tree_log_potential(potential, merges, n_points):
    parents, lefts = splits_from_merges(merges, n_points)
    return float(potential.evaluate(parents, lefts).sum())


def _search_map_merges(unit, X, cancelled=None):
    """Merges of the MAP tree of X under ``unit`` by exact best-first search.

    At the state cap, the best tree found so far: still an upper bound on
    the loss gap. Raises KeyboardInterrupt within a slice once the Event
    ``cancelled`` is set (Ctrl-C seen by the main thread while this runs in
    another).

    The incumbent is the greedy tree: the search proves the MAP of the sizes
    calibrated from any start, and a beam of width 5 cost about 70 % of an
    8-point calibrated fit without changing one bootstrap MAP (1,616
    resamples of 7 and 9 points compared, Dasgupta and the default energy).
    """
    def incumbent():
        tree = greedy_tree(unit.merge_model(X))
        return tree.merges, tree.log_potential

    result = run_search(unit.search_bound(X), len(X), incumbent,
                        max_states=_MAX_SEARCH_STATES, cancelled=cancelled)
    if result.stop_reason == "interrupted":
        raise KeyboardInterrupt
    merges, _ = result.search.merges()
    return merges


def _partition_losses(X, labels_of):
    """``calibrate``'s ``map_loss`` over partitions, and X's flat loss of a co-clustering matrix.

    ``labels_of(unit, data)`` is the partition the estimator finds on
    ``data`` (X or a resample of its columns) under the unit energy. The
    full data's loss is built once, by the first ``map_loss`` call (the
    bootstrap's, before any posterior's expected loss is asked).
    """
    losses = {}

    def map_loss(unit, data, cancelled=None):
        if not losses:
            losses["X"] = flat_loss(unit, X)
        return losses["X"](co_clustering(labels_of(unit, data)))

    return map_loss, lambda together: losses["X"](together)


def co_clustering(labels):
    """The (n, n) matrix of 1.0 where two points share a label, else 0.0."""
    labels = np.asarray(labels)
    return (labels[:, None] == labels[None, :]).astype(np.float64)


def flat_loss(unit, X):
    """The flat loss of correlation clustering on X, as a function of a co-clustering matrix.

    ``-sum of w_ij over pairs i < j clustered together``: of a partition
    with ``co_clustering(labels)``, and its posterior expectation with the
    matrix of co-clustering probabilities (the loss is linear in it).

    Parameters
    ----------
    unit : CorrelationClustering
        The unit energy (``_unit_loss``), whose ``weights`` define the loss.
    X : ndarray of shape (n_samples, n_features)

    Returns
    -------
    loss : callable
        (n, n) co-clustering matrix -> float.
    """
    upper = np.triu_indices(len(X), 1)
    weights = unit.weights(X)[upper]
    return lambda together: -float(weights @ np.asarray(together)[upper])


def calibrate_partition_posterior(energy, X, random_state, make_trellis, map_labels,
                                  n_clusters):
    """Resolve ``beta="auto"`` of a flat energy and build its trellis.

    ``calibrate`` over all partitions. The flat loss of correlation
    clustering is ``-sum of w_ij over pairs clustered together``, so its
    posterior expectation is exact from the co-clustering probabilities.
    With 1-9 distinct feature columns, ``calibrate_few_feature_partitions``
    instead ("test, then temper" to the mixture bootstrap).

    Parameters
    ----------
    energy : FlatEnergy
    X : ndarray of shape (n_samples, n_features)
    random_state : int, RandomState instance or None
    make_trellis : callable
        (log potential table, n_clusters) -> FlatTrellis; the calibration's
        own trellises have ``n_clusters=None``, the one returned the
        estimator's.
    map_labels : callable
        log potential table -> labels of its MAP partition, the same as
        ``make_trellis(table, None).map_labels`` (a max-only pass, a fraction
        of a trellis: the calibration needs the MAP of the data and of every
        resample).
    n_clusters : int or None

    Returns
    -------
    energy : FlatEnergy
    beta : float or None
    trellis : FlatTrellis
    calibration : dict
        See ``calibrate``.
    """
    plan = calibration_plan(energy, X, tested_null=True)
    if plan["method"] == "tested-null":
        return calibrate_few_feature_partitions(energy, X, random_state, make_trellis,
                                                map_labels, n_clusters, plan)
    # One resample at a time, in this thread: its kernel sees Ctrl-C itself.
    map_loss, loss_of = _partition_losses(
        X, lambda unit, data: map_labels(unit.cluster_potential(data)))

    def fit(scaled, calibrating):
        # The max-only passes use every thread already: one resample at a time.
        return make_trellis(scaled.cluster_potential(X), None if calibrating else n_clusters)

    energy, beta, trellis, calibration = calibrate(
        energy, X, random_state, fit, map_loss,
        lambda trellis, rng: loss_of(trellis.pairwise_probability()),
        humility=lambda scaled, data: largest_together(
            make_trellis(scaled.cluster_potential(data), None).pairwise_probability()),
        max_resamples=MAX_PARTITION_BOOTSTRAP, rotated_references=True)
    if calibration["method"] == "feature bootstrap" and n_clusters is not None:
        # The constrained MAP of n_clusters needs its own pass.
        trellis = make_trellis(energy.cluster_potential(X), n_clusters)
    return energy, beta, trellis, calibration


def calibrate_sparse_partition_posterior(energy, X, random_state, calibration_trellis,
                                         plain_trellis):
    """Resolve ``beta="auto"`` over a sparse flat trellis spanned by a humble family.

    ``calibrate`` with the posterior over the partitions of
    ``calibration_trellis(energy, data)``, a family of clusters built from
    ``data`` alone (``SparseFlatClustering``: the cuts of a bisecting
    2-means tree of the data that never cuts a cluster of
    ``consensus_greedy_blocks``, and every partition of each window of
    consecutive units of its depth-first order, a unit being such a
    cluster or a point), whose spanned set is
    humble at small beta, so that the reference-null cap exists. The same
    family on each permuted reference gives the cap's humility, three
    points together as for ``ExactFlatClustering``. The minimiser on X and
    on every resample is the greedy agglomeration's partition (the same
    search for both, so D is 0 when all agree): the family's own MAP on a
    resample depends on its bisecting tree, which varies more between
    resamples than the data do. beta is the smallest whose expected excess
    is at most D (``_solve_from_the_cold_side``). The expected loss is
    exact from the co-clustering probabilities over the spanned set.

    Parameters
    ----------
    energy : CorrelationClustering
    X : ndarray of shape (n_samples, n_features)
    random_state : int, RandomState instance or None
    calibration_trellis : callable
        ``(energy with a numeric beta, data) -> SparseFlatTrellis`` over
        the calibration's family of ``data``.
    plain_trellis : callable
        ``energy -> (trellis, n_seed_trees)``: the estimator's own family,
        used where the bootstrap does not apply (beta = 1 with a warning).

    Returns
    -------
    energy : CorrelationClustering
    beta : float or None
    fitted : tuple
        ``(trellis, n_seed_trees)`` as ``plain_trellis`` returns it (one
        seed tree for the calibration's family).
    calibration : dict
        See ``calibrate``.
    """
    map_loss, loss_of = _partition_losses(
        X, lambda unit, data: greedy_agglomeration(unit.weights(data)).labels)

    def fit(scaled, calibrating):
        if calibrating:
            return calibration_trellis(scaled, X), 1
        return plain_trellis(scaled)

    return calibrate(
        energy, X, random_state, fit, map_loss,
        lambda fitted, rng: loss_of(fitted[0].pairwise_probability()),
        humility=lambda scaled, data: largest_together(
            calibration_trellis(scaled, data).pairwise_probability()),
        max_resamples=MAX_PARTITION_BOOTSTRAP, solve=_solve_from_the_cold_side)


def _solve_from_the_cold_side(evaluate, target, n_points):
    """The smallest beta (to ``CAP_TOLERANCE``, from above) whose excess is at most target.

    ``_solve``'s root, found by bracketing and bisection on log beta
    instead of secant steps: over a sparse flat family the expected excess
    can fall from tens of nats to 1e-12 within a factor of 5 in beta
    (planted subtypes, N = 80: 28 at beta 1, 7e-13 at 6.7, exactly 0 above),
    where the secant ran out of evaluations on the hot side (beta_ = 0.2,
    every subtype together 0.0). Excess is decreasing in beta, so the
    smallest beta with excess <= target is defined even where it jumps, and
    the cold end of the bracket has excess at most the bootstrap's. Steps
    of ``CAP_STEP`` from ``n_points / target`` bracket it.
    """
    if not target > 0:
        evaluate(BETA_RANGE[1])
        return BETA_RANGE[1]
    low_bound, high_bound = np.log(BETA_RANGE[0]), np.log(BETA_RANGE[1])
    hot, cold = None, None   # log betas with excess above / at most target
    log_beta = float(np.clip(np.log(n_points / target), low_bound, high_bound))
    while True:
        excess = evaluate(float(np.exp(log_beta)))
        if excess <= target:
            cold = log_beta
            if hot is not None or log_beta <= low_bound:
                break
            log_beta = max(log_beta - np.log(CAP_STEP), low_bound)
        else:
            hot = log_beta
            if cold is not None or log_beta >= high_bound:
                break
            log_beta = min(log_beta + np.log(CAP_STEP), high_bound)
    if cold is None:
        return BETA_RANGE[1]   # too uncertain even at the coldest beta
    while hot is not None and cold - hot > np.log(CAP_TOLERANCE):
        middle = 0.5 * (hot + cold)
        if evaluate(float(np.exp(middle))) <= target:
            cold = middle
        else:
            hot = middle
    return float(np.exp(cold))


def consensus_greedy_blocks(unit, X, seed, effective=False):
    """Labels of the clusters most of the greedy partitions of X and of its column resamples hold.

    The greedy agglomeration's partition of X and of ``MIN_BOOTSTRAP``
    resamples of its columns (``_bootstrap_columns`` over
    ``distinct_columns``, seeded by ``seed``): the points of a cluster of
    at least two points that more than half of them hold (a majority-rule
    consensus, as pvclust's bootstrap probability above 0.5) share a label,
    every other point has a label of its own. Planted subtypes are held by
    every resample, or nearly (20 of 21 at N = 24, seed 0, where asking
    for all of them lost a subtype); on structureless data the greedy
    partition has a large block of points near the centroid whose edge
    moves from resample to resample, and no cluster of two or more points
    is held by a majority (noise at N = 16-80, 24 data sets: none).

    Parameters
    ----------
    unit : CorrelationClustering
        An energy with ``weights``.
    X : ndarray of shape (n_samples, n_features)
    seed : int
    effective : bool, default=False
        Whether the resamples draw ``effective_bootstrap_draws`` columns
        (its rotation test on a stream derived from ``seed``).

    Returns
    -------
    labels : ndarray of shape (n_samples,)
    n_draws : int or None
        The columns or groups each resample drew, where fewer than all
        (``effective``); else None.
    """
    def clusters(data):
        labels = greedy_agglomeration(unit.weights(data)).labels
        return {frozenset(np.flatnonzero(labels == label).tolist())
                for label in np.unique(labels) if np.count_nonzero(labels == label) >= 2}

    groups = distinct_columns(X)
    # Genes in correlated blocks: the resamples agree on blocks of
    # structureless points unless they draw as few columns as the genes'
    # independent directions (units of 3-5 points at N = 80, where no
    # reference was then humble at any beta; effective_bootstrap_draws).
    # The test's rotations from a stream of their own: seeded alike, they
    # would be drawn from the words the resamples' column indices are.
    test_seed = np.random.SeedSequence(seed).generate_state(1)[0]
    n_draws = effective_bootstrap_draws(X, groups, effective_n_features(X),
                                        np.random.RandomState(test_seed))[0] \
        if effective else None
    resamples = _bootstrap_columns(X, np.random.RandomState(seed), groups, n_draws)
    counts = {}
    for data in [X] + [next(resamples) for _ in range(MIN_BOOTSTRAP)]:
        for cluster in clusters(data):
            counts[cluster] = counts.get(cluster, 0) + 1
    # Held by more than half of the partitions: two such clusters are held
    # together by one of them, so they never cross.
    held = [cluster for cluster, count in counts.items() if 2 * count > MIN_BOOTSTRAP + 1]
    labels = np.arange(len(X))
    for cluster in held:
        members = np.fromiter(cluster, dtype=np.int64)
        labels[members] = members.min()
    return labels, n_draws


def _proud_pairs(pairwise, level):
    """The (n, n) mask of pairs of distinct points that co-cluster above ``level``."""
    proud = np.array(pairwise) > level
    np.fill_diagonal(proud, False)
    return proud


def beta_adding_no_confidence(posterior_at, beta, pairwise, levels=(NULL_LEVEL, 0.5)):
    """The largest beta up to ``beta`` at which a wider family adds no confident triple.

    ``posterior_at(b)`` is a posterior (with ``pairwise_probability()``)
    over a family wider than the calibrated one, at temperature b;
    ``pairwise`` the calibrated posterior's co-clustering at ``beta``. A
    triple of points is confident at a level when all its three pairs
    co-cluster above it; at each of ``levels`` the wider posterior may keep
    the confident triples of the calibrated one and add none.
    ``SparseFlatClustering`` widens its calibrated family by a plain fit's
    MAP partition, whose near-centroid block of noise can take the
    posterior at the calibrated beta although the references of the cap,
    each over its own family without it, stayed humble there. The levels:
    the one the cap holds those references to (``NULL_LEVEL``; on noise X
    is one more such data set, and before the join its three points
    together stayed at 0.26-0.29 at N = 40, seeds 0-5, while with 0.5
    alone the join took them up to 0.41 there and to 0.465 at seed 8, a
    margin left to chance), and the requirement's 0.5 (a triple already
    above 0.3, not 0.5, may not be taken past 0.5). Steps of
    ``CAP_STEP`` and bisection from ``beta`` down (``_largest_humble_beta``).

    Parameters
    ----------
    posterior_at : callable
        beta -> posterior over the wider family.
    beta : float
        The calibrated beta, the largest returned.
    pairwise : ndarray of shape (n_samples, n_samples)
        The calibrated posterior's co-clustering probabilities.
    levels : tuple of float, default=(NULL_LEVEL, 0.5)
        The levels checked, each on its own.

    Returns
    -------
    beta : float or None
        None when even ``BETA_RANGE[0]`` adds a confident triple.
    posterior : object or None
        ``posterior_at(beta)``.
    """
    fitted = {}

    def adds_a_triple(candidate):
        fitted.clear()   # one posterior at a time
        fitted[candidate] = posterior_at(candidate)
        wider = fitted[candidate].pairwise_probability()
        for level in levels:
            before, after = _proud_pairs(pairwise, level), _proud_pairs(wider, level)
            # A triangle of proud pairs the calibrated posterior lacked has a
            # proud pair it lacked: count the paths of two proud pairs around it.
            paths = after.astype(np.float64) @ after.astype(np.float64)
            if np.any(paths[after & ~before] > 0):
                return 1.0
        return 0.0

    # adds_a_triple is 0 or 1: "humble" below one half.
    found, _ = _largest_humble_beta(adds_a_triple, beta, beta, level=0.5)
    if found is None:
        return None, None
    return found, fitted[found] if found in fitted else posterior_at(found)


def redrawn_mixture(X, labels, rng):
    """X redrawn from the Gaussian mixture of a partition: each point its cluster's mean plus noise.

    The noise is N(0, S), S the pooled within-cluster covariance
    (``within_covariance``), drawn through ``gaussian_reference`` (copies of
    a column stay copies). A parametric bootstrap of the clustering under
    the model its own partition fits (Efron & Tibshirani 1993).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
    labels : ndarray of shape (n_samples,)
        The partition whose mixture is redrawn.
    rng : RandomState

    Returns
    -------
    redrawn : ndarray of shape (n_samples, n_features)
    """
    point_means, _ = _cluster_means(X, labels)
    return point_means + gaussian_reference(within_covariance(X, labels), len(X), rng)


def mixture_bootstrap_frequencies(map_labels_of, X, labels, rng,
                                  n_resamples=N_MIXTURE_RESAMPLES):
    """How often each pair of points shares a cluster of the MAP partitions of redrawn data.

    Parameters
    ----------
    map_labels_of : callable
        data -> labels of the estimator's MAP partition of ``data`` (at
        X's kernel width).
    X : ndarray of shape (n_samples, n_features)
    labels : ndarray of shape (n_samples,)
        X's MAP partition, whose mixture is redrawn (``redrawn_mixture``).
    rng : RandomState
    n_resamples : int, default=N_MIXTURE_RESAMPLES

    Returns
    -------
    frequencies : ndarray of shape (n_samples, n_samples)
        The share of redrawn data sets whose MAP partition puts i and j
        together (1 on the diagonal).
    """
    together = np.zeros((len(X), len(X)))
    for _ in range(n_resamples):
        together += co_clustering(map_labels_of(redrawn_mixture(X, labels, rng)))
    return together / n_resamples


def minimising_beta(error):
    """The beta in ``BETA_RANGE`` minimising ``error(log beta)``, and the evaluations.

    On a grid of log beta in steps of ``CAP_STEP``, then by golden-section
    search between the best point's neighbours to ``CAP_TOLERANCE``. The
    hotter of equal errors is kept. Each log beta is evaluated once.

    Parameters
    ----------
    error : callable
        log beta -> a float to minimise.

    Returns
    -------
    beta : float
    n_evaluations : int
        Distinct log betas evaluated.

    Examples
    --------
    >>> from sktrellis._calibration import minimising_beta
    >>> beta, _ = minimising_beta(lambda log_beta: (log_beta - 1.0) ** 2)
    >>> bool(2.2 < beta < 3.4)  # e, to CAP_TOLERANCE
    True
    """
    errors = {}

    def cached(log_beta):
        if log_beta not in errors:
            errors[log_beta] = error(log_beta)
        return errors[log_beta]

    low, high = np.log(BETA_RANGE[0]), np.log(BETA_RANGE[1])
    step = np.log(CAP_STEP)
    grid = np.linspace(low, high, int(np.ceil((high - low) / step)) + 1)
    best = min(grid, key=cached)
    a, b = max(best - step, low), min(best + step, high)
    ratio = (np.sqrt(5.0) - 1.0) / 2.0
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    while b - a > np.log(CAP_TOLERANCE):
        if cached(c) <= cached(d):
            b, d = d, c
            c = b - ratio * (b - a)
        else:
            a, c = c, d
            d = a + ratio * (b - a)
    chosen = min([best, c, d], key=lambda log_beta: (cached(log_beta), log_beta))
    return float(np.exp(chosen)), len(errors)


def matched_co_clustering_beta(pairwise_at, frequencies):
    """The beta whose posterior co-clustering is nearest ``frequencies`` in least squares.

    ``sum over pairs i < j of (P_beta(i ~ j) - f_ij)**2``, minimised over
    log beta by ``minimising_beta``.

    Parameters
    ----------
    pairwise_at : callable
        beta -> the (n, n) co-clustering matrix of the posterior at beta.
    frequencies : ndarray of shape (n_samples, n_samples)
        The co-clustering to match (``mixture_bootstrap_frequencies``).

    Returns
    -------
    beta : float
    n_fits : int
        Posteriors fitted (distinct betas evaluated).
    """
    upper = np.triu_indices(len(frequencies), 1)
    target = np.asarray(frequencies)[upper]
    return minimising_beta(lambda log_beta: float(np.sum(
        (pairwise_at(float(np.exp(log_beta)))[upper] - target) ** 2)))


def tested_mixture_beta(pairwise_at, X, labels, map_labels_of, test_rng, bootstrap_rng):
    """Few features over partitions: test, then temper to the mixture bootstrap.

    SigClust's test (``structure_pvalue``, the trees' sequential test:
    references 49 at a time, up to 999, until its decision is sure)
    decides whether X shows cluster structure that Gaussian noise with its
    covariance does not. Where it does (p <= ``STRUCTURE_ALPHA``), beta
    is the one whose posterior co-clustering best reproduces how often the
    MAP partitions of data redrawn from X's own mixture put each pair
    together (``mixture_bootstrap_frequencies``,
    ``matched_co_clustering_beta``):
    the parametric bootstrap's stability of the clustering, which is what
    a support should say once there is structure to support. Where it does
    not, the largest beta at which X's own posterior puts no three points
    together above ``NULL_LEVEL`` (``own_humble_beta``), as over trees;
    below five points no beta reaches it (even the uniform distribution
    over partitions puts two points together at 0.4 at N = 3 and 1/3 at
    N = 4), and beta is the floor ``BETA_RANGE[0]``, the humblest.

    Parameters
    ----------
    pairwise_at : callable
        ``pairwise_at(beta)``: the co-clustering matrix of the posterior
        over X at ``beta`` (X's kernel width).
    X : ndarray of shape (n_samples, n_features)
    labels : ndarray of shape (n_samples,)
        X's MAP partition.
    map_labels_of : callable
        data -> labels of its MAP partition (X's kernel width).
    test_rng, bootstrap_rng : RandomState
        Streams of the test's references and of the redrawn data.

    Returns
    -------
    beta : float
    record : dict
        ``p_value``, ``n_clusters_tested``, ``n_test_references``,
        ``branch`` ("mixture bootstrap" or "own posterior"), ``null_level`` (None for the
        mixture bootstrap), ``n_reference_fits`` (posteriors fitted to
        find beta) and ``n_resamples`` (redrawn data sets; None without).
    """
    p_value, k, n_references = structure_pvalue(X, test_rng, labels)
    record = {"p_value": p_value, "n_clusters_tested": k,
              "n_test_references": n_references}
    if p_value <= STRUCTURE_ALPHA:
        frequencies = mixture_bootstrap_frequencies(map_labels_of, X, labels, bootstrap_rng)
        beta, fits = matched_co_clustering_beta(pairwise_at, frequencies)
        record.update(branch="mixture bootstrap", null_level=None,
                      n_resamples=N_MIXTURE_RESAMPLES)
    else:
        # own_humble_beta asks about X's own posterior only.
        beta, fits = own_humble_beta(
            lambda beta, _, level: largest_together(pairwise_at(beta)), X)
        record.update(branch="own posterior", null_level=NULL_LEVEL, n_resamples=None)
    record["n_reference_fits"] = fits
    return beta, record


def _tested_partition_warning(plan, beta):
    if plan["branch"] == "mixture bootstrap":
        branch = ("the beta whose co-clustering best matches data redrawn from the Gaussian "
                  "mixture of X's MAP partition")
    elif beta <= BETA_RANGE[0]:
        # own_humble_beta's floor: below five points even the uniform
        # distribution over partitions puts two points together above 0.3.
        branch = (f"the floor of the range: no beta above it keeps X's own posterior from "
                  f"putting three points together above {NULL_LEVEL} (below five points "
                  f"not even the uniform distribution over partitions does)")
    else:
        branch = (f"the largest beta at which X's own posterior puts no three points together "
                  f"above {NULL_LEVEL}")
    _warn_caller(
        f"beta='auto': X has {plan['n_distinct_features']} distinct feature column(s), "
        f"fewer than the {MIN_FEATURES} the feature bootstrap needs, so beta is set by 'test, then "
        f"temper': SigClust's cluster-index test against Gaussian references with X's "
        f"covariance gave p = {plan['p_value']:.2g}, so beta_ = {beta:.3g} is {branch}. "
        "Measured over 30 seeds of synthetic data: noise in 2-4 features puts no three points "
        "together above 0.5 and clear groups co-cluster at 0.9 or more (also beside a noise "
        "feature), but a false positive of the test, as often as its level 0.05 allows, makes "
        "noise clumps sure (one noise column, alone or copied 12 times: 35 of 600), groups the "
        "test misses get little support (iris setosa, 6 flowers a class: 1 of 30; on "
        "standardised columns 6 of 30), the beta matched to the redrawn mixture can be too hot "
        "for a clear group beside an unclear one (three groups of 4 in 3 features, iris "
        "setosa: 1 of 30 each), and the loss's MAP partition is "
        "tempered, not corrected, so groups that overlap are joined with confidence, and "
        "groups it splits stay split: a co-clustering says how stably this energy joins two "
        "points, not that they belong to one group (iris, 18 flowers: a versicolor and a "
        "virginica flower together above 0.75 in 29 of 30 subsamples, as in data redrawn "
        "from the species' own mixture, and no beta separates the two species; standardised, "
        "setosa split in 5 of 30); calibration_ records the test and the branch")


def calibrate_few_feature_partitions(energy, X, random_state, make_trellis, map_labels,
                                     n_clusters, plan):
    """``calibrate_partition_posterior`` with fewer than ``MIN_FEATURES`` distinct columns.

    "Test, then temper" to the mixture bootstrap (``tested_mixture_beta``),
    at X's kernel width (``_at_kernel_width``), with a warning; the record
    is ``plan`` (``calibration_plan``'s, method "tested-null") with the
    test's and the branch's fields.

    Parameters
    ----------
    energy, X, random_state, make_trellis, map_labels, n_clusters
        As for ``calibrate_partition_posterior``.
    plan : dict
        ``calibration_plan(energy, X, tested_null=True)``, updated in place.

    Returns
    -------
    energy : Energy
        A clone of ``energy`` at the chosen beta.
    beta : float
    trellis : object
        ``make_trellis`` of X under that energy, for ``n_clusters``.
    calibration : dict
        ``plan``.
    """
    plan.pop("groups", None)
    check_rows(energy, X)
    test_rng, bootstrap_rng, _ = _rngs(random_state)
    data = _near_unit_scale(energy, X)
    at_width = _at_kernel_width(energy, data)
    unit = _unit_loss(at_width)

    # Every posterior the search fits is over ``data``: its table is beta
    # times the unit table, the product the energy itself forms, so built
    # once. The trellises are kept (the most recent, up to
    # _KEPT_TRELLIS_BYTES), and the fit's own is the one at the beta chosen
    # where its table is the same bit for bit: with the data-driven width,
    # X and ``data`` differ by a power of two that the affinity divides out.
    unit_table = unit.cluster_potential(data)
    kept = {}

    def map_labels_of(points):
        return np.asarray(map_labels(unit.cluster_potential(points)))

    def pairwise_at(beta):
        if beta not in kept:
            kept[beta] = make_trellis(beta * unit_table, None)
            while len(kept) > 1 and len(kept) * 16 * len(unit_table) > _KEPT_TRELLIS_BYTES:
                del kept[next(iter(kept))]
        return kept[beta].pairwise_probability()

    beta, record = tested_mixture_beta(pairwise_at, data, np.asarray(map_labels(unit_table)),
                                       map_labels_of, test_rng, bootstrap_rng)
    plan.update(record)
    _tested_partition_warning(plan, beta)
    scaled = clone(energy).set_params(beta=beta)
    table = scaled.cluster_potential(X)
    if n_clusters is None and beta in kept and np.array_equal(kept[beta].log_e, table):
        return scaled, beta, kept[beta], plan
    return scaled, beta, make_trellis(table, n_clusters), plan
