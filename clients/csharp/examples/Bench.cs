// Times the C# decoder on a recorded stream, for `clothcast bench codec --csharp EXE`
// (the twin of clients/web/bench/decode.mjs). Usage: mono Bench.exe DIR [PASSES]
// (DIR holds setup.bin and stream.bin: u32 little-endian length + frame, repeated).
// Decodes the stream once to warm the JIT, then PASSES times more (default 3) from its
// first keyframe, and prints one JSON line: microseconds per frame (the fastest pass)
// and the FNV word hash of the last decoded floats, which the bench compares with Rust's.

using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Globalization;
using System.IO;
using Clothcast;

static class Bench
{
    static int Main(string[] args)
    {
        if (args.Length < 1) { Console.Error.WriteLine("usage: mono Bench.exe DIR [PASSES]"); return 2; }
        int passes = 3;
        if (args.Length > 1 && !int.TryParse(args[1], out passes)) { Console.Error.WriteLine("PASSES: not a number"); return 2; }
        var setup = GarmentSetup.Parse(File.ReadAllBytes(Path.Combine(args[0], "setup.bin")));
        var stream = File.ReadAllBytes(Path.Combine(args[0], "stream.bin"));
        var frames = new List<byte[]>();
        for (int at = 0; at + 4 <= stream.Length;)
        {
            int len = BitConverter.ToInt32(stream, at);
            if (len < 0 || len > stream.Length - at - 4) { Console.Error.WriteLine("stream.bin: a record past the end"); return 2; }
            var f = new byte[len];
            Array.Copy(stream, at + 4, f, 0, len);
            frames.Add(f);
            at += 4 + len;
        }
        var output = new float[3 * setup.VertexCount];
        Action pass = () =>
        {
            var dec = new GarmentDecoder(setup);
            foreach (var f in frames) dec.Decode(f, 0, f.Length, output);
        };
        pass();
        double best = double.PositiveInfinity;
        for (int i = 0; i < Math.Max(1, passes); i++)
        {
            var t = Stopwatch.StartNew();
            pass();
            best = Math.Min(best, t.Elapsed.TotalMilliseconds * 1000);
        }
        var words = new int[output.Length];
        Buffer.BlockCopy(output, 0, words, 0, 4 * output.Length);
        Console.WriteLine(string.Format(CultureInfo.InvariantCulture, "{{\"us_per_frame\": {0}, \"frames\": {1}, \"hash\": {2}}}", best / frames.Count, frames.Count, Format.WordHash(words)));
        return 0;
    }
}
