// The protocol state of a viewer connection: the assets held, and per avatar its
// garment decoders. It turns the server's messages into events for
// ClothcastClient.Poll() to apply; it runs on one thread at a time (the caller of Poll,
// or the network task with ClientOptions.DecodeOnNetworkThread).

using System;
using System.Collections.Concurrent;
using System.Collections.Generic;

namespace Clothcast
{
    /// <summary>One frame's decoded arrays. A frame's buffers become its avatar's
    /// arrays in Poll(); the avatar's previous ones go back to their stream's pool.</summary>
    sealed class FrameBuffers
    {
        public float[][] Garments;
        public float[] Bones, Pose = new float[3 + 4 * 22], World = new float[7];
    }

    /// <summary>One avatar's garment streams (the first garment and its layers).</summary>
    sealed class AvatarStream
    {
        public string Id;
        /// <summary>The id's UTF-8 bytes (what the fast frame path matches).</summary>
        public byte[] IdBytes;
        public GarmentAsset[] Assets;
        public GarmentDecoder[] Decoders;
        public long Seq = -1, Frames, Bytes, Dropped;
        /// <summary>When (Session.Clock, ms) a keyframe was last asked for, a frame of
        /// this stream refused; -1 while in step.</summary>
        public long ResyncAsked = -1;
        /// <summary>Buffers handed back by Poll() for the decoding thread to reuse.</summary>
        public readonly ConcurrentQueue<FrameBuffers> Pool = new ConcurrentQueue<FrameBuffers>();

        public FrameBuffers Take()
        {
            FrameBuffers b;
            if (Pool.TryDequeue(out b)) return b;
            b = new FrameBuffers { Garments = new float[Assets.Length][], Bones = new float[7 * Assets[0].Setup.BoneCount] };
            for (int k = 0; k < Assets.Length; k++) b.Garments[k] = new float[3 * Assets[k].Setup.VertexCount];
            return b;
        }
    }

    /// <summary>What Poll() applies and raises, in the order the messages came.</summary>
    sealed class ClientEvent
    {
        public enum Kinds { Welcome, Asset, Added, Frame, Lost, Gone, Error, Closed }
        public Kinds Kind;
        public double TickHz;
        public GarmentAsset Asset;
        public AvatarStream Stream;
        /// <summary>A frame's numbers, counters and buffers (copied from the stream
        /// when the frame was decoded).</summary>
        public long Seq, Frames, Bytes, Dropped;
        public double Timestamp;
        public FrameBuffers Buffers;
        public string Id;
        public Exception Error;
        public CloseInfo Close;
    }

    sealed class Session
    {
        const int CompactHead = 9, MaxOutfit = 4;
        /// <summary>While a stream's frames cannot be decoded, its keyframe is asked for
        /// again after this long, ms: a server sends it within a tick or two.</summary>
        public const long ResyncAgainMs = 1000;
        /// <summary>A monotonic clock (Environment.TickCount wraps).</summary>
        internal static readonly System.Diagnostics.Stopwatch Clock = System.Diagnostics.Stopwatch.StartNew();

        /// <summary>The avatars whose keyframes to ask the server for (`resync`): filled
        /// by the decoding thread, sent by the network task.</summary>
        public readonly ConcurrentQueue<string> Resyncs = new ConcurrentQueue<string>();
        /// <summary>The assets (content hashes) to ask the server for again (`resync`'s
        /// `assets`): frames named them and this client does not hold them.</summary>
        public readonly ConcurrentQueue<string> AssetsWanted = new ConcurrentQueue<string>();
        /// <summary>Per asset a frame named and this client lacks, when (Clock, ms) it
        /// was last asked for; an asset's arrival takes it out.</summary>
        readonly Dictionary<string, long> missing = new Dictionary<string, long>();

        readonly Dictionary<string, GarmentAsset> assets = new Dictionary<string, GarmentAsset>();
        readonly Dictionary<string, AvatarStream> streams = new Dictionary<string, AvatarStream>();
        /// <summary>The streams by a 64-bit hash of their id's bytes, for the frame path
        /// that reads a compact frame in place (no strings made).</summary>
        readonly Dictionary<ulong, AvatarStream> byIdHash = new Dictionary<ulong, AvatarStream>();
        /// <summary>Where the frame being decoded has each garment's codec frame.</summary>
        readonly int[] payOff = new int[MaxOutfit], payLen = new int[MaxOutfit];
        static readonly byte[] FrameTag = System.Text.Encoding.ASCII.GetBytes("frame");
        /// <summary>The hashes of the assets held (read by the network task: a
        /// reconnecting client asks the server not to send them again, `have`).</summary>
        public readonly ConcurrentDictionary<string, bool> Held = new ConcurrentDictionary<string, bool>();

        /// <summary>The connection ended: every stream is gone (the next connection
        /// starts from keyframes); the assets stay.</summary>
        public void Reset()
        {
            streams.Clear();
            byIdHash.Clear();
            string asked;
            while (Resyncs.TryDequeue(out asked)) { }
            while (AssetsWanted.TryDequeue(out asked)) { }
            missing.Clear();
        }

        /// <summary>The events of one server message (<paramref name="size"/> bytes)
        /// into <paramref name="events"/>; a message that cannot be used gives one
        /// Error event naming it and changes nothing else.</summary>
        public void Handle(byte[] data, int size, bool text, List<ClientEvent> events)
        {
            try
            {
                if (text) throw new ProtocolException("a text message from the server; this client speaks MessagePack");
                // a frame of a stream already running, read in place; anything else
                // (a new avatar, other garments, other message types, anything odd)
                // takes the general path below, which names what is wrong
                if (size > 0 && ((data[0] & 0xf0) == 0x90 || data[0] == 0xdc) && FastFrame(data, size, events)) return;
                var v = MsgPack.Decode(data, 0, size);
                var a = v as object[];
                if (a != null) { Frame(a, size, events); return; }
                var map = v as Dictionary<string, object>;
                if (map == null) throw new ProtocolException("a message that is neither a map nor a compact frame");
                switch (Get<string>(map, "type"))
                {
                    case "welcome":
                        events.Add(new ClientEvent { Kind = ClientEvent.Kinds.Welcome, TickHz = Number(map, "tick_hz") });
                        break;
                    case "asset":
                        {
                            var asset = new GarmentAsset
                            {
                                Hash = Get<string>(map, "hash"),
                                Garment = map.ContainsKey("garment") ? Get<string>(map, "garment") : "",
                                Setup = Setup(Get<ArraySegment<byte>>(map, "setup")),
                                BodyPositions = Floats(Get<ArraySegment<byte>>(map, "body_positions"), "body_positions"),
                                BodyTriangles = Ints(Get<ArraySegment<byte>>(map, "body_triangles"), "body_triangles"),
                                BodyJoints = Copy(Get<ArraySegment<byte>>(map, "body_joints")),
                                BodyWeights = Floats(Get<ArraySegment<byte>>(map, "body_weights"), "body_weights"),
                                Skeleton = Floats(Get<ArraySegment<byte>>(map, "skeleton"), "skeleton"),
                            };
                            var parents = Get<object[]>(map, "parents");
                            asset.Parents = new int[parents.Length];
                            for (int i = 0; i < parents.Length; i++)
                            {
                                if (!(parents[i] is long)) throw new ProtocolException("asset parents: not integers");
                                asset.Parents[i] = (int)(long)parents[i];
                            }
                            Validate(asset);
                            asset.HashBytes = System.Text.Encoding.UTF8.GetBytes(asset.Hash);
                            assets[asset.Hash] = asset;
                            Held[asset.Hash] = true;
                            missing.Remove(asset.Hash);
                            events.Add(new ClientEvent { Kind = ClientEvent.Kinds.Asset, Asset = asset });
                            break;
                        }
                    case "gone":
                        {
                            string id = Get<string>(map, "avatar");
                            AvatarStream gone;
                            if (streams.TryGetValue(id, out gone))
                            {
                                streams.Remove(id);
                                byIdHash.Remove(IdHash(gone.IdBytes, 0, gone.IdBytes.Length));
                                events.Add(new ClientEvent { Kind = ClientEvent.Kinds.Gone, Id = id });
                            }
                            break;
                        }
                    case "error":
                        throw new ProtocolException("server: " + Get<string>(map, "code") + ": " + Get<string>(map, "message"));
                    default: // pong, and types this client does not know yet
                        break;
                }
            }
            catch (Exception e) when (e is MsgPackException || e is CodecException || e is ProtocolException)
            {
                events.Add(new ClientEvent { Kind = ClientEvent.Kinds.Error, Error = e });
            }
        }

        /// <summary>A compact frame: "frame", avatar, seq, timestamp, pose_timestamp,
        /// world (28 bytes of 7 f32 LE), pose bytes, asset, garment bytes, then an asset
        /// and garment bytes per layer.</summary>
        void Frame(object[] f, int size, List<ClientEvent> events)
        {
            int layers = (f.Length - CompactHead) / 2;
            if (f.Length < CompactHead || (f.Length - CompactHead) % 2 != 0 || layers > MaxOutfit - 1)
            {
                throw new ProtocolException("compact frame: " + f.Length + " entries; a frame has " + CompactHead + " and two per layer, at most " + (MaxOutfit - 1) + " layers");
            }
            if (!"frame".Equals(f[0])) throw new ProtocolException("compact frame: its first entry is not \"frame\"");
            string id = At<string>(f, 1, "avatar");
            long seq = At<long>(f, 2, "seq");
            double timestamp = f[3] is long ? (long)f[3] : At<double>(f, 3, "timestamp");
            var world = At<ArraySegment<byte>>(f, 5, "world");
            if (world.Count != 28) throw new ProtocolException("compact frame: world: " + world.Count + " bytes, not 7 floats (28)");
            var pose = At<ArraySegment<byte>>(f, 6, "pose");
            var worn = new GarmentAsset[1 + layers];
            var payloads = new ArraySegment<byte>[1 + layers];
            worn[0] = Known(id, At<string>(f, 7, "asset"));
            payloads[0] = At<ArraySegment<byte>>(f, 8, "garment");
            for (int k = 0; k < layers; k++)
            {
                worn[k + 1] = Known(id, At<string>(f, CompactHead + 2 * k, "a layer's asset"));
                payloads[k + 1] = At<ArraySegment<byte>>(f, CompactHead + 2 * k + 1, "a layer's garment");
            }
            // a garment this client lacks: the frame cannot be decoded; the asset and a
            // keyframe are asked for (Known), and the avatar holds its last garment
            for (int k = 0; k < worn.Length; k++)
            {
                if (worn[k] == null) return;
            }
            AvatarStream s;
            bool same = streams.TryGetValue(id, out s) && s.Assets.Length == worn.Length;
            for (int k = 0; same && k < worn.Length; k++) same = s.Assets[k] == worn[k];
            if (!same)
            {
                // a new avatar, or new garments: new streams, starting with keyframes
                if (s != null) byIdHash.Remove(IdHash(s.IdBytes, 0, s.IdBytes.Length));
                var idBytes = System.Text.Encoding.UTF8.GetBytes(id);
                s = new AvatarStream { Id = id, IdBytes = idBytes, Assets = worn, Decoders = new GarmentDecoder[worn.Length] };
                for (int k = 0; k < worn.Length; k++) s.Decoders[k] = new GarmentDecoder(worn[k].Setup);
                streams[id] = s;
                byIdHash[IdHash(idBytes, 0, idBytes.Length)] = s;
                events.Add(new ClientEvent { Kind = ClientEvent.Kinds.Added, Stream = s });
            }
            // every byte field is a view of `data` (MsgPack.Decode copies nothing)
            for (int k = 0; k < worn.Length; k++)
            {
                payOff[k] = payloads[k].Offset;
                payLen[k] = payloads[k].Count;
            }
            Decode(s, world.Array, size, seq, timestamp, world.Offset, pose.Offset, pose.Count, events);
        }

        /// <summary>Decodes a frame of stream <paramref name="s"/> whose garments' codec
        /// frames lie at payOff/payLen in <paramref name="data"/>, its world transform at
        /// <paramref name="worldAt"/> (7 f32) and its pose at poseAt (poseLen bytes).</summary>
        void Decode(AvatarStream s, byte[] data, int size, long seq, double timestamp, int worldAt, int poseAt, int poseLen, List<ClientEvent> events)
        {
            s.Bytes += size;
            var b = s.Take();
            try
            {
                // every layer's frame has the frame's number: in step with the first
                for (int k = 0; k < s.Assets.Length; k++) s.Decoders[k].Decode(data, payOff[k], payLen[k], b.Garments[k]);
            }
            catch (CodecException e)
            {
                s.Pool.Enqueue(b);
                // out of step (a corrupt frame, or a delta whose reference this client
                // lacks): every delta after it is refused too, until the keyframe asked
                // for here (again each ResyncAgainMs while none comes)
                s.Dropped++;
                events.Add(new ClientEvent { Kind = ClientEvent.Kinds.Lost, Stream = s, Dropped = s.Dropped });
                long now = Clock.ElapsedMilliseconds;
                if (s.ResyncAsked < 0 || now - s.ResyncAsked >= ResyncAgainMs)
                {
                    s.ResyncAsked = now;
                    Resyncs.Enqueue(s.Id);
                }
                if (e.Code == "missing-reference") return;
                throw new ProtocolException("avatar " + s.Id + ": frame refused: " + e.Message, e);
            }
            s.ResyncAsked = -1;
            if (s.Seq >= 0 && seq > s.Seq + 1) s.Dropped += seq - s.Seq - 1;
            s.Seq = seq;
            s.Frames++;
            s.Decoders[0].Bones(b.Bones);
            for (int i = 0; i < 7; i++) b.World[i] = BitConverter.ToSingle(data, worldAt + 4 * i);
            for (int i = 0; i < b.Pose.Length; i++) b.Pose[i] = 4 * i + 4 <= poseLen ? BitConverter.ToSingle(data, poseAt + 4 * i) : 0f;
            events.Add(new ClientEvent
            {
                Kind = ClientEvent.Kinds.Frame, Stream = s, Buffers = b,
                Seq = seq, Frames = s.Frames, Bytes = s.Bytes, Dropped = s.Dropped, Timestamp = timestamp,
            });
        }

        /// <summary>FNV-1a (64-bit) of bytes: an avatar id's key in byIdHash.</summary>
        static ulong IdHash(byte[] b, int at, int len)
        {
            ulong h = 0xcbf29ce484222325;
            for (int i = at; i < at + len; i++) h = unchecked((h ^ b[i]) * 0x100000001b3);
            return h;
        }

        static bool SameBytes(byte[] a, int at, int len, byte[] b)
        {
            if (b == null || len != b.Length) return false;
            for (int i = 0; i < len; i++)
            {
                if (a[at + i] != b[i]) return false;
            }
            return true;
        }

        /// <summary>A compact frame of a stream already running, read in place: no
        /// MessagePack tree, no strings; the codec frames decoded from the message's own
        /// bytes. False (nothing done) for anything it does not expect, which the
        /// general path then handles.</summary>
        bool FastFrame(byte[] b, int size, List<ClientEvent> events)
        {
            var r = new Cursor { B = b, P = 0, End = size };
            int n = r.ArrayHeader();
            if (n < CompactHead || (n - CompactHead) % 2 != 0 || n > CompactHead + 2 * (MaxOutfit - 1)) return false;
            int at, len;
            if (!r.Str(out at, out len) || !SameBytes(b, at, len, FrameTag)) return false;
            if (!r.Str(out at, out len)) return false;
            AvatarStream s;
            if (!byIdHash.TryGetValue(IdHash(b, at, len), out s) || !SameBytes(b, at, len, s.IdBytes)) return false;
            int garments = 1 + (n - CompactHead) / 2;
            if (s.Assets.Length != garments) return false;
            long seq;
            double timestamp, poseTimestamp;
            if (!r.Int(out seq) || !r.Number(out timestamp) || !r.Number(out poseTimestamp)) return false;
            int worldAt, worldLen, poseAt, poseLen;
            if (!r.Bin(out worldAt, out worldLen) || worldLen != 28 || !r.Bin(out poseAt, out poseLen)) return false;
            for (int k = 0; k < garments; k++)
            {
                if (!r.Str(out at, out len) || !SameBytes(b, at, len, s.Assets[k].HashBytes)) return false;
                if (!r.Bin(out payOff[k], out payLen[k])) return false;
            }
            if (r.P != size) return false;
            Decode(s, b, size, seq, timestamp, worldAt, poseAt, poseLen, events);
            return true;
        }

        /// <summary>Reads MessagePack items in place; each method returns false on a type
        /// it does not take or on running out of bytes.</summary>
        struct Cursor
        {
            public byte[] B;
            public int P, End;

            bool Big(int n, out long v)
            {
                v = 0;
                if (n > End - P) return false;
                for (int i = 0; i < n; i++) v = (v << 8) | B[P + i];
                P += n;
                return true;
            }

            public int ArrayHeader()
            {
                if (P >= End) return -1;
                int t = B[P++];
                if ((t & 0xf0) == 0x90) return t & 0x0f;
                long n;
                if (t == 0xdc && Big(2, out n)) return (int)n;
                return -1;
            }

            public bool Str(out int at, out int len)
            {
                at = len = 0;
                if (P >= End) return false;
                int t = B[P++];
                long n;
                if ((t & 0xe0) == 0xa0) n = t & 0x1f;
                else if (!(t == 0xd9 && Big(1, out n)) && !(t == 0xda && Big(2, out n))) return false;
                if (n > End - P) return false;
                at = P;
                len = (int)n;
                P += len;
                return true;
            }

            public bool Bin(out int at, out int len)
            {
                at = len = 0;
                if (P >= End) return false;
                int t = B[P++];
                long n;
                if (!(t == 0xc4 && Big(1, out n)) && !(t == 0xc5 && Big(2, out n)) && !(t == 0xc6 && Big(4, out n))) return false;
                if (n > End - P) return false;
                at = P;
                len = (int)n;
                P += len;
                return true;
            }

            public bool Int(out long v)
            {
                v = 0;
                if (P >= End) return false;
                int t = B[P++];
                if (t <= 0x7f) { v = t; return true; }
                if (t == 0xcc) return Big(1, out v);
                if (t == 0xcd) return Big(2, out v);
                if (t == 0xce) return Big(4, out v);
                return false;
            }

            public bool Number(out double v)
            {
                v = 0;
                if (P >= End) return false;
                int t = B[P];
                long bits;
                if (t == 0xcb)
                {
                    P++;
                    if (!Big(8, out bits)) return false;
                    v = BitConverter.Int64BitsToDouble(bits);
                    return true;
                }
                if (t == 0xca)
                {
                    P++;
                    if (!Big(4, out bits)) return false;
                    v = BitConverter.ToSingle(BitConverter.GetBytes((int)bits), 0);
                    return true;
                }
                long i;
                if (!Int(out i)) return false;
                v = i;
                return true;
            }
        }

        /// <summary>An asset's body arrays agree with each other and its skeleton
        /// (what <see cref="Skinning.PoseBody"/> relies on).</summary>
        static void Validate(GarmentAsset a)
        {
            int n = a.BodyPositions.Length / 3, joints = a.Parents.Length;
            if (a.BodyPositions.Length % 3 != 0) throw new ProtocolException("asset body_positions: not whole triples");
            if (a.BodyJoints.Length != 4 * n || a.BodyWeights.Length != 4 * n) throw new ProtocolException("asset body skin: not 4 joints and 4 weights a body vertex");
            if (a.BodyTriangles.Length % 3 != 0) throw new ProtocolException("asset body_triangles: not whole triples");
            foreach (var t in a.BodyTriangles)
            {
                if (t < 0 || t >= n) throw new ProtocolException("asset body_triangles: a vertex index past the body");
            }
            foreach (var j in a.BodyJoints)
            {
                if (j >= joints) throw new ProtocolException("asset body_joints: a joint past the skeleton");
            }
            if (a.Skeleton.Length != 3 * joints) throw new ProtocolException("asset skeleton: not a rest position per parent entry");
            if (a.Setup.BoneCount != joints) throw new ProtocolException("asset: the garment's bones are not the body's joints");
            for (int j = 0; j < joints; j++)
            {
                if (a.Parents[j] >= j || a.Parents[j] < -1) throw new ProtocolException("asset parents: a joint's parent must be an earlier joint or -1");
            }
        }

        /// <summary>The asset a frame of avatar <paramref name="id"/> names, or null
        /// where this client lacks it: then the asset and the avatar's keyframe are asked
        /// for (again each ResyncAgainMs while it does not come); the first frame that
        /// names it raises a ProtocolException, the frames after it are skipped.</summary>
        GarmentAsset Known(string id, string hash)
        {
            GarmentAsset a;
            if (assets.TryGetValue(hash, out a)) return a;
            long now = Clock.ElapsedMilliseconds, asked;
            bool first = !missing.TryGetValue(hash, out asked);
            if (first || now - asked >= ResyncAgainMs)
            {
                missing[hash] = now;
                AssetsWanted.Enqueue(hash);
                Resyncs.Enqueue(id);
            }
            if (first) throw new ProtocolException("frame of " + id + " for unknown asset " + hash + " (asked for again)");
            return null;
        }

        static T At<T>(object[] f, int i, string what)
        {
            if (!(f[i] is T)) throw new ProtocolException("compact frame: " + what + ": not a " + typeof(T).Name);
            return (T)f[i];
        }

        static T Get<T>(Dictionary<string, object> m, string key)
        {
            object v;
            if (!m.TryGetValue(key, out v)) throw new ProtocolException("message without " + key);
            if (!(v is T)) throw new ProtocolException(key + ": not a " + typeof(T).Name);
            return (T)v;
        }

        static double Number(Dictionary<string, object> m, string key)
        {
            object v;
            if (!m.TryGetValue(key, out v)) throw new ProtocolException("message without " + key);
            if (v is long) return (long)v;
            if (v is double) return (double)v;
            throw new ProtocolException(key + ": not a number");
        }

        static GarmentSetup Setup(ArraySegment<byte> b) { return GarmentSetup.Parse(b.Array, b.Offset, b.Count); }

        static byte[] Copy(ArraySegment<byte> b)
        {
            var c = new byte[b.Count];
            Buffer.BlockCopy(b.Array, b.Offset, c, 0, b.Count);
            return c;
        }

        static float[] Floats(ArraySegment<byte> b, string what)
        {
            if (b.Count % 4 != 0) throw new ProtocolException(what + ": " + b.Count + " bytes, not whole f32s");
            var f = new float[b.Count / 4];
            Buffer.BlockCopy(b.Array, b.Offset, f, 0, b.Count);
            return f;
        }

        static int[] Ints(ArraySegment<byte> b, string what)
        {
            if (b.Count % 4 != 0) throw new ProtocolException(what + ": " + b.Count + " bytes, not whole u32s");
            var f = new int[b.Count / 4];
            Buffer.BlockCopy(b.Array, b.Offset, f, 0, b.Count);
            return f;
        }

    }
}
