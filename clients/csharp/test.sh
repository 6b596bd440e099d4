#!/usr/bin/env bash
# Builds the C# client with Mono's compiler (C# 7.2, what Unity and .NET Standard 2.0
# accept) and runs its tests: the decoder against the golden streams in
# tests/fixtures/codec/v5 (the files the Rust and JavaScript decoders are tested on),
# MessagePack, and the client against a real `clothcast serve` + `clothcast play`
# (CLOTHCAST_BIN, default target/debug/clothcast; build it first). Needs `mcs` and
# `mono` (Debian: mono-mcs mono-runtime ca-certificates-mono). Usage: clients/csharp/test.sh [NAME-FILTER]
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p build
mcs -langversion:7.2 -target:library -warnaserror+ -out:build/Clothcast.dll Clothcast/*.cs
mcs -langversion:7.2 -warnaserror+ -r:build/Clothcast.dll -out:build/Tests.exe tests/*.cs
for example in Watch Bench; do
  mcs -langversion:7.2 -warnaserror+ -r:build/Clothcast.dll -out:build/$example.exe examples/$example.cs
done
# the Unity component, compiled against the Unity API members it uses (a compile check:
# no Unity here)
mcs -langversion:7.2 -warnaserror+ -target:library -out:build/UnityEngine.dll tests/unity-api/UnityEngine.cs
mcs -langversion:7.2 -warnaserror+ -target:library -r:build/Clothcast.dll -r:build/UnityEngine.dll -out:build/ClothcastStream.dll unity/ClothcastStream.cs
# the test CA in a Mono trust store of this run's own (Mono reads its user store from
# XDG_CONFIG_HOME/.mono), for the wss test: not the user's store. cert-sync: Debian's
# ca-certificates-mono
store=$(mktemp -d)
trap 'rm -rf "$store"' EXIT
XDG_CONFIG_HOME=$store cert-sync --quiet --user ../../tests/fixtures/tls/ca.pem
XDG_CONFIG_HOME=$store mono --debug build/Tests.exe "$@"
