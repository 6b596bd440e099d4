//! The compact `frame` message: a [`FrameMessage`] as a MessagePack **array** instead of
//! a map, for viewers that subscribed with `compact: true`. Still MessagePack (DESIGN
//! §5), but without the field names, with `world` as one `bin` and nothing left out:
//! ~100 bytes of envelope around the codec frame instead of ~165, which on a walking
//! 3 000-vertex garment at 30 Hz is ~3.5 % of what a viewer receives.
//!
//! | index | value | MessagePack type |
//! |---|---|---|
//! | 0 | `"frame"` | str |
//! | 1 | avatar id | str |
//! | 2 | `seq` | uint (32-bit) |
//! | 3 | `timestamp`, s | float 64 (float 32 accepted) |
//! | 4 | `pose_timestamp`, s | float 64 (float 32 accepted) |
//! | 5 | `world`: 7 × f32 LE (rotation x, y, z, w, translation) | bin of 28 bytes |
//! | 6 | `pose`, as in the map form (empty when not subscribed) | bin |
//! | 7 | `asset` | str |
//! | 8 | `garment` (codec frame) | bin |
//! | 9, 10, … | each layer of an outfit: its `asset`, then its `garment` | str, bin |
//!
//! So an array of 9 + 2·layers entries, layers at most [`MAX_OUTFIT`] − 1. A map-form
//! server message never starts with an array marker, so a client tells the two apart
//! by the first byte ([`ServerMessage::from_msgpack`](super::ServerMessage) does).

use serde_bytes::ByteBuf;

use super::{FrameMessage, GarmentLayer, MAX_OUTFIT, ProtocolError};

/// The first entry of a compact frame.
const TAG: &str = "frame";

/// Entries of a compact frame before its layers.
const HEAD: u32 = 9;

/// Whether `bytes` starts with a MessagePack array marker (a compact message).
pub(super) fn is_array(bytes: &[u8]) -> bool {
    matches!(bytes.first(), Some(0x90..=0x9f | 0xdc | 0xdd))
}

impl FrameMessage {
    /// Writes the message in the compact form (the module's table).
    pub fn to_compact(&self) -> Result<Vec<u8>, ProtocolError> {
        let err = |e: rmp::encode::ValueWriteError<std::io::Error>| {
            ProtocolError::Encode(format!("compact frame: {e}"))
        };
        let entries = u32::try_from(self.layers.len())
            .ok()
            .and_then(|n| n.checked_mul(2)?.checked_add(HEAD))
            .ok_or_else(|| ProtocolError::Encode("compact frame: too many layers".into()))?;
        let payload: usize = self.garment.len()
            + self.pose.len()
            + self
                .layers
                .iter()
                .map(|l| l.garment.len() + l.asset.len() + 5)
                .sum::<usize>();
        let mut out = Vec::with_capacity(payload + self.avatar.len() + self.asset.len() + 80);
        let w = &mut out;
        rmp::encode::write_array_len(w, entries).map_err(err)?;
        rmp::encode::write_str(w, TAG).map_err(err)?;
        rmp::encode::write_str(w, &self.avatar).map_err(err)?;
        rmp::encode::write_uint(w, u64::from(self.seq)).map_err(err)?;
        rmp::encode::write_f64(w, self.timestamp).map_err(err)?;
        rmp::encode::write_f64(w, self.pose_timestamp).map_err(err)?;
        let mut world = [0u8; 28];
        for (chunk, x) in world.chunks_exact_mut(4).zip(self.world) {
            chunk.copy_from_slice(&x.to_le_bytes());
        }
        rmp::encode::write_bin(w, &world).map_err(err)?;
        rmp::encode::write_bin(w, &self.pose).map_err(err)?;
        rmp::encode::write_str(w, &self.asset).map_err(err)?;
        rmp::encode::write_bin(w, &self.garment).map_err(err)?;
        for l in &self.layers {
            rmp::encode::write_str(w, &l.asset).map_err(err)?;
            rmp::encode::write_bin(w, &l.garment).map_err(err)?;
        }
        Ok(out)
    }

    /// Reads a compact frame (the module's table): the whole input must be one such
    /// array, each entry of its type, the layers whole and at most [`MAX_OUTFIT`] − 1;
    /// a declared length is checked against the bytes left before anything is copied.
    /// The error names the entry that is wrong.
    pub fn from_compact(bytes: &[u8]) -> Result<Self, ProtocolError> {
        let mut r = Reader { rest: bytes };
        let entries = rmp::decode::read_array_len(&mut r.rest)
            .map_err(|e| bad(format!("not an array: {e}")))?;
        let layers = entries
            .checked_sub(HEAD)
            .filter(|extra| extra % 2 == 0 && ((extra / 2) as usize) < MAX_OUTFIT)
            .ok_or_else(|| {
                bad(format!(
                    "{entries} entries; a frame has {HEAD} and two per layer, at most {} layers",
                    MAX_OUTFIT - 1
                ))
            })?
            / 2;
        if r.str("type")? != TAG {
            return Err(bad("its first entry is not \"frame\"".into()));
        }
        let avatar = r.str("avatar")?.to_string();
        let seq =
            rmp::decode::read_int::<u32, _>(&mut r.rest).map_err(|e| bad(format!("seq: {e}")))?;
        let timestamp = r.float("timestamp")?;
        let pose_timestamp = r.float("pose_timestamp")?;
        let world_bytes = r.bin("world")?;
        if world_bytes.len() != 28 {
            return Err(bad(format!(
                "world: {} bytes, not 7 floats (28)",
                world_bytes.len()
            )));
        }
        let mut world = [0f32; 7];
        for (x, chunk) in world.iter_mut().zip(world_bytes.chunks_exact(4)) {
            *x = f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        }
        let pose = ByteBuf::from(r.bin("pose")?);
        let asset = r.str("asset")?.to_string();
        let garment = ByteBuf::from(r.bin("garment")?);
        let layers = (0..layers)
            .map(|_| {
                Ok(GarmentLayer {
                    asset: r.str("a layer's asset")?.to_string(),
                    garment: ByteBuf::from(r.bin("a layer's garment")?),
                })
            })
            .collect::<Result<Vec<_>, ProtocolError>>()?;
        if !r.rest.is_empty() {
            return Err(bad(format!("{} bytes after the frame", r.rest.len())));
        }
        Ok(FrameMessage {
            avatar,
            seq,
            timestamp,
            pose_timestamp,
            asset,
            pose,
            world,
            garment,
            layers,
        })
    }
}

/// A compact frame that could not be read.
fn bad(what: String) -> ProtocolError {
    ProtocolError::MessagePack(format!("compact frame: {what}"))
}

/// Reads a compact frame's entries off the front of the bytes.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// `n` bytes off the front, or an error naming `what` when fewer are left.
    fn take(&mut self, n: u32, what: &str) -> Result<&'a [u8], ProtocolError> {
        let n = n as usize;
        if n > self.rest.len() {
            return Err(bad(format!(
                "{what}: {n} bytes declared, {} left",
                self.rest.len()
            )));
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    fn str(&mut self, what: &str) -> Result<&'a str, ProtocolError> {
        let n = rmp::decode::read_str_len(&mut self.rest)
            .map_err(|e| bad(format!("{what}: not a string ({e})")))?;
        std::str::from_utf8(self.take(n, what)?).map_err(|_| bad(format!("{what}: not UTF-8")))
    }

    fn bin(&mut self, what: &str) -> Result<&'a [u8], ProtocolError> {
        let n = rmp::decode::read_bin_len(&mut self.rest)
            .map_err(|e| bad(format!("{what}: not bytes ({e})")))?;
        self.take(n, what)
    }

    /// A float 64, or a float 32 widened.
    fn float(&mut self, what: &str) -> Result<f64, ProtocolError> {
        let wrong = |e: String| bad(format!("{what}: not a float ({e})"));
        match self.rest.first() {
            Some(0xca) => rmp::decode::read_f32(&mut self.rest)
                .map(f64::from)
                .map_err(|e| wrong(e.to_string())),
            _ => rmp::decode::read_f64(&mut self.rest).map_err(|e| wrong(e.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ServerMessage;

    fn frame(layers: usize, pose: bool) -> FrameMessage {
        FrameMessage {
            avatar: "performer-7".into(),
            seq: 70_001,
            timestamp: 1234.5678,
            pose_timestamp: 1.7e9 + 0.25,
            asset: "0123abcd0123456789abcdef".into(),
            pose: ByteBuf::from(if pose { vec![7u8; 364] } else { Vec::new() }),
            world: [0.0, 0.38, 0.0, 0.92, 0.3, 0.02, -0.5],
            garment: ByteBuf::from((0..1500u32).map(|i| (i * 31) as u8).collect::<Vec<_>>()),
            layers: (0..layers)
                .map(|i| GarmentLayer {
                    asset: format!("layer{i}"),
                    garment: ByteBuf::from(vec![i as u8; 40 + i]),
                })
                .collect(),
        }
    }

    /// Every field comes back, with or without pose and layers, through the compact
    /// reader and through `ServerMessage::from_msgpack`; and the envelope is smaller
    /// than the map form's by the field names and more.
    #[test]
    fn compact_frames_read_back_as_written_and_are_smaller() {
        for layers in [0, 1, MAX_OUTFIT - 1] {
            for pose in [false, true] {
                let f = frame(layers, pose);
                let bytes = f.to_compact().expect("writes");
                assert!(is_array(&bytes));
                assert_eq!(FrameMessage::from_compact(&bytes).expect("reads"), f);
                let routed = ServerMessage::from_msgpack(&bytes).expect("routed");
                assert_eq!(routed, ServerMessage::Frame(f.clone()));
                let map = ServerMessage::Frame(f.clone()).to_msgpack().expect("map");
                assert!(
                    bytes.len() + 55 <= map.len(),
                    "compact {} bytes, map {}",
                    bytes.len(),
                    map.len()
                );
            }
        }
        // the envelope alone (everything but the codec frame and the pose)
        let f = frame(0, false);
        let envelope = f.to_compact().expect("writes").len() - f.garment.len();
        let map = ServerMessage::Frame(f.clone())
            .to_msgpack()
            .expect("map")
            .len()
            - f.garment.len();
        assert!(envelope < 110 && map > 150, "compact {envelope}, map {map}");
    }

    /// The hostile-input checklist: every truncated prefix, extra bytes, an entry of
    /// the wrong type, a wrong entry count or tag, and lengths larger than the input
    /// are refused, each with an error that names what is wrong.
    #[test]
    fn malformed_compact_frames_are_refused_by_name() {
        let good = frame(1, true).to_compact().expect("writes");
        for n in 0..good.len() {
            assert!(
                FrameMessage::from_compact(&good[..n]).is_err(),
                "a prefix of {n} bytes was read"
            );
        }
        let mut extra = good.clone();
        extra.push(0);
        let e = FrameMessage::from_compact(&extra).expect_err("extra byte");
        assert!(e.to_string().contains("1 bytes after the frame"), "{e}");

        // hand-made arrays: (entries, then the writer of each entry)
        let build = |entries: u32, f: &dyn Fn(&mut Vec<u8>)| {
            let mut v = Vec::new();
            rmp::encode::write_array_len(&mut v, entries).expect("len");
            f(&mut v);
            v
        };
        let head = |v: &mut Vec<u8>, seq_as_str: bool| {
            rmp::encode::write_str(v, "frame").expect("w");
            rmp::encode::write_str(v, "a").expect("w");
            if seq_as_str {
                rmp::encode::write_str(v, "7").expect("w");
            } else {
                rmp::encode::write_uint(v, 7).expect("w");
            }
            rmp::encode::write_f64(v, 1.0).expect("w");
            rmp::encode::write_f32(v, 2.0).expect("w");
        };
        let refused = |bytes: &[u8], says: &str| {
            let e = FrameMessage::from_compact(bytes).expect_err(says);
            assert!(e.to_string().contains(says), "{e} (expected {says:?})");
        };
        refused(&build(8, &|v| head(v, false)), "8 entries");
        refused(&build(10, &|v| head(v, false)), "10 entries");
        refused(
            &build(9 + 2 * MAX_OUTFIT as u32, &|v| head(v, false)),
            "entries",
        );
        refused(
            &build(9, &|v| {
                rmp::encode::write_str(v, "gone").expect("w");
            }),
            "not \"frame\"",
        );
        refused(&build(9, &|v| head(v, true)), "seq");
        let world = |v: &mut Vec<u8>, n: usize| {
            head(v, false);
            rmp::encode::write_bin(v, &vec![0u8; n]).expect("w");
        };
        refused(&build(9, &|v| world(v, 24)), "world: 24 bytes");
        // a garment declared 4 GB long in a message of a few dozen bytes: refused
        // before anything is allocated for it
        let huge = build(9, &|v| {
            world(v, 28);
            rmp::encode::write_bin(v, &[]).expect("w");
            rmp::encode::write_str(v, "asset").expect("w");
            rmp::encode::write_bin_len(v, u32::MAX).expect("w");
        });
        refused(&huge, "garment: 4294967295 bytes declared");
        let float_as_int = build(9, &|v| {
            rmp::encode::write_str(v, "frame").expect("w");
            rmp::encode::write_str(v, "a").expect("w");
            rmp::encode::write_uint(v, 7).expect("w");
            rmp::encode::write_uint(v, 1).expect("w");
        });
        refused(&float_as_int, "timestamp: not a float");
        let bad_utf8 = build(9, &|v| {
            rmp::encode::write_str(v, "frame").expect("w");
            rmp::encode::write_str_len(v, 2).expect("w");
            v.extend_from_slice(&[0xff, 0xfe]);
        });
        refused(&bad_utf8, "avatar: not UTF-8");
        let layer_without_bytes = build(11, &|v| {
            world(v, 28);
            rmp::encode::write_bin(v, &[]).expect("w");
            rmp::encode::write_str(v, "asset").expect("w");
            rmp::encode::write_bin(v, &[1, 2]).expect("w");
            rmp::encode::write_str(v, "outer").expect("w");
            rmp::encode::write_str(v, "not bytes").expect("w");
        });
        refused(&layer_without_bytes, "a layer's garment: not bytes");
        // and an array that is no frame at all reaches the caller as an error, not a
        // map-form parse
        let e = ServerMessage::from_msgpack(&[0x91, 0x01]).expect_err("[1]");
        assert!(e.to_string().contains("compact frame"), "{e}");
    }

    /// The same frame in both forms is frozen in `tests/fixtures/protocol/` (the files
    /// the JavaScript client's test reads): the compact writer's bytes must not change
    /// unnoticed. `CLOTHCAST_WRITE_GOLDEN=1` writes them afresh.
    #[test]
    fn the_frozen_frames_are_what_the_writers_write() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/protocol");
        let f = frame(1, true);
        let forms = [
            (
                "frame.map.msgpack",
                ServerMessage::Frame(f.clone()).to_msgpack().expect("map"),
            ),
            ("frame.compact.msgpack", f.to_compact().expect("compact")),
        ];
        for (name, bytes) in forms {
            let path = dir.join(name);
            if std::env::var_os("CLOTHCAST_WRITE_GOLDEN").is_some() {
                std::fs::create_dir_all(&dir).expect("fixture folder");
                std::fs::write(&path, &bytes).expect("fixture written");
            }
            let frozen =
                std::fs::read(&path).expect("fixture (CLOTHCAST_WRITE_GOLDEN=1 writes it)");
            assert_eq!(frozen, bytes, "{name}");
            assert_eq!(
                ServerMessage::from_msgpack(&frozen).expect("reads"),
                ServerMessage::Frame(f.clone())
            );
        }
    }

    proptest::proptest! {
        /// Any frame the server could write reads back equal.
        #[test]
        fn any_frame_round_trips(
            avatar in "\\PC{1,64}",
            seq in proptest::num::u32::ANY,
            timestamp in proptest::num::f64::NORMAL,
            pose_timestamp in -1e12f64..1e12,
            world in proptest::array::uniform7(-1e3f32..1e3),
            pose in proptest::collection::vec(proptest::num::u8::ANY, 0..400),
            garment in proptest::collection::vec(proptest::num::u8::ANY, 0..70_000),
            layers in proptest::collection::vec(("[0-9a-f]{24}", proptest::collection::vec(proptest::num::u8::ANY, 0..300)), 0..MAX_OUTFIT),
        ) {
            let f = FrameMessage {
                avatar,
                seq,
                timestamp,
                pose_timestamp,
                asset: "0123abcd0123456789abcdef".into(),
                pose: ByteBuf::from(pose),
                world,
                garment: ByteBuf::from(garment),
                layers: layers
                    .into_iter()
                    .map(|(asset, g)| GarmentLayer { asset, garment: ByteBuf::from(g) })
                    .collect(),
            };
            let bytes = f.to_compact().expect("writes");
            proptest::prop_assert_eq!(FrameMessage::from_compact(&bytes).expect("reads"), f);
        }
    }
}
