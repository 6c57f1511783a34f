"""Shards on the CUDA simulator: the kernels' block offset on the GPU path gives the CPU twin's unsharded figures."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.kernels.child import REPO, child_env
from tests.kernels.job_input import run_raw

# Two blocks each, the second nearly empty: the smallest jobs whose second shard starts past block 0.
JOBS = {
    "european_option": {"paths": 16_385, "antithetic": False, "seed": 4},
    "portfolio_var": {"paths": 4_097, "exposures": [1e6, -5e5], "volatilities": [0.2, 0.3], "confidence": 0.9,
                      "seed": 4},
}
# ``NUMBA_ENABLE_CUDASIM`` must be set before numba.cuda is imported: the shards run in a child process.
# The child prepares the simulator as test_cudasim.py's does (cudasim_runner.prepare: no warm-ups, object-mode
# functions as Python): 5.0 CPU-s without, 3.6 with, the same figures.
RUNNER = """
import json, sys, warnings
warnings.simplefilter("ignore")
from tests.kernels.cudasim_runner import prepare
prepare()
from kernels.shards import merge, run_shard
from tests.kernels.job_input import typed
out = {}
for job, raw in json.loads(sys.argv[1]).items():
    kind, params = typed(job, raw)
    shards = [run_shard(kind, params, i, 2, device="gpu") for i in range(2)]
    out[job] = merge(kind, params, shards, elapsed_s=1.0).summary
print(json.dumps(out))
"""


@pytest.mark.slow  # a child process interprets the kernels: no server, no port
def test_shards_on_the_simulated_gpu_merge_into_the_cpu_result() -> None:
    env = child_env(simulated=True)
    done = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(JOBS)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    simulated = json.loads(done.stdout)
    for job, params in JOBS.items():
        cpu = run_raw(job, params, device="cpu").summary
        assert simulated[job]["shards"] == 2 and simulated[job]["device"] == "cudasim"
        for key in ("estimate", "std_error"):
            # the simulator and the twin share the math; float32 results agree as in test_cudasim
            assert simulated[job][key] == pytest.approx(cpu[key], rel=2e-5, abs=1e-6), (job, key)
