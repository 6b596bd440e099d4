// The garment stream decoder (format v5): src/codec/decoder.rs and clients/web/codec.js
// in C#. See Codec.cs for the setup, the header and the range decoder.

using System;

namespace Clothcast
{
    /// <summary>Decodes one garment stream in place into a caller's float array. Not
    /// thread-safe: one decoder per stream, used from one thread at a time.</summary>
    public sealed class GarmentDecoder
    {
        const int One = (int)Format.One;

        readonly GarmentSetup setup;
        bool holds;
        uint frame, streamId;
        int[] q, qNew, bonesQ, bonesNew;
        readonly int[] mc, identity;
        readonly bool[] mcDone;
        readonly long[] relA, relC;
        readonly int[] prev = new int[3];
        readonly FrameHeader header = new FrameHeader();
        readonly RangeDecoder range = new RangeDecoder();
        readonly Models models = new Models();
        readonly long[] rp = new long[9], rc = new long[9], qa = new long[4], qb = new long[4];
        int[] reference;

        public GarmentDecoder(GarmentSetup setup)
        {
            if (setup == null) throw new ArgumentNullException("setup");
            int n = setup.VertexCount, nb = setup.BoneCount;
            this.setup = setup;
            q = new int[3 * n];
            qNew = new int[3 * n];
            bonesQ = new int[7 * nb];
            bonesNew = new int[7 * nb];
            mc = new int[3 * n];
            mcDone = new bool[n];
            relA = new long[9 * nb];
            relC = new long[3 * nb];
            identity = new int[7 * nb];
            for (int i = 0; i < nb; i++) identity[7 * i + 3] = One;
            reference = q;
        }

        public GarmentSetup Setup { get { return setup; } }

        /// <summary>Frame number of the last decoded frame, or null before the first
        /// (and after <see cref="Reset"/>).</summary>
        public uint? LastFrame { get { return holds ? frame : (uint?)null; } }

        /// <summary>Forgets the stream; the next frame must be a keyframe.</summary>
        public void Reset() { holds = false; }

        /// <summary>The bones of the last decoded frame as the stream carries them, into
        /// <paramref name="output"/> (7 floats per bone: the rotation x, y, z, w to
        /// 2^-14, w ≥ 0, not renormalised, then the translation in metres, garment
        /// frame): each bone's skinning transform, rest → posed. All zeros before the
        /// first frame. Allocates nothing.</summary>
        public void Bones(float[] output)
        {
            int nb = setup.BoneCount;
            if (output == null || output.Length != 7 * nb) throw new CodecException("mismatch", "bones output must be 7 × bones floats");
            if (!holds) { Array.Clear(output, 0, output.Length); return; }
            for (int i = 0; i < 7 * nb; i++) output[i] = (i % 7 < 4) ? bonesQ[i] / (float)One : bonesQ[i] * setup.Step;
        }

        /// <summary>Decodes the frame in <c>data[offset .. offset + count]</c> into
        /// <paramref name="output"/> (3 floats per vertex, metres, the garment's frame).
        /// Throws <see cref="CodecException"/>; code "missing-reference" means: ask the
        /// server for a keyframe. A refused frame changes neither the decoder nor the
        /// output. Returns the header (an object the decoder reuses).</summary>
        public FrameHeader Decode(byte[] data, int offset, int count, float[] output)
        {
            var h = header.Parse(data, offset, count);
            var s = setup;
            if (h.SetupId != s.Id) throw new CodecException("wrong-setup", "frame of setup " + h.SetupId.ToString("x") + ", decoder has " + s.Id.ToString("x"));
            if (h.Vertices != s.VertexCount || h.Bones != s.BoneCount) throw new CodecException("mismatch", "vertex/bone count of frame");
            if (output == null || output.Length != 3 * s.VertexCount) throw new CodecException("mismatch", "output must be 3 × vertices floats");
            bool delta = !h.Key;
            if (delta && (!holds || frame != h.Reference || streamId != h.StreamId))
            {
                throw new CodecException("missing-reference", "delta needs frame " + h.Reference + ", decoder holds " + (holds ? frame.ToString() : "none"));
            }
            range.Reset(data, offset + Format.FrameHeaderLen, offset + count);
            var m = models;
            m.Reset();
            // a keyframe (format v5) is decoded as a delta from the setup's rest shape at
            // identity bones; its bones are predicted from their parents alone
            reference = delta ? q : s.Rest;
            DecodeBones(m, delta);
            prev[0] = prev[1] = prev[2] = 0;
            int[] order = s.Order, refq = reference;
            Array.Clear(mcDone, 0, mcDone.Length);
            int last = Format.ModeSkip;
            for (int start = 0; start < order.Length; start += Format.PatchSize)
            {
                int end = Math.Min(start + Format.PatchSize, order.Length);
                int mode = DecodeMode(m, last);
                if (mode == Format.ModeSkip)
                {
                    for (int i = start; i < end; i++)
                    {
                        int v = 3 * order[i];
                        qNew[v] = refq[v]; qNew[v + 1] = refq[v + 1]; qNew[v + 2] = refq[v + 2];
                    }
                }
                else
                {
                    bool skinned = (mode - 1) / 3 == Format.BaseSkinned;
                    // motion compensation only where a patch uses it: its vertices and
                    // their predictor references (which may lie in earlier patches)
                    if (skinned) Compensate(order, start, end);
                    int[] b = skinned ? mc : refq;
                    int sp = (mode - 1) % 3;
                    for (int i = start; i < end; i++) Vertex(m, b, sp, order[i]);
                }
                last = mode;
            }
            range.Finish();
            uint sum = Format.WordHash(qNew);
            if (sum != h.Checksum) throw new CodecException("checksum", "expected " + h.Checksum.ToString("x") + ", decoded " + sum.ToString("x"));
            float step = s.Step;
            for (int i = 0; i < output.Length; i++) output[i] = qNew[i] * step;
            var t = q; q = qNew; qNew = t;
            var bt = bonesQ; bonesQ = bonesNew; bonesNew = bt;
            frame = h.Frame;
            streamId = h.StreamId;
            holds = true;
            return h;
        }

        static int ZeroContext(int prev)
        {
            int a = prev < 0 ? -prev : prev;
            return a < 2 ? a : 2;
        }

        /// <summary>⌊(v + 2^13) / 2^14⌋: a 2^-28 product back to 2^-14 units.</summary>
        static long RoundShift(long v) { return (v + Format.Half) >> 14; }

        static long FloorDiv(long a, long d)
        {
            long r = a / d;
            return (a % d != 0 && a < 0) ? r - 1 : r;
        }

        static void Rotation(int[] qq, int o, long[] r)
        {
            long x = qq[o], y = qq[o + 1], z = qq[o + 2], w = qq[o + 3];
            long one = Format.One * Format.One;
            r[0] = RoundShift(one - 2 * (y * y + z * z)); r[1] = RoundShift(2 * (x * y - w * z)); r[2] = RoundShift(2 * (x * z + w * y));
            r[3] = RoundShift(2 * (x * y + w * z)); r[4] = RoundShift(one - 2 * (x * x + z * z)); r[5] = RoundShift(2 * (y * z - w * x));
            r[6] = RoundShift(2 * (x * z - w * y)); r[7] = RoundShift(2 * (y * z + w * x)); r[8] = RoundShift(one - 2 * (x * x + y * y));
        }

        /// <summary>Quaternion product a ⊗ b (x, y, z, w; units 2^-14), each component
        /// rounded, into r.</summary>
        static void QuatMul(long ax, long ay, long az, long aw, long bx, long by, long bz, long bw, long[] r)
        {
            r[0] = RoundShift(aw * bx + ax * bw + ay * bz - az * by);
            r[1] = RoundShift(aw * by - ax * bz + ay * bw + az * bx);
            r[2] = RoundShift(aw * bz + ax * by - ay * bx + az * bw);
            r[3] = RoundShift(aw * bw - ax * bx - ay * by - az * bz);
        }

        /// <summary>w of a quantised quaternion from x, y, z: ⌊√(2^28 − x² − y² − z²)⌋, 0
        /// where that is negative.</summary>
        static long DerivedW(long x, long y, long z)
        {
            long s = Format.One * Format.One - (x * x + y * y + z * z);
            if (s <= 0) return 0;
            long r = (long)Math.Sqrt(s);
            while (r * r > s) r--;
            while ((r + 1) * (r + 1) <= s) r++;
            return r;
        }

        void DecodeBones(Models m, bool delta)
        {
            // format v4: each bone's x, y, z and translation from their predictions off
            // its parent (src/codec/motion.rs: predict_rotation, predict_translation); w
            // from its difference to the w that x, y, z imply
            var s = setup;
            int[] cur = bonesNew, rf = bonesQ;
            int prevRot = 0, prevW = 0, prevTrans = 0;
            for (int i = 0; i < s.BoneCount; i++)
            {
                int o = 7 * i, p = s.BoneParents[i], op = 7 * p;
                if (p >= 0 && delta)
                {
                    // q_p ⊗ conj(q_p^ref) ⊗ q^ref, each product rounded
                    QuatMul(cur[op], cur[op + 1], cur[op + 2], cur[op + 3], -rf[op], -rf[op + 1], -rf[op + 2], rf[op + 3], qa);
                    QuatMul(qa[0], qa[1], qa[2], qa[3], rf[o], rf[o + 1], rf[o + 2], rf[o + 3], qb);
                    long sign = qb[3] < 0 ? -1 : 1;
                    qa[0] = sign * qb[0]; qa[1] = sign * qb[1]; qa[2] = sign * qb[2];
                }
                else if (p >= 0)
                {
                    qa[0] = cur[op]; qa[1] = cur[op + 1]; qa[2] = cur[op + 2];
                }
                else if (delta)
                {
                    qa[0] = rf[o]; qa[1] = rf[o + 1]; qa[2] = rf[o + 2];
                }
                else
                {
                    qa[0] = qa[1] = qa[2] = 0;
                }
                for (int k = 0; k < 3; k++)
                {
                    int e = range.Int(m.Rotation, ZeroContext(prevRot), 0);
                    prevRot = e;
                    long v = qa[k] + e;
                    if (v > One || v < -One) throw new CodecException("corrupt", "bone value out of range");
                    cur[o + k] = (int)v;
                }
                int ew = range.Int(m.W, ZeroContext(prevW), 0);
                prevW = ew;
                long w = DerivedW(cur[o], cur[o + 1], cur[o + 2]) + ew;
                if (w < 0 || w > One) throw new CodecException("corrupt", "bone value out of range");
                cur[o + 3] = (int)w;
                if (p >= 0)
                {
                    Rotation(cur, op, rp);
                    Rotation(cur, o, rc);
                    int[] j = s.BonePivots;
                    for (int k = 0; k < 3; k++)
                    {
                        long moved = (rp[3 * k] - rc[3 * k]) * j[3 * i] + (rp[3 * k + 1] - rc[3 * k + 1]) * j[3 * i + 1] + (rp[3 * k + 2] - rc[3 * k + 2]) * j[3 * i + 2];
                        qa[k] = cur[op + 4 + k] + RoundShift(moved);
                    }
                }
                else if (delta)
                {
                    qa[0] = rf[o + 4]; qa[1] = rf[o + 5]; qa[2] = rf[o + 6];
                }
                else
                {
                    qa[0] = qa[1] = qa[2] = 0;
                }
                for (int k = 0; k < 3; k++)
                {
                    int e = range.Int(m.Translation, ZeroContext(prevTrans), 0);
                    prevTrans = e;
                    long v = qa[k] + e;
                    if (v >= Format.LatticeLimit || v <= -Format.LatticeLimit) throw new CodecException("corrupt", "bone value out of range");
                    cur[o + 4 + k] = (int)v;
                }
            }
            // each bone's motion from the reference's bones (a keyframe's: the identity)
            int[] pb = delta ? bonesQ : identity, c = bonesNew;
            for (int bi = 0; bi < s.BoneCount; bi++)
            {
                int o = 7 * bi;
                Rotation(pb, o, rp);
                Rotation(c, o, rc);
                for (int i = 0; i < 3; i++)
                {
                    for (int j = 0; j < 3; j++)
                    {
                        relA[9 * bi + 3 * i + j] = RoundShift(rc[3 * i] * rp[3 * j] + rc[3 * i + 1] * rp[3 * j + 1] + rc[3 * i + 2] * rp[3 * j + 2]);
                    }
                }
                for (int i = 0; i < 3; i++)
                {
                    relC[3 * bi + i] = c[o + 4 + i] * Format.One - (relA[9 * bi + 3 * i] * pb[o + 4] + relA[9 * bi + 3 * i + 1] * pb[o + 5] + relA[9 * bi + 3 * i + 2] * pb[o + 6]);
                }
            }
        }

        /// <summary>Moves the vertices order[start..end] and their predictor references by
        /// their blended bone motion into mc (each vertex once per frame).</summary>
        void Compensate(int[] order, int start, int end)
        {
            int[] pr = setup.Predictor;
            for (int i = start; i < end; i++)
            {
                int v = order[i];
                if (!mcDone[v]) CompensateVertex(v);
                for (int r = 3 * v; r < 3 * v + 3; r++)
                {
                    int u = pr[r];
                    if (u >= 0 && !mcDone[u]) CompensateVertex(u);
                }
            }
        }

        void CompensateVertex(int v)
        {
            // every product and sum is an integer below 2^52
            const long D = Format.WeightOne * Format.One, half = D / 2, limit = 2 * Format.LatticeLimit;
            byte[] weights = setup.Weights, joints = setup.Joints;
            long m0 = 0, m1 = 0, m2 = 0, m3 = 0, m4 = 0, m5 = 0, m6 = 0, m7 = 0, m8 = 0, c0 = 0, c1 = 0, c2 = 0;
            for (int k = 4 * v; k < 4 * v + 4; k++)
            {
                long w = weights[k];
                if (w == 0) continue;
                int a = 9 * joints[k], c = 3 * joints[k];
                m0 += w * relA[a]; m1 += w * relA[a + 1]; m2 += w * relA[a + 2];
                m3 += w * relA[a + 3]; m4 += w * relA[a + 4]; m5 += w * relA[a + 5];
                m6 += w * relA[a + 6]; m7 += w * relA[a + 7]; m8 += w * relA[a + 8];
                c0 += w * relC[c]; c1 += w * relC[c + 1]; c2 += w * relC[c + 2];
            }
            int o = 3 * v;
            long qx = reference[o], qy = reference[o + 1], qz = reference[o + 2];
            long x = FloorDiv(m0 * qx + m1 * qy + m2 * qz + c0 + half, D);
            long y = FloorDiv(m3 * qx + m4 * qy + m5 * qz + c1 + half, D);
            long z = FloorDiv(m6 * qx + m7 * qy + m8 * qz + c2 + half, D);
            mc[o] = (int)Math.Max(-limit, Math.Min(limit, x));
            mc[o + 1] = (int)Math.Max(-limit, Math.Min(limit, y));
            mc[o + 2] = (int)Math.Max(-limit, Math.Min(limit, z));
            mcDone[v] = true;
        }

        int DecodeMode(Models m, int last)
        {
            if (range.Bit(m.Skip, last == Format.ModeSkip ? 1 : 0) == 0) return Format.ModeSkip;
            int lb = last == Format.ModeSkip ? 0 : (last - 1) / 3;
            int ls = last == Format.ModeSkip ? Format.SpatialParallelogram : (last - 1) % 3;
            int b = range.Bit(m.Skinned, lb);
            int sp;
            if (range.Bit(m.Spatial, ls) == 0) sp = Format.SpatialNone;
            else sp = range.Bit(m.Parallelogram, ls) == 1 ? Format.SpatialParallelogram : Format.SpatialMean;
            return 1 + 3 * b + sp;
        }

        /// <summary>The hint of one axis (format.rs HINTS): 2 · min(bit length of |d|, 4).</summary>
        static int Hint(long d)
        {
            if (d < 0) d = -d;
            return 2 * ((d >= 1 ? 1 : 0) + (d >= 2 ? 1 : 0) + (d >= 4 ? 1 : 0) + (d >= 8 ? 1 : 0));
        }

        void Vertex(Models m, int[] b, int spatial, int v)
        {
            int[] pr = setup.Predictor, qq = qNew;
            int o = 3 * v;
            int ra = pr[o], rb = pr[o + 1], rcc = pr[o + 2];
            if (spatial == Format.SpatialNone) ra = -1;
            else if (spatial == Format.SpatialMean) rcc = -1;
            // the references' offsets from their bases: none, a, the mean of a and b, or
            // a + b − c; with two references, each axis's prediction hint
            long p0 = 0, p1 = 0, p2 = 0;
            int h0 = 0, h1 = 0, h2 = 0;
            if (ra >= 0)
            {
                int A = 3 * ra;
                p0 = qq[A] - b[A]; p1 = qq[A + 1] - b[A + 1]; p2 = qq[A + 2] - b[A + 2];
                if (rb >= 0)
                {
                    int B = 3 * rb;
                    bool mean = rcc < 0;
                    long t0 = qq[B] - b[B], t1 = qq[B + 1] - b[B + 1], t2 = qq[B + 2] - b[B + 2];
                    h0 = Hint(p0 - t0); h1 = Hint(p1 - t1); h2 = Hint(p2 - t2);
                    if (mean)
                    {
                        h0 += (int)((p0 + t0) & 1); h1 += (int)((p1 + t1) & 1); h2 += (int)((p2 + t2) & 1);
                        p0 = (p0 + t0) >> 1; p1 = (p1 + t1) >> 1; p2 = (p2 + t2) >> 1;
                    }
                    else
                    {
                        int C = 3 * rcc;
                        p0 += t0 - (qq[C] - b[C]); p1 += t1 - (qq[C + 1] - b[C + 1]); p2 += t2 - (qq[C + 2] - b[C + 2]);
                    }
                }
            }
            p0 += b[o]; p1 += b[o + 1]; p2 += b[o + 2];
            // residuals; zero-flag context of an axis: the previous vertex's magnitude
            // there (0, 1, ≥ 2), plus 3 when an earlier axis of this vertex (for x: any
            // axis of the previous vertex) was non-zero, times HINTS, plus the axis's
            // hint; the sign's context is the hint
            var coords = m.Coords;
            bool busy = prev[0] != 0 || prev[1] != 0 || prev[2] != 0;
            int e0 = range.Int(coords[0], (ZeroContext(prev[0]) + (busy ? 3 : 0)) * Format.Hints + h0, h0);
            int e1 = range.Int(coords[1], (ZeroContext(prev[1]) + (e0 != 0 ? 3 : 0)) * Format.Hints + h1, h1);
            int e2 = range.Int(coords[2], (ZeroContext(prev[2]) + (e0 != 0 || e1 != 0 ? 3 : 0)) * Format.Hints + h2, h2);
            long x = p0 + e0, y = p1 + e1, z = p2 + e2;
            const long L = Format.LatticeLimit;
            if (x >= L || x <= -L || y >= L || y <= -L || z >= L || z <= -L)
            {
                throw new CodecException("corrupt", "position outside the lattice");
            }
            qq[o] = (int)x; qq[o + 1] = (int)y; qq[o + 2] = (int)z;
            prev[0] = e0; prev[1] = e1; prev[2] = e2;
        }
    }
}
