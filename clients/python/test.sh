#!/usr/bin/env bash
# Builds clothcast's Python module (build.sh) and runs its tests: the decoder on the
# golden streams of tests/fixtures/codec/v5 and on hostile input, the viewer against a
# real `clothcast serve` + `play` + `watch --record` (CLOTHCAST_BIN, default
# target/debug/clothcast: build it first), and the Blender live link
# (clients/blender/clothcast_live.py) in Blender 4.2's Python module `bpy`
# (CLOTHCAST_BLENDER_PYTHON names a Python that has it; default python3). Needs Python
# 3.11 or later. Usage: clients/python/test.sh [unittest names, e.g. test_viewer]
set -euo pipefail
cd "$(dirname "$0")"
./build.sh
if [ $# -gt 0 ]; then
  (cd tests && python3 -m unittest -v "$@")
  exit
fi
python3 -m unittest discover -s tests -v
python="${CLOTHCAST_BLENDER_PYTHON:-python3}"
if ! "$python" -c 'import bpy' >/dev/null 2>&1; then
  echo "the Blender live link's test needs Blender 4.2's bpy module in $python (pip install bpy==4.2.0, Python 3.11)" >&2
  exit 1
fi
"$python" tests/blender_live.py
