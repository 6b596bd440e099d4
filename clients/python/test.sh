#!/usr/bin/env bash
# Builds clothcast's Python module as a wheel (maturin), installs it in a virtual
# environment and runs its tests there: the package as installed (type stubs matching
# the module), the decoder on the golden streams of tests/fixtures/codec/v5 and on
# hostile input, the viewer against a real `clothcast serve` + `play` + `watch --record`
# (CLOTHCAST_BIN, default target/debug/clothcast: build it first), and the Blender live
# link (clients/blender/clothcast_live.py) in Blender's Python module `bpy` (4.2; 5.0 too in CI)
# (CLOTHCAST_BLENDER_PYTHON names a Python that has it; default the environment's,
# which sees python3's packages). Needs Python 3.11 or later and maturin
# (pip install maturin). Usage: clients/python/test.sh [unittest names, e.g. test_viewer]
#    or: clients/python/test.sh --blender   (the Blender live link's check alone: run
#        again with another Blender's Python in CLOTHCAST_BLENDER_PYTHON)
# CLOTHCAST_PYTHON_WHEEL names a wheel built elsewhere to test instead of building one.
set -euo pipefail
cd "$(dirname "$0")"
# the module as users install it: the wheel maturin builds from pyproject.toml (in the
# dev profile, which is optimised too and shares the test build's artifacts), installed
# into a fresh virtual environment that also sees this Python's own packages
if ! python3 -m maturin --version >/dev/null 2>&1; then
  echo "the Python tests build the module's wheel with maturin: python3 -m pip install 'maturin>=1.7,<2'" >&2
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -n "${CLOTHCAST_PYTHON_WHEEL:-}" ]; then
  # a wheel built elsewhere (e.g. the portable one, README): tested as it is
  mkdir "$work/wheels" && cp "$CLOTHCAST_PYTHON_WHEEL" "$work/wheels/"
else
  python3 -m maturin build --profile dev --out "$work/wheels"
fi
python3 -m venv --system-site-packages "$work/venv"
py="$work/venv/bin/python"
"$py" -m pip install --quiet --no-index --no-deps "$work"/wheels/clothcast-*.whl
export CLOTHCAST_PYTHON_INSTALLED=1 CLOTHCAST_PYTHON_WHEEL_DIR="$work/wheels"
if [ "${1:-}" = --blender ]; then
  shift
elif [ $# -gt 0 ]; then
  (cd tests && "$py" -m unittest -v "$@")
  exit
else
  "$py" -m unittest discover -s tests -v
fi
python="${CLOTHCAST_BLENDER_PYTHON:-$py}"
if ! "$python" -c 'import bpy' >/dev/null 2>&1; then
  echo "the Blender live link's test needs Blender's bpy module (4.2 or later) in $python (pip install bpy==4.2.0, Python 3.11)" >&2
  exit 1
fi
if [ "$python" != "$py" ]; then
  # another Python (a Blender's): the wheel's files, unpacked, on its path
  "$py" -m zipfile -e "$work"/wheels/clothcast-*.whl "$work/unpacked"
  CLOTHCAST_PYTHON_INSTALLED=0 CLOTHCAST_PYTHON_MODULE_DIR="$work/unpacked" "$python" tests/blender_live.py
else
  "$python" tests/blender_live.py
fi
