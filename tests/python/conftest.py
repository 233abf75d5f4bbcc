"""Fixtures of the Python package's tests: the tether command beside the
module (TETHER_CLI, set by ctest), and small configs of each kind."""
import copy
import os
import shutil
import subprocess
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[2]


def tether_states(config, size, dt, steps):
    """tether's start and its final states after `steps` (cpu backend, the tolerance of bench/rattle_peers.py),
    which the peers of bench/ start from and must end at."""
    import sys
    import tether
    sys.path.insert(0, str(SOURCE / "bench"))
    import rattle_peers

    c = dict(config, backend="cpu", output={"every": max(steps, 1)})
    c["method"] = dict(c["method"], dt=dt, newton={"tolerance": rattle_peers.TOL,
                                                   "max_iterations": rattle_peers.MAX_IT})
    c["ensemble"] = dict(c["ensemble"], size=size)
    start = tether.run({**c, "method": {**c["method"], "steps": 0}}, progress=False)
    end = tether.run({**c, "method": {**c["method"], "steps": steps}}, progress=False)
    assert (end.status == 0).all()
    return start.q.values, start.p.values, end.q.values, end.p.values


@pytest.fixture(scope="session")
def cli():
    """Runs the tether command of the same build: cli("run", config_path, "--out", dir)."""
    binary = os.environ.get("TETHER_CLI") or shutil.which("tether")
    if binary is None:
        pytest.skip("the tether command is not found (set TETHER_CLI)")

    def call(*args):
        quiet = ["--quiet"] if args[0] in ("run", "shoot", "sample") else []
        done = subprocess.run([binary, *map(str, args), *quiet], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done

    return call


PENDULUM = {
    "system": {"name": "spherical_pendulum", "parameters": {"mass": 1.0, "length": 1.0, "gravity": 9.81}},
    "method": {"name": "rattle", "dt": 0.01, "steps": 200, "newton": {"tolerance": 1e-13}},
    "ensemble": {"size": 300, "seed": 7, "initial": {"sampler": "thermal", "temperature": 0.5}},
    "output": {"every": 20},
    "backend": "cpu",
}

SPHERE = {
    "system": {"name": "heisenberg"},
    "method": {"name": "gauss_legendre", "stages": 2, "steps": 40},
    "shoot": {
        "q0": [0, 0, 0],
        "time": 1.0,
        "targets": {"grid": {"min": [0.2, 0, -0.4], "max": [1.2, 0, 0.4], "count": [4, 1, 3]}},
        "guesses": {"toward": True, "random": {"count": 4, "scale": 2.0, "seed": 1}},
        "newton": {"tolerance": 1e-10, "max_iterations": 40},
    },
    "output": {"geodesics": {"every": 4, "targets": 3}},
    "backend": "cpu",
}

DOUBLE_PENDULUM_SAMPLE = {
    "system": {"name": "double_pendulum",
               "parameters": {"mass1": 1.0, "mass2": 1.0, "length1": 1.0, "length2": 1.0, "gravity": 9.81}},
    "method": {"name": "rattle", "dt": 0.05, "steps": 10},
    "sample": {"chains": 8, "draws": 50, "warmup": 50, "seed": 5, "temperature": 10.0},
    "backend": "cpu",
}


@pytest.fixture
def pendulum():
    return copy.deepcopy(PENDULUM)


@pytest.fixture
def sphere():
    return copy.deepcopy(SPHERE)


@pytest.fixture
def double_pendulum_sample():
    return copy.deepcopy(DOUBLE_PENDULUM_SAMPLE)
