//! Writing BVH: a skeleton's motion a frame at a time, for recordings (`watch --record`)
//! that animation tools (Blender, MotionBuilder, Maya, Houdini) and `clothcast play`
//! read back.
//!
//! The file is in the skeleton's own units (metres for the canonical skeleton) and
//! frame (+Y up). The root's OFFSET is zero and its position channels are its absolute
//! position; the other joints' offsets are the rest pose's, with no rotations, so a
//! joint's rotation channels are its rotation relative to its parent. The root has `Xposition Yposition Zposition Zrotation Xrotation Yrotation`,
//! every other joint `Zrotation Xrotation Yrotation` (degrees, composed in that order:
//! `Rz · Rx · Ry`), and a joint without children ends in an End Site half its bone's
//! length further along the bone. The header's frame count is rewritten after every
//! frame (a fixed-width field), so a file cut short (a killed process, a full disk)
//! still reads as the frames written before it.

use std::fmt::Write as _;
use std::io::{self, Seek, SeekFrom, Write};

use glam::{EulerRot, Quat, Vec3};

/// Width of the frame count's field: counts up to 10^10 − 1 fit.
const COUNT_WIDTH: usize = 10;

/// Appends frames of one skeleton's motion to a BVH file.
pub struct BvhWriter<W: Write + Seek> {
    out: W,
    /// The joints in the file's (depth-first) order, as indices of the caller's.
    order: Vec<usize>,
    /// Rest position of the root, added to each frame's translation.
    root_rest: Vec3,
    /// Byte offset of the frame count's field.
    count_at: u64,
    frames: u64,
    /// The last frame's line (repeated by [`BvhWriter::repeat`]).
    line: String,
}

/// A number as BVH text: at most `decimals` decimals, trailing zeros dropped.
fn num(out: &mut String, x: f32, decimals: usize) {
    let start = out.len();
    let _ = write!(out, "{x:.decimals$}");
    if out[start..].contains('.') {
        let kept = out.trim_end_matches('0').trim_end_matches('.').len();
        out.truncate(kept);
    }
    if &out[start..] == "-0" {
        out.truncate(start);
        out.push('0');
    }
}

/// `OFFSET x y z` and a line end.
fn offset(text: &mut String, o: Vec3) {
    text.push_str("OFFSET ");
    num(text, o.x, 6);
    text.push(' ');
    num(text, o.y, 6);
    text.push(' ');
    num(text, o.z, 6);
    text.push('\n');
}

/// Joint `j` of the hierarchy and, inside it, its children (depth first), at nesting
/// `depth`; `order` gets the joints in the order their channels are written.
#[allow(clippy::too_many_arguments, reason = "one recursive helper of `new`")]
fn write_joint(
    text: &mut String,
    order: &mut Vec<usize>,
    j: usize,
    depth: usize,
    names: &[&str],
    parents: &[i32],
    rest: &[[f32; 3]],
    children: &[Vec<usize>],
) {
    let pad = "  ".repeat(depth);
    order.push(j);
    let kind = if j == 0 { "ROOT" } else { "JOINT" };
    let _ = writeln!(text, "{pad}{kind} {}\n{pad}{{", names[j]);
    text.push_str(&pad);
    text.push_str("  ");
    // the root's offset is zero and its position channels absolute, which readers
    // that add the root's offset and those that ignore it agree on
    let local = match usize::try_from(parents[j]) {
        Ok(p) => Vec3::from(rest[j]) - Vec3::from(rest[p]),
        Err(_) => Vec3::ZERO,
    };
    offset(text, local);
    let channels = if j == 0 {
        "6 Xposition Yposition Zposition Zrotation Xrotation Yrotation"
    } else {
        "3 Zrotation Xrotation Yrotation"
    };
    let _ = writeln!(text, "{pad}  CHANNELS {channels}");
    if children[j].is_empty() {
        let along = if j > 0 && local.length() > 1e-6 {
            0.5 * local
        } else {
            Vec3::new(0.0, 0.1, 0.0)
        };
        let _ = writeln!(text, "{pad}  End Site\n{pad}  {{");
        text.push_str(&pad);
        text.push_str("    ");
        offset(text, along);
        let _ = writeln!(text, "{pad}  }}");
    }
    for &c in &children[j] {
        write_joint(text, order, c, depth + 1, names, parents, rest, children);
    }
    let _ = writeln!(text, "{pad}}}");
}

impl<W: Write + Seek> BvhWriter<W> {
    /// Writes the hierarchy of a skeleton of `names` (letters, digits and `_`; they are
    /// written as they are), `parents` (−1 for the one root; a parent comes before its
    /// children) and rest joint positions `rest` (units and frame of the file), then
    /// an empty motion section of `frame_time` seconds a frame.
    pub fn new(
        mut out: W,
        names: &[&str],
        parents: &[i32],
        rest: &[[f32; 3]],
        frame_time: f32,
    ) -> io::Result<Self> {
        let n = names.len();
        let bad = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
        if n == 0 || parents.len() != n || rest.len() != n {
            return Err(bad(format!(
                "{n} joint names, {} parents and {} rest positions",
                parents.len(),
                rest.len()
            )));
        }
        if parents[0] != -1 || (1..n).any(|j| !(0..j as i32).contains(&parents[j])) {
            return Err(bad(
                "the first joint must be the only root, and each parent come before its children"
                    .into(),
            ));
        }
        if !(frame_time.is_finite() && frame_time > 0.0) {
            return Err(bad(format!("frame time {frame_time} s")));
        }
        let children: Vec<Vec<usize>> = (0..n)
            .map(|j| (1..n).filter(|&c| parents[c] == j as i32).collect())
            .collect();
        let mut text = String::from("HIERARCHY\n");
        let mut order = Vec::with_capacity(n);
        write_joint(&mut text, &mut order, 0, 0, names, parents, rest, &children);
        text.push_str("MOTION\nFrames: ");
        let count_at = text.len() as u64;
        let _ = writeln!(text, "{:<COUNT_WIDTH$}", 0);
        text.push_str("Frame Time: ");
        num(&mut text, frame_time, 8);
        text.push('\n');
        out.seek(SeekFrom::Start(0))?;
        out.write_all(text.as_bytes())?;
        Ok(Self {
            out,
            order,
            root_rest: Vec3::from(rest[0]),
            count_at,
            frames: 0,
            line: String::new(),
        })
    }

    /// Appends a frame: the root's displacement from its rest position (file units,
    /// the file's frame) and each joint's rotation relative to its parent (the root's
    /// relative to the file's frame), indexed as the joints given to [`BvhWriter::new`].
    /// Non-finite values are refused and nothing is written.
    pub fn push(&mut self, translation: Vec3, rotations: &[Quat]) -> io::Result<()> {
        if rotations.len() != self.order.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} rotations for {} joints",
                    rotations.len(),
                    self.order.len()
                ),
            ));
        }
        if !translation.is_finite() || rotations.iter().any(|q| !q.is_finite()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a pose with a value that is not finite",
            ));
        }
        let mut line = std::mem::take(&mut self.line);
        line.clear();
        let at = self.root_rest + translation;
        for (i, x) in at.to_array().into_iter().enumerate() {
            if i > 0 {
                line.push(' ');
            }
            num(&mut line, x, 6);
        }
        for &j in &self.order {
            let (z, x, y) = rotations[j].normalize().to_euler(EulerRot::ZXY);
            for a in [z, x, y] {
                line.push(' ');
                num(&mut line, a.to_degrees(), 5);
            }
        }
        line.push('\n');
        self.line = line;
        self.append()
    }

    /// Appends the last frame again (a tick whose pose is missing); the rest pose
    /// when no frame has been written.
    pub fn repeat(&mut self) -> io::Result<()> {
        if self.line.is_empty() {
            let identity = vec![Quat::IDENTITY; self.order.len()];
            return self.push(Vec3::ZERO, &identity);
        }
        self.append()
    }

    /// Writes `self.line` at the end, then the new count.
    fn append(&mut self) -> io::Result<()> {
        let next = self.frames + 1;
        if next.to_string().len() > COUNT_WIDTH {
            return Err(io::Error::other("too many frames for the header's count"));
        }
        self.out.seek(SeekFrom::End(0))?;
        self.out.write_all(self.line.as_bytes())?;
        self.out.seek(SeekFrom::Start(self.count_at))?;
        write!(self.out, "{next:<COUNT_WIDTH$}")?;
        self.frames = next;
        Ok(())
    }

    /// Frames written so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Flushes and returns the output.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use proptest::prelude::*;

    use super::*;
    use crate::mocap::Bvh;
    use crate::skeleton::{JOINT_COUNT, JointId, Pose, Skeleton};

    fn canonical() -> (Vec<&'static str>, Vec<i32>, Vec<[f32; 3]>, Skeleton) {
        let skeleton = Skeleton::default();
        let names = JointId::all().map(JointId::name).collect();
        let parents = JointId::all()
            .map(|j| j.parent().map_or(-1, |p| p.index() as i32))
            .collect();
        let rest = JointId::all()
            .map(|j| skeleton.rest_position(j).to_array())
            .collect();
        (names, parents, rest, skeleton)
    }

    fn quat() -> impl Strategy<Value = Quat> {
        (-1.0f32..1.0, -1.0f32..1.0, -1.0f32..1.0, -1.0f32..1.0).prop_filter_map(
            "a rotation",
            |(x, y, z, w)| {
                let q = Quat::from_xyzw(x, y, z, w);
                (q.length() > 0.1).then(|| q.normalize())
            },
        )
    }

    fn read(bytes: &[u8]) -> Bvh {
        Bvh::parse(std::str::from_utf8(bytes).expect("utf-8")).expect("the BVH reads")
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Every joint lands where the skeleton's forward kinematics puts it, frame
        /// by frame, whatever the rotations (near gimbal lock too), and the header's
        /// count is right after every frame.
        #[test]
        fn joints_read_back_where_the_pose_puts_them(
            frames in proptest::collection::vec(
                (proptest::array::uniform3(-2.0f32..2.0),
                 proptest::collection::vec(quat(), JOINT_COUNT)),
                1..4,
            ),
            lock in 0usize..JOINT_COUNT,
        ) {
            let (names, parents, rest, skeleton) = canonical();
            let mut w = BvhWriter::new(Cursor::new(Vec::new()), &names, &parents, &rest, 1.0 / 30.0)
                .expect("writes");
            let mut poses = Vec::new();
            for (k, (t, qs)) in frames.iter().enumerate() {
                let mut rotations: [Quat; JOINT_COUNT] = std::array::from_fn(|j| qs[j]);
                // one joint at Euler ZXY's singularity (x = ±90°)
                if k == 0 {
                    rotations[lock] = Quat::from_rotation_z(0.3)
                        * Quat::from_rotation_x(std::f32::consts::FRAC_PI_2)
                        * Quat::from_rotation_y(-0.7);
                }
                let pose = Pose { translation: Vec3::from(*t), rotations };
                w.push(pose.translation, &pose.rotations).expect("pushes");
                poses.push(pose);
                let bvh = read(w.out.get_ref());
                prop_assert_eq!(bvh.frame_count(), k + 1);
            }
            let bvh = read(&w.finish().expect("finishes").into_inner());
            prop_assert!((bvh.frame_time - 1.0 / 30.0).abs() < 1e-7);
            for (k, pose) in poses.iter().enumerate() {
                let want = skeleton.joint_positions(pose);
                let got = bvh.world(Some(k));
                for j in JointId::all() {
                    let i = bvh.joint_index(j.name()).expect("named");
                    let err = (got[i].1 - want[j.index()]).length();
                    prop_assert!(err < 1e-4, "frame {k} {}: {err} m", j.name());
                }
            }
        }
    }

    #[test]
    fn the_rest_pose_is_the_skeletons_and_repeats_hold_the_last_frame() {
        let (names, parents, rest, skeleton) = canonical();
        let mut w = BvhWriter::new(Cursor::new(Vec::new()), &names, &parents, &rest, 0.025)
            .expect("writes");
        w.repeat().expect("the rest pose");
        let mut pose = Pose {
            translation: Vec3::new(0.1, -0.2, 0.3),
            ..Default::default()
        };
        pose.rotations[JointId::LEFT_ELBOW.index()] = Quat::from_rotation_y(1.0);
        w.push(pose.translation, &pose.rotations).expect("pushes");
        w.repeat().expect("repeats");
        assert_eq!(w.frames(), 3);
        let text = String::from_utf8(w.finish().expect("finishes").into_inner()).expect("text");
        let bvh = Bvh::parse(&text).expect("reads");
        assert_eq!(bvh.frame_count(), 3);
        assert_eq!(bvh.joints.len(), JOINT_COUNT);
        let rest_world = bvh.world(None);
        let frame0 = bvh.world(Some(0));
        let pelvis = skeleton.rest_position(JointId::PELVIS);
        for j in JointId::all() {
            let i = bvh.joint_index(j.name()).expect("named");
            let at = skeleton.rest_position(j);
            assert!(
                (rest_world[i].1 - (at - pelvis)).length() < 1e-5,
                "{}",
                j.name()
            );
            assert!((frame0[i].1 - at).length() < 1e-5, "{}", j.name());
        }
        assert_eq!(bvh.frame(1), bvh.frame(2));
        // leaves end in End Sites; the wrist's lies along the forearm
        let wrist = bvh.joint_index("left_wrist").expect("wrist");
        let site = bvh.joints[wrist].end_site.expect("an End Site");
        let forearm = skeleton.rest_position(JointId::LEFT_WRIST)
            - skeleton.rest_position(JointId::LEFT_ELBOW);
        assert!((site - 0.5 * forearm).length() < 1e-5);
        assert!(text.contains("Frame Time: 0.025\n"));
    }

    #[test]
    fn bad_skeletons_and_poses_are_refused() {
        let (names, parents, rest, _) = canonical();
        let new = |p: &[i32]| BvhWriter::new(Cursor::new(Vec::new()), &names, p, &rest, 0.03);
        let mut loop_ = parents.clone();
        loop_[3] = 5;
        assert!(new(&loop_).is_err());
        assert!(new(&parents[1..]).is_err());
        assert!(BvhWriter::new(Cursor::new(Vec::new()), &names, &parents, &rest, 0.0).is_err());
        let mut w = new(&parents).expect("writes");
        let mut q = vec![Quat::IDENTITY; JOINT_COUNT];
        q[4] = Quat::from_xyzw(f32::NAN, 0.0, 0.0, 1.0);
        assert!(w.push(Vec3::ZERO, &q).is_err());
        assert!(w.push(Vec3::ZERO, &q[1..]).is_err());
        assert!(
            w.push(
                Vec3::new(f32::INFINITY, 0.0, 0.0),
                &[Quat::IDENTITY; JOINT_COUNT]
            )
            .is_err()
        );
        assert_eq!(w.frames(), 0);
        let bvh_text = String::from_utf8(w.finish().expect("finishes").into_inner()).expect("text");
        // no frame: the header says 0, which BVH readers (ours too) refuse as empty
        assert!(bvh_text.contains("Frames: 0 "));
    }
}
