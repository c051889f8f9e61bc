"""Resolve once (issue 39): the engine's files are read once at the edge (api/enginefiles.py) and carried
with the config, and a config that contradicts its calibration profile's server is refused in resolution,
by the library as by the CLI, with the same line."""

import builtins
from dataclasses import replace

import pytest
from test_profile import write

import goodbench as gb
from goodbench.api.enginefiles import load_profile, resolve_engine, with_files
from goodbench.cli import main
from goodbench.engine.config import EngineConfig
from goodbench.engine.core import Engine
from goodbench.errors import UsageError

H100 = {"gpu": "h100-sxm", "tensor_parallel_size": 1, "num_gpu_blocks": 4000, "block_size": 16, "max_num_seqs": 16}
A100 = H100 | {"gpu": "a100-80g-sxm"}
TINY = 'name = "tiny"\nlayers = 2\nhidden = 256\nheads = 4\nkv_heads = 2\nffn = 512\nvocab = 1000\n'


def cli_error(capsys, *argv) -> str:
    """The one line `goodbench ...` refuses with (exit 2), run in this process."""
    assert main(list(argv)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("goodbench: error: ") and "Traceback" not in err, err
    return err.removeprefix("goodbench: error: ")


def test_the_library_refuses_a_gpu_its_h100_profile_contradicts_with_the_clis_line(tmp_path, capsys):
    """EngineConfig(gpu="a100-80g-sxm", calibration=<an H100 profile>) was silently relabelled H100 by the
    library while the CLI refused --gpu a100-80g-sxm; now both refuse, with one message."""
    prof = write(tmp_path, engine=H100)
    wl = gb.load_workload("mixed-long-short", num_prompts=3)
    with pytest.raises(UsageError, match="one server's calibration") as lib:
        gb.simulate(wl, EngineConfig(gpu="a100-80g-sxm", calibration=prof), result_dir=str(tmp_path))
    with pytest.raises(UsageError, match="--gpu a100-80g-sxm"):
        resolve_engine(EngineConfig(gpu="a100-80g-sxm", calibration=prof))
    flags = ("simulate", "--workload", "mixed-long-short", "--num-prompts", "3", "--result-dir", str(tmp_path))
    assert cli_error(capsys, *flags, "--gpu", "a100-80g-sxm", "--calibration", prof) == str(lib.value)
    assert not list(tmp_path.glob("*/run.json"))  # refused before any run started


def test_a_default_named_by_the_user_is_refused_and_one_left_alone_is_the_profiles(tmp_path):
    """gpu="h100-sxm" written out is the user's choice (refused against an A100 profile, as the CLI refuses
    --gpu h100-sxm); gpu left at its default is the profile's server, in the library as on the CLI."""
    prof = write(tmp_path, engine=A100)
    with pytest.raises(UsageError, match="--gpu h100-sxm"):
        resolve_engine(EngineConfig(gpu="h100-sxm", calibration=prof))
    cfg = resolve_engine(EngineConfig(calibration=prof, max_num_seqs=8))
    assert (cfg.gpu, cfg.tensor_parallel_size, cfg.max_num_seqs) == ("a100-80g-sxm", 1, 8)
    assert (
        resolve_engine(EngineConfig(gpu="A100-80G-SXM", kv_cache_dtype="bf16", calibration=prof)).gpu == "a100-80g-sxm"
    )
    assert resolve_engine(replace(cfg, max_num_seqs=4)).max_num_seqs == 4  # a resolved config passed on
    with pytest.raises(UsageError, match="--tensor-parallel-size 1"):
        resolve_engine(
            EngineConfig(tensor_parallel_size=1, calibration=write(tmp_path, engine=A100 | {"tensor_parallel_size": 2}))
        )
    assert EngineConfig().to_dict()["gpu"] == "h100-sxm" and type(EngineConfig().to_dict()["gpu"]) is str


def test_the_engine_reads_no_file_a_config_names(tmp_path):
    """A config whose profile or model file was never read is refused by the engine with a pointer to the
    API, which reads it; one read at the edge serves every resolution after it."""
    prof = write(tmp_path, engine=H100)
    (tmp_path / "tiny.toml").write_text(TINY)
    with pytest.raises(UsageError, match="has not been read"):
        Engine(EngineConfig(calibration=prof))
    with pytest.raises(UsageError, match="has not been read"):
        EngineConfig(model=str(tmp_path / "tiny.toml")).resolved()
    cfg = with_files(EngineConfig(calibration=prof, model=str(tmp_path / "tiny.toml"), gpu="l4"))
    assert cfg.profile() == load_profile(prof) and cfg.shape().name == "tiny"
    assert with_files(cfg) is cfg  # already carried: nothing to read
    with pytest.raises(UsageError, match="has not been read"):  # another file than the one read
        replace(cfg, calibration=str(tmp_path / "other.toml")).profile()


@pytest.fixture
def opens(monkeypatch):
    """How often each path is opened in this process."""
    counts: dict[str, int] = {}
    real = builtins.open

    def counting(file, *a, **kw):
        counts[str(file)] = counts.get(str(file), 0) + 1
        return real(file, *a, **kw)

    monkeypatch.setattr(builtins, "open", counting)
    return counts


def test_a_profile_and_a_model_file_are_read_once_per_run(tmp_path, opens, capsys):
    """simulate through the library and through the CLI: the calibration profile and the model file are
    each opened once, however many places (resolution, the cost model, the run's notes) use them."""
    prof = write(tmp_path, engine={"num_gpu_blocks": 4000, "block_size": 16, "max_num_seqs": 16})
    model = str(tmp_path / "tiny.toml")
    (tmp_path / "tiny.toml").write_text(TINY)
    wl = gb.load_workload("mixed-long-short", num_prompts=3)
    opens.clear()
    gb.simulate(wl, EngineConfig(calibration=prof, model=model, gpu="l4"), result_dir=str(tmp_path / "lib"))
    assert (opens.get(prof), opens.get(model)) == (1, 1), opens
    opens.clear()
    argv = ["simulate", "--workload", "mixed-long-short", "--num-prompts", "3", "--gpu", "l4", "--calibration", prof]
    assert main([*argv, "--engine-model", model, "--result-dir", str(tmp_path / "cli")]) == 0
    assert (opens.get(prof), opens.get(model)) == (1, 1), opens
    capsys.readouterr()


def test_advise_takes_a_model_files_shape_from_the_config(tmp_path):
    (tmp_path / "tiny.toml").write_text(TINY)
    a = gb.advise(EngineConfig(model=str(tmp_path / "tiny.toml"), gpu="l4"), 500.0, 2000)
    assert a.chunk >= 256
