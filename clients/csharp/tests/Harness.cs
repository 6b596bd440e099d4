// A small test runner (no test framework is needed to build these tests with Mono's
// mcs alone): each test is a named action; a failed check throws; the exit code is the
// number of failures. Usage: Tests.exe [NAME-FILTER]

using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;

sealed class TestFailure : Exception
{
    public TestFailure(string message) : base(message) { }
}

sealed class Harness
{
    /// <summary>The repository root (from CLOTHCAST_ROOT, else three levels above the
    /// test executable's folder, clients/csharp/build).</summary>
    public static string Root
    {
        get
        {
            var env = Environment.GetEnvironmentVariable("CLOTHCAST_ROOT");
            if (!string.IsNullOrEmpty(env)) return env;
            var here = Path.GetDirectoryName(typeof(Harness).Assembly.Location);
            return Path.GetFullPath(Path.Combine(here, "..", "..", ".."));
        }
    }

    readonly List<KeyValuePair<string, Action>> tests = new List<KeyValuePair<string, Action>>();

    public void Test(string name, Action body) { tests.Add(new KeyValuePair<string, Action>(name, body)); }

    public static void True(bool ok, string what)
    {
        if (!ok) throw new TestFailure(what);
    }

    public static void Equal<T>(T expected, T actual, string what)
    {
        if (!EqualityComparer<T>.Default.Equals(expected, actual)) throw new TestFailure(what + ": expected " + expected + ", got " + actual);
    }

    public static void SameBytes(byte[] expected, byte[] actual, string what)
    {
        Equal(expected.Length, actual.Length, what + " length");
        for (int i = 0; i < expected.Length; i++)
        {
            if (expected[i] != actual[i]) throw new TestFailure(what + ": first difference at byte " + i);
        }
    }

    static int Main(string[] args)
    {
        var h = new Harness();
        CodecTests.Register(h);
        MsgPackTests.Register(h);
        ClientTests.Register(h);
        SkinningTests.Register(h);
        string filter = args.Length > 0 ? args[0] : null;
        int failed = 0, ran = 0;
        foreach (var t in h.tests)
        {
            if (filter != null && !t.Key.Contains(filter)) continue;
            ran++;
            var clock = Stopwatch.StartNew();
            try
            {
                t.Value();
                Console.WriteLine("ok   " + t.Key + " (" + clock.ElapsedMilliseconds + " ms)");
            }
            catch (Exception e)
            {
                failed++;
                Console.WriteLine("FAIL " + t.Key + ": " + (e is TestFailure ? e.Message : e.ToString()));
            }
        }
        Console.WriteLine(ran + " tests, " + failed + " failed");
        return failed;
    }
}
