#!/usr/bin/env bash
# The whole test suite: Rust unit and integration tests, the JavaScript decoder against the
# Rust golden streams (Node's test runner), then the Node tests that check clothcast's
# output with the Khronos glTF validator and render it in headless Chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --bins
cargo test --all-targets
node --test clients/web/test/
export CLOTHCAST_BIN="$PWD/target/debug/clothcast"
(cd tests/gltf && { [ -d node_modules ] || npm ci --no-audit --no-fund; } && npm test)
