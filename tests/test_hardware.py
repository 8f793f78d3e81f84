"""Hardware TOMLs: every target loads, figures match the reference, every value cites a source."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ascendir.errors import AscendirError
from ascendir.hardware import TARGETS, load_target
from ascendir.hardware.config import HardwareConfig

HW_DIR = Path(__file__).resolve().parent.parent / "ascendir" / "hardware" / "chips"
ALL = ["ascend910b1", "ascend910b2", "ascend910b3", "ascend910b4", "ascend910_93", "ascend910a", "ascend310p"]
VALUE_LINE = re.compile(r"^\s*[A-Za-z_][\w.]*\s*=")
SOURCE = re.compile(r"#.*\b(doc|rep|INF)\b.*(\[S\d+\]|§\w)")  # ids and sections of docs/hardware-reference.md


def test_all_targets_shipped():
    assert set(ALL) <= set(TARGETS)


def test_archs_are_the_dialects():
    """Every ChipArch is an #ascend.arch the dialect parses, and the other way round (the dialect
    sits below the hardware layer, so it keeps its own list)."""
    from ascendir.dialects.ascend import Arch
    from ascendir.hardware.arch import ARCHS

    assert list(ARCHS) == [a.value for a in Arch]


@pytest.mark.parametrize("name", ALL)
def test_loads(name: str):
    hw = load_target(name)
    assert isinstance(hw, HardwareConfig) and hw.name == name
    assert hw.clock_hz > 0 and hw.num_aic >= 1 and hw.num_aiv >= 1
    for space in ("l1", "l0a", "l0b", "l0c", "ub"):
        assert hw.capacity(space) > 0 and hw.align[space] > 0
    assert hw.cube.k_per_cycle["f16"] == 16 and hw.cube.mmad_startup == 20
    assert hw.vector.op("vadd").kind == "repeat" and hw.vector.op("vsigmoid").kind == "fit"
    assert hw.vector.op("no_such_op") is hw.vector.ops["default"]
    assert hw.rate("l1", "l0a") == 512 and hw.rate("l1", "l0b") == 256
    assert hw.memory.hbm_bw_Bps > 0 and hw.kernel_launch_cycles > 0
    assert {"mte1", "mte2", "mte2_nd2nz", "mte3", "vector", "scalar_alu"} <= set(hw.startup)


@pytest.mark.parametrize("name", ALL)
def test_every_value_cites_a_source(name: str):
    bad = [
        f"{i}: {line}"
        for i, line in enumerate((HW_DIR / f"{name}.toml").read_text().splitlines(), 1)
        if VALUE_LINE.match(line) and not SOURCE.search(line)
    ]
    assert not bad, "value lines without '# doc|rep|INF [Sn]' comment:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    "name, tflops",
    [("ascend910b1", 363.7), ("ascend910b2", 353.9), ("ascend910b3", 294.9), ("ascend910b4", 245.8), ("ascend310p", 69.5)],
)
def test_fp16_peak_matches_reference(name: str, tflops: float):
    # reference §1.1 / §1.3: cores x 4096 MAC x 2 x f
    assert load_target(name).peak_flops("f16") / 1e12 == pytest.approx(tflops, rel=1e-3)


def test_910b_split_and_paths():
    b2, a = load_target("910b2"), load_target("910a")
    assert b2.arch.split_cores and not a.arch.split_cores
    assert b2.cores("aiv") == 48 and b2.cores("aic") == 24 and b2.cores("mix") == 24
    assert "f32" in b2.cube.k_per_cycle and "f32" not in a.cube.k_per_cycle
    assert a.rate("l0c", "ub") == 256
    with pytest.raises(AscendirError, match="no rate for path l0c -> ub"):
        b2.rate("l0c", "ub")


def test_name_forms_and_path(tmp_path: Path):
    assert load_target("910B2").name == load_target("ascend910b2").name == load_target(None).name
    p = tmp_path / "chip.toml"
    p.write_text((HW_DIR / "ascend910b2.toml").read_text().replace('name = "ascend910b2"', 'name = "mychip"'))
    assert load_target(p).name == "mychip"
    assert load_target(load_target("910b2")).name == "ascend910b2"


def test_bad_targets(tmp_path: Path):
    with pytest.raises(AscendirError, match="unknown target"):
        load_target("ascend999")
    p = tmp_path / "broken.toml"
    p.write_text("[chip]\nname = 'x'\n")
    with pytest.raises(AscendirError, match="lacks key"):
        load_target(p)
    p.write_text("[chip\n")
    with pytest.raises(AscendirError, match="cannot read"):
        load_target(p)
    txt = (HW_DIR / "ascend910b2.toml").read_text().replace("gm_to_l1 = 32 ", "gm_to_l1 = 0  ")
    p.write_text(txt)
    with pytest.raises(AscendirError, match="gm_to_l1"):
        load_target(p)


@pytest.mark.parametrize("old, new, key, must", [
    ("fractal_m = 16 ", "fractal_m = 0 ", "cube.fractal_m = 0", "positive integer"),  # was ZeroDivisionError
    ("l1 = 524288 ", "l1 = -5 ", "buffers.l1 = -5", "positive integer"),  # was "no tiling fits"
    ("ub = 196608 ", "ub = 196608.5 ", "buffers.ub = 196608.5", "positive integer"),
    ("l0a = 512 ", "l0a = 0 ", "align.l0a = 0", "positive integer"),
    ("clock_hz = 1.8e9 ", 'clock_hz = "fast" ', "chip.clock_hz = 'fast'", "positive number"),
    ("hbm_bw_Bps = 1.6e12 ", "hbm_bw_Bps = nan ", "memory.hbm_bw_Bps = nan", "positive number"),
    # a sustained share of the peak: above 1 would stream faster than the peak, 0 never
    ("hbm_efficiency = 0.80 ", "hbm_efficiency = 1.25 ", "memory.hbm_efficiency = 1.25", "> 0 and <= 1"),
    ("hbm_efficiency = 0.80 ", "hbm_efficiency = 0 ", "memory.hbm_efficiency = 0", "> 0 and <= 1"),
    ("k_per_cycle = { f16 = 16,", "k_per_cycle = { f16 = 0,", "cube.k_per_cycle.f16 = 0", "positive integer"),
    ("vexp = { bpc = 128,", "vexp = { bpc = -128,", "vector.ops.vexp.bpc = -128", "bytes per cycle >= 0.000976562"),
    ("repeat_bytes = 256 ", "repeat_bytes = 0 ", "vector.repeat_bytes = 0", "positive integer"),
    ("mte3 = 12 ", "mte3 = -1 ", "startup.mte3 = -1", "integer >= 0"),
    ("gm_read_latency = 307 ", "gm_read_latency = true ", "memory.gm_read_latency = True", "integer >= 0"),
    ("event_ids = 8 ", "event_ids = 0 ", "sync.event_ids = 0", "positive integer"),
])
def test_bad_values_name_the_key_and_file(tmp_path: Path, old: str, new: str, key: str, must: str):
    """A custom target with an impossible value fails on load, naming the key and the file (the
    CLI prints it as one line, exit 2), before it can divide by zero or make every tiling fail."""
    text = (HW_DIR / "ascend910b2.toml").read_text()
    assert old in text
    p = tmp_path / "custom.toml"
    p.write_text(text.replace(old, new, 1))
    with pytest.raises(AscendirError) as e:
        load_target(p)
    assert str(e.value).startswith(f"target file {p}: {key}, must be") and must in str(e.value)


@pytest.mark.parametrize("old, new, message", [
    # each was an internal error (OverflowError) or an infinite cycle count in the report
    ("hbm_bw_Bps = 1.6e12 ", "hbm_bw_Bps = 1e-300 ", "memory.hbm_bw_Bps = 1e-300 is 5.56e-310 bytes per cycle"),
    ("hbm_efficiency = 0.80 ", "hbm_efficiency = 1e-300 ", "memory.hbm_efficiency = 1e-300 leaves 8.89e-298 bytes per cycle"),
    ("gm_to_l1 = 32 ", "gm_to_l1 = 1e-9 ", "rates.gm_to_l1 = 1e-09, must be a number of bytes per cycle >= 0.000976562"),
    ("mte2 = ", "mte2 = 1e308 #", "startup.mte2 = 1e+308, must be at most 1.678e+07 cycles"),
    ("gm_read_latency = 307 ", "gm_read_latency = 1e308 ", "memory.gm_read_latency = 1e+308, must be at most 1.678e+07 cycles"),
    ("k_per_cycle = { f16 = 16,", "k_per_cycle = { f16 = 1e308,", "cube.k_per_cycle.f16 = 1e+308, must be at most 1.126e+15"),
    ("bytes_per_cycle = 256 ", "bytes_per_cycle = 1e308 ", "vector.bytes_per_cycle = 1e+308, must be at most 1.126e+15"),
])
def test_figures_out_of_the_timelines_range(tmp_path: Path, old: str, new: str, message: str):
    """Figures so small or large that cycle counts overflow (the fuzzed target TOMLs of issue 23)
    fail on load with the key, not as an internal error or a report `ascendir report` rejects."""
    text = (HW_DIR / "ascend910b2.toml").read_text()
    assert old in text
    p = tmp_path / "custom.toml"
    p.write_text(text.replace(old, new, 1).replace('name = "ascend910b2"', 'name = "custom"'))
    with pytest.raises(AscendirError) as e:
        load_target(p)
    assert str(e.value).startswith(f"target file {p}: {message}")


def test_required_keys_of_open_tables(tmp_path: Path):
    text = (HW_DIR / "ascend910b2.toml").read_text()
    p = tmp_path / "custom.toml"
    p.write_text(text.replace("k_per_cycle = { f16 = 16, ", "k_per_cycle = { "))  # was KeyError: 'f16' at run time
    with pytest.raises(AscendirError, match=r"custom.toml lacks key cube.k_per_cycle.f16"):
        load_target(p)
    p.write_text(text.replace("\nfix = 12 ", "\n# fix"))
    with pytest.raises(AscendirError, match=r"lacks key startup.fix"):
        load_target(p)
    p.write_text(text.replace("default = { bpc = 256, latency = 6 }", "default = { latency = 6 }"))
    with pytest.raises(AscendirError, match=r"target file .*custom.toml: vector.ops.default: needs"):
        load_target(p)


def test_cli_bad_target_is_one_line(tmp_path: Path):
    from cli_helpers import assert_clean_error, run_cli

    p = tmp_path / "custom.toml"
    p.write_text((HW_DIR / "ascend910b2.toml").read_text().replace("fractal_m = 16 ", "fractal_m = 0 "))
    model = Path(__file__).parent / "data" / "mlp_small" / "model.onnx"
    assert_clean_error(run_cli("run", model, "--timing-only", "--target", p), "cube.fractal_m = 0", str(p))


@pytest.mark.parametrize("old, new, message", [
    ('name = "ascend910b2" ', "name = 5 ", "chip.name = 5, must be a non-empty string"),  # was a report `report` rejects
    ('arch = "dav-c220" ', 'arch = "dav-xyz" ', "chip.arch = 'dav-xyz', must be one of dav-c220, dav-c100, dav-m200"),
    ("num_aiv = 48 ", "num_aiv = 47 ", "chip.num_aiv = 47, must be num_aic x aiv_per_aic = 24 x 2 = 48"),
    ("ub = 32 ", "ub = 3 ", "align.ub = 3, must be a power of two"),
    ("l0c = 64 ", "l0c = 96 ", "align.l0c = 96, must be a power of two"),
    ("fractal_m = 16 ", "fractal_m = 7 ", "cube.fractal_m = 7, must be 16"),
    ("fractal_n = 16 ", "fractal_n = 32 ", "cube.fractal_n = 32, must be 16"),
    ("hbm_bytes = 68719476736 ", "hbm_bytes = 1000 ", "memory.hbm_bytes = 1000, must be at least memory.l2_bytes = 201326592"),
    ('name = "ascend910b2" ', 'name = "ascend910a" ', "chip.name = 'ascend910a' is the name of the shipped target ascend910a.toml"),
])
def test_inconsistent_values_name_the_key_and_file(tmp_path: Path, old: str, new: str, message: str):
    """Values each valid on their own but impossible for a chip (or another chip's name on this
    chip's figures) fail on load, naming the key and the file."""
    text = (HW_DIR / "ascend910b2.toml").read_text()
    assert old in text
    p = tmp_path / "custom.toml"
    p.write_text(text.replace(old, new, 1).replace('name = "ascend910b2" ', 'name = "my910b2" ') if "name" not in old
                 else text.replace(old, new, 1))
    with pytest.raises(AscendirError) as e:
        load_target(p)
    assert str(e.value).startswith(f"target file {p}: {message}"), str(e.value)


def test_custom_copies_and_renamed_chips_load(tmp_path: Path):
    """A verbatim copy of a shipped file keeps its name; a changed file under a name of its own
    loads and reports that name."""
    text = (HW_DIR / "ascend910b2.toml").read_text()
    p = tmp_path / "copy.toml"
    p.write_text(text)
    assert load_target(p).name == "ascend910b2"
    p.write_text(text.replace('name = "ascend910b2" ', 'name = "my910b2" ').replace("clock_hz = 1.8e9 ", "clock_hz = 1.5e9 ", 1))
    assert load_target(p).name == "my910b2" and load_target(p).clock_hz == 1.5e9
    p.write_text(text.replace("clock_hz = 1.8e9 ", "clock_hz = 1.5e9 ", 1))
    with pytest.raises(AscendirError, match="is the name of the shipped target ascend910b2.toml"):
        load_target(p)


def test_cli_bad_arch_names_the_file(tmp_path: Path):
    from cli_helpers import assert_clean_error, run_cli

    p = tmp_path / "custom.toml"
    p.write_text((HW_DIR / "ascend910b2.toml").read_text().replace('arch = "dav-c220" ', 'arch = "dav-xyz" '))
    model = Path(__file__).parent / "data" / "mlp_small" / "model.onnx"
    # was: "target ascend910b2 has no rate for path l0c -> ub", naming neither the key nor the file
    assert_clean_error(run_cli("run", model, "--timing-only", "--target", p), "chip.arch = 'dav-xyz'", str(p))


def test_archs_are_the_lowered_ones():
    from ascendir.dialects.ascend import COPY_PATHS
    from ascendir.hardware.config import ARCHS

    assert set(ARCHS) == set(COPY_PATHS)


def _module(**attrs: str):
    from xdsl.dialects.builtin import ModuleOp

    from ascendir.dialects.ascend import Arch, ArchAttr, TargetAttr

    m = ModuleOp([])
    for k, v in attrs.items():
        m.attributes[k] = ArchAttr(Arch(v)) if k == "ascend.arch" else TargetAttr(v)
    return m


def _with_string_arch(m, arch: str):
    from xdsl.dialects.builtin import StringAttr

    m.attributes["ascend.arch"] = StringAttr(arch)
    return m


def test_module_target_follows_arch(monkeypatch: pytest.MonkeyPatch):
    """A module without ascend.target is planned for its arch's target (a 910A module was planned
    for the default 910B2); an explicit target or name still wins; a bad arch fails on one line."""
    from ascendir.transforms.ascend import plan_memory
    from ascendir.transforms.ascend.plan_memory import module_target

    assert module_target(_module(**{"ascend.arch": "dav-c100"})).name == "ascend910a"
    assert module_target(_module(**{"ascend.arch": "dav-m200"})).name == "ascend310p"
    assert module_target(_module(**{"ascend.arch": "dav-c220"})).name == "ascend910b2"  # the default has it
    assert module_target(_module()).name == "ascend910b2"
    assert module_target(_module(**{"ascend.arch": "dav-c100", "ascend.target": "ascend910a"})).name == "ascend910a"
    assert module_target(_module(**{"ascend.arch": "dav-c220"}), "ascend910b4").name == "ascend910b4"
    with pytest.raises(AscendirError, match=r'^ascend.arch = "dav-c100" must be one of #ascend.arch<"dav-c220">, '):
        module_target(_with_string_arch(_module(), "dav-c100"))  # the old spelling
    with monkeypatch.context() as mp:  # (every Arch has a shipped target)
        mp.setattr(plan_memory, "TARGETS", ["ascend910a", "ascend910b2"])
        with pytest.raises(AscendirError, match=r'^ascend.arch = #ascend.arch<"dav-m200"> is the arch of no shipped target \(they have dav-c100, dav-c220\)'):
            module_target(_module(**{"ascend.arch": "dav-m200"}))
    # several targets share the arch and the default is not one of them: no guess
    monkeypatch.setattr(plan_memory, "DEFAULT_TARGET", "ascend910a")
    with pytest.raises(AscendirError, match=r'^ascend.arch = #ascend.arch<"dav-c220"> is the arch of several shipped targets \(ascend910_93, ascend910b1, '):
        module_target(_module(**{"ascend.arch": "dav-c220"}))


@pytest.mark.parametrize("old, new, message", [
    ("clock_hz = 1.8e9 ", "clok_hz = 1.8e9 ", "unknown key chip.clok_hz ([chip] takes name, arch, clock_hz, "),
    ("l2_model = \"tile\" ", "l2_modle = \"tile\" ", "unknown key memory.l2_modle ([memory] takes hbm_bytes, "),
    ("l0c = 131072 ", "l0d = 131072 ", "unknown key buffers.l0d ([buffers] takes l1, l0a, l0b, l0c, ub, bt, fb)"),
    ("gm_to_l1 = 32 ", "gm_to_l9 = 32 ", "unknown key rates.gm_to_l9 (a rate is SRC_to_DST, each one of gm, l1, "),
    ("mte3 = 12 ", "mte4 = 12 ", "unknown key startup.mte4 ([startup] takes mte1, mte2, mte2_nd2nz, mte3, fix, "),
    ("vexp = { bpc = 128,", "vexpp = { bpc = 128,", "unknown key vector.ops.vexpp (not an ascend vector op, nor default)"),
    ("vexp = { bpc = 128,", "vexp = { bcp = 128,", "unknown key vector.ops.vexp.bcp (an entry takes bpc, bpc16, latency, k16, k32, b)"),
    ("queue_depth = 32 ", "queue_depht = 32 ", "unknown key sync.queue_depht ([sync] takes event_ids, queue_depth)"),
    ("[sync]", "[synk]", "unknown key synk (the tables are chip, memory, buffers, align, cube, rates, startup, vector, sync)"),
])
def test_unknown_keys_name_the_key_and_file(tmp_path: Path, old: str, new: str, message: str):
    """A key no code reads (a misspelt one, whose figure a default or nothing then replaced
    silently) fails on load, naming the key and the file."""
    text = (HW_DIR / "ascend910b2.toml").read_text()
    assert old in text
    p = tmp_path / "custom.toml"
    p.write_text(text.replace(old, new, 1).replace('name = "ascend910b2" ', 'name = "my910b2" '))
    with pytest.raises(AscendirError) as e:
        load_target(p)
    assert str(e.value).startswith(f"target file {p}: {message}"), str(e.value)


def test_cli_unknown_key_is_one_line(tmp_path: Path):
    from cli_helpers import assert_clean_error, run_cli

    p = tmp_path / "custom.toml"
    p.write_text((HW_DIR / "ascend910b2.toml").read_text().replace("clock_hz = 1.8e9 ", "clok_hz = 1.8e9 ", 1))
    model = Path(__file__).parent / "data" / "mlp_small" / "model.onnx"
    assert_clean_error(run_cli("run", model, "--timing-only", "--target", p), "unknown key chip.clok_hz", str(p))
