"""Configuration fields that carry their own command-line flag: `knob()` declares a field with its help,
choices and flag names; `to_argv` turns a config back into those flags; `field_kind` says what a flag's
value parses to. EngineConfig and ClusterSpec are declared this way, so the CLI's arguments, their
defaults and the argv of a child `goodbench serve` all come from one place."""

from __future__ import annotations

from dataclasses import field, fields


def knob(default, help: str, choices: tuple | None = None, flags: tuple = (), cli: bool = True):
    """A config field with what its flag needs. cli=False: no flag of its own (set through another,
    e.g. --disaggregate P:D sets prefill and decode)."""
    return field(default=default, metadata={"help": help, "choices": choices, "flags": flags, "cli": cli})


def flag_fields(cls) -> list:
    """The fields of a knob dataclass that have a flag of their own."""
    return [f for f in fields(cls) if f.init and f.metadata.get("cli", True)]


def flag_names(f) -> tuple:
    """A field's flags: its own, or --the-field-name."""
    return f.metadata.get("flags") or ("--" + f.name.replace("_", "-"),)


def field_kind(cls, name: str) -> type:
    """bool, int, float or str: what a knob's command-line value parses to."""
    t = str(next(f.type for f in fields(cls) if f.name == name))
    return bool if "bool" in t else int if "int" in t else float if "float" in t else str


def to_argv(obj, skip_defaults: bool = False) -> list[str]:
    """A knob dataclass as its flags (None fields are left to the other side's defaults; with
    skip_defaults, fields at their default too)."""
    out = []
    for f in flag_fields(type(obj)):
        v = getattr(obj, f.name)
        if v is None or (skip_defaults and v == f.default):
            continue
        flag = flag_names(f)[0]
        if isinstance(v, bool):
            out.append(flag if v else "--no-" + flag[2:])
        else:
            out += [flag, str(v)]
    return out
