"""Bad input raises tether.ConfigError naming the JSON path; Ctrl-C and a
failing progress callback stop a run; the GIL is free while it integrates."""
import json
import os
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


def test_bad_state_arrays(pendulum, sphere):
    """Each refused by tether.run, and by tether.validate at the same path."""
    def config_error(config):
        with pytest.raises(tether.ConfigError) as caught:
            tether.run(config, progress=False)
        with pytest.raises(tether.ConfigError) as checked:
            tether.validate(config)
        assert checked.value.path == caught.value.path, str(checked.value)
        return caught.value

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
    assert config_error(pendulum).path == "ensemble.initial.states.q[0]"
    states["states"] = {"q": q + 0j, "p": p}  # not silently made real
    assert config_error(pendulum).path == "ensemble.initial.states.q"
    states["states"] = {"q": q.astype(str), "p": p}
    assert config_error(pendulum).path == "ensemble.initial.states.q"
    states["states"] = {"q": q, "p": p[:3]}
    assert config_error(pendulum).path == "ensemble.initial.states"
    states["states"] = {"q": q, "v": p}
    assert config_error(pendulum).path == "ensemble.initial.states"
    off = q.copy()
    off[1] *= 2  # off the sphere
    states["states"] = {"q": off, "p": p}
    e = config_error(pendulum)
    assert e.path == "ensemble.initial.states.q[1]" and "off the constraint manifold" in str(e)
    states["states"] = {"q": q, "p": p}
    assert tether.validate(pendulum) == "run"
    assert tether.run(pendulum, progress=False).sizes["trajectory"] == 4
    sphere["ensemble"] = {"initial": {"states": {"q": q, "p": p}}}  # arrays are for runs only
    with pytest.raises(tether.ConfigError) as caught:
        tether.validate(sphere)
    assert caught.value.path == "ensemble.initial.states" and "tether.run" in str(caught.value)


def test_bad_files(tmp_path, pendulum):
    """Files are read as the command reads them: every refusal a ConfigError naming the file."""
    missing = tmp_path / "nowhere.json"
    assert config_error(missing).path == str(missing)
    assert "folder" in str(config_error(tmp_path))
    assert "256 MiB" in str(config_error("/dev/zero"))
    latin1 = tmp_path / "latin1.json"
    latin1.write_bytes(b'{"system": {"name": "caf\xe9"}}')
    assert isinstance(config_error(latin1), tether.ConfigError)
    unclosed = tmp_path / "unclosed.json"
    unclosed.write_text("{")
    with pytest.raises(tether.ConfigError):
        tether.validate(unclosed)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200000)
    with pytest.raises(tether.ConfigError) as caught:
        tether.validate(deep)
    assert "deeper" in str(caught.value)
    odd_name = os.fsdecode(bytes(tmp_path / "x") + b"\xff.json")  # a name that is not UTF-8
    with open(odd_name, "w") as f:
        f.write(json.dumps(pendulum))
    assert tether.run(odd_name, progress=False).sizes["trajectory"] == 300


def test_echoed_text_cut_inside_a_character(pendulum):
    pendulum["system"]["name"] = "a" + "\u00e9" * 40  # two bytes each: the cut at 57 bytes falls inside one
    e = config_error(pendulum)
    assert e.path == "system.name" and "\ufffd" not in str(e)


@pytest.mark.parametrize("option, value", [("threads", 0), ("threads", 10**5), ("threads", -5), ("threads", 1.5),
                                           ("batch_size", -1), ("batch_size", 2**31), ("batch_size", True)])
def test_bad_options(pendulum, option, value):
    assert config_error(pendulum, **{option: value}).path == option


def test_missing_file_and_wrong_command(tmp_path, sphere):
    with pytest.raises(tether.ConfigError):
        tether.run(sphere, progress=False)  # a shooting config is not a run's
    with pytest.raises(TypeError):
        tether.run(42)


def test_validate(pendulum, sphere, double_pendulum_sample):
    for command, good in (("run", pendulum), ("shoot", sphere), ("sample", double_pendulum_sample)):
        assert tether.validate(good) == command
    sphere["shoot"]["q0"] = [0, 0]
    with pytest.raises(tether.ConfigError) as caught:
        tether.validate(sphere)
    assert caught.value.path.startswith("shoot.")


def test_memory_that_cannot_fit_is_refused(pendulum):
    pendulum["ensemble"]["size"] = 2**34  # 2^34 final states: about 1 TiB
    assert config_error(pendulum).path == "ensemble.size"
    pendulum["ensemble"]["size"] = 2**20
    pendulum["output"] = {"format": "netcdf", "trajectories": {"ids": list(range(10**5)), "every": 1}}
    pendulum["method"]["steps"] = 10**6  # 10^11 snapshots, held in memory whatever the format
    assert config_error(pendulum).path == "output.trajectories"
    pendulum["output"] = {"final_states": False}
    pendulum["ensemble"]["size"] = 2**31  # batches of 2^30 would take 96 GiB: the override is checked as the config
    assert config_error(pendulum, batch_size=2**30).path == "ensemble.batch_size"


def long_run(pendulum):
    pendulum["method"]["steps"] = 10**9
    pendulum["output"] = {"every": 10**8}
    return pendulum


def long_shoot(sphere):
    sphere["shoot"]["targets"] = {"grid": {"min": [0.1, 0, -0.4], "max": [1.2, 0, 0.4], "count": [300, 1, 300]}}
    sphere["method"] = {"name": "gauss_legendre", "stages": 3, "steps": 400}
    del sphere["output"]
    return sphere


def long_sample(double_pendulum_sample):
    double_pendulum_sample["sample"].update(chains=64, draws=10, warmup=10**8)
    return double_pendulum_sample


@pytest.mark.parametrize("command, make", [("run", "long_run"), ("shoot", "long_shoot"),
                                           ("sample", "long_sample")])
def test_ctrl_c_stops_a_long_call(command, make, pendulum, sphere, double_pendulum_sample):
    """SIGINT, as a terminal's Ctrl-C sends it, to a process deep in a long call: KeyboardInterrupt within seconds."""
    config = {"long_run": lambda: long_run(pendulum), "long_shoot": lambda: long_shoot(sphere),
              "long_sample": lambda: long_sample(double_pendulum_sample)}[make]()
    # The child says when the engine first reports progress: SIGINT then lands in the engine, not in import.
    script = (f"import sys, tether\n"
              f"def started(done, total, said=[]):\n"
              f"    said or (print('started', flush=True), said.append(1))\n"
              f"tether.{command}({config!r}, progress=started)\n")
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "started", child.stderr.read()
    assert child.poll() is None
    start = time.monotonic()
    child.send_signal(signal.SIGINT)
    try:
        _, stderr = child.communicate(timeout=10)  # the engine looks between launches of about a second
    except subprocess.TimeoutExpired:
        child.kill()
        pytest.fail("the call went on after SIGINT")
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


def test_the_namespace_is_the_api(pendulum, double_pendulum_sample):
    """dir(tether) shows what __all__ promises, not json, np or typing's names;
    validate is part of it and says which command a config is for."""
    assert set(dir(tether)) == set(tether.__all__) | {"__version__"}
    for name in ["run", "shoot", "sample", "validate", "systems", "methods", "backends"]:
        assert getattr(tether, name).__doc__, name
    assert tether.validate(pendulum) == "run"
    assert tether.validate(double_pendulum_sample) == "sample"
