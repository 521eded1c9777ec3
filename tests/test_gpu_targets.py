"""bench/gpu_targets.py: the GPU targets' static estimates follow from the report's roofline rows (a
step is 2 x probes forwards of 1024 x 11 row-steps), and a missing or foreign report is refused with
one sentence and nothing written."""

import json

import pytest

from tests.helpers import assert_user_error
from tests.test_peer_benches import bench

REPORT = {"commit": "abc", "limits": {"h100_sxm_peaks": {"tf32_tensor": 4.95e14}}, "roofline": [
    {"name": "matmul 32768x1536x1536, TF32 (matmul_tf32_cuda)", "units_per_s": 2e7, "ops_per_unit": 4718592,
     "bound": "l2"},
    *({"name": f"LSTM {size} forward, batch 1024, 11 steps: k", "units_per_s": rate, "bound": "issue"}
      for size, rate in (("100k", 1.1264e8), ("1M", 1.1264e7), ("10M", 1.1264e6)))]}


def test_estimates_follow_the_roofline_rows(tmp_path):
    path = tmp_path / "report.json"
    path.write_text(json.dumps(REPORT))
    result = bench("gpu_targets", tmp_path, "--report", path)
    assert result.returncode == 0, result.stderr
    [written] = (tmp_path / "results").glob("gpu_targets-sm90-*.json")
    rows = json.loads(written.read_text())["rows"]
    assert rows[0]["tflops"] == pytest.approx(94.4, abs=0.1)  # 2e7 rows/s x 2 x 1536 x 1536
    steps = {r["target"]: r["seconds_per_step"] for r in rows[1:]}
    assert steps["Table 1 10M cdrge96 series"] == pytest.approx(1.92)  # 192 forwards of 0.01 s
    assert steps["Table 1 1M cdrge512 series"] == pytest.approx(1.024)
    assert rows[-2]["speedup_bound"] == pytest.approx(7.8 / 1.92, abs=0.05)


@pytest.mark.parametrize("content, message", [(None, "is not a static report"), ("{}", "is not a static report"),
                                              ('{"roofline": [], "limits": {}}', "is not a static report"),
                                              ('{"roofline": [], "limits": {"h100_sxm_peaks": {"tf32_tensor": 1}}}',
                                               "no single roofline row")])
def test_a_missing_or_foreign_report_is_refused(tmp_path, content, message):
    path = tmp_path / "report.json"
    if content is not None:
        path.write_text(content)
    assert_user_error(bench("gpu_targets", tmp_path, "--report", path), message)
    assert not (tmp_path / "results").exists()
