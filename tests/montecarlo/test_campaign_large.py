"""A large campaign summarized from its store in bounded memory (slow: ~1 min).

Oracle: the statistics equal `summarize(load_campaign(...))` bitwise, and the summarizing
process's peak RSS grows by less than half the output's size (it never holds the campaign)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from jaxsim import montecarlo as mc


pytest.importorskip("zarr", reason="campaigns need the optional extra jaxsim-spacecraft[campaign]")

N = 400_000
MAX_BYTES = 2**23  # 8 MiB blocks: one sample time of the 3 components of all members is 9.6 MB
# The output `w` holds N x 61 x 3 float64 = 586 MB. Summarizing takes about 4 blocks (the block,
# the percentiles' sorted copy, the std's deviations) plus ~70 MiB of reader buffers (measured
# 137 MiB at N = 400 000). Half the output (279 MiB) leaves 2x margin on both sides: above the
# measured growth, below what holding the output alone takes.
RSS_BOUND = N * 61 * 3 * 8 // 2


@pytest.mark.slow
def test_large_campaign_summarized_in_bounded_memory(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    d = str(tmp_path / "big")
    cmd = [sys.executable, "-m", "tests._campaign_large_worker"]
    subprocess.run(cmd + ["write", d, str(N)], env=env, check=True, timeout=600)
    out = subprocess.run(cmd + ["summarize", d, str(MAX_BYTES)], env=env, check=True,
                         timeout=600, capture_output=True, text=True)  # fmt: skip
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["after"] - seen["before"] < RSS_BOUND, seen
    ref = mc.summarize(mc.load_campaign(d), (1.0, 50.0, 99.0))["w"]
    assert seen["n_ok"] == ref.n_ok == N
    np.testing.assert_array_equal(seen["std"], ref.std)
    np.testing.assert_array_equal(seen["p99"], ref.percentiles[99.0])
