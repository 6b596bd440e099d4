// A terminal viewer in C#: connects, decodes every avatar's garment, and prints per
// avatar fps, kbit/s and frames lost once a second (what `clothcast watch` prints),
// and how long its polling thread spent in Poll() (milliseconds a second): the cost
// a render loop pays. It polls the way a game loop does, every ~11 ms (90 Hz).
// Usage: mono Watch.exe [ws://127.0.0.1:8470/ws] [--token T] [--seconds S] [--decode-thread]
// (--decode-thread: ClientOptions.DecodeOnNetworkThread)

using System;
using System.Collections.Generic;
using System.Diagnostics;
using Clothcast;

static class Watch
{
    static int Main(string[] args)
    {
        string url = "ws://127.0.0.1:8470/ws", token = Environment.GetEnvironmentVariable("CLOTHCAST_VIEWER_TOKEN");
        double seconds = double.PositiveInfinity;
        bool offThread = false;
        for (int i = 0; i < args.Length; i++)
        {
            if (args[i] == "--token" && i + 1 < args.Length) token = args[++i];
            else if (args[i] == "--seconds" && i + 1 < args.Length && double.TryParse(args[++i], out seconds)) { }
            else if (args[i] == "--decode-thread") offThread = true;
            else if (args[i].StartsWith("ws")) url = args[i];
            else { Console.Error.WriteLine("usage: Watch.exe [URL] [--token T] [--seconds S] [--decode-thread]"); return 2; }
        }
        Uri uri;
        if (!Uri.TryCreate(url, UriKind.Absolute, out uri)) { Console.Error.WriteLine("not a URL: " + url); return 2; }
        using (var cc = new ClothcastClient(uri, new ClientOptions { Token = token, DecodeOnNetworkThread = offThread }))
        {
            bool refused = false;
            cc.Welcomed += () => Console.WriteLine("connected to " + url + " (tick " + cc.TickHz + " Hz)");
            cc.AvatarAdded += av => Console.WriteLine(av.Id + ": " + av.Asset.Garment + ", " + av.Asset.Setup.VertexCount + " vertices");
            cc.AvatarGone += id => Console.WriteLine(id + ": gone");
            cc.Error += e => Console.WriteLine("error: " + e.Message);
            cc.Closed += c =>
            {
                Console.WriteLine("connection closed: " + c + (c.RetryIn.HasValue ? ", retrying in " + c.RetryIn.Value.TotalSeconds + " s" : ""));
                refused |= !c.RetryIn.HasValue;
            };
            cc.Start();
            var clock = Stopwatch.StartNew();
            var last = new Dictionary<string, long[]>();
            double report = 1, polling = 0;
            var poll = new Stopwatch();
            while (clock.Elapsed.TotalSeconds < seconds && !refused)
            {
                poll.Restart();
                cc.Poll();
                polling += poll.Elapsed.TotalMilliseconds;
                System.Threading.Thread.Sleep(11);
                if (clock.Elapsed.TotalSeconds < report) continue;
                report += 1;
                Console.WriteLine(string.Format("poll {0:F1} ms/s", polling));
                polling = 0;
                foreach (var av in cc.Avatars.Values)
                {
                    long[] was;
                    if (!last.TryGetValue(av.Id, out was)) was = new long[] { 0, 0 };
                    Console.WriteLine(string.Format("{0,-16} {1,5} fps {2,8:F1} kbit/s  frame {3}  lost {4}", av.Id, av.Frames - was[0], (av.Bytes - was[1]) * 8 / 1000.0, av.Seq, av.Dropped));
                    last[av.Id] = new long[] { av.Frames, av.Bytes };
                }
            }
            return refused ? 1 : 0;
        }
    }
}
