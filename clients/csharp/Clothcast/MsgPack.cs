// A small MessagePack reader and writer: the subset clothcast's protocol uses (maps
// with string keys, arrays, strings, bin, integers, floats, booleans, nil), as the
// JavaScript client's msgpack.js. Input is treated as hostile: truncation, unknown
// types, non-string keys, bad UTF-8, nesting deeper than 32 and counts larger than the
// bytes left are refused with a MsgPackException that names the problem, before
// anything is allocated for them.

using System;
using System.Collections.Generic;
using System.IO;
using System.Text;

namespace Clothcast
{
    /// <summary>Malformed, truncated or unsupported MessagePack.</summary>
    public sealed class MsgPackException : Exception
    {
        public MsgPackException(string message) : base(message) { }
    }

    /// <summary>Reads one MessagePack value into plain objects: a map is a
    /// <c>Dictionary&lt;string, object&gt;</c>, an array an <c>object[]</c>, a string a
    /// <c>string</c>, bin an <c>ArraySegment&lt;byte&gt;</c> into the input (no copy),
    /// an integer a <c>long</c>, a float a <c>double</c>, a boolean a <c>bool</c>, nil
    /// <c>null</c>.</summary>
    public static class MsgPack
    {
        const int MaxDepth = 32;
        static readonly UTF8Encoding Utf8 = new UTF8Encoding(false, true);

        /// <summary>The value in <c>bytes[offset .. offset + count]</c>, which must be
        /// exactly one value.</summary>
        public static object Decode(byte[] bytes, int offset, int count)
        {
            if (bytes == null || offset < 0 || count < 0 || offset > bytes.Length - count) throw new MsgPackException("MessagePack slice outside its array");
            var r = new Reader { B = bytes, Pos = offset, End = offset + count };
            var v = r.Value(0);
            if (r.Pos != r.End) throw new MsgPackException("trailing bytes after MessagePack value");
            return v;
        }

        sealed class Reader
        {
            public byte[] B;
            public int Pos, End;

            void Need(long n)
            {
                if (n > End - Pos) throw new MsgPackException("truncated MessagePack");
            }

            long Big(int n)
            {
                Need(n);
                long v = 0;
                for (int i = 0; i < n; i++) v = (v << 8) | B[Pos + i];
                Pos += n;
                return v;
            }

            string Str(long n)
            {
                Need(n);
                string s;
                try { s = Utf8.GetString(B, Pos, (int)n); }
                catch (ArgumentException) { throw new MsgPackException("MessagePack string is not UTF-8"); }
                Pos += (int)n;
                return s;
            }

            ArraySegment<byte> Bin(long n)
            {
                Need(n);
                var s = new ArraySegment<byte>(B, Pos, (int)n);
                Pos += (int)n;
                return s;
            }

            object[] Arr(long n, int depth)
            {
                Need(n); // every element takes at least a byte
                var a = new object[n];
                for (long i = 0; i < n; i++) a[i] = Value(depth + 1);
                return a;
            }

            Dictionary<string, object> Map(long n, int depth)
            {
                Need(2 * n);
                var m = new Dictionary<string, object>((int)n);
                for (long i = 0; i < n; i++)
                {
                    var k = Value(depth + 1) as string;
                    if (k == null) throw new MsgPackException("non-string map key");
                    m[k] = Value(depth + 1);
                }
                return m;
            }

            double Float(int n)
            {
                long bits = Big(n);
                if (n == 4) return BitConverter.ToSingle(BitConverter.GetBytes((int)bits), 0);
                return BitConverter.Int64BitsToDouble(bits);
            }

            public object Value(int depth)
            {
                if (depth > MaxDepth) throw new MsgPackException("MessagePack nested too deeply");
                Need(1);
                int t = B[Pos++];
                if (t <= 0x7f) return (long)t;
                if (t >= 0xe0) return (long)(t - 256);
                if ((t & 0xf0) == 0x80) return Map(t & 0x0f, depth);
                if ((t & 0xf0) == 0x90) return Arr(t & 0x0f, depth);
                if ((t & 0xe0) == 0xa0) return Str(t & 0x1f);
                switch (t)
                {
                    case 0xc0: return null;
                    case 0xc2: return false;
                    case 0xc3: return true;
                    case 0xc4: return Bin(Big(1));
                    case 0xc5: return Bin(Big(2));
                    case 0xc6: return Bin(Big(4));
                    case 0xca: return Float(4);
                    case 0xcb: return Float(8);
                    case 0xcc: return Big(1);
                    case 0xcd: return Big(2);
                    case 0xce: return Big(4);
                    case 0xcf:
                        {
                            long v = Big(8);
                            if (v < 0) throw new MsgPackException("MessagePack integer above 2^63");
                            return v;
                        }
                    case 0xd0: return (long)(sbyte)Big(1);
                    case 0xd1: return (long)(short)Big(2);
                    case 0xd2: return (long)(int)Big(4);
                    case 0xd3: return Big(8);
                    case 0xd9: return Str(Big(1));
                    case 0xda: return Str(Big(2));
                    case 0xdb: return Str(Big(4));
                    case 0xdc: return Arr(Big(2), depth);
                    case 0xdd: return Arr(Big(4), depth);
                    case 0xde: return Map(Big(2), depth);
                    case 0xdf: return Map(Big(4), depth);
                    default: throw new MsgPackException("unsupported MessagePack type 0x" + t.ToString("x2"));
                }
            }
        }
    }

    /// <summary>Writes MessagePack (what the client sends: small maps of strings,
    /// integers, booleans, nil and arrays).</summary>
    public sealed class MsgPackWriter
    {
        readonly MemoryStream s = new MemoryStream();

        public byte[] ToArray() { return s.ToArray(); }

        void Big(long v, int n)
        {
            for (int i = n - 1; i >= 0; i--) s.WriteByte((byte)(v >> (8 * i)));
        }

        public MsgPackWriter Map(int n)
        {
            if (n < 16) s.WriteByte((byte)(0x80 | n));
            else { s.WriteByte(0xde); Big(n, 2); }
            return this;
        }

        public MsgPackWriter Array(int n)
        {
            if (n < 16) s.WriteByte((byte)(0x90 | n));
            else { s.WriteByte(0xdc); Big(n, 2); }
            return this;
        }

        public MsgPackWriter Str(string v)
        {
            var b = Encoding.UTF8.GetBytes(v);
            if (b.Length < 32) s.WriteByte((byte)(0xa0 | b.Length));
            else if (b.Length < 256) { s.WriteByte(0xd9); Big(b.Length, 1); }
            else if (b.Length < 65536) { s.WriteByte(0xda); Big(b.Length, 2); }
            else { s.WriteByte(0xdb); Big(b.Length, 4); }
            s.Write(b, 0, b.Length);
            return this;
        }

        public MsgPackWriter Int(long v)
        {
            if (v >= 0 && v < 128) s.WriteByte((byte)v);
            else if (v < 0 && v >= -32) s.WriteByte((byte)(0xe0 | (v + 32)));
            else { s.WriteByte(0xd3); Big(v, 8); }
            return this;
        }

        public MsgPackWriter Bin(byte[] v)
        {
            if (v.Length < 256) { s.WriteByte(0xc4); Big(v.Length, 1); }
            else if (v.Length < 65536) { s.WriteByte(0xc5); Big(v.Length, 2); }
            else { s.WriteByte(0xc6); Big(v.Length, 4); }
            s.Write(v, 0, v.Length);
            return this;
        }

        public MsgPackWriter Float(double v)
        {
            s.WriteByte(0xcb);
            Big(BitConverter.DoubleToInt64Bits(v), 8);
            return this;
        }

        public MsgPackWriter Bool(bool v)
        {
            s.WriteByte(v ? (byte)0xc3 : (byte)0xc2);
            return this;
        }

        public MsgPackWriter Nil()
        {
            s.WriteByte(0xc0);
            return this;
        }

        /// <summary>A string, or nil for null.</summary>
        public MsgPackWriter StrOrNil(string v) { return v == null ? Nil() : Str(v); }
    }
}
