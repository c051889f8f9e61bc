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
    "version": 0,
    "errors": 0,  # stdlib only
    "records": 1,  # the record types
    "limits": 1,  # the one table of numeric limits (stdlib only)
    "redact": 1,
    "jsonlines": 1,  # strict JSON-lines input files (stdlib and errors only)  # secrets scrubbed from what is stored or printed (stdlib only)
    "arrivals": 2,
    "columnar": 2,
    "client.sse": 2,
    "client.apis": 2,
    "client.events": 2,
    "eventloop": 2,
    "gcquiet": 2,
    "pacing": 2,
    "tokenizer": 2,
    "proctree": 2,  # the owner of every child process
    "prometheus": 2,
    "client": 2,
    "client.config": 2,  # pure building blocks
    "engine": 2,
    "engine.hardware": 2,
    "engine.knobs": 2,
    "engine.config": 2,
    "engine.kvcache": 2,
    "engine.scheduler": 2,
    "engine.costmodel": 2,
    "engine.opdata": 2,
    "engine.opderive": 4,  # a build step: opdata.py derived from Vidur's CSV files (reads them)
    "engine.opmodel": 2,
    "engine.profile": 2,
    "engine.frontend": 2,
    "engine.jitter": 2,
    "engine.uncertainty": 2,
    "engine.core": 2,
    "engine.links": 2,
    "engine.prices": 2,
    "engine.router": 2,
    "engine.adaptive": 2,
    "engine.layout": 2,  # the engine's pure core
    "engine.serve.openai_api": 2,
    "engine.serve.apishapes": 2,
    "engine.serve.apistreams": 2,
    "engine.serve.promtext": 2,  # request/response shapes
    "metrics": 3,
    "gating": 3,
    "client.stream": 3,  # pure, above the columns
    "client.unary": 3,
    "client.aiohttp_client": 4,
    "client.lean": 4,
    "client.conn": 4,  # a keep-alive connection: asyncio Protocol, or a raw socket with kernel stamps
    "client.lag": 2,  # the client's self-check: lag histograms, the loop probe
    "client.target": 4,
    "store": 4,
    "workloads": 4,
    "serverproc": 4,  # I/O edges
    "history": 4,  # the run catalogue (SQLite), its scans and queries
    "history.provenance": 2,
    "history.identity": 3,
    "history.changepoint": 3,
    "history.verdict": 3,  # pure: identity, change points, the verdict against a series
    "llmd": 4,  # the llm-d Benchmark Report mapping (and the distributions from a run's records)
    "client.serverinfo": 4,  # what the target says about itself
    "rundir": 5,
    "engine.serve.launch": 5,  # a run directory; a child engine
    "runner": 6,
    "interop": 6,  # drive one run: real clock
    "engine.virtual": 6,  # virtual clock (and calibration)
    "engine.serve": 6,  # the engine server: real clock
    "analysis": 7,
    "report": 7,  # compose runs, render
    "api": 8,  # api.enginefiles: the engine's files (profiles, model and price files), read once
    "": 8,  # the public API (and its facade)
    "cli": 9,
    "integrations": 9,  # nothing imports them
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
    code = (
        "import sys, goodbench, goodbench.metrics, goodbench.runner, goodbench.engine.core; "
        "heavy = [m for m in ('locust', 'gevent', 'matplotlib', 'datasets', 'torch', 'transformers') "
        "if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def _graph() -> dict[str, set[str]]:
    """module -> the package modules it imports (function-local imports included; `from pkg import sub`
    counts as importing pkg.sub when sub is a module)."""
    mods = dict(modules())
    graph = {}
    for mod, path in mods.items():
        out = set()
        for target in imports(path, mod):
            out.add(
                target if target in mods else target.rsplit(".", 1)[0] if target.rsplit(".", 1)[0] in mods else target
            )
        graph[mod] = {t for t in out if t in mods and t != mod}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    """No two modules import each other, directly or around a loop, even inside functions."""
    assert _cycles(_graph()) == []


def test_the_cycle_check_can_fail():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]


def test_no_module_over_500_lines_and_no_function_over_60():
    long_modules, long_functions = [], []
    for mod, path in modules():
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if text.count("\n") > 500:
            long_modules.append(mod)
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > 60:
                long_functions.append(f"{mod}.{node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert not long_modules and not long_functions, long_modules + long_functions


# The engine's pure core (its layer-2 modules) reads and writes no files: a calibration profile, a model
# file and a price file are read once at the edge (api/enginefiles.py) and handed to it as values.
FILE_MODULES = ("tomllib", "tomli", "gzip", "bz2", "lzma", "zipfile", "tarfile", "pickle", "shelve", "shutil")
FILE_MODULES += ("sqlite3", "glob", "pathlib", "tempfile", "fileinput", "io", "importlib.resources")
FILE_CALLS = {"open", "read_text", "read_bytes", "write_text", "write_bytes", "load", "dump", "loadtxt", "savetxt"}
FILE_CALLS |= {"genfromtxt", "fromfile", "tofile", "save", "savez", "savez_compressed", "DictReader", "DictWriter"}
OS_CALLS = {
    "listdir",
    "scandir",
    "walk",
    "exists",
    "isfile",
    "isdir",
    "getsize",
    "stat",
    "remove",
    "unlink",
    "makedirs",
}
OS_CALLS |= {"mkdir", "rename", "replace", "rmdir", "chdir", "getcwd"}  # called on os or os.path


def file_io(tree: ast.AST) -> list[str]:
    """Each import of a file module and each call of a file function in this tree ("line N: what")."""
    out = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        out += [
            f"line {node.lineno}: import {n}" for n in names if n in FILE_MODULES or n.split(".")[0] in FILE_MODULES
        ]
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            on = ast.unparse(f.value) if isinstance(f, ast.Attribute) else ""
            if name in FILE_CALLS or (name in OS_CALLS and on in ("os", "os.path")):
                out.append(f"line {node.lineno}: {name}()")
    return out


def test_the_engine_core_does_no_file_io():
    core = [(mod, path) for mod, path in modules() if mod.split(".")[0] == "engine" and layer_of(mod)[0] == 2]
    assert len(core) >= 20  # every module of the core is looked at (the table names them)
    bad = {}
    for mod, path in core:
        with open(path, encoding="utf-8") as f:
            found = file_io(ast.parse(f.read()))
        if found:
            bad[mod] = found
    assert not bad, bad


def test_the_file_io_check_can_fail():
    code = (
        "import tomllib\nfrom importlib import resources\nwith open(p) as f:\n    json.load(f)\nPath(p).read_text()\n"
    )
    found = ["line 1: import tomllib", "line 2: import importlib.resources", "line 3: open()", "line 4: load()"]
    assert sorted(file_io(ast.parse(code))) == found + ["line 5: read_text()"]
    assert file_io(ast.parse("os.makedirs(d)\nif os.path.exists(p):\n    pass\n")) == [
        "line 1: makedirs()",
        "line 2: exists()",
    ]
    assert file_io(ast.parse("import os\nx = os.path.basename(p)\ny = json.loads(s)\nq.remove(r)\n")) == []
