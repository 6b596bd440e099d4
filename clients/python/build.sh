#!/usr/bin/env bash
# Builds clothcast's Python module (Rust, PyO3, the stable ABI of Python 3.11+) and puts
# it at clients/python/build/clothcast.so, where `import clothcast` finds it with that
# folder on sys.path (or copy the file next to your script, or into Blender's add-ons
# folder). Usage: clients/python/build.sh [--release]
set -euo pipefail
cd "$(dirname "$0")/../.."
profile=debug
if [ "${1:-}" = "--release" ]; then profile=release; fi
cargo build -p clothcast-python ${1:+"$1"}
mkdir -p clients/python/build
cp "target/$profile/libclothcast_python.so" clients/python/build/clothcast.so
