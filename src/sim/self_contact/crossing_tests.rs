//! A vertex–triangle crossing found over a step is a real contact: where the step is
//! said to cross, the vertex lies on the triangle.

use glam::DVec3;

use super::crossing_time;
use crate::mesh::closest_on_triangle_f64;

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

    /// A triangle that turns and moves by up to 10 cm and a vertex that moves by up to
    /// 10 cm (all within a 10 cm box): whenever a crossing time is returned, the
    /// vertex is within a micrometre of the triangle at that time. (Placing the zero
    /// of the height by linear interpolation, as before `sim::REVISION` 8, fails this
    /// with vertices centimetres from the triangle.)
    #[test]
    fn a_crossing_is_where_the_vertex_meets_the_triangle(
        from in proptest::collection::vec((-0.05f64..0.05, -0.05f64..0.05, -0.05f64..0.05), 4),
        to in proptest::collection::vec((-0.05f64..0.05, -0.05f64..0.05, -0.05f64..0.05), 4),
    ) {
        let from: Vec<DVec3> = from.iter().map(|p| DVec3::new(p.0, p.1, p.2)).collect();
        let to: Vec<DVec3> = to.iter().map(|p| DVec3::new(p.0, p.1, p.2)).collect();
        if let Some(s) = crossing_time(&from, &to, [1, 2, 3], 0) {
            let at: Vec<DVec3> = from.iter().zip(&to).map(|(a, b)| a.lerp(*b, s)).collect();
            let (q, _, _) = closest_on_triangle_f64(at[0], at[1], at[2], at[3]);
            let gap = at[0].distance(q);
            proptest::prop_assert!(gap < 1e-6, "crossing at s = {s}, {gap} m from the triangle");
        }
    }
}
