"""clothcast.Decoder on the golden streams the Rust, JavaScript and C# decoders are
tested on (tests/fixtures/codec/v5), and on hostile input."""
import array
import json
import os
import struct
import unittest

from harness import GOLDEN, clothcast


def word_hash(data):
    """FNV-1a over little-endian 32-bit words (the fixtures' `hash` and `bones`)."""
    h = 0x811C9DC5
    for (w,) in struct.iter_unpack("<I", data):
        h = ((h ^ w) * 0x01000193) & 0xFFFFFFFF
    return h


def records(path):
    """The frames of a golden stream: each a u32 little-endian length, then the frame."""
    with open(path, "rb") as f:
        data = f.read()
    out, at = [], 0
    while at < len(data):
        (n,) = struct.unpack_from("<I", data, at)
        out.append(data[at + 4:at + 4 + n])
        at += 4 + n
    return out


def golden(name):
    d = os.path.join(GOLDEN, "v5", name)
    with open(os.path.join(d, "setup.bin"), "rb") as f:
        setup = f.read()
    with open(os.path.join(d, "frames.json")) as f:
        expected = json.load(f)
    with open(os.path.join(d, "last.f32"), "rb") as f:
        last = f.read()
    return setup, records(os.path.join(d, "stream.bin")), expected, last


def code_of(f):
    try:
        f()
    except clothcast.CodecError as e:
        return e.code
    return "accepted"


class GoldenStreams(unittest.TestCase):
    def test_every_frame_decodes_to_the_rust_decoders_floats_and_bones(self):
        for name in ("", "breadth-first"):
            with self.subTest(stream=name or "coarse-to-fine"):
                setup, recs, expected, last = golden(name)
                self.assertEqual(len(recs), len(expected))
                self.assertGreater(len(recs), 10)
                d = clothcast.Decoder(setup)
                out = array.array("f", bytes(12 * d.vertex_count))
                for i, (rec, e) in enumerate(zip(recs, expected)):
                    h = d.decode(rec, out)
                    self.assertEqual((h["kind"], h["frame"], h["reference"], h["bytes"]),
                                     (e["kind"], e["frame"], e["reference"], e["bytes"]), f"record {i}")
                    self.assertEqual(word_hash(out.tobytes()), e["hash"], f"record {i}: floats differ from Rust")
                    bones = array.array("f", [x for b in d.bones() for x in b])
                    self.assertEqual(len(bones), 7 * d.bone_count)
                    self.assertEqual(word_hash(bones.tobytes()), e["bones"], f"record {i}: bones differ from Rust")
                    self.assertEqual(d.last_frame, e["frame"])
                self.assertEqual(out.tobytes(), last, "the last frame, byte for byte")

    def test_the_setup_gives_the_topology(self):
        setup, recs, _, _ = golden("")
        d = clothcast.Decoder(setup)
        tris = d.triangles
        self.assertEqual(tris.format, "I")
        self.assertEqual(len(tris) % 3, 0)
        self.assertTrue(all(i < d.vertex_count for i in tris))
        # every vertex is in some triangle
        self.assertEqual(len(set(tris)), d.vertex_count)
        out = array.array("f", bytes(12 * d.vertex_count))
        self.assertEqual(d.decode(recs[0], out)["setup"], d.setup_id)

    def test_numpy_arrays_and_memoryviews_take_the_output(self):
        setup, recs, expected, _ = golden("")
        d = clothcast.Decoder(setup)
        try:
            import numpy
        except ImportError:
            numpy = None
        if numpy is not None:
            out = numpy.zeros(3 * d.vertex_count, numpy.float32)
            d.decode(recs[0], out)
            self.assertEqual(word_hash(out.tobytes()), expected[0]["hash"])
        d.reset()
        raw = bytearray(12 * d.vertex_count)
        d.decode(recs[0], memoryview(raw).cast("f"))
        self.assertEqual(word_hash(bytes(raw)), expected[0]["hash"])


class HostileInput(unittest.TestCase):
    def setUp(self):
        self.setup, self.recs, self.expected, _ = golden("")
        self.d = clothcast.Decoder(self.setup)
        self.out = array.array("f", bytes(12 * self.d.vertex_count))

    def test_each_problem_is_refused_by_its_code(self):
        d, out, key = self.d, self.out, self.recs[0]
        self.assertEqual(code_of(lambda: d.decode(self.recs[1], out)), "missing-reference", "a delta first")
        self.assertEqual(code_of(lambda: d.decode(b"", out)), "empty")
        for cut in (1, 10, 39, 40, 41, len(key) // 2, len(key) - 1):
            self.assertEqual(code_of(lambda: d.decode(key[:cut], out)), "truncated", f"prefix {cut}")
        self.assertEqual(code_of(lambda: d.decode(key + b"\0", out)), "trailing-bytes")

        def with_byte(i, v):
            b = bytearray(key)
            b[i] = v
            return bytes(b)

        self.assertEqual(code_of(lambda: d.decode(with_byte(4, 9), out)), "unsupported-version")
        self.assertEqual(code_of(lambda: d.decode(with_byte(0, 0x58), out)), "bad-magic")
        huge = bytearray(key)
        huge[36:40] = b"\xff\xff\xff\xff"
        self.assertEqual(code_of(lambda: d.decode(bytes(huge), out)), "too-large")
        with open(os.path.join(GOLDEN, "v4", "stream.bin"), "rb") as f:
            v4 = records(f.name)[0]
        self.assertEqual(code_of(lambda: d.decode(v4, out)), "unsupported-version", "a format-4 frame")
        # the setup: empty, cut, another version
        self.assertEqual(code_of(lambda: clothcast.Decoder(b"")), "empty")
        self.assertEqual(code_of(lambda: clothcast.Decoder(self.setup[:-1])), "truncated")
        self.assertEqual(code_of(lambda: clothcast.Decoder(self.setup + b"\0")), "trailing-bytes")
        with open(os.path.join(GOLDEN, "v4", "setup.bin"), "rb") as f:
            self.assertEqual(code_of(lambda: clothcast.Decoder(f.read())), "unsupported-version")
        # nothing was decoded
        self.assertIsNone(d.last_frame)
        self.assertEqual(out.tobytes(), bytes(len(out.tobytes())))

    def test_a_refused_frame_leaves_the_output_and_the_decoder_as_they_were(self):
        d, out = self.d, self.out
        d.decode(self.recs[0], out)
        before = out.tobytes()
        refused = 0
        for i in range(40, len(self.recs[1]), 5):
            flip = bytearray(self.recs[1])
            flip[i] ^= 0x10
            probe = clothcast.Decoder(self.setup)
            probe.decode(self.recs[0], out)
            c = code_of(lambda: probe.decode(bytes(flip), out))
            if c != "accepted":
                refused += 1
                self.assertEqual(out.tobytes(), before, f"flip at {i} ({c}) touched the output")
                # and the decoder still takes the real frame
                probe.decode(self.recs[1], out)
                self.assertEqual(word_hash(out.tobytes()), self.expected[1]["hash"])
                probe.decode(self.recs[0], out)
            self.assertTrue(all(x == x and abs(x) < 1e6 for x in out), "finite output")
        self.assertGreater(refused, 0)

    def test_an_unusable_output_buffer_is_refused_and_the_frame_not_consumed(self):
        d, key = self.d, self.recs[0]
        n = 3 * d.vertex_count
        with self.assertRaisesRegex(ValueError, "expected 9000"):
            d.decode(key, array.array("f", bytes(4 * (n - 1))))
        with self.assertRaisesRegex(ValueError, "read-only"):
            d.decode(key, memoryview(bytes(4 * n)).cast("f"))
        with self.assertRaises(BufferError):
            d.decode(key, array.array("d", bytes(8 * n)))
        with self.assertRaises(TypeError):
            d.decode(key, [0.0] * n)
        with self.assertRaises(TypeError):
            d.decode("not bytes", self.out)
        self.assertIsNone(d.last_frame)
        d.decode(key, self.out)
        self.assertEqual(word_hash(self.out.tobytes()), self.expected[0]["hash"])


if __name__ == "__main__":
    unittest.main()
