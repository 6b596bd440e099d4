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
//
// A frame the decoder refuses (corrupt, or a delta whose reference it lacks) leaves its
// avatar's garment at the last decoded frame and counts in Dropped; a corrupt one
// raises Error too (a ProtocolException naming the avatar, its cause the
// CodecException). The client asks the server for a keyframe (`resync`), again each
// second while none comes, and the avatar streams on from it. A frame that names an
// asset the client lacks raises Error once ("frame of … for unknown asset …"); the
// client asks for the asset again with the keyframe (`resync`'s `assets`) and skips the
// avatar's frames until it comes.

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
        /// <summary>Parse and decode on the network task instead of in Poll(): Poll()
        /// then only hands over the decoded arrays and raises the events, so a render
        /// thread (Unity's main thread) spends ~nothing on the streams. Either way the
        /// events and the avatars are Poll()'s, on its thread.</summary>
        public bool DecodeOnNetworkThread;
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
        /// <summary>The hash's UTF-8 bytes (what the in-place frame path matches).</summary>
        internal byte[] HashBytes;
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
        /// <summary>Its vertices, metres, canonical frame (null before the first
        /// frame).</summary>
        public float[] Garment;
    }

    /// <summary>One streamed avatar, updated in Poll(). Its arrays (Garment, the
    /// layers' Garment, Bones, Pose, World) are the last frame's: each frame brings
    /// other arrays, and the ones it replaces are reused for a later frame, so read or
    /// copy them in the frame's event (or before the next Poll()), and do not keep
    /// them. Garment and Bones are null before the first frame.</summary>
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
        internal AvatarStream Stream;
        internal FrameBuffers Buffers;
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
        static readonly TimeSpan RetryFirst = TimeSpan.FromMilliseconds(500), RetryMax = TimeSpan.FromSeconds(10);
        /// <summary>The watchdog's monotonic clock: the session's (resync timing).</summary>
        static System.Diagnostics.Stopwatch Clock { get { return Session.Clock; } }

        readonly Uri url;
        readonly ClientOptions options;
        readonly Dictionary<string, RemoteAvatar> avatars = new Dictionary<string, RemoteAvatar>();
        readonly Session session = new Session();
        readonly List<ClientEvent> events = new List<ClientEvent>();
        readonly BlockingCollection<Incoming> queue;
        /// <summary>Message buffers Poll() has finished with, for the network task to
        /// copy the next messages into (decoding in Poll(): no array a message).</summary>
        readonly ConcurrentQueue<byte[]> buffers = new ConcurrentQueue<byte[]>();
        const int MaxPooledBuffers = 64, MaxPooledBuffer = 1 << 20;
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

        /// <summary>What the network task queues for Poll(): a message as it came, or
        /// (with DecodeOnNetworkThread) the events it was already turned into, or the
        /// end of a connection.</summary>
        sealed class Incoming
        {
            public byte[] Data;
            public int Length;
            public bool Text;
            public ClientEvent[] Events;
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
                if (m.Events != null)
                {
                    foreach (var e in m.Events) Apply(e);
                    continue;
                }
                if (m.Close != null)
                {
                    // what the connection streamed is gone; the next one starts from
                    // keyframes
                    if (!options.DecodeOnNetworkThread) session.Reset();
                    Apply(new ClientEvent { Kind = ClientEvent.Kinds.Closed, Close = m.Close });
                    continue;
                }
                events.Clear();
                session.Handle(m.Data, m.Length, m.Text, events);
                // nothing holds on to a message's bytes once it is handled (assets and
                // setups copy what they keep)
                if (m.Data.Length <= MaxPooledBuffer && buffers.Count < MaxPooledBuffers) buffers.Enqueue(m.Data);
                foreach (var e in events) Apply(e);
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

        /// <summary>Applies one event to the avatars and raises it.</summary>
        void Apply(ClientEvent e)
        {
            switch (e.Kind)
            {
                case ClientEvent.Kinds.Welcome:
                    TickHz = e.TickHz;
                    if (Welcomed != null) Welcomed();
                    break;
                case ClientEvent.Kinds.Asset:
                    Raise(AssetReceived, e.Asset);
                    break;
                case ClientEvent.Kinds.Added:
                    {
                        var s = e.Stream;
                        var av = new RemoteAvatar { Id = s.Id, Asset = s.Assets[0], Stream = s, Layers = new Layer[s.Assets.Length - 1] };
                        for (int k = 1; k < s.Assets.Length; k++) av.Layers[k - 1] = new Layer { Asset = s.Assets[k] };
                        avatars[s.Id] = av;
                        Raise(AvatarAdded, av);
                        break;
                    }
                case ClientEvent.Kinds.Frame:
                    {
                        RemoteAvatar av;
                        if (!avatars.TryGetValue(e.Stream.Id, out av) || av.Stream != e.Stream)
                        {
                            e.Stream.Pool.Enqueue(e.Buffers);
                            break;
                        }
                        // the frame's arrays become the avatar's; its previous ones go back
                        // to the decoding thread
                        if (av.Buffers != null) av.Stream.Pool.Enqueue(av.Buffers);
                        var b = e.Buffers;
                        av.Buffers = b;
                        av.Garment = b.Garments[0];
                        for (int k = 0; k < av.Layers.Length; k++) av.Layers[k].Garment = b.Garments[k + 1];
                        av.Bones = b.Bones;
                        av.Pose = b.Pose;
                        av.World = b.World;
                        av.Seq = e.Seq;
                        av.Frames = e.Frames;
                        av.Bytes = e.Bytes;
                        av.Dropped = e.Dropped;
                        av.Timestamp = e.Timestamp;
                        Raise(FrameReceived, av);
                        break;
                    }
                case ClientEvent.Kinds.Lost:
                    {
                        RemoteAvatar av;
                        if (avatars.TryGetValue(e.Stream.Id, out av) && av.Stream == e.Stream) av.Dropped = e.Dropped;
                        break;
                    }
                case ClientEvent.Kinds.Gone:
                    if (avatars.Remove(e.Id)) Raise(AvatarGone, e.Id);
                    break;
                case ClientEvent.Kinds.Error:
                    Raise(Error, e.Error);
                    break;
                case ClientEvent.Kinds.Closed:
                    {
                        var ids = new List<string>(avatars.Keys);
                        avatars.Clear();
                        foreach (var id in ids) Raise(AvatarGone, id);
                        Raise(Closed, e.Close);
                        break;
                    }
            }
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
                // with DecodeOnNetworkThread the session is this task's: its streams end
                // here, before the next connection's messages
                if (options.DecodeOnNetworkThread) session.Reset();
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
            long heard = Clock.ElapsedMilliseconds;
            string dead = null;
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
                        long now = Clock.ElapsedMilliseconds, quiet = now - Interlocked.Read(ref heard);
                        if (quiet >= options.DeadAfter.TotalMilliseconds)
                        {
                            dead = "no word from the server for " + (quiet / 1000.0).ToString("F1", System.Globalization.CultureInfo.InvariantCulture) + " s";
                            ws.Abort();
                            return;
                        }
                        // keyframes the decoding side asked for (also sent as messages come)
                        if (ws.State == WebSocketState.Open) await SendResyncs(ws, send, done.Token).ConfigureAwait(false);
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
                    var decoded = new List<ClientEvent>();
                    while (true)
                    {
                        var r = await ws.ReceiveAsync(new ArraySegment<byte>(buffer), done.Token).ConfigureAwait(false);
                        Interlocked.Exchange(ref heard, Clock.ElapsedMilliseconds);
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
                        if (first)
                        {
                            // a welcome (the server's answer to a good hello) resets the
                            // reconnect delay; anything else first (an error before a
                            // close) does not
                            first = false;
                            if (IsWelcome(message)) welcomed();
                        }
                        bool text = r.MessageType == WebSocketMessageType.Text;
                        if (options.DecodeOnNetworkThread)
                        {
                            decoded.Clear();
                            session.Handle(message.GetBuffer(), (int)message.Length, text, decoded);
                            if (decoded.Count > 0) Enqueue(new Incoming { Events = decoded.ToArray() }, done.Token);
                        }
                        else
                        {
                            // a copy for Poll() (the receive buffer is reused), in a buffer
                            // Poll() handed back when it can
                            int length = (int)message.Length;
                            var copy = TakeBuffer(length);
                            Buffer.BlockCopy(message.GetBuffer(), 0, copy, 0, length);
                            Enqueue(new Incoming { Data = copy, Length = length, Text = text }, done.Token);
                        }
                        message.SetLength(0);
                        if (!session.Resyncs.IsEmpty) await SendResyncs(ws, send, done.Token).ConfigureAwait(false);
                    }
                }
                catch (Exception e) when (e is WebSocketException || e is OperationCanceledException || e is IOException || e is ObjectDisposedException)
                {
                    return new CloseInfo { Code = 1006, Reason = cancel.IsCancellationRequested ? "closed" : Volatile.Read(ref dead) ?? e.Message };
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

        /// <summary>A buffer of at least <paramref name="length"/> bytes: a pooled one
        /// when one is large enough (others are dropped), else a new one.</summary>
        byte[] TakeBuffer(int length)
        {
            byte[] b;
            while (buffers.TryDequeue(out b))
            {
                if (b.Length >= length) return b;
            }
            return new byte[Math.Max(length, 4096)];
        }

        static bool IsWelcome(MemoryStream m)
        {
            try
            {
                var map = MsgPack.Decode(m.GetBuffer(), 0, (int)m.Length) as Dictionary<string, object>;
                object type;
                return map != null && map.TryGetValue("type", out type) && "welcome".Equals(type);
            }
            catch (MsgPackException)
            {
                return false;
            }
        }

        byte[] Subscribe()
        {
            // the assets an earlier connection brought are not sent again (`have`, at
            // most 64)
            var have = new List<string>();
            foreach (var h in session.Held.Keys)
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

        /// <summary>Sends a `resync` naming the avatars the decoding side queued (a frame
        /// of theirs refused, or naming an asset this client lacks) and the assets it
        /// lacks, if any: the server sends each asset again and each avatar a keyframe.</summary>
        async Task SendResyncs(ClientWebSocket ws, SemaphoreSlim gate, CancellationToken cancel)
        {
            var ids = new List<string>();
            var hashes = new List<string>();
            string id;
            while (ids.Count < 64 && session.Resyncs.TryDequeue(out id))
            {
                if (!ids.Contains(id)) ids.Add(id);
            }
            while (hashes.Count < 64 && session.AssetsWanted.TryDequeue(out id))
            {
                if (!hashes.Contains(id)) hashes.Add(id);
            }
            if (ids.Count == 0 && hashes.Count == 0) return;
            var w = new MsgPackWriter().Map(hashes.Count > 0 ? 3 : 2).Str("type").Str("resync").Str("avatars").Array(ids.Count);
            foreach (var a in ids) w.Str(a);
            if (hashes.Count > 0)
            {
                w.Str("assets").Array(hashes.Count);
                foreach (var hash in hashes) w.Str(hash);
            }
            await Send(ws, gate, w.ToArray(), cancel).ConfigureAwait(false);
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
        /// <summary>A message that <paramref name="cause"/> (a CodecException for a
        /// refused frame) made unusable.</summary>
        public ProtocolException(string message, Exception cause) : base(message, cause) { }
    }
}
