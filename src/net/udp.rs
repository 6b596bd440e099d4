//! The UDP inputs: VMC (OSC) senders and Xsens MVN streamers, each a listener whose
//! performers' poses go into the same inbox as WebSocket publishers'.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use ipnet::IpNet;

use super::driven::Driven;
use super::{ServerConfig, Shared, Source};
use crate::engine::{InputState, SensorState, apply_joints_then};
use crate::protocol::Escaped;

/// The UDP inputs, as [`super::Metrics::udp_refused`] counts them.
#[derive(Clone, Copy, Debug)]
pub(super) enum UdpInput {
    Vmc = 0,
    Mvn = 1,
}

impl UdpInput {
    /// What the logs call its listener.
    fn what(self) -> &'static str {
        match self {
            Self::Vmc => "VMC (OSC/UDP)",
            Self::Mvn => "Xsens MVN (UDP)",
        }
    }

    /// Its listener's address in `config` (`None`: off).
    fn bind(self, config: &ServerConfig) -> Option<SocketAddr> {
        match self {
            Self::Vmc => config.vmc_bind,
            Self::Mvn => config.mvn_bind,
        }
    }

    /// Its allow list in `config`, and that setting's name.
    fn allow(self, config: &ServerConfig) -> (&[IpNet], &'static str) {
        match self {
            Self::Vmc => (&config.vmc_allow, "vmc_allow"),
            Self::Mvn => (&config.mvn_allow, "mvn_allow"),
        }
    }
}

/// Whether a datagram from `from` may be read: `allow` is empty (any sender) or names
/// a network that holds it. An IPv4 sender reaching a dual-stack (`[::]`) listener
/// arrives as an IPv4-mapped IPv6 address, and is matched as the IPv4 address it is.
pub(super) fn allowed(allow: &[IpNet], from: IpAddr) -> bool {
    allow.is_empty() || super::settings::networks::holds(allow, from)
}

/// Whether a datagram from `from` to `input`'s listener is dropped unread, its sender
/// not on the allow list (counted, and logged at debug level).
fn refused(s: &Shared, input: UdpInput, from: SocketAddr) -> bool {
    let (allow, setting) = input.allow(&s.config);
    if allowed(allow, from.ip()) {
        return false;
    }
    s.metrics.udp_refused[input as usize].fetch_add(1, Ordering::Relaxed);
    tracing::debug!(%from, "{} datagram from a sender not in {setting}", input.what());
    true
}

/// Binds `input`'s UDP listener as `config` sets it (off: `None`) and hands its socket
/// to `serve`; its address, or `None` when off or when the address could not be had
/// (logged: the server runs on without that input, as it does without a sensor). A
/// listener bound beyond loopback with no allow list is logged as open to anyone who
/// can reach it.
pub(super) async fn listen_udp(
    config: &ServerConfig,
    input: UdpInput,
    serve: impl FnOnce(tokio::net::UdpSocket),
) -> std::io::Result<Option<SocketAddr>> {
    let ((allow, setting), what) = (input.allow(config), input.what());
    let Some(b) = input.bind(config) else {
        return Ok(None);
    };
    match tokio::net::UdpSocket::bind(b).await {
        Ok(sock) => {
            let a = sock.local_addr()?;
            serve(sock);
            if allow.is_empty() {
                tracing::info!(addr = %a, "{what} listener, any sender");
                if !a.ip().is_loopback() {
                    tracing::warn!(addr = %a, "{what} listener takes poses from anyone who can reach it (UDP carries no token): name the performers' machines in `{setting}`");
                }
            } else {
                let from: Vec<String> = allow.iter().map(ToString::to_string).collect();
                tracing::info!(addr = %a, from = %from.join(", "), "{what} listener");
            }
            Ok(Some(a))
        }
        Err(e) => {
            tracing::error!(addr = %b, error = %e, "{what} listener not started");
            Ok(None)
        }
    }
}

/// VMC over UDP: one performer per source address (or one configured avatar); poses go
/// into the same inbox as WebSocket publishers'. A `calibrate` message for a VMC avatar
/// (from any publisher connection) captures its next pose as rest pose and facing.
pub(super) async fn vmc_loop(sock: tokio::net::UdpSocket, s: Arc<Shared>) {
    let m = &s.metrics;
    // per sender: its VMC state, and what is remembered of its input; a sender silent
    // for longer than `remove_after` gives way to a new one (a VMC app that restarts
    // sends from a new port)
    let mut senders: Driven<SocketAddr, (crate::mocap::VmcPerformer, InputState)> =
        Driven::new(s.config.engine.remove_after);
    let mut buf = vec![0u8; 65536];
    let mut closing = s.closing.subscribe();
    // the avatar a sender drives: the configured one, else one per sender address
    let avatar_of = |from: SocketAddr| {
        s.config
            .vmc_avatar
            .clone()
            .unwrap_or_else(|| format!("vmc-{from}"))
    };
    loop {
        tokio::select! {
            _ = closing.changed() => break,
            r = sock.recv_from(&mut buf) => {
                let Ok((n, from)) = r else { continue };
                if refused(&s, UdpInput::Vmc, from) {
                    continue;
                }
                // a sender needs a place, and room for its avatar on the server
                let now = s.start.elapsed().as_secs_f64();
                let avatar = avatar_of(from);
                if !senders.admit(&from, now, s.config.engine.max_avatars) || !s.room_for(&avatar) {
                    m.bad_messages.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                // a fixed `vmc_avatar` driven by two senders: the first keeps it
                if let Err(t) = s.claim(&avatar, super::owners::Driver::Udp(from), now) {
                    m.bad_messages.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(%from, %avatar, by = ?t.by, "VMC packet dropped: its avatar is driven by another source");
                    continue;
                }
                if !senders.contains(&from) {
                    senders.store(from, Default::default(), now);
                }
                let Some((p, state)) = senders.get_mut(&from) else { continue };
                let frames_before = p.frames;
                match p.feed(&buf[..n]) {
                    Ok(0) => {}
                    Ok(_) => {
                        state.pose = p.pose;
                        if s.calibrate.lock().is_ok_and(|mut c| c.remove(&avatar).is_some()) {
                            state.calibrate();
                            tracing::info!(%avatar, "VMC performer calibrated");
                        }
                        let mut pose = crate::engine::vmc_pose(p, state, &s.retargeter);
                        if let Err(e) = pose.validate() {
                            m.bad_messages.fetch_add(1, Ordering::Relaxed);
                            tracing::debug!(%from, error = %Escaped(&e), "VMC pose refused");
                            continue;
                        }
                        // VMC senders send /VMC/Ext/T once a frame; from one that never
                        // does, every packet that moved the pose counts
                        let frame = p.frames == 0 || p.frames != frames_before;
                        let sent_at = p.time.unwrap_or(now);
                        senders.touch(&from, now);
                        s.pose_in(Source::Vmc, avatar, pose, (sent_at, now), frame);
                    }
                    Err(e @ crate::mocap::VmcError::Stale { .. }) => {
                        m.vmc_stale.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(%from, error = %Escaped(&e), "VMC packet dropped");
                    }
                    Err(e) => {
                        m.bad_messages.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(%from, error = %Escaped(&e), "VMC packet refused");
                    }
                }
            }
        }
    }
}

/// What the server keeps of one Xsens MVN character between its samples.
#[derive(Clone, Copy, Debug)]
struct MvnCharacter {
    /// The UDP port it comes from: a new one is a restarted streamer, whose samples
    /// count afresh.
    port: u16,
    stream: crate::mocap::MvnStream,
    sensor: SensorState,
    input: InputState,
    /// The segments' orientations when the performer was calibrated (in the T-pose):
    /// later ones are taken relative to them ([`crate::mocap::orient_segments`]).
    rest_orientations: Option<[Option<glam::Quat>; crate::mocap::MVN_SEGMENTS]>,
}

impl Default for MvnCharacter {
    fn default() -> Self {
        Self {
            port: 0,
            stream: Default::default(),
            sensor: SensorState::mvn(),
            input: InputState::default(),
            rest_orientations: None,
        }
    }
}

/// Xsens MVN network streaming over UDP: one performer per sending host and character
/// id (`mvn-<ip>-<character>`, so a streamer restarted on a new port drives the same
/// avatar); poses go into the same inbox as WebSocket publishers', through the Kinect
/// path's position retargeting, filtering and floor placement. Datagrams that are not
/// body poses (other message types, later datagrams of a split sample) are skipped
/// without counting as bad. A `calibrate` message for an MVN avatar captures its next
/// pose as rest pose and facing, and its segments' orientations, relative to which
/// later ones turn the bones about themselves and orient the hands, head and toes.
pub(super) async fn mvn_loop(sock: tokio::net::UdpSocket, s: Arc<Shared>) {
    let m = &s.metrics;
    let mut characters: Driven<(std::net::IpAddr, u8), MvnCharacter> =
        Driven::new(s.config.engine.remove_after);
    let mut buf = vec![0u8; 65536];
    let mut closing = s.closing.subscribe();
    loop {
        tokio::select! {
            _ = closing.changed() => break,
            r = sock.recv_from(&mut buf) => {
                let Ok((n, from)) = r else { continue };
                if refused(&s, UdpInput::Mvn, from) {
                    continue;
                }
                let sample = match crate::mocap::parse_mvn(&buf[..n]) {
                    Ok(crate::mocap::MvnDatagram::Sample(sample)) => sample,
                    Ok(crate::mocap::MvnDatagram::Other(_)) => continue,
                    Err(e) => {
                        m.bad_messages.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(%from, error = %Escaped(&e), "MVN datagram refused");
                        continue;
                    }
                };
                let key = (from.ip(), sample.character);
                let avatar = format!("mvn-{}-{}", from.ip(), sample.character);
                let now = s.start.elapsed().as_secs_f64();
                if !characters.admit(&key, now, s.config.engine.max_avatars) || !s.room_for(&avatar) {
                    m.bad_messages.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                let mut c = match characters.get_mut(&key) {
                    Some(c) if c.port == from.port() => *c,
                    // first seen, or its streamer restarted: its samples count afresh
                    found => {
                        let found = found.copied();
                        MvnCharacter {
                            port: from.port(),
                            input: found.map(|c| c.input).unwrap_or_default(),
                            rest_orientations: found.and_then(|c| c.rest_orientations),
                            ..MvnCharacter::default()
                        }
                    }
                };
                if let Err(e) = c.stream.accept(sample.sample) {
                    m.mvn_stale.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(%from, error = %Escaped(&e), "MVN datagram dropped");
                    continue;
                }
                let skeleton = s.retargeter.skeleton();
                let orient = |pose: &mut crate::skeleton::Pose| {
                    if let Some(rest) = &c.rest_orientations {
                        crate::mocap::orient_segments(pose, skeleton, &sample.orientations, rest);
                    }
                };
                let applied = apply_joints_then(&sample.joints(), Some(crate::mocap::Floor::LEVEL), &mut c.sensor, &mut c.input, &s.retargeter, s.config.engine.filter.as_ref(), now, orient);
                match applied {
                    Ok(mut pose) => {
                        if s.calibrate.lock().is_ok_and(|mut cal| cal.remove(&avatar).is_some()) {
                            c.input.calibrate();
                            c.rest_orientations = Some(sample.orientations);
                            pose = c.input.calibrated(&c.input.pose);
                            tracing::info!(%avatar, "MVN performer calibrated");
                        }
                        characters.store(key, c, now);
                        s.pose_in(Source::Mvn, avatar, pose, (now, now), true);
                    }
                    Err(e) => {
                        m.bad_messages.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(%from, error = %Escaped(&e), "MVN pose refused");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("address")
    }

    #[test]
    fn an_allow_list_takes_its_networks_and_an_empty_one_everyone() {
        assert!(allowed(&[], ip("203.0.113.9")));
        let lan: Vec<IpNet> = ["192.168.1.0/24", "10.0.0.7/32", "fd00::/8"]
            .iter()
            .map(|n| n.parse().expect("network"))
            .collect();
        assert!(allowed(&lan, ip("192.168.1.200")));
        assert!(allowed(&lan, ip("10.0.0.7")));
        assert!(allowed(&lan, ip("fd12::1")));
        assert!(!allowed(&lan, ip("192.168.2.1")));
        assert!(!allowed(&lan, ip("10.0.0.8")));
        assert!(!allowed(&lan, ip("2001:db8::1")));
        // an IPv4 performer reaching a listener on [::]
        assert!(allowed(&lan, ip("::ffff:192.168.1.5")));
        assert!(!allowed(&lan, ip("::ffff:192.168.9.5")));
    }
}
