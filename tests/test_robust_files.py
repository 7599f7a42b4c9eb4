"""Every file llmbench reads from the user's folders is validated where it is read (issue 23):
calibration profiles ($LLMBENCH_PROFILES, $LLMBENCH_HOME/profiles), measured overlays
($LLMBENCH_HOME/hardware/<name>.json), and names that become file names. Each bad file is one
BadInput line naming the file (and key), exit code 2 from the CLI, never a traceback.

    .venv/bin/python -m pytest -q tests/test_robust_files.py
"""
import os

import pytest

from llmbench.errors import BadInput, check_name
from llmbench.perfmodel.params import load_profile

ARGV = ("predict", "train", "--model", "gpt2-xl", "--hardware", "a100-80gb", "--batch", "8", "--seq", "1024")


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMBENCH_HOME", str(tmp_path))
    monkeypatch.delenv("LLMBENCH_PROFILES", raising=False)
    monkeypatch.delenv("LLMBENCH_HARDWARE_PATH", raising=False)
    (tmp_path / "profiles").mkdir()
    (tmp_path / "hardware").mkdir()
    load_profile.cache_clear()
    from llmbench.hardware import spec
    for f in ("_catalog", "_entry"):
        getattr(getattr(spec, f, None), "cache_clear", lambda: None)()
    yield tmp_path
    load_profile.cache_clear()


@pytest.mark.parametrize("text, needle", [
    ('{"params": {"compute_max": 0}}', "params.compute_max must be a finite number"),   # was ZeroDivisionError
    ('{"params": {"compute_max": -5}}', "params.compute_max"),                           # was MFU 197%
    ('{"params": {"compute_max": NaN}}', "got nan"),
    ('{"params": {"compute_max": "0.8"}}', "got '0.8'"),
    ('{"params": {"compute_half_dim": 0}}', "compute_half_dim"),
    ('{"params": {"no_such": 1}}', "unknown parameter 'no_such'"),
    ('[1, 2]', "must be a JSON object"),                                                   # was AttributeError
    ('{"params": [1]}', "must be a JSON object"),
    ('{not json', "not valid JSON"),
])
def test_a_bad_calibration_profile_is_one_line(home, cli, text, needle):
    refused_naming(cli, home / "profiles" / "a100-80gb.json", text, needle)


def refused_naming(cli, path, text, needle) -> None:
    """`text` written to `path`: a prediction is refused in one line naming the file and `needle`."""
    path.write_text(text)
    code, out, err = cli(*ARGV)
    assert code == 2 and needle in err and str(path) in err and len(err.strip().splitlines()) == 1, err


def test_a_profile_linked_to_a_device_is_refused_before_reading(home, cli):
    path = home / "profiles" / "a100-80gb.json"
    os.symlink("/dev/zero", path)   # was read until MemoryError
    code, out, err = cli(*ARGV)
    assert code == 2 and "not a regular file" in err, err


def test_a_valid_profile_is_used(home, cli):
    (home / "profiles" / "a100-80gb.json").write_text('{"params": {"compute_max": 0.5}}')
    assert load_profile("a100-80gb")["params"]["compute_max"] == 0.5


@pytest.mark.parametrize("text, needle", [
    ('{"peak_flops": {"bf16": -1}}', "peak_flops.bf16 must be a finite positive number"),  # was MFU -6e14
    ('{"peak_flops": {"bf16": NaN}}', "got nan"),
    ('{"peak_flops": {"bf16": 0}}', "peak_flops.bf16"),
])
def test_a_bad_measured_overlay_is_one_line(home, cli, text, needle):
    refused_naming(cli, home / "hardware" / "a100-80gb.json", text, needle)


@pytest.mark.parametrize("name", ["../evil", "a/b", "a\nb", ".hidden", "", "x" * 101, "a\x00b"])
def test_names_are_names(name):
    with pytest.raises(BadInput):
        check_name(name)


@pytest.mark.parametrize("name", ["h100-sxm", "my_gpu.v2", "cs3"])
def test_real_names_pass(name):
    assert check_name(name) == name


def test_hardware_init_refuses_a_path_as_name(cli):
    for bad in ("../evil", "a\nb"):
        code, out, err = cli("hardware", "init", "--like", "h100-sxm", "--name", bad)
        assert code == 2 and "--name must be" in err, err


def test_the_same_folder_twice_in_the_hardware_path_is_read_once(tmp_path, monkeypatch, cli):
    d = tmp_path / "hw"
    d.mkdir()
    code, out, err = cli("hardware", "init", "--like", "h100-sxm", "--name", "my-gpu")
    assert code in (0, None), err
    (d / "my-gpu.toml").write_text(out)
    monkeypatch.setenv("LLMBENCH_HARDWARE_PATH", os.pathsep.join([str(d), str(d) + "/"]))
    code, out, err = cli("hardware", "show", "my-gpu")
    assert code in (0, None), err   # was "defines hardware 'my-gpu', already defined by" itself
