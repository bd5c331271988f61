"""The suite never skips (tests/conftest.py): each way a test or a file can be skipped fails
the run instead, with the reason, so a missing dependency cannot leave a green run."""
import os
import subprocess
import sys
import textwrap

from conftest import ROOT

SKIPPING = textwrap.dedent('''
    import pytest

    def test_skip():
        pytest.skip("no server here")

    @pytest.mark.skipif(True, reason="not on this machine")
    def test_skipif():
        pass

    def test_importorskip():
        pytest.importorskip("a_module_no_one_installed")

    @pytest.mark.xfail(reason="known")
    def test_xfail():
        assert False

    @pytest.mark.parametrize("x", [])
    def test_empty_parameters(x):
        pass

    def test_done():
        pass
''')


def test_every_kind_of_skip_fails_the_run_and_says_why(tmp_path):
    (tmp_path / "test_skipping.py").write_text(SKIPPING)
    (tmp_path / "test_skipped_file.py").write_text(
        "import pytest\npytest.importorskip('a_module_no_one_installed')\n")
    # This folder's conftest, loaded as a plugin into a run of files outside tests/.
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider",
                        "-n", "0", "-rA", "--continue-on-collection-errors", "-c", "/dev/null",
                        "--rootdir", str(tmp_path), str(tmp_path)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "COLUMNS": "1000",
                            "PYTHONPATH": f"{ROOT / 'tests'}{os.pathsep}{ROOT}"})
    summary = {line.split(" ")[1]: line for line in p.stdout.splitlines()
               if line.startswith(("PASSED ", "FAILED ", "ERROR ", "SKIPPED ", "XFAIL "))}
    assert p.returncode == 1, p.stdout + p.stderr
    assert summary.pop("test_skipping.py::test_done").startswith("PASSED ")
    assert {id: line.split(" ")[0] for id, line in summary.items()} == {
        "test_skipping.py::test_skip": "FAILED", "test_skipping.py::test_skipif": "ERROR",
        "test_skipping.py::test_importorskip": "FAILED", "test_skipping.py::test_xfail": "FAILED",
        "test_skipping.py::test_empty_parameters[NOTSET]": "ERROR", "test_skipped_file.py": "ERROR"}
    reasons = {"test_skipping.py::test_skip": "no server here",
               "test_skipping.py::test_skipif": "not on this machine",
               "test_skipping.py::test_importorskip": "a_module_no_one_installed",
               "test_skipping.py::test_xfail": "known",
               "test_skipping.py::test_empty_parameters[NOTSET]": "empty parameter set",
               "test_skipped_file.py": "a_module_no_one_installed"}
    for id, reason in reasons.items():
        assert reason in summary[id] and "the suite never skips" in summary[id], summary[id]
