//! [`SelfContact::limit_move`] passing over the pairs that cannot meet gives what
//! testing every candidate gives.

use glam::DVec3;

use super::tests::crumpled_sheet;

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// On a crumpled sheet moved by a shift plus moves of varying length (some far
    /// enough to carry vertices through the cloth, some vertices still), the limited
    /// move and the count of vertices held are the same to the bit with and without
    /// passing over the far pairs.
    #[test]
    fn passing_over_far_pairs_limits_a_move_as_testing_every_pair_does(
        offsets in proptest::collection::vec((-0.02f64..0.02, -0.02f64..0.02, -0.02f64..0.02), 64),
        moves in proptest::collection::vec(
            ((-1.0f64..1.0, -1.0f64..1.0, -1.0f64..1.0), proptest::bool::weighted(0.3)),
            64,
        ),
        shift in (-0.05f64..0.05, -0.05f64..0.05, -0.05f64..0.05),
        squash in 0.05f64..1.0,
        step in 0.0f64..0.03,
    ) {
        let (sc, _, triangles, y) = crumpled_sheet(&offsets, squash);
        let shift = DVec3::new(shift.0, shift.1, shift.2);
        let to: Vec<DVec3> = y
            .iter()
            .zip(&moves)
            .map(|(p, (m, still))| {
                let own = if *still { DVec3::ZERO } else { DVec3::new(m.0, m.1, m.2) * step };
                *p + shift + own
            })
            .collect();
        let (mut fast, mut every) = (to.clone(), to);
        let held_fast = sc.limit_move_with(&y, &mut fast, &triangles, true);
        let held_every = sc.limit_move_with(&y, &mut every, &triangles, false);
        proptest::prop_assert_eq!(held_fast, held_every);
        proptest::prop_assert!(fast == every, "the limited moves differ");
    }
}
