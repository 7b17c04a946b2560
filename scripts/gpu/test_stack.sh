#!/usr/bin/env bash
# The test suite on the lent GPU machines' software stack, without a GPU: a Python 3.12 environment
# (GPU_STACK_VENV, default .venv-gpu-stack) with scripts/gpu/stack.txt's packages from PyPI, then the carried
# wheels (.whl/, `make gpu-wheels`) and the project installed by scripts/gpu/session.sh's own `install` stage
# (--no-index --no-deps, torch left as it is), then the wheels only the suite needs (.whl-stack/, the same
# way), then pytest with ARGS. PYTHON312 names the interpreter (default: python3.12 on the PATH, else
# pyenv's).
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${GPU_STACK_VENV:-.venv-gpu-stack}
is_312() { "$1" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; }
if [[ -z "${PYTHON312:-}" ]]; then
    for candidate in python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python3.12; do
        if is_312 "$candidate"; then
            PYTHON312=$candidate
            break
        fi
    done
fi
if [[ -z "${PYTHON312:-}" ]] || ! is_312 "$PYTHON312"; then
    echo "test-gpu-stack needs a Python 3.12 (the GPU machines' version):" \
        "set PYTHON312=/path/to/python3.12" >&2
    exit 2
fi
echo "Python 3.12: $PYTHON312"
stamp="$VENV/.stack-installed"
if [[ ! -f "$stamp" || scripts/gpu/stack.txt -nt "$stamp" ]]; then
    "$PYTHON312" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet -r scripts/gpu/stack.txt
    touch "$stamp"
fi
OUT=$VENV/session PYTHON=$VENV/bin/python bash scripts/gpu/session.sh install
"$VENV/bin/python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl-stack/*.whl
"$VENV/bin/python" -m pytest -q "$@"
