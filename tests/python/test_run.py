"""tether.run: the same numbers and layout as the command's results.nc,
explicit states as arrays, the registry, and the buffers handed over."""
import json
import sys

import numpy as np
import pytest
import xarray as xr

import tether
from conftest import SOURCE


def without_timings(ds):
    """The Dataset less what differs between two runs of one config: its timings (in the summary)."""
    ds = ds.copy()
    summary = json.loads(ds.attrs.pop("summary"))
    for key in ("wall_seconds", "integration_seconds", "trajectory_steps_per_second"):
        summary.pop(key)
    return ds, summary


def command_results(cli, config, tmp_path):
    """What `tether run` writes for `config` as results.nc, less timings: (Dataset, summary, config path)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    cli("run", path, "--out", tmp_path / "out")
    with xr.open_dataset(tmp_path / "out" / "results.nc") as f:
        return (*without_timings(f.load()), path)


def test_run_is_results_nc(cli, pendulum, tmp_path):
    pendulum["output"] = {"every": 20, "format": "netcdf", "trajectories": {"ids": [0, 17, 299], "every": 50}}
    expected, expected_summary, path = command_results(cli, pendulum, tmp_path)
    actual, actual_summary = without_timings(tether.run(pendulum, progress=False))
    xr.testing.assert_identical(actual, expected)
    assert actual_summary == expected_summary
    assert set(actual.data_vars) >= {"q", "p", "status", "tracked_q", "max_relative_energy_error",
                                     "tracked_energy_error", "tracked_constraint_violation"}
    # One followed trajectory's energy error over its snapshots, along their time.
    energy = actual.tracked_energy_error.sel(tracked=17)
    assert energy.dims == ("snapshot",) and "snapshot_time" in energy.coords
    assert energy[0] == 0 and (energy[1:] > 0).all() and (energy < 1e-2).all()
    # ... and from the file path, the same numbers.
    from_path, _ = without_timings(tether.run(path, progress=False))
    xr.testing.assert_identical(from_path, actual)


def shortened(name, **output):
    """configs/NAME.json, a few steps of a few trajectories, with `output` as given."""
    config = json.loads((SOURCE / "configs" / f"{name}.json").read_text())
    config["method"]["steps"] = min(config["method"]["steps"], 40)
    config["ensemble"]["size"] = min(config["ensemble"]["size"], 100)
    config["ensemble"].pop("batch_size", None)
    config["output"] = {"every": 8, "format": "netcdf", **output}
    config["backend"] = "cpu"
    return config


@pytest.mark.parametrize("name, output", [
    ("chain16", {"final_states": False}),  # no final states: the coordinate dimension from the system
    ("four_bar", {"trajectories": {"ids": [3], "every": 7}}),
    ("heisenberg", {}),  # nonholonomic
    ("rigid_body_lie_rattle", {}),
])
def test_every_family_is_results_nc(cli, name, output, tmp_path):
    config = shortened(name, **output)
    expected, _, _ = command_results(cli, config, tmp_path)
    actual, _ = without_timings(tether.run(config, progress=False))
    xr.testing.assert_identical(actual, expected)


def test_a_declared_system_runs_as_the_command_runs_it(cli, tmp_path, monkeypatch, capfd):
    """configs/water.json, a system declared in the config: the module loads the library the command
    compiled for the pair (one build, one cache entry) and gives what the command writes."""
    water = json.loads((SOURCE / "configs" / "water.json").read_text())
    water["method"]["steps"] = 40
    water["ensemble"]["size"] = 20
    water["output"] = {"every": 10, "format": "netcdf"}
    water["backend"] = "cpu"
    cache = tmp_path / "cache"
    monkeypatch.setenv("TETHER_CACHE_DIR", str(cache))  # the command's and the module's, empty
    expected, expected_summary, _ = command_results(cli, water, tmp_path)
    compiled = sorted(p.name for p in (cache / "declared").iterdir() if p.is_dir())
    assert len(compiled) == 1, compiled
    capfd.readouterr()
    actual, actual_summary = without_timings(tether.run(water, progress=False))
    assert "compiling" not in capfd.readouterr().err, "the module compiled the pair the command had compiled"
    assert sorted(p.name for p in (cache / "declared").iterdir() if p.is_dir()) == compiled
    xr.testing.assert_identical(actual, expected)
    assert actual_summary == expected_summary
    assert actual.attrs["system"] == "water"
    assert float(actual["max_constraint_violation"].max()) < 1e-10


def sympy_water():
    """configs/water.json's molecule written with SymPy."""
    sympy = pytest.importorskip("sympy")
    o, h1, h2 = (sympy.symbols(f"{a}x {a}y {a}z") for a in ("o", "h1", "h2"))
    field, charge, oh, hh, dipole_z = sympy.symbols("field charge oh hh dipole_z")

    def bond(a, b, length):
        return (sum((u - v) ** 2 for u, v in zip(a, b)) - length**2) / (2 * length)

    return tether.System(
        "water", coordinates=[*o, *h1, *h2], mass=[15.9994] * 3 + [1.008] * 6,
        parameters={field: 50, charge: 0.417, oh: 0.9572, hh: 1.5139},
        definitions={dipole_z: charge * (h1[2] - o[2]) + charge * (h2[2] - o[2])},
        potential=-field * dipole_z, constraints=[bond(h1, o, oh), bond(h2, o, oh), bond(h1, h2, hh)],
        length_scale=oh, energy_scale=2 * field * charge * oh)


def test_a_system_written_with_sympy_is_the_declared_one(capfd):
    """tether.System with SymPy expressions declares the molecule of configs/water.json: the same
    expressions reach the engine, so the same compiled pair (loaded, not compiled again) and the
    same numbers; parameters are changed as for a declaration."""
    water = json.loads((SOURCE / "configs" / "water.json").read_text())
    water.update(method={"name": "rattle", "dt": 0.002, "steps": 30}, backend="cpu", output={"every": 10})
    water["ensemble"]["size"] = 16
    expected = tether.run(water, progress=False)
    capfd.readouterr()
    declared = sympy_water()
    actual = tether.run({**water, "system": declared}, progress=False)
    assert "compiling" not in capfd.readouterr().err
    for v in ("q", "p", "status"):
        np.testing.assert_array_equal(actual[v], expected[v])
    stronger = tether.run({**water, "system": {"declare": declared, "parameters": {"field": 80}}}, progress=False)
    assert stronger.attrs["system"] == "water" and not np.array_equal(stronger.q, expected.q)


def test_sympy_sums_and_indexed_names_print_as_the_grammar_repeats():
    """SymPy's IndexedBase and Sum (its first limit innermost) become the grammar's x[i] and
    sum(i = ..., j = ..., ...) (outermost first); repeated items pass through; and the engine reads
    the result as a config's, refusing an index past the last at its field."""
    sympy = pytest.importorskip("sympy")
    N, k = sympy.symbols("N k")
    i, j = sympy.symbols("i j", integer=True)
    x, d = sympy.IndexedBase("x"), sympy.IndexedBase("d")
    springs = dict(sizes={"N": 4}, coordinates=[{"for": "i = 1..N", "each": [x[i]]}], parameters={k: 2.0},
                   definitions={d[i]: {"for": "i = 1..N-1", "each": x[i + 1] - x[i]}},
                   potential=sympy.Sum(d[i] ** 2, (i, 1, N - 1)) + sympy.Sum(x[i] * x[j], (j, i + 1, N), (i, 1, N)),
                   constraints=[x[1]])
    assert tether.System("springs", **springs).declaration == {
        "name": "springs", "sizes": {"N": 4}, "coordinates": [{"for": "i = 1..N", "each": ["x[i]"]}],
        "parameters": {"k": 2.0}, "definitions": {"d[i]": {"for": "i = 1..N-1", "each": "x[i + 1] - x[i]"}},
        "potential": "sum(i = 1..N - 1, (d[i])^(2)) + sum(i = 1..N, j = i + 1..N, x[i]*x[j])",
        "constraints": ["x[1]"]}
    springs["constraints"] = [x[N + 1]]
    with pytest.raises(tether.ConfigError, match=r"names x\[5\] at position 1, which is not declared") as e:
        tether.validate({"system": tether.System("springs", **springs), "method": {"name": "rattle", "dt": 0.01, "steps": 1},
                         "ensemble": {"size": 1, "initial": {"sampler": "around", "q": [0] * 4, "p": [0] * 4}}})
    assert e.value.path == "system.declare.constraints[0]"


def test_a_sympy_expression_outside_the_grammar_is_refused_at_its_field():
    sympy = pytest.importorskip("sympy")
    x, y = sympy.symbols("x y")
    bad = tether.System("bad", coordinates=[x, y], potential=sympy.Abs(x), constraints=[x**2 + y**2 - 1])
    with pytest.raises(tether.ConfigError, match=r"system\.declare\.potential.*Abs") as e:
        tether.validate({"system": bad, "method": {"name": "rattle", "dt": 0.01, "steps": 1},
                         "ensemble": {"size": 1, "initial": {"sampler": "around", "q": [1, 0], "p": [0, 0]}}})
    assert e.value.path == "system.declare.potential"


def test_a_declared_chain_is_the_built_in_chain():
    """The chain of configs/chain16.json with 8 beads, declared as configs/bead_chain.json declares
    it for any size (bench/declared_peers.py): the same trajectories as the built-in chain to
    roundoff, through the declaration written out, its reverse-mode gradient and its tridiagonal
    Gram matrix solved in lanes."""
    sys.path.insert(0, str(SOURCE / "bench"))
    from declared_peers import declared_chain, zigzag
    parameters = json.loads((SOURCE / "configs" / "chain16.json").read_text())["system"]["parameters"]
    config = {"method": {"name": "rattle", "dt": 0.002, "steps": 200, "newton": {"tolerance": 1e-13}},
              "ensemble": {"size": 40, "seed": 3, "initial": {
                  "sampler": "around", "q": zigzag(8, parameters), "p": [0.0] * 24,
                  "position_spread": 0.02, "momentum_spread": 1.0}},
              "output": {"every": 200}, "backend": "cpu"}
    declared = tether.run({**config, "system": declared_chain(8, parameters)}, progress=False)
    built_in = tether.run({**config, "system": {"name": "chain", "parameters": dict(parameters, beads=8)}},
                          progress=False)
    assert (declared.status == 0).all() and (built_in.status == 0).all()
    for v in ("q", "p"):
        assert float(abs(declared[v] - built_in[v]).max()) < 1e-11, v
    assert float(declared.max_constraint_violation.max()) < 1e-12


def test_run_keeps_the_constraints(pendulum):
    ds = tether.run(pendulum, progress=False)
    length = pendulum["system"]["parameters"]["length"]
    assert np.all(ds.status.values == 0)
    assert np.max(np.abs(np.linalg.norm(ds.q.values, axis=1) - length)) < 1e-12
    assert np.max(np.abs(np.sum(ds.q.values * ds.p.values, axis=1))) < 1e-11  # q . M^-1 p = 0 on T*N
    assert float(ds.max_relative_energy_error.max()) < 1e-3
    assert ds.time.values[-1] == pytest.approx(200 * 0.01)
    assert ds.attrs["trajectories"] == 300 and ds.attrs["system"] == "spherical_pendulum"


def test_states_as_arrays_continue_a_run_exactly(pendulum):
    """A run of 2n steps equals a run of n steps continued from its final states, handed over as arrays."""
    first = tether.run(pendulum, progress=False)
    whole = dict(pendulum, method=dict(pendulum["method"], steps=400))
    both = tether.run(whole, progress=False)
    rest = dict(pendulum, ensemble={"initial": {"states": {"q": first.q.values, "p": first.p.values}}})
    second = tether.run(rest, progress=False)
    np.testing.assert_array_equal(second.q.values, both.q.values)
    np.testing.assert_array_equal(second.p.values, both.p.values)
    # The arrays are the config's list of states in another form.
    listed = [{"q": q.tolist(), "p": p.tolist()} for q, p in zip(first.q.values[:5], first.p.values[:5])]
    as_list = tether.run(dict(pendulum, ensemble={"initial": {"states": listed}}), progress=False)
    as_arrays = tether.run(dict(pendulum, ensemble={"initial": {"states": {"q": first.q.values[:5],
                                                                            "p": first.p.values[:5]}}}),
                           progress=False)
    np.testing.assert_array_equal(as_list.q.values, as_arrays.q.values)


def test_results_are_the_engines_buffers(pendulum, monkeypatch):
    """No copy: the Dataset's arrays are the ones the engine filled (NumPy views of its buffers)."""
    handed = {}
    engine_run = tether._tether.run

    def spy(*args):
        r = engine_run(*args)
        handed.update({k: v.__array_interface__["data"][0] for k, v in r.items() if isinstance(v, np.ndarray)})
        return r

    monkeypatch.setattr(tether._tether, "run", spy)
    ds = tether.run(pendulum, progress=False)
    for name in ("q", "p", "status", "energy_error", "max_relative_energy_error"):
        assert ds[name].values.__array_interface__["data"][0] == handed[name], name
    assert not ds.q.values.flags.owndata


def test_threads_and_batches_change_no_bit(pendulum):
    one = tether.run(pendulum, threads=1, progress=False)
    two = tether.run(pendulum, threads=2, batch_size=64, progress=False)
    np.testing.assert_array_equal(one.q.values, two.q.values)
    np.testing.assert_array_equal(one.max_relative_energy_error.values, two.max_relative_energy_error.values)


def test_reference_backend_agrees(pendulum):
    pendulum["ensemble"]["size"] = 20
    cpu = tether.run(pendulum, progress=False)
    reference = tether.run(pendulum, backend="reference", progress=False)
    assert reference.attrs["backend"] == "reference"
    np.testing.assert_allclose(reference.q.values, cpu.q.values, rtol=0, atol=1e-10)


def test_registry_is_the_commands(cli):
    listed = json.loads(cli("list", "--json").stdout)
    assert tether.systems() == listed["systems"]
    assert tether.methods() == listed["methods"]
    assert "four_bar" in {s["name"] for s in tether.systems()}
    assert set(tether.backends()) == {"cuda_built", "cuda_devices"}


def test_progress_reaches_the_total(pendulum):
    seen = []
    tether.run(pendulum, progress=lambda done, total: seen.append((done, total)))
    assert seen and seen[-1][0] == seen[-1][1] == 300 * 200
    assert all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))
