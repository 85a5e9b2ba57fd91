# SPDX-License-Identifier: GPL-2.0
"""copa-fleet ab's statistics on synthetic data with a known effect:
clustered, skewed records (a lognormal per record around a lognormal
per cluster, as RTTs of the connections of one client or prefix are).

- A/A: over many seeded runs, the 95% interval of the median difference
  leaves out 0 in 5% of them, within the binomial spread; resampling
  records instead of clusters would reject far more often.
- A/B: a shift injected into the treatment is inside the interval at
  its stated coverage, for the percentile (scipy) and Poisson methods.
- One group's interval (the controller's leave rules): it leaves out
  the population's median at its stated rate.
- The sample-ratio-mismatch check, and Benjamini-Hochberg.
"""
import pytest

from copa_tools.fleet import stats

np = pytest.importorskip("numpy")
scipy_stats = pytest.importorskip("scipy.stats")

ALPHA = 0.05
RUNS = 200
CLUSTERS = 40                   # per arm
RECORDS = 8                     # per cluster
RESAMPLES = 300


def arm(rng, shift=0.0, clusters=CLUSTERS):
    """Values (ms) and cluster labels of one arm."""
    centre = rng.normal(np.log(40), 0.5, clusters)
    values = np.exp(rng.normal(np.repeat(centre, RECORDS), 0.3)) + shift
    return values, np.repeat(np.arange(clusters), RECORDS)


def within_binomial(k, n, p):
    """Whether k of n is within the binomial spread of p (two-sided test
    at 0.001: a correct method fails it once in a thousand)."""
    return scipy_stats.binomtest(k, n, p).pvalue > 0.001


def rejections(rng, clustered=True, shift=0.0, q=0.5, poisson=False,
               runs=RUNS):
    """(rejections of 'no difference', intervals holding ``shift``)."""
    reject = cover = 0
    for _ in range(runs):
        (a, ca), (b, cb) = arm(rng), arm(rng, shift)
        if not clustered:
            ca, cb = np.arange(len(a)), np.arange(len(b))
        d = stats.difference(stats.Quantiles(a, ca, (q,)),
                             stats.Quantiles(b, cb, (q,)), ALPHA,
                             RESAMPLES, rng, poisson)
        reject += bool(d["low"][0] > 0 or d["high"][0] < 0)
        cover += bool(d["low"][0] <= shift <= d["high"][0])
    return reject, cover


def test_aa_false_positive_rate_is_alpha():
    rng = np.random.default_rng(35)
    k, _ = rejections(rng)
    assert within_binomial(k, RUNS, ALPHA), f"{k} of {RUNS} A/A rejected"


def test_aa_resampling_records_is_not_enough():
    """The same A/A data with each record its own cluster: the interval
    ignores the clusters' correlation and rejects several times too
    often. This is why the unit of assignment is resampled."""
    k, _ = rejections(np.random.default_rng(35), clustered=False, runs=100)
    assert k > 3 * ALPHA * 100, f"{k} of 100"


@pytest.mark.parametrize("q,poisson", [(0.5, False), (0.9, False),
                                       (0.5, True)])
def test_ab_effect_inside_interval_at_coverage(q, poisson):
    """A shift of 30 ms moves every quantile by 30 ms: the interval holds
    it in 95% of runs (within the binomial spread), and the test detects
    it far more often than alpha (the tail is noisier than the median)."""
    runs = 100
    reject, cover = rejections(np.random.default_rng(7), shift=30.0, q=q,
                               poisson=poisson, runs=runs)
    assert within_binomial(cover, runs, 1 - ALPHA), \
        f"coverage {cover}/{runs}"
    assert reject > 3 * ALPHA * runs


def test_methods_agree():
    rng = np.random.default_rng(3)
    (a, ca), (b, cb) = arm(rng, clusters=300), arm(rng, 5.0, clusters=300)
    out = [stats.difference(stats.Quantiles(a, ca, (0.5, 0.9)),
                            stats.Quantiles(b, cb, (0.5, 0.9)), ALPHA,
                            1000, 1, poisson) for poisson in (False, True)]
    assert [d["method"] for d in out] == ["percentile", "poisson"]
    np.testing.assert_allclose(out[0]["low"], out[1]["low"], rtol=0.1,
                               atol=0.5)
    np.testing.assert_allclose(out[0]["high"], out[1]["high"], rtol=0.1,
                               atol=0.5)


def test_weighted_quantile_is_numpys():
    rng = np.random.default_rng(5)
    v, c = arm(rng)
    s = stats.Quantiles(v, c, (0.01, 0.1, 0.5, 0.9, 0.99))
    np.testing.assert_array_equal(
        s(), np.quantile(v, s.qs, method="inverted_cdf"))
    np.testing.assert_array_equal(s(np.ones((2, CLUSTERS)))[1], s())
    # Drawing cluster 0 twice and dropping cluster 1 is their records so.
    w = np.ones((1, CLUSTERS))
    w[0, 0], w[0, 1] = 2, 0
    again = np.concatenate([v[c == 0], v[c != 1]])
    np.testing.assert_array_equal(
        s(w)[0], np.quantile(again, s.qs, method="inverted_cdf"))


def test_ratio_of_sums():
    r = stats.Ratio([1, 1, 2], [10, 10, 20], ["x", "x", "y"])
    assert r()[0] == pytest.approx(4 / 40)
    assert r(np.array([[0.0, 1.0]]))[0, 0] == pytest.approx(2 / 20)


def test_too_few_clusters_is_an_error():
    one = stats.Quantiles([1, 2, 3], [0, 0, 0], (0.5,))
    with pytest.raises(ValueError, match="two clusters per arm"):
        stats.difference(one, one)


def test_one_group_interval_at_coverage():
    """The population's median is 40 ms (the lognormals are symmetric in
    log around log 40): each 90% interval leaves it out on either side
    in 5% of the runs, within the binomial spread."""
    rng = np.random.default_rng(7)
    low = high = 0
    for _ in range(RUNS):
        values, labels = arm(rng)
        out = stats.interval(stats.Quantiles(values, labels, (0.5,)), 0.1,
                             RESAMPLES, rng)
        assert out["low"][0] <= out["estimate"][0] <= out["high"][0]
        low += out["low"][0] > 40
        high += out["high"][0] < 40
    assert within_binomial(low, RUNS, 0.05), low
    assert within_binomial(high, RUNS, 0.05), high
    with pytest.raises(ValueError, match="two clusters"):
        stats.interval(stats.Quantiles([1.0, 2.0], [0, 0], (0.5,)))


def test_sample_ratio_mismatch():
    assert stats.sample_ratio([5000, 5050], (0.5, 0.5)) > 0.1
    assert stats.sample_ratio([5000, 5400], (0.5, 0.5)) < 0.001
    assert stats.sample_ratio([900, 100], (0.9, 0.1)) > 0.1


def test_benjamini_hochberg():
    reject, adj = stats.benjamini_hochberg([0.001, 0.04, float("nan"),
                                            0.03, 0.5])
    assert reject.tolist() == [True, False, False, False, False]
    assert np.isnan(adj[2]) and adj[0] == pytest.approx(0.004)
