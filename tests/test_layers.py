"""The layering of docs/architecture.md, made executable: each module imports only from lower layers or siblings in its
own package, and `import goodbench` stays light (no locust/gevent, matplotlib, datasets)."""

import ast
import os
import subprocess
import sys

from conftest import ROOT

PKG = os.path.join(ROOT, "goodbench")
# lower number = lower layer; docs/architecture.md draws the same picture
LAYERS = {
    "version": 0, "errors": 0,                                                       # stdlib only
    "records": 1,                                                                   # the record types
    "arrivals": 2, "columnar": 2, "client.sse": 2, "eventloop": 2, "gcquiet": 2, "pacing": 2, "tokenizer": 2, "limits": 2,
    "engine": 2, "engine.hardware": 2, "engine.config": 2, "engine.kvcache": 2, "engine.scheduler": 2,
    "engine.costmodel": 2, "engine.promtext": 2, "engine.core": 2, "client": 2,     # pure
    "engine.links": 2, "engine.prices": 2, "engine.router": 2, "engine.adaptive": 2, "servermetrics": 2,
    "metrics": 3, "gating": 3, "client.stream": 3,                                  # pure, above the columns
    "client.openai": 4, "client.lean": 4, "client.target": 4, "store": 4, "workloads": 4, "serverproc": 4,   # I/O edges
    "rundir": 5, "engine.launch": 5,                                                # a run directory; a child engine
    "runner": 6, "engine.server": 6, "engine.simulate": 6, "interop": 6,            # drive one run
    "engine.calibration": 6, "engine.cluster": 6,                                   # replay points; clusters
    "engine.steploop": 6, "engine.servecluster": 6,                                 # real-clock instances
    "analysis": 7, "report": 7,                                                     # compose runs, render
    "api": 8, "": 8,                                                                # the public API (and its facade)
    "cli": 9, "integrations": 9,                                                    # nothing imports them
    "__main__": 10,
}


def layer_of(mod: str) -> tuple[int, str]:
    parts = mod.split(".")
    for n in range(len(parts), 0, -1):
        key = ".".join(parts[:n])
        if key in LAYERS:
            return LAYERS[key], parts[0]
    raise AssertionError(f"module {mod} has no layer in LAYERS: add it (and to docs/architecture.md)")


def modules():
    for dirpath, _, files in os.walk(PKG):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(dirpath, f), PKG)[:-3].replace(os.sep, ".")
                yield rel.removesuffix(".__init__") if rel != "__init__" else "", os.path.join(dirpath, f)


def imports(path: str, mod: str):
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    if path.endswith("__init__.py"):
        pkg = mod.split(".") if mod else []
    else:
        pkg = mod.split(".")[:-1]
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
        lm, pm = layer_of(mod)
        for target in imports(path, mod):
            lt, pt = layer_of(target)
            same_package = pm == pt and os.path.isdir(os.path.join(PKG, pm))
            if lt > lm or (lt == lm and not same_package and target != mod):
                bad.append(f"{mod} (layer {lm}) imports {target} (layer {lt})")
    assert not bad, "\n".join(bad)


def test_nothing_imports_cli():
    for mod, path in modules():
        if mod == "__main__" or mod.split(".")[0] == "cli":
            continue
        assert "cli" not in [t.split(".")[0] for t in imports(path, mod)], mod


def test_import_goodbench_is_light():
    code = ("import sys, goodbench, goodbench.metrics, goodbench.runner, goodbench.engine.core; "
            "heavy = [m for m in ('locust', 'gevent', 'matplotlib', 'datasets', 'torch', 'transformers') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
