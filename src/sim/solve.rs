//! Static equilibrium by Newton's method: projected (PSD) element Hessians, a
//! proximal / Levenberg–Marquardt term μ·M that keeps the system definite along sliding
//! modes, backtracking (Armijo) line search on the total energy, and convergence on the
//! residual force ‖F‖ = ‖∇E‖.

use std::time::{Duration, Instant};

use glam::DVec3;

use super::cloth::Cloth;
use super::contact::Collider;
use super::self_contact::{PairCache, relative_moves};
use super::sparse::FactorError;

/// Why a solve failed.
#[derive(Debug, thiserror::Error, PartialEq)]
#[non_exhaustive]
pub enum SolveError {
    /// The garment mesh is unusable (degenerate triangle, non-manifold, non-finite).
    #[error("garment mesh: {0}")]
    Mesh(#[from] crate::mesh::MeshError),
    /// Newton ran out of iterations.
    #[error(
        "no equilibrium after {iterations} Newton iterations: ‖F‖ = {residual:.3e} N, needed {tolerance:.3e} N"
    )]
    NotConverged {
        /// Iterations done.
        iterations: usize,
        /// Final residual norm, N.
        residual: f64,
        /// Required residual norm, N.
        tolerance: f64,
    },
    /// No step along the Newton direction lowered the energy, even with heavy damping.
    #[error("line search failed at iteration {iteration} (‖F‖ = {residual:.3e} N)")]
    Stalled {
        /// Iteration.
        iteration: usize,
        /// Residual norm there, N.
        residual: f64,
    },
    /// A NaN or infinity appeared in the state or the pose.
    #[error("non-finite value in the {0}")]
    NonFinite(&'static str),
    /// The sparse factorisation failed (allocation).
    #[error(transparent)]
    Factor(#[from] FactorError),
    /// Part of the garment lies deep inside the body, beyond the contact field's reach.
    #[error(
        "garment vertex {vertex} is {depth:.3} m inside the body; fit the garment to the body first"
    )]
    InsideBody {
        /// A vertex inside.
        vertex: usize,
        /// Its depth, metres.
        depth: f64,
    },
    /// A simulator parameter is outside its range.
    #[error("simulator parameter {name} = {value} is out of range: {expected}")]
    Param {
        /// The parameter's name in [`crate::sim::SimParams`].
        name: &'static str,
        /// Its value.
        value: f64,
        /// What it must be.
        expected: &'static str,
    },
    /// The garment is too far from the body to rest on it.
    #[error("garment is {distance:.3} m from the body (vertex {vertex}); it cannot rest on it")]
    FarFromBody {
        /// Closest garment vertex.
        vertex: usize,
        /// Its distance, metres.
        distance: f64,
    },
}

/// What a solve did.
#[derive(Clone, Debug, Default)]
pub struct SolveReport {
    /// Newton iterations.
    pub iterations: usize,
    /// Final ‖F‖, N.
    pub residual: f64,
    /// Required ‖F‖, N.
    pub tolerance: f64,
    /// Energy after every accepted step, J (non-increasing).
    pub energies: Vec<f64>,
    /// Time spent in numeric factorisations.
    pub factor_time: Duration,
    /// Number of numeric factorisations.
    pub factorizations: usize,
    /// Wall time of the whole solve.
    pub total_time: Duration,
    /// Continuation steps accepted short of the tolerance (see
    /// [`crate::sim::SimParams::continuation_accept`]).
    pub unconverged_steps: usize,
}

impl SolveReport {
    /// Whether the final state met the tolerance.
    pub fn converged(&self) -> bool {
        self.residual <= self.tolerance
    }
}

impl Cloth {
    fn dump_worst(&self, y: &[DVec3], body: Option<&Collider>, g: &[DVec3]) {
        let mut idx: Vec<usize> = (0..y.len()).collect();
        idx.sort_by(|a, b| g[*b].length().total_cmp(&g[*a].length()));
        let mut own = vec![DVec3::ZERO; y.len()];
        if let Some(sc) = &self.self_contact {
            sc.add_gradient(y, &self.triangles, &self.area, None, &mut own);
        }
        let pairs = match &self.self_contact {
            Some(sc) => sc.pairs(y, &self.triangles, sc.margin),
            None => Vec::new(),
        };
        for &v in idx.iter().take(8) {
            let exact = body.map(|b| b.signed_distance(y[v]));
            eprintln!(
                "v{v} |g| {:.3e} g {:?} at {:?} exact distance {:?} mass {:.2e}; self-contact force {:.3e}, pairs {:?}",
                g[v].length(),
                g[v],
                y[v],
                exact,
                self.mass[v],
                own[v].length(),
                pairs
                    .iter()
                    .filter(|p| {
                        self.self_contact.as_ref().is_some_and(|sc| {
                            sc.stencil(**p, &self.triangles).contains(&(v as u32))
                        })
                    })
                    .collect::<Vec<_>>()
            );
        }
    }

    /// Solves for the static equilibrium starting from `y` (updated in place) with the
    /// body `body` (or none). Errors instead of looping when it does not converge.
    pub fn solve(
        &mut self,
        y: &mut [DVec3],
        body: Option<&Collider>,
    ) -> Result<SolveReport, SolveError> {
        let r = self.newton(y, body);
        self.candidates = None;
        r
    }

    fn newton(
        &mut self,
        y: &mut [DVec3],
        body: Option<&Collider>,
    ) -> Result<SolveReport, SolveError> {
        let start = Instant::now();
        if y.iter().any(|p| !p.is_finite()) {
            return Err(SolveError::NonFinite("garment state"));
        }
        let n = y.len();
        let tol = self.params.tolerance * self.gravity_norm().max(1e-12);
        let mut report = SolveReport {
            tolerance: tol,
            ..Default::default()
        };
        let mut g = vec![DVec3::ZERO; n];
        let mut trial = vec![DVec3::ZERO; n];
        let mut dir = vec![0.0; 3 * n];
        let mut damping = self.params.min_damping.max(1.0);
        let reference = y.to_vec();
        let mut energy = self.energy_from(y, &reference, body);
        report.energies.push(energy);
        // self-contact pairs found within a wider reach, reused while the cloth moves
        // less than that (the same pairs as a new search)
        let mut pair_cache = PairCache::default();
        // per vertex, how far a step moves it from the step's common shift
        let mut moved = Vec::with_capacity(n);
        for it in 0..self.params.max_iterations {
            // the self-contact pairs within the margin: the gradient's and the Hessian's
            // (each step's own, within its reach, are found once its length is known)
            let margin = self.params.self_contact_margin;
            self.candidates = None;
            if self.self_contact.is_some() {
                self.candidates = Some(self.self_contact_pairs_cached(y, margin, &mut pair_cache));
            }
            // steps are bounded near a body, or near the garment's own triangles that a
            // vertex could reach in one step of max_step
            let bounded = body.is_some()
                || !self
                    .self_contact_pairs(y, margin + 2.0 * self.params.max_step)
                    .is_empty();
            let at_y = self.candidates.clone();
            self.gradient(y, body, &mut g);
            let res = g.iter().map(|v| v.length_squared()).sum::<f64>().sqrt();
            report.iterations = it;
            report.residual = res;
            if !res.is_finite() {
                return Err(SolveError::NonFinite("residual"));
            }
            if res <= tol {
                report.total_time = start.elapsed();
                return Ok(report);
            }
            let mut accepted = false;
            // once the residual is below a third of the weight, try the true Hessian
            // (quadratic convergence where it is definite); otherwise, or when it is
            // indefinite, the projected one
            let mut project = res > 0.3 * self.gravity_norm();
            for _attempt in 0..8 {
                self.candidates.clone_from(&at_y);
                self.assemble(y, body, damping, project);
                let t0 = Instant::now();
                let ok = self.matrix.factorize();
                report.factor_time += t0.elapsed();
                report.factorizations += 1;
                if ok.is_err() {
                    if std::env::var("CLOTHCAST_SIM_TRACE").is_ok() {
                        eprintln!(
                            "  factorisation failed (projected: {project}, damping {damping:.2e})"
                        );
                    }
                    if project {
                        damping *= 10.0;
                    }
                    project = true;
                    continue;
                }
                for v in 0..n {
                    for a in 0..3 {
                        dir[3 * v + a] = -g[v][a];
                    }
                }
                self.matrix.solve_vec(&mut dir);
                // trust region near a body: no vertex moves farther than max_step in one
                // iteration (so it cannot jump through a limb)
                let longest = (0..n)
                    .map(|v| DVec3::new(dir[3 * v], dir[3 * v + 1], dir[3 * v + 2]).length())
                    .fold(0.0, f64::max);
                if bounded && longest > self.params.max_step {
                    let s = self.params.max_step / longest;
                    dir.iter_mut().for_each(|d| *d *= s);
                }
                // garment triangles a vertex could reach in this step (no vertex moves
                // farther than `step` from the common part of all the moves, so no pair's
                // distance changes by more than twice that): no step may carry a vertex through one of them, and the
                // self-contact energy of every state the line search tries is among them
                // (the slack, relative and 1 pm, covers rounding in the moves and the
                // distances; pairs beyond the margin have no energy and a pair beyond
                // the step's reach cannot cross, so it changes no result)
                let step = relative_moves(
                    n,
                    |v| DVec3::new(dir[3 * v], dir[3 * v + 1], dir[3 * v + 2]),
                    &mut moved,
                );
                // (and of those, only the pairs whose own vertices move far enough)
                let near = if self.self_contact.is_some() && step.is_finite() {
                    self.self_contact_pairs_reaching(
                        y,
                        margin + 2.0 * step * (1.0 + 1e-9) + 1e-12,
                        &mut pair_cache,
                        margin,
                        &moved,
                    )
                } else {
                    Vec::new()
                };
                if self.self_contact.is_some() {
                    self.candidates = Some(near.clone());
                }
                let slope: f64 = (0..n)
                    .map(|v| g[v].dot(DVec3::new(dir[3 * v], dir[3 * v + 1], dir[3 * v + 2])))
                    .sum();
                if slope.is_nan() || slope >= 0.0 {
                    if std::env::var("CLOTHCAST_SIM_TRACE").is_ok() {
                        eprintln!(
                            "  not a descent direction (slope {slope:.3e}, damping {damping:.2e})"
                        );
                    }
                    damping *= 10.0;
                    continue;
                }
                // backtracking line search (Armijo)
                let mut alpha = 1.0;
                let mut found = None;
                for _ in 0..25 {
                    for v in 0..n {
                        trial[v] =
                            y[v] + DVec3::new(dir[3 * v], dir[3 * v + 1], dir[3 * v + 2]) * alpha;
                    }
                    if self.self_crossing(y, &trial, &near) {
                        if std::env::var("CLOTHCAST_SIM_TRACE").is_ok() {
                            eprintln!("  step {alpha} crosses the cloth");
                        }
                        alpha *= 0.5;
                        continue;
                    }
                    let e = self.energy_from(&trial, &reference, body);
                    if e.is_finite() && e <= energy + 1e-4 * alpha * slope {
                        found = Some(e);
                        break;
                    }
                    alpha *= 0.5;
                }
                if found.is_none() {
                    // Near a minimum the predicted decrease falls to the rounding level of
                    // the total energy; accept the longest step that lowers ‖F‖ without
                    // raising the energy beyond that rounding level.
                    let noise = 1e-13 * (energy.abs() + 1.0);
                    let mut ga = vec![DVec3::ZERO; n];
                    let mut a = 1.0;
                    for _ in 0..10 {
                        for v in 0..n {
                            trial[v] =
                                y[v] + DVec3::new(dir[3 * v], dir[3 * v + 1], dir[3 * v + 2]) * a;
                        }
                        if self.self_crossing(y, &trial, &near) {
                            a *= 0.5;
                            continue;
                        }
                        let e = self.energy_from(&trial, &reference, body);
                        self.gradient(&trial, body, &mut ga);
                        let r = ga.iter().map(|v| v.length_squared()).sum::<f64>().sqrt();
                        if e <= energy + noise && r < res {
                            found = Some(e.min(energy));
                            alpha = a;
                            break;
                        }
                        a *= 0.5;
                    }
                }
                match found {
                    Some(e) => {
                        if std::env::var("CLOTHCAST_SIM_TRACE").is_ok() {
                            eprintln!(
                                "it {it} res {res:.3e} E {e:.6e} alpha {alpha} damping {damping:.2e}"
                            );
                        }
                        y.copy_from_slice(&trial);
                        energy = e;
                        report.energies.push(e);
                        damping = if alpha == 1.0 {
                            (damping / 3.0).max(self.params.min_damping)
                        } else {
                            damping * 2.0
                        };
                        accepted = true;
                        break;
                    }
                    None => {
                        if std::env::var("CLOTHCAST_SIM_TRACE").is_ok() {
                            eprintln!(
                                "  no step lowers the energy (slope {slope:.3e}, damping {damping:.2e})"
                            );
                        }
                        damping *= 10.0
                    }
                }
            }
            // a step is only found with enormous damping: the energy is not smooth here
            // (cloth pinched between two body parts), Newton cannot make progress
            if !accepted || damping > 1e8 {
                if std::env::var("CLOTHCAST_SIM_TRACE").is_ok() {
                    self.dump_worst(y, body, &g);
                }
                return Err(SolveError::Stalled {
                    iteration: it,
                    residual: res,
                });
            }
        }
        self.gradient(y, body, &mut g);
        let res = g.iter().map(|v| v.length_squared()).sum::<f64>().sqrt();
        if std::env::var("CLOTHCAST_SIM_TRACE").is_ok() {
            self.dump_worst(y, body, &g);
        }
        Err(SolveError::NotConverged {
            iterations: self.params.max_iterations,
            residual: res,
            tolerance: tol,
        })
    }
}
