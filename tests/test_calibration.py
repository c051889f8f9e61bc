"""The calibration of the cost model: the fit is recomputed from engine/calibration.csv, and the
shipped constants and the tables in docs/engine.md must match it."""

import os
from dataclasses import replace

import numpy as np
import pytest
from conftest import ROOT

from goodbench.engine import costmodel
from goodbench.engine.virtual import calibration as cal


@pytest.fixture(scope="module")
def fitted():
    return cal.calibrate()


def test_shipped_constants_are_the_fit(fitted):
    f, _ = fitted
    assert costmodel.STEP_FIXED_S == pytest.approx(f.fixed_s, abs=5e-7)
    assert costmodel.PER_SEQ_S == pytest.approx(f.per_seq_s, abs=5e-8)
    assert costmodel.ETA_MEM_HBM == f.eta_m


def test_documented_tables_match_the_data(fitted):
    with open(os.path.join(ROOT, "docs", "engine.md"), encoding="utf-8") as fh:
        doc = fh.read()
    begin, end = "<!-- calibration:begin -->\n", "\n<!-- calibration:end -->"
    assert begin in doc and end in doc
    block = doc.split(begin, 1)[1].split(end, 1)[0]
    assert block == cal.markdown(*fitted), (
        "docs/engine.md drifted: paste `python -m goodbench.engine.virtual.calibration`"
    )


def test_every_point_is_sourced():
    for p in cal.load_points():
        assert p.source.startswith("https://") and p.value > 0 and p.use in ("fit", "check")


def test_metrics_are_affine_in_the_overheads():
    """The fit's premise: a replay with the fitted constants equals a + b*t_fixed + c*t_seq."""
    p = next(q for q in cal.load_points() if q.workload == "closed" and q.concurrency > 1)
    a, b, c = cal.affine(p, 0.78)
    cost = replace(costmodel.CostModel.for_config(cal.point_config(p)), fixed_s=0.9e-3, per_seq_s=2e-5)
    assert cal.replay(p, cost) == pytest.approx(a + b * 0.9e-3 + c * 2e-5, rel=1e-6)


def test_leave_one_out_is_out_of_sample():
    """A hand-made table: two points that agree and one that does not; the outlier's LOO error is its
    error under the other two's fit, not its (smaller) in-sample error."""
    pts = [
        cal.Point(str(k), "h100-sxm", "llama-3.1-8b", 1, "bf16", "closed", 1, 8, 8, 1, "tpot_p50_ms", v, "https://x")
        for k, v in enumerate((6.0, 7.0, 9.0))
    ]
    # metric = 5 + 1000 * t_fixed (ms): the first two imply t_fixed = 1 and 2 ms
    table = {0.78: np.array([[5.0, 1000.0, 0.0]] * 3)}
    f, rows = cal.error_table(pts, table)
    x_all = (1 / 6 + 1 / 7 + 1 / 9) / (1 / 36 + 1 / 49 + 1 / 81)  # relative least squares on all three
    assert f.fixed_s == pytest.approx((x_all - 5) / 1000)
    loo = rows[2]["loo"]  # refit on 6 and 7 ms: minimises (x/6-1)^2 + (x/7-1)^2 over x = 5 + 1000 t
    x = (1 / 6 + 1 / 7) / (1 / 36 + 1 / 49)
    assert loo == pytest.approx(x)
    assert abs(rows[2]["loo_error"]) > abs(rows[2]["error"])


def test_bad_rows_are_refused(tmp_path):
    path = tmp_path / "c.csv"
    with open(cal.DATA, encoding="utf-8") as fh:
        head = fh.readline()
    path.write_text(head + "x,h100-sxm,llama-3.1-8b,1,bf16,vllm,,,batch,1,1,2,1,speed,1,fit,https://x,\n")
    with pytest.raises(ValueError, match="unknown metric"):
        cal.load_points(str(path))
