// clothcast garment stream decoder, format v5: the C# twin of the Rust `codec` module
// (src/codec/) and of the JavaScript decoder (clients/web/codec.js). Integer
// arithmetic throughout (64-bit where products need it), so it reproduces the Rust
// encoder's reconstruction bit for bit. No dependencies beyond the base class library
// (.NET Standard 2.0, Unity, Mono).
//
//   var setup = GarmentSetup.Parse(setupBytes);             // once per garment
//   var dec = new GarmentDecoder(setup);
//   var positions = new float[3 * setup.VertexCount];
//   dec.Decode(frameBytes, 0, frameBytes.Length, positions); // in place, every frame
//
// Decode allocates nothing once the decoder exists (models, range decoder, header and
// scratch are reused); error paths allocate their CodecException. Every error is a
// CodecException whose Code names the problem ("truncated", "missing-reference",
// "checksum", ... as the JavaScript decoder's codes); a refused frame changes neither
// the decoder's state nor the output.

using System;

namespace Clothcast
{
    /// <summary>A refused setup or frame. <see cref="Code"/> names the problem.</summary>
    public sealed class CodecException : Exception
    {
        /// <summary>"empty", "truncated", "bad-magic", "unsupported-version", "bad-kind",
        /// "corrupt", "too-large", "trailing-bytes", "invalid", "wrong-setup",
        /// "mismatch", "missing-reference" (ask the server for a keyframe) or
        /// "checksum".</summary>
        public readonly string Code;

        public CodecException(string code, string message) : base(code + ": " + message)
        {
            Code = code;
        }
    }

    /// <summary>The constants of format version 5 (src/codec/format.rs).</summary>
    public static class Format
    {
        public const int Version = 5;
        public const int FrameHeaderLen = 40;
        internal const int SetupHeaderLen = 24;
        internal const uint NoRef = 0xffffffff;
        internal const int LatticeLimit = 1 << 21;
        internal const uint MaxVertices = 1u << 22;
        internal const uint MaxBones = 256;
        internal const uint MaxTriangles = 1u << 23;
        internal const int WeightOne = 255;
        internal const long One = 1 << 14;
        internal const long Half = 1 << 13;
        internal const int PatchSize = 64;
        internal const int ModeSkip = 0;
        internal const int SpatialNone = 0;
        internal const int SpatialMean = 1;
        internal const int SpatialParallelogram = 2;
        internal const int BaseSkinned = 1;
        internal const int ProbBits = 15;
        internal const int ProbCountShift = 16;
        internal const int ProbInit = 1 << (ProbBits - 1);
        internal const int ProbShift = 6;
        internal const int DecisionBits = 10;
        internal const uint RangeTop = 1u << 24;
        internal const int ActivityClasses = 5;
        internal const int Hints = 2 * ActivityClasses;
        internal const int ZeroContexts = 6 * Hints;
        internal const int SignContexts = Hints;
        internal const int MaxPrefix = 26;

        /// <summary>Largest possible frame for these counts, bytes (the Rust
        /// <c>max_frame_bytes</c>).</summary>
        public static long MaxFrameBytes(long vertices, long bones)
        {
            long ints = 3 * vertices + 7 * bones;
            long bitsPerInt = DecisionBits * (2 + MaxPrefix + 1) + MaxPrefix;
            long patches = (vertices + PatchSize - 1) / PatchSize;
            long bits = ints * bitsPerInt + patches * 4 * DecisionBits;
            return FrameHeaderLen + 5 + (bits + 7) / 8 + 8;
        }

        /// <summary>FNV-1a (32-bit) over the little-endian 32-bit words of
        /// <paramref name="count"/> bytes (the last word zero-padded): a setup's id.</summary>
        public static uint WordHash(byte[] b, int offset, int count)
        {
            uint h = 0x811c9dc5;
            for (int i = 0; i < count; i += 4)
            {
                uint w = b[offset + i];
                if (i + 1 < count) w |= (uint)b[offset + i + 1] << 8;
                if (i + 2 < count) w |= (uint)b[offset + i + 2] << 16;
                if (i + 3 < count) w |= (uint)b[offset + i + 3] << 24;
                h = unchecked((h ^ w) * 0x01000193);
            }
            return h;
        }

        /// <summary>FNV-1a over 32-bit words (the frame checksum's hash).</summary>
        public static uint WordHash(int[] words)
        {
            uint h = 0x811c9dc5;
            for (int i = 0; i < words.Length; i++) h = unchecked((h ^ (uint)words[i]) * 0x01000193);
            return h;
        }

        internal static uint U32(byte[] b, int o)
        {
            return (uint)(b[o] | (b[o + 1] << 8) | (b[o + 2] << 16) | (b[o + 3] << 24));
        }
    }

    /// <summary>A frame's header (src/codec/format.rs, <c>FrameHeader</c>).</summary>
    public sealed class FrameHeader
    {
        /// <summary>True for a keyframe (predicted from the setup alone), false for a
        /// delta (from frame <see cref="Reference"/>).</summary>
        public bool Key;
        public uint SetupId, StreamId, Frame, Reference, Vertices, Bones, Checksum, PayloadLen;

        /// <summary>Parses and validates the header of the frame in
        /// <c>data[offset .. offset + count]</c> (and that the payload length matches)
        /// into this object; throws <see cref="CodecException"/>.</summary>
        public FrameHeader Parse(byte[] data, int offset, int count)
        {
            if (data == null) throw new CodecException("invalid", "no frame bytes");
            if (offset < 0 || count < 0 || offset > data.Length - count) throw new CodecException("invalid", "frame slice outside its array");
            if (count == 0) throw new CodecException("empty", "empty frame");
            if (count < Format.FrameHeaderLen) throw new CodecException("truncated", "frame header");
            var b = data;
            int o = offset;
            if (b[o] != 0x43 || b[o + 1] != 0x43 || b[o + 2] != 0x47 || b[o + 3] != 0x46) throw new CodecException("bad-magic", "not a clothcast garment frame");
            if (b[o + 4] != Format.Version) throw new CodecException("unsupported-version", "frame version " + b[o + 4] + ", this decoder reads " + Format.Version);
            if (b[o + 5] > 1) throw new CodecException("bad-kind", "frame kind " + b[o + 5]);
            if (b[o + 6] != 0 || b[o + 7] != 0) throw new CodecException("corrupt", "reserved header bytes");
            Key = b[o + 5] == 0;
            SetupId = Format.U32(b, o + 8); StreamId = Format.U32(b, o + 12); Frame = Format.U32(b, o + 16); Reference = Format.U32(b, o + 20);
            Vertices = Format.U32(b, o + 24); Bones = Format.U32(b, o + 28); Checksum = Format.U32(b, o + 32); PayloadLen = Format.U32(b, o + 36);
            if (Vertices > Format.MaxVertices || Bones > Format.MaxBones) throw new CodecException("too-large", "frame counts");
            if (Key && Reference != Frame) throw new CodecException("corrupt", "keyframe reference");
            if (PayloadLen > Format.MaxFrameBytes(Vertices, Bones)) throw new CodecException("too-large", "payload of " + PayloadLen + " bytes");
            long rest = count - Format.FrameHeaderLen;
            if (rest < PayloadLen) throw new CodecException("truncated", "frame payload");
            if (rest > PayloadLen) throw new CodecException("trailing-bytes", (rest - PayloadLen) + " extra bytes");
            return this;
        }
    }

    /// <summary>Static data of one garment stream (see src/codec/format.rs for the
    /// layout): topology, skin, traversal, predictor references, skeleton, rest
    /// shape. Immutable once parsed; one setup serves any number of decoders.</summary>
    public sealed class GarmentSetup
    {
        /// <summary>Lattice step, metres.</summary>
        public float Step { get; private set; }
        public int VertexCount { get; private set; }
        public int BoneCount { get; private set; }
        /// <summary>3 vertex indices per triangle.</summary>
        public int[] Triangles { get; private set; }
        /// <summary>FNV-1a of the setup bytes: what frames name their setup by.</summary>
        public uint Id { get; private set; }
        /// <summary>Per bone its parent (an earlier bone) or -1 for a root.</summary>
        public int[] BoneParents { get; private set; }
        /// <summary>Whether the setup carries its rest shape (the server's do).</summary>
        public bool HasRest { get; private set; }

        internal byte[] Joints, Weights;
        internal int[] Order, Predictor, BonePivots, Rest;

        /// <summary>Parses and validates a setup; throws <see cref="CodecException"/>.</summary>
        public static GarmentSetup Parse(byte[] data) { return Parse(data, 0, data == null ? 0 : data.Length); }

        /// <summary>Parses and validates the setup in <c>data[offset .. offset + count]</c>.</summary>
        public static GarmentSetup Parse(byte[] data, int offset, int count)
        {
            if (data == null) throw new CodecException("invalid", "no setup bytes");
            if (offset < 0 || count < 0 || offset > data.Length - count) throw new CodecException("invalid", "setup slice outside its array");
            if (count == 0) throw new CodecException("empty", "empty setup");
            if (count < Format.SetupHeaderLen) throw new CodecException("truncated", "setup header");
            var b = data;
            int s0 = offset;
            if (b[s0] != 0x43 || b[s0 + 1] != 0x43 || b[s0 + 2] != 0x47 || b[s0 + 3] != 0x53) throw new CodecException("bad-magic", "not a clothcast garment setup");
            if (b[s0 + 4] != Format.Version) throw new CodecException("unsupported-version", "setup version " + b[s0 + 4] + ", this decoder reads " + Format.Version);
            if (b[s0 + 5] != 0 || b[s0 + 6] != 0 || b[s0 + 7] != 0) throw new CodecException("corrupt", "reserved setup bytes");
            float step = BitConverter.ToSingle(LittleEndian(b, s0 + 8), 0);
            uint n = Format.U32(b, s0 + 12), t = Format.U32(b, s0 + 16), bones = Format.U32(b, s0 + 20);
            if (!(step > 1e-6f) || float.IsInfinity(step)) throw new CodecException("invalid", "lattice step");
            if (n == 0 || n > Format.MaxVertices) throw new CodecException("too-large", "vertex count " + n);
            if (t > Format.MaxTriangles) throw new CodecException("too-large", "triangle count " + t);
            if (bones == 0 || bones > Format.MaxBones) throw new CodecException("too-large", "bone count " + bones);
            // the skeleton ends the v4 layout; v5 adds a rest flag and, where it is 1,
            // the rest shape
            long skeletonEnd = Format.SetupHeaderLen + 12L * t + 24L * n + 16L * bones;
            if (count < skeletonEnd + 4) throw new CodecException("truncated", "setup");
            uint flag = Format.U32(b, s0 + (int)skeletonEnd);
            if (flag > 1) throw new CodecException("corrupt", "setup rest flag");
            long expected = skeletonEnd + 4 + (flag == 1 ? 12L * n : 0);
            if (count < expected) throw new CodecException("truncated", "setup");
            if (count > expected) throw new CodecException("trailing-bytes", (count - expected) + " extra bytes");
            var s = new GarmentSetup { Step = step, VertexCount = (int)n, BoneCount = (int)bones };
            int o = s0 + Format.SetupHeaderLen;
            s.Triangles = new int[3 * t];
            for (int i = 0; i < 3 * t; i++, o += 4)
            {
                uint v = Format.U32(b, o);
                if (v >= n) throw new CodecException("invalid", "triangle vertex index");
                s.Triangles[i] = (int)v;
            }
            s.Joints = new byte[4 * n];
            s.Weights = new byte[4 * n];
            for (int v = 0; v < n; v++, o += 8)
            {
                int sum = 0;
                for (int k = 0; k < 4; k++)
                {
                    s.Joints[4 * v + k] = b[o + k];
                    s.Weights[4 * v + k] = b[o + 4 + k];
                    sum += b[o + 4 + k];
                    if (b[o + k] >= bones) throw new CodecException("invalid", "skin bone index");
                }
                if (sum != Format.WeightOne) throw new CodecException("invalid", "skin weights (must sum to 255)");
            }
            s.Order = new int[n];
            var position = new int[n];
            for (int i = 0; i < n; i++) position[i] = -1;
            for (int k = 0; k < n; k++, o += 4)
            {
                uint v = Format.U32(b, o);
                if (v >= n || position[v] != -1) throw new CodecException("invalid", "traversal order (not a permutation)");
                position[v] = k;
                s.Order[k] = (int)v;
            }
            s.Predictor = new int[3 * n];
            for (int v = 0; v < n; v++, o += 12)
            {
                bool gap = false;
                for (int k = 0; k < 3; k++)
                {
                    uint r = Format.U32(b, o + 4 * k);
                    if (r == Format.NoRef) { s.Predictor[3 * v + k] = -1; gap = true; continue; }
                    if (gap) throw new CodecException("invalid", "predictor (gap in references)");
                    if (r >= n || position[r] >= position[v]) throw new CodecException("invalid", "predictor (refers to a later vertex)");
                    s.Predictor[3 * v + k] = (int)r;
                }
            }
            // the skeleton (format v3): per bone its parent (an earlier bone, or NO_REF)
            // and its rest joint in lattice steps
            s.BoneParents = new int[bones];
            s.BonePivots = new int[3 * bones];
            for (int i = 0; i < bones; i++, o += 16)
            {
                uint p = Format.U32(b, o);
                if (p != Format.NoRef && p >= i) throw new CodecException("invalid", "bone parent (must be an earlier bone)");
                s.BoneParents[i] = p == Format.NoRef ? -1 : (int)p;
                for (int k = 0; k < 3; k++)
                {
                    int c = (int)Format.U32(b, o + 4 + 4 * k);
                    if (c <= -Format.LatticeLimit || c >= Format.LatticeLimit) throw new CodecException("invalid", "bone pivot (outside the lattice)");
                    s.BonePivots[3 * i + k] = c;
                }
            }
            // the rest shape (format v5): the reference of every keyframe, with identity
            // bones; all zero for a setup without one
            o += 4;
            s.HasRest = flag == 1;
            s.Rest = new int[3 * n];
            if (s.HasRest)
            {
                for (int i = 0; i < 3 * n; i++, o += 4)
                {
                    int c = (int)Format.U32(b, o);
                    if (c <= -Format.LatticeLimit || c >= Format.LatticeLimit) throw new CodecException("invalid", "rest position (outside the lattice)");
                    s.Rest[i] = c;
                }
            }
            s.Id = Format.WordHash(b, s0, count);
            return s;
        }

        static byte[] LittleEndian(byte[] b, int o)
        {
            var f = new byte[] { b[o], b[o + 1], b[o + 2], b[o + 3] };
            if (!BitConverter.IsLittleEndian) Array.Reverse(f);
            return f;
        }
    }

    /// <summary>An adaptive binary range decoder over one frame's payload (src/codec/
    /// range.rs). Reading past the payload is an error; <see cref="Finish"/> checks
    /// that every byte was used.</summary>
    sealed class RangeDecoder
    {
        byte[] b;
        int pos, end;
        uint range, code;

        public void Reset(byte[] bytes, int start, int stop)
        {
            if (stop - start < 5) throw new CodecException("truncated", "range-coded payload");
            if (bytes[start] != 0) throw new CodecException("corrupt", "range coder start byte");
            b = bytes;
            pos = start + 5;
            end = stop;
            range = 0xffffffff;
            code = ((uint)bytes[start + 1] << 24) | ((uint)bytes[start + 2] << 16) | ((uint)bytes[start + 3] << 8) | bytes[start + 4];
        }

        void Normalize()
        {
            while (range < Format.RangeTop)
            {
                if (pos >= end) throw new CodecException("truncated", "range-coded payload");
                range <<= 8;
                code = (code << 8) | b[pos++];
            }
        }

        /// <summary>One adaptive decision with probability state probs[i] (the
        /// probability of a 0 in units of 2^-15 in the low 16 bits, the count of bits
        /// seen above them; its shift ⌊log₂(count + 2)⌋, at most 6).</summary>
        public int Bit(int[] probs, int i)
        {
            int s = probs[i], p = s & 0xffff, n = (int)((uint)s >> Format.ProbCountShift);
            // n stops growing once the shift reaches its cap (n = 62)
            int shift = n < ShiftOf.Length ? ShiftOf[n] : Format.ProbShift;
            int count = (shift < Format.ProbShift ? n + 1 : n) << Format.ProbCountShift;
            uint bound = (range >> Format.ProbBits) * (uint)p;
            int bit;
            if (code < bound)
            {
                range = bound;
                probs[i] = (p + (((1 << Format.ProbBits) - p) >> shift)) | count;
                bit = 0;
            }
            else
            {
                code -= bound;
                range -= bound;
                probs[i] = (p - (p >> shift)) | count;
                bit = 1;
            }
            if (range < Format.RangeTop) Normalize();
            return bit;
        }

        public int Direct(int count)
        {
            int v = 0;
            for (int i = 0; i < count; i++)
            {
                range >>= 1;
                int bit = 0;
                if (code >= range) { code -= range; bit = 1; }
                v = v * 2 + bit;
                if (range < Format.RangeTop) Normalize();
            }
            return v;
        }

        /// <summary>A signed integer with model m: zero flag in context zctx, sign in
        /// context sctx, Elias-gamma prefix, raw bits.</summary>
        public int Int(IntModel m, int zctx, int sctx)
        {
            if (Bit(m.Zero, zctx) == 0) return 0;
            int negative = Bit(m.Sign, sctx);
            int k = 0;
            while (k < Format.MaxPrefix && Bit(m.Prefix, k) == 1) k++;
            int mag = (1 << k) + Direct(k); // k ≤ MaxPrefix = 26
            return negative == 1 ? -mag : mag;
        }

        public void Finish()
        {
            if (pos != end) throw new CodecException("trailing-bytes", (end - pos) + " unused payload bytes");
        }

        /// <summary>min(⌊log₂(n + 2)⌋, ProbShift) for each count n below the cap.</summary>
        static readonly int[] ShiftOf = MakeShifts();

        static int[] MakeShifts()
        {
            var t = new int[64];
            for (int n = 0; n < t.Length; n++)
            {
                int r = 0;
                for (uint x = (uint)(n + 2); (x >>= 1) != 0;) r++;
                t[n] = Math.Min(r, Format.ProbShift);
            }
            return t;
        }
    }

    sealed class IntModel
    {
        public readonly int[] Zero = new int[Format.ZeroContexts];
        public readonly int[] Sign = new int[Format.SignContexts];
        public readonly int[] Prefix = new int[Format.MaxPrefix + 1];

        public void Reset()
        {
            Fill(Zero); Fill(Sign); Fill(Prefix);
        }

        internal static void Fill(int[] a)
        {
            for (int i = 0; i < a.Length; i++) a[i] = Format.ProbInit;
        }
    }

    sealed class Models
    {
        public readonly IntModel[] Coords = { new IntModel(), new IntModel(), new IntModel() };
        public readonly IntModel Rotation = new IntModel(), W = new IntModel(), Translation = new IntModel();
        public readonly int[] Skip = new int[2], Skinned = new int[2], Spatial = new int[3], Parallelogram = new int[3];

        public void Reset()
        {
            foreach (var c in Coords) c.Reset();
            Rotation.Reset(); W.Reset(); Translation.Reset();
            IntModel.Fill(Skip); IntModel.Fill(Skinned); IntModel.Fill(Spatial); IntModel.Fill(Parallelogram);
        }
    }
}
