"""The README says what is: every JSON config it shows is the file in configs/
that its caption names, key for key, and every field of a command's
summary.json is named in the section that documents it."""
import json
import pathlib
import re

import pytest

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
