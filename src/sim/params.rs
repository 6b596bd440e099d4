//! Simulator parameters with their defaults from the SOR paper (§7) and why.

use crate::body::SkinningMethod;

/// Material and solver parameters of the cloth statics simulator.
///
/// Defaults are SOR §7's material (the same for all their garments) and solver settings
/// chosen for this implementation; every value states its unit.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimParams {
    /// Stretching stiffness: 2D Young's modulus of the membrane, N/m (SOR §7: 30 N/m).
    pub stretch_stiffness: f64,
    /// Poisson ratio of the membrane, dimensionless (0.3, woven cotton-like; SOR does not
    /// state one). With the stiffness it gives the 2D Lamé pair (plane stress).
    pub poisson: f64,
    /// The membrane's stiffness in compression as a share of its stiffness in tension,
    /// dimensionless, in (0, 1]: principal strains (and the strain's trace) below zero
    /// are penalised this much less. 1 is SOR §7's StVK membrane; woven cloth resists
    /// compression far less than stretch (it buckles at scales finer than the mesh), and
    /// a softer response lets a coarse mesh take up surplus cloth in its plane instead
    /// of in a few mesh-sized puffs.
    pub compression_ratio: f64,
    /// Bending stiffness, N·m (SOR §7: 1e-5 N·m).
    pub bend_stiffness: f64,
    /// Area density, kg/m² (SOR §7: 0.1 kg/m²).
    pub density: f64,
    /// Gravitational acceleration along −Y, m/s².
    pub gravity: f64,
    /// Contact margin: the cloth is pushed out to this distance from the body surface,
    /// metres (SOR §6–7: 5 mm, also the runtime penetration clearance ε_p).
    pub contact_margin: f64,
    /// Contact pressure stiffness κ, N/m³: a vertex of area A at depth e below the
    /// margin feels A·κ·e²/margin. 1e5 N/m³ gives 500 Pa at the margin's bottom, ~500×
    /// the weight of the cloth, so resting cloth sits within a fraction of a millimetre
    /// of the margin.
    pub contact_stiffness: f64,
    /// Self-contact margin δ, metres: a vertex is kept this far from the garment's own
    /// triangles that do not hold it (a sleeve on the torso, a fold on the cloth under
    /// it), by IPC's barrier −A·κ·(d − δ)²·ln(d/δ), and no step carries a vertex
    /// through one. 0 (the default) turns self-contact off, as in SOR §7, which does not
    /// model it; [`SimParams::SELF_CONTACT_MARGIN`] is the value `--self-contact` sets
    /// and the default database uses. Off by default for other bakes and drapes because
    /// it costs them about a third more time (`docs/notes/simulator.md`).
    #[serde(skip_serializing_if = "is_off")]
    pub self_contact_margin: f64,
    /// Self-contact stiffness κ of the barrier, N/m³: with 1e5 a layer resting on another
    /// under its own weight sits about 0.1 mm inside the margin, and the force grows
    /// without bound as the gap closes.
    #[serde(skip_serializing_if = "is_default_self_contact_stiffness")]
    pub self_contact_stiffness: f64,
    /// Edge pairs' mollifier threshold c, dimensionless: an edge–edge pair's barrier
    /// fades out as |u × v|² falls below c·|u₀|²·|v₀|² (u, v the edges, u₀, v₀ as
    /// modelled), where the edges turn parallel, their nearest points stop being unique
    /// and the vertex–triangle pairs at their ends hold the layers apart (IPC, Li et al.
    /// 2020, Eq. 23–24; its default 1e-3 is about 1.8°). With the pairs' Hessian
    /// projected as IPC projects it, the paper's value drapes the default T-shirt as
    /// well as 1e-5 did (sim REVISION 6's default, needed while that Hessian was only
    /// its Gauss–Newton part: then 1e-3 took the rest drape 305 Newton iterations
    /// instead of 123).
    #[serde(skip_serializing_if = "is_default_self_contact_parallel")]
    pub self_contact_parallel: f64,
    /// Friction coefficient between cloth and body (SOR §7: 0.3). Used when a garment is
    /// carried from pose to pose; draping at rest is frictionless.
    pub friction: f64,
    /// Slip length of the smoothed friction, metres: tangential motion below it sticks.
    pub friction_slip: f64,
    /// Convergence: ‖F‖ ≤ `tolerance` · ‖F_gravity‖ (the norm of the cloth's weight
    /// vector), dimensionless. 1e-2 leaves every vertex with a residual force of about
    /// 1 % of its own weight; below that, frictionless cloth only creeps along sliding
    /// modes (a sleeve slipping down a raised arm) that real friction would stop.
    pub tolerance: f64,
    /// Newton iterations before giving up with [`crate::sim::SolveError::NotConverged`].
    pub max_iterations: usize,
    /// Smallest proximal (Levenberg–Marquardt) damping, 1/s² (multiplies the lumped
    /// mass): keeps the Newton system definite along sliding modes, where cloth can move
    /// over a frictionless body without changing its energy.
    pub min_damping: f64,
    /// Largest vertex displacement of one Newton step, metres: keeps a falling garment
    /// from tunnelling through the body between two energy evaluations (it must stay
    /// below the thinnest body part and is a little under the contact margin).
    pub max_step: f64,
    /// Joint-angle step of the central difference for ∂F/∂Θ, degrees. SOR §4 uses 0.5°
    /// secants; with penalty contact the 0.5° secant at a fixed cloth state overstates
    /// the derivative about twofold (the contact stiffens as the body pushes in while
    /// the cloth is held still), whereas the derivative itself (a 0.01° step) predicts
    /// full ±0.5° re-solves within a few percent (see the sim tests).
    pub sensitivity_step_deg: f64,
    /// Skinning of the body the cloth rests on (LBS matches what glTF clients draw).
    pub body_skinning: SkinningMethod,
    /// Largest joint-angle change per quasi-static continuation step, degrees.
    pub continuation_step_deg: f64,
    /// Tolerance of a continuation's intermediate steps, as a fraction of the weight
    /// norm (the last step solves to `tolerance`): the path only has to stay near
    /// balance, and at 5 % a walking pose carried from the T-pose takes ~40 % fewer
    /// Newton iterations than at 1 %.
    pub continuation_tolerance: f64,
    /// A continuation step whose solve stops short of `tolerance` (Newton stalled where
    /// the body pinches the cloth, e.g. a hand against the hip) is still accepted when
    /// ‖F‖ ≤ this fraction of the weight norm; the result is then marked unconverged.
    pub continuation_accept: f64,
}

impl Default for SimParams {
    fn default() -> Self {
        Self {
            stretch_stiffness: 30.0,
            poisson: 0.3,
            compression_ratio: 0.1,
            bend_stiffness: 1e-5,
            density: 0.1,
            gravity: 9.81,
            contact_margin: 0.005,
            contact_stiffness: 1e5,
            self_contact_margin: 0.0,
            self_contact_stiffness: 1e5,
            self_contact_parallel: 1e-3,
            friction: 0.3,
            friction_slip: 0.001,
            tolerance: 1e-2,
            max_iterations: 400,
            min_damping: 1e-4,
            max_step: 0.01,
            sensitivity_step_deg: 0.01,
            body_skinning: SkinningMethod::Lbs,
            continuation_step_deg: 6.0,
            continuation_tolerance: 0.05,
            continuation_accept: 0.1,
        }
    }
}

/// Self-contact off: left out of the recorded parameters, so that databases, caches and
/// ground truths keyed on them from before self-contact existed stay valid.
fn is_off(margin: &f64) -> bool {
    *margin == 0.0
}

fn is_default_self_contact_stiffness(k: &f64) -> bool {
    *k == SimParams::default().self_contact_stiffness
}

fn is_default_self_contact_parallel(c: &f64) -> bool {
    *c == SimParams::default().self_contact_parallel
}

impl SimParams {
    /// The self-contact margin `--self-contact` turns on, metres: 3 mm, two layers of
    /// cloth about a millimetre thick with room to spare, below the body's 5 mm margin.
    pub const SELF_CONTACT_MARGIN: f64 = 0.003;

    /// These parameters with self-contact on at [`SimParams::SELF_CONTACT_MARGIN`].
    pub fn with_self_contact(mut self) -> Self {
        self.self_contact_margin = Self::SELF_CONTACT_MARGIN;
        self
    }

    /// 2D Lamé parameters (μ, λ) in N/m for plane stress.
    pub fn lame(&self) -> (f64, f64) {
        let e = self.stretch_stiffness;
        let nu = self.poisson;
        (e / (2.0 * (1.0 + nu)), e * nu / (1.0 - nu * nu))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Self-contact off is not recorded (databases and ground truths keyed on the
    /// parameters from before it existed stay valid); on, it is, and reads back.
    #[test]
    fn self_contact_is_recorded_only_when_on() {
        let off = serde_json::to_value(SimParams::default()).expect("json");
        assert!(off.get("self_contact_margin").is_none(), "{off}");
        assert!(off.get("self_contact_stiffness").is_none(), "{off}");
        let on = SimParams::default().with_self_contact();
        let json = serde_json::to_value(&on).expect("json");
        assert_eq!(json["self_contact_margin"], SimParams::SELF_CONTACT_MARGIN);
        let back: SimParams = serde_json::from_value(json).expect("reads back");
        assert_eq!(back, on);
        let back: SimParams = serde_json::from_value(off).expect("reads back");
        assert_eq!(back, SimParams::default());
    }
}
