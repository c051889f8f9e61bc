"""DESIGN.md's layering, made executable: each module imports only from lower layers or siblings in its
own package, and `import goodbench` stays light (no locust/gevent, matplotlib, datasets)."""

import ast
import os
import subprocess
import sys

from conftest import ROOT

PKG = os.path.join(ROOT, "goodbench")
# lower number = lower layer
LAYERS = {
    "records": 0, "engine": 0, "client": 0, "columnar": 0.5, "analysis.stats": 0.5, "analysis.hol": 0.7,  # pure, below metrics  # package __init__ files hold no code
    "serverproc": 3,
    "arrivals": 1, "client.sse": 1, "client.stream": 1, "gcquiet": 1, "pacing": 1, "metrics": 1, "gate": 1, "tokenizer": 1,
    "engine.config": 1, "engine.kvcache": 1, "engine.scheduler": 1, "engine.hardware": 1,
    "engine.costmodel": 1, "engine.promtext": 1,
    "client.openai": 2, "store": 2, "workloads": 2, "engine.core": 2,
    "runner": 3, "engine.server": 3, "engine.simulate": 3, "interop": 3,
    "analysis": 4, "report": 4, "cli_analysis": 4.5,  # command handlers only cli imports
    "cli": 5, "integrations": 5, "__main__": 6,
}


def layer_of(mod: str) -> tuple[int, str]:
    parts = mod.split(".")
    for n in range(len(parts), 0, -1):
        key = ".".join(parts[:n])
        if key in LAYERS:
            return LAYERS[key], parts[0]
    raise AssertionError(f"module {mod} has no layer in DESIGN.md's table: add it")


def modules():
    for dirpath, _, files in os.walk(PKG):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(dirpath, f), PKG)[:-3].replace(os.sep, ".")
                yield rel.removesuffix(".__init__") if rel != "__init__" else "", os.path.join(dirpath, f)


def imports(path: str, mod: str):
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    pkg = mod.split(".")[:-1] if not path.endswith("__init__.py") else mod.split(".")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[: len(pkg) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
                names = [target] if node.module else [".".join(base + [a.name]) for a in node.names]
                yield from names
            elif node.module and node.module.startswith("goodbench"):
                yield node.module.removeprefix("goodbench").lstrip(".")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("goodbench."):
                    yield a.name.removeprefix("goodbench.")


def test_imports_respect_layers():
    bad = []
    for mod, path in modules():
        if mod in ("",):
            continue
        lm, pm = layer_of(mod)
        for target in imports(path, mod):
            if not target:
                continue  # `from .. import __version__`
            try:
                lt, pt = layer_of(target)
            except AssertionError:
                continue
            same_package = pm == pt and os.path.isdir(os.path.join(PKG, pm))
            if lt > lm or (lt == lm and not same_package and target != mod):
                bad.append(f"{mod} (layer {lm}) imports {target} (layer {lt})")
    assert not bad, "\n".join(bad)


def test_nothing_imports_cli():
    for mod, path in modules():
        if mod in ("cli", "__main__"):
            continue
        assert "cli" not in [t.split(".")[0] for t in imports(path, mod)], mod


def test_import_goodbench_is_light():
    code = ("import sys, goodbench, goodbench.metrics, goodbench.runner, goodbench.engine.core; "
            "heavy = [m for m in ('locust', 'gevent', 'matplotlib', 'datasets', 'torch', 'transformers') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
