#!/usr/bin/env bash
# The project's own first-contact check (run by .ci/run): a user who already has current pytest and
# regex installs goodbench with a plain, non-editable `pip install` and uses it from an empty folder.
#  1. nothing already installed is downgraded or removed (the old default tokenizer's package pinned
#     pytest==7.3.1 and regex==2023.6.3); `pip check` finds no broken requirement;
#  2. the README's examples that need no checkout run from an empty directory: built-in workloads by
#     name, the packaged locustfile, the Python API example, the quick-start command (simulated, fast).
# Usage: ci/check_install.sh [PYTHON]   (default python3). Needs only the package registry.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
py="${1:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$py" -m venv "$work/venv"
. "$work/venv/bin/activate"
python -m pip install --quiet --upgrade pip
python -m pip install --quiet --upgrade pytest regex        # what a user already has: the current releases
before="$(python -m pip freeze --all | sort)"
python -m pip install --quiet "$root"                       # not editable: package data must ship
after="$(python -m pip freeze --all | sort)"
changed="$(comm -23 <(echo "$before") <(echo "$after"))"
if [ -n "$changed" ]; then
  echo "installing goodbench changed or removed packages the user had:" >&2
  echo "$changed" >&2
  exit 1
fi
python -m pip check
echo "install: nothing downgraded or removed ($(echo "$before" | grep -iE '^(pytest|regex)==' | tr '\n' ' '))"

mkdir "$work/empty" && cd "$work/empty"
export GOODBENCH_CACHE_DIR="$work/cache"
goodbench --version
goodbench workloads > /dev/null
goodbench workloads hol-stress > my.toml && goodbench simulate --workload my.toml --quiet > /dev/null
test -f "$(goodbench locustfile)"
goodbench simulate --workload hol-stress --no-enable-chunked-prefill --quiet > /dev/null
goodbench simulate --dataset-name mixed --num-prompts 50 --quiet > /dev/null
goodbench engine explain --gpu h100-sxm --engine-model llama-3.1-8b --prefill 4096 --decode 32x1000 > /dev/null
goodbench run --workload mixed-long-short --num-prompts 20 --quiet > /dev/null   # the quick start, shortened
GB_ROOT="$root" python - <<'PY'
import os, re
readme = open(os.path.join(os.environ["GB_ROOT"], "README.md"), encoding="utf-8").read()
code = re.search(r"## Python API.*?```python\n(.*?)```", readme, re.S).group(1)
exec(compile(code, "README.md (Python API)", "exec"))
PY
echo "README examples ran from an empty directory with a non-editable install"
