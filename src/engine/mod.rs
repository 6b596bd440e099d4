//! The avatar engine: the latest pose of every live avatar, SOR synthesis for all of
//! them each tick (rayon), and each avatar's garment encoded **once** per tick into
//! ready-to-send protocol messages that every viewer shares. Pure compute: time comes in
//! as arguments (seconds), so tests run on a virtual clock.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use serde_bytes::ByteBuf;

mod codec_setup;
mod frame;
mod input;
mod outfit;
mod settings;

pub use codec_setup::codec_setup;
pub use frame::{AvatarFrame, Messages};
pub use input::{
    Applied, InputState, SensorState, apply_joints, apply_joints_then, apply_pose_message,
    pose_from_message, through_kinect, vmc_pose,
};
pub use outfit::Wardrobe;
pub use settings::{EngineConfig, MAX_SETTING_SECONDS, MAX_TICK_HZ, MAX_TICK_SLOTS};
pub(crate) use settings::{Range, first_bad, range};

use crate::body::SelfContactGuard;
use crate::codec::{BoneTransform, CodecError, Effort, GarmentSetup};
use crate::protocol::{AssetMessage, ServerMessage};
use crate::skeleton::{JOINT_COUNT, JointId, Pose, Skeleton};
use crate::sor::{AvatarState, Database, Synthesizer};

/// A refused pose or engine failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The source profile is not known.
    #[error("unknown profile {0:?} (this server reads: canonical, kinect_v2, azure_kinect)")]
    UnknownProfile(String),
    /// A joint name the profile does not have.
    #[error("unknown joint {0:?}")]
    UnknownJoint(String),
    /// NaN, infinite, or not a rotation.
    #[error("bad value: {0}")]
    BadValue(String),
    /// An avatar id that breaks [`crate::protocol::AVATAR_ID_RULE`].
    #[error("bad avatar id: {}", crate::protocol::AVATAR_ID_RULE)]
    BadAvatarId,
    /// Too many avatars.
    #[error("avatar limit of {0} reached")]
    TooManyAvatars(usize),
    /// A garment this server does not stream.
    #[error("unknown garment {0:?} (this server streams: {1})")]
    UnknownGarment(String, String),
    /// An outfit that cannot be worn (empty, too long, a garment twice, garments baked
    /// for different bodies); says which.
    #[error("bad outfit: {0}")]
    BadOutfit(String),
    /// Two databases for the same garment name.
    #[error("two databases for the garment {0:?}")]
    DuplicateGarment(String),
    /// Synthesis or encoding of one avatar panicked (a bug); that avatar got no frame
    /// this tick and restarts at the next.
    #[error("{0} panicked (a bug); this avatar restarts with a keyframe")]
    Panicked(&'static str),
    /// An engine needs at least one garment.
    #[error("no garment database given")]
    NoGarment,
    /// Codec failure (a bug or a garment outside the lattice).
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// A message of ours could not be encoded (a bug).
    #[error(transparent)]
    Protocol(#[from] crate::protocol::ProtocolError),
    /// A setting outside what the engine can honour ([`EngineConfig::check`]).
    #[error("setting `{name}` = {value} is out of range ({range})")]
    BadSetting {
        /// The setting's name in the `[engine]` table of a config file.
        name: &'static str,
        /// Its value, as read.
        value: String,
        /// What it may be.
        range: &'static str,
    },
}

struct Avatar {
    /// Its outfit, inner to outer (one layer for one garment).
    layers: Vec<outfit::Layer>,
    /// The pose synthesised: `received`, with the arms kept out of the torso of its
    /// innermost garment's body when [`EngineConfig::keep_arms_out`].
    pose: Pose,
    /// The pose as it was set (a change of outfit guards it afresh; [`Avatar::new`]
    /// takes `pose` for it, which its callers overwrite when they guarded `pose`).
    received: Pose,
    pose_timestamp: f64,
    received_at: f64,
    bones: Vec<BoneTransform>,
    want_key: bool,
    /// Server time of its last keyframe.
    keyed_at: Option<f64>,
    /// Skipped by a tick because no viewer watched it: its next frame restarts the
    /// stream (keyframe) and its synthesis (no damping from the stale distances).
    paused: bool,
    /// The pose `out` was synthesised for.
    synthesised: Option<Pose>,
    /// This tick keeps `out` (see [`TickOutput::held`]).
    held: bool,
    /// Server time of its last frame (its last tick or slot).
    framed_at: Option<f64>,
    /// Seconds its damping advances by this tick.
    dt: f32,
    /// The tick period of its last slotted frame (see [`Schedule::Slot`]).
    framed_period: Option<u64>,
    /// A pose was set since the last tick (or slot).
    arrived: bool,
    world: [f32; 7],
}

impl Avatar {
    /// A fresh avatar wearing `outfit` (indices into `garments`, inner to outer; its
    /// streams start with a keyframe).
    fn new(
        id: &str,
        outfit: &[usize],
        garments: &[Garment],
        pose: Pose,
        ts: f64,
        now: f64,
        effort: Effort,
    ) -> Self {
        Avatar {
            layers: outfit
                .iter()
                .enumerate()
                .map(|(i, &g)| outfit::Layer::new(id, i, g, &garments[g], effort))
                .collect(),
            pose,
            received: pose,
            pose_timestamp: ts,
            received_at: now,
            bones: vec![BoneTransform::IDENTITY; JOINT_COUNT],
            want_key: true,
            keyed_at: None,
            paused: false,
            synthesised: None,
            held: false,
            framed_at: None,
            dt: 0.0,
            framed_period: None,
            arrived: true,
            world: [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0],
        }
    }

    /// The garments it wears, inner to outer.
    fn outfit(&self) -> Vec<usize> {
        self.layers.iter().map(|l| l.garment).collect()
    }
}

/// Which streaming avatars a call of [`Engine::tick_in_groups`] frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// Every one: the call is a whole tick.
    Tick,
    /// Those due in this slot of a tick divided into [`Engine::tick_slots`] slots
    /// ([`EngineConfig::tick_slots`] unless [`Engine::set_tick_slots`] changed it; the
    /// server calls it that many times per tick period; every that many slotted calls
    /// make one period). Each streaming avatar gets exactly one
    /// frame per period: in the first slot in which it has a pose set since the
    /// previous call (or is new, or restarts), else in the period's last slot. A
    /// publisher at the tick rate is so framed in the slot right after its pose
    /// arrives: the pose waits at most a slot, not a tick. Each avatar's damping
    /// advances by the time since its own last frame.
    Slot,
}

/// What one tick produced.
#[derive(Clone, Debug, Default)]
pub struct TickOutput {
    /// Tick counter.
    pub tick: u64,
    /// Server time of the tick, seconds.
    pub time: f64,
    /// Frames of the streaming avatars.
    pub frames: Vec<AvatarFrame>,
    /// Avatars removed this tick (or in an earlier tick that panicked before its
    /// output was made: each removal is reported exactly once).
    pub gone: Vec<String>,
    /// Avatars with a current pose that no viewer watched, so nothing was synthesised
    /// or encoded for them this tick.
    pub unwatched: usize,
    /// Streaming avatars whose garment was not synthesised again: the same pose as
    /// last tick with the damping settled, so the same garment (a publisher that keeps
    /// sending one pose, or went quiet and is not idle yet).
    pub held: usize,
    /// Avatars whose frame could not be made this tick, with the reason; each restarts
    /// with a keyframe at its next tick, and the other avatars are not affected.
    pub failed: Vec<(String, String)>,
}

/// One garment the engine streams: its database, codec setup and `asset` message.
struct Garment {
    name: String,
    db: Arc<Database>,
    skeleton: Skeleton,
    /// Keeps the arms of the database's body out of its torso.
    guard: SelfContactGuard,
    setup: Arc<GarmentSetup>,
    asset_hash: String,
    asset: Bytes,
}

impl Garment {
    fn new(db: Arc<Database>) -> Result<Self, EngineError> {
        let g = &db.garment;
        let body = db.body.to_body();
        let skeleton = body.skeleton.clone();
        let setup = Arc::new(codec_setup(
            &g.triangles,
            &g.skin,
            Some(&g.rest),
            &skeleton,
        )?);
        let asset_hash = format!("{:08x}{:016x}", setup.id(), crate::sor::body_hash(&db.body));
        let f32s = |v: &mut Vec<u8>, x: &[f32]| {
            x.iter().for_each(|f| v.extend_from_slice(&f.to_le_bytes()))
        };
        let (mut pos, mut tri, mut bj, mut bw, mut sk) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        db.body
            .positions
            .iter()
            .for_each(|p| f32s(&mut pos, &p.to_array()));
        db.body
            .triangles
            .iter()
            .flatten()
            .for_each(|i| tri.extend_from_slice(&i.to_le_bytes()));
        db.body
            .skin
            .joints
            .iter()
            .for_each(|j| bj.extend(j.map(|b| b.min(255) as u8)));
        db.body.skin.weights.iter().for_each(|w| f32s(&mut bw, w));
        db.body
            .skeleton
            .iter()
            .for_each(|p| f32s(&mut sk, &p.to_array()));
        let asset = ServerMessage::Asset(AssetMessage {
            hash: asset_hash.clone(),
            garment: db.garment.name.clone(),
            setup: ByteBuf::from(setup.to_bytes()),
            body_positions: ByteBuf::from(pos),
            body_triangles: ByteBuf::from(tri),
            body_joints: ByteBuf::from(bj),
            body_weights: ByteBuf::from(bw),
            skeleton: ByteBuf::from(sk),
            parents: JointId::all()
                .map(|j| j.parent().map_or(-1, |p| p.index() as i32))
                .collect(),
        });
        Ok(Self {
            name: db.garment.name.clone(),
            guard: SelfContactGuard::new(&body, crate::bake::GUARD_CLEARANCE),
            db,
            skeleton,
            setup,
            asset_hash,
            asset: Bytes::from(asset.to_msgpack()?),
        })
    }
}

/// The engine. Owned by the tick thread; others talk to it through the server's inbox.
/// It streams one or more garments (one database each); every avatar wears one of them,
/// the first unless [`Engine::wear`] chose another.
pub struct Engine {
    garments: Vec<Garment>,
    /// How each pair of garments is layered, and which can be worn together.
    layerings: outfit::Layerings,
    wardrobe: Wardrobe,
    /// What a new avatar wears (`config.outfit`).
    default_outfit: Vec<usize>,
    config: EngineConfig,
    avatars: BTreeMap<String, Avatar>,
    /// Removed avatars not yet reported in a [`TickOutput`]: kept here, not in the
    /// output being built, so that a tick that panics does not lose them.
    gone: Vec<String>,
    tick: u64,
    last_time: Option<f64>,
    /// [`Engine::request_idle_keyframes`] was called since the last tick.
    key_idle: bool,
    /// Slotted calls ([`Schedule::Slot`]): the slots of the current tick period, the
    /// count asked for from the next period on ([`Engine::set_tick_slots`]), the
    /// current period's index and how many of its slots have run.
    slots: Slots,
}

/// Where slotted calls stand in their tick period (see [`Schedule::Slot`]).
#[derive(Clone, Copy, Debug)]
struct Slots {
    now: u32,
    next: u32,
    period: u64,
    done: u32,
}

impl Engine {
    /// An engine streaming the garment of `db`.
    pub fn new(db: Arc<Database>, config: EngineConfig) -> Result<Self, EngineError> {
        Self::with_garments(vec![db], config)
    }

    /// An engine streaming the garments of `dbs` (the first is what avatars wear by
    /// default); garment names must differ.
    pub fn with_garments(
        dbs: Vec<Arc<Database>>,
        config: EngineConfig,
    ) -> Result<Self, EngineError> {
        if dbs.is_empty() {
            return Err(EngineError::NoGarment);
        }
        config.check()?;
        let mut garments: Vec<Garment> = Vec::with_capacity(dbs.len());
        for db in dbs {
            let g = Garment::new(db)?;
            if garments
                .iter()
                .any(|o| o.name == g.name || o.asset_hash == g.asset_hash)
            {
                return Err(EngineError::DuplicateGarment(g.name));
            }
            garments.push(g);
        }
        let (layerings, wardrobe) = outfit::Layerings::new(&garments, &config.layers);
        let default_outfit = if config.outfit.is_empty() {
            vec![0]
        } else {
            wardrobe.resolve(&config.outfit)?
        };
        let slots = config.tick_slots.clamp(1, MAX_TICK_SLOTS);
        Ok(Self {
            garments,
            layerings,
            wardrobe,
            default_outfit,
            config,
            avatars: BTreeMap::new(),
            gone: Vec::new(),
            tick: 0,
            slots: Slots {
                now: slots,
                next: slots,
                period: 0,
                done: 0,
            },
            last_time: None,
            key_idle: false,
        })
    }

    /// The `asset` messages (MessagePack), one per garment, sent once to each viewer.
    pub fn assets(&self) -> Vec<Bytes> {
        self.garments.iter().map(|g| g.asset.clone()).collect()
    }

    /// The hashes of [`Engine::assets`], in the same order.
    pub fn asset_hashes(&self) -> Vec<String> {
        self.garments.iter().map(|g| g.asset_hash.clone()).collect()
    }

    /// Names of the garments, default first.
    pub fn garment_names(&self) -> Vec<String> {
        self.garments.iter().map(|g| g.name.clone()).collect()
    }

    /// The garments and which can be worn together (for checking `wear` messages).
    pub fn wardrobe(&self) -> &Wardrobe {
        &self.wardrobe
    }

    /// The databases, in garment order (for [`Engine::synthesizer`]).
    pub fn databases(&self) -> Vec<Arc<Database>> {
        self.garments.iter().map(|g| Arc::clone(&g.db)).collect()
    }

    /// The default garment's database.
    pub fn database(&self) -> &Arc<Database> {
        &self.garments[0].db
    }

    /// The default garment's codec setup.
    pub fn setup(&self) -> &Arc<GarmentSetup> {
        &self.garments[0].setup
    }

    /// The codec setup of garment `name`.
    pub fn setup_of(&self, name: &str) -> Option<&Arc<GarmentSetup>> {
        self.garments
            .iter()
            .find(|g| g.name == name)
            .map(|g| &g.setup)
    }

    /// Dresses `avatar` (which must exist: call after its first pose) in `outfit`:
    /// garment names, inner to outer (one name for one garment). A change restarts its
    /// synthesis and its streams (viewers get keyframes of the new garments' assets);
    /// wearing what it wears already changes nothing. Refused by name: an unknown
    /// garment, or an outfit that cannot be worn ([`EngineError::BadOutfit`]).
    pub fn wear(&mut self, avatar: &str, outfit: &[impl AsRef<str>]) -> Result<(), EngineError> {
        let outfit = self.wardrobe.resolve(outfit)?;
        let Some(received) = self
            .avatars
            .get(avatar)
            .filter(|a| a.outfit() != outfit)
            .map(|a| a.received)
        else {
            return Ok(());
        };
        // the arms kept out of the new innermost garment's body, from the pose as
        // received (the old body's lift may be too much or too little for it)
        let pose = self.guarded(outfit.first().copied(), &received);
        if let Some(a) = self.avatars.get_mut(avatar) {
            let (ts, at) = (a.pose_timestamp, a.received_at);
            *a = Avatar::new(
                avatar,
                &outfit,
                &self.garments,
                pose,
                ts,
                at,
                self.config.codec_effort,
            );
            a.received = received;
        }
        Ok(())
    }

    /// `pose` with the arms kept out of the torso of `garment`'s body, when
    /// [`EngineConfig::keep_arms_out`] (else, or without a garment, as it is).
    fn guarded(&self, garment: Option<usize>, pose: &Pose) -> Pose {
        match garment.and_then(|g| self.garments.get(g)) {
            Some(g) if self.config.keep_arms_out => g.guard.apply(pose),
            _ => *pose,
        }
    }

    /// What `avatar` wears, inner to outer (`None`: no such avatar).
    pub fn outfit_of(&self, avatar: &str) -> Option<Vec<String>> {
        let a = self.avatars.get(avatar)?;
        Some(
            a.layers
                .iter()
                .map(|l| self.garments[l.garment].name.clone())
                .collect(),
        )
    }

    /// The slots of the tick period that the next [`Schedule::Slot`] call falls in
    /// (the server sleeps a period divided by this before each call).
    pub fn tick_slots(&self) -> u32 {
        self.slots.now
    }

    /// Divides tick periods into `slots` slots (clamped to 1–[`MAX_TICK_SLOTS`]) from
    /// the next period on: the one under way keeps its count, so every avatar still
    /// gets exactly one frame in it. The server asks for one slot while its ticks run
    /// late and returns to [`EngineConfig::tick_slots`] once they keep time again.
    pub fn set_tick_slots(&mut self, slots: u32) {
        self.slots.next = slots.clamp(1, MAX_TICK_SLOTS);
        if self.slots.done == 0 {
            // between periods: nothing of the coming one has run yet
            self.slots.now = self.slots.next;
        }
    }

    /// The settings.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Number of avatars (streaming or idle).
    pub fn avatar_count(&self) -> usize {
        self.avatars.len()
    }

    /// Ids of the avatars (streaming or idle), in order.
    pub fn avatar_ids(&self) -> impl Iterator<Item = &str> {
        self.avatars.keys().map(String::as_str)
    }

    /// Sets an avatar's latest pose (world frame), received at `now`; latest wins.
    /// Refuses (and changes nothing on) a pose with a non-finite value or a rotation
    /// that is not unit length within 1 %: every input path validates its poses, and
    /// this is the last gate before synthesis, so that no input bug can put a NaN into
    /// a garment. With [`EngineConfig::keep_arms_out`] the arms are then kept out of
    /// the torso of the body the avatar's (innermost) garment was baked for.
    pub fn set_pose(
        &mut self,
        avatar: &str,
        mut pose: Pose,
        pose_timestamp: f64,
        now: f64,
    ) -> Result<(), EngineError> {
        pose.validate()
            .map_err(|e| EngineError::BadValue(e.to_string()))?;
        let innermost = match self.avatars.get(avatar) {
            Some(a) => a.layers.first().map(|l| l.garment),
            None => self.default_outfit.first().copied(),
        };
        let received = pose;
        pose = self.guarded(innermost, &pose);
        if let Some(a) = self.avatars.get_mut(avatar) {
            a.pose = pose;
            a.received = received;
            a.pose_timestamp = pose_timestamp;
            a.received_at = now;
            a.arrived = true;
            return Ok(());
        }
        if !crate::protocol::valid_avatar_id(avatar) {
            return Err(EngineError::BadAvatarId);
        }
        if self.avatars.len() >= self.config.max_avatars {
            return Err(EngineError::TooManyAvatars(self.config.max_avatars));
        }
        let mut a = Avatar::new(
            avatar,
            &self.default_outfit,
            &self.garments,
            pose,
            pose_timestamp,
            now,
            self.config.codec_effort,
        );
        a.received = received;
        self.avatars.insert(avatar.to_string(), a);
        // back before its removal was reported: viewers never learn it went
        self.gone.retain(|g| g != avatar);
        Ok(())
    }

    /// Whether `avatar` exists (streaming or idle).
    pub fn has_avatar(&self, avatar: &str) -> bool {
        self.avatars.contains_key(avatar)
    }

    /// Asks for a keyframe of `avatar` in the next tick (a viewer joined or fell behind).
    /// An idle avatar (no pose for `idle_timeout`) streams no frames, but one asked for
    /// a keyframe makes one frame of its last garment: the keyframe for whoever asked,
    /// and a delta (no motion) for the viewers in step. So a viewer that joins, or
    /// falls out of step, while a performer is quiet still sees that avatar where it
    /// stands, as the viewers before it do.
    pub fn request_keyframe(&mut self, avatar: &str) {
        if let Some(a) = self.avatars.get_mut(avatar) {
            a.want_key = true;
        }
    }

    /// Asks for a keyframe of every avatar that is idle at the next tick (a viewer
    /// subscribed to all avatars: those streaming get it their keyframe anyway, when it
    /// sees their next frame; see [`Engine::request_keyframe`]).
    pub fn request_idle_keyframes(&mut self) {
        self.key_idle = true;
    }

    /// A synthesizer for this engine's database (made once by the tick loop and passed
    /// to every [`Engine::tick`]).
    pub fn synthesizer<'a>(db: &'a Database, config: &EngineConfig) -> Synthesizer<'a> {
        Synthesizer::new(db, config.synth.clone())
    }

    /// Runs one tick at server time `now` (seconds): removes long-silent avatars,
    /// synthesises (with `synths`, one per garment in [`Engine::databases`] order, made
    /// by [`Engine::synthesizer`]) and encodes every streaming one.
    ///
    /// # Panics
    /// If `synths` does not hold one synthesizer per garment (a programming error).
    #[track_caller]
    pub fn tick(
        &mut self,
        synths: &[Synthesizer<'_>],
        now: f64,
    ) -> Result<TickOutput, EngineError> {
        self.tick_watched(synths, now, &|_| true)
    }

    /// [`Engine::tick`] for the streaming avatars that `watched` names (those some
    /// viewer is subscribed to); the others keep their latest pose but cost nothing
    /// this tick. An avatar watched again after a skipped tick restarts: its synthesis
    /// undamped, its stream with a keyframe (which a viewer that subscribes to it
    /// expects anyway). Frames come in the order of [`Engine::tick_in_groups`]: the
    /// longest-waiting pose first.
    ///
    /// # Panics
    /// If `synths` does not hold one synthesizer per garment (a programming error).
    #[track_caller]
    pub fn tick_watched(
        &mut self,
        synths: &[Synthesizer<'_>],
        now: f64,
        watched: &dyn Fn(&str) -> bool,
    ) -> Result<TickOutput, EngineError> {
        let mut frames = Vec::new();
        let mut out =
            self.tick_in_groups(synths, now, watched, Schedule::Tick, 1, &mut |group| {
                frames.extend(group.frames);
            })?;
        out.frames = frames;
        Ok(out)
    }

    /// [`Engine::tick_watched`] for the avatars `schedule` picks, in `groups` groups
    /// (at most; 0 counts as 1), the poses that have waited longest since they
    /// arrived first: each group is synthesised and encoded, and its frames handed to
    /// `emit` (as a [`TickOutput`] of this tick with only `frames` set), before the next
    /// group starts. A server that sends each group as it comes gets the first frames
    /// out after a fraction of the tick's work instead of all of it, and the pose that
    /// waited longest is among the first out. Returns the rest of the tick's output
    /// (its `frames` empty: they all went to `emit`).
    ///
    /// # Panics
    /// If `synths` does not hold one synthesizer per garment (a programming error).
    #[track_caller]
    pub fn tick_in_groups(
        &mut self,
        synths: &[Synthesizer<'_>],
        now: f64,
        watched: &dyn Fn(&str) -> bool,
        schedule: Schedule,
        groups: usize,
        emit: &mut dyn FnMut(TickOutput),
    ) -> Result<TickOutput, EngineError> {
        let slotted = schedule == Schedule::Slot;
        assert_eq!(
            synths.len(),
            self.garments.len(),
            "one synthesizer per garment"
        );
        let period = 1.0 / f64::from(self.config.tick_hz);
        let dt = self.last_time.map_or(period, |t| (now - t).max(0.0));
        self.last_time = Some(now);
        // this call's tick period and whether it is the period's last slot (a count
        // asked for by `set_tick_slots` starts with the next period)
        let (period_index, last_slot) = (self.slots.period, self.slots.done + 1 >= self.slots.now);
        if slotted {
            self.slots.done += 1;
            if last_slot {
                self.slots.period += 1;
                self.slots.done = 0;
                self.slots.now = self.slots.next;
            }
        }
        self.tick += 1;
        let mut out = TickOutput {
            tick: self.tick,
            time: now,
            ..TickOutput::default()
        };
        let remove_after = self.config.remove_after;
        let gone = &mut self.gone;
        self.avatars.retain(|id, a| {
            let keep = now - a.received_at <= remove_after;
            if !keep {
                gone.push(id.clone());
            }
            keep
        });
        let idle = self.config.idle_timeout;
        let key_idle = std::mem::replace(&mut self.key_idle, false);
        let mut live: Vec<(&String, &mut Avatar)> = Vec::new();
        for (id, a) in self.avatars.iter_mut() {
            // handed over since the last call (not judged by its receive time: a pose
            // received just before the last call may have reached the engine after it)
            let arrived = std::mem::replace(&mut a.arrived, false);
            let quiet = now - a.received_at > idle;
            if quiet {
                // idle: no frames, but a keyframe when asked (see `request_keyframe`)
                a.want_key |= key_idle;
                if !a.want_key {
                    continue;
                }
            }
            if !watched(id) {
                a.paused = true;
                out.unwatched += 1;
                continue;
            }
            if slotted {
                // once per tick period: in the first slot after a pose arrives, else
                // in the period's last slot
                let due = a.framed_period != Some(period_index)
                    && (arrived || a.paused || last_slot || quiet);
                if !due {
                    continue;
                }
                a.framed_period = Some(period_index);
            }
            let dt = match a.framed_at {
                Some(t) if slotted => now - t,
                None if slotted => period,
                _ => dt,
            };
            if a.paused {
                // restarts undamped, its layering walks from rest; `paused` stays set
                // until its keyframe is coded
                for l in a.layers.iter_mut() {
                    l.state = AvatarState::new();
                    l.over.fill_with(Default::default);
                }
            }
            a.framed_at = Some(now);
            a.dt = dt as f32;
            live.push((id, a));
        }
        // oldest pose first (stable: ties keep id order)
        live.sort_by(|x, y| x.1.received_at.total_cmp(&y.1.received_at));
        for (_, a) in live.iter_mut() {
            a.held = a.layers.iter().all(|l| l.state.settled()) && a.synthesised == Some(a.pose);
            out.held += usize::from(a.held);
            a.synthesised = Some(a.pose);
        }
        let size = live.len().div_ceil(groups.max(1)).max(1);
        let (garments, layerings) = (&self.garments, &self.layerings);
        let interval = self.config.keyframe_interval;
        for group in live.chunks_mut(size) {
            let frames =
                frame::synthesise_and_encode(garments, layerings, synths, group, now, interval);
            // one avatar's failure (a bug, or a garment outside the codec's lattice)
            // costs that avatar its frame, not the tick: the others' frames still go
            // out, and it restarts with a keyframe next tick (its encoder may have
            // moved on)
            let mut ok = Vec::with_capacity(frames.len());
            for (r, (id, a)) in frames.into_iter().zip(group.iter_mut()) {
                match r {
                    Ok(f) => ok.push(f),
                    Err(e) => {
                        a.paused = true;
                        a.synthesised = None;
                        out.failed.push(((*id).clone(), e.to_string()));
                    }
                }
            }
            if !ok.is_empty() {
                emit(TickOutput {
                    tick: self.tick,
                    time: now,
                    frames: ok,
                    ..TickOutput::default()
                });
            }
        }
        out.gone = std::mem::take(&mut self.gone);
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
