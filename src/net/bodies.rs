//! Which bodies of a Kinect sensor's frames drive avatars: a try-on kiosk dresses the
//! customer in front of it, not the people walking past behind them
//! ([`ServerConfig::kinect_bodies`](super::ServerConfig::kinect_bodies),
//! [`ServerConfig::kinect_max_distance`](super::ServerConfig::kinect_max_distance)).

use crate::mocap::KinectBody;

/// How much nearer (metres) a body must be than one already chosen to take its place,
/// and how far past `kinect_max_distance` a chosen body may step before it is dropped:
/// two people at about the same distance do not trade places at every frame, and one
/// standing at the limit does not flicker.
pub(crate) const STICKY: f32 = 0.3;

/// Distance of a body's pelvis from its sensor, metres (infinite when it is not seen).
fn distance(b: &KinectBody) -> f32 {
    b.joints.pelvis().map_or(f32::INFINITY, |p| p.length())
}

/// The bodies one sensor chose last frame, by id.
#[derive(Debug, Default)]
pub(crate) struct BodyChoice {
    chosen: Vec<String>,
}

impl BodyChoice {
    /// The bodies of a frame that drive avatars, in frame order: those within
    /// `max_distance` of the sensor (0: any distance), of them the `count` nearest (0:
    /// all), a body chosen last frame counted [`STICKY`] nearer on both counts.
    pub(crate) fn choose(
        &mut self,
        mut bodies: Vec<KinectBody>,
        count: usize,
        max_distance: f32,
    ) -> Vec<KinectBody> {
        if count == 0 && max_distance <= 0.0 {
            return bodies;
        }
        let ranked = |b: &KinectBody| {
            let d = distance(b);
            if self.chosen.contains(&b.id) {
                d - STICKY
            } else {
                d
            }
        };
        let mut order: Vec<(f32, usize)> = bodies
            .iter()
            .enumerate()
            .map(|(i, b)| (ranked(b), i))
            .filter(|&(d, _)| max_distance <= 0.0 || d <= max_distance)
            .collect();
        order.sort_by(|a, b| a.0.total_cmp(&b.0));
        if count > 0 {
            order.truncate(count);
        }
        let mut keep = vec![false; bodies.len()];
        for (_, i) in order {
            keep[i] = true;
        }
        let mut k = keep.iter();
        bodies.retain(|_| k.next().copied().unwrap_or(false));
        self.chosen.clear();
        self.chosen.extend(bodies.iter().map(|b| b.id.clone()));
        bodies
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mocap::{KinectJoints, KinectKind};
    use glam::Vec3;

    /// A body whose pelvis is `d` metres in front of the sensor.
    fn at(id: &str, d: f32) -> KinectBody {
        let mut joints = KinectJoints::default();
        assert!(joints.set(KinectKind::V2, "SpineBase", Vec3::new(0.2, -0.3, -d)));
        KinectBody {
            id: id.into(),
            kind: KinectKind::V2,
            joints,
            floor: None,
        }
    }

    fn ids(bodies: &[KinectBody]) -> Vec<&str> {
        bodies.iter().map(|b| b.id.as_str()).collect()
    }

    #[test]
    fn the_nearest_bodies_are_chosen_and_keep_their_place_against_a_near_tie() {
        let mut c = BodyChoice::default();
        let frame = || vec![at("far", 3.5), at("near", 1.8), at("mid", 2.4)];
        assert_eq!(ids(&c.choose(frame(), 0, 0.0)), ["far", "near", "mid"]);
        assert_eq!(ids(&c.choose(frame(), 1, 0.0)), ["near"]);
        assert_eq!(ids(&c.choose(frame(), 2, 0.0)), ["near", "mid"]);
        // a newcomer 0.2 m nearer does not take the customer's place; 0.5 m nearer does
        let mut c = BodyChoice::default();
        assert_eq!(ids(&c.choose(vec![at("a", 2.0)], 1, 0.0)), ["a"]);
        assert_eq!(
            ids(&c.choose(vec![at("a", 2.0), at("b", 1.8)], 1, 0.0)),
            ["a"]
        );
        assert_eq!(
            ids(&c.choose(vec![at("a", 2.0), at("b", 1.5)], 1, 0.0)),
            ["b"]
        );
        // a body without a pelvis is never nearest
        let mut blind = at("blind", 1.0);
        blind.joints = KinectJoints::default();
        let mut c = BodyChoice::default();
        assert_eq!(
            ids(&c.choose(vec![blind, at("seen", 3.0)], 1, 0.0)),
            ["seen"]
        );
    }

    #[test]
    fn bodies_beyond_the_distance_are_left_out_with_a_margin_for_those_chosen() {
        let mut c = BodyChoice::default();
        let frame = |d: f32| vec![at("customer", d), at("passer-by", 4.0)];
        assert_eq!(ids(&c.choose(frame(2.9), 0, 3.0)), ["customer"]);
        // stepping just past the limit keeps the customer; well past it drops them
        assert_eq!(ids(&c.choose(frame(3.2), 0, 3.0)), ["customer"]);
        assert!(c.choose(frame(3.4), 0, 3.0).is_empty());
        // and coming back needs the limit itself
        assert!(c.choose(frame(3.2), 0, 3.0).is_empty());
    }
}
