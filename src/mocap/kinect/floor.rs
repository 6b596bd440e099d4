//! The floor a body-tracking sensor sees (Kinect v2's `BodyFrame.FloorClipPlane`, or a
//! plane an Azure Kinect bridge found), used to level a tilted sensor and to stand the
//! avatar at the performer's height above the floor.

use glam::{Quat, Vec3};

use super::KinectKind;

/// Steepest sensor tilt accepted: the floor's normal at most 75° from the sensor's up.
const MIN_UP_COSINE: f32 = 0.26;
/// Highest sensor accepted above the floor, metres.
const MAX_HEIGHT: f32 = 10.0;

/// A floor plane in clothcast's world frame (before levelling): a point `p` lies
/// `normal · p + height` metres above the floor. Invariants: `normal` is a unit vector
/// within 75° of +Y, `height` (the sensor's height above the floor, as the sensor's
/// origin is the world origin) is finite and at most 10 m in size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Floor {
    normal: Vec3,
    height: f32,
    level: Quat,
}

impl Floor {
    /// The floor y = 0 of a source whose positions are already levelled (Xsens MVN
    /// stands its performers on its own floor): levelling changes nothing.
    pub const LEVEL: Floor = Floor {
        normal: Vec3::Y,
        height: 0.0,
        level: Quat::IDENTITY,
    };

    /// The floor from its up normal and the sensor's height above it (world frame,
    /// metres), checked: `Err` names what is wrong.
    pub fn new(normal: Vec3, height: f32) -> Result<Self, String> {
        if !normal.is_finite() || !height.is_finite() {
            return Err("its numbers must be finite".into());
        }
        let len = normal.length();
        if !(0.9..=1.1).contains(&len) {
            return Err(format!("its normal has length {len}, not 1"));
        }
        // the plane's equation holds with both signs; up is the side the sensor is on
        let (normal, height) = if normal.y < 0.0 {
            (-normal / len, -height)
        } else {
            (normal / len, height)
        };
        if normal.y < MIN_UP_COSINE {
            return Err(format!(
                "its normal ({:.2}, {:.2}, {:.2}) tilts more than 75° from the sensor's up",
                normal.x, normal.y, normal.z
            ));
        }
        if height.abs() > MAX_HEIGHT {
            return Err(format!(
                "the sensor would be {height} m from the floor (at most 10 m)"
            ));
        }
        Ok(Self {
            normal,
            height,
            level: Quat::from_rotation_arc(normal, Vec3::Y),
        })
    }

    /// The unit up normal (world frame, before levelling).
    pub fn normal(&self) -> Vec3 {
        self.normal
    }

    /// The sensor's height above the floor, metres.
    pub fn height(&self) -> f32 {
        self.height
    }

    /// A world position in the levelled frame: turned by the smallest rotation that
    /// takes the floor's normal to +Y (a sensor's tilt and roll taken out, its heading
    /// kept), then raised so that the floor is y = 0.
    pub fn level(&self, p: Vec3) -> Vec3 {
        self.level * p + Vec3::Y * self.height
    }
}

impl KinectKind {
    /// The floor from a sensor's plane `[a, b, c, d]` (`a x + b y + c z + d = 0` in the
    /// sensor's camera coordinates and units, `(a, b, c)` its unit normal, as Kinect
    /// v2's `FloorClipPlane`). `Ok(None)` for the all-zero plane the SDK reports until
    /// it has found the floor; `Err` names what is wrong with any other unusable plane
    /// (not finite, normal not unit, tilted more than 75°, more than 10 m away).
    pub fn floor(self, plane: [f32; 4]) -> Result<Option<Floor>, String> {
        if plane == [0.0; 4] {
            return Ok(None);
        }
        // the normal turns as positions do (the unit scale left out); d scales with them
        let normal = self.to_world([plane[0], plane[1], plane[2]]);
        let scale = match self {
            Self::V2 => 1.0,
            Self::Azure => 0.001,
        };
        Floor::new(normal / scale, plane[3] * scale).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levelling_puts_the_floor_at_zero_and_keeps_heights_above_it() {
        // a v2 sensor 1.2 m up, pitched 20° down: floor normal (0, cos, -sin) in camera
        let t = 20f32.to_radians();
        let f = KinectKind::V2
            .floor([0.0, t.cos(), -t.sin(), 1.2])
            .expect("valid")
            .expect("found");
        assert!((f.height() - 1.2).abs() < 1e-6);
        // camera points: where the optical axis meets the floor, and 1 m above it
        let ahead = Vec3::new(0.0, 0.0, 1.2 / t.sin());
        for (cam, above) in [
            (ahead, 0.0),
            (ahead + Vec3::new(0.0, t.cos(), -t.sin()), 1.0),
        ] {
            let w = KinectKind::V2.to_world(cam.to_array());
            let l = f.level(w);
            assert!((l.y - above).abs() < 1e-4, "{cam} → {l}");
        }
        // the same plane as an Azure bridge states it (millimetres, Y down)
        let a = KinectKind::Azure
            .floor([0.0, -t.cos(), -t.sin(), 1200.0])
            .expect("valid")
            .expect("found");
        assert!((a.normal() - f.normal()).length() < 1e-6 && (a.height() - 1.2).abs() < 1e-4);
        // the plane's other sign is the same floor
        let flipped = KinectKind::V2
            .floor([0.0, -t.cos(), t.sin(), -1.2])
            .expect("valid")
            .expect("found");
        assert!((flipped.normal() - f.normal()).length() < 1e-6);
        assert!((flipped.height() - 1.2).abs() < 1e-6);
    }

    #[test]
    fn unusable_planes_are_named_and_the_unknown_floor_is_none() {
        assert_eq!(KinectKind::V2.floor([0.0; 4]), Ok(None));
        for (plane, why) in [
            ([f32::NAN, 1.0, 0.0, 1.0], "finite"),
            ([0.0, 1.0, f32::INFINITY, 1.0], "finite"),
            ([0.0, 3.0, 0.0, 1.0], "length"),
            ([0.0, 0.0, 0.0, 1.0], "length"),
            ([0.0, 0.2, 0.98, 1.0], "75°"),
            ([0.0, 1.0, 0.0, 12.0], "10 m"),
        ] {
            match KinectKind::V2.floor(plane) {
                Err(e) => assert!(e.contains(why), "{plane:?}: {e}"),
                Ok(f) => panic!("{plane:?} accepted as {f:?}"),
            }
        }
        assert!(KinectKind::Azure.floor([0.0, -1.0, 0.0, 12_000.0]).is_err());
    }
}
