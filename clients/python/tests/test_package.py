"""The module as a package: its type stubs (clients/python/clothcast.pyi, shipped in
the wheel) name what the module has, no more and no less, with the same parameters;
and the wheel test.sh installs carries them (`py.typed`)."""
import ast
import inspect
import os
import re
import struct
import unittest
import zipfile

from harness import INSTALLED, ROOT, clothcast

STUB = os.path.join(ROOT, "clients", "python", "clothcast.pyi")
# names the stubs define for typing only
TYPING_ONLY = {"Bone", "FrameHeader", "FrameInfo", "Body", "AssetInfo"}


def stub_tree():
    with open(STUB) as f:
        return ast.parse(f.read())


def public(names):
    return {n for n in names if not n.startswith("_")}


class Stubs(unittest.TestCase):
    def test_the_stubs_name_what_the_module_has(self):
        tree = stub_tree()
        top = set()
        classes = {}
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                top.add(node.name)
                classes[node.name] = node
            elif isinstance(node, ast.AnnAssign):
                top.add(node.target.id)
            elif isinstance(node, ast.Assign):
                top.update(t.id for t in node.targets)
        # (installed, `clothcast` is a package re-exporting its extension module's
        # names, and that module is one of its attributes)
        module = {n for n in public(dir(clothcast)) if not inspect.ismodule(getattr(clothcast, n))}
        self.assertEqual(top - TYPING_ONLY, module, "the stubs' names and the module's")
        for name in ("Decoder", "Viewer"):
            cls = getattr(clothcast, name)
            stubbed = {}
            for node in classes[name].body:
                if isinstance(node, ast.FunctionDef):
                    stubbed[node.name] = node
            have = public(dir(cls))
            self.assertEqual(public(stubbed), have, f"{name}'s members")
            for member, node in stubbed.items():
                if member.startswith("_") or any(isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list):
                    continue
                text = getattr(cls, member).__text_signature__ or ""
                real = [p.strip().split("=")[0].strip() for p in text.strip("()").split(",") if p.strip()]
                real = [p for p in real if p not in ("$self", "/")]
                args = [a.arg for a in node.args.args[1:]]
                self.assertEqual(args, real, f"{name}.{member}'s parameters")
        # the constructors' parameters, from the classes' signatures
        for name in ("Decoder", "Viewer"):
            node = next(n for n in classes[name].body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
            real = list(inspect.signature(getattr(clothcast, name)).parameters)
            self.assertEqual([a.arg for a in node.args.args[1:]], real, f"{name}()'s parameters")

    def test_the_exceptions_are_what_the_stubs_say(self):
        self.assertTrue(issubclass(clothcast.CodecError, ValueError))
        self.assertTrue(issubclass(clothcast.ClientError, ConnectionError))
        self.assertEqual(len(clothcast.JOINT_NAMES), 22)

    @unittest.skipUnless(INSTALLED, "runs on the installed wheel (test.sh)")
    def test_the_installed_wheel_carries_the_stubs(self):
        package = os.path.dirname(clothcast.__file__)
        self.assertTrue(os.path.isfile(os.path.join(package, "py.typed")), package)
        with open(os.path.join(package, "__init__.pyi")) as f, open(STUB) as g:
            self.assertEqual(f.read(), g.read())
        wheels = os.environ["CLOTHCAST_PYTHON_WHEEL_DIR"]
        (wheel,) = [w for w in os.listdir(wheels) if w.endswith(".whl")]
        # one wheel for every CPython from 3.11 (the stable ABI)
        self.assertIn("-cp311-abi3-", wheel)
        with zipfile.ZipFile(os.path.join(wheels, wheel)) as z:
            so = [i for i in z.infolist() if i.filename.endswith(".so")]
        self.assertEqual([i.filename for i in so], ["clothcast/clothcast.abi3.so"])
        # stripped (the release profile's debug info left out)
        self.assertLess(so[0].file_size, 20 << 20, f"{so[0].file_size} bytes")
        # the platform tag tells the truth: the module needs no glibc symbol newer than
        # the manylinux_X_Y it claims (pip installs it on any glibc from X.Y)
        tag = re.search(r"-manylinux_(\d+)_(\d+)_x86_64\.whl$", wheel)
        self.assertIsNotNone(tag, wheel)
        with zipfile.ZipFile(os.path.join(wheels, wheel)) as z:
            needed = glibc_versions(z.read(so[0].filename))
        self.assertIn((2, 2, 5), needed, "the versions read are glibc's")
        self.assertLessEqual(max(needed), (int(tag[1]), int(tag[2])), f"{wheel} needs glibc {max(needed)}")


def glibc_versions(elf):
    """The GLIBC_x.y[.z] symbol versions an ELF64 little-endian shared object needs
    (its .gnu.version_r section, SHT_GNU_verneed), as tuples."""
    assert elf[:6] == b"\x7fELF\x02\x01", "an ELF64 little-endian file"
    (shoff,) = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", elf, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + k * shentsize) for k in range(shnum)]
    out = set()
    for _, kind, _, _, offset, _, link, count, _, _ in sections:
        if kind != 0x6FFFFFFE:  # SHT_GNU_verneed; `count` (sh_info) entries
            continue
        strings = sections[link][4]
        at = offset
        for _ in range(count):
            _, n_aux, _, aux, nxt = struct.unpack_from("<HHIII", elf, at)
            a = at + aux
            for _ in range(n_aux):
                _, _, _, name, anext = struct.unpack_from("<IHHII", elf, a)
                text = elf[strings + name:elf.index(b"\0", strings + name)].decode()
                if text.startswith("GLIBC_") and text[6:7].isdigit():
                    out.add(tuple(int(x) for x in text[6:].split(".")))
                a += anext
            at += nxt
    return out


if __name__ == "__main__":
    unittest.main()
