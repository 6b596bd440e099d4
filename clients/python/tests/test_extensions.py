"""clients/blender/build_extensions.py without Blender: the platform it reads from a
wheel's name, the wheels it refuses, and what it puts in the zips (blender_live.py
installs the zips it builds in Blender itself)."""
import importlib.util
import os
import tempfile
import tomllib
import unittest
import zipfile

# (not from harness, which needs the module: this test does not)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
spec = importlib.util.spec_from_file_location(
    "build_extensions", os.path.join(ROOT, "clients", "blender", "build_extensions.py"))
build_extensions = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build_extensions)


def fake_wheel(folder, name):
    """A file named as a wheel (its contents are not read, only carried)."""
    path = os.path.join(folder, name)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("clothcast/__init__.py", "")
    return path


class Platforms(unittest.TestCase):
    def test_blender_platform_of_wheel_names(self):
        for name, platform in [
            ("clothcast-0.1.0-cp311-abi3-linux_x86_64.whl", "linux-x64"),
            ("clothcast-0.1.0-cp311-abi3-manylinux_2_28_x86_64.whl", "linux-x64"),
            ("clothcast-0.1.0-cp311-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "linux-x64"),
            ("clothcast-0.1.0-cp311-abi3-manylinux_2_28_aarch64.whl", "linux-arm64"),
            ("clothcast-0.1.0-cp311-abi3-macosx_11_0_arm64.whl", "macos-arm64"),
            ("clothcast-0.1.0-cp311-abi3-macosx_10_12_x86_64.whl", "macos-x64"),
            ("clothcast-0.1.0-cp311-abi3-win_amd64.whl", "windows-x64"),
            ("clothcast-0.1.0-cp311-cp311-linux_x86_64.whl", "linux-x64"),
        ]:
            self.assertEqual(build_extensions.blender_platform(name), platform, name)

    def test_refused_wheels_say_why(self):
        for name, why in [
            ("clothcast-0.1.0-py3-none-any.whl", "py3-none"),
            ("clothcast-0.1.0-cp311-abi3-any.whl", "pure-Python"),
            ("clothcast-0.1.0-cp312-cp312-linux_x86_64.whl", "cp312-cp312"),
            ("clothcast-0.1.0-cp311-abi3-linux_riscv64.whl", "linux_riscv64"),
            ("clothcast-0.1.0-cp311-abi3-macosx_11_0_universal2.whl", "universal2"),
            ("clothcast-0.1.0-cp311-abi3-manylinux_2_28_x86_64.manylinux_2_28_aarch64.whl", "several platforms"),
            ("clothcast.zip", "not a wheel"),
        ]:
            with self.assertRaises(build_extensions.BuildError, msg=name) as e:
                build_extensions.blender_platform(name)
            self.assertIn(why, str(e.exception), name)


class Zips(unittest.TestCase):
    def test_zips_hold_the_add_ons_manifests_and_wheel_and_repeat_byte_for_byte(self):
        with tempfile.TemporaryDirectory() as tmp:
            wheel = fake_wheel(tmp, "clothcast-0.1.0-cp311-abi3-manylinux_2_28_x86_64.whl")
            first = build_extensions.build(os.path.join(tmp, "a"), wheel)
            second = build_extensions.build(os.path.join(tmp, "b"), wheel)
            self.assertEqual([os.path.basename(p) for p in first],
                             ["clothcast_live-1.0.0-linux_x64.zip", "clothcast_import-1.0.0.zip"])
            for a, b in zip(first, second):
                with open(a, "rb") as fa, open(b, "rb") as fb:
                    self.assertEqual(fa.read(), fb.read(), "the same inputs give the same bytes")
            live, importer = first
            with zipfile.ZipFile(live) as z:
                self.assertEqual(sorted(z.namelist()), [
                    "__init__.py", "blender_manifest.toml",
                    "wheels/clothcast-0.1.0-cp311-abi3-manylinux_2_28_x86_64.whl"])
                with open(os.path.join(ROOT, "clients", "blender", "clothcast_live.py"), "rb") as f:
                    self.assertEqual(z.read("__init__.py"), f.read())
                manifest = tomllib.loads(z.read("blender_manifest.toml").decode())
            # the added keys at the top level, not inside [permissions]
            self.assertEqual(manifest["platforms"], ["linux-x64"])
            self.assertEqual(manifest["wheels"], ["./wheels/clothcast-0.1.0-cp311-abi3-manylinux_2_28_x86_64.whl"])
            self.assertEqual(manifest["id"], "clothcast_live")
            self.assertEqual(set(manifest["permissions"]), {"network", "files"})
            with zipfile.ZipFile(importer) as z:
                self.assertEqual(sorted(z.namelist()), ["__init__.py", "blender_manifest.toml"])
                manifest = tomllib.loads(z.read("blender_manifest.toml").decode())
            self.assertNotIn("platforms", manifest)
            self.assertNotIn("wheels", manifest)
            self.assertEqual(manifest["id"], "clothcast_import")

    def test_command_refuses_a_missing_wheel(self):
        with tempfile.TemporaryDirectory() as tmp:
            self.assertEqual(build_extensions.main(["--wheel", os.path.join(tmp, "none.whl"), "--out", tmp]), 1)
            self.assertEqual(os.listdir(tmp), [])


if __name__ == "__main__":
    unittest.main()
