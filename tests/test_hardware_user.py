"""A user's own hardware TOML: the round trip from init_toml, one test per validation rule (each a
one-line BadInput naming the file and the field), source warnings, $LLMBENCH_HARDWARE_PATH and
shadowing, file limits.

    .venv/bin/python -m pytest -q tests/test_hardware_user.py
"""
from __future__ import annotations

import os
from llmbench._toml import tomllib
from dataclasses import fields
from pathlib import Path

import pytest

from llmbench.errors import BadInput
from llmbench.hardware import HardwareSpec, catalog, check_user_file, clear_cache, get_hardware, init_toml
from llmbench.hardware import save_profile, userfile
from llmbench.hardware.spec import CATALOG_DIR, HARDWARE_PATH_VAR


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """No user profiles and no user hardware folders leak in from the machine running the tests."""
    monkeypatch.setenv("LLMBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(HARDWARE_PATH_VAR, raising=False)
    clear_cache()
    yield
    clear_cache()


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def starter(tmp_path, like="h100-sxm", name="my-gpu") -> Path:
    return write(tmp_path / f"{name}.toml", init_toml(like, name=name))


def edited(tmp_path, old: str, new: str, like="h100-sxm") -> Path:
    text = init_toml(like, name="my-gpu")
    assert old in text, old
    return write(tmp_path / "mine.toml", text.replace(old, new, 1))


def one_line_error(path, *words):
    with pytest.raises(BadInput) as e:
        get_hardware(str(path))
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg, msg
    for w in words:
        assert w in msg, msg
    return msg


# ---------------------------------------------------------------- round trip

@pytest.mark.parametrize("like", sorted(p.stem for p in CATALOG_DIR.glob("*.toml")))
def test_init_toml_round_trips_every_catalog_entry(tmp_path, like):
    path = write(tmp_path / "copy.toml", init_toml(like))
    loaded = get_hardware(str(path))
    assert loaded == get_hardware(like)
    assert loaded.origin_file == str(path) and get_hardware(like).origin_file == ""
    assert check_user_file(path).warnings == ()  # the catalog sources come along


def test_init_toml_renames_and_is_plain_toml(tmp_path):
    text = init_toml("gaudi3", name="My-Gaudi")
    data = tomllib.loads(text)
    assert data["name"] == "my-gaudi" and "edited copy" in data["display_name"]
    assert "overlay" not in data and "origin_file" not in data
    assert text.startswith("# ") and "docs/hardware.md" in text.splitlines()[1]


def test_a_file_that_needs_escaping_round_trips(tmp_path):
    path = starter(tmp_path)
    data = tomllib.loads(path.read_text())
    data["notes"] = 'quote " backslash \\ tab\tnewline\n and \x7f control'
    data["display_name"] = "Beschleuniger ü 加速器"
    write(path, userfile.to_toml(data))
    hw = get_hardware(str(path))
    assert hw.notes == data["notes"] and hw.display_name == data["display_name"]


def test_schema_table_covers_every_spec_field():
    derived = {"overlay", "origin_file"}
    assert set(userfile.FIELD_KINDS) == {f.name for f in fields(HardwareSpec)} - derived


# ---------------------------------------------------------------- how a path is recognised

def test_path_forms(tmp_path, monkeypatch):
    path = starter(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert get_hardware("./my-gpu.toml").name == "my-gpu"
    assert get_hardware("my-gpu.toml").name == "my-gpu"        # ends in .toml
    write(tmp_path / "plainfile", path.read_text())
    assert get_hardware("plainfile").name == "my-gpu"          # an existing file
    write(tmp_path / "cpu", path.read_text())
    assert get_hardware("cpu").name == "cpu"                   # a catalog name wins over a file
    one_line_error("missing.toml", "no such hardware file")


# ---------------------------------------------------------------- one test per validation rule

def test_missing_field(tmp_path):
    path = edited(tmp_path, 'kind = "gpu"\n', "")
    one_line_error(path, "missing required field 'kind'")


def test_missing_tier_field(tmp_path):
    path = edited(tmp_path, 'bandwidth_bytes_per_s = 3350000000000.0\n', "")
    one_line_error(path, "memory_tiers[0] ('hbm')", "'bandwidth_bytes_per_s'")


def test_wrong_type_number(tmp_path):
    path = edited(tmp_path, "bf16 = 989400000000000.0", 'bf16 = "989 TFLOPS"')
    one_line_error(path, "peak_flops.bf16", "must be a number")


def test_wrong_type_string_and_bool(tmp_path):
    one_line_error(edited(tmp_path, 'vendor = "NVIDIA"', "vendor = 3"), "vendor must be a string")
    one_line_error(edited(tmp_path, "skips_zero_weights = false", "skips_zero_weights = 0"),
                   "skips_zero_weights must be a true/false")


def test_wrong_type_table(tmp_path):
    data = tomllib.loads(init_toml("h100-sxm", name="my-gpu"))
    link, data["interconnect"] = data["interconnect"], 5
    one_line_error(write(tmp_path / "mine.toml", userfile.to_toml(data)), "interconnect must be a table")
    data["interconnect"], data["peak_flops"] = link, 5
    one_line_error(write(tmp_path / "mine.toml", userfile.to_toml(data)), "peak_flops must be a table")


def test_negative_number(tmp_path):
    path = edited(tmp_path, "capacity_bytes = 85899345920.0", "capacity_bytes = -1.0")
    one_line_error(path, "memory_tiers[0] ('hbm').capacity_bytes", "must be positive")


def test_negative_power_and_price(tmp_path):
    one_line_error(edited(tmp_path, "power_w = 700.0", "power_w = -700.0"), "power_w must be positive")
    one_line_error(edited(tmp_path, "price_per_device_hour_usd = 3.99", "price_per_device_hour_usd = 0"),
                   "price_per_device_hour_usd must be positive")


def test_not_finite_and_not_whole(tmp_path):
    one_line_error(edited(tmp_path, "bf16 = 989400000000000.0", "bf16 = inf"), "peak_flops.bf16")
    one_line_error(edited(tmp_path, "devices_per_node = 8", "devices_per_node = 8.5"),
                   "devices_per_node must be a whole number")


def test_unknown_dtype_suggests_the_closest(tmp_path):
    path = edited(tmp_path, "bf16 = 989400000000000.0", "bf61 = 989400000000000.0")
    one_line_error(path, "unknown dtype in peak_flops", "'bf61'", "did you mean 'bf16'?")


def test_unknown_field_suggests_the_closest(tmp_path):
    path = edited(tmp_path, "power_w = 700.0", "power_watts = 700.0")
    one_line_error(path, "unknown field 'power_watts'", "did you mean 'power_w'?")


def test_unknown_key_in_a_tier_and_in_the_interconnect(tmp_path):
    one_line_error(edited(tmp_path, "capacity_bytes = 85899345920.0", "capacity = 85899345920.0"),
                   "unknown key in memory_tiers[0] ('hbm')", "did you mean 'capacity_bytes'?")
    one_line_error(edited(tmp_path, "latency_s = 5e-06", "latency = 5e-06"),
                   "unknown key in interconnect", "did you mean 'latency_s'?")


def test_unknown_choice_suggests_the_closest(tmp_path):
    one_line_error(edited(tmp_path, 'role = "hbm"', 'role = "hmb"'), "memory_tiers[0] ('hbm').role",
                   "did you mean 'hbm'?")
    one_line_error(edited(tmp_path, 'kind = "gpu"', 'kind = "gpus"'), "unknown kind 'gpus'", "'gpu'")
    one_line_error(edited(tmp_path, 'topology = "switch"', 'topology = "swtich"'), "'switch'")
    one_line_error(edited(tmp_path, 'default_mode_train = "resident"', 'default_mode_train = "stream"'),
                   "default_mode_train")


def test_duplicate_tier_and_empty_peaks(tmp_path):
    one_line_error(edited(tmp_path, 'name = "host_dram"', 'name = "hbm"'), "two tiers are named 'hbm'")
    text = init_toml("cpu", name="box").replace("[peak_flops]\nfp32 = 50000000000.0\n", "[peak_flops]\n")
    one_line_error(write(tmp_path / "box.toml", text), "peak_flops needs at least one dtype")


def test_bad_name(tmp_path):
    one_line_error(edited(tmp_path, 'name = "my-gpu"', 'name = "My GPU"'), "lower-case name")


def test_invalid_toml(tmp_path):
    one_line_error(write(tmp_path / "bad.toml", "name = \n"), "not valid TOML")


# ---------------------------------------------------------------- file limits

def test_directory_is_refused(tmp_path):
    folder = tmp_path / "dir.toml"
    folder.mkdir()
    one_line_error(folder, "is a directory")


def test_non_utf8_is_refused(tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes('name = "gerät"\n'.encode("latin-1"))
    one_line_error(path, "not UTF-8")


def test_large_file_is_refused_before_reading(tmp_path, monkeypatch):
    path = starter(tmp_path)
    monkeypatch.setattr(userfile, "MAX_USER_FILE_BYTES", 100)
    one_line_error(path, "too large", "limit 100")
    big = tmp_path / "big.toml"
    with open(big, "wb") as f:  # a sparse 2 MB file: refused by size, never read
        f.truncate(2_000_000)
    monkeypatch.setattr(userfile, "MAX_USER_FILE_BYTES", 1_000_000)
    one_line_error(big, "too large")


# ---------------------------------------------------------------- sources are recommended

def test_numbers_without_sources_are_warnings_not_errors(tmp_path):
    text = init_toml("h100-sxm", name="my-gpu")
    sources = '\n[sources]\n"power_w" = "my board\'s label"\n"peak_flops.int4" = "?"\n'
    text = text[:text.index("\n[sources]\n")] + sources
    path = write(tmp_path / "mine.toml", text)
    report = check_user_file(path)
    assert report.spec.power_w == 700.0 and get_hardware(str(path)) == report.spec
    assert any("no source for peak_flops.bf16" in w for w in report.warnings)
    assert not any("no source for power_w" in w for w in report.warnings)
    assert any("peak_flops.int4, which is not a number" in w for w in report.warnings)
    assert all(str(path) in w and "\n" not in w for w in report.warnings)


# ---------------------------------------------------------------- $LLMBENCH_HARDWARE_PATH

def test_path_variable_adds_folders(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    starter(a, name="lab-gpu")
    starter(b, like="tpu-v6e", name="lab-tpu")
    monkeypatch.setenv(HARDWARE_PATH_VAR, os.pathsep.join([str(a), "", str(b)]))
    clear_cache()
    table = catalog()
    assert {"lab-gpu", "lab-tpu", "h100-sxm"} <= set(table)
    assert get_hardware("lab-tpu").kind == "tpu" and table["lab-gpu"].origin_file == str(a / "lab-gpu.toml")


def test_path_variable_may_not_shadow_a_shipped_name(tmp_path, monkeypatch):
    write(tmp_path / "mine.toml", init_toml("h100-sxm"))  # keeps the name h100-sxm
    monkeypatch.setenv(HARDWARE_PATH_VAR, str(tmp_path))
    clear_cache()
    with pytest.raises(BadInput) as e:
        catalog()
    msg = str(e.value)
    assert str(tmp_path / "mine.toml") in msg and str(CATALOG_DIR / "h100-sxm.toml") in msg and "\n" not in msg


def test_path_variable_entries_may_not_shadow_each_other(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    starter(a, name="twin")
    starter(b, like="l40s", name="twin")
    monkeypatch.setenv(HARDWARE_PATH_VAR, os.pathsep.join([str(a), str(b)]))
    clear_cache()
    with pytest.raises(BadInput, match="twin") as e:
        catalog()
    assert str(a / "twin.toml") in str(e.value) and str(b / "twin.toml") in str(e.value)


def test_path_variable_folder_must_exist(tmp_path, monkeypatch):
    monkeypatch.setenv(HARDWARE_PATH_VAR, str(tmp_path / "nope"))
    clear_cache()
    with pytest.raises(BadInput, match=f"{HARDWARE_PATH_VAR}.*not a folder"):
        get_hardware("h100-sxm")


def test_a_bad_file_in_the_path_is_named(tmp_path, monkeypatch):
    write(tmp_path / "broken.toml", 'name = "x"\n')
    monkeypatch.setenv(HARDWARE_PATH_VAR, str(tmp_path))
    clear_cache()
    with pytest.raises(BadInput, match="broken.toml: missing required field"):
        catalog()


def test_a_profile_overlays_a_user_entry_by_name(tmp_path, monkeypatch):
    starter(tmp_path, name="lab-gpu")
    monkeypatch.setenv(HARDWARE_PATH_VAR, str(tmp_path))
    clear_cache()
    save_profile("lab-gpu", {"peak_flops": {"bf16": 7.0e14}})
    hw = get_hardware("lab-gpu")
    assert hw.peak("bf16") == 7.0e14 and hw.overlay.endswith("lab-gpu.json")
    assert get_hardware(str(tmp_path / "lab-gpu.toml")).peak("bf16") == 7.0e14
