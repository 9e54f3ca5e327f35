"""Few features (2-9 distinct columns): can a temperature meet the two-sided requirement?

With fewer than 10 distinct feature columns ``beta="auto"`` is not
calibrated (beta_ = 1, a warning, ``calibration_["method"] ==
"uncalibrated"``). This script measures, on small data (N = 10-12) and
several seeds, whether any temperature of the default energies
(``Dasgupta()`` over trees, ``CorrelationClustering()`` over partitions)
could meet the two-sided requirement there -- clear groups supported
>= 0.9, structureless data giving no cluster of 3..N-1 points (trees), no
three points all together (partitions), above 0.5 -- and whether
data-dependent calibrations that need no column resampling find such a
temperature:

- ``windows``: the requirement's statistic at fixed betas, per regime;
- ``DPM``: the posterior of ``DirichletProcessMixture`` itself, its
  prior's scale and kappa_0 chosen by the evidence over a grid;
- ``significance``: over trees, the largest beta at which no cluster of
  the MAP tree is supported above max(0.3, 1 - p), p its p-value against
  Gaussian references with X's covariance (a reference-null cap that
  lets significant clusters through);
- ``frequencies``: over trees, the beta whose supports of the MAP tree's
  clusters best match their frequencies under the perturbation below;
- ``point-frequencies``, ``weighted-frequencies``, ``redrawn-frequencies``:
  the same with frequencies under resamplings of the points, which need no
  scale estimate (``frequency_table``), and a second matching rule (the
  largest beta keeping every support below its frequency plus a margin);
- ``gaussian-null``: beta the largest at which SigClust-style Gaussian
  references (the pooled within-cluster covariance of X's correlation
  clustering MAP partition, clustered at X's own kernel width) stay humble
  (``gaussian_null_beta``), over the regimes and ``copies`` (one column
  copied 12 times);
- ``tested-null``: the same beta only where X's cluster index (SigClust)
  is significant against Gaussian references with X's covariance, else
  the largest beta at which X's own posterior is humble
  (``_calibration.tested_null_beta``, the trees' default ``beta="auto"``
  with 1-9 distinct columns);
- ``tested-sweep``: that default over 30 seeds and more group shapes;
- ``null-rank``: that default where the test is significant, with the
  Gaussian-null beta the minimum of 3 references' humble betas (the rule
  before) and the 2nd smallest of 7 (the default), over the sweep's
  regimes and iris (``--regimes`` picks some: "groups of 4", iris, noise);
- ``iris-diagnosis``: per iris subsample (12 flowers), the default's test
  and beta, and whether setosa is a cluster of the MAP tree (raw and
  standardised columns) and at which beta it is supported;
- ``test-power``: the test's variants, power on groups and iris and size
  on noise: the default (sample covariance, k from the correlation
  clustering), k = 2, robust covariances for the Gaussian references
  (minimum covariance determinant; each principal component's variance
  from its scores' MAD), a single-linkage gap statistic, and the best
  2-split's likelihood ratio of two isotropic Gaussians with variances of
  their own against one (``unequal_variance_ratio``: power for a tight
  group beside spread points), k = 3, the index of sphered data (the
  tied-covariance mixture's likelihood ratio, Friedman & Rubin's
  det W / det T), of standardised columns, and references with the
  within covariance of X's own best k-partition; also on Gaussian noise
  shaped as iris (``IRIS_SHAPED_NOISE``);
- ``cost``: that default's fit time over a plain fit at its beta_;
- ``flat-tested``: partitions, ``ExactFlatClustering()``'s own
  ``beta="auto"`` with 2-9 distinct columns ("test, then temper" to the
  mixture bootstrap, ``_calibration.tested_mixture_beta``) over the
  regimes of ``FLAT_REGIMES``, with P(K = 1) and iris's classes;
- ``flat-pvalues``: the p-values of its test (sequential, 49-999 Gaussian
  references), the share at or below each level, noise and groups;
- ``flat-iris``: that default on 18 iris flowers (6 a species, raw and
  standardised columns): all three species, P(K), beta_, the test, the
  MAP partition's K and ARI beside Ward's and k-means' at K = 3, and the
  mixture bootstrap's frequencies, redrawn from X's MAP partition (what
  beta is matched to) and from the species' own mixture;
  ``flat-iris-betas``: the species at fixed betas (can any temperature
  separate versicolor from virginica?); ``flat-evidence``: a candidate,
  the mixture bootstrap redrawn at K = 1..K_MAP + 1 by BIC weights.
- ``flat-candidates``: partitions, the beta each principle picks and the
  requirement's failures at it: the trees' calibrated beta_ carried over
  (``tree``), least squares of the co-clustering against the point
  bootstrap's frequencies (``rows``), against the exact posterior of
  ``DirichletProcessMixture`` (``dpm``, spherical, kappa_0 = 0.01), and
  against the mixture bootstrap without the test (``mixture``), each alone
  and behind the test; and the DPM's own posterior (``dpm posterior``: on
  noise P(three points share a block other than the whole set), with
  P(K = 1) beside it);
- ``flat-energies``: partitions, candidate energies of the few-feature
  flat path under the default calibration (its test, mixture bootstrap
  and streams), two-sided over every flat regime and iris (18 flowers,
  raw and standardised): the default, distances whitened by X's
  covariance (``sphered``), by the pooled within-cluster covariance of
  the MAP partition iterated to a fixed point (``within``) or of the
  planted groups / species themselves (``oracle within``), self-tuning
  local kernel widths (``local scale``), and the similarities centred by
  the degree null of modularity instead of their mean (``degrees``), and
  two likelihood models that need no temperature (``DPM``: the default
  ``DirichletProcessMixture()``; ``DPM, MAP within``: its prior scale the
  pooled within covariance of the default's MAP partition); on
  iris also SigClust's test on versicolor and virginica alone and the
  posterior of a DPM told the species' own covariance;
- ``flat-redraws``: partitions, what the default's beta is matched to after
  a significant test (``REDRAWS``): the mixture bootstrap of X's MAP
  partition (the default), of the tied-covariance Gaussian mixture BIC
  prefers (``tied mixture``, ``calibration.tied_mixture_partition``), the
  points drawn with replacement (``rows``), the same plus N(0, S / 2)
  noise (``smoothed rows``, S the MAP partition's pooled within
  covariance), and the MAP partition's mixture with its means and
  covariance redrawn too (``posterior mixture``, a Bayesian parametric
  bootstrap); on iris also the oracle floor (the coldest beta keeping
  setosa's weakest pair at 0.9: the least confidence across versicolor
  and virginica any matched beta could give) (``--redraws`` picks some,
  ``--per-seed FILE`` appends per-seed lines);
- ``iris-split-evidence``: whether versicolor and virginica are two groups
  by evidence without labels: SigClust's test on the two species alone
  (6-50 flowers each) and a full-covariance Gaussian mixture's BIC on all
  150 flowers;
- ``iris-trees``: trees, the default ``beta="auto"`` per iris subsample
  of 18 flowers (6 a class, the issue's size): setosa's support, and
  versicolor's and virginica's as information (``--first-seed`` splits
  a run);
- ``mixture-trees``: trees, after a significant test, the beta matched
  (least squares over every cluster of 2..N-1 points) to the clade
  frequencies of the MAP trees of 40 data sets redrawn from the Gaussian
  mixture of X's MAP partition (the partitions' principle,
  ``calibration.redrawn_mixture``) against the default Gaussian-null
  beta, on the same data in one run; on noise both forced too;
- ``null-partition-trees``: trees, the default ``beta="auto"`` with the
  Gaussian null's within-cluster covariance taken from another partition
  than the correlation-clustering MAP partition (``NULL_PARTITIONS``:
  the test's own k-means partition at its k or at k + 1, Ward's cut at
  k, the tied-covariance Gaussian mixture BIC prefers), the test
  unchanged, or the test over k = 2, 3, 4 at once (``max over k``,
  ``max_over_k_pvalue``) (``--null-partitions`` picks some, ``--verbose``
  per seed);
- ``setosa-bounds``: trees, iris (``--per-class`` 4 or 6 flowers a
  species): what the data allow the few-feature calibration -- the
  default test beside two oracle tests (the species' labels given: the
  setosa split's own index; iris's population given: the most powerful
  test against it), the beta setosa needs to reach 0.9, and the
  Gaussian-null references' humble betas with the default's partition
  and with the species' own (their 2nd smallest, the default's rank, and
  their largest);
- ``weak-regimes``: where that default is weak, its failures by branch,
  the test's p-values and references, and the failures with the
  Gaussian-null branch forced (is it the test or the beta?);
- ``candidates``: the beta each principle picks and the requirement's
  failures at it. Each principle gives a reference excess loss D, and beta
  is the grid value whose posterior expected excess loss over the MAP is
  nearest D (in log), as ``beta="auto"`` matches the feature bootstrap's:

  * ``rows``: the Bayesian bootstrap over the points (Rubin 1981; the
    loss-likelihood bootstrap's own form, Lyddon, Holmes & Walker 2019):
    Dirichlet(1) weights u on the points, every pair's similarity (trees)
    or weight (partitions) times u_i u_j;
  * ``noise``: a parametric perturbation X + N(0, s_f**2), s_f the pooled
    within-cluster standard deviation of each feature under the MAP
    partition of ``CorrelationClustering(beta=1)``, similarities at the
    full data's kernel width;
  * ``dpm`` (partitions): the loss's expected excess under the exact
    posterior of ``DirichletProcessMixture()`` (default empirical-Bayes
    prior), a model whose posterior needs no temperature.

    python benchmarks/bench_few_features.py
    python benchmarks/bench_few_features.py --seeds 5 --resamples 40
    python benchmarks/bench_few_features.py --only significance dpm
    python benchmarks/bench_few_features.py --resamples 20 --only point-frequencies \
        weighted-frequencies redrawn-frequencies
    python benchmarks/bench_few_features.py --seeds 10 --only gaussian-null
    python benchmarks/bench_few_features.py --seeds 10 --only tested-null [--tested-level 0.5]
    python benchmarks/bench_few_features.py --seeds 3 --only cost
    python benchmarks/bench_few_features.py --seeds 30 --only tested-sweep
    python benchmarks/bench_few_features.py --seeds 30 --only flat-tested
    python benchmarks/bench_few_features.py --seeds 60 --only flat-pvalues
    python benchmarks/bench_few_features.py --seeds 10 --only flat-candidates
    python benchmarks/bench_few_features.py --seeds 8 --first-seed 0 --only flat-iris --regimes raw
    python benchmarks/bench_few_features.py --seeds 10 --only flat-iris-betas
    python benchmarks/bench_few_features.py --seeds 30 --only flat-evidence
    python benchmarks/bench_few_features.py --seeds 5 --first-seed 5 --only flat-energies \
        --regimes "iris raw"
    python benchmarks/bench_few_features.py --seeds 10 --only flat-energies --energies DPM \
        "DPM, MAP within"
    python benchmarks/bench_few_features.py --only iris-split-evidence
    python benchmarks/bench_few_features.py --seeds 30 --only flat-redraws --regimes groups \
        "iris raw"
    python benchmarks/bench_few_features.py --seeds 30 --only weak-regimes
    python benchmarks/bench_few_features.py --seeds 30 --only null-rank [--regimes iris]
    python benchmarks/bench_few_features.py --seeds 30 --only test-power [--regimes iris] \
        [--test-variants "sample (default)" "own within cov."]
    python benchmarks/bench_few_features.py --seeds 30 --only iris-diagnosis
    python benchmarks/bench_few_features.py --seeds 10 --first-seed 10 --only iris-trees
    python benchmarks/bench_few_features.py --seeds 30 --only mixture-trees --regimes "groups of 4"
    python benchmarks/bench_few_features.py --seeds 30 --only null-partition-trees --regimes noise
    python benchmarks/bench_few_features.py --seeds 30 --only setosa-bounds [--per-class 6]
"""
import argparse
import itertools
import time
import warnings

import numpy as np
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import pdist, squareform
from sklearn.base import clone
from sklearn.datasets import load_iris

from sktrellis import ExactFlatClustering, ExactHierarchicalClustering
from sktrellis import _calibration as calibration
from sktrellis._engine.tree.conversion import masks_from_merges
from sktrellis._engine.trellis.flat_trellis import FlatTrellis, map_partition
from sktrellis.energies import (CorrelationClustering, Dasgupta, DirichletProcessMixture,
                                SplitEnergy, subset_pair_sums, subset_sums)

BETAS = np.exp(np.linspace(np.log(0.01), np.log(300.0), 31))
WINDOW_BETAS = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0)
SHIFT = 6.0


def regime_data(regime, seed):
    """(X, labels of the planted groups or None for structureless data)."""
    rng = np.random.default_rng(seed)
    if regime == "noise, 12 x 2":
        return rng.normal(size=(12, 2)), None
    if regime == "noise, 12 x 4":
        return rng.normal(size=(12, 4)), None
    # Group k shifted by SHIFT standard deviations along feature k: clear
    # groups (at 4 standard deviations some seeds put a point nearer the
    # other group, and the MAP structure itself misses the group).
    if regime == "2 groups of 5, 2 features":
        y = np.repeat(np.arange(2), 5)
        return rng.normal(size=(10, 2)) + SHIFT * np.eye(2)[y], y
    if regime == "3 groups of 4, 4 features":
        y = np.repeat(np.arange(3), 4)
        return rng.normal(size=(12, 4)) + SHIFT * np.eye(4)[y], y
    if regime == "iris, 4 per class (setosa)":
        X, y = load_iris(return_X_y=True)
        pick = np.random.RandomState(seed)
        idx = np.concatenate([pick.choice(np.flatnonzero(y == k), 4, replace=False)
                              for k in range(3)])
        # Versicolor and virginica overlap: only setosa is a clear group.
        return X[idx], np.where(y[idx] == 0, 0, -1)
    raise ValueError(regime)


REGIMES = ("noise, 12 x 2", "noise, 12 x 4", "2 groups of 5, 2 features",
           "3 groups of 4, 4 features", "iris, 4 per class (setosa)")


def largest_together(pairwise):
    return max(min(pairwise[i, j], pairwise[i, k], pairwise[j, k])
               for i, j, k in itertools.combinations(range(len(pairwise)), 3))


def statistic(model, y, flat):
    """Noise: the largest structure it should not show; groups: the smallest group support."""
    n_points = len(model.labels_)
    if y is None:
        if flat:
            return largest_together(model.pairwise_probability_)
        return max((p for members, p in model.most_probable_clusters(5, min_size=3)
                    if len(members) < n_points), default=0.0)
    groups = [np.flatnonzero(y == k) for k in np.unique(y[y >= 0])]
    if flat:
        return min(model.pairwise_probability_[np.ix_(g, g)].min() for g in groups)
    return min(model.cluster_probability(g) for g in groups)


def fails(value, y):
    return value > 0.5 if y is None else value < 0.9


class Posteriors:
    """The exact posteriors of one data set on the beta grid, with their expected excess loss."""

    def __init__(self, X, flat):
        self.X, self.flat, self.models = X, flat, {}
        if flat:
            self.unit = calibration._unit_loss(CorrelationClustering())
            self.loss = calibration.flat_loss(self.unit, X)
            self.map_loss = self.loss(calibration.co_clustering(self.labels(self.unit, X)))
        else:
            self.unit = calibration._unit_loss(Dasgupta())
            self.potential = self.unit.split_potential(X)
            self.map_loss = self.tree_loss(calibration._search_map_merges(self.unit, X))

    @staticmethod
    def labels(unit, data):
        return map_partition(unit.cluster_potential(data))[0]

    def tree_loss(self, merges):
        return -calibration._tree_log_potential(self.potential, merges, len(self.X))

    def structure_loss(self, unit, data):
        """Full-data loss of the minimum-loss structure of ``data`` under ``unit``."""
        if self.flat:
            return self.loss(calibration.co_clustering(self.labels(unit, data)))
        return self.tree_loss(calibration._search_map_merges(unit, data))

    def model(self, beta):
        if beta not in self.models:
            if self.flat:
                self.models[beta] = ExactFlatClustering(CorrelationClustering(beta=beta),
                                                        verbose=0).fit(self.X)
            else:
                self.models[beta] = ExactHierarchicalClustering(Dasgupta(beta=beta),
                                                                verbose=0).fit(self.X)
        return self.models[beta]

    def excess(self, beta):
        model = self.model(beta)
        if self.flat:
            return self.loss(model.pairwise_probability_) - self.map_loss
        parents, lefts = model._trellis.sample_splits(200, np.random.RandomState(0))
        losses = -self.potential.evaluate(parents.ravel(), lefts.ravel()).reshape(
            parents.shape).sum(axis=1)
        return float(losses.mean()) - self.map_loss

    def matched_beta(self, target):
        gaps = [abs(np.log(max(self.excess(beta), 1e-12)) - np.log(max(target, 1e-12)))
                for beta in BETAS]
        return float(BETAS[int(np.argmin(gaps))])


def pair_matrix(unit, X, gamma=None):
    """The energy's pairwise matrix on X (similarities or signed weights), at kernel width gamma."""
    unit = clone(unit).set_params(gamma=gamma) if gamma is not None else unit
    return unit.similarities(X) if isinstance(unit, Dasgupta) else unit.weights(X)


def median_gamma(unit, X):
    distances = pdist(X, "sqeuclidean" if unit.affinity == "rbf" else "euclidean")
    return 1.0 / np.median(distances)


def within_scale(X):
    """Pooled within-cluster standard deviation per feature (correlation clustering MAP)."""
    labels = np.asarray(Posteriors.labels(calibration._unit_loss(CorrelationClustering()), X))
    residuals = X - np.array([X[labels == k].mean(axis=0) for k in labels])
    dof = len(X) - len(np.unique(labels))
    return np.sqrt((residuals ** 2).sum(axis=0) / dof) if dof > 0 else X.std(axis=0)


def excess_rows(posteriors, rng, n_resamples):
    matrix = pair_matrix(posteriors.unit, posteriors.X)
    weighted = clone(posteriors.unit).set_params(affinity="precomputed")
    excess = []
    for _ in range(n_resamples):
        u = rng.dirichlet(np.ones(len(matrix))) * len(matrix)
        excess.append(posteriors.structure_loss(weighted, u[:, None] * matrix * u[None, :])
                      - posteriors.map_loss)
    return float(np.mean(excess))


def excess_noise(posteriors, rng, n_resamples):
    X, unit = posteriors.X, posteriors.unit
    fixed = clone(unit).set_params(gamma=median_gamma(unit, X))
    scale = within_scale(X)
    excess = []
    for _ in range(n_resamples):
        excess.append(posteriors.structure_loss(fixed, X + rng.normal(size=X.shape) * scale)
                      - posteriors.map_loss)
    return float(np.mean(excess))


def excess_dpm(posteriors, rng, n_resamples):
    dpm = ExactFlatClustering(DirichletProcessMixture(), verbose=0).fit(posteriors.X)
    return posteriors.loss(dpm.pairwise_probability_) - posteriors.map_loss


CANDIDATES = {"rows": excess_rows, "noise": excess_noise, "dpm": excess_dpm}


def evidence_dpm(X):
    """The DPM (diagonal covariance) whose prior scale and kappa_0 maximise the evidence."""
    best = None
    for scale, kappa in itertools.product((1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0),
                                          (0.01, 0.1, 1.0)):
        # psi_f = nu_0 * scale * v_f with the default nu_0 = 5.
        energy = DirichletProcessMixture(covariance_type="diag", mean_precision_prior=kappa,
                                         covariance_prior=5.0 * scale * X.var(axis=0))
        model = ExactFlatClustering(energy, verbose=0).fit(X)
        if best is None or model.log_evidence_ > best.log_evidence_:
            best = model
    return best


def dpm_table(n_seeds):
    """The DPM's own posterior as the answer, its prior chosen by the evidence (type-II ML)."""
    print(f"\nDPM, prior by the evidence: the requirement's statistic and P(K = 1), "
          f"seeds 0..{n_seeds - 1}")
    print(f"{'regime':>28} {'worst':>6} {'fail':>5} {'P(K=1)':>12}")
    for regime in REGIMES:
        values, one = [], []
        for seed in range(n_seeds):
            X, y = regime_data(regime, seed)
            model = evidence_dpm(X)
            values.append(statistic(model, y, True))
            one.append(model.n_clusters_probability_[1])
        worst = max(values) if y is None else min(values)
        print(f"{regime:>28} {worst:>6.2f} {sum(fails(v, y) for v in values):>2}/{n_seeds:<2} "
              f"{min(one):>5.2f}-{max(one):<5.2f}", flush=True)


def map_clusters(X, unit, min_size=3):
    """Clusters of min_size..N-1 points of the minimum-loss tree of X, as index arrays."""
    n_points = len(X)
    masks = masks_from_merges(calibration._search_map_merges(unit, X), n_points)[n_points:]
    return [np.flatnonzero([mask >> i & 1 for i in range(n_points)]) for mask in masks
            if min_size <= bin(mask).count("1") <= n_points - 1]


def cohesion(members, similarities):
    """Mean similarity inside a cluster minus its mean similarity to the other points."""
    inside = np.zeros(len(similarities), dtype=bool)
    inside[members] = True
    size = inside.sum()
    within = similarities[np.ix_(inside, inside)].sum() / (size * (size - 1))
    return within - similarities[np.ix_(inside, ~inside)].mean()


def significance(X, unit, rng, n_references=30):
    """Each MAP cluster with its p-value against Gaussian references of X's covariance.

    The p-value of a cluster of k points: the share of references whose most
    cohesive MAP cluster of k points is at least as cohesive (a familywise
    test, as the requirement looks at the largest cluster).
    """
    best = []
    for _ in range(n_references):
        reference = rng.multivariate_normal(X.mean(axis=0), np.atleast_2d(np.cov(X.T)),
                                            size=len(X))
        similarities = unit.similarities(reference)
        top = {}
        for members in map_clusters(reference, unit):
            top[len(members)] = max(top.get(len(members), -np.inf),
                                    cohesion(members, similarities))
        best.append(top)
    similarities = unit.similarities(X)
    return [(members, (1 + sum(top.get(len(members), -np.inf) >= cohesion(members, similarities)
                               for top in best)) / (1 + n_references))
            for members in map_clusters(X, unit)]


def significance_table(n_seeds):
    """Trees: the largest beta at which no MAP cluster is surer than its significance allows.

    Every cluster S of 3..N-1 points of the MAP tree may have support up to
    max(0.3, 1 - p(S)), p(S) its p-value against Gaussian references
    (``significance``): a reference-null cap that lets significant clusters
    through.
    """
    print(f"\ntrees, significance cap: beta and the requirement's statistic, seeds "
          f"0..{n_seeds - 1}")
    print(f"{'regime':>28} {'beta (median)':>13} {'worst':>6} {'fail':>5}")
    for regime in REGIMES:
        betas, values = [], []
        for seed in range(n_seeds):
            X, y = regime_data(regime, seed)
            posteriors = Posteriors(X, False)
            tested = significance(X, posteriors.unit, np.random.RandomState(seed))
            chosen = BETAS[0]
            for beta in BETAS:
                model = posteriors.model(beta)
                if any(model.cluster_probability(members) > max(0.3, 1.0 - p)
                       for members, p in tested):
                    break
                chosen = beta
            betas.append(chosen)
            values.append(statistic(posteriors.model(chosen), y, False))
        worst = max(values) if y is None else min(values)
        print(f"{regime:>28} {np.median(betas):>13.3g} {worst:>6.2f} "
              f"{sum(fails(v, y) for v in values):>2}/{n_seeds:<2}", flush=True)


def perturbed(posteriors, rng):
    """One perturbation of X (``noise``): the unit energy at X's kernel width, data, row ids."""
    X, unit = posteriors.X, posteriors.unit
    fixed = clone(unit).set_params(gamma=median_gamma(unit, X))
    return fixed, X + rng.normal(size=X.shape) * within_scale(X), np.arange(len(X))


def reweighted(posteriors, rng):
    """One Bayesian bootstrap over the points (``rows``): each similarity times u_i u_j."""
    matrix = pair_matrix(posteriors.unit, posteriors.X)
    u = rng.dirichlet(np.ones(len(matrix))) * len(matrix)
    return (clone(posteriors.unit).set_params(affinity="precomputed"),
            u[:, None] * matrix * u[None, :], np.arange(len(matrix)))


def redrawn(posteriors, rng):
    """The points drawn with replacement (a copy of a point is a point), at X's kernel width."""
    X, unit = posteriors.X, posteriors.unit
    ids = rng.randint(len(X), size=len(X))
    return clone(unit).set_params(gamma=median_gamma(unit, X)), X[ids], ids


def _weighted_dasgupta(X, left, right, size, within):
    """Dasgupta's log potential with weighted points: -U(S) W(A, B), U and W u-weighted."""
    return -size[left | right] * (within[left | right] - within[left] - within[right])


def weighted(posteriors, rng):
    """One Bayesian bootstrap over the points with Dasgupta's sizes weighted too.

    Point i weighs u_i (Dirichlet(1), mean 1): each similarity times u_i
    u_j and each cluster's size the sum of its weights, the limit of
    drawing u_i copies of each point; the exact MAP by the trellis.
    """
    matrix = pair_matrix(posteriors.unit, posteriors.X)
    u = rng.dirichlet(np.ones(len(matrix))) * len(matrix)
    energy = SplitEnergy(_weighted_dasgupta, kw_args={
        "size": subset_sums(u), "within": subset_pair_sums(u[:, None] * matrix * u[None, :])})
    return energy, np.arange(len(matrix), dtype=np.float64)[:, None], np.arange(len(matrix))


def resample_masks(unit, data, ids):
    """Masks over the original points of every cluster of a resample's MAP tree."""
    if isinstance(unit, SplitEnergy):
        merges = ExactHierarchicalClustering(unit, verbose=0).fit(data).children_
    else:
        merges = calibration._search_map_merges(unit, data)
    return set(masks_from_merges(merges, len(data), ids))


def map_frequencies(posteriors, resample, rng, n_resamples, min_size):
    """The MAP tree's clusters of min_size..N-1 points and their frequencies among resamples.

    A resample's clusters are read as sets of the original points they
    hold; a cluster S counts only in the resamples where it can be told
    apart (at least two of its points drawn and one point outside it), as
    S restricted to the points drawn.
    """
    clusters = map_clusters(posteriors.X, posteriors.unit, min_size)
    masks = [sum(1 << int(i) for i in members) for members in clusters]
    counts, tested = np.zeros(len(masks)), np.zeros(len(masks))
    for _ in range(n_resamples):
        unit, data, ids = resample(posteriors, rng)
        found = resample_masks(unit, data, ids)
        drawn = sum(1 << int(i) for i in set(ids))
        for c, mask in enumerate(masks):
            present = mask & drawn
            if bin(present).count("1") >= 2 and drawn & ~mask:
                tested[c] += 1
                counts[c] += present in found
    return clusters, counts / np.maximum(tested, 1)


def least_squares_beta(posteriors, clusters, frequencies):
    """The grid beta minimising the root mean square of P_beta(S) - f(S)."""
    errors = [np.sqrt(np.mean([(posteriors.model(beta).cluster_probability(members) - f) ** 2
                               for members, f in zip(clusters, frequencies)]))
              for beta in BETAS]
    return float(BETAS[int(np.argmin(errors))])


def bounded_beta(posteriors, clusters, frequencies, margin):
    """The largest grid beta (from below) at which no P_beta(S) exceeds f(S) + margin."""
    chosen = BETAS[0]
    for beta in BETAS:
        model = posteriors.model(beta)
        if any(model.cluster_probability(members) > f + margin
               for members, f in zip(clusters, frequencies)):
            break
        chosen = beta
    return float(chosen)


#: Gaussian-null rules measured: (level, references, the rank of beta among their
#: humble betas: 1 their minimum, 4 of 7 their median).
GAUSSIAN_NULL_RULES = ((0.4, 3, 1), (0.5, 3, 1), (0.3, 7, 4), (0.5, 7, 2))
#: Trees: the resamplings whose MAP-cluster frequencies the supports are matched to.
RESAMPLINGS = {"frequencies": perturbed, "point-frequencies": reweighted,
               "weighted-frequencies": weighted, "redrawn-frequencies": redrawn}
#: Matching rules of the supports to the frequencies: least squares, or the
#: largest beta keeping every support below its frequency plus a margin.
MARGINS = (0.05, 0.1, 0.2)


def frequency_table(n_seeds, n_resamples, name):
    """Trees: beta whose supports of the MAP clusters match their resampling frequencies.

    Each cluster S of 3..N-1 points (or 2..N-1: ``+pairs``) of the MAP tree
    gets its frequency f(S) among the MAP trees of ``n_resamples`` resamples
    (``RESAMPLINGS``): ``frequencies``, the ``noise`` perturbation;
    resamplings of the points, which need no scale estimate:
    ``point-frequencies``, the Bayesian bootstrap of ``rows`` (similarities
    times u_i u_j, sizes unweighted); ``weighted-frequencies``, the same
    with Dasgupta's sizes weighted too (the limit of u_i copies of point
    i); ``redrawn-frequencies``, the points drawn with replacement. beta is
    the grid value minimising the root mean square of P_beta(S) - f(S) over
    those clusters (``lsq``: clade supports matched to bootstrap
    frequencies, as pvclust's BP, rather than the excess loss) or the
    largest grid value at which no P_beta(S) exceeds f(S) plus a margin
    (``f+m``). ``worst f`` is the requirement's statistic read off the
    frequencies themselves (worst seed): on noise the largest f(S), on
    groups the smallest frequency of a planted group.
    """
    resample = RESAMPLINGS[name]
    rules = [("lsq", 3)] + ([("lsq+pairs", 2)] + [(f"f+{m:g}", 3) for m in MARGINS]
                            if name != "frequencies" else [])
    print(f"\ntrees, supports of the MAP clusters matched to their {name}, seeds "
          f"0..{n_seeds - 1}, {n_resamples} resamples")
    print(f"{'regime':>28} {'rule':>10} {'beta (median)':>13} {'worst':>6} {'fail':>5} "
          f"{'worst f':>7}")
    for regime in REGIMES:
        betas, values = {r: [] for r, _ in rules}, {r: [] for r, _ in rules}
        frequency = []   # the requirement's statistic read off the frequencies themselves
        for seed in range(n_seeds):
            X, y = regime_data(regime, seed)
            posteriors = Posteriors(X, False)
            clusters, frequencies = map_frequencies(
                posteriors, resample, np.random.RandomState(seed), n_resamples,
                min(size for _, size in rules))
            found = {size: ([c for c in clusters if len(c) >= size],
                            [f for c, f in zip(clusters, frequencies) if len(c) >= size])
                     for size in (2, 3)}
            if y is None:
                frequency.append(max(found[3][1], default=0.0))
            else:
                at = {tuple(c): f for c, f in zip(clusters, frequencies)}
                frequency.append(min(at.get(tuple(np.flatnonzero(y == k)), 0.0)
                                     for k in np.unique(y[y >= 0])))
            for rule, size in rules:
                clusters, frequencies = found[size]
                if rule.startswith("lsq"):
                    beta = least_squares_beta(posteriors, clusters, frequencies)
                else:
                    beta = bounded_beta(posteriors, *found[3], float(rule[2:]))
                betas[rule].append(beta)
                values[rule].append(statistic(posteriors.model(beta), y, False))
        worst_f = max(frequency) if y is None else min(frequency)
        for rule, _ in rules:
            worst = max(values[rule]) if y is None else min(values[rule])
            print(f"{regime:>28} {rule:>10} {np.median(betas[rule]):>13.3g} {worst:>6.2f} "
                  f"{sum(fails(v, y) for v in values[rule]):>2}/{n_seeds:<2} {worst_f:>6.2f}",
                  flush=True)


def humility(X, beta, gamma, flat):
    """The requirement's structureless statistic of the default energy's posterior over X."""
    if flat:
        model = ExactFlatClustering(CorrelationClustering(beta=beta, gamma=gamma),
                                    verbose=0).fit(X)
        return largest_together(model.pairwise_probability_)
    model = ExactHierarchicalClustering(Dasgupta(beta=beta, gamma=gamma), verbose=0).fit(X)
    return calibration.largest_clade_support(model._trellis, len(X))


def regime_or_copies(regime, seed):
    """``regime_data``, or for "copies" one noise column copied 12 times (no labels)."""
    if regime == "copies":
        return np.repeat(np.random.default_rng(seed).normal(size=(12, 1)), 12, axis=1), None
    return regime_data(regime, seed)


def gaussian_null_beta(X, flat, level, n_references, rank):
    """``_calibration.gaussian_null_beta`` with the default energy at X's kernel width (exact)."""
    unit = calibration._unit_loss(CorrelationClustering() if flat else Dasgupta())
    gamma = median_gamma(unit, X)
    rng = calibration._rngs(None)[2]   # the reference-null cap's stream
    return calibration.gaussian_null_beta(
        lambda beta, data, _: humility(data, beta, gamma, flat), X, rng, level=level,
        n_references=n_references, rank=rank)[0]


def gaussian_null_table(n_seeds, rules):
    """The Gaussian-null temperature as beta: the requirement's failures, per rule.

    Each rule is (level, references, rank). Adds ``copies`` (one noise
    column copied 12 times, N = 12) to the regimes.
    """
    print(f"\nGaussian null (SigClust-style, within-cluster covariance, X's kernel width): "
          f"seeds 0..{n_seeds - 1}")
    print(f"{'regime':>28} {'':>5} {'rule':>12} {'beta range':>13} {'worst':>6} {'fail':>5}")
    for regime in REGIMES + ("copies",):
        for flat in (False, True):
            for level, n_references, rank in rules:
                betas, values = [], []
                for seed in range(n_seeds):
                    X, y = regime_or_copies(regime, seed)
                    beta = gaussian_null_beta(X, flat, level, n_references, rank)
                    betas.append(beta)
                    values.append(statistic(Posteriors(X, flat).model(beta), y, flat))
                worst = max(values) if y is None else min(values)
                rule = f"{level:g}/{rank}of{n_references}"
                print(f"{regime:>28} {'flat' if flat else 'tree':>5} {rule:>12} "
                      f"{min(betas):>6.3g}-{max(betas):<6.3g} {worst:>6.2f} "
                      f"{sum(fails(v, y) for v in values):>2}/{n_seeds:<2}", flush=True)


def tested_null_table(n_seeds):
    """Test, then temper (``_calibration.tested_null_beta``), trees and partitions.

    Trees: ``ExactHierarchicalClustering()``'s own ``beta="auto"``, which
    applies it with 2-9 distinct columns (and one). Partitions: the same
    function with the flat posterior's exact statistic at X's kernel width,
    the test's references seeded per seed.
    """
    print(f"\ntested Gaussian null (alpha {calibration.STRUCTURE_ALPHA:g}, level "
          f"{calibration.GAUSSIAN_NULL_LEVEL:g}, else X's own posterior at "
          f"{calibration.NULL_LEVEL:g}): seeds 0..{n_seeds - 1}")
    print(f"{'regime':>28} {'':>5} {'significant':>11} {'beta range':>13} {'worst':>6} "
          f"{'fail':>5}")
    for regime in REGIMES + ("copies",):
        data = []
        for seed in range(n_seeds):
            data.append(regime_or_copies(regime, seed))
        for flat in (False, True):
            betas, values, significant = [], [], 0
            for seed, (X, y) in enumerate(data):
                if flat:
                    gamma = median_gamma(calibration._unit_loss(CorrelationClustering()), X)
                    beta, record = calibration.tested_null_beta(
                        lambda beta, data, _: humility(data, beta, gamma, True), X,
                        np.random.RandomState(1000 + seed), calibration._rngs(None)[2])
                    model = Posteriors(X, True).model(beta)
                else:
                    model = ExactHierarchicalClustering(verbose=0).fit(X)
                    beta, record = model.beta_, model.calibration_
                significant += record["branch"] == "gaussian null"
                betas.append(beta)
                values.append(statistic(model, y, flat))
            worst = max(values) if y is None else min(values)
            print(f"{regime:>28} {'flat' if flat else 'tree':>5} {significant:>8}/{n_seeds:<2} "
                  f"{min(betas):>6.3g}-{max(betas):<6.3g} {worst:>6.2f} "
                  f"{sum(fails(v, y) for v in values):>2}/{n_seeds:<2}", flush=True)


def tested_sweep_table(n_seeds):
    """Trees, the default ``beta="auto"`` (test, then temper) over more seeds and shapes.

    Groups shifted by SHIFT standard deviations along their own feature,
    the other features noise; noise N = 12. Seeds 0..n_seeds - 1 for groups,
    twice as many for noise.
    """
    print(f"\ntrees, test then temper over seeds 0..{n_seeds - 1} (noise: 0..{2 * n_seeds - 1})")
    print(f"{'regime':>28} {'fail':>7} {'branch taken':>22} {'worst':>6}")
    for n_groups, size, n_features in ((2, 5, 2), (2, 5, 3), (2, 5, 4), (3, 4, 3), (3, 4, 4)):
        fails, other, worst = 0, 0, 1.0
        for seed in range(n_seeds):
            y = np.repeat(np.arange(n_groups), size)
            X = (np.random.default_rng(seed).normal(size=(len(y), n_features))
                 + SHIFT * np.eye(n_features)[y])
            model = ExactHierarchicalClustering(verbose=0).fit(X)
            value = statistic(model, y, False)
            fails += value < 0.9
            other += model.calibration_["branch"] != "gaussian null"
            worst = min(worst, value)
        print(f"{f'{n_groups} groups of {size}, {n_features} f':>28} {fails:>3}/{n_seeds:<3} "
              f"{f'{other} own posterior':>22} {worst:>6.2f}", flush=True)
    for n_features in (2, 3, 4):
        fails, other, worst = 0, 0, 0.0
        for seed in range(2 * n_seeds):
            X = np.random.default_rng(seed).normal(size=(12, n_features))
            model = ExactHierarchicalClustering(verbose=0).fit(X)
            value = statistic(model, None, False)
            fails += value > 0.5
            other += model.calibration_["branch"] == "gaussian null"
            worst = max(worst, value)
        print(f"{f'noise, 12 x {n_features}':>28} {fails:>3}/{2 * n_seeds:<3} "
              f"{f'{other} gaussian null':>22} {worst:>6.2f}", flush=True)


def weak_regimes_table(n_seeds):
    """Trees, where "test, then temper" is weak: is it the test or the Gaussian-null beta?

    Per regime, over seeds 0..n_seeds - 1, the default ``beta="auto"``'s
    failures split by branch, the range of the test's p-values and of the
    references its sequential test drew (``structure_pvalue``), and the
    failures with the Gaussian-null branch forced (``STRUCTURE_ALPHA`` = 1):
    failures in the "own posterior" branch that the forced branch passes
    are the test's (no power), failures that remain are the Gaussian-null
    beta's (too low). Regimes: two groups of 5 shifted along 2 of 3
    features (the third pure noise), three groups of 4 in 3 and 4
    features, and iris, 4 flowers per class (setosa must be >= 0.9).
    """
    print(f"\ntrees, the weak regimes of test then temper, seeds 0..{n_seeds - 1}")
    print(f"{'regime':>28} {'fail':>6} {'own':>4} {'null':>4} {'p range':>13} "
          f"{'refs':>8} {'forced':>6} {'worst':>6}")
    regimes = [(f"{g} groups of {s}, {f} f", (g, s, f)) for g, s, f in
               ((2, 5, 3), (3, 4, 3), (3, 4, 4))] + [("iris, 4 per class (setosa)", None)]
    alpha = calibration.STRUCTURE_ALPHA
    for name, shape in regimes:
        fail = {"own posterior": 0, "gaussian null": 0}
        forced_fails, pvalues, references, worst = 0, [], [], 1.0
        for seed in range(n_seeds):
            if shape is None:
                X, y = regime_data(name, seed)
            else:
                n_groups, size, n_features = shape
                y = np.repeat(np.arange(n_groups), size)
                X = (np.random.default_rng(seed).normal(size=(len(y), n_features))
                     + SHIFT * np.eye(n_features)[y])
            model = ExactHierarchicalClustering(verbose=0).fit(X)
            record = model.calibration_
            value = statistic(model, y, False)
            worst = min(worst, value)
            pvalues.append(record["p_value"])
            references.append(record["n_test_references"])
            fail[record["branch"]] += value < 0.9
            if record["branch"] == "gaussian null":
                forced_fails += value < 0.9
            else:
                calibration.STRUCTURE_ALPHA = 1.0
                try:
                    forced = ExactHierarchicalClustering(verbose=0).fit(X)
                finally:
                    calibration.STRUCTURE_ALPHA = alpha
                forced_fails += statistic(forced, y, False) < 0.9
        print(f"{name:>28} {sum(fail.values()):>2}/{n_seeds:<3} {fail['own posterior']:>4} "
              f"{fail['gaussian null']:>4} {min(pvalues):>6.3f}-{max(pvalues):<6.3f} "
              f"{min(references):>3}-{max(references):<4} {forced_fails:>2}/{n_seeds:<3} "
              f"{worst:>6.2f}", flush=True)


#: Gaussian-null ranks compared by ``null-rank``: (references, rank), the
#: rule before (the minimum of 3) and the default.
NULL_RANKS = ((3, 1), (calibration.N_GAUSSIAN_REFERENCES, calibration.GAUSSIAN_NULL_RANK))


def null_rank_data(regime, seed):
    """(X, labels or None) of ``null-rank``'s regimes: the sweep's shapes, iris and copies."""
    if regime == "noise, one column x 12":
        return regime_or_copies("copies", seed)
    if regime == IRIS_SHAPED_NOISE:
        # Gaussian noise shaped as the iris subsamples are: nearly one-dimensional.
        X, y = load_iris(return_X_y=True)
        return np.random.default_rng(seed).multivariate_normal(
            np.zeros(4), np.cov(X[y > 0].T), size=12), None
    if regime.startswith("noise"):
        return np.random.default_rng(seed).normal(size=(12, int(regime[-1]))), None
    if regime.startswith("iris"):
        return regime_data("iris, 4 per class (setosa)", seed)
    words = regime.replace(",", "").split()   # "3 groups of 4, 3 f"
    n_groups, size, n_features = int(words[0]), int(words[3]), int(words[4])
    y = np.repeat(np.arange(n_groups), size)
    return (np.random.default_rng(seed).normal(size=(len(y), n_features))
            + SHIFT * np.eye(n_features)[y]), y


#: Gaussian noise, 12 x 4, with the covariance of iris's 100 versicolor and virginica
#: flowers (eigenvalues 1.18, 0.12, 0.08, 0.03): the level of a test on iris-shaped noise.
IRIS_SHAPED_NOISE = "noise, versic.+virg. cov"
NULL_RANK_REGIMES = ("2 groups of 5, 2 f", "2 groups of 5, 3 f", "2 groups of 5, 4 f",
                     "3 groups of 4, 3 f", "3 groups of 4, 4 f", "iris setosa (12)",
                     "noise 12 x 2", "noise 12 x 3", "noise 12 x 4", "noise, one column x 12")


def null_rank_table(n_seeds, regimes=NULL_RANK_REGIMES):
    """Trees: the Gaussian-null beta's rank among its references' humble betas, before and now.

    ``ExactHierarchicalClustering()``'s default ``beta="auto"`` over the
    tested-sweep's regimes and iris (12 flowers; setosa must reach 0.9),
    seeds 0..n_seeds - 1 (noise twice as many). Where the test is
    significant the fit is repeated with each rule of ``NULL_RANKS``
    (``calibration.N_GAUSSIAN_REFERENCES``, ``calibration.GAUSSIAN_NULL_RANK``);
    elsewhere the branch does not use the rule. Per rule: failures, the
    worst value, the range of beta_ over the significant seeds and the mean
    posteriors fitted for the null (``n_reference_fits``).
    """
    print(f"\ntrees, Gaussian-null rank (references, rank), seeds 0..{n_seeds - 1} "
          f"(noise: 0..{2 * n_seeds - 1})")
    print(f"{'regime':>22} {'signif':>7} " + " ".join(
        f"{f'{rank} of {n}: fail worst beta fits':>36}" for n, rank in NULL_RANKS))
    defaults = calibration.N_GAUSSIAN_REFERENCES, calibration.GAUSSIAN_NULL_RANK
    for regime in regimes:
        seeds = range(2 * n_seeds if regime.startswith("noise") else n_seeds)
        significant, results = 0, {rule: [] for rule in NULL_RANKS}
        for seed in seeds:
            X, y = null_rank_data(regime, seed)
            for rule in NULL_RANKS:
                calibration.N_GAUSSIAN_REFERENCES, calibration.GAUSSIAN_NULL_RANK = rule
                try:
                    model = ExactHierarchicalClustering(verbose=0).fit(X)
                finally:
                    calibration.N_GAUSSIAN_REFERENCES, calibration.GAUSSIAN_NULL_RANK = defaults
                record = model.calibration_
                results[rule].append((statistic(model, y, False), model.beta_,
                                      record["n_reference_fits"],
                                      record["branch"] == "gaussian null"))
                if record["branch"] != "gaussian null":
                    # The own-posterior branch does not use the rule.
                    for other in NULL_RANKS:
                        if other != rule:
                            results[other].append(results[rule][-1])
                    break
            significant += results[NULL_RANKS[0]][-1][3]
        cells = []
        for rule in NULL_RANKS:
            values = np.array([row[0] for row in results[rule]])
            tested = [row for row in results[rule] if row[3]] or [(0, np.nan, 0, True)]
            betas = [row[1] for row in tested]
            worst = values.max() if y is None else values.min()
            cells.append(f"{sum(fails(v, y) for v in values):>3}/{len(values):<3} {worst:>5.2f} "
                         f"{min(betas):>6.3g}-{max(betas):<6.3g} "
                         f"{np.mean([row[2] for row in tested]):>5.1f}")
        print(f"{regime:>22} {significant:>3}/{len(seeds):<3} " + " ".join(
            f"{cell:>36}" for cell in cells), flush=True)


def _pc_mad_covariance(X):
    """X's covariance with each principal component's variance its scores' MAD, squared."""
    values, vectors = np.linalg.eigh(np.atleast_2d(np.cov(X.T)))
    scores = (X - X.mean(axis=0)) @ vectors
    mad = 1.4826 * np.median(np.abs(scores - np.median(scores, axis=0)), axis=0)
    return (vectors * mad ** 2) @ vectors.T


def _mcd_covariance(X):
    """The reweighted minimum covariance determinant estimate (Rousseeuw 1984)."""
    from sklearn.covariance import MinCovDet
    return MinCovDet(random_state=0).fit(X).covariance_


def single_linkage_gap(data, min_size=3):
    """The highest single-linkage merge of two clusters of at least ``min_size`` points,
    over the median merge height (large: a gap no Gaussian shows)."""
    from scipy.cluster.hierarchy import linkage
    merges = linkage(data, "single")
    sizes = np.concatenate([np.ones(len(data)), merges[:, 3]])
    sides = np.minimum(sizes[merges[:, 0].astype(int)], sizes[merges[:, 1].astype(int)])
    return merges[sides >= min_size, 2].max(initial=0.0) / np.median(merges[:, 2])


def unequal_variance_ratio(data, min_size=3):
    """Per data set (R, N, p): the best 2-split's log likelihood ratio, two isotropic Gaussians
    with variances of their own against one (small: a tight group beside spread points).

    ``min over splits of sum_c n_c log(W_c / n_c) - N log(T / N)``, W_c a
    side's within sum of squares, T the total; both sides at least
    ``min_size`` points, so that a pair of near points is no group.
    """
    n_points = data.shape[1]
    masks = calibration._split_masks(n_points)
    sizes = masks.sum(axis=1)
    keep = (sizes >= min_size) & (n_points - sizes >= min_size)
    masks, sizes = masks[keep], sizes[keep]
    squares = (data ** 2).sum(axis=2)
    total_squares = squares.sum(axis=1)
    sums = np.einsum("mn,snp->smp", masks, data)
    all_sums = data.sum(axis=1)
    side_squares = squares @ masks.T
    within = side_squares - (sums ** 2).sum(axis=2) / sizes
    other = ((total_squares[:, None] - side_squares)
             - ((all_sums[:, None] - sums) ** 2).sum(axis=2) / (n_points - sizes))
    total = total_squares - (all_sums ** 2).sum(axis=1) / n_points
    ratio = (sizes * np.log(np.maximum(within, 1e-300) / sizes)
             + (n_points - sizes) * np.log(np.maximum(other, 1e-300) / (n_points - sizes)))
    return ratio.min(axis=1) - n_points * np.log(total / n_points)


def _test_k(X):
    """The test's own k: the clusters of ``correlation_map_labels(X)``, 2 to X's distinct rows."""
    labels = calibration.correlation_map_labels(X)
    return int(min(max(2, len(np.unique(labels))), len(np.unique(X, axis=0))))


def _sphered(data):
    """Each data set (R, N, p) whitened by its own covariance, in its span.

    The 2-means index of sphered data is the determinant criterion of
    Friedman & Rubin (1967), ``det W / det T`` at its best split: the
    classification likelihood ratio of a two-cluster tied-covariance
    Gaussian mixture against one Gaussian, affine invariant, so its null
    needs no covariance at all.
    """
    whitened = []
    for points in data:
        left, values, _ = np.linalg.svd(points - points.mean(axis=0), full_matrices=False)
        whitened.append(left[:, values > values[0] * 1e-6])
    return np.stack(whitened)


def _standardised(data):
    """Each data set's columns (R, N, p) brought to unit variance (constant columns left)."""
    centred = data - data.mean(axis=1, keepdims=True)
    scale = centred.std(axis=1, keepdims=True)
    return centred / np.where(scale > 0, scale, 1.0)


def _own_within_covariance(X):
    """The pooled within covariance of the test's best k-partition of X (``index_partition``)."""
    return calibration.within_covariance(
        X, calibration.index_partition(X, _test_k(X), np.random.RandomState(0)))


#: The test's variants compared by ``test-power``: (covariance of the
#: Gaussian references, statistic, k, map applied to X and to every
#: reference before the index); k None is the test's own (``_test_k``).
TEST_VARIANTS = {
    "sample (default)": (lambda X: np.atleast_2d(np.cov(X.T)), "index", None, None),
    "sample, k = 2": (lambda X: np.atleast_2d(np.cov(X.T)), "index", 2, None),
    "sample, k = 3": (lambda X: np.atleast_2d(np.cov(X.T)), "index", 3, None),
    "MCD covariance": (_mcd_covariance, "index", None, None),
    "PC MAD eigenvalues": (_pc_mad_covariance, "index", None, None),
    "single-link gap": (lambda X: np.atleast_2d(np.cov(X.T)), "gap", None, None),
    "unequal-var. LR": (lambda X: np.atleast_2d(np.cov(X.T)), "ratio", None, None),
    "sphered (tied LR)": (lambda X: np.atleast_2d(np.cov(X.T)), "index", 2, _sphered),
    "standardised": (lambda X: np.atleast_2d(np.cov(X.T)), "index", None, _standardised),
    "own within cov.": (_own_within_covariance, "index", None, None),
}


def test_variant_pvalue(X, variant, rng, n_references):
    """The p-value of one ``TEST_VARIANTS`` entry with a fixed number of references."""
    covariance_of, name, k, transform = TEST_VARIANTS[variant]
    covariance = covariance_of(X)
    references = np.stack([calibration.gaussian_reference(covariance, len(X), rng)
                           for _ in range(n_references)])
    if transform is not None:
        X, references = transform(X[None])[0], transform(references)
    if name == "gap":
        observed = single_linkage_gap(X)
        exceed = sum(single_linkage_gap(reference) >= observed for reference in references)
    elif name == "ratio":
        observed = unequal_variance_ratio(X[None])[0]
        exceed = int(np.sum(unequal_variance_ratio(references) <= observed))
    else:
        if k is None:
            k = _test_k(X)
        observed = calibration.cluster_indices(X[None], k, rng)[0]
        exceed = int(np.sum(calibration.cluster_indices(references, k, rng) <= observed))
    return (1 + exceed) / (1 + n_references)


def test_power_table(n_seeds, regimes=NULL_RANK_REGIMES, n_references=199,
                     variants=tuple(TEST_VARIANTS)):
    """Trees' test: its variants' share significant at ``STRUCTURE_ALPHA`` (fixed references).

    On groups and iris the power (higher is better), on noise the size
    (false positives; at most about the level). Each data set is brought
    near unit scale as the estimator does; references per seed from
    RandomState(seed), ``n_references`` each; ``variants`` (``--test-variants``)
    of ``TEST_VARIANTS``.
    """
    print(f"\ntrees' test variants, significant at {calibration.STRUCTURE_ALPHA:g} "
          f"({n_references} references), seeds 0..{n_seeds - 1} (noise: 0..{2 * n_seeds - 1})")
    print(f"{'regime':>22} " + " ".join(f"{name:>18}" for name in variants))
    for regime in regimes:
        seeds = range(2 * n_seeds if regime.startswith("noise") else n_seeds)
        counts = dict.fromkeys(variants, 0)
        for seed in seeds:
            X = calibration._near_unit_scale(Dasgupta(), null_rank_data(regime, seed)[0])
            for variant in variants:
                counts[variant] += test_variant_pvalue(
                    X, variant, np.random.RandomState(seed),
                    n_references) <= calibration.STRUCTURE_ALPHA
        print(f"{regime:>22} " + " ".join(f"{f'{counts[name]}/{len(seeds)}':>18}"
                                          for name in variants), flush=True)


def iris_diagnosis_table(n_seeds, betas=(0.3, 1.0, 3.0, 10.0)):
    """Trees: why setosa (12 iris flowers) falls below 0.9 -- the test, the beta or the energy?

    Per subsample: the default ``beta="auto"``'s p-value, k, branch, beta_
    and setosa's support; setosa's support at beta = 1000 (is it a cluster
    of the MAP tree?) on the raw and on standardised columns; its support
    at fixed betas (what beta it needs).
    """
    print(f"\ntrees, iris setosa (12 flowers): the test, the beta or the energy? seeds "
          f"0..{n_seeds - 1}")
    print(f"{'seed':>4} {'p':>6} {'k':>2} {'branch':>14} {'beta_':>6} {'setosa':>6} "
          f"{'MAP raw':>7} {'MAP std':>7} " + " ".join(f"{f'@{b:g}':>5}" for b in betas))
    for seed in range(n_seeds):
        X, y = regime_data("iris, 4 per class (setosa)", seed)
        setosa = np.flatnonzero(y == 0)
        model = ExactHierarchicalClustering(verbose=0).fit(X)
        record = model.calibration_
        cold = [ExactHierarchicalClustering(Dasgupta(beta=1000.0), verbose=0).fit(data)
                .cluster_probability(setosa) for data in (X, (X - X.mean(0)) / X.std(0))]
        fixed = [ExactHierarchicalClustering(Dasgupta(beta=beta), verbose=0).fit(X)
                 .cluster_probability(setosa) for beta in betas]
        print(f"{seed:>4} {record['p_value']:>6.3f} {record['n_clusters_tested']:>2} "
              f"{record['branch']:>14} {model.beta_:>6.3g} {statistic(model, y, False):>6.2f} "
              f"{cold[0]:>7.2f} {cold[1]:>7.2f} " + " ".join(f"{v:>5.2f}" for v in fixed),
              flush=True)


def cost_table(n_seeds):
    """Trees: the time of a ``beta="auto"`` fit (test, then temper) over a plain fit at its beta_.

    Both timed side by side in one run, N = 12 and 18, 3 seeds per regime.
    """
    print(f"\ncost of test, then temper: calibrated fit / plain fit at beta_, seeds "
          f"0..{n_seeds - 1}")
    print(f"{'N':>3} {'regime':>18} {'branch':>14} {'calibrated s':>12} {'plain s':>8} "
          f"{'ratios':>18}")
    for n_points in (12, 18):
        for regime, n_features in (("noise", 2), ("noise", 4), ("3 groups", 4)):
            ratios = []
            for seed in range(n_seeds):
                rng = np.random.default_rng(seed)
                X = rng.normal(size=(n_points, n_features))
                if regime == "3 groups":
                    X += SHIFT * np.eye(n_features)[np.arange(n_points) % 3]
                start = time.perf_counter()
                model = ExactHierarchicalClustering(verbose=0).fit(X)
                calibrated = time.perf_counter() - start
                start = time.perf_counter()
                ExactHierarchicalClustering(Dasgupta(beta=model.beta_), verbose=0).fit(X)
                plain = time.perf_counter() - start
                ratios.append(calibrated / plain)
            print(f"{n_points:>3} {f'{regime}, {n_features} f':>18} "
                  f"{model.calibration_['branch']:>14} {calibrated:>12.3f} {plain:>8.3f} "
                  f"{' '.join(f'{r:.1f}' for r in ratios):>18}", flush=True)


def window_table(n_seeds):
    print(f"\nwindows: the requirement's statistic at fixed beta, seeds 0..{n_seeds - 1} "
          "(noise: the largest, must be <= 0.5; groups: the smallest, must be >= 0.9)")
    print(f"{'regime':>28} {'':>5} " + " ".join(f"{b:>6g}" for b in WINDOW_BETAS))
    for regime in REGIMES:
        for flat in (False, True):
            values = []
            for seed in range(n_seeds):
                X, y = regime_data(regime, seed)
                posteriors = Posteriors(X, flat)
                values.append([statistic(posteriors.model(b), y, flat) for b in WINDOW_BETAS])
            values = np.array(values)
            worst = values.max(axis=0) if y is None else values.min(axis=0)
            print(f"{regime:>28} {'flat' if flat else 'tree':>5} "
                  + " ".join(f"{v:>6.2f}" for v in worst), flush=True)


def candidate_table(n_seeds, n_resamples):
    print(f"\ncandidates: beta picked and the requirement's worst statistic / failures, "
          f"seeds 0..{n_seeds - 1}, {n_resamples} resamples")
    print(f"{'regime':>28} {'':>5} {'principle':>9} {'beta (median)':>13} {'worst':>6} "
          f"{'fail':>5}")
    for regime in REGIMES:
        for flat in (False, True):
            for name, excess in CANDIDATES.items():
                if name == "dpm" and not flat:
                    continue
                betas, values = [], []
                for seed in range(n_seeds):
                    X, y = regime_data(regime, seed)
                    posteriors = Posteriors(X, flat)
                    beta = posteriors.matched_beta(
                        excess(posteriors, np.random.RandomState(seed), n_resamples))
                    betas.append(beta)
                    values.append(statistic(posteriors.model(beta), y, flat))
                worst = max(values) if y is None else min(values)
                n_fail = sum(fails(v, y) for v in values)
                print(f"{regime:>28} {'flat' if flat else 'tree':>5} {name:>9} "
                      f"{np.median(betas):>13.3g} {worst:>6.2f} {n_fail:>2}/{n_seeds:<2}",
                      flush=True)


def flat_regime_data(regime, seed):
    """(X, labels or None) of the partition regimes: ``regime_data``'s, and more shapes.

    "noise, N x d"; "k groups of s, d features" (group j shifted by SHIFT
    along feature j); "copies"; "iris, 6 per class" (labels: the three
    species; setosa is the clear group).
    """
    rng = np.random.default_rng(seed)
    if regime.startswith("noise, "):
        n_points, n_features = map(int, regime[len("noise, "):].split(" x "))
        return rng.normal(size=(n_points, n_features)), None
    if "groups of" in regime:
        words = regime.split()
        n_groups, size, n_features = int(words[0]), int(words[3].rstrip(",")), int(words[4])
        y = np.repeat(np.arange(n_groups), size)
        return rng.normal(size=(len(y), n_features)) + SHIFT * np.eye(n_features)[y], y
    if regime == "iris, 6 per class":
        X, y = load_iris(return_X_y=True)
        pick = np.random.RandomState(seed)
        idx = np.concatenate([pick.choice(np.flatnonzero(y == k), 6, replace=False)
                              for k in range(3)])
        return X[idx], y[idx]
    return regime_or_copies(regime, seed)


FLAT_REGIMES = ("noise, 12 x 2", "noise, 12 x 3", "noise, 12 x 4", "noise, 18 x 5", "copies",
                "2 groups of 5, 2 features", "2 groups of 5, 3 features",
                "3 groups of 4, 3 features", "3 groups of 4, 4 features")
#: Slower (N = 18): ``flat-tested`` by default, the others with ``--regimes``.
FLAT_EXTRA_REGIMES = ("iris, 6 per class",)


def within_group(pairwise, y, groups=None):
    """The smallest co-clustering of two points of one group (of ``groups``, default all)."""
    groups = np.unique(y) if groups is None else groups
    return min(pairwise[np.ix_(y == k, y == k)].min() for k in groups)


def flat_tested_table(n_seeds):
    """Partitions: ``ExactFlatClustering()``'s default with 2-9 distinct columns, by regime.

    Noise: the largest probability of three points all together (fails
    above 0.5); groups: the smallest co-clustering within a group (fails
    below 0.9) and the largest across groups; iris (6 per class, N = 18):
    setosa as the group, versicolor and virginica reported.
    """
    print(f"\npartitions, test then temper to the mixture bootstrap: seeds 0..{n_seeds - 1}")
    print(f"{'regime':>28} {'fail':>7} {'worst':>6} {'significant':>11} {'beta median':>11} "
          f"{'across max':>10} {'P(K=1) max':>10} {'cost (median)':>13}")
    for regime in FLAT_REGIMES + tuple(r for r in FLAT_EXTRA_REGIMES if r not in FLAT_REGIMES):
        fails, values, significant, betas, across, one = 0, [], 0, [], 0.0, 0.0
        iris, costs = [], []
        for seed in range(n_seeds):
            X, y = flat_regime_data(regime, seed)
            # The calibrated fit over a plain fit at its beta_, side by side.
            start = time.perf_counter()
            model = ExactFlatClustering(verbose=0).fit(X)
            calibrated = time.perf_counter() - start
            start = time.perf_counter()
            ExactFlatClustering(CorrelationClustering(beta=model.beta_), verbose=0).fit(X)
            costs.append(calibrated / (time.perf_counter() - start))
            pairwise = model.pairwise_probability_
            one = max(one, model.n_clusters_probability_[1])
            if y is None:
                value = calibration.largest_together(pairwise)
                fails += value > 0.5
            else:
                value = within_group(pairwise, y, [0] if regime.startswith("iris") else None)
                fails += value < 0.9
                across = max(across, pairwise[y[:, None] != y[None, :]].max())
                if regime.startswith("iris"):
                    iris.append((within_group(pairwise, y, [1]), within_group(pairwise, y, [2]),
                                 pairwise[np.ix_(y == 1, y == 2)].max(),
                                 model.n_clusters_probability_[3]))
            values.append(value)
            significant += model.calibration_["branch"] == "mixture bootstrap"
            betas.append(model.beta_)
        worst = max(values) if y is None else min(values)
        print(f"{regime:>28} {fails:>3}/{n_seeds:<3} {worst:>6.2f} {significant:>8}/{n_seeds:<2} "
              f"{np.median(betas):>11.3g} {across if y is not None else float('nan'):>10.2f} "
              f"{one:>10.2f} {np.median(costs):>12.0f}x", flush=True)
        if iris:
            iris = np.array(iris)
            print(f"{'':>28} versicolor within {iris[:, 0].min():.2f}-{iris[:, 0].max():.2f}, "
                  f"virginica within {iris[:, 1].min():.2f}-{iris[:, 1].max():.2f}, across "
                  f"them up to {iris[:, 2].min():.2f}-{iris[:, 2].max():.2f}, P(K = 3) "
                  f"{iris[:, 3].min():.2f}-{iris[:, 3].max():.2f}", flush=True)


def flat_pvalues_table(n_seeds):
    """The test of the partitions' default: how many seeds reach each level, references drawn.

    The default's own call: ``structure_pvalue``'s sequential test (49
    references at a time, up to 999) on the default stream.
    """
    levels = (0.01, 0.02, 0.03, 0.05, 0.1)
    print(f"\npartitions, SigClust p-values (sequential, the default's stream), seeds "
          f"0..{n_seeds - 1}: seeds at or below each level, references drawn (median, max)")
    print(f"{'regime':>28} " + " ".join(f"{level:>6g}" for level in levels)
          + f" {'refs':>10}")
    for regime in FLAT_REGIMES:
        p_values, references = [], []
        for seed in range(n_seeds):
            X, _ = flat_regime_data(regime, seed)
            data = np.ldexp(X, -int(np.frexp(np.max(np.abs(X)))[1]))
            unit = calibration._unit_loss(
                calibration._at_kernel_width(CorrelationClustering(), data))
            labels = np.asarray(map_partition(unit.cluster_potential(data))[0])
            p_value, _, n_references = calibration.structure_pvalue(
                data, calibration._rngs(None)[0], labels)
            p_values.append(p_value)
            references.append(n_references)
        p_values = np.array(p_values)
        print(f"{regime:>28} " + " ".join(f"{np.sum(p_values <= level):>6}" for level in levels)
              + f" {np.median(references):>5.0f}, {max(references):>3}", flush=True)


def iris_flowers(seed, standardised=False, per_class=6):
    """Subsample ``seed`` of iris, ``per_class`` flowers a species (``bench_issue_reproduction``'s
    draw), raw or standardised over the subsample; labels 0 setosa, 1 versicolor, 2 virginica."""
    X, y = load_iris(return_X_y=True)
    pick = np.random.RandomState(seed)
    idx = np.concatenate([pick.choice(np.flatnonzero(y == k), per_class, replace=False)
                          for k in range(3)])
    X, y = X[idx], y[idx]
    return ((X - X.mean(0)) / X.std(0) if standardised else X), y


def species_supports(pairwise, y):
    """Setosa, versicolor, virginica within (smallest pair); versicolor-virginica largest, mean."""
    across = pairwise[np.ix_(y == 1, y == 2)]
    return (within_group(pairwise, y, [0]), within_group(pairwise, y, [1]),
            within_group(pairwise, y, [2]), across.max(), across.mean())


def mixture_frequencies(X, labels=None):
    """The mixture bootstrap's frequencies on the default fit's stream, at X's kernel width.

    ``labels`` None: X's MAP partition's mixture, as the default fit draws
    it; else the mixture of ``labels`` (the species: what the energy makes
    of data redrawn from the true groups' mixture).
    """
    data = calibration._near_unit_scale(CorrelationClustering(), X)
    unit = calibration._unit_loss(
        calibration._at_kernel_width(CorrelationClustering(), data))

    def map_labels_of(points):
        return np.asarray(map_partition(unit.cluster_potential(points))[0])

    return calibration.mixture_bootstrap_frequencies(
        map_labels_of, data, map_labels_of(data) if labels is None else labels,
        calibration._rngs(None)[1])


def flat_iris_table(seeds, columns=("raw", "std")):
    """Partitions: the default over 18 iris flowers, all three species, raw and standardised.

    Per subsample: setosa, versicolor and virginica within (smallest pair)
    and the versicolor-virginica pairs (largest, mean); P(K = 2), P(K = 3);
    beta_; the test's p-value and k; the MAP partition's K and ARI; what
    the data allow (Ward's and k-means' ARI at K = 3); the mixture
    bootstrap's own frequencies (the default's stream: the pairs it is
    matched to), and the frequencies of data redrawn from the species' own
    mixture ("species"), the energy's MAP at X's kernel width: whether
    any redrawn mixture could separate versicolor from virginica.
    """
    from sklearn.cluster import AgglomerativeClustering, KMeans
    from sklearn.metrics import adjusted_rand_score

    print(f"\npartitions, iris 18 flowers (6 per class), the default: seeds {seeds[0]}.."
          f"{seeds[-1]}; "
          "set/vers/virg: smallest pair within, v~v: largest and mean pair across")
    head = f"{'set':>5} {'vers':>5} {'virg':>5} {'v~v':>5} {'mean':>5}"
    print(f"{'cols':>4} {'seed':>4} {head} {'P(K=2)':>6} {'P(K=3)':>6} {'beta_':>6} {'p':>6} "
          f"{'k':>2} {'MAP K':>5} {'ARI':>5} {'ward':>5} {'kmean':>5} | bootstrap: {head} | "
          f"species: {head}")
    for name in columns:
        rows = []
        for seed in seeds:
            X, y = iris_flowers(seed, name == "std")
            model = ExactFlatClustering(verbose=0).fit(X)
            record = model.calibration_
            k_probability = model.n_clusters_probability_
            row = (*species_supports(model.pairwise_probability_, y), k_probability[2],
                   k_probability[3], model.beta_, record["p_value"],
                   record["n_clusters_tested"], len(np.unique(model.labels_)),
                   adjusted_rand_score(y, model.labels_),
                   adjusted_rand_score(y, AgglomerativeClustering(3).fit_predict(X)),
                   adjusted_rand_score(y, KMeans(3, n_init=10, random_state=0).fit_predict(X)),
                   *species_supports(mixture_frequencies(X), y),
                   *species_supports(mixture_frequencies(X, y), y))
            rows.append(row)
            print(f"{name:>4} {seed:>4} " + " ".join(f"{v:>5.2f}" for v in row[:7])
                  + f" {row[7]:>6.3g} {row[8]:>6.3f} {row[9]:>2} {row[10]:>5} "
                  + " ".join(f"{v:>5.2f}" for v in row[11:14]) + " |            "
                  + " ".join(f"{v:>5.2f}" for v in row[14:19]) + " |          "
                  + " ".join(f"{v:>5.2f}" for v in row[19:]), flush=True)
        rows = np.array(rows)
        print(f"{name:>4} summary: setosa below 0.9 in {np.sum(rows[:, 0] < 0.9)}/{len(seeds)}; "
              f"a versicolor-virginica pair above 0.5 in {np.sum(rows[:, 3] > 0.5)} (above "
              f"0.75 in {np.sum(rows[:, 3] > 0.75)}; bootstrap {np.sum(rows[:, 17] > 0.5)}, "
              f"species {np.sum(rows[:, 22] > 0.5)}), mean pair above 0.5 in "
              f"{np.sum(rows[:, 4] > 0.5)} (bootstrap {np.sum(rows[:, 18] > 0.5)}, species "
              f"{np.sum(rows[:, 23] > 0.5)}); versicolor within >= 0.5 in "
              f"{np.sum(rows[:, 1] >= 0.5)}, virginica {np.sum(rows[:, 2] >= 0.5)}; MAP K = 2 "
              f"in {np.sum(rows[:, 10] == 2)}, 3 in {np.sum(rows[:, 10] == 3)}; significant "
              f"{np.sum(rows[:, 8] <= calibration.STRUCTURE_ALPHA)}; mean ARI MAP "
              f"{rows[:, 11].mean():.2f}, Ward {rows[:, 12].mean():.2f}, k-means "
              f"{rows[:, 13].mean():.2f}", flush=True)


def flat_iris_betas_table(seeds, columns=("raw", "std"), betas=(0.3, 1.0, 3.0, 10.0, 30.0)):
    """Partitions, iris 18 flowers: the species' co-clustering at fixed betas (the energy's reach).

    Per subsample and beta: versicolor and virginica within (smallest
    pair) and the mean versicolor-virginica pair: whether any temperature
    of the default energy separates the two species, whatever beta the
    calibration would choose.
    """
    print(f"\npartitions, iris 18 flowers, fixed betas: versicolor within, virginica within, "
          f"mean across (seeds {seeds[0]}..{seeds[-1]})")
    print(f"{'cols':>4} {'seed':>4} " + " ".join(f"{f'@{beta:g}':>16}" for beta in betas)
          + f" {'separates':>9}")
    for name in columns:
        separated = 0
        for seed in seeds:
            X, y = iris_flowers(seed, name == "std")
            cells, separates = [], False
            for beta in betas:
                pairwise = ExactFlatClustering(CorrelationClustering(beta=beta),
                                               verbose=0).fit(X).pairwise_probability_
                _, versicolor, virginica, _, across = species_supports(pairwise, y)
                cells.append(f"{versicolor:.2f} {virginica:.2f} {across:.2f}")
                separates |= min(versicolor, virginica) > across
            separated += separates
            print(f"{name:>4} {seed:>4} " + " ".join(f"{cell:>16}" for cell in cells)
                  + f" {str(separates):>9}", flush=True)
        print(f"{name:>4}: some beta puts each species' every pair above the mean pair across "
              f"in {separated}/{len(seeds)}", flush=True)


def classification_bic(X, labels):
    """BIC of the hard-assigned Gaussian mixture with pooled covariance (the redrawn mixture's).

    In the span of X's covariance (copies of a column count once); inf
    where the pooled covariance is singular.
    """
    centred = X - X.mean(axis=0)
    values, vectors = np.linalg.eigh(np.atleast_2d(np.cov(centred.T)))
    Z = centred @ vectors[:, values > values.max() * 1e-10]
    n_points, rank = Z.shape
    counts = np.unique(labels, return_counts=True)[1]
    residuals = Z - calibration._cluster_means(Z, labels)[0]
    sign, log_det = np.linalg.slogdet(residuals.T @ residuals / n_points)
    if sign <= 0 or n_points - len(counts) < rank:
        return np.inf
    log_likelihood = (np.sum(counts * np.log(counts / n_points))
                      - n_points / 2 * (rank * np.log(2 * np.pi) + log_det + rank))
    n_parameters = len(counts) - 1 + len(counts) * rank + rank * (rank + 1) / 2
    return -2 * log_likelihood + n_parameters * np.log(n_points)


def evidence_weighted_redraws(X, n_resamples=calibration.N_MIXTURE_RESAMPLES):
    """A candidate: redraw from the mixtures at K = 1..K_MAP + 1 in proportion to BIC weights.

    The partition at each K is the energy's MAP into K clusters (X's
    kernel width); the 40 redraws are shared out by the Schwarz weights
    exp(-BIC / 2) (largest remainders; all 40 at K_MAP where that K holds
    the weight, as the default draws). Returns (the redraws at each K,
    their frequencies, K_MAP, map_labels_of).
    """
    from sktrellis._engine.trellis.flat_trellis import FlatTrellis

    data = calibration._near_unit_scale(CorrelationClustering(), X)
    unit = calibration._unit_loss(
        calibration._at_kernel_width(CorrelationClustering(), data))
    table = unit.cluster_potential(data)

    def map_labels_of(points):
        return np.asarray(map_partition(unit.cluster_potential(points))[0])

    own = map_labels_of(data)
    k_map = len(np.unique(own))
    partitions = {1: np.zeros(len(X), dtype=int)}
    for k in range(2, k_map + 2):
        partitions[k] = own if k == k_map else FlatTrellis(table, 1, 0, "bench", k) \
            .constrained_map_labels
    bics = {k: classification_bic(data, labels) for k, labels in partitions.items()
            if labels is not None}
    weights = np.array([np.exp(-(bics[k] - min(bics.values())) / 2) for k in sorted(bics)])
    shares = weights / weights.sum() * n_resamples
    counts = np.floor(shares).astype(int)
    counts[np.argsort(counts - shares)[:n_resamples - counts.sum()]] += 1
    redraws = dict(zip(sorted(bics), counts))
    rng, together = calibration._rngs(None)[1], np.zeros((len(X), len(X)))
    for k, count in redraws.items():
        for _ in range(count):
            together += calibration.co_clustering(
                map_labels_of(calibration.redrawn_mixture(data, partitions[k], rng)))
    return redraws, together / n_resamples, k_map


def flat_evidence_table(n_seeds, n_iris=10):
    """Partitions: the evidence-weighted mixture bootstrap (a candidate), on both sides.

    Per regime: the seeds where BIC moves redraws off X's MAP K (where the
    candidate could change beta at all), and those where K_MAP + 1 takes
    half of them or more; for planted groups the seeds whose smallest
    within-group frequency (the pair the matched beta must keep at 0.9)
    falls below 0.9, candidate and default. On the first ``n_iris``
    subsamples of iris (18 flowers) the candidate's frequencies beside the
    default's (``species_supports``).
    """
    print(f"\npartitions, evidence-weighted redraws (BIC over K = 1..K_MAP + 1): seeds "
          f"0..{n_seeds - 1}")
    for regime in FLAT_REGIMES:
        moved, split, below = 0, 0, [0, 0]
        for seed in range(n_seeds):
            X, y = flat_regime_data(regime, seed)
            redraws, frequencies, k_map = evidence_weighted_redraws(X)
            moved += redraws.get(k_map, 0) < calibration.N_MIXTURE_RESAMPLES
            split += 2 * redraws.get(k_map + 1, 0) >= calibration.N_MIXTURE_RESAMPLES
            if y is not None:
                below[0] += within_group(frequencies, y) < 0.9
                below[1] += within_group(mixture_frequencies(X), y) < 0.9
        print(f"{regime:>28}: redraws off K_MAP in {moved}/{n_seeds}, K_MAP + 1 takes half or "
              f"more in {split}/{n_seeds}" + (f"; a group's pair below 0.9 in {below[0]} "
                                             f"(default {below[1]})" if y is not None else ""),
              flush=True)
    for name in ("raw", "std"):
        for seed in range(min(n_seeds, n_iris)):
            X, y = iris_flowers(seed, name == "std")
            redraws, frequencies, k_map = evidence_weighted_redraws(X)
            print(f"iris {name} {seed:>2}: K_MAP {k_map}, redraws by K "
                  f"{ {int(k): int(c) for k, c in redraws.items() if c} }, candidate "
                  + " ".join(f"{v:.2f}" for v in species_supports(frequencies, y))
                  + ", default " + " ".join(f"{v:.2f}" for v in
                                            species_supports(mixture_frequencies(X), y)),
                  flush=True)


def row_bootstrap_frequencies(unit, X, rng, n_resamples):
    """Co-clustering frequencies of the MAP partitions of the points drawn with replacement.

    A pair counts in the resamples that drew both points; two copies of a
    point are together when their copies share a cluster.
    """
    together, drawn = np.zeros((len(X), len(X))), np.zeros((len(X), len(X)))
    for _ in range(n_resamples):
        ids = rng.randint(len(X), size=len(X))
        labels = np.asarray(map_partition(unit.cluster_potential(X[ids]))[0])
        pairs = np.zeros((len(X), len(X)))
        same = labels[:, None] == labels[None, :]
        np.maximum.at(pairs, (np.repeat(ids, len(ids)), np.tile(ids, len(ids))),
                      same.ravel().astype(float))
        seen = np.zeros(len(X), dtype=bool)
        seen[ids] = True
        together += pairs
        drawn += np.outer(seen, seen)
    return together / np.maximum(drawn, 1)


def flat_candidates_table(n_seeds, n_resamples):
    """Partitions: the beta of each principle and the requirement at it (module docstring)."""
    print(f"\npartitions, candidates: failures (worst) at each principle's beta, seeds "
          f"0..{n_seeds - 1}, {n_resamples} resamples; 'tested': behind SigClust's test "
          f"(alpha {calibration.STRUCTURE_ALPHA:g}, else X's own posterior humble at "
          f"{calibration.NULL_LEVEL:g})")
    names = ("tree", "rows", "dpm", "mixture", "tested rows", "tested dpm", "tested mixture",
             "dpm posterior")
    print(f"{'regime':>28} " + " ".join(f"{name:>14}" for name in names))
    for regime in FLAT_REGIMES:
        results = {name: [] for name in names}
        for seed in range(n_seeds):
            X, y = flat_regime_data(regime, seed)
            posteriors = Posteriors(X, True)
            model = ExactFlatClustering(verbose=0).fit(X)
            unit = calibration._unit_loss(calibration._at_kernel_width(CorrelationClustering(), X))
            labels = np.asarray(posteriors.labels(unit, X))
            rng = np.random.RandomState(seed)

            def matched(frequencies):
                return calibration.matched_co_clustering_beta(
                    lambda beta: posteriors.model(beta).pairwise_probability_, frequencies)[0]

            dpm = ExactFlatClustering(DirichletProcessMixture(
                covariance_type="spherical", mean_precision_prior=0.01), verbose=0).fit(X)
            betas = {
                "tree": ExactHierarchicalClustering(verbose=0).fit(X).beta_,
                "rows": matched(row_bootstrap_frequencies(unit, X, rng, n_resamples)),
                "dpm": matched(dpm.pairwise_probability_),
                "mixture": matched(calibration.mixture_bootstrap_frequencies(
                    lambda data: np.asarray(posteriors.labels(unit, data)), X, labels, rng)),
            }
            significant = model.calibration_["branch"] == "mixture bootstrap"
            own = model.beta_ if not significant else None
            for name in ("rows", "dpm", "mixture"):
                betas[f"tested {name}"] = betas[name] if significant else own
            for name, beta in betas.items():
                results[name].append(statistic(posteriors.model(beta), y, True))
            if y is None:
                results["dpm posterior"].append(
                    max(dpm.together_probability(triple) for triple in
                        itertools.combinations(range(len(X)), 3))
                    - dpm.n_clusters_probability_[1])
            else:
                results["dpm posterior"].append(statistic(dpm, y, True))
        cells = []
        for name in names:
            values = results[name]
            worst = max(values) if y is None else min(values)
            cells.append(f"{sum(fails(v, y) for v in values):>2}/{n_seeds} ({worst:.2f})")
        print(f"{regime:>28} " + " ".join(f"{cell:>14}" for cell in cells), flush=True)



def span_whitener(covariance):
    """The map to coordinates whitened by ``covariance``, in its span (copies of a column
    count once)."""
    values, vectors = np.linalg.eigh(np.atleast_2d(covariance))
    keep = values > values.max() * 1e-10
    return vectors[:, keep] / np.sqrt(values[keep])


def centred_exponential(points, gamma, centre="mean"):
    """Signed weights exp(-gamma ||x_i - x_j||) centred by their mean over all pairs
    (``"mean"``, the default energy's) or by the degree null d_i d_j / sum d (``"degrees"``,
    modularity's, Newman 2006); gamma a number or an (n, n) matrix of widths."""
    similarities = np.exp(-gamma * squareform(pdist(points)))
    np.fill_diagonal(similarities, 0.0)
    if centre == "mean":
        n_points = len(points)
        weights = similarities - similarities.sum() / (n_points * (n_points - 1))
    else:
        degrees = similarities.sum(axis=1)
        weights = similarities - np.outer(degrees, degrees) / degrees.sum()
    np.fill_diagonal(weights, 0.0)
    return weights


def _map_of_weights(weights):
    return np.asarray(map_partition(subset_pair_sums(weights))[0])


def default_weights(data, _):
    """The default energy at X's kernel width (``calibrate_few_feature_partitions``' own)."""
    return calibration._unit_loss(calibration._at_kernel_width(CorrelationClustering(),
                                                               data)).weights


def whitened_weights(transform):
    """The default's weights on data mapped by ``transform``, at the mapped X's median width."""
    def of_data(data):
        gamma = 1.0 / np.median(pdist(data @ transform))
        return lambda points: centred_exponential(points @ transform, gamma)
    return of_data


def within_weights(data, _, max_rounds=20):
    """Distances whitened by the pooled within-cluster covariance of the MAP partition,
    iterated from the default's MAP partition until the partition repeats (adaptive metric)."""
    labels = _map_of_weights(default_weights(data, None)(data))
    for _ in range(max_rounds):
        weights_of = whitened_weights(span_whitener(calibration.within_covariance(data, labels)))(
            data)
        new = _map_of_weights(weights_of(data))
        if np.array_equal(calibration.co_clustering(new), calibration.co_clustering(labels)):
            break
        labels = new
    return weights_of


def local_scale_weights(data, _):
    """Self-tuning widths (Zelnik-Manor & Perona 2004): exp(-d_ij / sqrt(s_i s_j)), s_i the
    distance to the round(sqrt(N))-th neighbour (of the points at hand), mean-centred."""
    def weights_of(points):
        distances = squareform(pdist(points))
        scale = np.sort(distances, axis=1)[:, max(2, int(round(np.sqrt(len(points)))))]
        return centred_exponential(points, 1.0 / np.sqrt(np.outer(scale, scale)))
    return weights_of


def degree_weights(data, _):
    """X's kernel width, centred by the degree null (modularity's) instead of the mean."""
    gamma = 1.0 / np.median(pdist(data))
    return lambda points: centred_exponential(points, gamma, "degrees")


#: Candidate energies of the few-feature flat path: data (X near unit scale), labels (the
#: planted groups or species, for the oracle only) -> the weights of any points at X's width.
FLAT_ENERGIES = {
    "default": default_weights,
    "sphered": lambda data, _: whitened_weights(span_whitener(np.cov(data.T)))(data),
    "within": within_weights,
    "oracle within": lambda data, y: whitened_weights(
        span_whitener(calibration.within_covariance(data, y)))(data),
    "local scale": local_scale_weights,
    "degrees": degree_weights,
}



def map_within_dpm(X):
    """``DirichletProcessMixture()`` with the pooled within-cluster covariance of the default
    energy's MAP partition as its prior scale (None where that covariance is singular)."""
    covariance = calibration.within_covariance(X, calibration.correlation_map_labels(X))
    if np.linalg.eigvalsh(covariance).min() <= 1e-10 * np.trace(covariance):
        return None
    return DirichletProcessMixture(covariance_prior=covariance)


#: Likelihood models whose posterior needs no temperature, fitted as they are: X -> the energy
#: (None: not defined on X).
LIKELIHOOD_MODELS = {"DPM": lambda X: DirichletProcessMixture(), "DPM, MAP within": map_within_dpm}


def pairwise_by_beta(table):
    """The flat posterior's co-clustering as a function of beta, each beta's computed once.

    ``table`` is the cluster potential at beta = 1 (one entry per subset).
    """
    fitted = {}

    def pairwise_at(beta):
        if beta not in fitted:
            fitted[beta] = FlatTrellis(beta * table).pairwise_probability()
        return fitted[beta]

    return pairwise_at


def candidate_energy_posterior(X, y, name):
    """The default calibration ("test, then temper", its streams) with a candidate's weights.

    Returns the co-clustering at the chosen beta and the calibration's record.
    """
    data = calibration._near_unit_scale(CorrelationClustering(), X)
    weights_of = FLAT_ENERGIES[name](data, y)
    pairwise_at = pairwise_by_beta(subset_pair_sums(weights_of(data)))

    def map_labels_of(points):
        return _map_of_weights(weights_of(points))

    test_rng, bootstrap_rng, _ = calibration._rngs(None)
    beta, record = calibration.tested_mixture_beta(pairwise_at, data, map_labels_of(data),
                                                   map_labels_of, test_rng, bootstrap_rng)
    return pairwise_at(beta), record


def flat_energies_table(seeds, regimes, names=tuple(FLAT_ENERGIES) + tuple(LIKELIHOOD_MODELS)):
    """Partitions, few features: candidate energies under the default calibration, two-sided.

    Every flat regime: noise fails where three points all co-cluster above
    0.5; planted groups where a group's weakest pair is below 0.9. Iris (18
    flowers, raw and standardised): setosa's weakest pair below 0.9, a
    versicolor-virginica pair above 0.75, their mean pair above 0.5, and
    versicolor's and virginica's weakest pairs at 0.5 or more. Then what the
    data allow at this size: SigClust's test (k = 2) on the 12 versicolor
    and virginica flowers alone, and the posterior of a likelihood model
    told the species' own within covariance (``DirichletProcessMixture``,
    full covariances, prior scale the pooled within-species covariance).
    Beside them, ``LIKELIHOOD_MODELS``' own posteriors (no test, no beta);
    on noise the probability that three points share a cluster other than
    the whole set (one cluster is no structure).
    """
    print(f"\npartitions, few features: candidate energies under test, then temper; seeds "
          f"{seeds[0]}..{seeds[-1]}")
    for regime in regimes:
        iris = regime.startswith("iris")
        rows = {name: [] for name in names}
        for seed in seeds:
            X, y = (iris_flowers(seed, regime.endswith("std")) if iris
                    else flat_regime_data(regime, seed))
            for name in names:
                if name == "oracle within" and y is None:
                    continue
                if name in LIKELIHOOD_MODELS:
                    energy = LIKELIHOOD_MODELS[name](X)
                    if energy is None:
                        continue
                    model = ExactFlatClustering(energy, verbose=0).fit(X)
                    pairwise, significant = model.pairwise_probability_, np.nan
                    if y is None:
                        # A model's posterior may say "one cluster" on noise, which
                        # is no structure: three points together in a cluster other
                        # than the whole set (``flat-candidates``' "dpm posterior").
                        rows[name].append((max(
                            model.together_probability(triple) for triple in
                            itertools.combinations(range(len(X)), 3))
                            - model.n_clusters_probability_[1], significant))
                        continue
                else:
                    pairwise, record = candidate_energy_posterior(X, y, name)
                    significant = record["branch"] == "mixture bootstrap"
                if y is None:
                    rows[name].append((calibration.largest_together(pairwise), significant))
                elif iris:
                    rows[name].append((*species_supports(pairwise, y), significant))
                else:
                    rows[name].append((within_group(pairwise, y), significant))
        for name in names:
            values = np.array(rows[name])
            if not len(values):
                continue
            tested = ("  -" if np.isnan(values[0, -1]) else f"{int(values[:, -1].sum()):>2}/"
                      f"{len(values)}")
            head = f"{regime:>28} {name:>15} significant {tested}"
            if iris:
                print(f"{head}: setosa < 0.9 {np.sum(values[:, 0] < 0.9):>2}, v~v pair > 0.75 "
                      f"{np.sum(values[:, 3] > 0.75):>2}, v~v mean > 0.5 "
                      f"{np.sum(values[:, 4] > 0.5):>2} (median {np.median(values[:, 4]):.2f}), "
                      f"versicolor / virginica >= 0.5 {np.sum(values[:, 1] >= 0.5):>2} / "
                      f"{np.sum(values[:, 2] >= 0.5):>2}", flush=True)
            elif regime.startswith(("noise", "copies")):
                print(f"{head}: fail {np.sum(values[:, 0] > 0.5):>2} (worst "
                      f"{values[:, 0].max():.2f})", flush=True)
            else:
                print(f"{head}: fail {np.sum(values[:, 0] < 0.9):>2} (worst "
                      f"{values[:, 0].min():.2f})", flush=True)
        if iris:
            p_values, oracle = [], []
            for seed in seeds:
                X, y = iris_flowers(seed, regime.endswith("std"))
                pair = y > 0
                p_values.append(calibration.structure_pvalue(
                    X[pair], np.random.RandomState(seed), y[pair])[0])
                model = ExactFlatClustering(DirichletProcessMixture(
                    covariance_prior=calibration.within_covariance(X, y)), verbose=0).fit(X)
                oracle.append(species_supports(model.pairwise_probability_, y))
            oracle = np.array(oracle)
            print(f"{regime:>28} versicolor + virginica alone, SigClust k = 2: p "
                  f"{min(p_values):.2f}-{max(p_values):.2f} (at most 0.05 in "
                  f"{np.sum(np.array(p_values) <= 0.05)}); DPM told the species' covariance: "
                  f"setosa < 0.9 {np.sum(oracle[:, 0] < 0.9)}, v~v pair > 0.75 "
                  f"{np.sum(oracle[:, 3] > 0.75)} ({oracle[:, 3].min():.2f}-"
                  f"{oracle[:, 3].max():.2f}), mean {oracle[:, 4].min():.2f}-"
                  f"{oracle[:, 4].max():.2f}, versicolor / virginica weakest pair "
                  f"{oracle[:, 1].min():.2f}-{oracle[:, 1].max():.2f} / "
                  f"{oracle[:, 2].min():.2f}-{oracle[:, 2].max():.2f}", flush=True)


def posterior_mixture_redraw(X, labels, rng):
    """X redrawn from a Gaussian mixture whose parameters are themselves redrawn: each cluster's
    mean from N(its sample mean, S / n_k) and the shared covariance from the sample covariance of
    N - K draws of N(0, S), S the pooled within covariance of ``labels`` (a Bayesian parametric
    bootstrap: the fitted partition's parameters are not taken as the truth)."""
    _, inverse = np.unique(labels, return_inverse=True)
    inverse = np.ravel(inverse)
    point_means, n_clusters = calibration._cluster_means(X, labels)
    covariance = calibration.within_covariance(X, labels)
    sizes = np.bincount(inverse)
    shifts = calibration.gaussian_reference(covariance, n_clusters, rng) / np.sqrt(sizes)[:, None]
    dof = max(len(X) - n_clusters, 1)
    draws = calibration.gaussian_reference(covariance, dof, rng)
    redrawn_covariance = draws.T @ draws / dof
    return point_means + shifts[inverse] + calibration.gaussian_reference(
        redrawn_covariance, len(X), rng)


def redraw_frequencies(name, map_labels_of, unit, data, labels, k, rng):
    """The co-clustering frequencies a redraw candidate of ``flat-redraws`` matches beta to."""
    n_resamples = calibration.N_MIXTURE_RESAMPLES
    if name == "default":
        return calibration.mixture_bootstrap_frequencies(map_labels_of, data, labels, rng)
    if name == "tied mixture":
        return calibration.mixture_bootstrap_frequencies(
            map_labels_of, data, calibration.tied_mixture_partition(data, k, rng), rng)
    if name == "rows":
        return row_bootstrap_frequencies(unit, data, rng, n_resamples)
    if name == "smoothed rows":
        # Rows drawn with replacement plus N(0, S / 2) noise, S the pooled within covariance of
        # X's MAP partition (a smoothed bootstrap), each row kept as the point it copies.
        covariance = calibration.within_covariance(data, labels) / 2.0
        together, drawn = np.zeros((len(data), len(data))), np.zeros((len(data), len(data)))
        for _ in range(n_resamples):
            ids = rng.randint(len(data), size=len(data))
            points = data[ids] + calibration.gaussian_reference(covariance, len(data), rng)
            same = calibration.co_clustering(map_labels_of(points))
            pairs = np.zeros_like(together)
            np.maximum.at(pairs, (np.repeat(ids, len(ids)), np.tile(ids, len(ids))),
                          same.ravel())
            seen = np.zeros(len(data), dtype=bool)
            seen[ids] = True
            together += pairs
            drawn += np.outer(seen, seen)
        return together / np.maximum(drawn, 1)
    if name == "posterior mixture":
        together = np.zeros((len(data), len(data)))
        for _ in range(n_resamples):
            together += calibration.co_clustering(
                map_labels_of(posterior_mixture_redraw(data, labels, rng)))
        return together / n_resamples
    raise ValueError(name)


#: Redraws ``flat-redraws`` matches the few-feature flat beta to after a significant test.
REDRAWS = ("default", "tied mixture", "rows", "smoothed rows", "posterior mixture")


def flat_redraws_table(seeds, regimes, names=REDRAWS, out=None):
    """Partitions, few features: the redraw behind the matched beta, two-sided, per seed.

    The default calibration's test and streams (``tested_mixture_beta``); where
    the test is significant each candidate's frequencies (fresh copies of the
    default's bootstrap stream) are matched by least squares
    (``matched_co_clustering_beta``). Where it is not, every candidate is the
    default's own-posterior beta: noise then puts no three points together
    above ``NULL_LEVEL`` by construction (not refitted here), groups and iris
    are fitted. Per regime: failures per candidate (noise: three points above
    0.5; groups: a pair within below 0.9; iris: setosa's pair below 0.9), and
    on iris the versicolor-virginica mean pair and largest pair.
    """
    print(f"\npartitions, few features: the redraw behind the matched beta; seeds "
          f"{seeds[0]}..{seeds[-1]}", flush=True)
    for regime in regimes:
        iris = regime.startswith("iris")
        rows = {name: [] for name in names}
        n_significant, floor = 0, []
        for seed in seeds:
            X, y = (iris_flowers(seed, regime.endswith("std")) if iris
                    else flat_regime_data(regime, seed))
            data = calibration._near_unit_scale(CorrelationClustering(), X)
            unit = calibration._unit_loss(
                calibration._at_kernel_width(CorrelationClustering(), data))
            pairwise_at = pairwise_by_beta(unit.cluster_potential(data))

            def map_labels_of(points):
                return np.asarray(map_partition(unit.cluster_potential(points))[0])

            labels = map_labels_of(data)
            test_rng = calibration._rngs(None)[0]
            p_value, k, _ = calibration.structure_pvalue(data, test_rng, labels)
            significant = p_value <= calibration.STRUCTURE_ALPHA
            n_significant += significant
            if not significant:
                if y is None:
                    value = (np.nan,)
                else:
                    beta, _ = calibration.own_humble_beta(
                        lambda beta, _, level: calibration.largest_together(pairwise_at(beta)),
                        data)
                    pairwise = pairwise_at(beta)
                    value = (species_supports(pairwise, y) if iris
                             else (within_group(pairwise, y),))
                for name in names:
                    rows[name].append(value)
                continue
            line = []
            for name in names:
                frequencies = redraw_frequencies(name, map_labels_of, unit, data, labels, k,
                                                 calibration._rngs(None)[1])
                beta, _ = calibration.matched_co_clustering_beta(pairwise_at, frequencies)
                pairwise = pairwise_at(beta)
                if y is None:
                    value = (calibration.largest_together(pairwise),)
                elif iris:
                    value = species_supports(pairwise, y)
                else:
                    value = (within_group(pairwise, y),)
                rows[name].append(value)
                line.append(f"{name} {beta:.3g}: " + " ".join(f"{v:.2f}" for v in value))
            if iris:
                # The oracle floor: the coldest beta keeping setosa's weakest pair at 0.9 (the
                # pairs rise with beta), whatever redraw picked it; told the labels.
                low, high = np.log(calibration.BETA_RANGE[0]), np.log(calibration.BETA_RANGE[1])
                while high - low > np.log(calibration.CAP_TOLERANCE):
                    middle = (low + high) / 2
                    if within_group(pairwise_at(float(np.exp(middle))), y, [0]) >= 0.9:
                        high = middle
                    else:
                        low = middle
                floor.append(species_supports(pairwise_at(float(np.exp(high))), y))
                line.append(f"setosa floor {np.exp(high):.3g}: "
                            + " ".join(f"{v:.2f}" for v in floor[-1]))
            if out is not None:
                print(f"{regime} seed {seed} p {p_value:.3f} k {k}: " + "; ".join(line),
                      file=out, flush=True)
        if floor:
            floor = np.array(floor)
            print(f"{regime:>28} setosa at 0.9 (oracle), {len(floor)} significant: v~v mean "
                  f"median {np.median(floor[:, 4]):.2f} (range {floor[:, 4].min():.2f}-"
                  f"{floor[:, 4].max():.2f}), v~v pair > 0.75 {np.sum(floor[:, 3] > 0.75)}",
                  flush=True)
        for name in names:
            values = np.array(rows[name])
            head = f"{regime:>28} {name:>17} significant {n_significant:>2}/{len(seeds)}"
            if iris:
                print(f"{head}: setosa < 0.9 {np.sum(values[:, 0] < 0.9):>2} (worst "
                      f"{values[:, 0].min():.2f}), v~v pair > 0.75 "
                      f"{np.sum(values[:, 3] > 0.75):>2}, "
                      f"v~v mean median {np.median(values[:, 4]):.2f} (by half "
                      f"{np.median(values[:len(values) // 2, 4]):.2f}, "
                      f"{np.median(values[len(values) // 2:, 4]):.2f}; range "
                      f"{values[:, 4].min():.2f}-{values[:, 4].max():.2f}), versicolor / "
                      f"virginica >= 0.5 {np.sum(values[:, 1] >= 0.5):>2} / "
                      f"{np.sum(values[:, 2] >= 0.5):>2}", flush=True)
            elif y is None:
                significant = values[~np.isnan(values[:, 0]), 0]
                print(f"{head}: fail {np.sum(significant > 0.5):>2} (worst where significant "
                      f"{significant.max() if len(significant) else float('nan'):.2f})",
                      flush=True)
            else:
                print(f"{head}: fail {np.sum(values[:, 0] < 0.9):>2} (worst "
                      f"{values[:, 0].min():.2f})", flush=True)


def iris_split_evidence(per_class=(6, 10, 15, 25, 50), n_subsamples=10):
    """Whether iris' versicolor and virginica are two groups by evidence a method without
    labels sees: SigClust's test (the calibration's, k = 2) on the two species alone at
    ``per_class`` flowers each (``n_subsamples`` draws; one at all 50), and the BIC of
    scikit-learn's full-covariance Gaussian mixture at K = 1..5 on all 150 flowers."""
    from sklearn.mixture import GaussianMixture

    X_all, y_all = load_iris(return_X_y=True)
    for size in per_class:
        p_values = []
        for seed in range(1 if size == 50 else n_subsamples):
            pick = np.random.RandomState(seed)
            idx = np.concatenate([pick.choice(np.flatnonzero(y_all == k), size, replace=False)
                                  for k in (1, 2)])
            p_values.append(calibration.structure_pvalue(
                X_all[idx], np.random.RandomState(seed), y_all[idx])[0])
        print(f"versicolor + virginica, {size:>2} flowers each: SigClust k = 2, p "
              f"{min(p_values):.2f}-{max(p_values):.2f}, at most 0.05 in "
              f"{np.sum(np.array(p_values) <= 0.05)}/{len(p_values)}", flush=True)
    bics = [GaussianMixture(k, covariance_type="full", n_init=10, random_state=0)
            .fit(X_all).bic(X_all) for k in range(1, 6)]
    print("all 150 flowers, full-covariance Gaussian mixture, BIC at K = 1..5: "
          + ", ".join(f"{bic:.1f}" for bic in bics) + f" (best K = {np.argmin(bics) + 1})",
          flush=True)


def iris_trees_table(n_seeds, n_per_class=6, first_seed=0):
    """Trees: ``ExactHierarchicalClustering()``'s default on iris subsamples, per seed.

    Setosa's support (the requirement: >= 0.9), versicolor's and
    virginica's as information (they overlap), the test's p-value,
    branch and beta_.
    """
    print(f"\ntrees, iris ({n_per_class} flowers a class), the default beta='auto', seeds "
          f"{first_seed}..{first_seed + n_seeds - 1}")
    print(f"{'seed':>4} {'p':>6} {'k':>2} {'branch':>14} {'beta_':>6} {'setosa':>6} "
          f"{'versic.':>7} {'virgin.':>7} {'CPU s':>6}")
    rows = []
    for seed in range(first_seed, first_seed + n_seeds):
        X, y = iris_flowers(seed, per_class=n_per_class)
        start = time.process_time()
        model = ExactHierarchicalClustering(verbose=0).fit(X)
        cost = time.process_time() - start
        record = model.calibration_
        supports = [model.cluster_probability(np.flatnonzero(y == k)) for k in range(3)]
        rows.append(supports + [record["branch"] == "gaussian null"])
        print(f"{seed:>4} {record['p_value']:>6.3f} {record['n_clusters_tested']:>2} "
              f"{record['branch']:>14} {model.beta_:>6.3g} {supports[0]:>6.2f} "
              f"{supports[1]:>7.2f} {supports[2]:>7.2f} {cost:>6.1f}", flush=True)
    rows = np.array(rows)
    print(f"setosa below 0.9 in {int(np.sum(rows[:, 0] < 0.9))}/{n_seeds} (worst "
          f"{rows[:, 0].min():.2f}); significant {int(rows[:, 3].sum())}/{n_seeds}; versicolor "
          f"{rows[:, 1].min():.2f}-{rows[:, 1].max():.2f}, virginica "
          f"{rows[:, 2].min():.2f}-{rows[:, 2].max():.2f}", flush=True)


def mixture_trees_data(regime, seed):
    """(X, labels: planted group k >= 0, -1 for the rest; None on noise) of ``mixture-trees``."""
    if regime.startswith("iris"):
        X, y = iris_flowers(seed, per_class=int(regime.split("(")[1].rstrip(")")) // 3)
        return X, np.where(y == 0, 0, -1)
    return null_rank_data(regime, seed)


MIXTURE_TREE_REGIMES = ("iris setosa (12)", "iris setosa (18)", "3 groups of 4, 3 f",
                        "3 groups of 4, 4 f", "2 groups of 5, 2 f", "2 groups of 5, 3 f",
                        "2 groups of 5, 4 f", "noise 12 x 2", "noise 12 x 3", "noise 12 x 4",
                        "noise, one column x 12")


def mixture_clade_frequencies(map_merges_of, X, labels, rng,
                              n_resamples=calibration.N_MIXTURE_RESAMPLES):
    """How often each cluster is a node of the MAP trees of data redrawn from X's mixture.

    The trees' form of ``calibration.mixture_bootstrap_frequencies``:
    ``n_resamples`` data sets drawn from the Gaussian mixture of ``labels``
    (``calibration.redrawn_mixture``), point i of a redraw standing for
    point i of X, and the clusters of 2..N-1 points of each one's MAP tree
    counted.

    Parameters
    ----------
    map_merges_of : callable
        data -> merges of the estimator's MAP tree of ``data`` (at X's
        kernel width).
    X : ndarray of shape (n_samples, n_features)
    labels : ndarray of shape (n_samples,)
        The partition whose mixture is redrawn.
    rng : RandomState
    n_resamples : int, default=calibration.N_MIXTURE_RESAMPLES

    Returns
    -------
    frequencies : dict
        Subset mask (int, bit i for point i) -> the share of redrawn data
        sets whose MAP tree holds that cluster; clusters in none are absent.
    """
    n_points = len(X)
    counts = {}
    for _ in range(n_resamples):
        merges = map_merges_of(calibration.redrawn_mixture(X, labels, rng))
        # Leaves first, the root last: the clusters between are the tree's.
        for mask in masks_from_merges(merges, n_points)[n_points:-1]:
            counts[mask] = counts.get(mask, 0) + 1
    return {mask: count / n_resamples for mask, count in counts.items()}


def clade_matching_error(log_marginals, frequencies, n_points):
    """``sum over clusters C of 2..N-1 points of (P(C) - f(C))**2``, f zero where absent.

    Parameters
    ----------
    log_marginals : ndarray of shape (2**n_points,)
        log P(C is a cluster of the tree), indexed by subset mask
        (``HierarchicalTrellis.cluster_log_marginals``).
    frequencies : dict
        Subset mask -> frequency (``mixture_clade_frequencies``).
    n_points : int

    Returns
    -------
    error : float
    """
    masks = np.fromiter(frequencies, dtype=np.int64, count=len(frequencies))
    target = np.fromiter(frequencies.values(), dtype=np.float64, count=len(frequencies))
    # The empty set, the leaves and the root are not clusters to match.
    excluded = np.array([0, (1 << n_points) - 1] + [1 << i for i in range(n_points)])
    with np.errstate(under="ignore"):
        squares = float(np.sum(np.exp(2.0 * log_marginals)))
        squares -= float(np.sum(np.exp(2.0 * log_marginals[excluded])))
        supports = np.exp(log_marginals[masks])
    # Over every subset: sum P^2, less the clusters some redraw holds, (2 P f - f^2).
    return max(squares - float(np.sum(2.0 * supports * target - target ** 2)), 0.0)


def matched_clade_beta(log_marginals_at, frequencies, n_points):
    """The beta whose clade supports are nearest ``frequencies`` in least squares.

    ``clade_matching_error``, the trees' form of
    ``calibration.matched_co_clustering_beta`` (every cluster a tree can
    hold in place of every pair), minimised over log beta as there
    (``calibration.minimising_beta``).

    Parameters
    ----------
    log_marginals_at : callable
        beta -> log P_beta(C is a cluster of the tree) of every subset mask
        C (``HierarchicalTrellis.cluster_log_marginals``).
    frequencies : dict
        Subset mask -> frequency (``mixture_clade_frequencies``).
    n_points : int

    Returns
    -------
    beta : float
    n_fits : int
        Posteriors fitted (distinct betas evaluated).
    """
    return calibration.minimising_beta(lambda log_beta: clade_matching_error(
        log_marginals_at(float(np.exp(log_beta))), frequencies, n_points))


def mixture_tree_beta(X):
    """Trees: the beta matched to the mixture bootstrap's clade frequencies, as the default would.

    X at the calibration's scale and kernel width, the test's labels
    (``correlation_map_labels``), the redraws from the default's
    bootstrap stream; returns (the energy at X's width, the scaled X,
    beta).
    """
    energy = Dasgupta()
    data = calibration._near_unit_scale(energy, X)
    at_width = calibration._at_kernel_width(energy, data)
    unit = calibration._unit_loss(at_width)
    labels = calibration.correlation_map_labels(data)
    frequencies = mixture_clade_frequencies(
        lambda points: calibration._search_map_merges(unit, points), data, labels,
        calibration._rngs(None)[1])
    beta, _ = matched_clade_beta(
        lambda beta: ExactHierarchicalClustering(clone(at_width).set_params(beta=beta),
                                                 verbose=0).fit(data)._trellis
        .cluster_log_marginals(), frequencies, len(data))
    return at_width, data, beta


def mixture_trees_table(n_seeds, regimes=MIXTURE_TREE_REGIMES, first_seed=0):
    """Trees: after a significant test, the mixture bootstrap's beta against the Gaussian null's.

    Per data set, the default ``beta="auto"`` (test, then temper: the
    Gaussian-null beta where the test is significant), and the same with
    the Gaussian-null beta replaced by the beta whose clade supports best
    match (least squares over every cluster of 2..N-1 points) how often
    the MAP trees of 40 data sets redrawn from the Gaussian mixture of X's
    correlation-clustering MAP partition hold each cluster
    (``mixture_clade_frequencies``, ``matched_clade_beta``; the
    partitions' principle). On noise, where either beta applies only to
    the test's false positives, both are also forced on every seed. Seeds
    from ``first_seed`` (noise: twice as many, from 2 ``first_seed``).
    Failures of the requirement (worst value), the betas' ranges over the
    significant seeds, CPU s.
    """
    print(f"\ntrees, after the test: Gaussian-null beta (default) against the mixture "
          f"bootstrap's, seeds {first_seed}..{first_seed + n_seeds - 1} (noise "
          f"{2 * first_seed}..{2 * (first_seed + n_seeds) - 1})")
    print(f"{'regime':>22} {'signif':>7} {'default: fail worst':>19} {'mixture: fail worst':>19} "
          f"{'null beta':>13} {'mixture beta':>13} {'forced null':>12} {'forced mix':>12} "
          f"{'CPU s':>6}")
    for regime in regimes:
        noise = regime.startswith("noise")
        seeds = (range(2 * first_seed, 2 * (first_seed + n_seeds)) if noise
                 else range(first_seed, first_seed + n_seeds))
        results = {"default": [], "mixture": [], "forced null": [], "forced mixture": []}
        null_betas, mixture_betas, extra = [], [], []
        start = time.process_time()
        for seed in seeds:
            X, y = mixture_trees_data(regime, seed)
            model = ExactHierarchicalClustering(verbose=0).fit(X)
            significant = model.calibration_["branch"] == "gaussian null"
            value = statistic(model, y, False)
            results["default"].append(value)
            if not (significant or noise):
                results["mixture"].append(value)
                continue
            at_width, data, beta = mixture_tree_beta(X)
            fitted = ExactHierarchicalClustering(clone(at_width).set_params(beta=beta),
                                                 verbose=0).fit(data)
            mixed = statistic(fitted, y, False)
            results["mixture"].append(mixed if significant else value)
            if significant:
                null_betas.append(model.beta_)
                mixture_betas.append(beta)
            if noise:
                results["forced mixture"].append(mixed)
                null_beta = model.beta_ if significant else calibration.gaussian_null_beta(
                    lambda b, points, _: humility(points, b, at_width.gamma, False), data,
                    calibration._rngs(None)[2])[0]
                results["forced null"].append(
                    statistic(ExactHierarchicalClustering(clone(at_width).set_params(
                        beta=null_beta), verbose=0).fit(data), y, False))
                extra.append((null_beta, beta))
        cells = []
        for name in ("default", "mixture"):
            values = results[name]
            worst = max(values) if noise else min(values)
            cells.append(f"{sum(fails(v, y) for v in values):>3}/{len(values):<3} {worst:>5.2f}")
        ranges = [f"{min(b):>5.3g}-{max(b):<6.3g}" if b else f"{'-':>13}"
                  for b in (null_betas, mixture_betas)]
        forced = [f"{sum(fails(v, None) for v in results[name]):>3}/{len(results[name]):<3} "
                  f"{max(results[name]):>4.2f}" if results[name] else f"{'-':>12}"
                  for name in ("forced null", "forced mixture")]
        print(f"{regime:>22} {len(null_betas):>3}/{len(seeds):<3} {cells[0]:>19} {cells[1]:>19} "
              f"{ranges[0]:>13} {ranges[1]:>13} {forced[0]:>12} {forced[1]:>12} "
              f"{time.process_time() - start:>6.0f}", flush=True)
        if extra:
            extra = np.array(extra)
            print(f"{'':>22} forced betas: null {extra[:, 0].min():.3g}-{extra[:, 0].max():.3g}, "
                  f"mixture {extra[:, 1].min():.3g}-{extra[:, 1].max():.3g}", flush=True)


def _tied_mixture_labels(X, rng, max_k):
    """Labels of the tied-covariance Gaussian mixture of k = 1..max_k clusters BIC prefers."""
    from sklearn.mixture import GaussianMixture
    seed = rng.randint(2 ** 31)
    fits = [GaussianMixture(k, covariance_type="tied", n_init=10, reg_covar=1e-9,
                            random_state=seed).fit(X) for k in range(1, max_k + 1)]
    return min(fits, key=lambda fit: fit.bic(X)).predict(X)


#: The Gaussian null's partition of ``null-partition-trees`` (in place of the default's,
#: ``calibration.tied_mixture_partition``): (X, its correlation-clustering MAP labels, the test's
#: k, the test's stream after the test) -> labels. "correlation", those labels, was the default
#: before.
NULL_PARTITIONS = {
    "correlation": lambda X, labels, k, rng: labels,
    "index k": lambda X, labels, k, rng: calibration.index_partition(X, k, rng),
    "index k+1": lambda X, labels, k, rng: calibration.index_partition(
        X, min(k + 1, len(np.unique(X, axis=0))), rng),
    "ward k": lambda X, labels, k, rng: fcluster(linkage(X, "ward"), k, "maxclust"),
    "tied BIC": lambda X, labels, k, rng: _tied_mixture_labels(X, rng, max(2, len(X) // 3)),
    # The default (``calibration.tied_mixture_partition``).
    "tied BIC >= k": lambda X, labels, k, rng: calibration.tied_mixture_partition(X, k, rng),
}


def max_over_k_pvalue(X, rng, labels=None, ks=(2, 3, 4), batch=calibration.N_STRUCTURE_REFERENCES,
                      max_references=calibration.MAX_STRUCTURE_REFERENCES):
    """SigClust's test over several k, the multiplicity corrected by the references' own maxima.

    ``calibration.structure_pvalue`` with, in place of one k's cluster
    index, T = max over k of (mean_k - index_k) / sd_k, the mean and sd
    of each k's index over the references drawn so far (a max-statistic
    test, Westfall & Young 1993): X and every reference get the same
    statistic, so the p-value needs no Bonferroni factor. Sequential as
    the default. Returns (p, the k at which X's standardised index is
    largest, references drawn); ``labels`` unused.
    """
    ks = [k for k in ks if k <= len(np.unique(X, axis=0))]
    covariance = np.atleast_2d(np.cov(X.T))
    observed = np.array([calibration.cluster_indices(X[None], k, rng)[0] for k in ks])
    null = np.empty((0, len(ks)))
    while len(null) < max_references:
        size = min(batch, max_references - len(null))
        draws = np.stack([calibration.gaussian_reference(covariance, len(X), rng)
                          for _ in range(size)])
        null = np.vstack([null, np.stack([calibration.cluster_indices(draws, k, rng)
                                          for k in ks], axis=1)])
        mean, sd = null.mean(axis=0), null.std(axis=0, ddof=1)
        exceedances = int(np.sum(((mean - null) / sd).max(axis=1)
                                 >= ((mean - observed) / sd).max()))
        low, high = calibration._pvalue_interval(exceedances, len(null))
        if high <= calibration.STRUCTURE_ALPHA or low > calibration.STRUCTURE_ALPHA:
            break
    k = ks[int(np.argmax((mean - observed) / sd))]
    return (1 + exceedances) / (1 + len(null)), k, len(null)


#: Tests of ``null-partition-trees`` in place of the default's (the rules of the same name).
TESTS = {"max over k": max_over_k_pvalue}
NULL_PARTITIONS["max over k"] = NULL_PARTITIONS["correlation"]


def _same_partition(a, b):
    """Whether two labellings are one partition."""
    return len(np.unique(a)) == len(np.unique(b)) == len(np.unique(np.stack([a, b]), axis=1))


def null_partition_trees_table(n_seeds, rules, regimes=MIXTURE_TREE_REGIMES, first_seed=0,
                               verbose=False):
    """Trees: the default ``beta="auto"`` with the Gaussian null's partition from each rule.

    The test (k from the correlation-clustering MAP partition) is the
    default's; where it is significant, the Gaussian null's within-cluster
    covariance comes from ``rules`` (``NULL_PARTITIONS``) in place of
    that MAP partition; a rule named in ``TESTS`` replaces the test as
    well. A rule whose partition an earlier rule already fitted on the
    same data set (after a significant test) reuses that fit. Seeds from
    ``first_seed`` (noise: twice as many, from 2 ``first_seed``). Per
    rule: failures of the requirement (worst), the range of beta_ over
    the seeds its test finds significant and their number; CPU s.
    """
    print(f"\ntrees, the Gaussian null's partition, seeds {first_seed}..{first_seed + n_seeds - 1} "
          f"(noise {2 * first_seed}..{2 * (first_seed + n_seeds) - 1})")
    print(f"{'regime':>22} " + " ".join(f"{rule + ': fail worst beta signif':>36}"
                                        for rule in rules) + f" {'CPU s':>6}")
    defaults = calibration.structure_pvalue, calibration.gaussian_null_beta
    for regime in regimes:
        noise = regime.startswith("noise")
        seeds = (range(2 * first_seed, 2 * (first_seed + n_seeds)) if noise
                 else range(first_seed, first_seed + n_seeds))
        results = {rule: [] for rule in rules}
        start = time.process_time()
        for seed in seeds:
            X, y = mixture_trees_data(regime, seed)
            fitted = []   # (partition, statistic, beta_) of the rules so far
            untested = None   # the result where the default test is not significant
            for rule in rules:
                if untested is not None and rule not in TESTS:
                    # The null (and the rule) is not used.
                    results[rule].append(untested)
                    continue
                chosen = {}

                def test(data, rng, labels=None, **kwargs):
                    result = TESTS.get(rule, defaults[0])(data, rng, labels, **kwargs)
                    # The rule draws from the test's stream as it stood after the test.
                    chosen["rng"] = np.random.RandomState()
                    chosen["rng"].set_state(rng.get_state())
                    chosen["k"] = result[1]
                    return result

                def null(humility, data, rng, labels=None, rule=rule, **kwargs):
                    chosen["labels"] = np.asarray(NULL_PARTITIONS[rule](
                        data, calibration.correlation_map_labels(data), chosen["k"],
                        chosen["rng"]))
                    for labelling, value, beta in fitted:
                        if _same_partition(labelling, chosen["labels"]):
                            raise _Known(value, beta)
                    return defaults[1](humility, data, rng, chosen["labels"], **kwargs)

                calibration.structure_pvalue, calibration.gaussian_null_beta = test, null
                try:
                    model = ExactHierarchicalClustering(verbose=0).fit(X)
                    value, beta = statistic(model, y, False), model.beta_
                    if "labels" in chosen:
                        fitted.append((chosen["labels"], value, beta))
                except _Known as known:
                    value, beta = known.args
                finally:
                    calibration.structure_pvalue, calibration.gaussian_null_beta = defaults
                tested = "labels" in chosen
                results[rule].append((value, beta, tested))
                if verbose:
                    print(f"  {regime} seed {seed} {rule}: {value:.2f} beta {beta:.3g} "
                          f"{'tested' if tested else 'own'}", flush=True)
                if not tested and rule not in TESTS:
                    untested = results[rule][-1]
        cells = []
        for rule in rules:
            values = [row[0] for row in results[rule]]
            betas = [row[1] for row in results[rule] if row[2]]
            worst = max(values) if noise else min(values)
            span = f"{min(betas):.2g}-{max(betas):.2g}" if betas else "-"
            cells.append(f"{sum(fails(v, y) for v in values):>3}/{len(values):<3} {worst:>5.2f} "
                         f"{span:>11} {len(betas):>3}")
        print(f"{regime:>22} " + " ".join(f"{cell:>36}" for cell in cells)
              + f" {time.process_time() - start:>6.0f}", flush=True)


def _humble_betas(data, gamma, labels, rng, n_references=calibration.N_GAUSSIAN_REFERENCES):
    """Every Gaussian-null reference's largest humble beta, sorted (the default ranks them).

    The references of ``calibration.gaussian_null_beta`` (the pooled within-cluster
    covariance of ``labels``, clustered at X's kernel width, level
    ``GAUSSIAN_NULL_LEVEL``), each searched over the whole beta range rather
    than up to the rank's bound, so that every rank can be read off; with the
    default's stream the 2nd smallest is the default's beta within the
    search's tolerance (``CAP_TOLERANCE``).
    """
    covariance = calibration.within_covariance(data, labels)
    caps = []
    for _ in range(n_references):
        reference = calibration.gaussian_reference(covariance, len(data), rng)
        found, _ = calibration._largest_humble_beta(
            lambda beta: humility(reference, beta, gamma, False), 1.0,
            calibration.BETA_RANGE[1], calibration.GAUSSIAN_NULL_LEVEL)
        caps.append(calibration.BETA_RANGE[0] if found is None else found)
    return np.sort(caps)


def needed_beta(data, members, gamma, target=0.9, betas=2.0 ** np.arange(-4.0, 8.5, 0.5)):
    """The smallest beta of a grid (steps of sqrt 2) at which ``members`` reach ``target``."""
    support = {}

    def at(index):
        if index not in support:
            support[index] = ExactHierarchicalClustering(
                Dasgupta(beta=float(betas[index]), gamma=gamma), verbose=0).fit(
                    data).cluster_probability(members)
        return support[index]
    # Steps of 2 up to the first beta that reaches it, then the sqrt-2 step below.
    index = next((i for i in range(0, len(betas), 2) if at(i) >= target), None)
    if index is None:
        return np.inf
    return float(betas[index - 1] if index > 0 and at(index - 1) >= target else betas[index])


def _iris_population_log_density(points):
    """Log density of iris's own population: its three species' Gaussians (all 150 flowers)."""
    from scipy.special import logsumexp
    from scipy.stats import multivariate_normal
    X, y = load_iris(return_X_y=True)
    return logsumexp([multivariate_normal(X[y == k].mean(0), np.cov(X[y == k].T)).logpdf(points)
                      for k in range(3)], axis=0) - np.log(3.0)


def population_ratio_pvalue(X, rng, n_references=999):
    """p-value of the most powerful test of iris's own population against one Gaussian.

    The log likelihood ratio of X under the iris population's three-species
    Gaussian mixture (labels summed out) over the best single Gaussian
    (Neyman-Pearson against that known alternative), referred to Gaussian
    data sets with X's mean and covariance (a parametric bootstrap): no
    unsupervised test that does not know iris's population can be more
    powerful against it.
    """
    from scipy.stats import multivariate_normal

    def ratio(points):
        single = multivariate_normal(points.mean(0), np.cov(points.T, bias=True),
                                     allow_singular=True)
        return float(np.sum(_iris_population_log_density(points)) - np.sum(single.logpdf(points)))

    observed = ratio(X)
    null = [ratio(rng.multivariate_normal(X.mean(0), np.cov(X.T), size=len(X)))
            for _ in range(n_references)]
    return (1 + int(np.sum(np.array(null) >= observed))) / (1 + n_references)


def split_given_pvalue(X, members, rng, n_references=999):
    """p-value of the labels-given split's own 2-means index against the same split of references.

    SigClust's statistic and references (Gaussian with X's covariance), but
    evaluated at the one split the labels give instead of the best of all
    2**(N-1) - 1: what the test would find if it knew where to look.
    """
    side = np.zeros(len(X), dtype=bool)
    side[members] = True

    def index(data):
        centred = data - data.mean(axis=1, keepdims=True)
        between = (centred[:, side].sum(axis=1) ** 2).sum(axis=1) * len(X) / (
            side.sum() * (len(X) - side.sum()))
        return 1.0 - between / (centred ** 2).sum(axis=(1, 2))

    covariance = np.atleast_2d(np.cov(X.T))
    null = index(np.stack([calibration.gaussian_reference(covariance, len(X), rng)
                           for _ in range(n_references)]))
    return (1 + int(np.sum(null <= index(X[None])[0]))) / (1 + n_references)


def setosa_bounds_table(seeds, n_per_class):
    """Trees, iris: what the data allow the few-feature calibration (oracles beside the default).

    Per subsample (``n_per_class`` flowers a species): the default test's
    p-value and k; two oracle tests -- the species' labels given (SigClust's
    index of the setosa split alone, ``split_given_pvalue``) and iris's own
    population given (``population_ratio_pvalue``); the beta setosa needs
    to reach 0.9 (``needed_beta``); and the 7 Gaussian-null references'
    humble betas (``_humble_betas``, default stream) with the null's
    within covariance from the default's partition (``tied_mixture_partition``)
    and from the species themselves (an oracle): their 2nd smallest (the
    default's rule) with setosa's support there, their largest (no rank of 7
    can give more) and the least rank that reaches setosa's need (r).
    """
    print(f"\ntrees, iris ({3 * n_per_class} flowers): what the data allow, seeds "
          f"{seeds[0]}..{seeds[-1]}")
    print(f"{'seed':>4} {'p':>6} {'k':>2} {'p split':>7} {'p pop.':>6} {'need':>5} "
          f"{'tied: 2nd setosa max r':>23} {'species: 2nd setosa max r':>26} {'CPU s':>6}")
    for seed in seeds:
        start = time.process_time()
        X, y = iris_flowers(seed, per_class=n_per_class)
        energy = Dasgupta()
        data = calibration._near_unit_scale(energy, X)
        gamma = calibration._at_kernel_width(energy, data).gamma
        setosa = np.flatnonzero(y == 0)
        test_rng, _, _ = calibration._rngs(None)
        labels = calibration.correlation_map_labels(data)
        p_value, k, _ = calibration.structure_pvalue(data, test_rng, labels)
        partitions = (calibration.tied_mixture_partition(data, k, test_rng), y)
        oracle_rng = np.random.RandomState(seed)
        p_split = split_given_pvalue(data, setosa, oracle_rng)
        p_population = population_ratio_pvalue(X, oracle_rng)
        need = needed_beta(data, setosa, gamma)
        cells = []
        for partition in partitions:
            betas = _humble_betas(data, gamma, partition, calibration._rngs(None)[2])
            beta = betas[calibration.GAUSSIAN_NULL_RANK - 1]
            support = ExactHierarchicalClustering(Dasgupta(beta=beta, gamma=gamma),
                                                  verbose=0).fit(data).cluster_probability(setosa)
            # The least rank of the references' humble betas that reaches setosa's need.
            reaching = np.flatnonzero(betas >= need)
            rank = str(reaching[0] + 1) if len(reaching) else "-"
            cells.append(f"{beta:>5.2g} {support:>5.2f} {betas[-1]:>5.2g} {rank:>1}")
        print(f"{seed:>4} {p_value:>6.3f} {k:>2} {p_split:>7.3f} {p_population:>6.3f} "
              f"{need:>5.2g} {cells[0]:>23} {cells[1]:>26} "
              f"{time.process_time() - start:>6.1f}", flush=True)


class _Known(Exception):
    """A rule's partition was already fitted on this data set: its (statistic, beta_)."""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--resamples", type=int, default=40)
    parser.add_argument("--shift", type=float, default=SHIFT,
                        help="standard deviations between a planted group and the rest")
    parser.add_argument("--only", nargs="*", default=["windows", "candidates", "dpm",
                                                      "significance", "frequencies",
                                                      "point-frequencies", "weighted-frequencies",
                                                      "redrawn-frequencies", "gaussian-null",
                                                      "tested-null"],
                        help="tables to print (each takes 1-5 minutes at 5 seeds)")
    parser.add_argument("--regimes", nargs="*", default=None,
                        help="partition tables (flat-*): only the regimes containing one of "
                             "these strings, e.g. 'noise, 18' iris")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="first seed of iris-trees, mixture-trees, flat-iris, "
                             "flat-iris-betas and flat-energies (to split a run)")
    parser.add_argument("--energies", nargs="*", default=None,
                        help="flat-energies: only these candidates (default all)")
    parser.add_argument("--redraws", nargs="*", default=list(REDRAWS),
                        help="flat-redraws: the candidates (REDRAWS)")
    parser.add_argument("--per-seed", default=None,
                        help="flat-redraws: append per-seed lines to this file")
    parser.add_argument("--null-partitions", nargs="*", default=list(NULL_PARTITIONS),
                        help="rules of null-partition-trees (NULL_PARTITIONS)")
    parser.add_argument("--test-variants", nargs="*", default=list(TEST_VARIANTS),
                        help="test-power: the variants (TEST_VARIANTS)")
    parser.add_argument("--per-class", type=int, default=4,
                        help="setosa-bounds: iris flowers a species (4: 12 flowers, 6: 18)")
    parser.add_argument("--verbose", action="store_true", help="null-partition-trees: per seed")
    parser.add_argument("--tested-level", type=float,
                        default=calibration.GAUSSIAN_NULL_LEVEL,
                        help="level of the Gaussian null behind the test (tested-null)")
    args = parser.parse_args()
    globals()["SHIFT"] = args.shift
    if args.regimes:
        globals()["FLAT_REGIMES"] = tuple(regime for regime in FLAT_REGIMES + FLAT_EXTRA_REGIMES
                                          if any(part in regime for part in args.regimes))
    warnings.simplefilter("ignore", UserWarning)
    start = time.perf_counter()
    if "windows" in args.only:
        window_table(args.seeds)
    if "candidates" in args.only:
        candidate_table(args.seeds, args.resamples)
    if "dpm" in args.only:
        dpm_table(args.seeds)
    if "significance" in args.only:
        significance_table(args.seeds)
    if "gaussian-null" in args.only:
        gaussian_null_table(args.seeds, GAUSSIAN_NULL_RULES)
    if "tested-sweep" in args.only:
        tested_sweep_table(args.seeds)
    if "cost" in args.only:
        cost_table(args.seeds)
    if "flat-tested" in args.only:
        flat_tested_table(args.seeds)
    if "flat-pvalues" in args.only:
        flat_pvalues_table(args.seeds)
    if "flat-evidence" in args.only:
        flat_evidence_table(args.seeds)
    iris_seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    iris_columns = [name for name in ("raw", "std") if not args.regimes or name in args.regimes]
    if "flat-iris-betas" in args.only:
        flat_iris_betas_table(iris_seeds, iris_columns)
    if "flat-iris" in args.only:
        flat_iris_table(iris_seeds, iris_columns)
    if "flat-candidates" in args.only:
        flat_candidates_table(args.seeds, args.resamples)
    if "flat-energies" in args.only:
        flat_energies_table(iris_seeds, [regime for regime in FLAT_REGIMES + (
            "iris raw", "iris std") if regime not in FLAT_EXTRA_REGIMES and (
                not args.regimes or any(part in regime for part in args.regimes))],
            *([tuple(args.energies)] if args.energies else []))
    if "flat-redraws" in args.only:
        flat_redraws_table(iris_seeds, [regime for regime in FLAT_REGIMES + (
            "iris raw", "iris std") if regime not in FLAT_EXTRA_REGIMES and (
                not args.regimes or any(part in regime for part in args.regimes))],
            tuple(args.redraws), open(args.per_seed, "a") if args.per_seed else None)
    if "iris-split-evidence" in args.only:
        iris_split_evidence()
    if "weak-regimes" in args.only:
        weak_regimes_table(args.seeds)
    if "iris-diagnosis" in args.only:
        iris_diagnosis_table(args.seeds)
    if "test-power" in args.only:
        test_power_table(args.seeds, [regime for regime in NULL_RANK_REGIMES + (IRIS_SHAPED_NOISE,)
                                      if not args.regimes
                                      or any(part in regime for part in args.regimes)],
                         variants=args.test_variants)
    if "null-rank" in args.only:
        null_rank_table(args.seeds, [regime for regime in NULL_RANK_REGIMES
                                     if not args.regimes
                                     or any(part in regime for part in args.regimes)])
    if "iris-trees" in args.only:
        iris_trees_table(args.seeds, first_seed=args.first_seed)
    if "setosa-bounds" in args.only:
        setosa_bounds_table(iris_seeds, args.per_class)
    if "null-partition-trees" in args.only:
        null_partition_trees_table(args.seeds, args.null_partitions,
                                   [regime for regime in MIXTURE_TREE_REGIMES
                                    if not args.regimes
                                    or any(part in regime for part in args.regimes)],
                                   first_seed=args.first_seed, verbose=args.verbose)
    if "mixture-trees" in args.only:
        mixture_trees_table(args.seeds, [regime for regime in MIXTURE_TREE_REGIMES
                                         if not args.regimes
                                         or any(part in regime for part in args.regimes)],
                            first_seed=args.first_seed)
    if "tested-null" in args.only:
        calibration.GAUSSIAN_NULL_LEVEL = args.tested_level
        tested_null_table(args.seeds)
    for name in RESAMPLINGS:
        if name in args.only:
            frequency_table(args.seeds, args.resamples, name)
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
