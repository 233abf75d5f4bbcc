"""tools/same_numbers.py, which scripts/gpu-check.sh trusts to say whether cuda's outputs are cpu's:
it passes equal files, and fails a difference over its tolerance, a NaN on one side, other text,
other rows, and a column that is not there."""
import subprocess
import sys

from conftest import SOURCE

TOOL = SOURCE / "tools" / "same_numbers.py"


def compare(tmp_path, a, b, tol="1e-12", *columns):
    (tmp_path / "a.csv").write_text(a)
    (tmp_path / "b.csv").write_text(b)
    args = [sys.executable, str(TOOL), tol, str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), *columns]
    return subprocess.run(args, capture_output=True, text=True).returncode


HEAD = "id,q0,status,iterations\n"


def test_equal_numbers_pass_and_a_difference_over_the_tolerance_fails(tmp_path):
    a = HEAD + "0,0.5,ok,3\n1,-2.25,ok,4\n"
    assert compare(tmp_path, a, a) == 0
    near = HEAD + "0,0.5000000000001,ok,3\n1,-2.25,ok,4\n"  # 1e-13 apart
    assert compare(tmp_path, a, near) == 0
    far = HEAD + "0,0.50000000001,ok,3\n1,-2.25,ok,4\n"  # 1e-11 apart
    assert compare(tmp_path, a, far) == 1
    assert compare(tmp_path, a, far, "1e-10") == 0


def test_a_nan_other_text_or_other_rows_fail(tmp_path):
    a = HEAD + "0,0.5,ok,3\n"
    assert compare(tmp_path, a, HEAD + "0,nan,ok,3\n") == 1
    assert compare(tmp_path, HEAD + "0,nan,ok,3\n", HEAD + "0,nan,ok,3\n") == 0
    assert compare(tmp_path, a, HEAD + "0,0.5,failed,3\n") == 1
    assert compare(tmp_path, a, a + "1,0.5,ok,3\n") == 1


def test_only_the_columns_named_are_compared(tmp_path):
    a = HEAD + "0,0.5,ok,3\n"
    b = HEAD + "0,0.5,ok,4\n"  # one more Newton iteration: not what is compared
    assert compare(tmp_path, a, b) == 1
    assert compare(tmp_path, a, b, "1e-12", "id,q0,status") == 0
    assert compare(tmp_path, a, b, "1e-12", "id,p0") == 1  # no such column
