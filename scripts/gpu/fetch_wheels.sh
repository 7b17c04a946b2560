#!/usr/bin/env bash
# Downloads scripts/gpu/wheels.txt's wheels into DEST (default .whl/, what a device call carries) and
# scripts/gpu/stack_wheels.txt's into STACK_DEST (default .whl-stack/, what only `make test-gpu-stack`
# installs), for an x86-64 Linux machine's Python PY_VERSION (default 3.12, the lent GPU machines'), on a
# machine that reaches PyPI. antlr4-python3-runtime 4.9.3 (what omegaconf 2.3 takes) is published as a
# source archive only: pure Python, so it is built into a wheel here.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
DEST=${DEST:-.whl}
STACK_DEST=${STACK_DEST:-.whl-stack}
PY_VERSION=${PY_VERSION:-3.12}
platforms=()
for tag in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 \
    manylinux1_x86_64; do
    platforms+=(--platform "$tag")
done

# fetch LIST FOLDER: the list's wheels, and only those, into the folder.
fetch() {
    local list=$1 dest=$2 sdist=antlr4-python3-runtime
    mkdir -p "$dest"
    # Only the list's wheels: session.sh and test_stack.sh install every wheel in the folder, and two
    # versions of one package (a pin changed since the last download) stop pip's whole install. pip's cache
    # makes the download again cheap.
    rm -f "$dest"/*.whl
    grep -v -e '^#' -e '^$' -e "^$sdist" "$list" >"$dest/requirements.txt"
    "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --python-version "$PY_VERSION" \
        --implementation cp "${platforms[@]}" -d "$dest" -r "$dest/requirements.txt"
    rm "$dest/requirements.txt"
    if grep -q "^$sdist" "$list"; then
        "$PYTHON" -m pip wheel --quiet --no-deps -w "$dest" "$(grep "^$sdist" "$list")"
    fi
    echo "$(ls "$dest"/*.whl | wc -l) wheels, $(du -cb "$dest"/*.whl | tail -1 | cut -f1) bytes, in $dest"
}

fetch scripts/gpu/wheels.txt "$DEST"
fetch scripts/gpu/stack_wheels.txt "$STACK_DEST"
