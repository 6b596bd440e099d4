//! Tests of the self-contact model: derivatives against finite differences, the
//! barrier, pairs and exclusions, crossings and the carried move, the crossing count.

use super::edges::{cross_norm2, edge_distance, mollifier, segment_closest};
use super::*;

fn tri() -> [DVec3; 3] {
    [
        DVec3::new(0.0, 0.0, 0.0),
        DVec3::new(0.03, 0.002, -0.001),
        DVec3::new(0.004, 0.001, 0.025),
    ]
}

fn coords(p: DVec3, x: [DVec3; 3]) -> [f64; 12] {
    let mut q = [0.0; 12];
    for (i, v) in [p, x[0], x[1], x[2]].iter().enumerate() {
        q[3 * i..3 * i + 3].copy_from_slice(&v.to_array());
    }
    q
}

fn split(q: &[f64; 12]) -> (DVec3, [DVec3; 3]) {
    let v = |i: usize| DVec3::new(q[3 * i], q[3 * i + 1], q[3 * i + 2]);
    (v(0), [v(1), v(2), v(3)])
}

/// Finite differences of d (central, 1e-7 m) against the gradient, and of the
/// gradient against the Hessian, for a point over each of the triangle's seven
/// regions.
#[test]
fn the_pair_distance_derivatives_match_finite_differences() {
    let x = tri();
    let points = [
        (DVec3::new(0.01, 0.004, 0.008), "face"),
        (DVec3::new(0.015, 0.003, -0.006), "edge 0"),
        (DVec3::new(0.022, 0.006, 0.02), "edge 1"),
        (DVec3::new(-0.004, 0.002, 0.012), "edge 2"),
        (DVec3::new(-0.003, 0.002, -0.004), "corner 0"),
        (DVec3::new(0.034, 0.004, -0.002), "corner 1"),
        (DVec3::new(0.004, -0.002, 0.03), "corner 2"),
    ];
    let h = 1e-7;
    let mut features = Vec::new();
    for (p, name) in points {
        features.push(closest_on_triangle_f64(p, x[0], x[1], x[2]).2);
        let q0 = coords(p, x);
        let pd = pair_distance(p, x, true).expect("off the triangle");
        for k in 0..12 {
            let mut qp = q0;
            let mut qm = q0;
            qp[k] += h;
            qm[k] -= h;
            let (pp, xp) = split(&qp);
            let (pm, xm) = split(&qm);
            let dp = pair_distance(pp, xp, true).expect("off");
            let dm = pair_distance(pm, xm, true).expect("off");
            let fd = (dp.d - dm.d) / (2.0 * h);
            let an = pd.grad[k / 3][k % 3];
            assert!(
                (fd - an).abs() < 1e-6,
                "{name}: ∂d/∂q{k}: fd {fd} analytic {an}"
            );
            for l in 0..12 {
                let fd = (dp.grad[l / 3][l % 3] - dm.grad[l / 3][l % 3]) / (2.0 * h);
                // DMat3 is column-major: col(b)[a] = entry (a, b)
                let an = pd.hess[l / 3][k / 3].col(k % 3)[l % 3];
                let scale = 1.0 + an.abs();
                assert!(
                    (fd - an).abs() < 1e-4 * scale,
                    "{name}: ∂²d/∂q{l}∂q{k}: fd {fd} analytic {an}"
                );
            }
        }
    }
    // the points do reach every kind of region
    assert!(features.contains(&Feature::Face));
    for k in 0..3 {
        assert!(features.contains(&Feature::Edge(k)), "edge {k}");
        assert!(features.contains(&Feature::Vertex(k)), "corner {k}");
    }
}

/// Two triangles crossing each other count the edges that pierce the other; moved
/// apart they count none, and triangles that share a corner are not tested.
#[test]
fn edges_through_the_garment_are_counted() {
    let mut y = vec![
        DVec3::new(0.0, 0.0, 0.0),
        DVec3::new(0.04, 0.0, 0.0),
        DVec3::new(0.0, 0.0, 0.04),
        // a second triangle standing up through the first
        DVec3::new(0.01, -0.01, 0.01),
        DVec3::new(0.01, 0.02, 0.01),
        DVec3::new(0.02, 0.02, 0.015),
    ];
    let triangles = vec![[0, 2, 1], [3, 4, 5]];
    // edges 3–4 and 3–5 pierce the first triangle; none of its edges pierces the
    // second
    assert_eq!(self_intersections(&y, &triangles), 2);
    for p in &mut y[3..] {
        p.y += 0.05;
    }
    assert_eq!(self_intersections(&y, &triangles), 0);
    // a fan of two triangles folded onto each other shares vertex 0: not a crossing
    let fan = vec![[0, 2, 1], [0, 1, 4]];
    let mut folded = y.clone();
    folded[4] = DVec3::new(0.01, 0.0, 0.02);
    assert_eq!(self_intersections(&folded, &fan), 0);
    assert_eq!(self_intersections(&[], &[]), 0);
}

/// The vertex–triangle pairs of `pairs` (the edge pairs left out).
fn vertex_pairs(pairs: &[Pair]) -> Vec<Pair> {
    pairs
        .iter()
        .copied()
        .filter(|p| p.0 & EDGE_PAIR == 0)
        .collect()
}

fn model(margin: f64) -> SelfContact {
    SelfContact {
        margin,
        stiffness: 1e5,
        excluded: Vec::new(),
        cell: 0.03,
        edges: Vec::new(),
        edge_rest2: Vec::new(),
        parallel: 1e-3,
    }
}

#[test]
fn the_barrier_derivatives_match_finite_differences_and_vanish_at_the_margin() {
    let sc = model(0.003);
    let h = 1e-10;
    for d in [0.0001, 0.0005, 0.001, 0.002, 0.0029] {
        let (_, de, dde) = penalty(d, 1e-4, &sc);
        let fd = (penalty(d + h, 1e-4, &sc).0 - penalty(d - h, 1e-4, &sc).0) / (2.0 * h);
        assert!((fd - de).abs() < 1e-5 * de.abs(), "E′ at {d}: {fd} vs {de}");
        let fd2 = (penalty(d + h, 1e-4, &sc).1 - penalty(d - h, 1e-4, &sc).1) / (2.0 * h);
        assert!(
            (fd2 - dde).abs() < 1e-4 * dde.abs(),
            "E″ at {d}: {fd2} vs {dde}"
        );
        assert!(de < 0.0 && dde > 0.0, "repulsive and convex");
    }
    assert_eq!(penalty(0.003, 1e-4, &sc), (0.0, 0.0, 0.0));
    let (e, de, dde) = penalty(0.003 - 1e-7, 1e-4, &sc);
    assert!(
        e < 1e-15 && de.abs() < 1e-8 && dde < 1e-2,
        "C² at the margin"
    );
    // unbounded towards contact: the force at 1 µm is over 100× that at 1 mm
    assert!(penalty(1e-6, 1e-4, &sc).1 < 100.0 * penalty(1e-3, 1e-4, &sc).1);
    assert_eq!(penalty(0.0, 1e-4, &sc).0, f64::INFINITY);
}

/// The barrier's gradient at `y` (every vertex of area 1 cm²), after checking that its
/// energy there is positive and that it pushes vertex `v` up (+y: ∇E points down).
fn pushed_up(sc: &SelfContact, y: &[DVec3], triangles: &[[u32; 3]], v: usize) -> Vec<DVec3> {
    let area = vec![1e-4; y.len()];
    assert!(sc.energy(y, triangles, &area, None) > 0.0);
    let mut g = vec![DVec3::ZERO; y.len()];
    sc.add_gradient(y, triangles, &area, None, &mut g);
    assert!(g[v].y < 0.0, "vertex {v} is pushed up: ∇E {:?}", g[v]);
    g
}

#[test]
fn a_vertex_is_paired_with_far_triangles_only_and_a_step_through_one_is_a_crossing() {
    // two triangles 2 mm apart, and a vertex of a third, unconnected
    let y = vec![
        DVec3::new(0.0, 0.0, 0.0),
        DVec3::new(0.03, 0.0, 0.0),
        DVec3::new(0.0, 0.0, 0.03),
        DVec3::new(0.005, 0.002, 0.005),
        DVec3::new(0.5, 0.002, 0.0),
        DVec3::new(0.5, 0.002, 0.5),
    ];
    let triangles = vec![[0, 2, 1], [3, 4, 5]];
    let far = y
        .iter()
        .map(|p| *p + DVec3::Y * if p.y > 0.0 { 1.0 } else { 0.0 })
        .collect::<Vec<_>>();
    let sc = SelfContact::new(&far, &triangles, 0.003, 1e5, 1e-3);
    assert_eq!(sc.excluded_count(), 0);
    let pairs = sc.pairs(&y, &triangles, 0.003);
    assert_eq!(
        vertex_pairs(&pairs),
        vec![(3, 0)],
        "only vertex 3 is within 3 mm of a triangle not its own"
    );
    let g = pushed_up(&sc, &y, &triangles, 3);
    let total: DVec3 = g.iter().copied().sum();
    assert!(
        total.length() < 1e-12 * g[3].length().max(1.0),
        "forces balance"
    );
    // the same layout as modelled is excluded
    let modelled = SelfContact::new(&y, &triangles, 0.003, 1e5, 1e-3);
    // (vertex 3 over triangle 0, and vertex 3's two edges over triangle 0's far edge)
    assert_eq!(vertex_pairs(&modelled.excluded), vec![(3, 0)]);
    assert_eq!(modelled.excluded_count(), 3);
    assert!(modelled.pairs(&y, &triangles, 0.003).is_empty());
    // vertex 3 stepping 4 mm down goes through triangle 0; 4 mm sideways does not
    let mut down = y.clone();
    down[3].y -= 0.004;
    // (vertex 3's pairs only: moving it alone also tilts triangle 1 over vertex 0)
    let reach: Vec<Pair> = sc
        .pairs(&y, &triangles, 0.01)
        .into_iter()
        .filter(|p| p.0 == 3)
        .collect();
    assert_eq!(reach, vec![(3, 0)]);
    assert!(sc.crossing(&y, &down, &triangles, &reach));
    // 2 mm → 0.1 mm over triangle 0 closes in on it; 2 mm → 1 mm does not
    let mut onto = y.clone();
    onto[3].y = 0.0001;
    assert!(sc.crossing(&y, &onto, &triangles, &reach));
    onto[3].y = 0.001;
    assert!(!sc.crossing(&y, &onto, &triangles, &reach));
    // a prediction is limited as a step is: brought from 2 mm to 0.1 mm over triangle 0,
    // vertex 3 is held (it moves as triangle 0 does, here not at all); to 1 mm it is not
    let mut squeezed = y.clone();
    squeezed[3].y = 0.0001;
    assert_eq!(sc.limit_move(&y, &mut squeezed, &triangles), 1);
    assert_eq!(squeezed[3], y[3]);
    let mut closer = onto.clone();
    assert_eq!(sc.limit_move(&y, &mut closer, &triangles), 0);
    assert_eq!(closer, onto);
    let mut side = y.clone();
    side[3].x += 0.004;
    assert!(!sc.crossing(&y, &side, &triangles, &reach));
    // a predicted move that carries vertex 3 through triangle 0 is limited: the
    // vertex moves as triangle 0 does (here: not at all)
    let mut limited = down.clone();
    assert_eq!(sc.limit_move(&y, &mut limited, &triangles), 1);
    assert_eq!(limited[3], y[3]);
    assert!(!sc.crossing(&y, &limited, &triangles, &reach));
    // triangle 0 lifted 5 mm through vertex 3, which stays: the vertex is carried up
    let mut lifted = y.clone();
    for v in 0..3 {
        lifted[v].y += 0.005;
    }
    assert!(sc.crossing(&y, &lifted, &triangles, &reach));
    let before = lifted.clone();
    assert_eq!(sc.limit_move(&y, &mut lifted, &triangles), 1);
    assert!((lifted[3] - (y[3] + DVec3::Y * 0.005)).length() < 1e-12);
    assert_eq!(lifted[..3], before[..3], "the triangle moves as predicted");
    assert!(!sc.crossing(&y, &lifted, &triangles, &reach));
    let mut past = y.clone();
    past[3] = DVec3::new(-0.02, -0.002, -0.02);
    assert!(
        !sc.crossing(&y, &past, &triangles, &reach),
        "passes beside the triangle"
    );
}

/// An n × n sheet of triangles, 1 cm apart, flat in the XZ plane, with each vertex's
/// neighbours.
fn sheet(n: u32) -> (Vec<DVec3>, Vec<[u32; 3]>) {
    let y = (0..n * n)
        .map(|i| DVec3::new((i % n) as f64 * 0.01, 0.0, (i / n) as f64 * 0.01))
        .collect::<Vec<_>>();
    let mut triangles = Vec::new();
    for j in 0..n - 1 {
        for i in 0..n - 1 {
            let v = j * n + i;
            triangles.push([v, v + n, v + 1]);
            triangles.push([v + 1, v + n, v + n + 1]);
        }
    }
    (y, triangles)
}

/// Every pair within `reach`, the obvious way (what the grid search must return).
fn pairs_by_brute_force(
    sc: &SelfContact,
    y: &[DVec3],
    triangles: &[[u32; 3]],
    reach: f64,
) -> Vec<Pair> {
    let mut out = Vec::new();
    for (v, &p) in y.iter().enumerate() {
        for (t, tri) in triangles.iter().enumerate() {
            if !p.is_finite()
                || tri.iter().any(|&w| !y[w as usize].is_finite())
                || tri.contains(&(v as u32))
                || sc.excluded.binary_search(&(v as u32, t as u32)).is_ok()
            {
                continue;
            }
            let [a, b, c] = tri.map(|w| y[w as usize]);
            let (q, _, _) = closest_on_triangle_f64(p, a, b, c);
            if p.distance_squared(q) < reach * reach {
                out.push((v as u32, t as u32));
            }
        }
    }
    // edge pairs: every two edges sharing no vertex, the lower index first
    for (i, e) in sc.edges.iter().enumerate() {
        for (j, f) in sc.edges.iter().enumerate().skip(i + 1) {
            let x = [e[0], e[1], f[0], f[1]].map(|w| y[w as usize]);
            let pair = (EDGE_PAIR | i as u32, j as u32);
            if x.iter().any(|p| !p.is_finite())
                || f.contains(&e[0])
                || f.contains(&e[1])
                || sc.excluded.binary_search(&pair).is_ok()
            {
                continue;
            }
            if segment_gap(x) < reach {
                out.push(pair);
            }
        }
    }
    out
}

/// The 8×8 sheet with a 3 mm margin, crumpled: squashed by `squash` towards the origin
/// and each vertex moved by its offset (metres). Returns the model, its rest positions,
/// triangles and the crumpled state.
pub(super) fn crumpled_sheet(
    offsets: &[(f64, f64, f64)],
    squash: f64,
) -> (SelfContact, Vec<DVec3>, Vec<[u32; 3]>, Vec<DVec3>) {
    let (rest, triangles) = sheet(8);
    let sc = SelfContact::new(&rest, &triangles, 0.003, 1e5, 1e-3);
    let y = rest
        .iter()
        .zip(offsets)
        .map(|(p, o)| *p * squash + DVec3::new(o.0, o.1, o.2))
        .collect();
    (sc, rest, triangles, y)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// The grid search finds exactly the pairs within reach, in (vertex, triangle)
    /// order, whatever the state: a sheet crumpled into a few centimetres (its own
    /// layers within reach of each other everywhere), a vertex flung far or made
    /// non-finite, with reaches below and above the grid's cell.
    #[test]
    fn the_grid_finds_exactly_the_pairs_within_reach(
        offsets in proptest::collection::vec((-0.02f64..0.02, -0.02f64..0.02, -0.02f64..0.02), 64),
        squash in 0.05f64..1.0,
        reach in 0.001f64..0.06,
        far in proptest::option::of((0usize..64, -100.0f64..100.0)),
        broken in proptest::option::of(0usize..64),
    ) {
        let (sc, _, triangles, mut y) = crumpled_sheet(&offsets, squash);
        if let Some((v, x)) = far {
            // (a grid over the whole box would have ~10¹² cells: it coarsens, and the
            // vertex's triangles span too many of its cells to be binned)
            y[v] += DVec3::splat(x);
        }
        if let Some(v) = broken {
            y[v].y = f64::NAN;
        }
        let found = sc.pairs(&y, &triangles, reach);
        let truth = pairs_by_brute_force(&sc, &y, &triangles, reach);
        let missing: Vec<_> = truth.iter().filter(|p| !found.contains(p)).take(5).collect();
        let extra: Vec<_> = found.iter().filter(|p| !truth.contains(p)).take(5).collect();
        proptest::prop_assert!(
            found == truth,
            "{} pairs found, {} within reach; missing {:?}, extra {:?}",
            found.len(), truth.len(), missing, extra
        );
    }

    /// After a move that strays at most `step` per vertex from a common shift, the
    /// pairs within the margin are exactly those of the pairs within margin + 2·r
    /// before it, r the move's [`relative_move`] (the search each Newton iteration
    /// reuses from its last step), in the same order, and so are those of
    /// [`SelfContact::pairs_reaching`] (each pair's own bound); both see the same
    /// crossings.
    #[test]
    fn a_steps_pairs_hold_every_pair_within_the_margin_after_it(
        offsets in proptest::collection::vec((-0.02f64..0.02, -0.02f64..0.02, -0.02f64..0.02), 64),
        moves in proptest::collection::vec((-1.0f64..1.0, -1.0f64..1.0, -1.0f64..1.0), 64),
        shift in (-0.05f64..0.05, -0.05f64..0.05, -0.05f64..0.05),
        squash in 0.05f64..1.0,
        step in 0.0f64..0.01,
        alpha in 0.0f64..1.0,
    ) {
        let (sc, _, triangles, y) = crumpled_sheet(&offsets, squash);
        let margin = sc.margin;
        // a shift (which changes no distance, often farther than the margin) plus moves
        // of length at most `step`, taken `alpha` of the way as a line search does
        let shift = DVec3::new(shift.0, shift.1, shift.2);
        let dir: Vec<DVec3> = moves
            .iter()
            .map(|m| shift + DVec3::new(m.0, m.1, m.2).clamp_length_max(1.0) * step)
            .collect();
        let mut each = Vec::new();
        let longest = relative_moves(dir.len(), |v| dir[v], &mut each);
        proptest::prop_assert_eq!(longest, relative_move(dir.len(), |v| dir[v]));
        let moved: Vec<DVec3> = y.iter().zip(&dir).map(|(p, d)| *p + *d * alpha).collect();
        let near = sc.pairs(&y, &triangles, margin + 2.0 * longest * (1.0 + 1e-9) + 1e-12);
        // and of those, the pairs each within its own vertices' moves
        let reaching = sc.pairs_reaching(&y, &triangles, &near, margin, &each);
        let searched = sc.pairs(&moved, &triangles, margin);
        for (what, among) in [("global", &near), ("per pair", &reaching)] {
            let reused = sc.pairs_among(&moved, &triangles, among, margin);
            proptest::prop_assert!(
                reused == searched,
                "{}: {} pairs reused, {} searched",
                what,
                reused.len(),
                searched.len()
            );
        }
        // a step through the cloth is seen among either
        proptest::prop_assert_eq!(
            sc.crossing(&y, &moved, &triangles, &near),
            sc.crossing(&y, &moved, &triangles, &reaching)
        );
    }

    /// A cache of pairs answers a run of searches of varying reach over a state moving
    /// by shifts and steps of varying length (at times farther than its slack, at times
    /// by a non-finite vertex) with exactly the pairs a new search finds each time.
    #[test]
    fn the_pair_cache_answers_as_a_new_search_does(
        offsets in proptest::collection::vec((-0.02f64..0.02, -0.02f64..0.02, -0.02f64..0.02), 64),
        moves in proptest::collection::vec(
            (
                proptest::collection::vec((-1.0f64..1.0, -1.0f64..1.0, -1.0f64..1.0), 64),
                0.0f64..0.003,
                0.001f64..0.01,
                (-0.05f64..0.05, -0.05f64..0.05, -0.05f64..0.05),
            ),
            1..8,
        ),
        squash in 0.05f64..1.0,
        broken in proptest::option::of((0usize..8, 0usize..64)),
    ) {
        let (sc, rest, triangles, mut y) = crumpled_sheet(&offsets, squash);
        let mut cache = PairCache::default();
        for (k, (dirs, step, reach, shift)) in moves.iter().enumerate() {
            // (the shift, common to all vertices, is often farther than the slack)
            let shift = DVec3::new(shift.0, shift.1, shift.2);
            for (p, d) in y.iter_mut().zip(dirs) {
                *p += shift + DVec3::new(d.0, d.1, d.2).clamp_length_max(1.0) * *step;
            }
            if let Some((at, v)) = broken {
                if at == k {
                    y[v].x = f64::NAN;
                } else if y[v].x.is_nan() {
                    y[v].x = rest[v].x * squash;
                }
            }
            let cached = sc.pairs_cached(&y, &triangles, *reach, &mut cache);
            let searched = sc.pairs(&y, &triangles, *reach);
            proptest::prop_assert!(
                cached == searched,
                "search {}: {} pairs from the cache, {} searched",
                k,
                cached.len(),
                searched.len()
            );
        }
    }
}

/// A fold at the scale of one edge: two triangles that share an edge, folded about it
/// until the far vertex of one lies within the margin of the other. That triangle
/// holds two of the vertex's neighbours but not the vertex, so the pair is a contact:
/// the barrier pushes the vertex off it, and a step that folds it on through is a
/// crossing (when the triangles that hold a neighbour were not contacts, the T-shirt's
/// shoulder crumpled through itself this way).
#[test]
fn a_fold_at_the_scale_of_one_edge_is_a_contact() {
    let flat = vec![
        DVec3::new(0.0, 0.0, 0.0),
        DVec3::new(0.02, 0.0, 0.0),
        DVec3::new(0.01, 0.0, 0.015),
        DVec3::new(0.01, 0.0, -0.015),
    ];
    let triangles = vec![[0, 1, 2], [0, 3, 1]];
    let sc = SelfContact::new(&flat, &triangles, 0.003, 1e5, 1e-3);
    assert_eq!(sc.excluded_count(), 0, "flat, nothing is within the margin");
    assert!(sc.pairs(&flat, &triangles, 0.003).is_empty());
    // folded nearly shut: vertex 3 lies 2 mm over triangle 0
    let mut folded = flat.clone();
    folded[3] = DVec3::new(0.01, 0.002, 0.012);
    let pairs = sc.pairs(&folded, &triangles, 0.003);
    assert!(pairs.contains(&(3, 0)), "{pairs:?}");
    assert!(
        vertex_pairs(&pairs)
            .iter()
            .all(|&(v, t)| !triangles[t as usize].contains(&v)),
        "never the vertex's own triangle: {pairs:?}"
    );
    pushed_up(&sc, &folded, &triangles, 3);
    let mut through = folded.clone();
    through[3].y = -0.002;
    assert!(sc.crossing(&folded, &through, &triangles, &pairs));
    let mut predicted = through.clone();
    assert_eq!(sc.limit_move(&folded, &mut predicted, &triangles), 1);
    assert_eq!(predicted[3], folded[3], "held: triangle 0 does not move");
}

/// Segment pairs whose nearest points lie in each kind of region: both inside their
/// edges, one at an end, both at ends.
fn segment_cases() -> Vec<([DVec3; 4], &'static str)> {
    let a = DVec3::new(0.0, 0.0, 0.0);
    let b = DVec3::new(0.03, 0.002, -0.001);
    vec![
        (
            [
                a,
                b,
                DVec3::new(0.012, 0.004, -0.01),
                DVec3::new(0.016, 0.002, 0.012),
            ],
            "both inside",
        ),
        (
            [
                a,
                b,
                DVec3::new(0.036, 0.003, -0.01),
                DVec3::new(0.034, 0.001, 0.012),
            ],
            "s at an end",
        ),
        (
            [
                a,
                b,
                DVec3::new(0.01, 0.004, 0.003),
                DVec3::new(0.02, 0.01, 0.02),
            ],
            "t at an end",
        ),
        (
            [
                a,
                b,
                DVec3::new(-0.004, 0.003, -0.002),
                DVec3::new(-0.01, 0.02, -0.01),
            ],
            "both at ends",
        ),
    ]
}

/// Central differences (1e-7 m) of `value` and `grad` over the 12 coordinates of
/// `x` against `grad` and `hess` (relative tolerances `tg`, `th`).
fn check_derivatives(
    x: [DVec3; 4],
    name: &str,
    terms: impl Fn([DVec3; 4]) -> (f64, [DVec3; 4], [[DMat3; 4]; 4]),
    tg: f64,
    th: f64,
) {
    let h = 1e-7;
    let (_, g0, h0) = terms(x);
    let gscale = g0.iter().map(|g| g.abs().max_element()).fold(0.0, f64::max);
    let hscale = h0
        .iter()
        .flatten()
        .map(|m| m.to_cols_array().iter().fold(0.0f64, |a, v| a.max(v.abs())))
        .fold(0.0, f64::max);
    for k in 0..12 {
        let moved = |s: f64| {
            let mut y = x;
            y[k / 3][k % 3] += s;
            terms(y)
        };
        let (ep, gp, _) = moved(h);
        let (em, gm, _) = moved(-h);
        let fd = (ep - em) / (2.0 * h);
        let an = g0[k / 3][k % 3];
        assert!(
            (fd - an).abs() <= tg * gscale,
            "{name}: ∂/∂q{k}: fd {fd} analytic {an}"
        );
        for l in 0..12 {
            let fd = (gp[l / 3][l % 3] - gm[l / 3][l % 3]) / (2.0 * h);
            let an = h0[l / 3][k / 3].col(k % 3)[l % 3];
            assert!(
                (fd - an).abs() <= th * hscale,
                "{name}: ∂²/∂q{l}∂q{k}: fd {fd} analytic {an}"
            );
        }
    }
}

#[test]
fn the_edge_distance_derivatives_match_finite_differences() {
    let mut kinds = Vec::new();
    for (x, name) in segment_cases() {
        let (_, _, sf, tf) = segment_closest(x[0], x[1], x[2], x[3]).expect("segments");
        kinds.push((sf, tf));
        // the distance is what a brute-force search over the two segments finds
        let pd = edge_distance(x, true).expect("apart");
        let brute = (0..=400)
            .flat_map(|i| (0..=400).map(move |j| (i as f64 / 400.0, j as f64 / 400.0)))
            .map(|(s, t)| x[0].lerp(x[1], s).distance(x[2].lerp(x[3], t)))
            .fold(f64::INFINITY, f64::min);
        assert!(
            pd.d <= brute + 1e-12 && brute - pd.d < 1e-4,
            "{name}: {} vs {brute}",
            pd.d
        );
        check_derivatives(
            x,
            name,
            |y| {
                let pd = edge_distance(y, true).expect("apart");
                (pd.d, pd.grad, pd.hess)
            },
            1e-6,
            1e-5,
        );
    }
    for kind in [(true, true), (false, true), (true, false), (false, false)] {
        assert!(kinds.contains(&kind), "{kind:?} not reached");
    }
}

#[test]
fn the_edge_barrier_derivatives_match_finite_differences_with_and_without_the_mollifier() {
    let area = vec![1e-4; 4];
    let a = DVec3::new(0.0, 0.0, 0.0);
    let b = DVec3::new(0.03, 0.0005, -0.001);
    // 1.2 mm apart, crossing at 60° (mollifier off) and at ~1° (on, with c = 1e-3)
    let crossing = [
        a,
        b,
        DVec3::new(0.01, 0.0012, -0.012),
        DVec3::new(0.02, 0.0012, 0.0053),
    ];
    // (u turned by ~0.6° about y)
    let dir = ((b - a).normalize() + DVec3::new(0.0, 0.0, 0.01)).normalize() * 0.03;
    let near_parallel = [
        a,
        b,
        DVec3::new(0.01, 0.0012, 0.0) - dir * 0.5,
        DVec3::new(0.01, 0.0012, 0.0) + dir * 0.5,
    ];
    let mut sc = model(0.003);
    sc.parallel = 1e-3;
    for (x, name, mollified) in [
        (crossing, "crossing", false),
        (near_parallel, "near parallel", true),
    ] {
        let rest = x[0].distance_squared(x[1]) * x[2].distance_squared(x[3]);
        let c = Contact::Edges {
            e: [0, 1],
            f: [2, 3],
            rest,
        };
        let (xv, _, _) = cross_norm2(x, true);
        assert_eq!(xv < sc.parallel * rest, mollified, "{name}");
        let terms = |y: [DVec3; 4]| sc.pair_terms(&y, &area, c, Some(true)).expect("in reach");
        let (e, g, _) = terms(x);
        assert!(e > 0.0, "{name}");
        // the pair is pushed apart: the second edge (above) is pushed up
        assert!(g[2].y + g[3].y < 0.0, "{name}: ∇E {g:?}");
        check_derivatives(x, name, terms, 1e-5, 1e-4);
    }
    // the mollifier fades the pair out as the edges turn parallel, and is C¹ at ε
    let eps = 0.7;
    assert_eq!(mollifier(0.0, eps).0, 0.0);
    assert_eq!(mollifier(eps, eps), (1.0, 0.0, 0.0));
    let (m, dm, _) = mollifier(eps * (1.0 - 1e-9), eps);
    assert!((1.0 - m).abs() < 1e-12 && dm.abs() < 1e-8);
    let (x, gx, hx) = cross_norm2(crossing, true);
    let moved = |dx: f64| {
        let x = [
            crossing[0],
            crossing[1] + DVec3::X * dx,
            crossing[2],
            crossing[3],
        ];
        cross_norm2(x, false).0
    };
    let fd = (moved(1e-7) - moved(-1e-7)) / 2e-7;
    assert!(
        (fd - gx[1].x).abs() < 1e-6 * x.max(1e-12) / 1e-3,
        "∂x/∂b: {fd} vs {}",
        gx[1].x
    );
    assert!(hx[0][0].x_axis.x >= 0.0);
}

/// Two triangles whose edges cross, every vertex at least 2 cm from the other's
/// triangle: the vertex–triangle pairs see nothing, the edge pair does. A triangle
/// flat in z = 0 with its top edge along x, and one standing in x = 0.02 with its
/// bottom edge 1 mm above the first's, along z.
fn crossed_edges() -> (Vec<DVec3>, Vec<[u32; 3]>) {
    let y = vec![
        DVec3::new(0.0, 0.0, 0.0),
        DVec3::new(0.04, 0.0, 0.0),
        DVec3::new(0.02, -0.03, 0.0),
        DVec3::new(0.02, 0.001, 0.02),
        DVec3::new(0.02, 0.001, -0.02),
        DVec3::new(0.02, 0.03, 0.0),
    ];
    (y, vec![[0, 1, 2], [3, 4, 5]])
}

#[test]
fn an_edge_through_an_edge_is_a_contact_and_a_step_through_it_a_crossing() {
    let (y, triangles) = crossed_edges();
    // modelled 5 cm apart: nothing excluded
    let far: Vec<DVec3> = y
        .iter()
        .enumerate()
        .map(|(i, p)| if i >= 3 { *p + DVec3::Y * 0.05 } else { *p })
        .collect();
    let sc = SelfContact::new(&far, &triangles, 0.003, 1e5, 1e-3);
    assert!(sc.excluded.is_empty());
    let pairs = sc.pairs(&y, &triangles, sc.margin);
    let e = |a: u32, b: u32| sc.edges.binary_search(&[a, b]).expect("edge") as u32;
    assert_eq!(pairs, vec![(EDGE_PAIR | e(0, 1), e(3, 4))]);
    // within the margin, the barrier pushes the standing triangle up
    let area = vec![1e-4; y.len()];
    assert!(sc.energy(&y, &triangles, &area, None) > 0.0);
    let mut g = vec![DVec3::ZERO; y.len()];
    sc.add_gradient(&y, &triangles, &area, None, &mut g);
    assert!(g[3].y < 0.0 && g[4].y < 0.0, "pushed up: {g:?}");
    assert!(g[0].y > 0.0 && g[1].y > 0.0, "pushed down: {g:?}");
    // moving the standing triangle 2 mm down carries its edge through the other's edge
    // and its bottom edge through the flat triangle; no vertex comes near a triangle
    let down: Vec<DVec3> = y
        .iter()
        .enumerate()
        .map(|(i, p)| if i >= 3 { *p - DVec3::Y * 0.002 } else { *p })
        .collect();
    // (the standing triangle's edge through the flat one, and the flat one's through
    // the standing one)
    assert_eq!(self_intersections(&down, &triangles), 2);
    let reach = sc.margin + 2.0 * 0.002 + 1e-9;
    let near = sc.pairs(&y, &triangles, reach);
    assert!(near.iter().all(|p| p.0 & EDGE_PAIR != 0), "{near:?}");
    assert!(sc.crossing(&y, &down, &triangles, &near));
    // half of it stops short: not a crossing (0.8 mm above, not closing in tenfold)
    let half: Vec<DVec3> = y.iter().zip(&down).map(|(a, b)| a.lerp(*b, 0.1)).collect();
    assert!(!sc.crossing(&y, &half, &triangles, &near));
    // moved sideways instead (along z, the edge's own direction) it does not cross
    let slid: Vec<DVec3> = y
        .iter()
        .enumerate()
        .map(|(i, p)| if i >= 3 { *p + DVec3::Z * 0.002 } else { *p })
        .collect();
    assert!(!sc.crossing(&y, &slid, &triangles, &near));
    // a carried prediction that would cross is limited: the edge rides on the other
    let mut to = down.clone();
    let held = sc.limit_move(&y, &mut to, &triangles);
    assert!(held > 0);
    assert_eq!(self_intersections(&to, &triangles), 0);
    assert!(!sc.crossing(&y, &to, &triangles, &near));
}

/// A common shift is no move at all; the bound is the largest distance from the centre
/// of the moves' box; a move that is not finite gives a bound that is not finite (so
/// the cache searches anew and a step bounds nothing).
#[test]
fn the_relative_move_leaves_out_the_common_shift() {
    let shift = DVec3::new(0.3, -2.0, 5.0);
    let same = [shift; 5];
    assert_eq!(relative_move(same.len(), |v| same[v]), 0.0);
    let moves = [
        shift + DVec3::new(0.01, 0.0, 0.0),
        shift - DVec3::new(0.01, 0.0, 0.0),
        shift + DVec3::new(0.0, 0.004, 0.0),
    ];
    let r = relative_move(moves.len(), |v| moves[v]);
    // box centre: shift + (0, 0.002, 0); farthest: the x moves at √(0.01² + 0.002²)
    assert!(
        (r - (0.01f64.powi(2) + 0.002f64.powi(2)).sqrt()).abs() < 1e-12,
        "{r}"
    );
    let mut each = vec![1.0; 7];
    assert_eq!(relative_moves(moves.len(), |v| moves[v], &mut each), r);
    let x = (0.01f64.powi(2) + 0.002f64.powi(2)).sqrt();
    for (got, want) in each.iter().zip([x, x, 0.002]) {
        assert!((got - want).abs() < 1e-12, "{each:?}");
    }
    assert_eq!(each.len(), 3);
    assert_eq!(relative_move(0, |_| DVec3::ZERO), 0.0);
    for bad in [f64::NAN, f64::INFINITY] {
        let broken = [DVec3::ZERO, DVec3::new(bad, 0.0, 0.0), DVec3::ONE];
        assert!(
            !relative_move(broken.len(), |v| broken[v]).is_finite(),
            "{bad}"
        );
    }
}
