"""The README says what is: every JSON config it shows is the file in configs/
that its caption names, key for key; every field of a command's summary.json,
column of its CSV files and variable of its netCDF files is named in the
section that documents it, and where the README lists a file's columns, the
file has exactly those; and the README's first examples, shrunk, run and write
what it documents (the newcomer's walk through them)."""
import json
import math
import pathlib
import re

import pytest
import xarray as xr

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_every_config_shown_is_the_file_it_names():
    readme = (ROOT / "README.md").read_text()
    blocks = list(re.finditer(r"`(configs/[\w.]+\.json)`[^\n]*:\n\n```json\n(.*?)```", readme, re.S))
    assert len(blocks) == len(re.findall(r"```json\n", readme)), "a JSON block without a caption naming its file"
    assert blocks, "the README shows no config"
    for m in blocks:
        path, shown = m.group(1), json.loads(m.group(2))
        assert shown == json.loads((ROOT / path).read_text()), f"the README's {path} is not the file"


def section(readme, title):
    start = readme.index(title)
    end = readme.find("\n## ", start + len(title))
    return readme[start:end if end > 0 else None]


def code_words(text):
    """The names the text writes as code: inside `backticks`, or in {a, b} lists of an object's keys."""
    words = set()
    for pattern in (r"`([^`]*)`", r"\{([^}]*)\}"):
        for m in re.finditer(pattern, text):
            words |= set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", m.group(1)))
    return words


@pytest.mark.parametrize("command, config, title", [
    ("run", "pendulum", "## Output"),
    ("shoot", "sphere", "## Shooting geodesics"),
    ("sample", "double_pendulum_sample", "## Sampling on constraint manifolds"),
])
def test_every_summary_field_is_documented(command, config, title, cli, request, tmp_path):
    """Each key of a command's summary.json, and of the objects in it, is named as code in the README
    section that documents that command's output."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(request.getfixturevalue(config)))
    cli(command, path, "--out", tmp_path / "out")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    keys = set(summary)
    for value in summary.values():
        if isinstance(value, dict):
            keys |= set(value)
    documented = code_words(section((ROOT / "README.md").read_text(), title))
    assert keys - documented == set(), f"summary.json of `tether {command}` has fields its README section does not name"


def column_name(name):
    """A column as the README writes it: the coordinate index dropped (q3 -> q, q1_2 -> q1_, pT_0 -> pT_)."""
    return re.sub(r"\d+$", "", name)


def columns(path):
    """The header of a CSV file, coordinate-indexed columns once each, in order."""
    names = []
    for name in map(column_name, path.read_text().split("\n", 1)[0].split(",")):
        if not names or names[-1] != name:
            names.append(name)
    return names


def documented_columns(text, file):
    """The column list the README gives right after `file`: its backticked names, in order."""
    m = re.search(r"`" + re.escape(file) + r"`(?:\s*\([^)]*\))?:\s*`([^`]*)`", text)
    assert m, f"the README gives no column list for {file}"
    return [column_name(re.match(r"[A-Za-z_][A-Za-z_0-9]*", item.strip()).group(0))
            for item in m.group(1).split(",")]


def netcdf_names(path, group=None):
    """Every variable, coordinate and dimension of a netCDF file (one group of it)."""
    with xr.open_dataset(path, group=group) as ds:
        return set(ds.variables) | set(ds.dims)


def test_every_output_file_of_run_has_the_columns_and_variables_documented(cli, pendulum, tmp_path):
    """final.csv, timeseries.csv and trajectories.csv have exactly the columns the README lists, in its order;
    every variable and dimension of results.nc is named in the Output section."""
    readme = section((ROOT / "README.md").read_text(), "## Output")
    pendulum["output"] = {"every": 50, "trajectories": {"ids": [0, 9], "every": 100}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(pendulum))
    cli("run", path, "--out", tmp_path / "csv")
    for file in ("final.csv", "timeseries.csv", "trajectories.csv"):
        assert columns(tmp_path / "csv" / file) == documented_columns(readme, file), file
    pendulum["output"]["format"] = "netcdf"
    path.write_text(json.dumps(pendulum))
    cli("run", path, "--out", tmp_path / "nc")
    names = netcdf_names(tmp_path / "nc" / "results.nc")
    assert names - code_words(readme) == set(), "results.nc has names the README's Output section does not give"


def test_every_output_file_of_shoot_and_sample_is_documented(cli, sphere, double_pendulum_sample, tmp_path):
    """geodesics.csv has the columns the README lists; every column of shots.csv and every variable of
    draws.nc's groups is named in its command's section."""
    readme = (ROOT / "README.md").read_text()
    shooting = section(readme, "## Shooting geodesics")
    path = tmp_path / "shoot.json"
    path.write_text(json.dumps(sphere))
    cli("shoot", path, "--out", tmp_path / "shoot")
    assert columns(tmp_path / "shoot" / "geodesics.csv") == documented_columns(shooting, "geodesics.csv")
    assert set(columns(tmp_path / "shoot" / "shots.csv")) - code_words(shooting) == set()
    sampling = section(readme, "## Sampling on constraint manifolds")
    double_pendulum_sample["sample"]["metric"] = "dense"  # with every variable a sample can have but tree_depth
    path = tmp_path / "sample.json"
    path.write_text(json.dumps(double_pendulum_sample))
    cli("sample", path, "--out", tmp_path / "sample")
    for group in ("posterior", "sample_stats"):
        names = netcdf_names(tmp_path / "sample" / "draws.nc", group)
        assert names - code_words(sampling) == set(), f"draws.nc's {group} has names the README does not give"


def shrunk(command, config):
    """A README example's config, small enough for the test suite: its sizes cut, nothing else changed."""
    config["ensemble"] = dict(config.get("ensemble", {}))
    if "size" in config["ensemble"]:
        config["ensemble"]["size"] = min(config["ensemble"]["size"], 8)
    config["ensemble"].pop("batch_size", None)
    if command == "run":
        config["method"]["steps"] = min(config["method"]["steps"], 20)
        config["output"] = {**config.get("output", {}), "every": 5}
    elif command == "shoot":
        targets = config["shoot"]["targets"]
        if "grid" in targets:
            targets["grid"]["count"] = [min(c, 2) for c in targets["grid"]["count"]]
        if "random" in targets:
            targets["random"]["count"] = 3
        if "random" in config["shoot"].get("guesses", {}):
            config["shoot"]["guesses"]["random"]["count"] = 2
        geodesics = config.get("output", {}).get("geodesics")
        if geodesics and "targets" in geodesics:  # a count of targets to keep: at most those left
            geodesics["targets"] = min(geodesics["targets"], math.prod(targets["grid"]["count"]) if "grid" in targets
                                       else len(targets.get("list", [])) or 3)
        config.pop("ensemble")
    else:
        config["sample"].update(chains=8, draws=30, warmup=30)
        config.pop("ensemble")
    return config


README_EXAMPLE = re.compile(r"^tether (run|shoot|sample) (configs/[\w.]+\.json)((?: --backend \w+)?) --out ", re.M)


def test_the_readmes_first_examples_run_and_write_what_it_documents(cli, tmp_path):
    """Each `tether run|shoot|sample configs/...` line of the README's first examples, shrunk, exits 0
    and writes summary.json (every field named in its command's section) and the files it documents."""
    readme = (ROOT / "README.md").read_text()
    first = readme[readme.index("```\ntether run"):]
    first = first[:first.index("```", 4)]
    examples = README_EXAMPLE.findall(first)
    assert len(examples) >= 6, "the README's first examples were not found"
    titles = {"run": "## Output", "shoot": "## Shooting geodesics", "sample": "## Sampling on constraint manifolds"}
    files = {"run": ["summary.json", "final.csv", "timeseries.csv"], "shoot": ["summary.json", "shots.csv"],
             "sample": ["summary.json", "draws.nc"]}
    for k, (command, path, backend) in enumerate(examples):
        config = shrunk(command, json.loads((ROOT / path).read_text()))
        file = tmp_path / f"{k}.json"
        file.write_text(json.dumps(config))
        out = tmp_path / f"out{k}"
        cli(command, file, "--out", out, *backend.split())
        for name in files[command]:
            assert (out / name).exists(), f"{path}: no {name}"
        summary = json.loads((out / "summary.json").read_text())
        keys = set(summary) | {k2 for v in summary.values() if isinstance(v, dict) for k2 in v}
        assert keys - code_words(section(readme, titles[command])) == set(), path
