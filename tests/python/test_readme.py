"""The README shows configs as they are: every JSON config it shows is the
file in configs/ that its caption names, key for key."""
import json
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_every_config_shown_is_the_file_it_names():
    readme = (ROOT / "README.md").read_text()
    blocks = list(re.finditer(r"`(configs/[\w.]+\.json)`[^\n]*:\n\n```json\n(.*?)```", readme, re.S))
    assert len(blocks) == len(re.findall(r"```json\n", readme)), "a JSON block without a caption naming its file"
    assert blocks, "the README shows no config"
    for m in blocks:
        path, shown = m.group(1), json.loads(m.group(2))
        assert shown == json.loads((ROOT / path).read_text()), f"the README's {path} is not the file"
