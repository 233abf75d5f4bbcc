"""tether.shoot against shots.csv and the closed-form Heisenberg distance;
tether.sample against draws.nc, as ArviZ InferenceData or plain xarray."""
import copy
import csv
import datetime
import json
import math
import sys
import warnings

import numpy as np
import pytest
import xarray as xr

import tether


def heisenberg_length(x, y, z):
    """The sub-Riemannian distance from 0 in the Heisenberg group (z = the signed area, 2 z the lift)."""
    r = math.hypot(x, y)
    if abs(z) < 1e-15:
        return r
    # r^2 = (theta / sin theta)^2 ... solved on theta in (0, pi) for |z| / r^2 (Monti's formula, A z = area).
    target = abs(z) / (r * r)
    lo, hi = 1e-12, math.pi - 1e-12
    mu = lambda t: (t - math.sin(t) * math.cos(t)) / (4 * math.sin(t) ** 2)  # signed area over r^2 at angle t
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mu(mid) < target else (lo, mid)
    t = (lo + hi) / 2
    return r * t / math.sin(t)


def cell(text):
    """A shots.csv cell as the Dataset holds it: empty is NaN (not converged, or none)."""
    return float(text) if text != "" else math.nan


def test_shoot_is_shots_csv(cli, sphere, tmp_path):
    sphere["shoot"]["targets"]["grid"]["min"][0] = 0.0  # x = 0, z != 0: on the cut locus (a circle of geodesics)
    path = tmp_path / "sphere.json"
    path.write_text(json.dumps(sphere))
    cli("shoot", path, "--out", tmp_path / "out")
    with open(tmp_path / "out" / "shots.csv") as f:
        rows = list(csv.DictReader(f))
    ds = tether.shoot(sphere, progress=False)
    assert ds.sizes["target"] == len(rows) == 12
    names = tether._tether.shot_status_names
    columns = set(rows[0])
    for k, row in enumerate(rows):
        seen = {"target", "status"}
        assert int(row["target"]) == ds.target.values[k]
        assert names[int(ds.status[k])] == row["status"]
        for vector in ("q1", "p0", "pT"):
            for c in range(3):
                np.testing.assert_equal(cell(row[f"{vector}_{c}"]), ds[vector].values[k, c])
                seen.add(f"{vector}_{c}")
        for name in ("residual", "energy", "length", "error_estimate", "conjugate_time", "second_length",
                     "iterations", "attempts", "converged_attempts", "round"):
            value = ds[name].values[k]
            np.testing.assert_equal(cell(row[name]), value if np.isfinite(value) else math.nan, err_msg=name)
            seen.add(name)
        for flag in ("converged", "conjugate_point", "near_cut_locus"):  # empty where not converged
            assert (row[flag] == "1") == bool(ds[flag].values[k]), flag
            seen.add(flag)
        assert seen == columns, columns - seen
    assert 0 < int(ds.converged.sum()) and bool(ds.near_cut_locus.any())
    # geodesics.csv: the first 3 targets' geodesics, sampled every 4 of 40 steps
    with open(tmp_path / "out" / "geodesics.csv") as f:
        points = list(csv.DictReader(f))
    assert ds.geodesic_q.shape == (len(ds.geodesic), 11, 3) and len(points) == len(ds.geodesic) * 11
    for j, point in enumerate(points):
        g, k = divmod(j, 11)
        assert int(point["target"]) == ds.geodesic.values[g]
        assert float(point["t"]) == ds.geodesic_time.values[k]
        assert [float(point[f"q{c}"]) for c in range(3)] == list(ds.geodesic_q.values[g, k])
    ends = ds.geodesic_q.values[:, -1, :]
    np.testing.assert_allclose(ends, ds.q1.values[ds.geodesic.values], atol=1e-9)  # each ends at its target
    assert ds.attrs["system"] == "heisenberg"


def test_shoot_finds_the_heisenberg_distance(sphere):
    sphere["method"] = {"name": "gauss_legendre", "stages": 3, "steps": 80}
    sphere["shoot"]["newton"]["tolerance"] = 1e-12
    ds = tether.shoot(sphere, progress=False)
    assert np.all(ds.status.values == 0)
    for k in range(ds.sizes["target"]):
        x, y, z = ds.q1.values[k]
        exact = heisenberg_length(x, y, z)
        assert ds.length.values[k] == pytest.approx(exact, rel=1e-9), (x, y, z)


@pytest.mark.parametrize("algorithm", ["static", "dynamic"])
def test_sample_is_draws_nc(cli, double_pendulum_sample, tmp_path, algorithm):
    arviz = pytest.importorskip("arviz")
    stats = ["acceptance_rate", "energy", "step_size", "n_steps", "diverging", "outcome", "inverse_metric"]
    # A metric adapted in warm-up: Sigma's diagonal (static), the whole matrix (dynamic).
    double_pendulum_sample["sample"]["metric"] = "diag" if algorithm == "static" else "dense"
    written = copy.deepcopy(double_pendulum_sample)  # a static config: method.steps is L
    if algorithm == "dynamic":  # the config algorithm="dynamic" makes of it
        written["sample"]["algorithm"] = "dynamic"
        del written["method"]["steps"]
        stats.append("tree_depth")
    path = tmp_path / "sample.json"
    path.write_text(json.dumps(written))
    cli("sample", path, "--out", tmp_path / "out")
    idata = tether.sample(double_pendulum_sample, algorithm=algorithm, progress=False)
    assert isinstance(idata, arviz.InferenceData)
    for group, names in (("posterior", ["q", "potential"]), ("sample_stats", stats)):
        with xr.open_dataset(tmp_path / "out" / "draws.nc", group=group) as f:
            expected = f.load()
        # Every attribute draws.nc gives the group, with the same value but for the time it was made.
        assert set(expected.attrs) <= set(idata[group].attrs), group
        for key, value in expected.attrs.items():
            if key == "created_at":
                made = [datetime.datetime.strptime(v, "%Y-%m-%dT%H:%M:%SZ") for v in (value, idata[group].attrs[key])]
                assert abs((made[1] - made[0]).total_seconds()) < 600, (group, value, idata[group].attrs[key])
            else:
                assert idata[group].attrs[key] == value, (group, key)
        for name in names:
            np.testing.assert_array_equal(idata[group][name].values, expected[name].values, err_msg=name)
            assert idata[group][name].dims == expected[name].dims, name
    assert idata.posterior.attrs["temperature"] == 10.0
    sigma = idata.sample_stats.inverse_metric.values
    assert sigma.shape == ((8, 4) if algorithm == "static" else (8, 4, 4))
    if algorithm == "dynamic":
        np.testing.assert_array_equal(sigma, np.swapaxes(sigma, 1, 2))
        assert (np.linalg.eigvalsh(sigma) > 0).all()
    else:
        assert (sigma > 0).all()
    summary = arviz.summary(idata, var_names=["potential"])
    assert np.isfinite(summary["r_hat"].values).all()
    # The command's E-BFMI is ArviZ's, chain by chain, from draws.nc's energies.
    diagnostics = json.loads((tmp_path / "out" / "summary.json").read_text())["diagnostics"]
    bfmi = arviz.bfmi(arviz.from_netcdf(tmp_path / "out" / "draws.nc"))[: diagnostics["chains_used"]]
    assert diagnostics["min_energy_bfmi"] == pytest.approx(bfmi.min(), rel=1e-12)
    assert diagnostics["low_energy_bfmi_chains"] == int((bfmi < 0.3).sum())
    if algorithm == "dynamic":
        depth, steps = idata.sample_stats.tree_depth.values, idata.sample_stats.n_steps.values
        assert depth.max() >= 2 and (steps >= 2 ** depth - 1).all() and (steps < 2 ** (depth + 1)).all()
        import matplotlib
        matplotlib.use("Agg")
        arviz.plot_trace(idata, var_names=["potential"])  # ArviZ's own views work on it unchanged


def test_sample_warns_as_the_command_does():
    """summary.json's warnings as Python warnings: a dynamic trajectory cut at max_depth is one; a
    sample without any issues none."""
    config = {"system": {"name": "spherical_pendulum"}, "method": {"name": "rattle", "dt": 0.05},
              "sample": {"algorithm": "dynamic", "chains": 8, "draws": 100, "warmup": 100, "seed": 3,
                         "temperature": 2}, "backend": "cpu"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tether.sample(config, progress=False)
    config["sample"]["max_depth"] = 2
    with pytest.warns(RuntimeWarning, match="cut at sample.max_depth 2 before they turned back") as caught:
        idata = tether.sample(config, progress=False)
    assert [str(w.message) for w in caught] == json.loads(idata.posterior.attrs["summary"])["warnings"]


def test_sample_without_arviz(double_pendulum_sample, monkeypatch):
    monkeypatch.setitem(sys.modules, "arviz", None)  # import arviz fails
    groups = tether.sample(double_pendulum_sample, progress=False)
    assert set(groups) == {"posterior", "sample_stats"}
    assert groups["posterior"].q.shape == (8, 50, 4)
    assert groups["sample_stats"].diverging.dtype == bool


def test_sample_refuses_a_bad_config(double_pendulum_sample, tmp_path):
    double_pendulum_sample["sample"]["chains"] = -1
    with pytest.raises(tether.ConfigError) as caught:
        tether.sample(double_pendulum_sample, progress=False)
    assert caught.value.path == "sample.chains"
    # algorithm= names itself; a file it rewrites keeps the file's own checks and name in messages.
    with pytest.raises(tether.ConfigError) as caught:
        tether.sample(double_pendulum_sample, algorithm="nuts", progress=False)
    assert caught.value.path == "algorithm" and "dynamic" in str(caught.value)
    for text, words in (('{"sample": {"chains": 1}, "sample": {"chains": 2}}', "appears twice"),
                        ('{"sample": {', "broken.json: is not valid JSON")):
        path = tmp_path / "broken.json"
        path.write_text(text)
        with pytest.raises(tether.ConfigError) as caught:
            tether.sample(path, algorithm="dynamic", progress=False)
        assert words in str(caught.value)


def declared_sphere(kappa):
    """The unit sphere with V = -kappa z, declared in the config: exp(-V) is von Mises-Fisher about e_z."""
    return {
        "system": {"declare": {"name": "my_sphere", "coordinates": ["x", "y", "z"], "parameters": {"kappa": kappa},
                               "potential": "-kappa * z", "constraints": ["(x^2 + y^2 + z^2 - 1) / 2"]}},
        "method": {"name": "rattle", "dt": 0.3, "steps": 8},
        "sample": {"chains": 64, "draws": 400, "warmup": 200, "seed": 5, "temperature": 1.0,
                   "initial": {"sampler": "around", "q": [1, 0, 0], "p": [0, 0, 0], "position_spread": 0.5}},
        "backend": "cpu",
    }


@pytest.mark.parametrize("kappa, sign", [(2.0, 1), (-2.0, -1)])
def test_sample_on_a_declared_manifold_has_the_exact_mean(kappa, sign):
    """On the sphere, the height z of exp(kappa z) has density ~ exp(kappa z) on [-1, 1] (Archimedes), so
    E z = coth(kappa) - 1/kappa. The draws' mean is within 5 standard errors (by ArviZ's bulk ESS) of it;
    the two signs of kappa show the test tells a potential from its opposite (0.54 apart)."""
    arviz = pytest.importorskip("arviz")
    idata = tether.sample(declared_sphere(kappa), progress=False)
    z = idata.posterior["q"].values[..., 2]
    exact = 1 / np.tanh(kappa) - 1 / kappa
    ess = float(arviz.ess(z, method="bulk"))
    assert ess > 1000
    assert abs(z.mean() - exact) < 5 * z.std() / np.sqrt(ess), (z.mean(), exact, ess)
    assert sign * z.mean() > 0.5


def test_sample_on_a_declared_manifold_with_an_adapted_metric():
    """The exact mean of the test above with the dynamic sampler and a dense metric adapted in warm-up,
    on a system compiled at run time: its log-determinant term keeps the target on the sphere's measure."""
    arviz = pytest.importorskip("arviz")
    config = declared_sphere(2.0)
    config["sample"].update({"algorithm": "dynamic", "metric": "dense"})
    del config["method"]["steps"]
    idata = tether.sample(config, progress=False)
    summary = json.loads(idata.posterior.attrs["summary"])
    assert summary["metric"] == "dense" and summary["metric_fallbacks"] == 0
    z = idata.posterior["q"].values[..., 2]
    exact = 1 / np.tanh(2.0) - 1 / 2.0
    ess = float(arviz.ess(z, method="bulk"))
    assert ess > 1000
    assert abs(z.mean() - exact) < 5 * z.std() / np.sqrt(ess), (z.mean(), exact, ess)
