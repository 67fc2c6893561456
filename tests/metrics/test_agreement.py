"""Agreement statistics against scipy, pingouin and ANOVA formulas written here independently."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from medimg_bench.metrics.agreement import (
    AGREEMENT_STATS,
    Agreement,
    agreement_summary,
    bias,
    bland_altman,
    icc,
    mae,
    pearson,
    rmse,
    spearman,
)
from medimg_bench.registry import create_metric

# Shrout & Fleiss (1979), Table 2: 6 targets rated by 4 judges; published ICC(2,1)=.29, ICC(3,1)=.71
SHROUT_FLEISS = np.array(
    [[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]], dtype=float
)


def _icc_reference(x: np.ndarray) -> tuple[float, float]:
    """ICC(2,1), ICC(3,1) from sums of squares in long format (error SS by subtraction)."""
    n, k = x.shape
    values = x.reshape(-1)
    subject = np.repeat(np.arange(n), k)
    rater = np.tile(np.arange(k), n)
    grand = values.mean()
    ss_total = ((values - grand) ** 2).sum()
    ss_subject = sum(k * (values[subject == i].mean() - grand) ** 2 for i in range(n))
    ss_rater = sum(n * (values[rater == j].mean() - grand) ** 2 for j in range(k))
    ss_error = ss_total - ss_subject - ss_rater
    bms = ss_subject / (n - 1)
    jms = ss_rater / (k - 1)
    ems = ss_error / ((n - 1) * (k - 1))
    icc2 = (bms - ems) / (bms + (k - 1) * ems + k * (jms - ems) / n)
    icc3 = (bms - ems) / (bms + (k - 1) * ems)
    return icc2, icc3


def test_icc_shrout_fleiss_published_values():
    assert icc(SHROUT_FLEISS, form="2,1").item() == pytest.approx(0.29, abs=0.005)
    assert icc(SHROUT_FLEISS, form="3,1").item() == pytest.approx(0.71, abs=0.005)
    ref2, ref3 = _icc_reference(SHROUT_FLEISS)
    assert icc(SHROUT_FLEISS, form="2,1").item() == pytest.approx(ref2, abs=1e-12)
    assert icc(SHROUT_FLEISS, form="3,1").item() == pytest.approx(ref3, abs=1e-12)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 40), scale=st.floats(0.01, 10))
def test_icc_two_raters_matches_reference(seed, n, scale):
    rng = np.random.default_rng(seed)
    t = rng.normal(50, 10, n)
    p = t + rng.normal(1.0, scale, n)
    ref2, ref3 = _icc_reference(np.stack([t, p], 1))
    assert icc(p, t, form="2,1").item() == pytest.approx(ref2, abs=1e-10)
    assert icc(torch.from_numpy(p), torch.from_numpy(t), form="3,1").item() == pytest.approx(ref3, abs=1e-10)


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")
def test_icc_matches_pingouin():
    pg = pytest.importorskip("pingouin")
    rng = np.random.default_rng(3)
    x = rng.normal(size=(25, 3)) + rng.normal(size=(25, 1)) * 2
    import pandas as pd

    df = pd.DataFrame(
        {"subject": np.repeat(np.arange(25), 3), "rater": np.tile(np.arange(3), 25), "score": x.reshape(-1)}
    )
    res = pg.intraclass_corr(df, targets="subject", raters="rater", ratings="score")
    by_type = dict(zip(res["Type"], res["ICC"]))
    # pingouin names ICC(2,1) "ICC2" (older) or "ICC(A,1)" (McGraw & Wong, newer); ICC(3,1) "ICC(C,1)"
    icc2 = by_type.get("ICC2", by_type.get("ICC(A,1)"))
    icc3 = by_type.get("ICC3", by_type.get("ICC(C,1)"))
    assert icc(x, form="2,1").item() == pytest.approx(icc2, abs=1e-10)
    assert icc(x, form="3,1").item() == pytest.approx(icc3, abs=1e-10)


def test_errors_bias_and_bland_altman_hand_values():
    t = np.array([10.0, 20.0, 30.0, 40.0])
    p = np.array([12.0, 19.0, 33.0, 40.0])  # d = 2, -1, 3, 0
    assert mae(p, t).item() == pytest.approx(1.5)
    assert rmse(p, t).item() == pytest.approx(np.sqrt(14 / 4))
    assert bias(p, t).item() == pytest.approx(1.0)
    ba = bland_altman(p, t)
    sd = np.std([2, -1, 3, 0], ddof=1)
    assert (ba.bias, ba.sd, ba.n) == (pytest.approx(1.0), pytest.approx(sd), 4)
    assert ba.loa_low == pytest.approx(1 - 1.96 * sd) and ba.loa_high == pytest.approx(1 + 1.96 * sd)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(3, 50), ties=st.booleans())
def test_correlations_match_scipy(seed, n, ties):
    rng = np.random.default_rng(seed)
    t = rng.normal(size=n)
    p = t + rng.normal(size=n)
    if ties:
        t, p = np.round(t), np.round(p * 2) / 2
    if np.ptp(t) == 0 or np.ptp(p) == 0:
        return
    assert pearson(p, t).item() == pytest.approx(stats.pearsonr(p, t).statistic, abs=1e-10)
    assert spearman(p, t).item() == pytest.approx(stats.spearmanr(p, t).statistic, abs=1e-10)


def test_constant_input_gives_nan_with_warning():
    with pytest.warns(UserWarning, match="constant"):
        assert np.isnan(pearson([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]).item())
    with pytest.warns(UserWarning, match="constant"):
        assert np.isnan(spearman([1.0, 2.0, 3.0], [5.0, 5.0, 5.0]).item())
    with pytest.warns(UserWarning, match="all ratings are equal"):
        assert np.isnan(icc([2.0, 2.0], [2.0, 2.0]).item())


def test_invalid_inputs():
    with pytest.raises(ValueError, match="lengths differ"):
        mae([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match=r"pred has NaN or inf values at index \[1\]"):
        rmse([1.0, np.nan], [1.0, 2.0])
    with pytest.raises(ValueError, match="at least 2"):
        bland_altman([1.0], [1.0])
    with pytest.raises(ValueError, match="at least 2 subjects"):
        icc([1.0], [2.0])
    with pytest.raises(ValueError, match="form"):
        icc([1.0, 2.0], [2.0, 3.0], form="1,1")
    with pytest.raises(ValueError, match=r"\(N,\)"):
        mae(np.ones((3, 2)), np.ones((3, 2)))


def test_stateful_agreement():
    rng = np.random.default_rng(0)
    t = rng.normal(30, 5, 20)
    p = t + rng.normal(0.5, 1, 20)
    m = create_metric("agreement")
    assert isinstance(m, Agreement)
    m.update(torch.from_numpy(p[:7]), torch.from_numpy(t[:7]))
    m.update(p[7:], t[7:])
    out = m.compute()
    ref = agreement_summary(p, t)
    assert out.shape == (len(AGREEMENT_STATS),)
    assert out.tolist() == pytest.approx([ref[k] for k in AGREEMENT_STATS])
    assert m.class_names == list(AGREEMENT_STATS)
    ids, errs = m.values()
    assert len(ids) == 20 and torch.allclose(errs[:, 0], torch.from_numpy(np.abs(p - t)))
