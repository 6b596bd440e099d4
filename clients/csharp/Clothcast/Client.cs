// clothcast viewer client in C# (Unity, Mono, .NET): connects to a clothcast server,
// speaks the viewer protocol (README "The server and its protocol") in MessagePack, and
// keeps per avatar the garment positions decoded in place, the bones that skin the
// body, and the world transform. The twin of clients/web/clothcast.js.
//
//   var cc = new ClothcastClient(new Uri("ws://127.0.0.1:8470/ws"), new ClientOptions { Token = "…" });
//   cc.FrameReceived += avatar => Draw(avatar);      // raised inside Poll()
//   cc.Start();
//   ...
//   cc.Poll();                                         // every game frame (Unity: Update)
//
// Threads: a background task does the network I/O only (connecting, reading whole
// messages into a bounded queue, the watchdog). Everything else (parsing, decoding the
// garments, the events) happens inside Poll(), on the caller's thread, so a Unity
// MonoBehaviour can touch meshes from the event handlers and nothing is shared.
//
// Reconnecting: after a drop (server restarted, network gone, peer timeout) the client
// connects again after 0.5 s, doubling to at most 10 s while it keeps failing; every
// avatar is dropped ("gone") and streams again from a keyframe. It does not retry after
// Dispose() nor after a refusal a retry cannot change (4001 wrong token, 1002 bad hello
// or protocol version). A link that dies without closing is noticed by the watchdog: a
// `ping` after 5 s without word from the server, the link dropped after 20 s.

using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.IO;
using System.Net.WebSockets;
using System.Threading;
using System.Threading.Tasks;

[assembly: System.Runtime.CompilerServices.InternalsVisibleTo("Tests")]

namespace Clothcast
{
    /// <summary>How a <see cref="ClothcastClient"/> connects and what it asks for.</summary>
    public sealed class ClientOptions
    {
        /// <summary>The viewer token (the server's [auth] viewer_tokens), or null where
        /// the server runs without tokens.</summary>
        public string Token;
        /// <summary>Avatar ids to receive; null: every avatar.</summary>
        public string[] Avatars;
        /// <summary>Whether frames carry the f32 body pose too (364 bytes a frame;
        /// the bones every garment frame carries pose the body as well).</summary>
        public bool Pose;
        /// <summary>Reconnect after a drop.</summary>
        public bool Reconnect = true;
        /// <summary>Without word from the server: a ping after this long, and the link
        /// dropped after DeadAfter.</summary>
        public TimeSpan PingAfter = TimeSpan.FromSeconds(5), DeadAfter = TimeSpan.FromSeconds(20);
        /// <summary>Largest message accepted from the server, bytes (assets of a large
        /// garment and body are a few MB); a larger one drops the connection.</summary>
        public int MaxMessageBytes = 64 << 20;
        /// <summary>Most messages queued for Poll(); when it is full the network task
        /// waits, and the server's bounded queue drops frames and resyncs with a
        /// keyframe, as for any slow viewer.</summary>
        public int MaxQueued = 1024;
    }

    /// <summary>An asset: one garment's codec setup and the body it is worn on.</summary>
    public sealed class GarmentAsset
    {
        /// <summary>Content hash (hex) that frames refer to.</summary>
        public string Hash;
        /// <summary>The garment's name (what `wear` takes: tshirt, pants, …).</summary>
        public string Garment;
        public GarmentSetup Setup;
        /// <summary>Body rest vertex positions, metres, 3 per vertex (canonical frame:
        /// +Y up, the performer facing +Z).</summary>
        public float[] BodyPositions;
        /// <summary>Body triangles, 3 vertex indices each.</summary>
        public int[] BodyTriangles;
        /// <summary>Body skin: 4 joint indices and 4 weights per vertex.</summary>
        public byte[] BodyJoints;
        public float[] BodyWeights;
        /// <summary>Rest joint positions, metres, 3 per joint (22 joints).</summary>
        public float[] Skeleton;
        /// <summary>Parent of each joint, -1 for the pelvis.</summary>
        public int[] Parents;
    }

    /// <summary>One more garment an avatar wears over its first.</summary>
    public sealed class Layer
    {
        public GarmentAsset Asset;
        /// <summary>Its vertices, metres, canonical frame, decoded in place.</summary>
        public float[] Garment;
        internal GarmentDecoder Decoder;
    }

    /// <summary>One streamed avatar. Its arrays are decoded in place at every frame and
    /// keep their identity while the avatar wears the same garments.</summary>
    public sealed class RemoteAvatar
    {
        public string Id;
        public GarmentAsset Asset;
        /// <summary>The garment's vertices: metres, canonical frame (apply
        /// <see cref="World"/> to place it), 3 floats per vertex in the setup's order.</summary>
        public float[] Garment;
        /// <summary>An outfit's garments worn over the first, inner to outer (empty for
        /// one garment).</summary>
        public Layer[] Layers = new Layer[0];
        /// <summary>Per bone (22) its skinning transform, rest → posed, canonical frame,
        /// as the codec frame carries it: quaternion x, y, z, w then translation in
        /// metres (see <see cref="Skinning.BoneMatrices"/>).</summary>
        public float[] Bones;
        /// <summary>Pelvis translation then 22 local quaternions (x, y, z, w); filled
        /// only with <see cref="ClientOptions.Pose"/>, zeros otherwise.</summary>
        public float[] Pose = new float[3 + 4 * 22];
        /// <summary>Canonical → world: quaternion x, y, z, w, then translation (m).</summary>
        public float[] World = new float[7];
        /// <summary>The server's frame number of the last frame, frames decoded,
        /// message bytes received, frames lost (missed or undecodable until a
        /// keyframe).</summary>
        public long Seq = -1, Frames, Bytes, Dropped;
        /// <summary>Server time of the last frame's tick, seconds.</summary>
        public double Timestamp;
        internal GarmentDecoder Decoder;
    }

    /// <summary>Why a connection ended; <see cref="RetryIn"/> is null when the client
    /// will not reconnect.</summary>
    public sealed class CloseInfo
    {
        public int Code;
        public string Reason;
        public TimeSpan? RetryIn;
        public override string ToString() { return Code + " " + Reason; }
    }

    /// <summary>A viewer of one clothcast server (see the file's comment).</summary>
    public sealed class ClothcastClient : IDisposable
    {
        public const int ProtocolVersion = 1;
        const int CompactHead = 9, MaxOutfit = 4;
        static readonly TimeSpan RetryFirst = TimeSpan.FromMilliseconds(500), RetryMax = TimeSpan.FromSeconds(10);

        readonly Uri url;
        readonly ClientOptions options;
        readonly Dictionary<string, GarmentAsset> assets = new Dictionary<string, GarmentAsset>();
        readonly Dictionary<string, RemoteAvatar> avatars = new Dictionary<string, RemoteAvatar>();
        /// <summary>The hashes of the assets held (read by the network task: a
        /// reconnecting client asks the server not to send them again, `have`).</summary>
        readonly ConcurrentDictionary<string, bool> held = new ConcurrentDictionary<string, bool>();
        readonly BlockingCollection<Incoming> queue;
        readonly CancellationTokenSource stop = new CancellationTokenSource();
        Task loop;

        /// <summary>Raised in Poll(): the server welcomed a connection (its tick rate in
        /// <see cref="TickHz"/>).</summary>
        public event Action Welcomed;
        /// <summary>Raised in Poll(): an asset arrived.</summary>
        public event Action<GarmentAsset> AssetReceived;
        /// <summary>Raised in Poll(): a new avatar (or one in new garments).</summary>
        public event Action<RemoteAvatar> AvatarAdded;
        /// <summary>Raised in Poll(): an avatar's frame was decoded.</summary>
        public event Action<RemoteAvatar> FrameReceived;
        /// <summary>Raised in Poll(): an avatar left (or the connection dropped).</summary>
        public event Action<string> AvatarGone;
        /// <summary>Raised in Poll(): a message that could not be used (the error names
        /// it), or an `error` message of the server. The stream goes on.</summary>
        public event Action<Exception> Error;
        /// <summary>Raised in Poll(): a connection ended.</summary>
        public event Action<CloseInfo> Closed;

        /// <summary>The server's tick rate (Hz) from its welcome; 0 before.</summary>
        public double TickHz { get; private set; }
        /// <summary>The avatars streaming now, by id.</summary>
        public IDictionary<string, RemoteAvatar> Avatars { get { return avatars; } }
        /// <summary>Connections opened so far.</summary>
        public int Connections { get { return connections; } }
        int connections;

        sealed class Incoming
        {
            public byte[] Data;
            public int Length;
            public bool Text;
            public CloseInfo Close;
        }

        public ClothcastClient(Uri url, ClientOptions options)
        {
            if (url == null) throw new ArgumentNullException("url");
            this.url = url;
            this.options = options ?? new ClientOptions();
            queue = new BlockingCollection<Incoming>(Math.Max(1, this.options.MaxQueued));
        }

        /// <summary>Starts connecting (and reconnecting) in the background.</summary>
        public void Start()
        {
            if (loop != null) throw new InvalidOperationException("already started");
            loop = Task.Run(() => Run(stop.Token));
        }

        /// <summary>Closes for good: no reconnecting. Queued messages are dropped.</summary>
        public void Dispose()
        {
            stop.Cancel();
            try { if (loop != null) loop.Wait(TimeSpan.FromSeconds(2)); }
            catch (AggregateException) { }
        }

        /// <summary>Handles what has arrived, raising the events on this thread; waits
        /// up to <paramref name="wait"/> for the first message. Returns the number of
        /// messages handled.</summary>
        public int Poll(TimeSpan wait = default(TimeSpan))
        {
            int handled = 0;
            Incoming m;
            while (queue.TryTake(out m, handled == 0 ? wait : TimeSpan.Zero))
            {
                handled++;
                if (m.Close != null) { Lost(m.Close); continue; }
                try { Handle(m); }
                catch (Exception e) when (e is MsgPackException || e is CodecException || e is ProtocolException)
                {
                    Raise(Error, e);
                }
            }
            return handled;
        }

        /// <summary>Queues <paramref name="message"/> as if the server had sent it (for
        /// tests of what Poll() makes of a server's messages, without a server).</summary>
        internal void Inject(byte[] message)
        {
            queue.Add(new Incoming { Data = message, Length = message.Length });
        }

        static void Raise<T>(Action<T> handler, T value)
        {
            if (handler != null) handler(value);
        }

        void Lost(CloseInfo close)
        {
            // what the connection streamed is gone; the next one starts from keyframes
            var ids = new List<string>(avatars.Keys);
            avatars.Clear();
            foreach (var id in ids) Raise(AvatarGone, id);
            Raise(Closed, close);
        }

        void Handle(Incoming m)
        {
            if (m.Text) throw new ProtocolException("a text message from the server; this client speaks MessagePack");
            var v = MsgPack.Decode(m.Data, 0, m.Length);
            var a = v as object[];
            if (a != null) { Frame(a, m.Length); return; }
            var map = v as Dictionary<string, object>;
            if (map == null) throw new ProtocolException("a message that is neither a map nor a compact frame");
            string type = Get<string>(map, "type");
            switch (type)
            {
                case "welcome":
                    TickHz = Number(map, "tick_hz");
                    if (Welcomed != null) Welcomed();
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
                        assets[asset.Hash] = asset;
                        held[asset.Hash] = true;
                        Raise(AssetReceived, asset);
                        break;
                    }
                case "gone":
                    {
                        string id = Get<string>(map, "avatar");
                        if (avatars.Remove(id)) Raise(AvatarGone, id);
                        break;
                    }
                case "error":
                    Raise(Error, new ProtocolException("server: " + Get<string>(map, "code") + ": " + Get<string>(map, "message")));
                    break;
                default: // pong, and types this client does not know yet
                    break;
            }
        }

        /// <summary>A compact frame: "frame", avatar, seq, timestamp, pose_timestamp,
        /// world (28 bytes of 7 f32 LE), pose bytes, asset, garment bytes, then an asset
        /// and garment bytes per layer.</summary>
        void Frame(object[] f, int size)
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
            var asset = Known(At<string>(f, 7, "asset"));
            var garment = At<ArraySegment<byte>>(f, 8, "garment");
            var over = new GarmentAsset[layers];
            for (int k = 0; k < layers; k++) over[k] = Known(At<string>(f, CompactHead + 2 * k, "a layer's asset"));
            RemoteAvatar av;
            bool same = avatars.TryGetValue(id, out av) && av.Asset == asset && av.Layers.Length == layers;
            for (int k = 0; same && k < layers; k++) same = av.Layers[k].Asset == over[k];
            if (!same)
            {
                // a new avatar, or new garments: new streams, starting with keyframes
                av = new RemoteAvatar
                {
                    Id = id,
                    Asset = asset,
                    Decoder = new GarmentDecoder(asset.Setup),
                    Garment = new float[3 * asset.Setup.VertexCount],
                    Bones = new float[7 * asset.Setup.BoneCount],
                    Layers = new Layer[layers],
                };
                for (int k = 0; k < layers; k++)
                {
                    av.Layers[k] = new Layer { Asset = over[k], Decoder = new GarmentDecoder(over[k].Setup), Garment = new float[3 * over[k].Setup.VertexCount] };
                }
                avatars[id] = av;
                Raise(AvatarAdded, av);
            }
            av.Bytes += size;
            try
            {
                av.Decoder.Decode(garment.Array, garment.Offset, garment.Count, av.Garment);
                // every layer's frame has the frame's number: in step with the first
                for (int k = 0; k < layers; k++)
                {
                    var g = At<ArraySegment<byte>>(f, CompactHead + 2 * k + 1, "a layer's garment");
                    av.Layers[k].Decoder.Decode(g.Array, g.Offset, g.Count, av.Layers[k].Garment);
                }
            }
            catch (CodecException e)
            {
                // a delta whose reference this client lacks (it missed frames): the
                // server resyncs a viewer that fell behind with a keyframe
                if (e.Code == "missing-reference") { av.Dropped++; return; }
                throw;
            }
            if (av.Seq >= 0 && seq > av.Seq + 1) av.Dropped += seq - av.Seq - 1;
            av.Seq = seq;
            av.Frames++;
            av.Timestamp = timestamp;
            av.Decoder.Bones(av.Bones);
            for (int i = 0; i < 7; i++) av.World[i] = BitConverter.ToSingle(world.Array, world.Offset + 4 * i);
            for (int i = 0; i < av.Pose.Length && 4 * i + 4 <= pose.Count; i++) av.Pose[i] = BitConverter.ToSingle(pose.Array, pose.Offset + 4 * i);
            Raise(FrameReceived, av);
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

        GarmentAsset Known(string hash)
        {
            GarmentAsset a;
            if (!assets.TryGetValue(hash, out a)) throw new ProtocolException("frame for unknown asset " + hash);
            return a;
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

        // ---- the network task: I/O only ----

        async Task Run(CancellationToken cancel)
        {
            var retry = RetryFirst;
            while (!cancel.IsCancellationRequested)
            {
                var close = await Connection(cancel, () => retry = RetryFirst).ConfigureAwait(false);
                if (cancel.IsCancellationRequested) return;
                bool again = options.Reconnect && close.Code != 4001 && close.Code != 1002;
                close.RetryIn = again ? retry : (TimeSpan?)null;
                Enqueue(new Incoming { Close = close }, cancel);
                if (!again) return;
                try { await Task.Delay(retry, cancel).ConfigureAwait(false); }
                catch (OperationCanceledException) { return; }
                retry = TimeSpan.FromTicks(Math.Min(2 * retry.Ticks, RetryMax.Ticks));
            }
        }

        void Enqueue(Incoming m, CancellationToken cancel)
        {
            try { queue.Add(m, cancel); }
            catch (OperationCanceledException) { }
        }

        /// <summary>One connection, from opening to its end.</summary>
        async Task<CloseInfo> Connection(CancellationToken cancel, Action welcomed)
        {
            Interlocked.Increment(ref connections);
            var ws = new ClientWebSocket();
            var send = new SemaphoreSlim(1, 1);
            long heard = Environment.TickCount;
            using (var done = CancellationTokenSource.CreateLinkedTokenSource(cancel))
            {
                // the watchdog: a ping after PingAfter without word, the link dropped
                // after DeadAfter (also while it is still opening)
                var watchdog = Task.Run(async () =>
                {
                    long pinged = long.MinValue / 2;
                    while (!done.IsCancellationRequested)
                    {
                        try { await Task.Delay(250, done.Token).ConfigureAwait(false); }
                        catch (OperationCanceledException) { return; }
                        long now = Environment.TickCount, quiet = now - Interlocked.Read(ref heard);
                        if (quiet >= options.DeadAfter.TotalMilliseconds) { ws.Abort(); return; }
                        if (quiet >= options.PingAfter.TotalMilliseconds && now - pinged >= options.PingAfter.TotalMilliseconds && ws.State == WebSocketState.Open)
                        {
                            pinged = now;
                            await Send(ws, send, new MsgPackWriter().Map(1).Str("type").Str("ping").ToArray(), done.Token).ConfigureAwait(false);
                        }
                    }
                });
                try
                {
                    await ws.ConnectAsync(url, done.Token).ConfigureAwait(false);
                    var hello = new MsgPackWriter().Map(4).Str("type").Str("hello").Str("version").Int(ProtocolVersion)
                        .Str("role").Str("viewer").Str("token").StrOrNil(options.Token).ToArray();
                    await Send(ws, send, hello, done.Token).ConfigureAwait(false);
                    await Send(ws, send, Subscribe(), done.Token).ConfigureAwait(false);
                    var buffer = new byte[64 * 1024];
                    var message = new MemoryStream();
                    bool first = true;
                    while (true)
                    {
                        var r = await ws.ReceiveAsync(new ArraySegment<byte>(buffer), done.Token).ConfigureAwait(false);
                        Interlocked.Exchange(ref heard, Environment.TickCount);
                        if (r.MessageType == WebSocketMessageType.Close)
                        {
                            return new CloseInfo { Code = (int)(ws.CloseStatus ?? WebSocketCloseStatus.Empty), Reason = ws.CloseStatusDescription ?? "" };
                        }
                        if (message.Length + r.Count > options.MaxMessageBytes)
                        {
                            ws.Abort();
                            return new CloseInfo { Code = 1009, Reason = "a message from the server above " + options.MaxMessageBytes + " bytes" };
                        }
                        message.Write(buffer, 0, r.Count);
                        if (!r.EndOfMessage) continue;
                        if (first) { first = false; welcomed(); }
                        Enqueue(new Incoming { Data = message.ToArray(), Length = (int)message.Length, Text = r.MessageType == WebSocketMessageType.Text }, done.Token);
                        message.SetLength(0);
                    }
                }
                catch (Exception e) when (e is WebSocketException || e is OperationCanceledException || e is IOException || e is ObjectDisposedException)
                {
                    return new CloseInfo { Code = 1006, Reason = cancel.IsCancellationRequested ? "closed" : e.Message };
                }
                finally
                {
                    done.Cancel();
                    try { watchdog.Wait(1000); }
                    catch (AggregateException) { }
                    if (cancel.IsCancellationRequested && ws.State == WebSocketState.Open)
                    {
                        try { ws.CloseOutputAsync(WebSocketCloseStatus.NormalClosure, "bye", CancellationToken.None).Wait(500); }
                        catch (AggregateException) { }
                    }
                    ws.Dispose();
                }
            }
        }

        byte[] Subscribe()
        {
            // the assets an earlier connection brought are not sent again (`have`, at
            // most 64)
            var have = new List<string>();
            foreach (var h in held.Keys)
            {
                if (have.Count < 64) have.Add(h);
            }
            var w = new MsgPackWriter().Map(have.Count > 0 ? 5 : 4).Str("type").Str("subscribe").Str("avatars");
            if (options.Avatars == null) w.Nil();
            else
            {
                w.Array(options.Avatars.Length);
                foreach (var a in options.Avatars) w.Str(a);
            }
            w.Str("pose").Bool(options.Pose).Str("compact").Bool(true);
            if (have.Count > 0)
            {
                w.Str("have").Array(have.Count);
                foreach (var h in have) w.Str(h);
            }
            return w.ToArray();
        }

        static async Task Send(ClientWebSocket ws, SemaphoreSlim gate, byte[] data, CancellationToken cancel)
        {
            await gate.WaitAsync(cancel).ConfigureAwait(false);
            try { await ws.SendAsync(new ArraySegment<byte>(data), WebSocketMessageType.Binary, true, cancel).ConfigureAwait(false); }
            finally { gate.Release(); }
        }
    }

    /// <summary>A server message this client cannot use (named).</summary>
    public sealed class ProtocolException : Exception
    {
        public ProtocolException(string message) : base(message) { }
    }
}
