#!/usr/bin/env bash
# Fuzzes every parser that takes outside bytes, each for a bounded time (default 300 s a
# target): the garment stream decoder (`decode`), a publisher's messages through the
# parsers alone, fast, on a tokio worker's stack (`parse`) and end to end through the
# engine (`ingest`: MessagePack, JSON, Kinect body frames, VMC), BVH files
# (`bvh`) and example databases (`db`). Needs the nightly toolchain and cargo-fuzz
# (`rustup toolchain install nightly && cargo install cargo-fuzz`). A finding stops the
# run and is written under fuzz/artifacts/<target>/; the corpora grow in fuzz/corpus/.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds="${1:-300}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(decode parse ingest bvh db)
for t in "${targets[@]}"; do
    # the database target is seeded with the frozen fixture itself; `parse` gets
    # inputs as long as the server's largest message
    seeds="seeds/$t"
    extra=()
    [ "$t" = db ] && seeds=../tests/fixtures/db/v1
    [ "$t" = parse ] && extra=(-max_len=65536)
    mkdir -p "corpus/$t"
    echo "== $t: ${seconds} s"
    cargo +nightly fuzz run -O "$t" "corpus/$t" "$seeds" -- \
        -max_total_time="$seconds" -print_final_stats=1 "${extra[@]}"
done
