//! `Simulator`: a garment on a body. Draping at the rest pose, quasi-static
//! continuation to any pose (SOR Alg. 1), the residual ‖F‖ of any garment state at any
//! pose (SOR §6), and the sensitivity dY/dΘ (SOR Eq. 3).

use glam::{DVec3, Vec3};

use crate::body::Body;
use crate::garment::Garment;
use crate::skeleton::{DOF_COUNT, JointId, Pose, theta};

use super::cloth::Cloth;
use super::contact::Collider;
use super::params::SimParams;
use super::solve::{SolveError, SolveReport};

/// Where friction holds the cloth: anchor positions at a pose (they move with the body)
/// and the lagged normal forces and normals of the contacts.
#[derive(Clone, Debug)]
pub struct FrictionAnchor {
    /// Pose the anchor positions belong to.
    pub pose: Pose,
    /// Anchor positions, metres.
    pub positions: Vec<DVec3>,
    /// Per vertex: contact normal force (N) and normal.
    pub forces: Vec<(f64, DVec3)>,
}

/// A garment at static equilibrium at a pose.
#[derive(Clone, Debug)]
pub struct Equilibrium {
    /// The body pose (canonical frame recommended: heading and translation do not change
    /// the statics).
    pub pose: Pose,
    /// Garment vertex positions, metres.
    pub positions: Vec<DVec3>,
    /// Newton statistics of the last solve (summed over continuation steps).
    pub report: SolveReport,
    /// The friction anchor this equilibrium holds against (`None`: frictionless).
    pub anchor: Option<FrictionAnchor>,
}

impl Equilibrium {
    /// Positions as single precision.
    pub fn positions_f32(&self) -> Vec<Vec3> {
        self.positions.iter().map(|p| p.as_vec3()).collect()
    }
}

/// Cloth statics of one garment on one body.
pub struct Simulator<'a> {
    body: &'a Body,
    garment: &'a Garment,
    cloth: Cloth,
    collider: Collider,
    params: SimParams,
}

/// Per-DOF sensitivities s_m = ∂Y/∂Θ_m at an equilibrium (SOR Eq. 3), metres per radian.
#[derive(Clone, Debug)]
pub struct Sensitivity {
    /// `values[m][v]`: sensitivity of vertex `v` to joint-angle DOF `m` (66 DOFs).
    pub values: Vec<Vec<DVec3>>,
    /// Time spent on the 66 right-hand sides (∂F/∂Θ).
    pub rhs_time: std::time::Duration,
    /// Time spent assembling and factorising the Hessian.
    pub factor_time: std::time::Duration,
    /// Time spent on the 66-column solve.
    pub solve_time: std::time::Duration,
}

fn check_pose(p: &Pose) -> Result<(), SolveError> {
    let mut q = *p;
    q.validate().map_err(|_| SolveError::NonFinite("pose"))
}

impl<'a> Simulator<'a> {
    /// [`Simulator::transfer`] of the listed vertices only (others copied unchanged).
    fn transfer_subset(&self, y: &[DVec3], a: &Pose, b: &Pose, subset: &[u32]) -> Vec<DVec3> {
        let ta = self.body.skeleton.skinning_transforms(a);
        let tb = self.body.skeleton.skinning_transforms(b);
        let rel: [crate::skeleton::Rigid; 22] =
            std::array::from_fn(|k| tb[k].compose(&ta[k].inverse()));
        let mut out = y.to_vec();
        let skin = &self.garment.skin;
        for &v in subset {
            let v = v as usize;
            let p = y[v].as_vec3();
            let mut acc = Vec3::ZERO;
            for k in 0..4 {
                let w = skin.weights[v][k];
                if w > 0.0 {
                    acc += rel[skin.joints[v][k] as usize].apply(p) * w;
                }
            }
            out[v] = y[v] + (acc - p).as_dvec3();
        }
        out
    }

    /// Moves garment positions with the body from pose `a` to pose `b` by linear blend
    /// skinning with the garment's skin weights (the initial guess and friction anchor
    /// of a continuation step).
    fn transfer(&self, y: &[DVec3], a: &Pose, b: &Pose) -> Vec<DVec3> {
        let all: Vec<u32> = (0..y.len() as u32).collect();
        self.transfer_subset(y, a, b, &all)
    }

    /// Prepares the simulation of `garment` on `body`.
    pub fn new(
        body: &'a Body,
        garment: &'a Garment,
        params: &SimParams,
    ) -> Result<Self, SolveError> {
        let cloth = Cloth::with_metric(&garment.mesh, &garment.metric, params)?;
        let collider = Collider::new(body, &Pose::rest(), params)?;
        Ok(Self {
            body,
            garment,
            cloth,
            collider,
            params: params.clone(),
        })
    }

    /// The cloth model.
    pub fn cloth(&self) -> &Cloth {
        &self.cloth
    }

    /// The body posed at the pose of the last call.
    pub fn collider(&self) -> &Collider {
        &self.collider
    }

    /// Drapes the garment on the body at the rest pose, starting from its T-pose shape.
    pub fn drape_rest(&mut self) -> Result<Equilibrium, SolveError> {
        let pose = Pose::rest();
        self.collider.set_pose(self.body, &pose, &self.params);
        let mut y: Vec<DVec3> = self
            .garment
            .mesh
            .positions
            .iter()
            .map(|p| p.as_dvec3())
            .collect();
        self.check_near_body(&y)?;
        // a garment sunk into the body has no valid drape (the contact cannot tell which
        // way is out that deep)
        if let Some((vertex, d)) = self.collider.deepest_inside(&y) {
            return Err(SolveError::InsideBody { vertex, depth: -d });
        }
        let report = self.cloth.solve(&mut y, Some(&self.collider))?;
        Ok(Equilibrium {
            pose,
            positions: y,
            report,
            anchor: None,
        })
    }

    fn check_near_body(&self, y: &[DVec3]) -> Result<(), SolveError> {
        let (vertex, distance) = y
            .iter()
            .enumerate()
            .map(|(i, p)| (i, self.collider.signed_distance(*p)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap_or((0, 0.0));
        if distance > 0.1 {
            return Err(SolveError::FarFromBody { vertex, distance });
        }
        Ok(())
    }

    /// Number of continuation steps between two poses (see [`continuation_steps`]).
    pub fn steps_between(&self, a: &Pose, b: &Pose) -> usize {
        continuation_steps(a, b, self.params.continuation_step_deg)
    }

    /// Carries an equilibrium to `target` quasi-statically (SOR Alg. 1): the body moves
    /// in small steps; the garment is moved with it by skinning, then re-solved.
    pub fn carry(&mut self, from: &Equilibrium, target: &Pose) -> Result<Equilibrium, SolveError> {
        check_pose(target)?;
        let steps = self.steps_between(&from.pose, target);
        let mut y = from.positions.clone();
        let mut prev = from.pose;
        let mut total = SolveReport::default();
        let mut anchor = None;
        for k in 1..=steps {
            let pose = from.pose.slerp(target, k as f32 / steps as f32);
            // friction is lagged on the previous equilibrium's contact forces
            self.collider.set_pose(self.body, &prev, &self.params);
            let forces = self.cloth.contact_forces(&y, &self.collider);
            // move the garment with the body; that is also where friction anchors it
            // (the body moves a sleeve towards the torso: it is carried only as far as
            // the cloth there lets it, and the solve takes it on)
            let mut moved = self.transfer(&y, &prev, &pose);
            let held = self.cloth.limit_self_crossing(&y, &mut moved);
            if held > 0 {
                tracing::debug!(
                    step = k,
                    held,
                    "vertices held back from crossing the garment"
                );
            }
            y = moved;
            self.collider.set_pose(self.body, &pose, &self.params);
            let normals = self.cloth.contact_forces(&y, &self.collider);
            let lagged: Vec<(f64, DVec3)> = forces
                .iter()
                .zip(&normals)
                .map(|(f, n)| (f.0, if n.0 > 0.0 { n.1 } else { f.1 }))
                .collect();
            self.cloth.set_friction(Some((&y, &lagged)));
            anchor = Some(FrictionAnchor {
                pose,
                positions: y.clone(),
                forces: lagged,
            });
            // the steps on the way only have to stay near balance; the last one solves
            // to the full tolerance
            let full = self.cloth.params.tolerance;
            if k < steps {
                self.cloth.params.tolerance = self.params.continuation_tolerance.max(full);
            }
            let r = self.cloth.solve(&mut y, Some(&self.collider));
            self.cloth.params.tolerance = full;
            self.cloth.set_friction(None);
            let r = match r {
                Ok(r) => r,
                // a stalled or slow step is kept when it is close enough to balance
                Err(SolveError::Stalled { residual, .. })
                | Err(SolveError::NotConverged { residual, .. })
                    if residual <= self.params.continuation_accept * self.cloth.gravity_norm()
                        && y.iter().all(|p| p.is_finite()) =>
                {
                    total.unconverged_steps += 1;
                    tracing::debug!(
                        step = k,
                        residual,
                        "continuation step accepted short of tolerance"
                    );
                    SolveReport {
                        residual,
                        tolerance: self.params.tolerance * self.cloth.gravity_norm(),
                        ..Default::default()
                    }
                }
                Err(e) => return Err(e),
            };
            tracing::debug!(step = k, steps, iterations = r.iterations, time = ?r.total_time, "continuation step");
            if std::env::var("CLOTHCAST_SIM_TRACE").is_ok() {
                eprintln!(
                    "step {k}/{steps}: {} iterations, {:?}",
                    r.iterations, r.total_time
                );
            }
            total.iterations += r.iterations;
            total.factorizations += r.factorizations;
            total.factor_time += r.factor_time;
            total.total_time += r.total_time;
            total.residual = r.residual;
            total.tolerance = r.tolerance;
            total.energies.extend(r.energies);
            prev = pose;
        }
        Ok(Equilibrium {
            pose: *target,
            positions: y,
            report: total,
            anchor,
        })
    }

    /// Re-solves an equilibrium without friction (the stored friction forces of a
    /// continuation are released): the frictionless equilibrium nearest to it.
    pub fn settle(&mut self, eq: &Equilibrium) -> Result<Equilibrium, SolveError> {
        check_pose(&eq.pose)?;
        self.collider.set_pose(self.body, &eq.pose, &self.params);
        let mut y = eq.positions.clone();
        self.cloth.set_friction(None);
        let report = self.cloth.solve(&mut y, Some(&self.collider))?;
        Ok(Equilibrium {
            pose: eq.pose,
            positions: y,
            report,
            anchor: None,
        })
    }

    /// The friction anchor of an equilibrium: its own, or (frictionless equilibria) the
    /// equilibrium itself with its contact forces.
    fn anchor_of(&mut self, eq: &Equilibrium) -> FrictionAnchor {
        match &eq.anchor {
            Some(a) => a.clone(),
            None => {
                self.collider.set_pose(self.body, &eq.pose, &self.params);
                FrictionAnchor {
                    pose: eq.pose,
                    positions: eq.positions.clone(),
                    forces: self.cloth.contact_forces(&eq.positions, &self.collider),
                }
            }
        }
    }

    /// Re-solves an equilibrium at a nearby pose in one step, holding the same friction
    /// anchor (moved with the body): the map whose derivative [`Simulator::sensitivity`]
    /// computes.
    pub fn resolve(&mut self, eq: &Equilibrium, pose: &Pose) -> Result<Equilibrium, SolveError> {
        check_pose(pose)?;
        let anchor = self.anchor_of(eq);
        let moved = self.transfer(&anchor.positions, &anchor.pose, pose);
        let mut y = self.transfer(&eq.positions, &eq.pose, pose);
        self.collider.set_pose(self.body, pose, &self.params);
        self.cloth.set_friction(Some((&moved, &anchor.forces)));
        let report = self.cloth.solve(&mut y, Some(&self.collider));
        self.cloth.set_friction(None);
        let report = report?;
        let anchor = FrictionAnchor {
            pose: *pose,
            positions: moved,
            forces: anchor.forces,
        };
        Ok(Equilibrium {
            pose: *pose,
            positions: y,
            report,
            anchor: Some(anchor),
        })
    }

    /// Drapes at rest, then carries the garment to `target`.
    pub fn drape(&mut self, target: &Pose) -> Result<Equilibrium, SolveError> {
        let rest = self.drape_rest()?;
        self.carry(&rest, target)
    }

    /// ‖F(p, X, Y)‖: the residual force norm (N) of garment state `y` on the body at
    /// `pose` — the prediction error of SOR §6.
    pub fn residual(&mut self, pose: &Pose, y: &[DVec3]) -> Result<f64, SolveError> {
        check_pose(pose)?;
        if y.len() != self.cloth.vertex_count() || y.iter().any(|p| !p.is_finite()) {
            return Err(SolveError::NonFinite("garment state"));
        }
        self.collider.set_pose(self.body, pose, &self.params);
        Ok(self.cloth.residual_norm(y, Some(&self.collider)))
    }

    /// Sensitivities s_m = −(∂F/∂Y)⁻¹ ∂F/∂Θ_m for all 66 joint-angle DOFs at an
    /// equilibrium (SOR Eq. 3), with ∂F/∂Θ_m by central differences of ±`step` and one
    /// factorisation for all 66 right-hand sides. F includes the sticking friction of
    /// the contacts (anchored where the body carries the cloth), as in the quasi-static
    /// continuation that produced the equilibrium, so sliding modes are not singular.
    pub fn sensitivity(&mut self, eq: &Equilibrium) -> Result<Sensitivity, SolveError> {
        check_pose(&eq.pose)?;
        let n = self.cloth.vertex_count();
        let h = (self.params.sensitivity_step_deg as f32).to_radians();
        let y = &eq.positions;
        // right-hand sides: central differences of the gradient in Θ_m (only contact
        // forces depend on the body)
        let t_rhs = std::time::Instant::now();
        let mut rhs = faer::Mat::<f64>::zeros(3 * n, DOF_COUNT);
        let mut gp = vec![DVec3::ZERO; n];
        let mut gm = vec![DVec3::ZERO; n];
        // friction sticks the cloth to the body: anchored where the body carries it
        let anchor = self.anchor_of(eq);
        let forces = anchor.forces.clone();
        // only contact and friction depend on the pose; the step moves the body by at
        // most a metre × its angle, so only vertices that close to the margin feel it
        self.collider.set_pose(self.body, &eq.pose, &self.params);
        let reach = self.params.contact_margin + 2.0 * h as f64 + 1e-4;
        let active: Vec<u32> = (0..n as u32)
            .filter(|&v| {
                forces[v as usize].0 > 0.0
                    || self
                        .collider
                        .distance(y[v as usize], reach)
                        .is_some_and(|d| d.d < reach)
            })
            .collect();
        for m in 0..DOF_COUNT {
            let joint = JointId((m / 3) as u8);
            let mut axis = Vec3::ZERO;
            axis[m % 3] = 1.0;
            let perturbed = |s: f32| {
                let mut p = eq.pose;
                let q = p.rotation(joint) * crate::skeleton::quat_exp(axis * s);
                p.set_rotation(joint, q.normalize());
                p
            };
            for (sign, g) in [(1.0f32, &mut gp), (-1.0, &mut gm)] {
                let p = perturbed(sign * h);
                let moved = self.transfer_subset(&anchor.positions, &anchor.pose, &p, &active);
                self.cloth.set_friction(Some((&moved, &forces)));
                self.collider.set_pose(self.body, &p, &self.params);
                self.cloth.body_gradient(y, &self.collider, &active, g);
            }
            for &v in &active {
                let v = v as usize;
                let d = (gp[v] - gm[v]) / (2.0 * h as f64);
                for a in 0..3 {
                    rhs[(3 * v + a, m)] = -d[a];
                }
            }
        }
        let rhs_time = t_rhs.elapsed();
        let t_factor = std::time::Instant::now();
        self.collider.set_pose(self.body, &eq.pose, &self.params);
        let at_eq = self.transfer(&anchor.positions, &anchor.pose, &eq.pose);
        self.cloth.set_friction(Some((&at_eq, &forces)));
        // the true Hessian when it is definite at this equilibrium, else the projected one
        self.cloth
            .assemble(y, Some(&self.collider), self.params.min_damping, false);
        let factored = match self.cloth.matrix.factorize() {
            Ok(()) => Ok(()),
            Err(_) => {
                self.cloth
                    .assemble(y, Some(&self.collider), self.params.min_damping, true);
                self.cloth.matrix.factorize()
            }
        };
        self.cloth.set_friction(None);
        factored?;
        let factor_time = t_factor.elapsed();
        let t_solve = std::time::Instant::now();
        self.cloth.matrix.solve_in_place(rhs.as_mut());
        let solve_time = t_solve.elapsed();
        let values = (0..DOF_COUNT)
            .map(|m| {
                (0..n)
                    .map(|v| DVec3::new(rhs[(3 * v, m)], rhs[(3 * v + 1, m)], rhs[(3 * v + 2, m)]))
                    .collect()
            })
            .collect();
        Ok(Sensitivity {
            values,
            rhs_time,
            factor_time,
            solve_time,
        })
    }
}

/// Number of quasi-static continuation steps between two poses: the largest joint-angle
/// change (Θ of DESIGN §3, per joint) divided by `step_deg` degrees, at least one.
pub fn continuation_steps(a: &Pose, b: &Pose, step_deg: f64) -> usize {
    let th = theta(a, b);
    let mut worst = 0.0f32;
    for j in 0..DOF_COUNT / 3 {
        worst = worst.max(Vec3::new(th[3 * j], th[3 * j + 1], th[3 * j + 2]).length());
    }
    ((worst.to_degrees() as f64 / step_deg).ceil() as usize).max(1)
}
