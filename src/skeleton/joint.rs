//! The 22 joints of the canonical skeleton (DESIGN §2): the body joints of the SMPL
//! kinematic tree, with their names and parents.

use std::fmt;

/// Number of joints (and bones) of the canonical skeleton.
pub const JOINT_COUNT: usize = 22;

/// Number of joint-angle DOFs: three per joint (DESIGN §2, SOR §3).
pub const DOF_COUNT: usize = 3 * JOINT_COUNT;

/// Index of a canonical joint, `0..22`. Bone `b` is the frame of joint `b`: it moves
/// the segment from joint `b` to its children.
#[derive(
    Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct JointId(pub u8);

const NAMES: [&str; JOINT_COUNT] = [
    "pelvis",
    "left_hip",
    "right_hip",
    "spine1",
    "left_knee",
    "right_knee",
    "spine2",
    "left_ankle",
    "right_ankle",
    "spine3",
    "left_foot",
    "right_foot",
    "neck",
    "left_collar",
    "right_collar",
    "head",
    "left_shoulder",
    "right_shoulder",
    "left_elbow",
    "right_elbow",
    "left_wrist",
    "right_wrist",
];

/// Parent of each joint; the pelvis (root) is its own parent marker `u8::MAX`.
const PARENTS: [u8; JOINT_COUNT] = [
    u8::MAX,
    0,
    0,
    0,
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8,
    9,
    9,
    9,
    12,
    13,
    14,
    16,
    17,
    18,
    19,
];

/// Mirror partner of each joint (left ↔ right; centre joints map to themselves).
const MIRROR: [u8; JOINT_COUNT] = [
    0, 2, 1, 3, 5, 4, 6, 8, 7, 9, 11, 10, 12, 14, 13, 15, 17, 16, 19, 18, 21, 20,
];

#[allow(missing_docs, reason = "the constant names are the joint names")]
impl JointId {
    pub const PELVIS: JointId = JointId(0);
    pub const LEFT_HIP: JointId = JointId(1);
    pub const RIGHT_HIP: JointId = JointId(2);
    pub const SPINE1: JointId = JointId(3);
    pub const LEFT_KNEE: JointId = JointId(4);
    pub const RIGHT_KNEE: JointId = JointId(5);
    pub const SPINE2: JointId = JointId(6);
    pub const LEFT_ANKLE: JointId = JointId(7);
    pub const RIGHT_ANKLE: JointId = JointId(8);
    pub const SPINE3: JointId = JointId(9);
    pub const LEFT_FOOT: JointId = JointId(10);
    pub const RIGHT_FOOT: JointId = JointId(11);
    pub const NECK: JointId = JointId(12);
    pub const LEFT_COLLAR: JointId = JointId(13);
    pub const RIGHT_COLLAR: JointId = JointId(14);
    pub const HEAD: JointId = JointId(15);
    pub const LEFT_SHOULDER: JointId = JointId(16);
    pub const RIGHT_SHOULDER: JointId = JointId(17);
    pub const LEFT_ELBOW: JointId = JointId(18);
    pub const RIGHT_ELBOW: JointId = JointId(19);
    pub const LEFT_WRIST: JointId = JointId(20);
    pub const RIGHT_WRIST: JointId = JointId(21);
}

impl JointId {
    /// All joints in index order; parents always come before their children.
    pub fn all() -> impl ExactSizeIterator<Item = JointId> + Clone {
        (0..JOINT_COUNT as u8).map(JointId)
    }

    /// Index into per-joint arrays.
    #[inline]
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// The SMPL name of the joint (`"left_shoulder"`).
    pub fn name(self) -> &'static str {
        NAMES[self.index()]
    }

    /// Parent joint, `None` for the pelvis.
    #[inline]
    pub fn parent(self) -> Option<JointId> {
        let p = PARENTS[self.index()];
        (p != u8::MAX).then_some(JointId(p))
    }

    /// The joint of the other side (left ↔ right); centre joints return themselves.
    pub fn mirror(self) -> JointId {
        JointId(MIRROR[self.index()])
    }

    /// Children in index order.
    pub fn children(self) -> impl Iterator<Item = JointId> {
        JointId::all().filter(move |c| c.parent() == Some(self))
    }

    /// Looks a joint up by its SMPL name.
    pub fn from_name(name: &str) -> Option<JointId> {
        NAMES
            .iter()
            .position(|n| *n == name)
            .map(|i| JointId(i as u8))
    }

    /// True for joints on the left side of the body (+X in the rest pose).
    pub fn is_left(self) -> bool {
        self.name().starts_with("left_")
    }

    /// True for joints on the right side of the body (−X in the rest pose).
    pub fn is_right(self) -> bool {
        self.name().starts_with("right_")
    }
}

impl fmt::Display for JointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_precede_children_and_names_round_trip() {
        for j in JointId::all() {
            if let Some(p) = j.parent() {
                assert!(p < j, "{j} has parent {p} after it");
            }
            assert_eq!(JointId::from_name(j.name()), Some(j));
            assert_eq!(j.mirror().mirror(), j);
            if j.is_left() {
                assert!(j.mirror().is_right());
                assert_eq!(
                    j.mirror().name().trim_start_matches("right_"),
                    j.name().trim_start_matches("left_")
                );
            }
        }
        assert_eq!(JointId::PELVIS.parent(), None);
        assert_eq!(
            JointId::SPINE3.children().collect::<Vec<_>>(),
            vec![JointId::NECK, JointId::LEFT_COLLAR, JointId::RIGHT_COLLAR]
        );
    }
}
