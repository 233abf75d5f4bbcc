"""tether.shoot against shots.csv and the closed-form Heisenberg distance;
tether.sample against draws.nc, as ArviZ InferenceData or plain xarray."""
import csv
import json
import math
import sys

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


def test_shoot_is_shots_csv(cli, sphere, tmp_path):
    path = tmp_path / "sphere.json"
    path.write_text(json.dumps(sphere))
    cli("shoot", path, "--out", tmp_path / "out")
    with open(tmp_path / "out" / "shots.csv") as f:
        rows = list(csv.DictReader(f))
    ds = tether.shoot(sphere, progress=False)
    assert ds.sizes["target"] == len(rows) == 12
    names = tether._tether.shot_status_names
    for k, row in enumerate(rows):
        assert names[int(ds.status[k])] == row["status"]
        for c in range(3):
            assert float(row[f"q1_{c}"]) == ds.q1.values[k, c]
            assert float(row[f"p0_{c}"]) == ds.p0.values[k, c]
        assert float(row["length"]) == ds.length.values[k]
        assert int(row["iterations"]) == ds.iterations.values[k]
    assert ds.geodesic_q.shape == (3, 11, 3)  # 40 steps sampled every 4: 11 points
    np.testing.assert_allclose(ds.geodesic_q.values[:, -1, :], ds.q1.values[:3], atol=1e-9)  # ends at its target
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


def test_sample_is_draws_nc(cli, double_pendulum_sample, tmp_path):
    arviz = pytest.importorskip("arviz")
    path = tmp_path / "sample.json"
    path.write_text(json.dumps(double_pendulum_sample))
    cli("sample", path, "--out", tmp_path / "out")
    idata = tether.sample(double_pendulum_sample, progress=False)
    assert isinstance(idata, arviz.InferenceData)
    for group, names in (("posterior", ["q", "potential"]),
                         ("sample_stats", ["acceptance_rate", "energy", "step_size", "n_steps", "diverging",
                                           "outcome"])):
        with xr.open_dataset(tmp_path / "out" / "draws.nc", group=group) as f:
            expected = f.load()
        for name in names:
            np.testing.assert_array_equal(idata[group][name].values, expected[name].values, err_msg=name)
            assert idata[group][name].dims == expected[name].dims, name
    assert idata.posterior.attrs["temperature"] == 10.0
    summary = arviz.summary(idata, var_names=["potential"])
    assert np.isfinite(summary["r_hat"].values).all()


def test_sample_without_arviz(double_pendulum_sample, monkeypatch):
    monkeypatch.setitem(sys.modules, "arviz", None)  # import arviz fails
    groups = tether.sample(double_pendulum_sample, progress=False)
    assert set(groups) == {"posterior", "sample_stats"}
    assert groups["posterior"].q.shape == (8, 50, 4)
    assert groups["sample_stats"].diverging.dtype == bool


def test_sample_refuses_a_bad_config(double_pendulum_sample):
    double_pendulum_sample["sample"]["chains"] = -1
    with pytest.raises(tether.ConfigError) as caught:
        tether.sample(double_pendulum_sample, progress=False)
    assert caught.value.path == "sample.chains"
