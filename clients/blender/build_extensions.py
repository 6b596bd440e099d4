#!/usr/bin/env python3
"""Builds clothcast's two Blender add-ons as Blender extensions (Blender 4.2+), the zip
files that Edit > Preferences > Get Extensions > (the v menu) Install from Disk... takes:

- clothcast_live-VERSION-PLATFORM.zip: the live link (clothcast_live.py as the package's
  __init__.py), its manifest (extensions/clothcast_live/blender_manifest.toml) and
  clothcast's Python module as a wheel under wheels/, named in the manifest with the
  platform it runs on. Blender installs the wheel with the extension, so the live link
  needs nothing installed into Blender's Python.
- clothcast_import-VERSION.zip: the take importer (pure Python, every platform).

Usage: clients/blender/build_extensions.py [--wheel WHEEL] [--out DIR]
  --wheel  clothcast's wheel to bundle (an abi3 wheel for CPython 3.11+, the Python of
           Blender 4.2 to 5.0); without it, `python3 -m maturin build --release` makes one
           (for wheels that run on older Linux, build with maturin's --zig: README)
  --out    where the zips go (default clients/blender/dist)

Prints the path of each zip it wrote. The zips are the same bytes for the same inputs
(fixed timestamps and order). Blender's own `blender --command extension validate ZIP`
checks them (the Python tests do: clients/python/tests/blender_live.py).
"""

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# A wheel's file name: distribution-version(-build)?-python-abi-platform.whl (PEP 427)
WHEEL_NAME = re.compile(r"^(?P<dist>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-(?P<python>[^-]+)-(?P<abi>[^-]+)-(?P<platform>[^-]+)\.whl$")

# Blender's platform names (the manifest's `platforms`) for a wheel's platform tags
# (the OS part: manylinux_2_28 / musllinux_1_2 / linux, macosx_11_0, win; then the
# machine)
MACHINES = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}


class BuildError(Exception):
    """Why an extension could not be built; the message says."""


def blender_platform(wheel):
    """The Blender platform (`linux-x64`, …) that `wheel` (a file name) runs on; a
    wheel of several platform tags (`a.b`) must name one Blender platform."""
    m = WHEEL_NAME.match(os.path.basename(wheel))
    if m is None:
        raise BuildError(f"{os.path.basename(wheel)} is not a wheel's file name (PEP 427)")
    found = set()
    for tag in m["platform"].split("."):
        if tag == "any":
            raise BuildError(f"{os.path.basename(wheel)} is a pure-Python wheel, not clothcast's compiled module")
        system = "linux" if "linux" in tag else "macos" if tag.startswith("macosx") else "windows" if tag.startswith("win") else None
        machine = next((b for w, b in MACHINES.items() if tag.endswith(w)), None)
        if system is None or machine is None:
            raise BuildError(f"{os.path.basename(wheel)}: platform tag {tag} is none Blender knows")
        found.add(f"{system}-{machine}")
    if len(found) != 1:
        raise BuildError(f"{os.path.basename(wheel)} names several platforms ({', '.join(sorted(found))})")
    # Blender 4.2 to 5.0 run CPython 3.11: an abi3 wheel from 3.11 (clothcast's), or
    # one for 3.11 alone
    if m["python"] != "cp311" or m["abi"] not in ("abi3", "cp311"):
        raise BuildError(f"{os.path.basename(wheel)} is for {m['python']}-{m['abi']}, not CPython 3.11 (Blender's)")
    return found.pop()


def manifest_version(text):
    """The `version` a manifest's text declares."""
    m = re.search(r'^version\s*=\s*"([^"]+)"', text, re.M)
    if m is None:
        raise BuildError("a manifest without a version")
    return m.group(1)


def add(z, name, data):
    """`data` into zip `z` as `name`, with a fixed time and mode (reproducible bytes)."""
    info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    z.writestr(info, data)


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def build(out, wheel):
    """Writes both zips into `out`; returns their paths (live link, importer)."""
    os.makedirs(out, exist_ok=True)
    written = []
    # the live link, with the module's wheel
    manifest = read(os.path.join(HERE, "extensions", "clothcast_live", "blender_manifest.toml"))
    platform = blender_platform(wheel)
    wheel_name = os.path.basename(wheel)
    # (top-level keys: before the first table, [permissions])
    added = f'# added by build_extensions.py\nplatforms = ["{platform}"]\nwheels = ["./wheels/{wheel_name}"]\n\n'
    table = re.search(r"^\[", manifest, re.M)
    at = table.start() if table else len(manifest)
    manifest = manifest[:at] + added + manifest[at:]
    path = os.path.join(out, f"clothcast_live-{manifest_version(manifest)}-{platform.replace('-', '_')}.zip")
    with zipfile.ZipFile(path, "w") as z:
        add(z, "blender_manifest.toml", manifest)
        add(z, "__init__.py", read(os.path.join(HERE, "clothcast_live.py")))
        add(z, f"wheels/{wheel_name}", read(wheel, "rb"))
    written.append(path)
    # the importer
    manifest = read(os.path.join(HERE, "extensions", "clothcast_import", "blender_manifest.toml"))
    path = os.path.join(out, f"clothcast_import-{manifest_version(manifest)}.zip")
    with zipfile.ZipFile(path, "w") as z:
        add(z, "blender_manifest.toml", manifest)
        add(z, "__init__.py", read(os.path.join(HERE, "clothcast_import.py")))
    written.append(path)
    return written


def maturin_wheel(folder):
    """Builds clothcast's wheel with maturin (release) into `folder`; returns its path."""
    cmd = [sys.executable, "-m", "maturin", "build", "--release", "-m",
           os.path.join(ROOT, "clients", "python", "Cargo.toml"), "--out", folder]
    try:
        subprocess.run(cmd, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise BuildError(f"building the wheel ({' '.join(cmd)}) failed: {e} (python3 -m pip install maturin)") from e
    wheels = glob.glob(os.path.join(folder, "clothcast-*.whl"))
    if len(wheels) != 1:
        raise BuildError(f"maturin left {len(wheels)} wheels in {folder}")
    return wheels[0]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheel", help="clothcast's wheel to bundle (default: built with maturin)")
    parser.add_argument("--out", default=os.path.join(HERE, "dist"), help="where the zips go")
    args = parser.parse_args(argv)
    try:
        if args.wheel:
            if not os.path.isfile(args.wheel):
                raise BuildError(f"no wheel at {args.wheel}")
            paths = build(args.out, args.wheel)
        else:
            with tempfile.TemporaryDirectory() as tmp:
                paths = build(args.out, maturin_wheel(tmp))
    except BuildError as e:
        print(f"build_extensions: {e}", file=sys.stderr)
        return 1
    for p in paths:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
