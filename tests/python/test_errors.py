"""Bad input raises tether.ConfigError naming the JSON path; Ctrl-C and a
failing progress callback stop a run; the GIL is free while it integrates."""
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import tether


def config_error(config, **kwargs):
    with pytest.raises(tether.ConfigError) as caught:
        tether.run(config, progress=False, **kwargs)
    return caught.value


def test_config_error_names_the_path(pendulum, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pendulum["method"]["dt"] = -0.1
    e = config_error(pendulum)
    assert isinstance(e, ValueError)
    assert e.path == "method.dt"
    assert str(e).startswith("config error at method.dt:")
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize("change, path", [
    (lambda c: c["system"].update(name="pendulm"), "system.name"),
    (lambda c: c["ensemble"].update(size=0), "ensemble.size"),
    (lambda c: c["method"].update(steps=np.int64(-3)), "method.steps"),
    (lambda c: c["system"]["parameters"].update(mass=float("nan")), "system.parameters.mass"),
    (lambda c: c["system"]["parameters"].update(mass=object()), "system.parameters.mass"),
    (lambda c: c.update(backend="gpu"), "backend"),
])
def test_bad_values(pendulum, change, path):
    change(pendulum)
    assert config_error(pendulum).path == path


def test_bad_state_arrays(pendulum):
    q = np.tile([0.0, 0.0, -1.0], (4, 1))
    p = np.zeros((4, 3))
    states = pendulum["ensemble"]["initial"] = {"states": {"q": q, "p": p}}
    del pendulum["ensemble"]["size"]
    bad = q.copy()
    bad[2, 1] = np.nan
    states["states"] = {"q": bad, "p": p}
    e = config_error(pendulum)
    assert e.path == "ensemble.initial.states.q[2][1]" and "got nan" in str(e)
    states["states"] = {"q": q[:, :2], "p": p}
    assert config_error(pendulum).path.startswith("ensemble.initial.states")
    states["states"] = {"q": q, "p": p[:3]}
    assert config_error(pendulum).path == "ensemble.initial.states"
    states["states"] = {"q": q, "v": p}
    assert config_error(pendulum).path == "ensemble.initial.states"
    states["states"] = {"q": q * 2, "p": p}  # off the sphere
    assert "manifold" in str(config_error(pendulum)) or "constraint" in str(config_error(pendulum))
    states["states"] = {"q": q, "p": p}
    assert tether.run(pendulum, progress=False).sizes["trajectory"] == 4


def test_missing_file_and_wrong_command(tmp_path, sphere):
    e = config_error(tmp_path / "nowhere.json")
    assert e.path == str(tmp_path / "nowhere.json")
    with pytest.raises(tether.ConfigError):
        tether.run(sphere, progress=False)  # a shooting config is not a run's
    with pytest.raises(TypeError):
        tether.run(42)


def test_validate(pendulum, sphere, double_pendulum_sample):
    for good in (pendulum, sphere, double_pendulum_sample):
        tether.validate(good)
    sphere["shoot"]["q0"] = [0, 0]
    with pytest.raises(tether.ConfigError) as caught:
        tether.validate(sphere)
    assert caught.value.path.startswith("shoot.")


def test_memory_that_cannot_fit_is_refused(pendulum):
    pendulum["ensemble"]["size"] = 2**34  # 2^34 final states: about 1 TiB
    assert config_error(pendulum).path == "ensemble.size"


def long_run(pendulum):
    pendulum["method"]["steps"] = 10**9
    pendulum["output"] = {"every": 10**8}
    return pendulum


def test_ctrl_c_stops_a_run(pendulum):
    """SIGINT, as a terminal's Ctrl-C sends it, to a process deep in a long run: KeyboardInterrupt within seconds."""
    script = f"import tether; tether.run({long_run(pendulum)!r}, progress=False)"
    child = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True)
    time.sleep(2.0)  # imported and integrating
    assert child.poll() is None
    start = time.monotonic()
    child.send_signal(signal.SIGINT)
    try:
        _, stderr = child.communicate(timeout=10)  # the engine looks between launches of about a second
    except subprocess.TimeoutExpired:
        child.kill()
        pytest.fail("the run went on after SIGINT")
    assert "KeyboardInterrupt" in stderr
    assert time.monotonic() - start < 10


def test_a_failing_progress_callback_stops_a_run(pendulum):
    def fail(done, total):
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        tether.run(long_run(pendulum), progress=fail)


def test_gil_is_released_while_integrating(pendulum):
    """Another Python thread runs while the engine integrates: it counts freely."""
    pendulum["method"]["steps"] = 4000
    pendulum["ensemble"]["size"] = 4000
    done = threading.Event()
    count = 0

    def work():
        tether.run(pendulum, threads=1, progress=False)
        done.set()

    worker = threading.Thread(target=work)
    worker.start()
    start = time.monotonic()
    time.sleep(0.05)  # the run has begun
    while not done.is_set():
        count += 1
    seconds = time.monotonic() - start
    worker.join()
    assert seconds > 0.2, "the run was too short to tell"
    assert count > 10000 * seconds  # a held GIL would leave this thread a few switch intervals (5 ms) at most
