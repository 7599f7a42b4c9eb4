"""Hardware catalog: every shipped file parses, every number has a source, peaks are sane, the
measured-profile overlay works, and the CLI answers with stable keys.

    .venv/bin/python -m pytest -q tests/test_hardware.py
"""
from __future__ import annotations

import json
import subprocess
import sys
from llmbench._toml import tomllib
from pathlib import Path

import pytest

from llmbench.hardware import spec
from llmbench.hardware import (
    UnknownHardware, catalog, clear_cache, delete_profile, get_hardware, profile_path, save_profile,
)

REPO = Path(__file__).resolve().parents[1]
CATALOG = REPO / "llmbench" / "hardware" / "catalog"
FILES = sorted(CATALOG.glob("*.toml"))
EXPECTED = {"a100-40gb", "a100-80gb", "h100-sxm", "h200-sxm", "mi250", "gaudi2", "sn30", "bow-ipu",
            "cs2", "cs3", "cpu",
            # the accelerators users have in 2026 (issue 15)
            "b200", "gb200-nvl72", "h100-pcie", "l40s", "mi300x", "mi325x", "gaudi3", "tpu-v5e", "tpu-v5p",
            "tpu-v6e", "sn40l"}


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """Never read the user's ~/.llmbench: every test gets an empty LLMBENCH_HOME."""
    monkeypatch.setenv("LLMBENCH_HOME", str(tmp_path / "home"))
    clear_cache()
    yield tmp_path / "home"
    clear_cache()


def numbers(data, path=""):
    """Walk a catalog TOML independently of spec.py: yield the source key of every number."""
    if isinstance(data, bool):
        return
    if isinstance(data, (int, float)):
        yield path
    elif isinstance(data, dict):
        for k, v in data.items():
            if path == "" and k == "sources":
                continue
            yield from numbers(v, f"{path}.{k}" if path else k)
    elif isinstance(data, list):
        for item in data:
            assert isinstance(item, dict) and "name" in item, f"{path}: list items need a name"
            yield from numbers({k: v for k, v in item.items() if k not in ("name", "role")},
                               f"{path}.{item['name']}")


# ---------------------------------------------------------------- the shipped files

def test_catalog_has_every_expected_entry():
    assert {p.stem for p in FILES} >= EXPECTED
    assert set(catalog()) >= EXPECTED


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_file_parses_and_name_matches_file(path):
    hw = spec.load_file(path)
    assert hw.name == path.stem
    assert hw.display_name and hw.vendor and hw.kind in ("gpu", "tpu", "wafer", "rdu", "ipu", "hpu", "cpu")
    assert hw.notes, "say where the numbers come from and which disagreements were settled"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_number_has_a_source_and_every_source_a_number(path):
    data = tomllib.loads(path.read_text())
    sources = data.get("sources", {})
    paths = list(numbers(data))
    assert paths, "a catalog file without numbers"
    missing = [p for p in paths if not str(sources.get(p, "")).strip()]
    assert not missing, f"{path.name}: numbers without a source: {missing}"
    stale = sorted(set(sources) - set(paths))
    assert not stale, f"{path.name}: sources for numbers that are not there: {stale}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_efficiency_is_left_to_the_perfmodel(path):
    assert "efficiency" not in tomllib.loads(path.read_text())


def test_the_source_walk_catches_an_unsourced_number(tmp_path):
    data = tomllib.loads((CATALOG / "a100-80gb.toml").read_text())
    data["peak_flops"]["fp8"] = 1e15
    data["memory_tiers"][0]["capacity_bytes"] = 1.0
    assert "peak_flops.fp8" in set(numbers(data)) - set(data["sources"])
    assert "memory_tiers.hbm.capacity_bytes" in set(numbers(data))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_peaks_are_sane(name):
    hw = get_hardware(name)
    assert hw.peak_flops, "no dense peak"
    if hw.peak("bf16") and hw.peak("fp32"):
        assert hw.peak("bf16") >= hw.peak("fp32")
    if hw.peak("fp8") and hw.peak("bf16"):
        assert hw.peak("fp8") >= hw.peak("bf16")
    for dt, sparse in hw.peak_flops_sparse.items():
        assert dt in hw.peak_flops, f"sparse {dt} peak without a dense one"
        assert sparse >= hw.peak_flops[dt]
    assert 1e9 <= max(hw.peak_flops.values()) <= 1e17


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_memory_tiers_fastest_first_and_plausible(name):
    hw = get_hardware(name)
    bws = [t.bandwidth_bytes_per_s for t in hw.memory_tiers]
    assert bws == sorted(bws, reverse=True), "memory tiers must be listed fastest first"
    for t in hw.memory_tiers:
        assert 1e6 <= t.capacity_bytes <= 1e16 and 1e9 <= t.bandwidth_bytes_per_s <= 1e17


def test_nvidia_datasheet_figures():
    # NVIDIA A100 datasheet: 312 dense / 624 sparse bf16, 1,555 vs 2,039 GB/s; H100 SXM5 whitepaper.
    a40, a80, h100, h200 = (get_hardware(n) for n in ("a100-40gb", "a100-80gb", "h100-sxm", "h200-sxm"))
    assert a40.peak("bf16") == a80.peak("bf16") == 312e12
    assert a40.peak_flops_sparse["bf16"] == 624e12
    assert (a40.device_memory.bandwidth_bytes_per_s, a80.device_memory.bandwidth_bytes_per_s) == (1555e9, 2039e9)
    assert h100.peak("bf16") == h200.peak("bf16") == pytest.approx(989.4e12)
    assert h200.device_memory.bandwidth_bytes_per_s == 4.8e12
    # NVIDIA's "GB" of HBM is binary: nvidia-smi shows 40,960 / 81,920 / 81,559 / 143,771 MiB
    gib = 2**30
    assert [hw.device_memory.capacity_bytes for hw in (a40, a80, h100, h200)] == [40 * gib, 80 * gib,
                                                                                 80 * gib, 141 * gib]
    for hw in (a40, a80, h100, h200):
        assert hw.structured_sparsity == "2:4" and hw.kind == "gpu"
        assert hw.tier("dram") is not None, "GPUs carry a host DRAM tier"
    assert a40.interconnect.devices_per_node == 4 and a80.interconnect.devices_per_node == 8


def test_mi250_fp32_from_the_study():
    assert get_hardware("mi250").peak("fp32") == 45.3e12  # arXiv:2310.04607 (seed 002)


def test_only_wafers_skip_zero_weights_and_stream():
    for name, hw in catalog().items():
        wafer = name in ("cs2", "cs3")
        assert hw.skips_zero_weights is wafer, name
        if wafer:
            assert (hw.default_mode_train, hw.default_mode_infer) == ("weight_streaming", "sram_pipeline")
            assert hw.tier("sram").role == "sram" and hw.tier("memoryx").role == "external"
            assert hw.interconnect.topology == "tree" and "SwarmX" in hw.interconnect.name
            assert hw.structured_sparsity == ""
        else:
            assert (hw.default_mode_train, hw.default_mode_infer) == ("resident", "resident"), name


def test_wafer_memory_figures():
    cs2, cs3 = get_hardware("cs2"), get_hardware("cs3")
    assert (cs2.tier("sram").capacity_bytes, cs2.tier("sram").bandwidth_bytes_per_s) == (40e9, 20e15)
    assert (cs3.tier("sram").capacity_bytes, cs3.tier("sram").bandwidth_bytes_per_s) == (44e9, 21e15)
    assert cs2.tier("memoryx").bandwidth_bytes_per_s == 150e9  # 1.2 Tb/s system I/O
    assert cs2.peak("bf16") == 7.5e15 and cs2.peak("cbf16") == 7.5e15  # Andromeda 120 PF / 16


def test_dataflow_chips_have_sram_and_dram():
    sn30, bow = get_hardware("sn30"), get_hardware("bow-ipu")
    assert sn30.tier("sram").role == "sram" and sn30.tier("dram").capacity_bytes == 1e12
    assert bow.tier("sram").capacity_bytes == 900e6 and bow.tier("dram") is not None


def test_cpu_is_a_marked_placeholder():
    hw = get_hardware("cpu")
    assert hw.kind == "cpu" and hw.interconnect is None
    assert "PLACEHOLDER" in hw.notes
    assert all("PLACEHOLDER" in s for s in hw.sources.values())


# ---------------------------------------------------------------- names

@pytest.mark.parametrize("query, expected", [("A100-80GB", "a100-80gb"), ("gaudi2", "gaudi2"), ("nvl72", "gb200-nvl72"),
                                             ("bow", "bow-ipu"), (" cs3 ", "cs3"), ("v6e", "tpu-v6e")])
def test_lookup_exact_then_unique_fuzzy(query, expected):
    assert get_hardware(query).name == expected


@pytest.mark.parametrize("query, suggestion", [("a100", "a100-40gb"), ("h100-sxm5", "h100-sxm"),
                                               ("mi205", "mi250"), ("gaudi", "gaudi3"), ("h100", "h100-pcie"),
                                               ("tpu", "tpu-v5p")])
def test_unknown_name_suggests_the_closest(query, suggestion):
    with pytest.raises(UnknownHardware, match="did you mean") as e:
        get_hardware(query)
    assert suggestion in str(e.value) and "\n" not in str(e.value)


# ---------------------------------------------------------------- measured / calibrated overlay

def test_profile_overlays_the_shipped_file(isolated_home):
    shipped = get_hardware("cpu")
    path = save_profile("cpu", {"peak_flops": {"fp32": 1.25e11},
                                "memory_tiers": [{"name": "dram", "bandwidth_bytes_per_s": 12e9}],
                                "sources": {"peak_flops.fp32": "llmbench measure ceilings, sgemm 2048"}})
    assert path == isolated_home / "hardware" / "cpu.json" == profile_path("cpu")
    hw = get_hardware("cpu")
    assert hw.peak("fp32") == 1.25e11 != shipped.peak("fp32")
    dram = hw.tier("dram")
    assert dram.bandwidth_bytes_per_s == 12e9 and dram.capacity_bytes == shipped.tier("dram").capacity_bytes
    assert hw.sources["peak_flops.fp32"] == "llmbench measure ceilings, sgemm 2048"
    assert str(path) in hw.sources["memory_tiers.dram.bandwidth_bytes_per_s"]  # auto-sourced
    assert hw.overlay == str(path) and shipped.overlay == ""
    assert catalog()["cpu"] is hw
    # other devices are untouched
    assert get_hardware("a100-80gb").overlay == ""


def test_profiles_merge_and_replace(isolated_home):
    save_profile("a100-80gb", {"efficiency": {"gemm": 0.7}})
    save_profile("a100-80gb", {"peak_flops": {"bf16": 280e12}})
    hw = get_hardware("a100-80gb")
    assert hw.efficiency == {"gemm": 0.7} and hw.peak("bf16") == 280e12
    assert hw.peak("fp32") == 19.5e12  # the shipped keys of a table survive
    save_profile("a100-80gb", {"efficiency": {"gemm": 0.5}}, replace=True)
    hw = get_hardware("a100-80gb")
    assert hw.efficiency == {"gemm": 0.5} and hw.peak("bf16") == 312e12
    assert delete_profile("a100-80gb") and get_hardware("a100-80gb").efficiency == {}
    assert not delete_profile("a100-80gb")


def test_profile_file_is_json_written_atomically(isolated_home):
    path = save_profile("cpu", {"peak_flops": {"fp32": 2e11}})
    assert json.loads(path.read_text())["peak_flops"] == {"fp32": 2e11}
    assert [p.name for p in path.parent.iterdir()] == ["cpu.json"]  # no temp file left behind


def test_bad_profiles_are_refused_with_one_line(isolated_home):
    with pytest.raises(ValueError, match="unknown hardware field"):
        save_profile("cpu", {"peak_tflops": 3})
    with pytest.raises(ValueError, match="unknown dtype"):
        save_profile("cpu", {"peak_flops": {"int4": 1e12}})
    with pytest.raises(ValueError, match="memory tier"):
        save_profile("my-gpu", {"peak_flops": {"fp32": 1e12}})  # a new device needs its memory
    with pytest.raises(ValueError, match="positive"):
        save_profile("cpu", {"memory_tiers": [{"name": "dram", "capacity_bytes": 0.0}]})
    assert not (isolated_home / "hardware" / "cpu.json").exists()
    (isolated_home / "hardware").mkdir(parents=True, exist_ok=True)
    (isolated_home / "hardware" / "cpu.json").write_text("{not json")
    clear_cache()
    with pytest.raises(ValueError, match="cpu.json") as e:
        get_hardware("cpu")
    assert "\n" not in str(e.value)


def test_profile_can_add_a_measured_device(isolated_home):
    save_profile("local-gpu", {"display_name": "measured GPU", "vendor": "local", "kind": "gpu",
                               "peak_flops": {"fp32": 3e13},
                               "memory_tiers": [{"name": "hbm", "role": "hbm", "capacity_bytes": 24e9,
                                                 "bandwidth_bytes_per_s": 9e11}]})
    hw = get_hardware("local-gpu")
    assert hw.peak("fp32") == 3e13 and "local-gpu.json" in hw.sources["peak_flops.fp32"]
    # what `llmbench measure ceilings` saves for an accelerator: peaks and one tier, no names
    save_profile("nvidia-h200", {"peak_flops": {"bf16": 7.1e14},
                                 "memory_tiers": [{"name": "hbm", "role": "hbm", "capacity_bytes": 1.4e11,
                                                   "bandwidth_bytes_per_s": 4.0e12}]})
    hw = get_hardware("nvidia-h200")
    assert (hw.kind, hw.vendor, hw.display_name) == ("gpu", "local", "nvidia-h200 (measured)")
    assert "nvidia-h200" in catalog() and get_hardware("h200-sxm").overlay == ""


def test_cache_follows_llmbench_home(isolated_home, monkeypatch, tmp_path):
    save_profile("cpu", {"peak_flops": {"fp32": 3e11}})
    assert get_hardware("cpu").peak("fp32") == 3e11
    monkeypatch.setenv("LLMBENCH_HOME", str(tmp_path / "other"))
    assert get_hardware("cpu").peak("fp32") == 50e9


# ---------------------------------------------------------------- CLI

def run_cli(*args, home):
    env = {**__import__("os").environ, "LLMBENCH_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "llmbench", *args], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=120)


def test_cli_list_and_show_json(isolated_home):
    r = run_cli("hardware", "list", "--json", home=isolated_home)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert {row["name"] for row in rows} >= EXPECTED
    r = run_cli("hardware", "show", "cs2", "--json", home=isolated_home)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["name"] == "cs2" and info["peak_flops"]["bf16"] == 7.5e15
    for tier in info["memory_tiers"]:
        assert {"name", "capacity_bytes", "bandwidth_bytes_per_s"} <= set(tier)
    assert info["sources"]["memory_tiers.memoryx.bandwidth_bytes_per_s"]


def test_cli_show_applies_the_profile(isolated_home):
    save_profile("cpu", {"peak_flops": {"fp32": 4.5e11}})
    info = json.loads(run_cli("hardware", "show", "cpu", "--json", home=isolated_home).stdout)
    assert info["peak_flops"]["fp32"] == 4.5e11


def test_cli_unknown_hardware_is_one_line_exit_2(isolated_home):
    r = run_cli("hardware", "show", "nope", home=isolated_home)
    assert r.returncode == 2
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    assert len(lines) == 1 and "unknown hardware" in lines[0] and "Traceback" not in r.stderr


def test_import_hardware_imports_no_torch():
    code = ("import sys, llmbench.hardware as h; h.catalog(); "
            "print(any(m == 'torch' or m.startswith('torch.') for m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_catalog_name_for_a_torch_device_name():
    from llmbench.hardware.spec import catalog_name_for_device

    assert catalog_name_for_device("NVIDIA H200") == "h200-sxm"
    assert catalog_name_for_device("nvidia-h200") == "h200-sxm"  # a measured profile's name
    assert catalog_name_for_device("NVIDIA H100 80GB HBM3") == "h100-sxm"
    assert catalog_name_for_device("NVIDIA A100-SXM4-80GB") == "a100-80gb"
    assert catalog_name_for_device("cs2") == "cs2"
    assert catalog_name_for_device("Apple M2") is None


# ---------------------------------------------------------------- power, price, units, 2026 entries

@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_power_and_price_are_given_or_their_absence_explained(name):
    hw = get_hardware(name)
    if hw.power_w is None:
        assert "No power_w" in hw.notes, "say in notes why no power figure is given"
    else:
        assert 1.0 <= hw.power_w <= 50_000 and hw.sources["power_w"]
    if hw.price_per_device_hour_usd is None:
        assert "No price" in hw.notes, "say in notes why no price is given"
    else:
        assert 0.1 <= hw.price_per_device_hour_usd <= 1000
        source = hw.sources["price_per_device_hour_usd"]
        assert "2026-" in source or "amortis" in source or "year" in source, "a price needs its date or life"


@pytest.mark.parametrize("name", sorted(n for n in EXPECTED if n not in ("cpu",)))
def test_gpu_and_gaudi_hbm_is_a_whole_number_of_gib(name):
    # datasheets' "GB" of HBM/GDDR is 2^30 bytes (nvidia-smi 81,559 MiB on an "80 GB" H100; hl-smi
    # 98,304 MiB on a 96 GB Gaudi2; rocm-smi 191.7 GiB on a 192 GB MI300X): issue 10 step 2
    hw = get_hardware(name)
    if hw.kind not in ("gpu", "hpu", "tpu"):
        return
    cap = hw.device_memory.capacity_bytes
    assert cap % 2**30 == 0, f"{name}: {cap:.0f} bytes is not whole GiB"
    assert "2^30" in hw.sources[f"memory_tiers.{hw.device_memory.name}.capacity_bytes"] or "GiB" in \
        hw.sources[f"memory_tiers.{hw.device_memory.name}.capacity_bytes"]


def test_2026_datasheet_figures():
    b200, gb, pcie, l40s = (get_hardware(n) for n in ("b200", "gb200-nvl72", "h100-pcie", "l40s"))
    assert (b200.peak("bf16"), b200.peak("fp8"), b200.peak_flops_sparse["fp8"]) == (2250e12, 4500e12, 9000e12)
    assert (gb.peak("bf16"), gb.power_w, gb.interconnect.devices_per_node) == (2500e12, 1200.0, 72)
    assert b200.interconnect.devices_per_node == 8 and b200.device_memory.bandwidth_bytes_per_s == 8e12
    assert (pcie.peak("bf16"), pcie.device_memory.bandwidth_bytes_per_s, pcie.power_w) == (756e12, 2e12, 350.0)
    assert l40s.device_memory.name == "gddr6" and l40s.tier("hbm") is l40s.device_memory
    mi300x, mi325x, g3 = get_hardware("mi300x"), get_hardware("mi325x"), get_hardware("gaudi3")
    assert mi300x.peak("bf16") == mi325x.peak("bf16") == 1307.4e12  # AMD: same CDNA3 compute
    assert mi325x.device_memory.capacity_bytes == 256 * 2**30 > mi300x.device_memory.capacity_bytes
    assert g3.peak("bf16") == g3.peak("fp8") == 1835e12 and g3.interconnect.bandwidth_bytes_per_s == 2 * 262.5e9
    for name, bf16, hbm_gib in (("tpu-v5e", 197e12, 16), ("tpu-v5p", 459e12, 95), ("tpu-v6e", 918e12, 32)):
        tpu = get_hardware(name)
        assert (tpu.kind, tpu.peak("bf16"), tpu.peak("fp32")) == ("tpu", bf16, None)
        assert tpu.device_memory.capacity_bytes == hbm_gib * 2**30 and tpu.interconnect.topology == "torus"
    sn40l = get_hardware("sn40l")
    assert sn40l.device_memory.name == "hbm" and sn40l.tier("dram").capacity_bytes == 1.5e12


def test_cs2_power_is_the_system_figure_of_seed_001():
    cs2 = get_hardware("cs2")
    assert cs2.power_w == 20_000 and "seed 001" in cs2.sources["power_w"]
    assert cs2.price_per_device_hour_usd == pytest.approx(2.5e6 / (5 * 8760), abs=0.01)


@pytest.mark.parametrize("device, entry", [("NVIDIA B200", "b200"), ("NVIDIA GB200", "gb200-nvl72"),
                                           ("NVIDIA H100 PCIe", "h100-pcie"), ("NVIDIA L40S", "l40s"),
                                           ("AMD Instinct MI300X", "mi300x"), ("AMD Instinct MI325X", "mi325x"),
                                           ("HL-325L", "gaudi3")])
def test_torch_names_of_the_new_devices(device, entry):
    from llmbench.hardware.spec import catalog_name_for_device

    assert catalog_name_for_device(device) == entry


def test_spec_rejects_a_bad_price_power_or_kind():
    base = get_hardware("h100-sxm")
    from dataclasses import replace

    for change, word in (({"price_per_device_hour_usd": 0.0}, "price"), ({"power_w": -1.0}, "power_w"),
                         ({"kind": "fpga"}, "kind")):
        with pytest.raises(ValueError, match=word):
            replace(base, **change)
