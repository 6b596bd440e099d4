//! Tests of the self-contact model: derivatives against finite differences, the
//! barrier, pairs and exclusions, crossings and the carried move, the crossing count.

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

fn model(margin: f64) -> SelfContact {
    SelfContact {
        margin,
        stiffness: 1e5,
        excluded: Vec::new(),
        cell: 0.03,
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
    let sc = SelfContact::new(&far, &triangles, 0.003, 1e5);
    assert_eq!(sc.excluded_count(), 0);
    let pairs = sc.pairs(&y, &triangles, 0.003);
    assert_eq!(
        pairs,
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
    let modelled = SelfContact::new(&y, &triangles, 0.003, 1e5);
    assert_eq!(modelled.excluded_count(), 1);
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
    out
}

/// The 8×8 sheet with a 3 mm margin, crumpled: squashed by `squash` towards the origin
/// and each vertex moved by its offset (metres). Returns the model, its rest positions,
/// triangles and the crumpled state.
fn crumpled_sheet(
    offsets: &[(f64, f64, f64)],
    squash: f64,
) -> (SelfContact, Vec<DVec3>, Vec<[u32; 3]>, Vec<DVec3>) {
    let (rest, triangles) = sheet(8);
    let sc = SelfContact::new(&rest, &triangles, 0.003, 1e5);
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

    /// After a move of at most `step` per vertex, the pairs within the margin are
    /// exactly those of the pairs within margin + 2·step before it (the search each
    /// Newton iteration reuses from its last step), in the same order.
    #[test]
    fn a_steps_pairs_hold_every_pair_within_the_margin_after_it(
        offsets in proptest::collection::vec((-0.02f64..0.02, -0.02f64..0.02, -0.02f64..0.02), 64),
        moves in proptest::collection::vec((-1.0f64..1.0, -1.0f64..1.0, -1.0f64..1.0), 64),
        squash in 0.05f64..1.0,
        step in 0.0f64..0.01,
        alpha in 0.0f64..1.0,
    ) {
        let (sc, _, triangles, y) = crumpled_sheet(&offsets, squash);
        let margin = sc.margin;
        // moves of length at most `step`, the longest exactly `step`, taken `alpha` of
        // the way as a line search does
        let dir: Vec<DVec3> = moves
            .iter()
            .map(|m| DVec3::new(m.0, m.1, m.2).clamp_length_max(1.0) * step)
            .collect();
        let longest = dir.iter().map(|d| d.length()).fold(0.0, f64::max);
        let moved: Vec<DVec3> = y.iter().zip(&dir).map(|(p, d)| *p + *d * alpha).collect();
        let near = sc.pairs(&y, &triangles, margin + 2.0 * longest * (1.0 + 1e-9) + 1e-12);
        let reused = sc.pairs_among(&moved, &triangles, &near, margin);
        let searched = sc.pairs(&moved, &triangles, margin);
        proptest::prop_assert!(
            reused == searched,
            "{} pairs reused, {} searched",
            reused.len(),
            searched.len()
        );
    }

    /// A cache of pairs answers a run of searches of varying reach over a state moving
    /// by steps of varying length (at times farther than its slack, at times by a
    /// non-finite vertex) with exactly the pairs a new search finds each time.
    #[test]
    fn the_pair_cache_answers_as_a_new_search_does(
        offsets in proptest::collection::vec((-0.02f64..0.02, -0.02f64..0.02, -0.02f64..0.02), 64),
        moves in proptest::collection::vec(
            (proptest::collection::vec((-1.0f64..1.0, -1.0f64..1.0, -1.0f64..1.0), 64), 0.0f64..0.003, 0.001f64..0.01),
            1..8,
        ),
        squash in 0.05f64..1.0,
        broken in proptest::option::of((0usize..8, 0usize..64)),
    ) {
        let (sc, rest, triangles, mut y) = crumpled_sheet(&offsets, squash);
        let mut cache = PairCache::default();
        for (k, (dirs, step, reach)) in moves.iter().enumerate() {
            for (p, d) in y.iter_mut().zip(dirs) {
                *p += DVec3::new(d.0, d.1, d.2).clamp_length_max(1.0) * *step;
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
    let sc = SelfContact::new(&flat, &triangles, 0.003, 1e5);
    assert_eq!(sc.excluded_count(), 0, "flat, nothing is within the margin");
    assert!(sc.pairs(&flat, &triangles, 0.003).is_empty());
    // folded nearly shut: vertex 3 lies 2 mm over triangle 0
    let mut folded = flat.clone();
    folded[3] = DVec3::new(0.01, 0.002, 0.012);
    let pairs = sc.pairs(&folded, &triangles, 0.003);
    assert!(pairs.contains(&(3, 0)), "{pairs:?}");
    assert!(
        pairs
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
