#!/usr/bin/env bash
# The whole test suite: Rust unit and integration tests, the JavaScript decoder against the
# Rust golden streams (Node's test runner), the C# client (Mono) and the Python module
# (with the Blender live link) on the same streams and against a live server, then the
# Node tests that check clothcast's
# output with the Khronos glTF validator and render it in headless Chromium, and the
# end-to-end streaming test (server, BVH publisher, the viewer page and the three.js
# example in headless Chromium). The Rust code is checked against rustfmt and clippy
# first (where the toolchain has them), so that formatting and lint drift fail here and
# not in a later diff.
set -euo pipefail
cd "$(dirname "$0")/.."
# each step's start and the time since the suite began, on stderr, so that a CI log
# shows where the suite's time goes
phase() { echo "== $(date -u +%H:%M:%S) +${SECONDS}s $*" >&2; }
phase "rustfmt and clippy"
if cargo fmt --version >/dev/null 2>&1; then
  cargo fmt --all --check
else
  echo "rustfmt is not installed: formatting not checked (rustup component add rustfmt)" >&2
fi
# clippy's lints on both crates of the workspace, warnings as errors (where the
# toolchain has clippy), so that lint drift fails here too
if cargo clippy --version >/dev/null 2>&1; then
  cargo clippy --all-targets --workspace --quiet -- -D warnings
else
  echo "clippy is not installed: lints not checked (rustup component add clippy)" >&2
fi
phase "build"
cargo build --bins
phase "Rust tests"
cargo test --all-targets
phase "JavaScript decoder"
node --test clients/web/test/
# the C# client (Unity, .NET): its decoder on the same golden streams, and the client
# against this build's server
phase "C# client"
CLOTHCAST_BIN="$PWD/target/debug/clothcast" clients/csharp/test.sh
# the Python module (PyO3): its decoder on the same streams, its viewer against this
# build's server, and the Blender live link built on it
phase "Python module and Blender live link"
CLOTHCAST_BIN="$PWD/target/debug/clothcast" clients/python/test.sh
# the Blender add-ons (the live link, and the take importer on a recording) again in each
# other Blender named by CLOTHCAST_MORE_BLENDER_PYTHONS (Pythons with that Blender's bpy,
# separated by spaces; .ci/run names Blender 5.0's, whose animation API, slotted actions
# without Action.fcurves, is not 4.2's)
for blender_python in ${CLOTHCAST_MORE_BLENDER_PYTHONS:-}; do
  phase "Blender checks in $blender_python"
  CLOTHCAST_BLENDER_PYTHON="$blender_python" CLOTHCAST_BIN="$PWD/target/debug/clothcast" \
    clients/python/test.sh --blender
  CLOTHCAST_BLENDER_PYTHON="$blender_python" cargo test --test tests record::
done
phase "glTF, rendering and streaming in Chromium"
export CLOTHCAST_BIN="$PWD/target/debug/clothcast"
(cd clients/web/examples/threejs && { [ -d node_modules ] || npm ci --no-audit --no-fund; })
(cd tests/gltf && { [ -d node_modules ] || npm ci --no-audit --no-fund; } && npm test)
phase "done"
