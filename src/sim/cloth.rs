//! `Cloth`: a garment's simulation model (rest data of every energy term, lumped
//! masses, the sparse system) and the total energy, gradient and Hessian at a state.

use glam::DVec3;

use crate::mesh::{Topology, TriMesh};

use super::bending::Hinge;
use super::contact::{self, Collider, Distance};
use super::friction::Friction;
use super::membrane::{self, MembraneRest};
use super::params::SimParams;
use super::self_contact::{Pair, PairCache, SelfContact};
use super::solve::SolveError;
use super::sparse::BlockSparse;

/// Lagged-friction anchor: positions (m) and per-vertex (normal force N, unit normal).
pub(crate) type FrictionAnchor<'a> = (&'a [DVec3], &'a [(f64, DVec3)]);

/// A garment ready to simulate.
///
/// Invariants: `rest`, `mass`, `area` and `pinned` have one entry per vertex; the
/// sparsity pattern covers every pair of vertices sharing a triangle or a hinge.
pub struct Cloth {
    pub(crate) rest: Vec<DVec3>,
    pub(crate) triangles: Vec<[u32; 3]>,
    pub(crate) membrane: Vec<MembraneRest>,
    pub(crate) hinges: Vec<Hinge>,
    /// Lumped mass per vertex, kg.
    pub(crate) mass: Vec<f64>,
    /// Lumped area per vertex (a third of each adjacent triangle), m².
    pub(crate) area: Vec<f64>,
    /// Vertices held in place (tests and pinned demos).
    pub(crate) pinned: Vec<bool>,
    pub(crate) params: SimParams,
    /// The membrane's material (from `params`).
    pub(crate) material: membrane::Material,
    pub(crate) matrix: BlockSparse,
    /// The bending Hessian (constant) in the matrix's value layout.
    bending_values: Vec<f64>,
    pinned_dof: Vec<bool>,
    /// Lagged friction of the current solve (None: frictionless).
    pub(crate) friction: Option<Friction>,
    /// Self-contact (None: `self_contact_margin` is 0).
    pub(crate) self_contact: Option<SelfContact>,
    /// While a Newton iteration runs: every self-contact pair within reach of any
    /// state its steps can reach (see `solve`), so that the energy need not search.
    pub(crate) candidates: Option<Vec<Pair>>,
    /// The body field at the vertices where it was last evaluated (see [`BodyCache`]).
    body_cache: std::sync::Mutex<BodyCache>,
}

/// The body field ([`Collider::distance`] with cutoff `contact_margin`) at each vertex
/// where it was last evaluated. Newton's method evaluates every accepted state three
/// times (the line search's energy, then the gradient and the Hessian there), and the
/// field was a third of a self-contact bake's time (`perf`, 2026-11-29); an entry is
/// reused only at the same collider generation and the same position to the bit, so
/// results are identical with or without it.
#[derive(Default)]
struct BodyCache {
    /// [`Collider::generation`] the entries belong to (0: none).
    generation: u64,
    /// Per vertex: the position (bits of x, y, z) evaluated at and the field there.
    entries: Vec<Option<([u64; 3], Option<Distance>)>>,
}

impl Cloth {
    /// Builds the model of a mesh whose positions are also its unstressed geometry.
    /// Refuses non-manifold meshes, degenerate triangles and non-finite positions.
    pub fn new(mesh: &TriMesh, params: &SimParams) -> Result<Cloth, SolveError> {
        Self::with_metric(mesh, &mesh.positions, params)
    }

    /// Builds the model of a mesh whose strain is measured against `metric` (positions
    /// of the unstressed cloth, same topology; see [`crate::garment::Garment::metric`]).
    pub fn with_metric(
        mesh: &TriMesh,
        metric: &[glam::Vec3],
        params: &SimParams,
    ) -> Result<Cloth, SolveError> {
        mesh.validate(1e-12)?;
        let c = params.compression_ratio;
        if !(c > 0.0 && c <= 1.0) {
            return Err(SolveError::Param {
                name: "compression_ratio",
                value: c,
                expected: "in (0, 1]",
            });
        }
        if metric.len() != mesh.positions.len() {
            return Err(SolveError::Mesh(crate::mesh::MeshError::TooLarge(format!(
                "metric has {} positions for {} vertices",
                metric.len(),
                mesh.positions.len()
            ))));
        }
        let metric_mesh = TriMesh::new(metric.to_vec(), mesh.triangles.clone());
        metric_mesh.validate(1e-12)?;
        let topo = Topology::build(mesh)?;
        let rest: Vec<DVec3> = metric.iter().map(|p| p.as_dvec3()).collect();
        let n = rest.len();
        let mut membrane = Vec::with_capacity(mesh.triangles.len());
        let mut area = vec![0.0; n];
        for (t, tri) in mesh.triangles.iter().enumerate() {
            let [a, b, c] = tri.map(|v| rest[v as usize]);
            let m = MembraneRest::new(a, b, c)
                .ok_or(SolveError::Mesh(crate::mesh::MeshError::Degenerate(t)))?;
            for &v in tri {
                area[v as usize] += m.area() / 3.0;
            }
            membrane.push(m);
        }
        let hinges: Vec<Hinge> = topo
            .hinges(mesh)
            .into_iter()
            .filter_map(|h| Hinge::new(h, h.map(|v| rest[v as usize])))
            .collect();
        let mut pairs = Vec::with_capacity(mesh.triangles.len() * 3 + hinges.len() * 6);
        for tri in &mesh.triangles {
            pairs.extend([(tri[0], tri[1]), (tri[1], tri[2]), (tri[0], tri[2])]);
        }
        for h in &hinges {
            pairs.push((h.v[2], h.v[3]));
        }
        let matrix = BlockSparse::new(n, pairs)?;
        let self_contact = (params.self_contact_margin > 0.0).then(|| {
            let at: Vec<DVec3> = mesh.positions.iter().map(|p| p.as_dvec3()).collect();
            SelfContact::new(
                &at,
                &mesh.triangles,
                params.self_contact_margin,
                params.self_contact_stiffness,
                params.self_contact_parallel,
            )
        });
        let (mu, lambda) = params.lame();
        let mass = area.iter().map(|a| a * params.density).collect();
        let mut cloth = Cloth {
            rest,
            triangles: mesh.triangles.clone(),
            membrane,
            hinges,
            mass,
            area,
            pinned: vec![false; n],
            params: params.clone(),
            material: membrane::Material {
                mu,
                lambda,
                compression: params.compression_ratio,
            },
            matrix,
            bending_values: Vec::new(),
            pinned_dof: vec![false; 3 * n],
            friction: None,
            self_contact,
            candidates: None,
            body_cache: Default::default(),
        };
        cloth.assemble_bending();
        Ok(cloth)
    }

    fn assemble_bending(&mut self) {
        self.matrix.clear();
        let k = self.params.bend_stiffness;
        for h in &self.hinges {
            for i in 0..4 {
                for j in 0..=i {
                    let s = k * h.w[i] * h.w[j];
                    let m = [[s, 0.0, 0.0], [0.0, s, 0.0], [0.0, 0.0, s]];
                    if i == j {
                        self.matrix.add_block(h.v[i], h.v[i], &m);
                    } else {
                        self.matrix.add_block(h.v[i], h.v[j], &m);
                    }
                }
            }
        }
        self.bending_values = self.matrix.values.clone();
    }

    /// Number of vertices.
    pub fn vertex_count(&self) -> usize {
        self.rest.len()
    }

    /// Degrees of freedom (3 per vertex).
    pub fn dof(&self) -> usize {
        3 * self.rest.len()
    }

    /// Unstressed (metric) positions, metres.
    pub fn rest_positions(&self) -> &[DVec3] {
        &self.rest
    }

    /// Holds vertex `v` in place (its DOFs are removed from the solve).
    pub fn pin(&mut self, v: usize) {
        self.pinned[v] = true;
        for a in 0..3 {
            self.pinned_dof[3 * v + a] = true;
        }
    }

    /// Norm of the cloth's weight vector, N (the scale of the convergence test).
    pub fn gravity_norm(&self) -> f64 {
        self.mass
            .iter()
            .zip(&self.pinned)
            .filter(|(_, p)| !**p)
            .map(|(m, _)| (m * self.params.gravity).powi(2))
            .sum::<f64>()
            .sqrt()
    }

    /// Parameters in use.
    pub fn params(&self) -> &SimParams {
        &self.params
    }

    /// Membrane energy at `y`, J.
    pub fn membrane_energy(&self, y: &[DVec3]) -> f64 {
        self.membrane
            .iter()
            .zip(&self.triangles)
            .map(|(m, t)| membrane::energy(m, &t.map(|v| y[v as usize]), &self.material))
            .sum()
    }

    /// Bending energy at `y`, J.
    pub fn bending_energy(&self, y: &[DVec3]) -> f64 {
        0.5 * self.params.bend_stiffness
            * self
                .hinges
                .iter()
                .map(|h| h.curvature(y).length_squared())
                .sum::<f64>()
    }

    /// Gravitational potential at `y` (zero at y = 0), J.
    pub fn gravity_energy(&self, y: &[DVec3]) -> f64 {
        self.mass
            .iter()
            .zip(y)
            .map(|(m, p)| m * self.params.gravity * p.y)
            .sum()
    }

    /// Contact energy against `body` at `y`, J.
    pub fn contact_energy(&self, y: &[DVec3], body: Option<&Collider>) -> f64 {
        let Some(body) = body else { return 0.0 };
        let mut e = -0.0;
        self.body_field(y, body, |v, d| {
            e += d
                .map(|d| contact::energy(d, self.area[v], &self.params))
                .unwrap_or(0.0);
        });
        e
    }

    /// Calls `f` with every vertex's body field at `y` in vertex order (`None`: no body
    /// triangle within the kernel), reusing the values of the last evaluation where the
    /// collider's generation and the vertex's position are the same.
    fn body_field(&self, y: &[DVec3], body: &Collider, f: impl FnMut(usize, Option<&Distance>)) {
        Self::body_field_in(&self.body_cache, self.params.contact_margin, y, body, f);
    }

    /// [`Cloth::body_field`] on the cache `cache` with cutoff `margin` (for callers that
    /// write other fields of the cloth meanwhile).
    fn body_field_in(
        cache: &std::sync::Mutex<BodyCache>,
        margin: f64,
        y: &[DVec3],
        body: &Collider,
        mut f: impl FnMut(usize, Option<&Distance>),
    ) {
        let mut cache = cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let cache = &mut *cache;
        if cache.generation != body.generation() || cache.entries.len() != y.len() {
            cache.generation = body.generation();
            cache.entries.clear();
            cache.entries.resize(y.len(), None);
        }
        for (v, (p, entry)) in y.iter().zip(cache.entries.iter_mut()).enumerate() {
            let bits = p.to_array().map(f64::to_bits);
            let d = match entry {
                Some((at, d)) if *at == bits => d,
                _ => &mut entry.insert((bits, body.distance(*p, margin))).1,
            };
            f(v, d.as_ref());
        }
    }

    /// Self-contact energy at `y`, J (zero with self-contact off).
    pub fn self_contact_energy(&self, y: &[DVec3]) -> f64 {
        match &self.self_contact {
            Some(sc) => sc.energy(y, &self.triangles, &self.area, self.candidates.as_deref()),
            None => 0.0,
        }
    }

    /// Vertex–triangle pairs of the garment within `reach` (metres) of each other at
    /// `y` that no step may carry through each other (empty with self-contact off).
    pub(crate) fn self_contact_pairs(&self, y: &[DVec3], reach: f64) -> Vec<Pair> {
        match &self.self_contact {
            Some(sc) => sc.pairs(y, &self.triangles, reach),
            None => Vec::new(),
        }
    }

    /// [`Cloth::self_contact_pairs`] answered from `cache` where it can be (the same
    /// pairs; see [`PairCache`]).
    pub(crate) fn self_contact_pairs_cached(
        &self,
        y: &[DVec3],
        reach: f64,
        cache: &mut PairCache,
    ) -> Vec<Pair> {
        match &self.self_contact {
            Some(sc) => sc.pairs_cached(y, &self.triangles, reach, cache),
            None => Vec::new(),
        }
    }

    /// The pairs that moves of at most `moved[v]` per vertex from a common shift could
    /// bring within `margin`, answered from `cache` (`reach`: the moves' global bound;
    /// [`SelfContact::pairs_cached_reaching`]).
    pub(crate) fn self_contact_pairs_reaching(
        &self,
        y: &[DVec3],
        reach: f64,
        cache: &mut PairCache,
        margin: f64,
        moved: &[f64],
    ) -> Vec<Pair> {
        match &self.self_contact {
            Some(sc) => sc.pairs_cached_reaching(y, &self.triangles, reach, cache, margin, moved),
            None => Vec::new(),
        }
    }

    /// Whether the straight step from `from` to `to` carries a vertex through one of the
    /// triangles in `candidates` (pairs from [`Cloth::self_contact_pairs`] at `from`).
    pub(crate) fn self_crossing(&self, from: &[DVec3], to: &[DVec3], candidates: &[Pair]) -> bool {
        match &self.self_contact {
            Some(sc) => sc.crossing(from, to, &self.triangles, candidates),
            None => false,
        }
    }

    /// Limits the move of the garment from `from` to `to` so that it does not pass
    /// through itself ([`SelfContact::limit_move`]); returns how many vertices were held
    /// back (0 with self-contact off).
    pub(crate) fn limit_self_crossing(&self, from: &[DVec3], to: &mut [DVec3]) -> usize {
        match &self.self_contact {
            Some(sc) => sc.limit_move(from, to, &self.triangles),
            None => 0,
        }
    }

    /// Friction energy of the current lagged friction state, J.
    pub fn friction_energy(&self, y: &[DVec3]) -> f64 {
        match &self.friction {
            Some(f) => y.iter().enumerate().map(|(v, p)| f.energy(v, *p)).sum(),
            None => 0.0,
        }
    }

    /// Total energy, J.
    pub fn energy(&self, y: &[DVec3], body: Option<&Collider>) -> f64 {
        self.membrane_energy(y)
            + self.bending_energy(y)
            + self.gravity_energy(y)
            + self.contact_energy(y, body)
            + self.self_contact_energy(y)
            + self.friction_energy(y)
    }

    /// Total energy with the gravitational potential measured from `reference` heights,
    /// J: the same differences as [`Cloth::energy`], without the large constant that
    /// would swamp them in rounding near convergence.
    pub(crate) fn energy_from(
        &self,
        y: &[DVec3],
        reference: &[DVec3],
        body: Option<&Collider>,
    ) -> f64 {
        let gravity: f64 = self
            .mass
            .iter()
            .zip(y)
            .zip(reference)
            .map(|((m, p), r)| m * self.params.gravity * (p.y - r.y))
            .sum();
        self.membrane_energy(y)
            + self.bending_energy(y)
            + gravity
            + self.contact_energy(y, body)
            + self.self_contact_energy(y)
            + self.friction_energy(y)
    }

    /// Gradient of the body-dependent terms only (contact and friction) at the vertices
    /// listed in `active`, written into `g` (other entries untouched): what changes with
    /// the pose, for the sensitivities' right-hand sides.
    pub(crate) fn body_gradient(
        &self,
        y: &[DVec3],
        body: &Collider,
        active: &[u32],
        g: &mut [DVec3],
    ) {
        for &v in active {
            let v = v as usize;
            let mut gv = DVec3::ZERO;
            if let Some(d) = body.distance(y[v], self.params.contact_margin) {
                gv += contact::gradient(&d, self.area[v], &self.params);
            }
            if let Some(f) = &self.friction {
                gv += f.gradient(v, y[v]);
            }
            g[v] = if self.pinned[v] { DVec3::ZERO } else { gv };
        }
    }

    /// Contact forces' magnitudes at `y` (N per vertex): the normal forces λ that
    /// friction is lagged on, each with the unit normal of the body field there (∇d
    /// normalised: the smooth distance's gradient is shorter or longer than 1 in a
    /// crease, and friction's tangent projector needs a unit normal).
    pub(crate) fn contact_forces(&self, y: &[DVec3], body: &Collider) -> Vec<(f64, DVec3)> {
        y.iter()
            .zip(&self.area)
            .map(
                |(p, a)| match body.distance(*p, self.params.contact_margin) {
                    Some(d) if d.d < self.params.contact_margin => (
                        contact::gradient(&d, *a, &self.params).length(),
                        d.grad.normalize_or_zero(),
                    ),
                    _ => (0.0, DVec3::ZERO),
                },
            )
            .collect()
    }

    /// Gradient of the total energy (the residual force is its negative), N; zero on
    /// pinned vertices.
    pub fn gradient(&self, y: &[DVec3], body: Option<&Collider>, g: &mut [DVec3]) {
        g.fill(DVec3::ZERO);
        for (m, t) in self.membrane.iter().zip(&self.triangles) {
            let gr = membrane::gradient(m, &t.map(|v| y[v as usize]), &self.material);
            for k in 0..3 {
                g[t[k] as usize] += gr[k];
            }
        }
        let kb = self.params.bend_stiffness;
        for h in &self.hinges {
            let c = h.curvature(y) * kb;
            for i in 0..4 {
                g[h.v[i] as usize] += c * h.w[i];
            }
        }
        for (v, gv) in g.iter_mut().enumerate() {
            gv.y += self.mass[v] * self.params.gravity;
        }
        if let Some(body) = body {
            self.body_field(y, body, |v, d| {
                if let Some(d) = d {
                    g[v] += contact::gradient(d, self.area[v], &self.params);
                }
            });
        }
        if let Some(f) = &self.friction {
            for (v, gv) in g.iter_mut().enumerate() {
                *gv += f.gradient(v, y[v]);
            }
        }
        if let Some(sc) = &self.self_contact {
            sc.add_gradient(
                y,
                &self.triangles,
                &self.area,
                self.candidates.as_deref(),
                g,
            );
        }
        for (gv, p) in g.iter_mut().zip(&self.pinned) {
            if *p {
                *gv = DVec3::ZERO;
            }
        }
    }

    /// Assembles the Hessian at `y` into the sparse matrix, plus `damping`·M on the
    /// diagonal. With `project`, element Hessians are made PSD (membrane: projected
    /// stress derivative; contact: Gauss–Newton part). Pinned DOFs get identity rows.
    pub(crate) fn assemble(
        &mut self,
        y: &[DVec3],
        body: Option<&Collider>,
        damping: f64,
        project: bool,
    ) {
        let self_blocks = match &self.self_contact {
            Some(sc) => sc.hessian_blocks(
                y,
                &self.triangles,
                &self.area,
                self.candidates.as_deref(),
                !project,
            ),
            None => Vec::new(),
        };
        let self_blocks = if self.make_room(&self_blocks) {
            self_blocks
        } else {
            Vec::new()
        };
        self.matrix.values.copy_from_slice(&self.bending_values);
        for (m, t) in self.membrane.iter().zip(&self.triangles) {
            let h = membrane::hessian(m, &t.map(|v| y[v as usize]), &self.material, project);
            for i in 0..3 {
                for j in 0..=i {
                    let mut b = [[0.0; 3]; 3];
                    for a in 0..3 {
                        for c in 0..3 {
                            b[a][c] = h[3 * i + a][3 * j + c];
                        }
                    }
                    self.matrix.add_block(t[i], t[j], &b);
                }
            }
        }
        if let Some(body) = body {
            let (params, area, matrix) = (&self.params, &self.area, &mut self.matrix);
            Self::body_field_in(&self.body_cache, params.contact_margin, y, body, |v, d| {
                if let Some(d) = d {
                    let h = contact::hessian(d, area[v], params, !project);
                    if h != glam::DMat3::ZERO {
                        let c = h.to_cols_array_2d();
                        // to_cols_array_2d gives columns; block wants [row][col]
                        let b = [
                            [c[0][0], c[1][0], c[2][0]],
                            [c[0][1], c[1][1], c[2][1]],
                            [c[0][2], c[1][2], c[2][2]],
                        ];
                        matrix.add_block(v as u32, v as u32, &b);
                    }
                }
            });
        }
        if let Some(f) = &self.friction {
            for v in 0..y.len() {
                let h = f.hessian(v, y[v]);
                if h != glam::DMat3::ZERO {
                    let c = h.to_cols_array_2d();
                    let b = [
                        [c[0][0], c[1][0], c[2][0]],
                        [c[0][1], c[1][1], c[2][1]],
                        [c[0][2], c[1][2], c[2][2]],
                    ];
                    self.matrix.add_block(v as u32, v as u32, &b);
                }
            }
        }
        for (vs, h) in &self_blocks {
            for i in 0..4 {
                for j in 0..=i {
                    let c = h[i][j].to_cols_array_2d();
                    let b = [
                        [c[0][0], c[1][0], c[2][0]],
                        [c[0][1], c[1][1], c[2][1]],
                        [c[0][2], c[1][2], c[2][2]],
                    ];
                    self.matrix.add_block(vs[i], vs[j], &b);
                }
            }
        }
        if damping > 0.0 {
            for v in 0..y.len() {
                self.matrix.add_diagonal(v as u32, damping * self.mass[v]);
            }
        }
        if self.pinned.iter().any(|&p| p) {
            self.matrix.pin(&self.pinned_dof);
        }
    }

    /// Grows the sparsity pattern to hold the self-contact blocks (a pair of vertices
    /// that touch for the first time couples them in the Hessian); the bending values
    /// are laid out again. False if the grown pattern could not be analysed (the blocks
    /// are then left out of this Hessian: Newton's steps only get shorter).
    fn make_room(&mut self, blocks: &[([u32; 4], [[glam::DMat3; 4]; 4])]) -> bool {
        // every two vertices of a pair's stencil (a triangle's or an edge's own are in
        // the pattern already)
        let missing: Vec<(u32, u32)> = blocks
            .iter()
            .flat_map(|(vs, _)| (0..4).flat_map(move |i| (i + 1..4).map(move |j| (vs[i], vs[j]))))
            .filter(|&(a, b)| !self.matrix.has_block(a, b))
            .collect();
        if missing.is_empty() {
            return true;
        }
        match self.matrix.grown(missing) {
            Ok(m) => {
                self.matrix = m;
                self.assemble_bending();
                true
            }
            Err(e) => {
                tracing::warn!("self-contact left out of the Hessian: {e}");
                false
            }
        }
    }

    /// ‖F‖ = ‖∇E‖ over free vertices, N, without friction: the prediction error of
    /// SOR §6 (strain, bending, gravity and contact forces).
    pub fn residual_norm(&mut self, y: &[DVec3], body: Option<&Collider>) -> f64 {
        let friction = self.friction.take();
        let mut g = vec![DVec3::ZERO; y.len()];
        self.gradient(y, body, &mut g);
        self.friction = friction;
        g.iter().map(|v| v.length_squared()).sum::<f64>().sqrt()
    }

    /// Sets (or clears) the lagged friction: anchors `anchor`, normal forces and normals
    /// from `forces` (see [`Cloth::contact_forces`]).
    pub(crate) fn set_friction(&mut self, anchor: Option<FrictionAnchor<'_>>) {
        self.friction = match anchor {
            Some((a, forces)) if self.params.friction > 0.0 => Some(Friction {
                anchor: a.to_vec(),
                mu_lambda: forces
                    .iter()
                    .map(|(l, _)| self.params.friction * l)
                    .collect(),
                tangent: forces
                    .iter()
                    .map(|(_, n)| glam::DMat3::IDENTITY - contact::outer(*n, *n))
                    .collect(),
                slip: self.params.friction_slip,
            }),
            _ => None,
        };
    }
}
