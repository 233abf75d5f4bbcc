"""The numba.cuda peers of bench/rattle_peers.py, run in Numba's CUDA simulator (no GPU needed): on
small ensembles from tether's own starts they end where tether ends (as the CPU Numba peer,
compiled from the same step functions, does in the benchmark), so that a GPU run of the benchmark
compares kernels that compute the same thing."""
import json
import os
import sys

os.environ["NUMBA_ENABLE_CUDASIM"] = "1"  # before Numba is imported

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from conftest import SOURCE, tether_states  # noqa: E402

sys.path.insert(0, str(SOURCE / "bench"))
import rattle_peers  # noqa: E402


@pytest.mark.parametrize("constants", [True, False])  # parameters compiled in, or kernel arguments
def test_the_pendulum_kernel_ends_where_tether_does(constants):
    config = json.loads((SOURCE / "configs" / "spherical_pendulum.json").read_text())
    prm = config["system"]["parameters"]
    q0, p0, q1, p1 = tether_states(config, 16, 0.01, 20)
    _, pendulum, *_ = rattle_peers.numba_cuda_kernels(constants)
    run = pendulum(*rattle_peers.peer_arguments("spherical_pendulum", prm, 0.01, False))
    Q, P = q0.copy(), p0.copy()
    ok, seconds = run(Q, P, 20)
    assert ok.all() and seconds >= 0
    np.testing.assert_allclose(Q, q1, rtol=0, atol=1e-12)
    np.testing.assert_allclose(P, p1, rtol=0, atol=1e-11)


@pytest.mark.parametrize("constants", [True, False])
@pytest.mark.parametrize("fsal", [False, True])
def test_the_chain_kernel_ends_where_tether_does(fsal, constants):
    config = rattle_peers.chain_config(8)
    prm = config["system"]["parameters"]
    q0, p0, q1, p1 = tether_states(config, 4, 0.002, 10)
    args = rattle_peers.peer_arguments("chain8", prm, 0.002, fsal)
    _, _, chain, *_ = rattle_peers.numba_cuda_kernels(constants)
    Q, P = q0.reshape(4, 8, 3).copy(), p0.reshape(4, 8, 3).copy()
    ok, _ = chain(8, *args)(Q, P, 10)
    assert ok.all()
    np.testing.assert_allclose(Q.reshape(4, 24), q1, rtol=0, atol=1e-11)
    np.testing.assert_allclose(P.reshape(4, 24), p1, rtol=0, atol=1e-9)
