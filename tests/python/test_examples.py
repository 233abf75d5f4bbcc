"""Each example under examples/ runs headless (small sizes, --quick) and
writes its figure."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")
EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.py"))


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.stem for e in EXAMPLES])
def test_example_draws_its_figure(example, tmp_path):
    figure = tmp_path / f"{example.stem}.png"
    done = subprocess.run([sys.executable, str(example), "--quick", "--out", str(figure)], capture_output=True,
                          text=True, env={**os.environ, "MPLBACKEND": "Agg"}, timeout=300)
    assert done.returncode == 0, done.stderr
    assert figure.stat().st_size > 10_000  # a PNG with something drawn in it
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_example_is_tested():
    assert {e.stem for e in EXAMPLES} >= {"energy_rattle_vs_composition", "heisenberg_sphere", "hmc_marginals",
                                          "throughput"}
