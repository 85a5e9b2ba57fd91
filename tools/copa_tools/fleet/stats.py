# SPDX-License-Identifier: GPL-2.0
"""copa-fleet ab's statistics: the difference between two arms at each
quantile (and of a ratio of sums), with a bootstrap interval that
resamples the unit of assignment; the sample-ratio-mismatch check; the
Benjamini-Hochberg correction across a breakdown.

scipy and statsmodels do the statistics; this module arranges the data.
A bootstrap resample is a weight per cluster (how often it was drawn),
so a quantile over the records of resampled clusters is a weighted
quantile over the records, computed for a batch of resamples at once.

- Up to PERCENTILE_MAX_CLUSTERS clusters: scipy.stats.bootstrap over the
  clusters of each arm (drawn independently, as the arms were), with the
  percentile interval. Not BCa: its jackknife recomputes the statistic
  once per cluster, O(n^2).
- Above: the Poisson bootstrap (each cluster's weight Poisson(1), as
  Spotify runs it at scale), with the percentile interval; it needs no
  resampled index array of the clusters' size.

The p-value of a difference is the bootstrap's own, 2 min(P(d* <= 0),
P(d* >= 0)), so that it is below alpha when the percentile interval
leaves out 0.
"""

import numpy as np
from scipy import stats
from statsmodels.stats.multitest import multipletests

PERCENTILE_MAX_CLUSTERS = 20_000
BATCH_CELLS = 1 << 23           # weights held at once: batch x records


def _clusters(labels):
    """Cluster indices 0..k-1 for ``labels`` (any hashable values)."""
    _, index = np.unique(np.asarray(labels), return_inverse=True)
    return index.reshape(-1)


class Quantiles:
    """Quantiles ``qs`` of ``values``, each in the cluster ``labels[i]``."""

    def __init__(self, values, labels, qs):
        values = np.asarray(values, dtype=float)
        cluster = _clusters(labels)
        order = np.argsort(values, kind="stable")
        self.values, self.cluster = values[order], cluster[order]
        self.n_clusters = int(cluster.max()) + 1 if len(cluster) else 0
        self.size = len(values)
        self.qs = tuple(qs)

    def __call__(self, weights=None):
        """The quantiles (the inverted CDF, numpy's 'inverted_cdf'): of
        every record, or per row of ``weights`` (resamples x clusters),
        each record counted its cluster's weight times."""
        if weights is None:
            return np.quantile(self.values, self.qs, method="inverted_cdf")
        cum = np.cumsum(weights[:, self.cluster], axis=1)
        total = cum[:, -1:]
        out = np.empty((len(weights), len(self.qs)))
        for j, q in enumerate(self.qs):
            first = (cum < q * total).sum(axis=1)
            out[:, j] = self.values[np.minimum(first, self.size - 1)]
        out[total[:, 0] == 0] = np.nan
        return out


class Ratio:
    """sum(num) / sum(den), e.g. bytes retransmitted over bytes acked;
    each pair in the cluster ``labels[i]``."""

    def __init__(self, num, den, labels):
        cluster = _clusters(labels)
        self.n_clusters = int(cluster.max()) + 1 if len(cluster) else 0
        self.num = np.bincount(cluster, np.asarray(num, float),
                               self.n_clusters)
        self.den = np.bincount(cluster, np.asarray(den, float),
                               self.n_clusters)
        self.size = self.n_clusters
        self.qs = (None,)

    def __call__(self, weights=None):
        if weights is None:
            return np.array([self.num.sum() / max(self.den.sum(), 1.0)])
        den = weights @ self.den
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(den > 0, (weights @ self.num) / den,
                            np.nan)[:, None]


def _counts(draws, n):
    """Resampled index rows (resamples x n) as weights per cluster."""
    draws = np.atleast_2d(draws)
    out = np.zeros((len(draws), n))
    np.add.at(out, (np.arange(len(draws))[:, None], draws), 1)
    return out


def _batch(control, treatment):
    return max(1, BATCH_CELLS // max(control.size, treatment.size, 1))


def _scipy_distribution(control, treatment, resamples, alpha, rng):
    def statistic(ic, it, axis=-1):
        d = (treatment(_counts(it, treatment.n_clusters))
             - control(_counts(ic, control.n_clusters)))
        return d.T if np.ndim(ic) > 1 else d.T[:, 0]

    res = stats.bootstrap(
        (np.arange(control.n_clusters), np.arange(treatment.n_clusters)),
        statistic, n_resamples=resamples, vectorized=True,
        method="percentile", confidence_level=1 - alpha,
        batch=_batch(control, treatment), rng=rng)
    return (res.bootstrap_distribution.reshape(len(control.qs), -1),
            res.confidence_interval.low, res.confidence_interval.high)


def _poisson_distribution(control, treatment, resamples, alpha, rng):
    batch, parts = _batch(control, treatment), []
    for done in range(0, resamples, batch):
        b = min(batch, resamples - done)
        parts.append(
            treatment(rng.poisson(1.0, (b, treatment.n_clusters)))
            - control(rng.poisson(1.0, (b, control.n_clusters))))
    dist = np.concatenate(parts).T
    lo, hi = np.nanpercentile(dist, [50 * alpha, 100 - 50 * alpha], axis=1)
    return dist, lo, hi


def difference(control, treatment, alpha=0.05, resamples=2000, rng=None,
               poisson=None):
    """Treatment minus control (two Quantiles, or two Ratios): a dict of
    arrays, one entry per quantile: estimate, low and high (the 1 - alpha
    percentile interval), p, and method ('percentile' or 'poisson').
    ``poisson`` forces the method; by default the Poisson bootstrap
    serves more than PERCENTILE_MAX_CLUSTERS clusters."""
    if control.n_clusters < 2 or treatment.n_clusters < 2:
        raise ValueError(f"a bootstrap needs two clusters per arm: "
                         f"{control.n_clusters} control, "
                         f"{treatment.n_clusters} treatment")
    rng = np.random.default_rng(rng)
    if poisson is None:
        poisson = (control.n_clusters + treatment.n_clusters
                   > PERCENTILE_MAX_CLUSTERS)
    draw = _poisson_distribution if poisson else _scipy_distribution
    dist, lo, hi = draw(control, treatment, resamples, alpha, rng)
    n = np.sum(~np.isnan(dist), axis=1)
    below = np.sum(dist <= 0, axis=1) / n
    above = np.sum(dist >= 0, axis=1) / n
    p = np.clip(2 * np.minimum(below, above), 1 / (n + 1), 1.0)
    return {"estimate": treatment() - control(), "low": np.asarray(lo),
            "high": np.asarray(hi), "p": p,
            "method": "poisson" if poisson else "percentile"}


def interval(statistic, alpha=0.05, resamples=2000, rng=None):
    """One group's ``statistic`` (a Quantiles or a Ratio) and its 1 -
    alpha percentile bootstrap interval, resampling its clusters: a dict
    of arrays, one entry per quantile: estimate, low and high. The
    controller's leave rules read it."""
    n = statistic.n_clusters
    if n < 2:
        raise ValueError(f"a bootstrap needs two clusters: {n}")

    def resampled(i, axis=-1):
        return statistic(_counts(i, n)).T

    res = stats.bootstrap((np.arange(n),), resampled,
                          n_resamples=resamples, vectorized=True,
                          method="percentile", confidence_level=1 - alpha,
                          batch=_batch(statistic, statistic),
                          rng=np.random.default_rng(rng))
    return {"estimate": statistic(),
            "low": np.asarray(res.confidence_interval.low),
            "high": np.asarray(res.confidence_interval.high)}


def sample_ratio(counts, shares):
    """The sample-ratio-mismatch check: chi-square p-value of the units
    ``counts`` per arm against the arms' ``shares``."""
    counts = np.asarray(counts, dtype=float)
    expected = np.asarray(shares, dtype=float) * counts.sum()
    if counts.sum() == 0:
        return float("nan")
    return float(stats.chisquare(counts, expected).pvalue)


def benjamini_hochberg(pvalues, alpha=0.05):
    """(rejected, adjusted p) of Benjamini-Hochberg at false discovery
    rate ``alpha``; NaN p-values (no test) stay NaN and unrejected."""
    p = np.asarray(pvalues, dtype=float)
    ok = ~np.isnan(p)
    reject = np.zeros(len(p), dtype=bool)
    adjusted = np.full(len(p), np.nan)
    if ok.any():
        reject[ok], adjusted[ok], _, _ = multipletests(p[ok], alpha,
                                                       method="fdr_bh")
    return reject, adjusted
