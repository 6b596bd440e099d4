// The C# decoder against the Rust encoder's frozen golden streams
// (tests/fixtures/codec/v5, the files the Rust and JavaScript decoders are tested on),
// and hostile input. Run by clients/csharp/test.sh.

using System;
using System.Collections.Generic;
using System.IO;
using System.Text.RegularExpressions;
using Clothcast;

static class CodecTests
{
    static string Fixtures(string sub)
    {
        return Path.Combine(Harness.Root, "tests", "fixtures", "codec", sub);
    }

    /// <summary>The length-prefixed records of a golden stream file.</summary>
    internal static List<byte[]> Records(byte[] stream)
    {
        var recs = new List<byte[]>();
        for (int at = 0; at < stream.Length;)
        {
            int len = BitConverter.ToInt32(stream, at);
            var r = new byte[len];
            Array.Copy(stream, at + 4, r, 0, len);
            recs.Add(r);
            at += 4 + len;
        }
        return recs;
    }

    struct Expected { public string Kind; public uint Frame, Hash, Bones; }

    /// <summary>frames.json's records (written by `clothcast bench codec --golden`).</summary>
    static List<Expected> Frames(string path)
    {
        var list = new List<Expected>();
        foreach (Match m in Regex.Matches(File.ReadAllText(path), @"\{([^}]*)\}"))
        {
            Func<string, string> field = name => Regex.Match(m.Groups[1].Value, "\"" + name + "\":\\s*\"?([a-z0-9]+)").Groups[1].Value;
            list.Add(new Expected { Kind = field("kind"), Frame = uint.Parse(field("frame")), Hash = uint.Parse(field("hash")), Bones = uint.Parse(field("bones")) });
        }
        return list;
    }

    static uint FloatHash(float[] f)
    {
        var words = new int[f.Length];
        Buffer.BlockCopy(f, 0, words, 0, 4 * f.Length);
        return Format.WordHash(words);
    }

    static string CodeOf(Action a)
    {
        try { a(); }
        catch (CodecException e) { return e.Code; }
        return "accepted";
    }

    public static void Register(Harness h)
    {
        foreach (var sub in new[] { "v5", Path.Combine("v5", "breadth-first") })
        {
            h.Test("golden stream " + sub + " decodes bit-exactly", () =>
            {
                var dir = Fixtures(sub);
                var setup = GarmentSetup.Parse(File.ReadAllBytes(Path.Combine(dir, "setup.bin")));
                var recs = Records(File.ReadAllBytes(Path.Combine(dir, "stream.bin")));
                var expected = Frames(Path.Combine(dir, "frames.json"));
                Harness.Equal(expected.Count, recs.Count, "records");
                Harness.True(expected.Count > 10, "a stream of frames");
                var dec = new GarmentDecoder(setup);
                var output = new float[3 * setup.VertexCount];
                var bones = new float[7 * setup.BoneCount];
                for (int i = 0; i < recs.Count; i++)
                {
                    var hd = dec.Decode(recs[i], 0, recs[i].Length, output);
                    Harness.Equal(expected[i].Kind, hd.Key ? "key" : "delta", "record " + i + " kind");
                    Harness.Equal(expected[i].Frame, hd.Frame, "record " + i + " frame");
                    Harness.Equal(expected[i].Hash, FloatHash(output), "record " + i + ": decoded floats differ from Rust");
                    dec.Bones(bones);
                    Harness.Equal(expected[i].Bones, FloatHash(bones), "record " + i + ": decoded bones differ from Rust");
                }
                var last = File.ReadAllBytes(Path.Combine(dir, "last.f32"));
                var got = new byte[4 * output.Length];
                Buffer.BlockCopy(output, 0, got, 0, got.Length);
                Harness.True(BitConverter.IsLittleEndian, "a little-endian machine");
                Harness.SameBytes(last, got, "last frame");
            });
        }

        h.Test("a frame in the middle of a larger array decodes the same", () =>
        {
            var dir = Fixtures("v5");
            var setup = GarmentSetup.Parse(File.ReadAllBytes(Path.Combine(dir, "setup.bin")));
            var recs = Records(File.ReadAllBytes(Path.Combine(dir, "stream.bin")));
            var a = new GarmentDecoder(setup);
            var b = new GarmentDecoder(setup);
            var oa = new float[3 * setup.VertexCount];
            var ob = new float[3 * setup.VertexCount];
            for (int i = 0; i < 5; i++)
            {
                a.Decode(recs[i], 0, recs[i].Length, oa);
                var padded = new byte[recs[i].Length + 19];
                for (int k = 0; k < padded.Length; k++) padded[k] = 0xee;
                Array.Copy(recs[i], 0, padded, 7, recs[i].Length);
                b.Decode(padded, 7, recs[i].Length, ob);
                Harness.Equal(FloatHash(oa), FloatHash(ob), "frame " + i);
            }
        });

        h.Test("hostile frames are refused with named errors and lose nothing", () =>
        {
            var dir = Fixtures("v5");
            var setupBytes = File.ReadAllBytes(Path.Combine(dir, "setup.bin"));
            var setup = GarmentSetup.Parse(setupBytes);
            var recs = Records(File.ReadAllBytes(Path.Combine(dir, "stream.bin")));
            var dec = new GarmentDecoder(setup);
            var output = new float[3 * setup.VertexCount];
            Harness.Equal("missing-reference", CodeOf(() => dec.Decode(recs[1], 0, recs[1].Length, output)), "a delta first");
            Harness.Equal("empty", CodeOf(() => dec.Decode(new byte[0], 0, 0, output)), "no bytes");
            Harness.Equal("invalid", CodeOf(() => dec.Decode(recs[0], 5, recs[0].Length, output)), "a slice past the array");
            Harness.Equal("mismatch", CodeOf(() => dec.Decode(recs[0], 0, recs[0].Length, new float[7])), "a short output");
            var key = recs[0];
            foreach (var cut in new[] { 1, 10, 39, 40, 41, key.Length / 2, key.Length - 1 })
            {
                Harness.Equal("truncated", CodeOf(() => dec.Decode(key, 0, cut, output)), "prefix " + cut);
            }
            var longer = new byte[key.Length + 1];
            Array.Copy(key, longer, key.Length);
            Harness.Equal("trailing-bytes", CodeOf(() => dec.Decode(longer, 0, longer.Length, output)), "an extra byte");
            Func<int, byte, byte[]> with = (i, value) => { var c = (byte[])key.Clone(); c[i] = value; return c; };
            var bad = with(4, 9);
            Harness.Equal("unsupported-version", CodeOf(() => dec.Decode(bad, 0, bad.Length, output)), "version");
            var magic = with(0, 0x58);
            Harness.Equal("bad-magic", CodeOf(() => dec.Decode(magic, 0, magic.Length, output)), "magic");
            var huge = (byte[])key.Clone();
            huge[36] = huge[37] = huge[38] = huge[39] = 0xff;
            Harness.Equal("too-large", CodeOf(() => dec.Decode(huge, 0, huge.Length, output)), "payload length");
            var good = new float[output.Length];
            new GarmentDecoder(setup).Decode(key, 0, key.Length, good);
            int refused = 0;
            for (int i = 40; i < key.Length; i += 7)
            {
                var flip = (byte[])key.Clone();
                flip[i] ^= 0x10;
                var probe = new GarmentDecoder(setup);
                var before = (float[])output.Clone();
                string c = CodeOf(() => probe.Decode(flip, 0, flip.Length, output));
                if (c == "accepted") Harness.Equal(FloatHash(good), FloatHash(output), "flip at " + i + " decoded to wrong positions");
                else
                {
                    refused++;
                    Harness.Equal(FloatHash(before), FloatHash(output), "flip at " + i + ": a refused frame touched the output");
                }
                foreach (var x in output) Harness.True(!float.IsNaN(x) && !float.IsInfinity(x), "finite output");
            }
            Harness.True(refused > 0, "some flipped frames refused");
            for (int t = 0; t < 200; t++)
            {
                var garbage = new byte[1 + (t * 37) % 300];
                for (int i = 0; i < garbage.Length; i++) garbage[i] = (byte)((i * 131 + t * 17) & 255);
                if (t % 2 == 1)
                {
                    var head = new byte[] { 0x43, 0x43, 0x47, 0x46, 5, (byte)(t & 1), 0, 0 };
                    Array.Copy(head, garbage, Math.Min(head.Length, garbage.Length));
                }
                Harness.True(CodeOf(() => dec.Decode(garbage, 0, garbage.Length, output)) != "accepted", "garbage " + t);
            }
            // after all that the real stream still decodes
            for (int i = 0; i < 3; i++) dec.Decode(recs[i], 0, recs[i].Length, output);
            Harness.Equal("truncated", CodeOf(() => GarmentSetup.Parse(setupBytes, 0, 100)), "a setup's prefix");
            Harness.Equal("empty", CodeOf(() => GarmentSetup.Parse(new byte[0])), "no setup");
            // the rest shape (format v5) ends the setup after its flag; a coordinate off
            // the lattice, a flag other than 0 or 1: each refused as Rust refuses it
            Harness.True(setup.HasRest, "the server's setups carry the rest shape");
            int n = setup.VertexCount, flagAt = setupBytes.Length - 12 * n - 4;
            var offRest = (byte[])setupBytes.Clone();
            BitConverter.GetBytes(int.MinValue).CopyTo(offRest, flagAt + 4 + 12 * 7);
            Harness.Equal("invalid", CodeOf(() => GarmentSetup.Parse(offRest)), "rest off the lattice");
            var flag = (byte[])setupBytes.Clone();
            flag[flagAt] = 2;
            Harness.Equal("corrupt", CodeOf(() => GarmentSetup.Parse(flag)), "rest flag");
            // the skeleton block (16 bytes a bone before the flag): a bone naming itself
            // as parent, a pivot off the lattice
            int at = flagAt - 16 * setup.BoneCount;
            var own = (byte[])setupBytes.Clone();
            BitConverter.GetBytes(setup.BoneCount - 1).CopyTo(own, at + 16 * (setup.BoneCount - 1));
            Harness.Equal("invalid", CodeOf(() => GarmentSetup.Parse(own)), "a bone its own parent");
            var far = (byte[])setupBytes.Clone();
            BitConverter.GetBytes(int.MinValue).CopyTo(far, at + 4);
            Harness.Equal("invalid", CodeOf(() => GarmentSetup.Parse(far)), "a pivot off the lattice");
            Harness.Equal(-1, setup.BoneParents[0], "the pelvis is the root");
        });

        h.Test("keyframes whose bones decode off their range are refused as Rust refuses them", () =>
        {
            // crafted by src/codec/tests/skeleton.rs for a small sleeve setup
            var dir = Fixtures(Path.Combine("v5", "hostile-bones"));
            var setup = GarmentSetup.Parse(File.ReadAllBytes(Path.Combine(dir, "setup.bin")));
            foreach (var name in new[] { "root-x-beyond-1", "child-x-beyond-1", "root-w-beyond-1", "root-w-negative", "root-translation-off-the-lattice" })
            {
                var dec = new GarmentDecoder(setup);
                var output = new float[3 * setup.VertexCount];
                var bytes = File.ReadAllBytes(Path.Combine(dir, name + ".bin"));
                CodecException err = null;
                try { dec.Decode(bytes, 0, bytes.Length, output); }
                catch (CodecException e) { err = e; }
                Harness.True(err != null, name + ": accepted");
                Harness.Equal("corrupt", err.Code, name);
                Harness.True(err.Message.Contains("bone value out of range"), name + ": " + err.Message);
                foreach (var x in output) Harness.Equal(0f, x, name + ": the output was touched");
            }
        });

        h.Test("a setup and a frame of format version 4 are refused by version", () =>
        {
            var v4 = Fixtures("v4");
            Harness.Equal("unsupported-version", CodeOf(() => GarmentSetup.Parse(File.ReadAllBytes(Path.Combine(v4, "setup.bin")))), "v4 setup");
            var first = Records(File.ReadAllBytes(Path.Combine(v4, "stream.bin")))[0];
            var setup = GarmentSetup.Parse(File.ReadAllBytes(Path.Combine(Fixtures("v5"), "setup.bin")));
            var dec = new GarmentDecoder(setup);
            Harness.Equal("unsupported-version", CodeOf(() => dec.Decode(first, 0, first.Length, new float[3 * setup.VertexCount])), "v4 frame");
        });
    }
}
