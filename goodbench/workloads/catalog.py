"""The catalogue of ready-made workload files that ship inside goodbench (goodbench/data/workloads/, the same files as
the repository's workloads/): usable by name wherever a workload file is, e.g. `--workload hol-stress`,
`gb.load_workload("hol-stress")`, and listed by `goodbench workloads`."""

from __future__ import annotations

import difflib
import importlib.resources
import os

from ..errors import InputError
from .parse import parse_workload
from .spec import WorkloadSpec


def _folder():
    return importlib.resources.files("goodbench").joinpath("data", "workloads")


def names() -> list[str]:
    """The built-in workloads' names, sorted."""
    return sorted(p.name[:-5] for p in _folder().iterdir() if p.name.endswith(".toml"))


def builtin_name(source: str) -> str | None:
    """The built-in workload `source` names (`hol-stress` or `hol-stress.toml`), else None."""
    name = source[:-5] if source.endswith(".toml") else source
    return name if name in names() else None


def read(name: str) -> tuple[str, str]:
    """(TOML text, path) of a built-in workload."""
    f = _folder().joinpath(name + ".toml")
    return f.read_text(encoding="utf-8"), str(f)


def missing_file_hint(path: str) -> str:
    """What to say when a workload file does not exist: the built-in of the same name, a close name,
    or the list."""
    base = os.path.basename(path)
    stem = base[:-5] if base.endswith(".toml") else base
    if stem in names():
        return f"; the built-in workload of that name is `--workload {stem}`"
    close = [n for n in names() if stem and n.startswith(stem)][:1] or difflib.get_close_matches(stem, names(), n=1)
    if close:
        return f"; did you mean the built-in workload `{close[0]}`?"
    return f"; built-in workloads: {', '.join(names())} (goodbench workloads)"


def resolve(source: str) -> tuple[str, str]:
    """(TOML text, path) for a workload file path or a built-in workload's name. A file that exists
    wins over a built-in of the same name."""
    if os.path.exists(source):
        try:
            with open(source, encoding="utf-8") as f:
                return f.read(), source
        except OSError as e:
            raise InputError(f"{source}: cannot read workload file: {e.strerror}") from None
        except UnicodeDecodeError as e:
            raise InputError(f"{source}: not UTF-8 text (byte {e.start}): a workload file is TOML") from None
    name = builtin_name(source) if os.sep not in source and "/" not in source else None
    if name:
        return read(name)
    raise InputError(f"{source}: no such workload file{missing_file_hint(source)}")


def about(text: str) -> str:
    """A workload file's leading comment, joined: what it models."""
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    return " ".join(lines)


def catalogue() -> list[tuple[str, object, str]]:
    """(name, WorkloadSpec, what it models) for every built-in workload."""
    out = []
    for name in names():
        text, path = read(name)
        out.append((name, parse_workload(text, path), about(text)))
    return out


def load_workload(source: str) -> WorkloadSpec:
    """A workload file, or a built-in workload by name (`hol-stress`)."""
    text, path = resolve(source)
    return parse_workload(text, path)
