//! `clothcast.Viewer`: a viewer client on a thread of its own. It connects (retrying
//! with back-off, and again whenever the link breaks or goes silent), subscribes,
//! decodes every avatar's garments as they come, and keeps each avatar's latest frame
//! for Python to read: what a program that draws at its own pace (Blender's timer, a
//! render loop, a notebook) needs, since it never sees a stale frame queue up.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use clothcast::client::{Backoff, Client, ClientError, Viewer as Decoding};
use clothcast::codec::{BoneTransform, GarmentSetup};
use clothcast::protocol::{BodyAsset, ClientMessage, Role, ServerMessage, SubscribeMessage};
use glam::{Quat, Vec3};
use pyo3::exceptions::{PyIndexError, PyKeyError, PyLookupError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tokio::sync::watch;

use crate::decoder::{flat_bone, float_buffer, view};
use crate::errors;

/// An asset as the viewer holds it: the garment's setup and the body it is worn on.
struct Asset {
    /// The garment's name (`tshirt`, …; empty from older servers).
    garment: String,
    setup: Arc<GarmentSetup>,
    /// The body, or why it is unusable.
    body: Result<BodyAsset, String>,
}

/// An avatar's latest decoded frame.
#[derive(Default)]
struct Avatar {
    /// The frame's tick sequence number (= its codec frame number).
    seq: u32,
    /// Server time of the tick, seconds since the server started.
    timestamp: f64,
    /// The publisher's timestamp of the pose, seconds.
    pose_timestamp: f64,
    /// Canonical → world: rotation (x, y, z, w), translation (metres).
    world: [f32; 7],
    /// Asset hashes of its garments, inner to outer.
    assets: Vec<String>,
    /// Each garment's positions, canonical frame, metres (3 per vertex).
    garments: Vec<Vec<f32>>,
    /// The frame's bone transforms (rest → posed, canonical frame).
    bones: Vec<BoneTransform>,
    /// Frames decoded since the viewer started.
    frames: u64,
}

/// What the network thread shares with Python.
#[derive(Default)]
struct State {
    connected: bool,
    /// Connections made so far.
    connections: u64,
    tick_hz: f32,
    /// The last failure (connecting, or of a connection that then broke).
    error: Option<String>,
    /// A refusal that retrying cannot change: the thread has stopped.
    refused: Option<String>,
    assets: HashMap<String, Arc<Asset>>,
    avatars: HashMap<String, Avatar>,
    /// Avatars with a new frame since the last `poll`.
    updated: BTreeSet<String>,
    /// Avatars that left since the last `poll`.
    gone: BTreeSet<String>,
    /// Messages refused since the last `errors()` (at most [`MAX_ERRORS`]), and how many
    /// more there were.
    errors: Vec<String>,
    errors_dropped: u64,
}

/// Refused messages kept for `errors()` between two calls.
const MAX_ERRORS: usize = 100;

fn lock(s: &Mutex<State>) -> MutexGuard<'_, State> {
    // the state is plain data, consistent after every statement that changes it
    s.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A viewer connected to a clothcast server, on a thread of its own.
///
/// `Viewer(url, token=None, avatars=None)`: `url` is the server's WebSocket endpoint
/// (`ws://host:8470/ws`, or `wss://…`); `token` the viewer token, if the server wants
/// one; `avatars` a list of avatar ids to receive (None: all). It connects at once and
/// keeps connecting (with back-off) until `close()`, unless the server refuses it for
/// good (a wrong token), after which `poll()` raises `ClientError`.
///
/// `poll()` returns `(updated, gone)`: the avatars with a new frame and the avatars
/// that left since the last call. Then `garment(id)`, `body(id)`, `bones(id)` and
/// `frame(id)` read an avatar's latest frame; `asset(hash)` an asset's topology and
/// body. Positions are in the avatar's canonical frame (metres, +Y up); `frame(id)`'s
/// `world` places them.
#[pyclass(module = "clothcast")]
pub(crate) struct Viewer {
    state: Arc<Mutex<State>>,
    stop: watch::Sender<bool>,
    thread: Mutex<Option<JoinHandle<()>>>,
    url: String,
}

#[pymethods]
impl Viewer {
    #[new]
    #[pyo3(signature = (url, token = None, avatars = None))]
    fn new(url: String, token: Option<String>, avatars: Option<Vec<String>>) -> PyResult<Self> {
        if !(url.starts_with("ws://") || url.starts_with("wss://")) {
            return Err(PyValueError::new_err(format!(
                "url {url:?}: expected ws://HOST:PORT/ws or wss://…"
            )));
        }
        if let Some(bad) = avatars
            .iter()
            .flatten()
            .find(|a| !clothcast::protocol::valid_avatar_id(a))
        {
            return Err(PyValueError::new_err(format!(
                "avatar id {bad:?} is not valid"
            )));
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| PyRuntimeError::new_err(format!("starting the client's runtime: {e}")))?;
        let state = Arc::new(Mutex::new(State::default()));
        let (stop, stopped) = watch::channel(false);
        let link = Link {
            url: url.clone(),
            token,
            avatars,
            state: Arc::clone(&state),
        };
        let thread = std::thread::Builder::new()
            .name("clothcast-viewer".into())
            .spawn(move || runtime.block_on(link.run(stopped)))
            .map_err(|e| PyRuntimeError::new_err(format!("starting the client's thread: {e}")))?;
        Ok(Self {
            state,
            stop,
            thread: Mutex::new(Some(thread)),
            url,
        })
    }

    /// `(updated, gone)`: sorted lists of the avatar ids with a new frame, and of those
    /// that left, since the last call. Raises `ClientError` once the server has
    /// refused the viewer for good.
    fn poll(&self) -> PyResult<(Vec<String>, Vec<String>)> {
        let mut s = lock(&self.state);
        if let Some(why) = &s.refused {
            return Err(errors::ClientError::new_err(format!("{}: {why}", self.url)));
        }
        let updated = std::mem::take(&mut s.updated).into_iter().collect();
        let gone = std::mem::take(&mut s.gone).into_iter().collect();
        Ok((updated, gone))
    }

    /// What was wrong with each server message refused since the last call (a message
    /// that does not parse, a frame or asset that does not decode, an error the server
    /// reports), oldest first: each was skipped and the link kept. At most 100 are
    /// kept between calls; a last entry says how many more there were.
    fn errors(&self) -> Vec<String> {
        let mut s = lock(&self.state);
        let mut out = std::mem::take(&mut s.errors);
        let dropped = std::mem::take(&mut s.errors_dropped);
        if dropped > 0 {
            out.push(format!("… and {dropped} more"));
        }
        out
    }

    /// Whether the viewer is connected now.
    #[getter]
    fn connected(&self) -> bool {
        lock(&self.state).connected
    }

    /// Connections made so far (more than one: it reconnected).
    #[getter]
    fn connections(&self) -> u64 {
        lock(&self.state).connections
    }

    /// The last failure (connecting, a link that broke, a message refused), or None;
    /// cleared by each new connection.
    #[getter]
    fn error(&self) -> Option<String> {
        let s = lock(&self.state);
        s.refused.clone().or_else(|| s.error.clone())
    }

    /// The server's tick rate, Hz (0 before the first connection).
    #[getter]
    fn tick_hz(&self) -> f32 {
        lock(&self.state).tick_hz
    }

    /// The ids of the avatars it holds a frame of, sorted.
    #[getter]
    fn avatars(&self) -> Vec<String> {
        let s = lock(&self.state);
        let mut ids: Vec<String> = s.avatars.keys().cloned().collect();
        ids.sort();
        ids
    }

    /// The avatar's latest frame: `seq`, `timestamp` (server seconds), `pose_timestamp`
    /// (the publisher's seconds), `world` (qx, qy, qz, qw, tx, ty, tz: canonical →
    /// world), `assets` (the hashes of its garments, inner to outer), `frames` (decoded
    /// so far). KeyError for an avatar it does not hold.
    fn frame<'py>(&self, py: Python<'py>, avatar: &str) -> PyResult<Bound<'py, PyDict>> {
        let s = lock(&self.state);
        let a = avatar_of(&s, avatar)?;
        let d = PyDict::new(py);
        d.set_item("seq", a.seq)?;
        d.set_item("timestamp", a.timestamp)?;
        d.set_item("pose_timestamp", a.pose_timestamp)?;
        d.set_item("world", a.world)?;
        d.set_item("assets", a.assets.clone())?;
        d.set_item("frames", a.frames)?;
        Ok(d)
    }

    /// The positions of the avatar's garment `layer` (0: the first, inner to outer) in
    /// its latest frame, canonical frame, metres: written into `out` (a writable
    /// buffer of 3 × vertices float32) and returned, or, without `out`, returned as a
    /// new memoryview of float32.
    #[pyo3(signature = (avatar, layer = 0, out = None))]
    fn garment<'py>(
        &self,
        py: Python<'py>,
        avatar: &str,
        layer: usize,
        out: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let s = lock(&self.state);
        let a = avatar_of(&s, avatar)?;
        let g = a.garments.get(layer).ok_or_else(|| {
            PyIndexError::new_err(format!(
                "avatar {avatar:?} wears {} garments, no layer {layer}",
                a.garments.len()
            ))
        })?;
        write_out(py, g, out)
    }

    /// The avatar's body posed by its latest frame's bones (linear blend skinning of
    /// the asset's rest body), canonical frame, metres: into `out` (3 × body vertices
    /// float32) or a new memoryview. LookupError when its asset carries no usable body.
    #[pyo3(signature = (avatar, out = None))]
    fn body<'py>(
        &self,
        py: Python<'py>,
        avatar: &str,
        out: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (asset, bones) = {
            let s = lock(&self.state);
            let a = avatar_of(&s, avatar)?;
            let first = a.assets.first().ok_or_else(|| {
                PyLookupError::new_err(format!("avatar {avatar:?} wears no garment"))
            })?;
            (asset_of(&s, first)?, a.bones.clone())
        };
        let body = asset.body.as_ref().map_err(|why| {
            PyLookupError::new_err(format!("avatar {avatar:?}: no usable body ({why})"))
        })?;
        let posed = skin(body, &bones);
        write_out(py, &posed, out)
    }

    /// The bone transforms of the avatar's latest frame: one (qx, qy, qz, qw, tx, ty,
    /// tz) per bone in `JOINT_NAMES` order, the skinning transform from the rest pose
    /// to the frame's pose, canonical frame.
    fn bones(&self, avatar: &str) -> PyResult<Vec<[f32; 7]>> {
        let s = lock(&self.state);
        Ok(avatar_of(&s, avatar)?.bones.iter().map(flat_bone).collect())
    }

    /// An asset (what `frame(id)['assets']` names): `garment` (its name), `vertices`,
    /// `triangles` (memoryview of uint32, 3 a triangle), and `body`: a dict of the rest
    /// body (`positions` float32 ×3, `triangles` uint32 ×3, `joints` uint8 ×4 and
    /// `weights` float32 ×4 per vertex, `skeleton` float32 ×3 per joint, `parents`) or
    /// None when the asset's body is unusable. KeyError for an asset it does not hold.
    fn asset<'py>(&self, py: Python<'py>, hash: &str) -> PyResult<Bound<'py, PyDict>> {
        let a = asset_of(&lock(&self.state), hash)?;
        let d = PyDict::new(py);
        d.set_item("garment", &a.garment)?;
        d.set_item("vertices", a.setup.vertex_count())?;
        d.set_item(
            "triangles",
            view(py, a.setup.triangles.as_flattened(), "I")?,
        )?;
        match &a.body {
            Ok(b) => {
                let body = PyDict::new(py);
                body.set_item("positions", view(py, b.positions.as_flattened(), "f")?)?;
                body.set_item("triangles", view(py, b.triangles.as_flattened(), "I")?)?;
                body.set_item("joints", view(py, b.joints.as_flattened(), "B")?)?;
                body.set_item("weights", view(py, b.weights.as_flattened(), "f")?)?;
                body.set_item("skeleton", view(py, b.skeleton.as_flattened(), "f")?)?;
                body.set_item("parents", b.parents.clone())?;
                d.set_item("body", body)?;
            }
            Err(_) => d.set_item("body", py.None())?,
        }
        Ok(d)
    }

    /// Closes the connection (a clean WebSocket close) and stops the thread; waits at
    /// most about a second. Calling it again does nothing.
    fn close(&self, py: Python<'_>) {
        let _ = self.stop.send(true);
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(t) = thread {
            // the thread needs no GIL; let other Python threads run meanwhile
            py.detach(|| {
                let _ = t.join();
            });
        }
        lock(&self.state).connected = false;
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _kind: Option<Bound<'_, PyAny>>,
        _value: Option<Bound<'_, PyAny>>,
        _traceback: Option<Bound<'_, PyAny>>,
    ) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        let s = lock(&self.state);
        format!(
            "<clothcast.Viewer {} {} avatars={}>",
            self.url,
            if s.connected {
                "connected"
            } else {
                "not connected"
            },
            s.avatars.len()
        )
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        // the thread sees the stop and ends on its own; nothing waits for it here
        let _ = self.stop.send(true);
    }
}

fn avatar_of<'s>(s: &'s State, id: &str) -> PyResult<&'s Avatar> {
    s.avatars
        .get(id)
        .ok_or_else(|| PyKeyError::new_err(format!("no avatar {id:?} (yet)")))
}

fn asset_of(s: &State, hash: &str) -> PyResult<Arc<Asset>> {
    s.assets
        .get(hash)
        .cloned()
        .ok_or_else(|| PyKeyError::new_err(format!("no asset {hash:?}")))
}

/// `data` into `out` (checked: writable, float32, the same length) and `out` back, or
/// a new memoryview of it.
fn write_out<'py>(
    py: Python<'py>,
    data: &[f32],
    out: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    match out {
        Some(o) => {
            float_buffer(&o, data.len(), "out")?.copy_from_slice(py, data)?;
            Ok(o)
        }
        None => view(py, data, "f"),
    }
}

/// The body posed by `bones` (rest → posed skinning transforms, canonical frame):
/// linear blend skinning with the weights as given; a joint the bones lack is left
/// out of the blend.
fn skin(body: &BodyAsset, bones: &[BoneTransform]) -> Vec<f32> {
    let mut out = Vec::with_capacity(3 * body.positions.len());
    for ((p, joints), weights) in body.positions.iter().zip(&body.joints).zip(&body.weights) {
        let p = Vec3::from(*p);
        let mut acc = Vec3::ZERO;
        for (&j, &w) in joints.iter().zip(weights) {
            if let Some(b) = bones.get(usize::from(j)).filter(|_| w != 0.0) {
                let q = Quat::from_array(b.rotation);
                acc += w * (q * p + Vec3::from(b.translation));
            }
        }
        out.extend_from_slice(&acc.to_array());
    }
    out
}

/// How long after a reconnection an avatar held from before may take to send a frame
/// before it counts as gone (it left while the link was down): a keyframe comes within
/// a tick or two of subscribing.
const STALE_AFTER: Duration = Duration::from_secs(3);

/// How long an avatar's frames may go undecodable (their reference missing, after a
/// refused frame) before the viewer connects again, which restarts every stream from a
/// keyframe: the `resync` it sends at once (and again each second) brings a keyframe
/// within a tick or two, so this is for servers that do not know `resync`.
const OUT_OF_STEP: Duration = Duration::from_secs(3);

/// The network side: one connection at a time, for as long as the viewer lives.
struct Link {
    url: String,
    token: Option<String>,
    avatars: Option<Vec<String>>,
    state: Arc<Mutex<State>>,
}

impl Link {
    async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut decoding = Decoding::default();
        let mut backoff = Backoff::default();
        loop {
            let connecting = Client::connect_retrying(
                &self.url,
                Role::Viewer,
                self.token.clone(),
                None,
                &mut backoff,
                |e, _| lock(&self.state).error = Some(e.to_string()),
            );
            let client = tokio::select! {
                c = connecting => c,
                _ = stop.wait_for(|s| *s) => return,
            };
            let mut client = match client {
                Ok(c) => c,
                Err(e) => return self.refused(&e),
            };
            let lost = self.stream(&mut client, &mut decoding, &mut stop).await;
            lock(&self.state).connected = false;
            match lost {
                None => {
                    client.close().await;
                    return;
                }
                Some(e) if e.is_final() => return self.refused(&e),
                Some(e) => {
                    lock(&self.state).error = Some(e.to_string());
                    // a server that welcomes and then fails at once is not hammered
                    tokio::select! {
                        _ = tokio::time::sleep(backoff.next_delay()) => {}
                        _ = stop.wait_for(|s| *s) => return,
                    }
                }
            }
        }
    }

    /// Says what was wrong with a message (in `error` and `errors()`), which is skipped.
    fn report(&self, e: &ClientError) {
        let mut s = lock(&self.state);
        let text = e.to_string();
        if s.errors.len() < MAX_ERRORS {
            s.errors.push(text.clone());
        } else {
            s.errors_dropped += 1;
        }
        s.error = Some(text);
    }

    fn refused(&self, e: &ClientError) {
        let mut s = lock(&self.state);
        s.refused = Some(e.to_string());
        s.connected = false;
    }

    /// Streams on `client` until the link fails (its error) or the viewer stops (None).
    async fn stream(
        &self,
        client: &mut Client,
        decoding: &mut Decoding,
        stop: &mut watch::Receiver<bool>,
    ) -> Option<ClientError> {
        let subscribe = ClientMessage::Subscribe(SubscribeMessage {
            avatars: self.avatars.clone(),
            // the body is posed by the bones every codec frame carries
            pose: false,
            compact: true,
            have: Some(decoding.held_assets()).filter(|h| !h.is_empty()),
            ..SubscribeMessage::default()
        });
        if let Err(e) = client.send(&subscribe).await {
            return Some(e);
        }
        // a new connection starts every stream again from a keyframe
        decoding.restart();
        // the avatars held from the last connection: those that send no frame within
        // STALE_AFTER left while the link was down (no `gone` came for them; one that
        // is idle, its performer quiet, still sends a keyframe to a new subscriber)
        let mut stale: BTreeSet<String> = {
            let mut s = lock(&self.state);
            s.connected = true;
            s.connections += 1;
            s.tick_hz = client.tick_hz;
            s.error = None;
            s.avatars.keys().cloned().collect()
        };
        let stale_at = tokio::time::Instant::now() + STALE_AFTER;
        loop {
            let m = tokio::select! {
                m = client.next() => m,
                _ = stop.wait_for(|s| *s) => return None,
                _ = tokio::time::sleep_until(stale_at), if !stale.is_empty() => {
                    let mut s = lock(&self.state);
                    for id in std::mem::take(&mut stale) {
                        s.avatars.remove(&id);
                        s.updated.remove(&id);
                        s.gone.insert(id);
                    }
                    continue;
                }
            };
            let m = match m {
                Ok(m) => m,
                // a message that does not parse: said, skipped, the link kept
                Err(e @ (ClientError::Protocol(_) | ClientError::Stream(_))) => {
                    self.report(&e);
                    continue;
                }
                Err(e) => return Some(e),
            };
            let framed = match &m {
                ServerMessage::Frame(f) => Some(f.avatar.clone()),
                _ => None,
            };
            let (asset, gone) = match &m {
                ServerMessage::Asset(a) => (
                    Some((
                        a.hash.clone(),
                        a.garment.clone(),
                        a.body().map_err(|e| e.to_string()),
                    )),
                    None,
                ),
                ServerMessage::Gone { avatar } => (None, Some(avatar.clone())),
                _ => (None, None),
            };
            let applied = decoding.apply(m);
            // an avatar whose frame was refused (corrupt, or its reference missing)
            // asks for a keyframe; one still out of step after OUT_OF_STEP (a server
            // that does not know `resync`) makes the viewer connect again
            if let Some(r) = decoding.resync()
                && let Err(e) = client.send(&r).await
            {
                return Some(e);
            }
            if let Some(id) = &framed
                && let Some(since) = decoding.out_of_step_since(id)
                && since.elapsed() >= OUT_OF_STEP
            {
                return Some(ClientError::Stream(format!(
                    "avatar {id}: out of step for {:.1?} (a frame of its was refused, and no keyframe came); connecting again to resync",
                    since.elapsed()
                )));
            }
            match applied {
                Ok(Some(id)) => {
                    stale.remove(&id);
                    self.frame(decoding, &id)
                }
                Ok(None) => {}
                // "closed" precedes the close frame, which says it again with its code
                Err(ClientError::Refused { code, .. }) if code == "closed" => continue,
                // a frame or asset that does not decode, an error the server reports (a
                // refusal that ends the link comes with its close code): said, skipped;
                // an avatar whose frame was refused streams on from the keyframe asked
                // for above
                Err(e) => {
                    self.report(&e);
                    continue;
                }
            }
            if let Some((hash, garment, body)) = asset
                && let Some(setup) = decoding.setup(&hash)
            {
                let a = Asset {
                    garment,
                    setup: Arc::clone(setup),
                    body,
                };
                lock(&self.state).assets.insert(hash, Arc::new(a));
            }
            if let Some(id) = gone {
                let mut s = lock(&self.state);
                if s.avatars.remove(&id).is_some() {
                    s.updated.remove(&id);
                    s.gone.insert(id);
                }
            }
        }
    }

    /// Copies avatar `id`'s newly decoded frame into the shared state (its buffers
    /// reused from frame to frame).
    fn frame(&self, decoding: &Decoding, id: &str) {
        let Some(v) = decoding.avatars.get(id) else {
            return;
        };
        let Some(f) = &v.last else {
            return;
        };
        let bones = decoding.setup(&v.asset).map_or(0, |s| s.bones as usize);
        let mut s = lock(&self.state);
        let a = s.avatars.entry(id.to_owned()).or_default();
        a.seq = f.seq;
        a.timestamp = f.timestamp;
        a.pose_timestamp = f.pose_timestamp;
        a.world = f.world;
        if !a.assets.iter().map(String::as_str).eq(v.assets()) {
            a.assets = v.assets().map(str::to_owned).collect();
        }
        a.garments.resize_with(1 + v.layers.len(), Vec::new);
        for (to, from) in a.garments.iter_mut().zip(v.garments()) {
            to.clear();
            to.extend_from_slice(from);
        }
        a.bones.resize(bones, BoneTransform::IDENTITY);
        // the bones were decoded with the frame: this cannot fail for a decoded one
        let _ = v.bones(&mut a.bones);
        a.frames = v.frames;
        s.gone.remove(id);
        s.updated.insert(id.to_owned());
    }
}
