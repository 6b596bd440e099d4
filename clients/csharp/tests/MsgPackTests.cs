// The MessagePack reader and writer: round trips, and hostile input refused by name
// without allocating what it claims.

using System;
using System.Collections.Generic;
using Clothcast;

static class MsgPackTests
{
    static string Refusal(byte[] b)
    {
        try { MsgPack.Decode(b, 0, b.Length); }
        catch (MsgPackException e) { return e.Message; }
        return "accepted";
    }

    public static void Register(Harness h)
    {
        h.Test("msgpack: what the writer writes reads back", () =>
        {
            var w = new MsgPackWriter().Map(7)
                .Str("type").Str("subscribe")
                .Str("avatars").Array(2).Str("a").Str(new string('é', 200))
                .Str("small").Int(-32)
                .Str("big").Int(-1234567890123L)
                .Str("yes").Bool(true)
                .Str("none").Nil()
                .Str("n").Int(127);
            var bytes = w.ToArray();
            var m = (Dictionary<string, object>)MsgPack.Decode(bytes, 0, bytes.Length);
            Harness.Equal("subscribe", (string)m["type"], "type");
            var avatars = (object[])m["avatars"];
            Harness.Equal(2, avatars.Length, "avatars");
            Harness.Equal(new string('é', 200), (string)avatars[1], "a long UTF-8 string");
            Harness.Equal(-32L, (long)m["small"], "negative fixint");
            Harness.Equal(-1234567890123L, (long)m["big"], "int64");
            Harness.Equal(true, (bool)m["yes"], "bool");
            Harness.True(m["none"] == null, "nil");
            Harness.Equal(127L, (long)m["n"], "positive fixint");
        });

        h.Test("msgpack: the server's types read as plain values", () =>
        {
            // bin 8, float 32 and 64, uint 8/16/32/64, int 8/16/32, str 8, array 16, map 16
            var b = new byte[] {
                0xdc, 0x00, 0x0c, // array 16 of 12
                0xc4, 0x03, 1, 2, 3,
                0xca, 0x3f, 0xc0, 0x00, 0x00, // 1.5f
                0xcb, 0x40, 0x09, 0x21, 0xfb, 0x54, 0x44, 0x2d, 0x18, // pi
                0xcc, 0xff, 0xcd, 0x12, 0x34, 0xce, 0xff, 0xff, 0xff, 0xff,
                0xcf, 0, 0, 0, 1, 0, 0, 0, 0,
                0xd0, 0x80, 0xd1, 0x80, 0x00, 0xd2, 0x80, 0, 0, 0,
                0xd9, 0x02, (byte)'h', (byte)'i',
                0xde, 0x00, 0x01, 0xa1, (byte)'k', 0xc2,
            };
            var a = (object[])MsgPack.Decode(b, 0, b.Length);
            var bin = (ArraySegment<byte>)a[0];
            Harness.Equal(3, bin.Count, "bin length");
            Harness.Equal((byte)3, bin.Array[bin.Offset + 2], "bin bytes (a view into the input)");
            Harness.Equal(1.5, (double)a[1], "float 32");
            Harness.Equal(Math.PI, (double)a[2], "float 64");
            Harness.Equal(255L, (long)a[3], "uint 8");
            Harness.Equal(0x1234L, (long)a[4], "uint 16");
            Harness.Equal(0xffffffffL, (long)a[5], "uint 32");
            Harness.Equal(1L << 32, (long)a[6], "uint 64");
            Harness.Equal(-128L, (long)a[7], "int 8");
            Harness.Equal(-32768L, (long)a[8], "int 16");
            Harness.Equal((long)int.MinValue, (long)a[9], "int 32");
            Harness.Equal("hi", (string)a[10], "str 8");
            Harness.Equal(false, (bool)((System.Collections.Generic.Dictionary<string, object>)a[11])["k"], "map 16");
        });

        h.Test("msgpack: hostile input is refused by name before anything is allocated for it", () =>
        {
            Harness.Equal("truncated MessagePack", Refusal(new byte[0]), "empty");
            Harness.Equal("truncated MessagePack", Refusal(new byte[] { 0x92, 0x01 }), "an array short of an element");
            // counts of 2^32 − 1 with nothing behind them: refused, not allocated
            Harness.Equal("truncated MessagePack", Refusal(new byte[] { 0xdd, 0xff, 0xff, 0xff, 0xff }), "a huge array");
            Harness.Equal("truncated MessagePack", Refusal(new byte[] { 0xdf, 0xff, 0xff, 0xff, 0xff, 0xa0 }), "a huge map");
            Harness.Equal("truncated MessagePack", Refusal(new byte[] { 0xc6, 0xff, 0xff, 0xff, 0xff, 1 }), "a huge bin");
            Harness.Equal("truncated MessagePack", Refusal(new byte[] { 0xdb, 0x7f, 0xff, 0xff, 0xff }), "a huge string");
            Harness.Equal("trailing bytes after MessagePack value", Refusal(new byte[] { 0x01, 0x02 }), "two values");
            Harness.Equal("non-string map key", Refusal(new byte[] { 0x81, 0x01, 0x02 }), "an integer key");
            Harness.Equal("MessagePack string is not UTF-8", Refusal(new byte[] { 0xa2, 0xc3, 0x28 }), "bad UTF-8");
            Harness.Equal("unsupported MessagePack type 0xc1", Refusal(new byte[] { 0xc1 }), "the never-used type");
            Harness.Equal("MessagePack integer above 2^63", Refusal(new byte[] { 0xcf, 0xff, 0, 0, 0, 0, 0, 0, 0 }), "uint 64 above 2^63");
            var deep = new byte[40];
            for (int i = 0; i < deep.Length; i++) deep[i] = 0x91;
            Harness.Equal("MessagePack nested too deeply", Refusal(deep), "40 nested arrays");
            Harness.True(Refusal(new byte[] { 0x91, 0x01 }) == "accepted", "a real array still reads");
        });
    }
}
