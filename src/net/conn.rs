//! One WebSocket connection: the `hello` handshake, a publisher's poses, body frames,
//! calibrate and wear messages, a viewer's subscription and its bounded share of the
//! frame fan-out, limits and close codes.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::IntoResponse;
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::broadcast;

use super::bodies::BodyChoice;
use super::driven::Driven;
use super::out::{Out, close};
use super::owners::{Driver, Taken};
use super::peer::Peer;
use super::watch::Subscription;
use super::{Shared, Source};
use crate::engine::{
    Applied, EngineError, SensorState, TickOutput, apply_joints, apply_pose_message,
};
use crate::mocap::parse_body_frame;
use crate::protocol::{
    AVATAR_ID_RULE, CalibrateMessage, ClientMessage, HelloMessage, PROTOCOL_VERSION, ResyncMessage,
    Role, SENSOR_NAME_RULE, ServerMessage, SubscribeMessage, WearMessage, valid_avatar_id,
    valid_sensor_name, wear_outfit,
};

/// Garment choices (`wear`) that may wait at once for avatars without a pose yet.
const MAX_PENDING_WEAR: usize = 4096;

/// Calibrations that may wait at once for avatars published by other connections
/// (each for at most [`super::CALIBRATION_WAIT`]).
const MAX_PENDING_CALIBRATIONS: usize = 1024;

/// Whether a hello's token is the configured one (`None` configured: no token
/// opens that role). The bytes are compared in time that depends only on their
/// length, so response timing does not reveal how much of a guess was right.
fn token_matches(given: Option<&str>, expected: Option<&str>) -> bool {
    match (given, expected) {
        (Some(g), Some(e)) if g.len() == e.len() => {
            g.bytes().zip(e.bytes()).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0
        }
        _ => false,
    }
}

/// Counts one open WebSocket connection in [`Shared`]'s metrics for as long as it lives.
struct Open(Arc<Shared>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.metrics.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

pub(super) async fn ws_upgrade(
    ws: WebSocketUpgrade,
    State(s): State<Arc<Shared>>,
    axum::extract::ConnectInfo(from): axum::extract::ConnectInfo<SocketAddr>,
    headers: axum::http::HeaderMap,
    http_place: Option<axum::Extension<super::http::HttpPlace>>,
) -> axum::response::Response {
    let peer = Peer::new(from, &headers, &s.config.trusted_proxies);
    // a server shutting down takes no one new (clients that were just closed with
    // 1001 come straight back, and would be welcomed by a server about to exit)
    if *s.closing.borrow() {
        return (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "server shutting down\n",
        )
            .into_response();
    }
    // at the door, before the upgrade allocates the connection's buffers
    let open = &s.metrics.connections;
    let full = |limit: String| {
        s.metrics
            .connections_refused
            .fetch_add(1, Ordering::Relaxed);
        let why = format!("connection limit of {limit} reached; try again later\n");
        (axum::http::StatusCode::SERVICE_UNAVAILABLE, why).into_response()
    };
    if open.fetch_add(1, Ordering::Relaxed) as usize >= s.config.max_connections {
        open.fetch_sub(1, Ordering::Relaxed);
        return full(s.config.max_connections.to_string());
    }
    let guard = Open(Arc::clone(&s));
    let Some(place) = s
        .per_address
        .take(peer.host(), s.config.max_connections_per_address)
    else {
        drop(guard);
        return full(format!(
            "{} per address",
            s.config.max_connections_per_address
        ));
    };
    // from here the connection holds WebSocket places, not an HTTP one
    if let Some(axum::Extension(http)) = http_place {
        http.give_back();
    }
    let limit = s.config.max_message_bytes;
    ws.max_message_size(limit)
        .max_frame_size(limit)
        .on_upgrade(move |socket| async move {
            connection(socket, s, peer).await;
            drop((place, guard));
        })
        .into_response()
}

fn parse(msg: &Message) -> Option<Result<ClientMessage, String>> {
    match msg {
        Message::Binary(b) => Some(ClientMessage::from_msgpack(b).map_err(|e| e.to_string())),
        Message::Text(t) => Some(ClientMessage::from_json(t.as_str()).map_err(|e| e.to_string())),
        _ => None,
    }
}

/// One connection from `peer`, logged when it is welcomed and when it ends (with why),
/// unless its address or the server is over the connection log's budget
/// ([`super::connlog`]).
async fn connection(socket: WebSocket, s: Arc<Shared>, peer: Peer) {
    let logged = s.connection_log.admit(peer.host(), Instant::now());
    if !logged {
        s.metrics
            .connections_not_logged
            .fetch_add(1, Ordering::Relaxed);
    }
    let (sink, stream) = socket.split();
    let mut out = Out {
        sink,
        stall: peer_timeout(&s),
        shared: Arc::clone(&s),
        timed_out: false,
        failed: false,
        closed_with: None,
        left: false,
        json: false,
        peer,
        refused: 0,
        logged,
    };
    let mut role = None;
    session(&mut out, stream, Arc::clone(&s), peer, &mut role).await;
    if out.timed_out {
        s.metrics.peers_timed_out.fetch_add(1, Ordering::Relaxed);
    }
    if !logged {
        return;
    }
    let why = match &out.closed_with {
        Some((code, reason)) => format!("closed by us ({code}): {reason}"),
        None if out.timed_out => "took none of our bytes for peer_timeout".to_string(),
        None if out.left || out.failed => "the peer left without a close".to_string(),
        None => "closed by the peer".to_string(),
    };
    let why = match out.refused {
        0 => why,
        n => format!("{why} ({n} of its messages refused)"),
    };
    // (a close reason of ours may quote the peer's bytes)
    let why = crate::protocol::Escaped(why);
    match role {
        Some(role) => tracing::info!(%peer, ?role, %why, "disconnected"),
        None => tracing::info!(%peer, %why, "not welcomed"),
    }
}

/// The server's `peer_timeout` (0.1 s to a day: checked at start).
fn peer_timeout(s: &Shared) -> Duration {
    Duration::from_secs_f32(s.config.peer_timeout)
}

/// The connection's life after the upgrade: `hello`, then its role's messages until
/// one side ends it. Sets `welcomed` to the role once welcomed.
async fn session(
    out: &mut Out,
    mut stream: futures_util::stream::SplitStream<WebSocket>,
    s: Arc<Shared>,
    peer: Peer,
    welcomed: &mut Option<Role>,
) {
    let peer_timeout = peer_timeout(&s);
    let m = &s.metrics;
    // hello first
    let hello = tokio::time::timeout(
        Duration::from_secs_f32(s.config.hello_timeout),
        stream.next(),
    )
    .await;
    if let Ok(Some(Ok(msg))) = &hello {
        out.json = matches!(msg, Message::Text(_));
    }
    let (role, sensor) = match hello {
        Ok(Some(Ok(msg))) => match parse(&msg) {
            Some(Ok(ClientMessage::Hello(HelloMessage {
                version,
                role,
                token,
                sensor,
            }))) => {
                if version != PROTOCOL_VERSION {
                    return out.close(close::PROTOCOL, &format!("protocol version {version} not supported (server speaks {PROTOCOL_VERSION})")).await;
                }
                if let Some(name) = &sensor
                    && !valid_sensor_name(name)
                {
                    m.bad_messages.fetch_add(1, Ordering::Relaxed);
                    return out.close(close::PROTOCOL, SENSOR_NAME_RULE).await;
                }
                let tokens = match s.tokens.read() {
                    Ok(t) => t.clone(),
                    Err(poisoned) => poisoned.into_inner().clone(),
                };
                let need = |t: &Option<String>| {
                    s.config.open || token_matches(token.as_deref(), t.as_deref())
                };
                let ok = match role {
                    Role::Publisher => need(&tokens.publisher),
                    Role::Viewer => need(&tokens.viewer),
                    Role::Both => need(&tokens.publisher) && need(&tokens.viewer),
                };
                if !ok {
                    return out
                        .close(close::UNAUTHORIZED, "wrong or missing token")
                        .await;
                }
                (role, sensor)
            }
            Some(Ok(_)) => {
                return out
                    .close(close::PROTOCOL, "the first message must be hello")
                    .await;
            }
            Some(Err(e)) => {
                m.bad_messages.fetch_add(1, Ordering::Relaxed);
                return out.close(close::PROTOCOL, &format!("bad hello: {e}")).await;
            }
            None => {
                return out
                    .close(close::PROTOCOL, "the first message must be hello")
                    .await;
            }
        },
        Ok(Some(Err(e))) => return out.read_failed(e).await,
        Ok(None) => return,
        Err(_) => return out.close(close::POLICY, "no hello in time").await,
    };
    let publisher = matches!(role, Role::Publisher | Role::Both);
    let viewer = matches!(role, Role::Viewer | Role::Both);
    let counter = if viewer { &m.viewers } else { &m.publishers };
    if viewer && counter.fetch_add(1, Ordering::Relaxed) as usize >= s.config.max_viewers {
        counter.fetch_sub(1, Ordering::Relaxed);
        return out.close(close::TRY_LATER, "viewer limit reached").await;
    } else if !viewer {
        counter.fetch_add(1, Ordering::Relaxed);
    }
    if !out
        .send(&ServerMessage::Welcome {
            version: PROTOCOL_VERSION,
            tick_hz: s.config.engine.tick_hz,
            assets: if viewer {
                s.asset_hashes.clone()
            } else {
                Vec::new()
            },
        })
        .await
    {
        counter.fetch_sub(1, Ordering::Relaxed);
        return;
    }
    *welcomed = Some(role);
    if out.logged {
        tracing::info!(%peer, ?role, sensor = sensor.as_deref().unwrap_or("-"), "connected");
    }
    // token bucket of the message rate limit
    let rate = f64::from(s.config.max_messages_per_second);
    let mut tokens = rate;
    let mut refilled = Instant::now();
    let mut closing = s.closing.subscribe();
    let mut rx: Option<broadcast::Receiver<Arc<TickOutput>>> = None;
    let mut subscription: Option<Subscription> = None;
    let mut synced: HashSet<String> = HashSet::new();
    // per asset, when a `resync` last had it sent again
    let mut resent: HashMap<String, Instant> = HashMap::new();
    // per avatar, the number of the last frame sent to this viewer
    let mut sent_seq: HashMap<String, u32> = HashMap::new();
    // the avatars this publisher drives; silent ones give way to new ones (Kinect body
    // ids change with every visitor)
    let mut inputs: Driven<String> = Driven::new(s.config.engine.remove_after);
    // this connection as a driver of avatars (another connection's avatar is refused)
    let driver = Driver::Connection(s.next_connection.fetch_add(1, Ordering::Relaxed));
    // a Kinect bridge is one sensor: its floor and its origin are its bodies' too
    let mut seen_by = SensorState::at_stage(s.config.kinect_stage);
    let mut chosen = BodyChoice::default();
    // when a body frame's body was last refused, for want of room or as unusable (told
    // once a second)
    let mut body_refused: Option<Instant> = None;
    // pings every third of peer_timeout; a peer heard from (any message, pongs too)
    // less recently than peer_timeout is gone
    let mut heard = Instant::now();
    let mut ping = tokio::time::interval(peer_timeout / 3);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ping.reset();
    loop {
        tokio::select! {
            _ = ping.tick() => {
                if heard.elapsed() >= peer_timeout {
                    out.timed_out = true;
                    let why = format!("nothing heard for {:.1} s, not even a pong", peer_timeout.as_secs_f32());
                    out.close(close::POLICY, &why).await;
                    break;
                }
                if !out.message(Message::Ping(Bytes::new())).await { break; }
            }
            // (also when shutdown began before this connection subscribed)
            _ = async { drop(closing.wait_for(|&c| c).await) } => {
                out.close(1001, "server shutting down").await;
                break;
            }
            incoming = stream.next() => {
                let msg = match incoming {
                    Some(Ok(msg)) => msg,
                    Some(Err(e)) => {
                        out.read_failed(e).await;
                        break;
                    }
                    None => break,
                };
                if matches!(msg, Message::Close(_)) {
                    break;
                }
                heard = Instant::now();
                tokens = (tokens + refilled.elapsed().as_secs_f64() * rate).min(rate);
                refilled = Instant::now();
                tokens -= 1.0;
                if tokens < 0.0 {
                    m.bad_messages.fetch_add(1, Ordering::Relaxed);
                    out.close(close::POLICY, "message rate limit exceeded").await;
                    break;
                }
                // Kinect bridges' body frames: {"bodies": [...]} as JSON text, no `type`
                if let Message::Text(t) = &msg
                    && publisher
                    && !t.contains("\"type\"")
                    && t.contains("\"bodies\"")
                {
                    let frame = serde_json::from_str::<serde_json::Value>(t.as_str()).map_err(|e| e.to_string()).and_then(|v| parse_body_frame(&v, None).map_err(|e| e.to_string()));
                    match frame {
                        Ok(bodies) => {
                            let bodies = chosen.choose(bodies, s.config.kinect_bodies, s.config.kinect_max_distance);
                            let now = s.start.elapsed().as_secs_f64();
                            let mut gone = false;
                            for b in bodies {
                                let avatar = match &sensor {
                                    Some(name) => format!("kinect-{name}-{}", b.id),
                                    None => format!("kinect-{}", b.id),
                                };
                                let refusal = if !valid_avatar_id(&avatar) {
                                    Some(("bad_avatar_id", format!("body {:?}: its avatar id {avatar:?} is refused: {AVATAR_ID_RULE} (a shorter sensor name or body id)", b.id)))
                                } else if !inputs.admit(&avatar, now, s.config.max_avatars_per_publisher) {
                                    Some(("too_many_avatars", format!("body {}: a publisher may drive {} avatars", b.id, s.config.max_avatars_per_publisher)))
                                } else if !s.room_for(&avatar) {
                                    Some(("server_full", format!("body {}: the server drives at most {} avatars", b.id, s.config.engine.max_avatars)))
                                } else if let Err(t) = s.claim(&avatar, driver, now) {
                                    Some(("avatar_taken", taken_message(&avatar, &t)))
                                } else {
                                    None
                                };
                                // else the body is posed; one that cannot be (fewer than
                                // 3 tracked joints, or no pelvis at first: a tracked body
                                // always has its spine and hips) is a bridge's mistake
                                let refusal = refusal.or_else(|| {
                                    let mut state = inputs.state(&avatar);
                                    match apply_joints(&b.joints, b.floor, &mut seen_by, &mut state, &s.retargeter, s.config.engine.filter.as_ref(), now) {
                                        Ok(pose) => {
                                            s.pose_in(Source::Kinect, avatar.clone(), pose, (now, now), true);
                                            inputs.store(avatar, state, now);
                                            None
                                        }
                                        Err(e) => Some(("bad_pose", format!("body {}: {e}", b.id))),
                                    }
                                });
                                if let Some((code, what)) = refusal {
                                    m.bad_messages.fetch_add(1, Ordering::Relaxed);
                                    if body_refused.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                                        body_refused = Some(Instant::now());
                                        if !out.send(&ServerMessage::error(code, what)).await { gone = true; break; }
                                    }
                                }
                            }
                            if gone { break; }
                        }
                        Err(e) => {
                            m.bad_messages.fetch_add(1, Ordering::Relaxed);
                            if !out.send(&ServerMessage::error("bad_body_frame", e)).await { break; }
                        }
                    }
                    continue;
                }
                match parse(&msg) {
                    None => {}
                    Some(Err(e)) => {
                        m.bad_messages.fetch_add(1, Ordering::Relaxed);
                        if !out.send(&ServerMessage::error("bad_message", e)).await { break; }
                    }
                    Some(Ok(ClientMessage::Pose(p))) if publisher => {
                        let now = s.start.elapsed().as_secs_f64();
                        if !inputs.admit(&p.avatar, now, s.config.max_avatars_per_publisher) {
                            m.bad_messages.fetch_add(1, Ordering::Relaxed);
                            if !out.send(&ServerMessage::error("too_many_avatars", format!("a publisher may drive {} avatars", s.config.max_avatars_per_publisher))).await { break; }
                            continue;
                        }
                        // asked at every pose, not only at an avatar's first: when several
                        // connections take the last place between two ticks, the engine keeps
                        // one and the others learn it here at their next pose
                        if !s.room_for(&p.avatar) {
                            m.bad_messages.fetch_add(1, Ordering::Relaxed);
                            if !out.send(&ServerMessage::error("server_full", format!("the server drives at most {} avatars", s.config.engine.max_avatars))).await { break; }
                            continue;
                        }
                        if let Err(t) = s.claim(&p.avatar, driver, now) {
                            m.bad_messages.fetch_add(1, Ordering::Relaxed);
                            if !out.send(&ServerMessage::error("avatar_taken", taken_message(&p.avatar, &t))).await { break; }
                            continue;
                        }
                        let mut state = inputs.state(&p.avatar);
                        match apply_pose_message(&p, &mut seen_by, &mut state, &s.retargeter, s.config.engine.filter.as_ref()) {
                            Ok(Applied { mut pose, held }) => {
                                if !held.is_empty() {
                                    m.bad_messages.fetch_add(1, Ordering::Relaxed);
                                    let mut names = held.iter().take(8).map(String::as_str).collect::<Vec<_>>().join(", ");
                                    if held.len() > 8 { names += &format!(" and {} more", held.len() - 8); }
                                    let what = format!("held at their last values (NaN, infinite, out of range or not a rotation): {names}");
                                    if !out.send(&ServerMessage::error("joints_held", what)).await { break; }
                                }
                                if s.calibrate.lock().is_ok_and(|mut c| c.remove(&p.avatar).is_some()) {
                                    state.calibrate();
                                    pose = state.calibrated(&state.pose);
                                }
                                s.pose_in(Source::WebSocket, p.avatar.clone(), pose, (p.timestamp, now), true);
                                inputs.store(p.avatar, state, now);
                            }
                            Err(e) => {
                                m.bad_messages.fetch_add(1, Ordering::Relaxed);
                                if !out.send(&ServerMessage::error("bad_pose", e.to_string())).await { break; }
                            }
                        }
                    }
                    Some(Ok(ClientMessage::Calibrate(CalibrateMessage { avatar }))) if publisher => {
                        match inputs.get_mut(&avatar) {
                            Some(state) => state.calibrate(),
                            None if valid_avatar_id(&avatar) => {
                                // published elsewhere: its connection applies it next pose;
                                // the table is bounded, and a request it cannot take is
                                // refused by name rather than dropped
                                let taken = s.calibrate.lock().is_ok_and(|mut c| {
                                    c.retain(|_, asked| asked.elapsed() < super::CALIBRATION_WAIT);
                                    let room = c.len() < MAX_PENDING_CALIBRATIONS || c.contains_key(&avatar);
                                    if room { c.insert(avatar, Instant::now()); }
                                    room
                                });
                                if !taken {
                                    m.bad_messages.fetch_add(1, Ordering::Relaxed);
                                    let what = format!("{MAX_PENDING_CALIBRATIONS} calibrations already wait for their avatars' next pose");
                                    if !out.send(&ServerMessage::error("too_many_pending", what)).await { break; }
                                }
                            }
                            None => {
                                m.bad_messages.fetch_add(1, Ordering::Relaxed);
                                if !out.send(&ServerMessage::error("bad_message", AVATAR_ID_RULE)).await { break; }
                            }
                        }
                    }
                    Some(Ok(ClientMessage::Wear(WearMessage { avatar, garment, garments }))) if publisher => {
                        let outfit = wear_outfit(garment, garments)
                            .map_err(EngineError::BadOutfit)
                            .and_then(|o| s.wardrobe.resolve(&o).map(|_| o));
                        let outfit = match outfit {
                            Ok(o) => o,
                            Err(e) => {
                                m.bad_messages.fetch_add(1, Ordering::Relaxed);
                                let code = if matches!(e, EngineError::UnknownGarment(..)) { "unknown_garment" } else { "bad_outfit" };
                                if !out.send(&ServerMessage::error(code, e.to_string())).await { break; }
                                continue;
                            }
                        };
                        if !valid_avatar_id(&avatar) {
                            m.bad_messages.fetch_add(1, Ordering::Relaxed);
                            if !out.send(&ServerMessage::error("bad_message", AVATAR_ID_RULE)).await { break; }
                        } else {
                            // choices wait for their avatar's first pose; the table of
                            // waiting choices is bounded, and a choice it cannot take is
                            // refused by name rather than dropped
                            let taken = s.inbox.lock().is_ok_and(|mut inbox| {
                                let room = inbox.wear.len() < MAX_PENDING_WEAR || inbox.wear.contains_key(&avatar);
                                if room { inbox.wear.insert(avatar, outfit); }
                                room
                            });
                            if !taken {
                                m.bad_messages.fetch_add(1, Ordering::Relaxed);
                                let what = format!("{MAX_PENDING_WEAR} garment choices already wait for avatars that have not published a pose");
                                if !out.send(&ServerMessage::error("too_many_pending", what)).await { break; }
                            }
                        }
                    }
                    Some(Ok(ClientMessage::Subscribe(SubscribeMessage { avatars, pose, compact, shard, have }))) if viewer => {
                        if let Err(what) = crate::protocol::check_shard(shard).and_then(|()| crate::protocol::check_have(have.as_deref())) {
                            m.bad_messages.fetch_add(1, Ordering::Relaxed);
                            if !out.send(&ServerMessage::error("bad_subscription", what)).await { break; }
                            continue;
                        }
                        // a list longer than the server's avatar limit names avatars that
                        // cannot all exist, and would cost ~100 bytes of tables per name
                        if let Some(list) = &avatars && list.len() > s.config.engine.max_avatars {
                            m.bad_messages.fetch_add(1, Ordering::Relaxed);
                            let what = format!("a subscription names at most {} avatars (the server's limit), this one {}; subscribe to all by leaving `avatars` out", s.config.engine.max_avatars, list.len());
                            if !out.send(&ServerMessage::error("bad_subscription", what)).await { break; }
                            continue;
                        }
                        if rx.is_none() {
                            let mut ok = true;
                            // (but those it says it holds)
                            let held = |hash: &String| have.as_ref().is_some_and(|h| h.contains(hash));
                            for (asset, hash) in s.assets.iter().zip(&s.asset_hashes) {
                                if held(hash) { continue; }
                                if !out.message(Message::Binary(asset.clone())).await { ok = false; break; }
                            }
                            if !ok { break; }
                            rx = Some(s.frames.subscribe());
                        }
                        let sub = Subscription::new(&s, avatars.map(|a| a.into_iter().collect()), pose, compact, shard);
                        // avatars it still watches stay in step (no keyframe); those it
                        // dropped start again with a keyframe should it come back, and the
                        // frames it did not want are not counted as dropped
                        synced.retain(|a| sub.wants(a));
                        sent_seq.retain(|a, _| sub.wants(a));
                        // keyframes of the avatars it lacks: those streaming would show
                        // it by their next frame, the idle ones by none (a performer who
                        // is quiet stays where the other viewers see them)
                        if let Ok(mut inbox) = s.inbox.lock() {
                            match sub.named() {
                                Some(named) => inbox.keyframes.extend(named.filter(|a| !synced.contains(*a)).cloned()),
                                None => inbox.idle_keyframes = true,
                            }
                        }
                        subscription = Some(sub);
                    }
                    Some(Ok(ClientMessage::Resync(resync))) if viewer => {
                        let unknown = resync.assets.iter().find(|h| !s.asset_hashes.contains(h));
                        let checked = crate::protocol::check_resync(&resync, s.config.engine.max_avatars)
                            .and_then(|()| unknown.map_or(Ok(()), |h| Err(format!("resync of asset {h:?}: this server has no such asset (its assets are in `welcome`)"))));
                        if let Err(what) = checked {
                            m.bad_messages.fetch_add(1, Ordering::Relaxed);
                            if !out.send(&ServerMessage::error("bad_resync", what)).await { break; }
                            continue;
                        }
                        let ResyncMessage { avatars, assets } = resync;
                        // the assets it lacks, again (before subscribing they come with
                        // the subscription), each at most once per ASSET_AGAIN_SECONDS
                        let mut ok = true;
                        for hash in assets.iter().filter(|_| rx.is_some()) {
                            let now = Instant::now();
                            if resent.get(hash).is_some_and(|t| now.duration_since(*t).as_secs_f64() < crate::protocol::ASSET_AGAIN_SECONDS) {
                                continue;
                            }
                            let Some(i) = s.asset_hashes.iter().position(|h| h == hash) else { continue };
                            resent.insert(hash.clone(), now);
                            m.assets_resent.fetch_add(1, Ordering::Relaxed);
                            if !out.message(Message::Binary(s.assets[i].clone())).await { ok = false; break; }
                        }
                        if !ok { break; }
                        // out of step: each starts again from a keyframe with its next
                        // frame (the tick below sends it one, or asks the engine for one)
                        for a in &avatars {
                            if synced.remove(a) {
                                m.resyncs.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        // asked of the engine now (an idle avatar sends no frame that
                        // would ask it)
                        if let Ok(mut inbox) = s.inbox.lock() {
                            inbox.keyframes.extend(avatars.into_iter().filter(|a| subscription.as_ref().is_some_and(|sub| sub.wants(a))));
                        }
                    }
                    Some(Ok(ClientMessage::Ping)) => {
                        let answered = out.send(&ServerMessage::Pong).await;
                        if !answered { break; }
                    }
                    Some(Ok(other)) => {
                        m.bad_messages.fetch_add(1, Ordering::Relaxed);
                        let what = match other { ClientMessage::Hello(_) => "hello sent twice", ClientMessage::Pose(_) | ClientMessage::Calibrate(_) | ClientMessage::Wear(_) => "pose, calibrate or wear from a viewer-only connection", ClientMessage::Subscribe(_) | ClientMessage::Resync(_) => "subscribe or resync from a publisher-only connection", ClientMessage::Ping => "ping" };
                        if !out.send(&ServerMessage::error("unexpected", what)).await { break; }
                    }
                }
            }
            tick = async { match rx.as_mut() { Some(r) => r.recv().await, None => std::future::pending().await } } => {
                match tick {
                    Ok(ticked) => {
                        let wanted = |a: &str| subscription.as_ref().is_some_and(|sub| sub.wants(a));
                        let pose = subscription.as_ref().is_none_or(|sub| sub.pose);
                        let compact = subscription.as_ref().is_some_and(|sub| sub.compact);
                        let mut failed = false;
                        for f in ticked.frames.iter().filter(|f| wanted(&f.avatar)) {
                            // with or without the body pose, map or compact, as subscribed
                            let (delta, key) = f.messages(pose, compact);
                            // in step: the delta, unless the stream (re)starts with a
                            // keyframe (first frame, or the avatar changed garment)
                            let bytes = if synced.contains(&f.avatar) && delta.is_some() {
                                delta.clone()
                            } else if let Some(k) = key {
                                synced.insert(f.avatar.clone());
                                Some(k.clone())
                            } else {
                                if let Ok(mut inbox) = s.inbox.lock() { inbox.keyframes.insert(f.avatar.clone()); }
                                None
                            };
                            if let Some(b) = bytes {
                                // frames of this avatar the viewer never got (it fell
                                // behind, or waited for a keyframe): the gap in its numbers
                                if let Some(prev) = sent_seq.insert(f.avatar.clone(), f.frame)
                                    && f.frame > prev.wrapping_add(1)
                                    && f.frame - prev < 1 << 30
                                {
                                    m.frames_dropped.fetch_add(u64::from(f.frame - prev - 1), Ordering::Relaxed);
                                }
                                m.bytes_out.fetch_add(b.len() as u64, Ordering::Relaxed);
                                m.frames_out.fetch_add(1, Ordering::Relaxed);
                                // queued; written out together below (one write per group, not per frame)
                                if !out.feed(Message::Binary(b)).await { failed = true; break; }
                            }
                        }
                        if !failed && !out.flush().await { failed = true; }
                        for g in &ticked.gone {
                            synced.remove(g);
                            sent_seq.remove(g);
                            if wanted(g) && !out.send(&ServerMessage::Gone { avatar: g.clone() }).await { failed = true; }
                        }
                        if failed { break; }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        // fell behind: the missed deltas are gone; resync every avatar
                        // (the frames it missed are counted when each avatar resumes)
                        synced.clear();
                    }
                    Err(broadcast::error::RecvError::Closed) => {
                        out.close(1001, "server shutting down").await;
                        break;
                    }
                }
            }
        }
    }
    // its avatars are free for another source at once
    if let Ok(mut o) = s.owners.lock() {
        o.release(driver);
    }
    counter.fetch_sub(1, Ordering::Relaxed);
}

/// Why a pose of `avatar` was refused: another source drives it.
fn taken_message(avatar: &str, t: &Taken) -> String {
    let by = match t.by {
        Driver::Connection(_) => "another publisher connection".to_string(),
        Driver::Udp(a) => format!("the UDP sender {a}"),
    };
    format!(
        "avatar {avatar:?} is driven by {by}; it may be taken over after {:.1} s without its poses",
        t.free_in
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_match_exactly_and_a_missing_one_never_does() {
        assert!(token_matches(Some("pub-secret"), Some("pub-secret")));
        assert!(!token_matches(Some("pub-secreT"), Some("pub-secret")));
        assert!(!token_matches(Some("pub-secre"), Some("pub-secret")));
        assert!(!token_matches(Some(""), Some("pub-secret")));
        assert!(!token_matches(None, Some("pub-secret")));
        // no token configured: nothing opens the role (only `open = true` does)
        assert!(!token_matches(Some(""), None));
        assert!(!token_matches(None, None));
    }
}
