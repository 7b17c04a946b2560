#!/usr/bin/env bash
# Downloads scripts/gpu/wheels.txt's wheels for an x86-64 Linux machine's Python PY_VERSION (default 3.12, the
# lent GPU machines') into DEST (default .whl/), on a machine that reaches PyPI. antlr4-python3-runtime 4.9.3
# (what omegaconf 2.3 takes) is published as a source archive only: pure Python, so it is built into a wheel
# here.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
DEST=${DEST:-.whl}
PY_VERSION=${PY_VERSION:-3.12}
mkdir -p "$DEST"
# Only this list's wheels: session.sh installs every wheel in DEST, and two versions of one package (a pin
# changed since the last download) stop pip's whole install. pip's cache makes the download again cheap.
rm -f "$DEST"/*.whl
platforms=()
for tag in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 \
    manylinux1_x86_64; do
    platforms+=(--platform "$tag")
done
grep -v -e '^#' -e '^$' -e '^antlr4-python3-runtime' scripts/gpu/wheels.txt >"$DEST/requirements.txt"
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --python-version "$PY_VERSION" \
    --implementation cp "${platforms[@]}" -d "$DEST" -r "$DEST/requirements.txt"
antlr=$(grep '^antlr4-python3-runtime' scripts/gpu/wheels.txt)
"$PYTHON" -m pip wheel --quiet --no-deps -w "$DEST" "$antlr"
rm "$DEST/requirements.txt"
echo "$(ls "$DEST"/*.whl | wc -l) wheels, $(du -sh "$DEST" | cut -f1), in $DEST"
