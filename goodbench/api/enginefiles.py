"""The engine's files, read once at the edge: a calibration profile and a model file are read here and
handed to the engine with its config (EngineConfig.files), so the engine core reads no files
(tests/test_layers.py keeps it so); price files too. `resolve_engine` is what every API function and the
CLI resolve a config with: the files read, the knobs checked, a contradiction with the profile's server
refused (EngineConfig.check_server), the same for the library as for the command line."""

from __future__ import annotations

import csv
import json
from dataclasses import replace

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from ..engine.config import EngineConfig, EngineFiles
from ..engine.hfconfig import model_from_hf
from ..engine.models import Model, is_model_file, model_from_toml
from ..engine.profile import Profile, profile_from_toml
from ..errors import InputError


def read_toml(path: str, what: str) -> dict:
    """One of the engine's TOML files (a model shape, a calibration profile); InputError naming the file."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise InputError(f"{path}: cannot read {what}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{path}: not valid TOML: {e}") from None
    except UnicodeDecodeError as e:  # TOML is UTF-8; tomllib lets the decoder's error through
        raise InputError(f"{path}: not valid TOML: not UTF-8 text (byte {e.start}: {e.reason})") from None


def load_profile(path: str) -> Profile:
    """A calibration profile file (goodbench calibrate); InputError naming the file and key when it is not one."""
    return profile_from_toml(read_toml(path, "calibration profile"), path)


def load_model_file(path: str) -> Model:
    """A model shape from a TOML file (models.model_from_toml says what it holds) or a Hugging Face config.json
    (engine/hfconfig.py: the standard keys of the families it reads)."""
    if not path.endswith(".json"):
        return model_from_toml(read_toml(path, "model file"), path)
    try:
        with open(path, "rb") as f:
            d = json.loads(f.read())
    except OSError as e:
        raise InputError(f"{path}: cannot read model config: {e.strerror}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: not a JSON config.json: {e}") from None
    if not isinstance(d, dict):
        raise InputError(f"{path}: not a config.json (a JSON object of the model's keys)")
    return model_from_hf(d, path)


def load_price_file(path: str) -> dict[str, float]:
    """A TOML table (`h100-sxm = 2.5`, or `[h100-sxm] usd_per_hour = 2.5`) or a CSV with columns gpu,
    usd_per_hour."""
    try:
        if path.endswith(".csv"):
            with open(path, newline="", encoding="utf-8") as f:
                return {r["gpu"].strip().lower(): float(r["usd_per_hour"]) for r in csv.DictReader(f)}
        with open(path, "rb") as f:
            d = tomllib.load(f)
        return {k.lower(): float(v["usd_per_hour"] if isinstance(v, dict) else v) for k, v in d.items()}
    except OSError as e:
        raise InputError(f"{path}: cannot read price file: {e.strerror}") from None
    except (KeyError, ValueError, TypeError, tomllib.TOMLDecodeError) as e:
        raise InputError(f"{path}: price file needs gpu -> usd_per_hour numbers ({e})") from None


def with_files(cfg: EngineConfig) -> EngineConfig:
    """The config with the files its knobs name read and attached (EngineConfig.files); a file it already
    carries for the same path is not read again, so each is read once however often a config is passed on."""
    had = cfg.files or EngineFiles()
    files = had
    if cfg.calibration and (had.profile is None or had.calibration != cfg.calibration):
        files = replace(files, calibration=cfg.calibration, profile=load_profile(cfg.calibration))
    if is_model_file(cfg.model) and (had.model is None or had.model_file != cfg.model):
        files = replace(files, model_file=cfg.model, model=load_model_file(cfg.model))
    return cfg if files is had else replace(cfg, files=files)


def resolve_engine(cfg: EngineConfig | None) -> EngineConfig:
    """A config as the engine runs it: its files read once (with_files), every default filled in, every
    knob checked and a knob that contradicts a calibration profile's server refused (UsageError)."""
    return with_files(cfg or EngineConfig()).resolved()
