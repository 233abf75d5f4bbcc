"""tether: ensembles of constrained mechanical trajectories, geodesic shooting
and constrained Hamiltonian Monte Carlo, from Python.

    import tether
    ds = tether.run("configs/spherical_pendulum.json")        # xarray.Dataset, as results.nc
    shots = tether.shoot("configs/heisenberg_sphere.json")    # xarray.Dataset, as shots.csv
    idata = tether.sample("configs/double_pendulum_sample.json")  # arviz.InferenceData, as draws.nc

A config is what the `tether` command reads: a path to a JSON file, or the
same as a dict (NumPy arrays and scalars accepted anywhere a number or list
is). Explicit initial states may be given as arrays,
``{"ensemble": {"initial": {"states": {"q": Q, "p": P}}}}`` with Q and P of
shape (trajectories, dof). Bad input raises `ConfigError` (a ValueError)
whose message and `path` name the JSON path; nothing runs.

The engine runs without the GIL; Ctrl-C stops it within about a second and
raises KeyboardInterrupt. Results are NumPy arrays over the engine's own
buffers, not copies.
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings
from typing import Any, Callable, Union

import numpy as np
import xarray as xr

from . import _tether
from ._tether import ConfigError

__all__ = ["run", "shoot", "sample", "validate", "System", "systems", "methods", "backends", "ConfigError"]
__version__ = "0.1.0"


def __dir__() -> list[str]:
    """dir(tether) lists the API alone, not the modules it is written with (PEP 562)."""
    return sorted(__all__ + ["__version__"])


Config = Union[str, "os.PathLike[str]", dict]
Progress = Union[bool, Callable[[float, float], Any]]


class System:
    """A system declared by its expressions, as `system.declare` of a config (README, "Your own
    system"): each expression a string of the grammar or a SymPy expression, each name a string or
    a SymPy symbol. Give it where a config takes a system, ``{"system": System(...), ...}``, or as
    ``{"system": {"declare": System(...), "parameters": {...}}}`` to change parameters.

        x, y, z, g, L = sympy.symbols("x y z g L")
        pendulum = tether.System("pendulum", coordinates=[x, y, z], parameters={g: 9.81, L: 1.0},
                                 potential=g * z, constraints=[(x**2 + y**2 + z**2 - L**2) / (2 * L)])

    Holonomic: `coordinates` (or `dof`), `mass`, `potential`, `constraints`, `length_scale`,
    `energy_scale`; index-1 sub-Riemannian: `frame` (the vector fields X_i(q), each a list of
    components) and `potential`. `parameters` maps names to default values; `definitions` names
    intermediate expressions. Repeated structure is written once as in a config: `sizes` names
    whole numbers, a list item ``{"for": "i = 1..N", "each": ...}`` repeats, names take indices
    (``x[i]``, or SymPy's ``IndexedBase``) and ``sum(i = 1..N, ...)`` (or SymPy's ``Sum``) sums.
    The engine parses, checks and differentiates them, as it does a JSON config's: a mistake
    raises ConfigError naming the field and the position in its expression."""

    _FIELDS = ("sizes", "coordinates", "dof", "mass", "parameters", "definitions", "potential",
               "constraints", "frame", "length_scale", "energy_scale")

    def __init__(self, name: str, **fields: Any):
        unknown = set(fields) - set(self._FIELDS)
        if unknown:
            raise TypeError(f"System() got unknown fields {sorted(unknown)} (known: {', '.join(self._FIELDS)})")
        self.declaration = {"name": name}
        for key in self._FIELDS:
            if key in fields:
                self.declaration[key] = _declared(key, fields[key])

    def __repr__(self) -> str:
        return f"tether.System({json.dumps(self.declaration, default=str)})"


def _expression(value: Any) -> Any:
    """A SymPy expression as text of the grammar (powers with ^, constants as numbers, floats to the
    last bit); a string or a number as it is."""
    if isinstance(value, (str, int, float, np.generic)):
        return value
    import sympy
    from sympy.printing.str import StrPrinter

    class Grammar(StrPrinter):
        def _print_Pow(self, e, rational=False):
            base, exponent = e.as_base_exp()
            if exponent == sympy.S.Half:
                return f"sqrt({self._print(base)})"
            return f"({self._print(base)})^({self._print(exponent)})"

        def _print_Float(self, e):
            return repr(float(e))

        def _print_Rational(self, e):
            return f"({e.p}/{e.q})"

        def _print_NumberSymbol(self, e):  # pi, E, ...: their value
            return repr(float(e))

        def _print_Sum(self, e):  # SymPy's first limit is the innermost; the grammar's the outermost
            ranges = ", ".join(f"{self._print(i)} = {self._print(a)}..{self._print(b)}"
                               for i, a, b in reversed(e.limits))
            return f"sum({ranges}, {self._print(e.function)})"

        _print_Exp1 = _print_Pi = _print_NumberSymbol

    return Grammar().doprint(sympy.sympify(value))


def _name(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def _items(value: Any, one: Any) -> list:
    """A list of a System's field, each item converted by `one`, and the items of a repeated one,
    ``{"for": ..., "each": item or [items]}``."""
    def item(x):
        return [one(y) for y in x] if isinstance(x, list) else one(x)
    return [{k: (item(v) if k == "each" else v) for k, v in x.items()} if isinstance(x, dict) and "for" in x
            else one(x) for x in value]


def _declared(key: str, value: Any) -> Any:
    """One field of a System as JSON: names as strings, expressions as text of the grammar."""
    if key == "coordinates":
        return _items(value, _name)
    if key == "parameters":  # SymPy numbers as floats; anything else as given, for the engine to check
        return {_name(k): v if isinstance(v, (int, float, np.generic, str)) or not hasattr(v, "is_number")
                else float(v) for k, v in value.items()}
    if key == "definitions":
        return {_name(k): ({**v, "each": _expression(v["each"])} if isinstance(v, dict) and "each" in v
                           else _expression(v)) for k, v in value.items()}
    if key == "constraints":
        return _items(value, _expression)
    if key == "frame":
        return _items(value, lambda field: _items(field, _expression) if isinstance(field, list) else field)
    if key in ("potential", "length_scale", "energy_scale"):
        return _expression(value)
    return value  # sizes, dof, mass


def _error(path: str, message: str) -> ConfigError:
    error = ConfigError(f"config error at {path}: {message}")
    error.path = path
    return error


def _plain(value: Any, path: str) -> Any:
    """The config as JSON values; NumPy arrays and scalars become lists and numbers."""
    if isinstance(value, System):  # as system.declare: under "system" itself, wrapped in {"declare": ...}
        if path == "system":
            return {"declare": _plain(value.declaration, "system.declare")}
        return _plain(value.declaration, path)
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise _error(path or "the config", f"has a key {key!r} that is not a string")
            out[key] = _plain(item, f"{path}.{key}" if path else key)
        return out
    if isinstance(value, (list, tuple)):
        return [_plain(item, f"{path}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, np.ndarray):
        return _plain(value.tolist(), path)
    if isinstance(value, np.generic):
        return _plain(value.item(), path)
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _error(path, f"must be a finite number, got {value}")
        return value
    raise _error(path, f"must be a JSON value (number, string, bool, list, dict), got {type(value).__name__}")


def _config_text(config: Config) -> tuple[bytes, bytes, Any, Any]:
    """(JSON text, its source for messages, q0, p0): explicit states given as arrays travel beside the text."""
    if isinstance(config, (str, bytes, os.PathLike)):
        source = os.fsencode(config)
        return _tether.read_config_file(source), source, None, None  # read as the command reads it
    if not isinstance(config, dict):
        raise TypeError(f"config must be a dict or a path to a JSON file, not {type(config).__name__}")
    q0 = p0 = None
    initial = config.get("ensemble", {}).get("initial", {}) if isinstance(config.get("ensemble"), dict) else {}
    states = initial.get("states") if isinstance(initial, dict) else None
    if isinstance(states, dict):  # {"q": array, "p": array}: handed over as arrays, not as JSON text
        where = "ensemble.initial.states"
        if set(states) != {"q", "p"}:
            raise _error(where, 'given as a dict must have exactly the keys "q" and "p" (arrays of shape (n, dof))')
        arrays = []
        for key in ("q", "p"):
            a = np.asarray(states[key])
            if a.dtype.kind not in "biuf":
                raise _error(f"{where}.{key}", f"must be an array of real numbers, got dtype {a.dtype}")
            a = np.ascontiguousarray(a, dtype=np.float64)
            if a.ndim == 1:
                a = a[:, None]
            if a.ndim != 2:
                raise _error(f"{where}.{key}", f"must have shape (n, dof), got shape {a.shape}")
            arrays.append(a)
        q0, p0 = arrays
        config = {**config, "ensemble": {**config["ensemble"], "initial": {**initial, "states": "arrays"}}}
    return json.dumps(_plain(config, "")).encode(), b"the config dict", q0, p0


def _option(name: str, value: Any, most: int) -> int:
    """threads= or batch_size= as the command's options take them: None (the config's), or 1 to most."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= value <= most:
        raise _error(name, f"must be an integer from 1 to {most}, got {value!r}")
    return int(value)


def _progress(progress: Progress, unit: str):
    """A callback(done, total) and a close(): a tqdm bar (terminal or notebook) when tqdm is installed."""
    if callable(progress):
        return progress, lambda: None
    if not progress:
        return None, lambda: None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None, lambda: None
    bar = None

    def update(done: float, total: float) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=total, unit=unit, unit_scale=True, delay=1.0, leave=False)
        bar.update(done - bar.n)

    def close() -> None:
        if bar is not None:
            bar.close()

    return update, close


def _call(function, progress: Progress, unit: str, *args):
    callback, close = _progress(progress, unit)
    try:
        return function(*args, callback)
    finally:
        close()


def _flags(names: list[str]) -> dict:
    return {"flag_values": np.arange(len(names), dtype=np.uint8), "flag_meanings": " ".join(names)}


def run(config: Config, *, backend: str | None = None, threads: int | None = None, batch_size: int | None = None,
        progress: Progress = True) -> xr.Dataset:
    """Integrate an ensemble (`tether run`). Returns the Dataset `tether run` writes as results.nc:
    final q, p, status, failed_step and errors along `trajectory`, the timeseries along `step`
    (time a coordinate), tracked trajectories along (tracked, snapshot), summary.json as attributes."""
    text, source, q0, p0 = _config_text(config)
    r = _call(_tether.run, progress, "trajectory-steps", text, source, q0, p0, backend or "",
              _option("threads", threads, 1024), _option("batch_size", batch_size, 2**30))
    attrs = json.loads(r["attributes"])
    one = {"units": "1"}
    data = {
        "mean_relative_energy_error": ("step", r["mean_relative_energy_error"],
                                       {"long_name": "mean over live trajectories of |H - H0| / scale", **one}),
        "max_relative_energy_error": ("step", r["max_relative_energy_error"],
                                      {"long_name": "max over live trajectories of |H - H0| / scale", **one}),
        "max_constraint_violation": ("step", r["max_constraint_violation"],
                                     {"long_name": "max over live trajectories of the position constraint residual",
                                      **one}),
        "max_velocity_constraint_violation": (
            "step", r["max_velocity_constraint_violation"],
            {"long_name": "max over live trajectories of the velocity constraint residual", **one}),
        "live_trajectories": ("step", r["live_trajectories"], {"long_name": "trajectories not failed"}),
    }
    dof = r["dof"]
    coords = {
        "step": ("step", r["step"], {"long_name": "step number"}),
        "time": ("step", r["time"], {"long_name": "time (step x dt)", "units": "the system's time unit"}),
    }
    coords["coordinate"] = ("coordinate", np.arange(dof, dtype=np.int32),
                            {"long_name": "index of the generalized coordinate"})
    if "q" in r:
        n = r["q"].shape[0]
        coords["trajectory"] = ("trajectory", np.arange(n, dtype=np.int64), {"long_name": "trajectory id"})
        data["q"] = (("trajectory", "coordinate"), r["q"], {"long_name": "final generalized positions"})
        data["p"] = (("trajectory", "coordinate"), r["p"], {"long_name": "final momenta"})
        data["status"] = ("trajectory", r["status"],
                          {"long_name": "how the trajectory ended", **_flags(_tether.status_names)})
        data["failed_step"] = ("trajectory", r["failed_step"], {
            "long_name": "step at which the trajectory failed (-1: it did not; 0: its start could not be prepared)"})
        for name, meaning in (("energy_error", "relative energy error |H - H0| / scale at the last step"),
                              ("constraint_violation", "position constraint residual at the last step"),
                              ("velocity_constraint_violation", "velocity constraint residual at the last step")):
            data[name] = ("trajectory", r[name], {"long_name": meaning, **one})
    if "tracked" in r:
        dt = attrs["dt"]
        coords["tracked"] = ("tracked", r["tracked"],
                             {"long_name": "id of a trajectory followed (output.trajectories)"})
        coords["snapshot_step"] = ("snapshot", r["snapshot_step"], {"long_name": "step of the snapshot"})
        coords["snapshot_time"] = ("snapshot", r["snapshot_step"] * dt,
                                   {"long_name": "time of the snapshot", "units": "the system's time unit"})
        data["tracked_q"] = (("tracked", "snapshot", "coordinate"), r["tracked_q"],
                             {"long_name": "generalized positions of a followed trajectory"})
        data["tracked_p"] = (("tracked", "snapshot", "coordinate"), r["tracked_p"],
                             {"long_name": "momenta of a followed trajectory"})
        data["tracked_status"] = (("tracked", "snapshot"), r["tracked_status"],
                                  {"long_name": "status of a followed trajectory at the snapshot",
                                   **_flags(_tether.status_names)})
        for name, meaning in (("energy_error", "relative energy error |H - H0| / scale at the snapshot"),
                              ("constraint_violation", "position constraint residual at the snapshot"),
                              ("velocity_constraint_violation", "velocity constraint residual at the snapshot")):
            data["tracked_" + name] = (("tracked", "snapshot"), r["tracked_" + name], {"long_name": meaning, **one})
    return xr.Dataset(data, coords=coords, attrs=attrs)


def shoot(config: Config, *, backend: str | None = None, threads: int | None = None,
          progress: Progress = True) -> xr.Dataset:
    """Solve boundary-value problems (`tether shoot`): the Dataset of shots.csv's columns along `target`
    (q1, p0, pT along `coordinate`), status as CF flags, the solved geodesics along (geodesic, sample)
    when the config asks for them, summary.json as attributes."""
    text, source, _, _ = _config_text(config)
    r = _call(_tether.shoot, progress, "shots", text, source, backend or "", _option("threads", threads, 1024))
    summary = json.loads(r.pop("summary"))
    n = r["q1"].shape[1]
    coords = {"target": np.arange(r["q1"].shape[0], dtype=np.int64), "coordinate": np.arange(n, dtype=np.int32)}
    vectors = {"q1": "the target q(T)", "p0": "initial covector of the kept shot",
               "pT": "final covector p(T) (NaN where not converged)"}
    data = {name: (("target", "coordinate"), r.pop(name), {"long_name": meaning}) for name, meaning in vectors.items()}
    data["status"] = ("target", r.pop("status"), {"long_name": "how the kept shot ended",
                                                  **_flags(_tether.shot_status_names)})
    for name, meaning in (("converged", "the kept shot converged"),
                          ("conjugate_point", "a conjugate point by T (false where not converged)"),
                          ("near_cut_locus", summary.get("near_cut_locus_definition", "") +
                           " (false where not converged)")):
        data[name] = ("target", r.pop(name).astype(bool), {"long_name": meaning})
    data["second_length"] = ("target", r.pop("second_length"),
                             {"long_name": "length of the shortest other converged geodesic (inf where none)"})
    if "geodesic_q" in r:
        coords["geodesic"] = r.pop("geodesic_target")
        coords["geodesic_time"] = ("sample", r.pop("geodesic_time"))
        data["geodesic_q"] = (("geodesic", "sample", "coordinate"), r.pop("geodesic_q"),
                              {"long_name": "positions along the solved geodesic of the target"})
    for name, values in r.items():
        data[name] = ("target", values)
    attrs = {k: (v if isinstance(v, (str, int, float)) and not isinstance(v, bool) else json.dumps(v))
             for k, v in summary.items()}
    attrs["summary"] = json.dumps(summary)
    return xr.Dataset(data, coords=coords, attrs=attrs)


def sample(config: Config, *, algorithm: str | None = None, backend: str | None = None, threads: int | None = None,
           progress: Progress = True):
    """Run constrained HMC chains (`tether sample`). Returns an arviz.InferenceData with groups
    posterior (q, potential) and sample_stats (acceptance_rate, energy, step_size, n_steps, diverging,
    outcome, tree_depth for the dynamic algorithm, and inverse_metric, each chain's adapted Sigma, for
    sample.metric diag or dense), as draws.nc holds them; without ArviZ, a dict of
    those two xarray.Datasets. algorithm ("static" or "dynamic") replaces the config's sample.algorithm,
    and the keys only the other one takes are left out (for "dynamic", which chooses each trajectory's
    length: method.steps, sample.jitter.steps, sample.refresh_angle)."""
    text, source, _, _ = _config_text(config)
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())  # as draws.nc: when the run started
    r = _call(_tether.sample, progress, "chain-iterations", text, source, algorithm or "", backend or "",
              _option("threads", threads, 1024))
    summary = json.loads(r["summary"])
    for warning in summary["warnings"]:  # as the command prints them (R-hat and E-BFMI are ArviZ's to compute here)
        warnings.warn(warning, RuntimeWarning, stacklevel=2)
    chains, draws, dof = r["q"].shape
    coords = {"chain": np.arange(chains, dtype=np.int64), "draw": np.arange(draws, dtype=np.int64)}
    common = {"created_at": created, "inference_library": "tether"}
    posterior = xr.Dataset(
        {"q": (("chain", "draw", "q_dim"), r["q"]), "potential": (("chain", "draw"), r["potential"])},
        coords={**coords, "q_dim": np.arange(dof, dtype=np.int64)},
        attrs={**common, "system": summary["system"], "method": summary["method"],
               "system_parameters": r["system_parameters"], "temperature": r["temperature"],
               "summary": json.dumps(summary)})
    stats = {"acceptance_rate": (("chain", "draw"), r["acceptance_rate"]),
             "energy": (("chain", "draw"), r["energy"]),
             "step_size": (("chain", "draw"), r["step_size"]),
             "n_steps": (("chain", "draw"), r["n_steps"]),
             "diverging": (("chain", "draw"), r["diverging"].astype(bool)),
             "outcome": (("chain", "draw"), r["outcome"], _flags(_tether.hmc_outcome_names))}
    if "tree_depth" in r:
        stats["tree_depth"] = (("chain", "draw"), r["tree_depth"])
    if "inverse_metric" in r:  # each chain's Sigma: its diagonal, or the matrix
        sigma = r["inverse_metric"]
        axes = tuple(f"inverse_metric_dim_{a}" for a in range(sigma.ndim - 1))
        stats["inverse_metric"] = (("chain", *axes), sigma, {"long_name": _tether.inverse_metric_meaning})
        coords.update({axis: np.arange(dof, dtype=np.int64) for axis in axes})
    stats = xr.Dataset(stats, coords=coords, attrs=common)
    try:
        import arviz
    except ImportError:
        return {"posterior": posterior, "sample_stats": stats}
    return arviz.InferenceData(posterior=posterior, sample_stats=stats)


def validate(config: Config) -> str:
    """Check a config as `tether validate` does, by the rules of its command (run, shoot or sample, from its
    top-level keys), which it returns; raises ConfigError. A run's initial states given as arrays are checked
    as tether.run checks them."""
    text, source, q0, p0 = _config_text(config)
    return _tether.validate(text, source, q0, p0)


_catalog_cache: dict | None = None


def _catalog() -> dict:
    global _catalog_cache
    if _catalog_cache is None:
        _catalog_cache = json.loads(_tether.catalog())
    return _catalog_cache


def systems() -> list[dict]:
    """The registry's systems: name, family, dof, description, citation, parameter schema, methods it pairs with."""
    return _catalog()["systems"]


def methods() -> list[dict]:
    """The registry's methods: name, order, symmetric, symplectic, description, citation, parameter schema."""
    return _catalog()["methods"]


def backends() -> dict:
    """What this build can run on: cpu and reference always; cuda where built to run and a device is present."""
    return _tether.backends()
