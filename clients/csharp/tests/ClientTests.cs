// The client against a real server: `clothcast serve` (tokens on) with the small test
// database, `clothcast play` of a CMU clip on two avatars; the C# client receives,
// decodes (every frame's checksum checked against the encoder's) and poses the body.
// Needs the clothcast binary (CLOTHCAST_BIN, default target/debug/clothcast).

using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Text.RegularExpressions;
using System.Threading;
using Clothcast;

static class ClientTests
{
    const string PublisherToken = "csharp-test-publisher", ViewerToken = "csharp-test-viewer";

    static string Bin
    {
        get
        {
            var b = Environment.GetEnvironmentVariable("CLOTHCAST_BIN");
            return string.IsNullOrEmpty(b) ? Path.Combine(Harness.Root, "target", "debug", "clothcast") : b;
        }
    }

    static Process Spawn(string args, string certFile = null)
    {
        var p = new ProcessStartInfo(Bin, args)
        {
            UseShellExecute = false,
            RedirectStandardOutput = true,
            RedirectStandardError = true,
            WorkingDirectory = Harness.Root,
        };
        p.EnvironmentVariables["CLOTHCAST_PUBLISHER_TOKEN"] = PublisherToken;
        p.EnvironmentVariables["CLOTHCAST_VIEWER_TOKEN"] = ViewerToken;
        // (the roots clothcast's own clients check a server's certificate against)
        if (certFile != null) p.EnvironmentVariables["SSL_CERT_FILE"] = certFile;
        var proc = Process.Start(p);
        proc.ErrorDataReceived += (s, e) => { };
        proc.BeginErrorReadLine();
        return proc;
    }

    /// <summary>`clothcast serve` on <paramref name="bind"/> (with <paramref
    /// name="extra"/> arguments); returns it and its address.</summary>
    static Process Serve(string bind, out string addr, string extra = "")
    {
        var db = Path.Combine(Harness.Root, "tests", "fixtures", "db", "v1", "small.ccdb");
        var srv = Spawn("serve --db " + db + " --bind " + bind + extra);
        string found = null;
        var said = new ManualResetEventSlim();
        // read its output all along, so that it never blocks on a full pipe
        srv.OutputDataReceived += (s, e) =>
        {
            var m = e.Data == null ? null : Regex.Match(e.Data, @"wss?://([0-9.:]+)/ws");
            if (m != null && m.Success && found == null)
            {
                found = m.Groups[1].Value;
                said.Set();
            }
        };
        srv.BeginOutputReadLine();
        if (!said.Wait(TimeSpan.FromSeconds(60)))
        {
            Stop(srv);
            throw new TestFailure("the server did not say where it listens");
        }
        addr = found;
        return srv;
    }

    static Process Play(string addr)
    {
        var clip = Path.Combine(Harness.Root, "tests", "fixtures", "mocap", "cmu_131_03.bvh");
        return Spawn("play " + clip + " --url ws://" + addr + "/ws --avatars 2 --seconds 120");
    }

    static string Tls(string file) { return Path.Combine(Harness.Root, "tests", "fixtures", "tls", file); }

    /// <summary>The client over TLS: `serve` with the test certificate (localhost, signed
    /// by the test CA), `play` publishing over wss too, and the client streaming both
    /// avatars over wss. Mono checks the certificate against its own trust store, not
    /// a callback (README), so test.sh puts the test CA into a store of the run's own
    /// (XDG_CONFIG_HOME); and by the host name: Mono sends an IP address as the TLS
    /// server name, which a server ignores, and then refuses the certificate.</summary>
    static void OverTls()
    {
        string addr;
        Process srv = Serve("127.0.0.1:0", out addr, " --tls-cert " + Tls("cert.pem") + " --tls-key " + Tls("key.pem")), play = null;
        var url = "wss://localhost:" + addr.Substring(addr.LastIndexOf(':') + 1) + "/ws";
        var cc = new ClothcastClient(new Uri(url), new ClientOptions { Token = ViewerToken });
        try
        {
            var clip = Path.Combine(Harness.Root, "tests", "fixtures", "mocap", "cmu_131_03.bvh");
            play = Spawn("play " + clip + " --url " + url + " --avatars 2 --seconds 120", Tls("ca.pem"));
            var errors = new List<Exception>();
            var closes = new List<CloseInfo>();
            var frames = new Dictionary<string, int>();
            cc.Error += e => errors.Add(e);
            cc.Closed += c => closes.Add(c);
            cc.FrameReceived += av =>
            {
                int n;
                frames.TryGetValue(av.Id, out n);
                frames[av.Id] = n + 1;
            };
            cc.Start();
            PollUntil(cc, () => frames.Count >= 2 && Min(frames) >= 30 || closes.Count > 0, 90, "30 frames of each of 2 avatars over wss");
            Harness.Equal(0, closes.Count, "closes: " + string.Join("; ", closes));
            Harness.Equal(0, errors.Count, "errors: " + string.Join("; ", errors));
            foreach (var av in cc.Avatars.Values)
            {
                Harness.True(av.Dropped <= 2, av.Id + ": dropped " + av.Dropped);
                CheckOnBody(av);
            }
        }
        finally
        {
            cc.Dispose();
            if (play != null) Stop(play);
            Stop(srv);
        }
    }

    static void Stop(Process p)
    {
        try { if (!p.HasExited) p.Kill(); p.WaitForExit(5000); }
        catch (InvalidOperationException) { }
    }

    /// <summary>Polls <paramref name="cc"/> until <paramref name="done"/> or the timeout.</summary>
    static void PollUntil(ClothcastClient cc, Func<bool> done, double seconds, string what)
    {
        var clock = Stopwatch.StartNew();
        while (!done())
        {
            if (clock.Elapsed.TotalSeconds > seconds) throw new TestFailure("timed out after " + seconds + " s waiting for " + what);
            cc.Poll(TimeSpan.FromMilliseconds(50));
        }
    }

    /// <summary>An `asset` message carrying the golden setup and a one-triangle body
    /// on the canonical skeleton's 22 joints (parents as the server's).</summary>
    static byte[] AssetMessage(byte[] setup, string hash, Action<MsgPackWriter> parents = null)
    {
        var body = new float[] { 0, 1, 0, 0.1f, 1, 0, 0, 1.1f, 0 };
        var skeleton = new float[66];
        var weights = new float[] { 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0 };
        Func<float[], byte[]> bytes = f => { var b = new byte[4 * f.Length]; Buffer.BlockCopy(f, 0, b, 0, b.Length); return b; };
        var w = new MsgPackWriter().Map(10).Str("type").Str("asset").Str("hash").Str(hash).Str("garment").Str("tshirt")
            .Str("setup").Bin(setup).Str("body_positions").Bin(bytes(body))
            .Str("body_triangles").Bin(new byte[] { 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0 })
            .Str("body_joints").Bin(new byte[12]).Str("body_weights").Bin(bytes(weights))
            .Str("skeleton").Bin(bytes(skeleton)).Str("parents");
        if (parents != null) parents(w);
        else
        {
            var server = new[] { -1, 0, 1, 2, 3, 4, 3, 6, 7, 8, 3, 10, 11, 12, 0, 14, 15, 16, 0, 18, 19, 20 };
            w.Array(server.Length);
            foreach (var p in server) w.Int(p);
        }
        return w.ToArray();
    }

    /// <summary>A compact `frame` message for <paramref name="avatar"/>.</summary>
    static byte[] FrameMessage(string avatar, long seq, string asset, byte[] garment)
    {
        var world = new byte[28];
        BitConverter.GetBytes(1f).CopyTo(world, 12);
        return new MsgPackWriter().Array(9).Str("frame").Str(avatar).Int(seq).Float(seq / 30.0).Float(0)
            .Bin(world).Bin(new byte[0]).Str(asset).Bin(garment).ToArray();
    }

    public static void Register(Harness h)
    {
        h.Test("client: a running stream's frames are read in place, allocating ~nothing", () =>
        {
            var dir = Path.Combine(Harness.Root, "tests", "fixtures", "codec", "v5");
            var setup = File.ReadAllBytes(Path.Combine(dir, "setup.bin"));
            var recs = CodecTests.Records(File.ReadAllBytes(Path.Combine(dir, "stream.bin")));
            var cc = new ClothcastClient(new Uri("ws://127.0.0.1:9/ws"), new ClientOptions());
            int frames = 0;
            var errors = new List<string>();
            cc.FrameReceived += av => frames++;
            cc.Error += e => errors.Add(e.Message);
            cc.Inject(AssetMessage(setup, "a1"));
            // the first two frames start the stream and warm the pools
            for (int k = 0; k < 2; k++) cc.Inject(FrameMessage("walker", k, "a1", recs[k]));
            cc.Poll();
            var messages = new List<byte[]>();
            for (int k = 2; k < recs.Count; k++) messages.Add(FrameMessage("walker", k, "a1", recs[k]));
            foreach (var m in messages) cc.Inject(m);
            long before = GC.GetAllocatedBytesForCurrentThread();
            cc.Poll();
            long per = (GC.GetAllocatedBytesForCurrentThread() - before) / messages.Count;
            Harness.Equal(0, errors.Count, "errors: " + string.Join("; ", errors));
            Harness.Equal(recs.Count, frames, "every frame decoded");
            Console.WriteLine("     " + per + " bytes allocated a frame in Poll()");
            Harness.True(per < 250, per + " bytes allocated a frame (the general path: ~640)");
        });

        h.Test("client: a server's hostile messages are refused by name and the streams go on", () =>
        {
            var dir = Path.Combine(Harness.Root, "tests", "fixtures", "codec", "v5");
            var setup = File.ReadAllBytes(Path.Combine(dir, "setup.bin"));
            var recs = CodecTests.Records(File.ReadAllBytes(Path.Combine(dir, "stream.bin")));
            var cc = new ClothcastClient(new Uri("ws://127.0.0.1:9/ws"), new ClientOptions());
            var errors = new List<string>();
            int frames = 0;
            cc.Error += e => errors.Add(e.Message);
            cc.FrameReceived += av => frames++;
            Func<string> drain = () => { errors.Clear(); cc.Poll(); return errors.Count == 1 ? errors[0] : errors.Count + " errors: " + string.Join("; ", errors); };
            cc.Inject(AssetMessage(setup, "a1"));
            cc.Inject(FrameMessage("x", 0, "a1", recs[0]));
            cc.Inject(FrameMessage("y", 0, "a1", recs[0]));
            Harness.Equal("0 errors: ", drain(), "a good asset and two keyframes");
            Harness.Equal(2, frames, "frames decoded");
            var bad = new List<KeyValuePair<byte[], string>>
            {
                new KeyValuePair<byte[], string>(new byte[] { 0xc1 }, "unsupported MessagePack type 0xc1"),
                new KeyValuePair<byte[], string>(new byte[] { 0x92, 0x01 }, "truncated MessagePack"),
                new KeyValuePair<byte[], string>(new MsgPackWriter().Map(1).Str("kind").Str("asset").ToArray(), "message without type"),
                new KeyValuePair<byte[], string>(new MsgPackWriter().Int(7).ToArray(), "a message that is neither a map nor a compact frame"),
                new KeyValuePair<byte[], string>(FrameMessage("x", 1, "nope", recs[1]), "frame of x for unknown asset nope (asked for again)"),
                new KeyValuePair<byte[], string>(new MsgPackWriter().Array(3).Str("frame").Str("x").Int(1).ToArray(), "compact frame: 3 entries; a frame has 9 and two per layer, at most 3 layers"),
                new KeyValuePair<byte[], string>(new MsgPackWriter().Array(9).Str("frame").Int(5).Int(1).Float(0).Float(0).Bin(new byte[28]).Bin(new byte[0]).Str("a1").Bin(recs[1]).ToArray(), "compact frame: avatar: not a String"),
                new KeyValuePair<byte[], string>(new MsgPackWriter().Array(9).Str("frame").Str("x").Int(1).Float(0).Float(0).Bin(new byte[27]).Bin(new byte[0]).Str("a1").Bin(recs[1]).ToArray(), "compact frame: world: 27 bytes, not 7 floats (28)"),
                new KeyValuePair<byte[], string>(FrameMessage("x", 1, "a1", new byte[] { 0x43, 0x43, 0x47, 0x46 }), "avatar x: frame refused: truncated: frame header"),
                new KeyValuePair<byte[], string>(AssetMessage(new byte[] { 1, 2, 3 }, "a2"), "truncated: setup header"),
                new KeyValuePair<byte[], string>(AssetMessage(setup, "a3", w => w.Array(22).Int(5).Int(0).Int(1).Int(2).Int(3).Int(4).Int(3).Int(6).Int(7).Int(8).Int(3).Int(10).Int(11).Int(12).Int(0).Int(14).Int(15).Int(16).Int(0).Int(18).Int(19).Int(20)), "asset parents: a joint's parent must be an earlier joint or -1"),
                new KeyValuePair<byte[], string>(AssetMessage(setup, "a4", w => w.Array(2).Int(-1).Str("0")), "asset parents: not integers"),
                new KeyValuePair<byte[], string>(new MsgPackWriter().Map(3).Str("type").Str("error").Str("code").Str("rate").Str("message").Str("slow down").ToArray(), "server: rate: slow down"),
            };
            long seq = 1;
            foreach (var b in bad)
            {
                cc.Inject(b.Key);
                Harness.Equal(b.Value, drain(), "the error named");
                // x and y still stream, frame after frame
                cc.Inject(FrameMessage("x", seq, "a1", recs[(int)seq]));
                cc.Inject(FrameMessage("y", seq, "a1", recs[(int)seq]));
                frames = 0;
                Harness.Equal("0 errors: ", drain(), "the frames after it");
                Harness.Equal(2, frames, "both avatars' frames decoded after a bad message");
                seq++;
            }
            Harness.Equal(2, cc.Avatars.Count, "the avatars stay");
            Harness.Equal(1L, cc.Avatars["x"].Dropped, "x's refused frame counted as lost");
            Harness.Equal(0L, cc.Avatars["y"].Dropped, "y lost nothing");
            // a frame the decoder lacks the reference of counts as lost, silently; the
            // next keyframe resyncs
            cc.Inject(FrameMessage("x", seq + 1, "a1", recs[(int)seq + 1]));
            Harness.Equal("0 errors: ", drain(), "a frame after a gap");
            Harness.Equal(2L, cc.Avatars["x"].Dropped, "counted as lost");
        });

        foreach (var offThread in new[] { false, true })
        {
            h.Test("client" + (offThread ? " (decoding on the network thread)" : "") + ": two avatars stream, decode and pose the body; reconnects after a server restart", () => Live(offThread));
        }

        h.Test("client: streams over wss from a server whose certificate a CA in the trust store signed", OverTls);

        h.Test("client: a link that goes silent is pinged, then dropped by the watchdog and connected again", () =>
        {
            using (var fake = new SilentServer())
            {
                var cc = new ClothcastClient(new Uri("ws://127.0.0.1:" + fake.Port + "/ws"), new ClientOptions { PingAfter = TimeSpan.FromMilliseconds(300), DeadAfter = TimeSpan.FromMilliseconds(1200) });
                try
                {
                    var closes = new List<CloseInfo>();
                    int welcomes = 0;
                    cc.Closed += c => closes.Add(c);
                    cc.Welcomed += () => welcomes++;
                    cc.Start();
                    PollUntil(cc, () => closes.Count >= 1, 20, "the watchdog's drop");
                    Harness.Equal(1, welcomes, "welcomed");
                    Harness.Equal(1006, closes[0].Code, "close code (" + closes[0] + ")");
                    Harness.True(closes[0].Reason.StartsWith("no word from the server for "), "the reason: " + closes[0].Reason);
                    Harness.True(closes[0].RetryIn.HasValue, "retried");
                    var said = new List<string>();
                    foreach (var m in fake.Received)
                    {
                        var map = MsgPack.Decode(m, 0, m.Length) as Dictionary<string, object>;
                        said.Add(map == null ? "?" : (string)map["type"]);
                    }
                    Harness.Equal("hello,subscribe,ping", string.Join(",", said.GetRange(0, Math.Min(3, said.Count))), "what the client said");
                    PollUntil(cc, () => fake.Accepted >= 2, 20, "a second connection");
                }
                finally
                {
                    cc.Dispose();
                }
            }
        });

        h.Test("client: a refused frame makes it ask for a keyframe, again each second while none comes", () =>
        {
            var dir = Path.Combine(Harness.Root, "tests", "fixtures", "codec", "v5");
            var setup = File.ReadAllBytes(Path.Combine(dir, "setup.bin"));
            var recs = CodecTests.Records(File.ReadAllBytes(Path.Combine(dir, "stream.bin")));
            using (var fake = new SilentServer())
            {
                var cc = new ClothcastClient(new Uri("ws://127.0.0.1:" + fake.Port + "/ws"), new ClientOptions());
                try
                {
                    var errors = new List<string>();
                    cc.Error += e => errors.Add(e.Message);
                    cc.Start();
                    PollUntil(cc, () => cc.TickHz > 0, 20, "the welcome");
                    fake.Send(AssetMessage(setup, "a1"));
                    for (int k = 0; k < 5; k++)
                    {
                        fake.Send(FrameMessage("x", k, "a1", recs[k]));
                        fake.Send(FrameMessage("y", k, "a1", recs[k]));
                    }
                    PollUntil(cc, () => cc.Avatars.ContainsKey("x") && cc.Avatars["x"].Seq == 4 && cc.Avatars["y"].Seq == 4, 20, "five frames of each");
                    Func<string, int> asked = id =>
                    {
                        int n = 0;
                        foreach (var m in fake.Received)
                        {
                            var map = MsgPack.Decode(m, 0, m.Length) as Dictionary<string, object>;
                            var avatars = map != null && "resync".Equals(map["type"]) ? map["avatars"] as object[] : null;
                            if (avatars != null && Array.IndexOf(avatars, id) >= 0) n++;
                        }
                        return n;
                    };
                    Harness.Equal(0, asked("x"), "nothing asked while in step");
                    // x's frame 5 spoiled on the way (its checksum): refused by name, and
                    // a keyframe asked for at once
                    var spoiled = (byte[])recs[5].Clone();
                    spoiled[32] ^= 0x55;
                    var clock = Stopwatch.StartNew();
                    fake.Send(FrameMessage("x", 5, "a1", spoiled));
                    fake.Send(FrameMessage("y", 5, "a1", recs[5]));
                    PollUntil(cc, () => asked("x") == 1, 5, "x's resync");
                    Harness.Equal(1, errors.Count, "one error: " + string.Join("; ", errors));
                    Harness.True(errors[0].StartsWith("avatar x: frame refused: checksum"), errors[0]);
                    // the server does not answer: x's deltas cannot be decoded (y's can),
                    // and it is asked again after a second (x gets deltas only: the
                    // golden stream's frames 6 to 15)
                    for (int k = 6; asked("x") < 2 && clock.Elapsed.TotalSeconds < 6; k++)
                    {
                        fake.Send(FrameMessage("x", k, "a1", recs[6 + k % 10]));
                        if (k < recs.Count) fake.Send(FrameMessage("y", k, "a1", recs[k]));
                        cc.Poll(TimeSpan.FromMilliseconds(50));
                    }
                    Harness.Equal(2, asked("x"), "x's keyframe asked for again");
                    Harness.True(clock.Elapsed.TotalSeconds >= 1.0, "asked again after " + clock.Elapsed.TotalSeconds + " s, not at once");
                    Harness.Equal(4L, cc.Avatars["x"].Seq, "x stood at its last good frame");
                    Harness.True(cc.Avatars["y"].Seq > 10, "y streamed on: " + cc.Avatars["y"].Seq);
                    Harness.Equal(0, asked("y"), "y was in step");
                    // a keyframe (x's stream starting again): decoded, and the deltas after it
                    for (int k = 0; k < 3; k++) fake.Send(FrameMessage("x", 100 + k, "a1", recs[k]));
                    PollUntil(cc, () => cc.Avatars["x"].Seq == 102, 5, "x in step again");
                    Harness.Equal(1, errors.Count, "no more errors: " + string.Join("; ", errors));
                    Harness.Equal(1, fake.Accepted, "one connection all along");
                    Thread.Sleep(1200);
                    cc.Poll();
                    Harness.Equal(2, asked("x"), "nothing asked once in step");
                }
                finally
                {
                    cc.Dispose();
                }
            }
        });

        h.Test("client: a frame naming an asset it lacks makes it ask for the asset again, and the avatar streams on when it comes", () =>
        {
            var dir = Path.Combine(Harness.Root, "tests", "fixtures", "codec", "v5");
            var setup = File.ReadAllBytes(Path.Combine(dir, "setup.bin"));
            var recs = CodecTests.Records(File.ReadAllBytes(Path.Combine(dir, "stream.bin")));
            using (var fake = new SilentServer())
            {
                var cc = new ClothcastClient(new Uri("ws://127.0.0.1:" + fake.Port + "/ws"), new ClientOptions());
                try
                {
                    var errors = new List<string>();
                    cc.Error += e => errors.Add(e.Message);
                    cc.Start();
                    PollUntil(cc, () => cc.TickHz > 0, 20, "the welcome");
                    fake.Send(AssetMessage(setup, "a1"));
                    for (int k = 0; k < 3; k++)
                    {
                        fake.Send(FrameMessage("x", k, "a1", recs[k]));
                        fake.Send(FrameMessage("y", k, "a1", recs[k]));
                    }
                    PollUntil(cc, () => cc.Avatars.ContainsKey("y") && cc.Avatars["x"].Seq == 2 && cc.Avatars["y"].Seq == 2, 20, "three frames of each");
                    // the resyncs the client sent: (avatars, assets) of each
                    Func<List<string>> resyncs = () =>
                    {
                        var said = new List<string>();
                        foreach (var m in fake.Received)
                        {
                            var map = MsgPack.Decode(m, 0, m.Length) as Dictionary<string, object>;
                            if (map == null || !"resync".Equals(map["type"])) continue;
                            object assets;
                            said.Add(string.Join(",", Array.ConvertAll((object[])map["avatars"], o => (string)o)) + " / "
                                + (map.TryGetValue("assets", out assets) ? string.Join(",", Array.ConvertAll((object[])assets, o => (string)o)) : ""));
                        }
                        return said;
                    };
                    // x is dressed in a garment whose asset never came (a server that
                    // thought this client held it): named once, asked for with x's keyframe
                    var clock = Stopwatch.StartNew();
                    fake.Send(FrameMessage("x", 3, "a2", recs[0]));
                    fake.Send(FrameMessage("y", 3, "a1", recs[3]));
                    PollUntil(cc, () => resyncs().Count == 1, 5, "the client's resync");
                    Harness.Equal("x / a2", resyncs()[0], "what it asked for");
                    Harness.Equal(1, errors.Count, "one error: " + string.Join("; ", errors));
                    Harness.Equal("frame of x for unknown asset a2 (asked for again)", errors[0], "the error");
                    // more frames in the garment it lacks: skipped silently (y streams
                    // on), and the asset asked for again after a second
                    for (int k = 4; resyncs().Count < 2 && clock.Elapsed.TotalSeconds < 6; k++)
                    {
                        fake.Send(FrameMessage("x", k, "a2", recs[k % 10]));
                        if (k < recs.Count) fake.Send(FrameMessage("y", k, "a1", recs[k]));
                        cc.Poll(TimeSpan.FromMilliseconds(50));
                    }
                    Harness.Equal(2, resyncs().Count, "asked again: " + string.Join("; ", resyncs()));
                    Harness.Equal("x / a2", resyncs()[1], "what it asked for again");
                    Harness.True(clock.Elapsed.TotalSeconds >= 1.0, "asked again after " + clock.Elapsed.TotalSeconds + " s, not at once");
                    Harness.Equal(1, errors.Count, "no more errors: " + string.Join("; ", errors));
                    Harness.Equal(2L, cc.Avatars["x"].Seq, "x held its last garment");
                    Harness.True(cc.Avatars["y"].Seq > 10, "y streamed on: " + cc.Avatars["y"].Seq);
                    // the asset, then x's keyframe in it and the deltas after it
                    fake.Send(AssetMessage(setup, "a2"));
                    for (int k = 0; k < 3; k++) fake.Send(FrameMessage("x", 200 + k, "a2", recs[k]));
                    PollUntil(cc, () => cc.Avatars["x"].Seq == 202, 5, "x streaming in the new garment");
                    Harness.Equal("a2", cc.Avatars["x"].Asset.Hash, "x's garment");
                    Harness.Equal(1, errors.Count, "no more errors: " + string.Join("; ", errors));
                    Thread.Sleep(1200);
                    cc.Poll();
                    Harness.Equal(2, resyncs().Count, "nothing asked once it came");
                }
                finally
                {
                    cc.Dispose();
                }
            }
        });

        h.Test("client: a wrong token is refused with 4001 and not retried", () =>
        {
            string addr;
            var srv = Serve("127.0.0.1:0", out addr);
            var cc = new ClothcastClient(new Uri("ws://" + addr + "/ws"), new ClientOptions { Token = "not-the-token" });
            try
            {
                var closes = new List<CloseInfo>();
                cc.Closed += c => closes.Add(c);
                cc.Start();
                PollUntil(cc, () => closes.Count >= 1, 30, "the refusal");
                Harness.Equal(4001, closes[0].Code, "close code (" + closes[0] + ")");
                Harness.True(!closes[0].RetryIn.HasValue, "not retried");
                Thread.Sleep(1500);
                cc.Poll();
                Harness.Equal(1, cc.Connections, "one connection only");
            }
            finally
            {
                cc.Dispose();
                Stop(srv);
            }
        });
    }

    /// <summary>The client against a real server and publisher.</summary>
    static void Live(bool offThread)
    {
        string addr;
        Process srv = Serve("127.0.0.1:0", out addr), play = null;
        var cc = new ClothcastClient(new Uri("ws://" + addr + "/ws"), new ClientOptions { Token = ViewerToken, DecodeOnNetworkThread = offThread });
        int thread = Thread.CurrentThread.ManagedThreadId;
        // the arrays each avatar's frames came in: reused, not made per frame
        var arrays = new Dictionary<string, HashSet<object>>();
        try
        {
            play = Play(addr);
            var errors = new List<Exception>();
            var closes = new List<CloseInfo>();
            var gone = new List<string>();
            int assets = 0, welcomes = 0;
            var frames = new Dictionary<string, int>();
            var lastSeq = new Dictionary<string, long>();
            cc.Error += e => errors.Add(e);
            cc.Closed += c => closes.Add(c);
            cc.AvatarGone += id => gone.Add(id);
            cc.Welcomed += () => welcomes++;
            cc.AssetReceived += a =>
            {
                assets++;
                Harness.True(a.Setup.VertexCount > 100, "a garment setup");
                Harness.Equal(22, a.Parents.Length, "the canonical skeleton's parents");
                Harness.Equal(66, a.Skeleton.Length, "22 rest joints");
                int bodyVertices = a.BodyPositions.Length / 3;
                Harness.Equal(4 * bodyVertices, a.BodyJoints.Length, "4 skin joints a body vertex");
                Harness.Equal(4 * bodyVertices, a.BodyWeights.Length, "4 skin weights a body vertex");
            };
            cc.FrameReceived += av =>
            {
                Harness.Equal(thread, Thread.CurrentThread.ManagedThreadId, "events raised on the polling thread");
                HashSet<object> seen;
                if (!arrays.TryGetValue(av.Id, out seen)) arrays[av.Id] = seen = new HashSet<object>();
                seen.Add(av.Garment);
                int n;
                frames.TryGetValue(av.Id, out n);
                frames[av.Id] = n + 1;
                long before;
                if (lastSeq.TryGetValue(av.Id, out before)) Harness.True(av.Seq > before, av.Id + ": frame numbers increase");
                lastSeq[av.Id] = av.Seq;
            };
            cc.Start();
            PollUntil(cc, () => frames.Count >= 2 && Min(frames) >= 45, 90, "45 frames of each of 2 avatars");
            Harness.Equal(1, welcomes, "welcomed once");
            Harness.True(assets >= 1, "the asset came before its frames");
            Harness.Equal(0, errors.Count, "errors: " + string.Join("; ", errors));
            Harness.Equal(30.0, cc.TickHz, "the server's tick rate");
            foreach (var av in cc.Avatars.Values)
            {
                Harness.True(av.Dropped <= 2, av.Id + ": dropped " + av.Dropped);
                Harness.True(arrays[av.Id].Count <= 8, av.Id + ": " + arrays[av.Id].Count + " garment arrays in " + av.Frames + " frames");
                CheckOnBody(av);
            }

            // the server restarts on the same address: the client says so, drops the
            // avatars, connects again and they stream again from keyframes
            Stop(play);
            Stop(srv);
            PollUntil(cc, () => closes.Count >= 1, 30, "the drop");
            Harness.True(closes[0].RetryIn.HasValue, "a drop it retries after: " + closes[0]);
            Harness.Equal(2, gone.Count, "both avatars gone with the connection");
            Harness.Equal(0, cc.Avatars.Count, "no avatars while disconnected");
            srv = null;
            srv = Serve(addr, out addr);
            play = Play(addr);
            frames.Clear();
            lastSeq.Clear();
            PollUntil(cc, () => frames.Count >= 2 && Min(frames) >= 10, 90, "frames again after the restart");
            Harness.True(cc.Connections >= 2, "connected again");
            Harness.Equal(0, errors.Count, "errors: " + string.Join("; ", errors));
            foreach (var av in cc.Avatars.Values) CheckOnBody(av);
        }
        finally
        {
            cc.Dispose();
            if (play != null) Stop(play);
            if (srv != null) Stop(srv);
        }
    }

    static int Min(Dictionary<string, int> d)
    {
        int m = int.MaxValue;
        foreach (var v in d.Values) m = Math.Min(m, v);
        return m;
    }

    /// <summary>The garment, moved into the world by the frame's world transform, lies
    /// on the body posed by the frame's bones (<see cref="Skinning.BoneMatrices"/>):
    /// every sampled garment vertex within 15 cm of a posed body vertex, and most within
    /// 4 cm (on the test database's garment: median ~2.6 cm, the largest ~9 cm, a loose
    /// hem). A wrong world transform, bone order or matrix layout puts it decimetres to
    /// metres off.</summary>
    static void CheckOnBody(RemoteAvatar av)
    {
        var a = av.Asset;
        int nb = a.Parents.Length;
        var mats = new float[16 * nb];
        Skinning.BoneMatrices(av.Bones, av.World, mats);
        int bodyVertices = a.BodyPositions.Length / 3;
        var posed = new float[3 * bodyVertices];
        Skinning.PoseBody(a, mats, posed);
        var garment = new float[av.Garment.Length];
        Skinning.ToWorld(av.Garment, av.World, garment);
        int n = garment.Length / 3, sampled = 0, near = 0;
        for (int i = 0; i < n; i += Math.Max(1, n / 300))
        {
            double best = double.MaxValue;
            for (int v = 0; v < bodyVertices; v++)
            {
                double dx = garment[3 * i] - posed[3 * v], dy = garment[3 * i + 1] - posed[3 * v + 1], dz = garment[3 * i + 2] - posed[3 * v + 2];
                best = Math.Min(best, dx * dx + dy * dy + dz * dz);
            }
            best = Math.Sqrt(best);
            Harness.True(best < 0.15, av.Id + ": garment vertex " + i + " is " + best.ToString("F3") + " m from the posed body");
            sampled++;
            if (best < 0.04) near++;
        }
        Harness.True(near >= 0.6 * sampled, av.Id + ": only " + near + " of " + sampled + " garment vertices within 4 cm of the posed body vertices");
    }
}

/// <summary>A WebSocket "server" that accepts one connection at a time, welcomes it and
/// then says nothing more unless the test has it <see cref="Send"/>, nor answers
/// anything; it records the messages it receives (client frames are masked; only whole
/// small frames are read, which is what the client sends).</summary>
sealed class SilentServer : IDisposable
{
    readonly System.Net.Sockets.TcpListener listener = new System.Net.Sockets.TcpListener(System.Net.IPAddress.Loopback, 0);
    readonly List<System.Net.Sockets.TcpClient> held = new List<System.Net.Sockets.TcpClient>();
    public readonly System.Collections.Concurrent.ConcurrentQueue<byte[]> Received = new System.Collections.Concurrent.ConcurrentQueue<byte[]>();
    public int Accepted;

    public SilentServer()
    {
        listener.Start();
        new Thread(Serve) { IsBackground = true }.Start();
    }

    public int Port { get { return ((System.Net.IPEndPoint)listener.LocalEndpoint).Port; } }

    System.IO.Stream latest;

    /// <summary>Sends <paramref name="payload"/> as one binary message to the latest
    /// connection (after its welcome).</summary>
    public void Send(byte[] payload)
    {
        var head = new List<byte> { 0x82 };
        if (payload.Length < 126) head.Add((byte)payload.Length);
        else if (payload.Length < 65536) head.AddRange(new byte[] { 126, (byte)(payload.Length >> 8), (byte)payload.Length });
        else
        {
            head.Add(127);
            for (int i = 7; i >= 0; i--) head.Add((byte)((long)payload.Length >> (8 * i)));
        }
        lock (held)
        {
            latest.Write(head.ToArray(), 0, head.Count);
            latest.Write(payload, 0, payload.Length);
        }
    }

    void Serve()
    {
        while (true)
        {
            System.Net.Sockets.TcpClient c;
            try { c = listener.AcceptTcpClient(); }
            catch (Exception) { return; }
            Interlocked.Increment(ref Accepted);
            lock (held) held.Add(c);
            new Thread(() => Talk(c)) { IsBackground = true }.Start();
        }
    }

    void Talk(System.Net.Sockets.TcpClient c)
    {
        try
        {
            var s = c.GetStream();
            var head = new StringBuilderReader(s).ReadHead();
            var key = Regex.Match(head, @"Sec-WebSocket-Key:\s*(\S+)", RegexOptions.IgnoreCase).Groups[1].Value;
            var accept = Convert.ToBase64String(System.Security.Cryptography.SHA1.Create().ComputeHash(System.Text.Encoding.ASCII.GetBytes(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")));
            var reply = System.Text.Encoding.ASCII.GetBytes("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + accept + "\r\n\r\n");
            s.Write(reply, 0, reply.Length);
            var welcome = new MsgPackWriter().Map(2).Str("type").Str("welcome").Str("tick_hz").Float(30).ToArray();
            var frame = new byte[2 + welcome.Length];
            frame[0] = 0x82;
            frame[1] = (byte)welcome.Length;
            Array.Copy(welcome, 0, frame, 2, welcome.Length);
            lock (held)
            {
                s.Write(frame, 0, frame.Length);
                latest = s;
            }
            while (true)
            {
                int b0 = s.ReadByte(), b1 = s.ReadByte();
                if (b0 < 0 || b1 < 0) return;
                int len = b1 & 0x7f;
                if (len == 126) len = (s.ReadByte() << 8) | s.ReadByte();
                if (len == 127) return;
                var mask = Read(s, 4);
                var payload = Read(s, len);
                for (int i = 0; i < len; i++) payload[i] ^= mask[i % 4];
                Received.Enqueue(payload);
            }
        }
        catch (Exception) { }
    }

    static byte[] Read(System.IO.Stream s, int n)
    {
        var b = new byte[n];
        for (int at = 0; at < n;)
        {
            int got = s.Read(b, at, n - at);
            if (got <= 0) throw new System.IO.EndOfStreamException();
            at += got;
        }
        return b;
    }

    public void Dispose()
    {
        listener.Stop();
        lock (held) foreach (var c in held) c.Close();
    }

    /// <summary>Reads an HTTP request head byte by byte (up to the blank line).</summary>
    sealed class StringBuilderReader
    {
        readonly System.IO.Stream s;
        public StringBuilderReader(System.IO.Stream s) { this.s = s; }
        public string ReadHead()
        {
            var sb = new System.Text.StringBuilder();
            while (!sb.ToString().EndsWith("\r\n\r\n"))
            {
                int b = s.ReadByte();
                if (b < 0 || sb.Length > 16384) throw new System.IO.EndOfStreamException();
                sb.Append((char)b);
            }
            return sb.ToString();
        }
    }
}
