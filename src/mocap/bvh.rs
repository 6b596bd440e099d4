//! BVH (Biovision Hierarchy) motion files: any hierarchy, any channel order per joint,
//! 6- and 3-channel joints, End Sites, CRLF line ends. Bad files are reported with the
//! line number where the problem was found.

use glam::{Quat, Vec3};

mod write;
pub use write::BvhWriter;

/// Largest number of joints accepted.
pub const MAX_JOINTS: usize = 1024;
/// Largest number of frames accepted (about 4.6 hours at 120 fps).
pub const MAX_FRAMES: usize = 2_000_000;

/// One channel of a joint.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Channel {
    /// Translation along X (file units).
    Xposition,
    /// Translation along Y.
    Yposition,
    /// Translation along Z.
    Zposition,
    /// Rotation about X, degrees.
    Xrotation,
    /// Rotation about Y, degrees.
    Yrotation,
    /// Rotation about Z, degrees.
    Zrotation,
}

impl Channel {
    fn parse(s: &str) -> Option<Channel> {
        Some(match s.to_ascii_lowercase().as_str() {
            "xposition" => Channel::Xposition,
            "yposition" => Channel::Yposition,
            "zposition" => Channel::Zposition,
            "xrotation" => Channel::Xrotation,
            "yrotation" => Channel::Yrotation,
            "zrotation" => Channel::Zrotation,
            _ => return None,
        })
    }
}

/// A joint of the file's hierarchy. Offsets are in file units.
#[derive(Clone, Debug)]
pub struct BvhJoint {
    /// Name as written in the file.
    pub name: String,
    /// Parent joint index (`None` for a root).
    pub parent: Option<usize>,
    /// Offset from the parent in the parent's frame, file units.
    pub offset: Vec3,
    /// Channels in file order.
    pub channels: Vec<Channel>,
    /// Index of this joint's first channel within a frame's values.
    pub first_channel: usize,
    /// Offset of the End Site, if the joint has one.
    pub end_site: Option<Vec3>,
}

/// A parsed BVH file.
#[derive(Clone, Debug)]
pub struct Bvh {
    /// Joints in file order (parents before children).
    pub joints: Vec<BvhJoint>,
    /// Seconds per frame.
    pub frame_time: f32,
    channel_count: usize,
    data: Vec<f32>,
}

/// Why a BVH file was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("BVH line {line}: {message}")]
pub struct BvhError {
    /// 1-based line number where the problem was found.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

struct Tokens<'a> {
    lines: Vec<&'a str>,
    line: usize,
    toks: std::vec::IntoIter<&'a str>,
}

impl<'a> Tokens<'a> {
    fn new(text: &'a str) -> Self {
        Self {
            lines: text.lines().collect(),
            line: 0,
            toks: Vec::new().into_iter(),
        }
    }

    fn err(&self, m: impl Into<String>) -> BvhError {
        BvhError {
            line: self.line.max(1),
            message: m.into(),
        }
    }

    fn next(&mut self) -> Option<&'a str> {
        loop {
            if let Some(t) = self.toks.next() {
                return Some(t);
            }
            if self.line >= self.lines.len() {
                return None;
            }
            self.toks = self.lines[self.line]
                .split_whitespace()
                .collect::<Vec<_>>()
                .into_iter();
            self.line += 1;
        }
    }

    fn expect_any(&mut self, what: &str) -> Result<&'a str, BvhError> {
        self.next().ok_or_else(|| BvhError {
            line: self.lines.len().max(1),
            message: format!("file ends where {what} was expected"),
        })
    }

    fn keyword(&mut self, word: &str) -> Result<(), BvhError> {
        let t = self.expect_any(word)?;
        if t.eq_ignore_ascii_case(word) {
            Ok(())
        } else {
            Err(self.err(format!("expected {word:?}, found {t:?}")))
        }
    }

    fn number(&mut self, what: &str) -> Result<f32, BvhError> {
        let t = self.expect_any(what)?;
        let v: f32 = t
            .parse()
            .map_err(|_| self.err(format!("{what}: {t:?} is not a number")))?;
        if !v.is_finite() {
            return Err(self.err(format!("{what}: {t:?} is not finite")));
        }
        Ok(v)
    }

    fn vec3(&mut self, what: &str) -> Result<Vec3, BvhError> {
        Ok(Vec3::new(
            self.number(what)?,
            self.number(what)?,
            self.number(what)?,
        ))
    }
}

impl Bvh {
    /// Parses a whole BVH file.
    pub fn parse(text: &str) -> Result<Bvh, BvhError> {
        let mut t = Tokens::new(text);
        t.keyword("HIERARCHY")?;
        let mut joints: Vec<BvhJoint> = Vec::new();
        let mut channel_count = 0usize;
        let first = t.expect_any("ROOT")?;
        if !first.eq_ignore_ascii_case("ROOT") {
            return Err(t.err(format!("expected \"ROOT\", found {first:?}")));
        }
        // stack of open joints; None marks an End Site block
        let mut stack: Vec<Option<usize>> = Vec::new();
        let mut pending_name = Some(t.expect_any("joint name")?.to_string());
        loop {
            if let Some(name) = pending_name.take() {
                t.keyword("{")?;
                if joints.len() >= MAX_JOINTS {
                    return Err(t.err(format!("more than {MAX_JOINTS} joints")));
                }
                let parent = stack.iter().rev().flatten().next().copied();
                t.keyword("OFFSET")?;
                let offset = t.vec3("OFFSET")?;
                joints.push(BvhJoint {
                    name,
                    parent,
                    offset,
                    channels: Vec::new(),
                    first_channel: channel_count,
                    end_site: None,
                });
                let me = joints.len() - 1;
                stack.push(Some(me));
                let kw = t.expect_any("CHANNELS")?;
                if !kw.eq_ignore_ascii_case("CHANNELS") {
                    return Err(t.err(format!(
                        "joint {:?}: expected \"CHANNELS\", found {kw:?}",
                        joints[me].name
                    )));
                }
                let n_tok = t.expect_any("channel count")?;
                let n: usize = n_tok
                    .parse()
                    .map_err(|_| t.err(format!("channel count {n_tok:?} is not a number")))?;
                if n > 6 {
                    return Err(t.err(format!(
                        "joint {:?} declares {n} channels (at most 6)",
                        joints[me].name
                    )));
                }
                for k in 0..n {
                    let c = t.expect_any("channel name")?;
                    let ch = Channel::parse(c).ok_or_else(|| {
                        t.err(format!(
                            "joint {:?}: channel {} of {n} is {c:?}, not a known channel name",
                            joints[me].name,
                            k + 1
                        ))
                    })?;
                    if joints[me].channels.contains(&ch) {
                        return Err(t.err(format!(
                            "joint {:?}: channel {c:?} listed twice",
                            joints[me].name
                        )));
                    }
                    joints[me].channels.push(ch);
                }
                channel_count += n;
                continue;
            }
            let tok = t.expect_any("JOINT, End Site or }")?;
            if tok.eq_ignore_ascii_case("JOINT") {
                if stack.last().copied().flatten().is_none() {
                    return Err(t.err("JOINT inside an End Site"));
                }
                pending_name = Some(t.expect_any("joint name")?.to_string());
            } else if tok.eq_ignore_ascii_case("End") {
                t.keyword("Site")?;
                t.keyword("{")?;
                t.keyword("OFFSET")?;
                let off = t.vec3("End Site OFFSET")?;
                let owner = stack
                    .last()
                    .copied()
                    .flatten()
                    .ok_or_else(|| t.err("End Site inside an End Site"))?;
                joints[owner].end_site = Some(off);
                t.keyword("}")?;
            } else if tok == "}" {
                stack.pop();
                if stack.is_empty() {
                    break;
                }
            } else {
                return Err(t.err(format!("unexpected {tok:?} in the hierarchy")));
            }
        }
        t.keyword("MOTION")?;
        t.keyword("Frames:")?;
        let nt = t.expect_any("frame count")?;
        let frames: usize = nt
            .parse()
            .map_err(|_| t.err(format!("frame count {nt:?} is not a whole number")))?;
        if frames > MAX_FRAMES {
            return Err(t.err(format!("{frames} frames declared (at most {MAX_FRAMES})")));
        }
        t.keyword("Frame")?;
        t.keyword("Time:")?;
        let frame_time = t.number("Frame Time")?;
        if frame_time <= 0.0 {
            return Err(t.err(format!("Frame Time {frame_time} must be positive")));
        }
        // frames: one per remaining non-empty line, exactly `channel_count` values each
        let header_line = t.line;
        let remaining = &t.lines[header_line.min(t.lines.len())..];
        // never trust the declared count for the allocation size
        let mut data = Vec::with_capacity(frames.min(remaining.len()) * channel_count);
        let mut seen = 0usize;
        for (k, line) in remaining.iter().enumerate() {
            let lineno = header_line + k + 1;
            if line.trim().is_empty() {
                continue;
            }
            if seen == frames {
                return Err(BvhError {
                    line: lineno,
                    message: format!("more frame lines than the {frames} declared"),
                });
            }
            let before = data.len();
            for tok in line.split_whitespace() {
                let v: f32 = tok.parse().map_err(|_| BvhError {
                    line: lineno,
                    message: format!("frame value {tok:?} is not a number"),
                })?;
                if !v.is_finite() {
                    return Err(BvhError {
                        line: lineno,
                        message: format!("frame value {tok:?} is not finite"),
                    });
                }
                data.push(v);
            }
            let got = data.len() - before;
            if got != channel_count {
                return Err(BvhError {
                    line: lineno,
                    message: format!(
                        "frame has {got} values, the hierarchy has {channel_count} channels"
                    ),
                });
            }
            seen += 1;
        }
        if seen != frames {
            return Err(BvhError {
                line: t.lines.len().max(1),
                message: format!("{frames} frames declared, {seen} found"),
            });
        }
        if frames == 0 {
            return Err(BvhError {
                line: header_line,
                message: "the file has no frames".into(),
            });
        }
        Ok(Bvh {
            joints,
            frame_time,
            channel_count,
            data,
        })
    }

    /// The joints' names, in file order (what [`crate::mocap::Profile::detect`] reads).
    pub fn joint_names(&self) -> Vec<&str> {
        self.joints.iter().map(|j| j.name.as_str()).collect()
    }

    /// Number of frames.
    pub fn frame_count(&self) -> usize {
        self.data.len().checked_div(self.channel_count).unwrap_or(0)
    }

    /// Total channels per frame.
    pub fn channel_count(&self) -> usize {
        self.channel_count
    }

    /// Index of the joint with this name.
    pub fn joint_index(&self, name: &str) -> Option<usize> {
        self.joints.iter().position(|j| j.name == name)
    }

    /// Channel values of frame `f`.
    ///
    /// # Panics
    /// If `f >= frame_count()` (a programming error).
    #[track_caller]
    pub fn frame(&self, f: usize) -> &[f32] {
        &self.data[f * self.channel_count..(f + 1) * self.channel_count]
    }

    /// Local rotation and translation (file units) of joint `j` at frame `f`; `f = None`
    /// gives the rest pose (all channels zero). Rotations compose in the order the
    /// channels are listed: `Zrotation Yrotation Xrotation` is `Rz · Ry · Rx`.
    pub fn local(&self, j: usize, f: Option<usize>) -> (Quat, Vec3) {
        let joint = &self.joints[j];
        let mut q = Quat::IDENTITY;
        let mut t = joint.offset;
        if let Some(f) = f {
            let vals =
                &self.frame(f)[joint.first_channel..joint.first_channel + joint.channels.len()];
            for (c, &v) in joint.channels.iter().zip(vals) {
                let r = v.to_radians();
                match c {
                    Channel::Xposition => t.x += v,
                    Channel::Yposition => t.y += v,
                    Channel::Zposition => t.z += v,
                    Channel::Xrotation => q *= Quat::from_rotation_x(r),
                    Channel::Yrotation => q *= Quat::from_rotation_y(r),
                    Channel::Zrotation => q *= Quat::from_rotation_z(r),
                }
            }
        }
        (q.normalize(), t)
    }

    /// World rotation and position (file units) of every joint at frame `f` (`None`:
    /// rest pose).
    pub fn world(&self, f: Option<usize>) -> Vec<(Quat, Vec3)> {
        let mut out: Vec<(Quat, Vec3)> = Vec::with_capacity(self.joints.len());
        for j in 0..self.joints.len() {
            let (q, t) = self.local(j, f);
            out.push(match self.joints[j].parent {
                None => (q, t),
                Some(p) => {
                    let (pq, pt) = out[p];
                    ((pq * q).normalize(), pt + pq * t)
                }
            });
        }
        out
    }
}

#[cfg(test)]
mod tests;
