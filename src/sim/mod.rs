//! Cloth statics (SOR §3, §6–7): StVK membrane, isometric bending, gravity and body
//! contact energies with exact gradients and Hessians; Newton's method to static
//! equilibrium with faer's sparse Cholesky; quasi-static continuation between poses;
//! the residual ‖F‖; and the sensitivity dY/dΘ of SOR Eq. 3.
//!
//! Entry points: [`Cloth::new`], [`Cloth::solve`], [`Simulator`].

mod bending;
mod cloth;
mod contact;
mod dense;
mod friction;
mod membrane;
mod params;
mod self_contact;
mod simulator;
mod solve;
mod sparse;

pub use cloth::Cloth;
pub use contact::Collider;
pub use params::SimParams;
pub use self_contact::self_intersections;
pub use simulator::{Equilibrium, FrictionAnchor, Sensitivity, Simulator, continuation_steps};
pub use solve::{SolveError, SolveReport};
pub use sparse::FactorError;

/// Revision of the simulator's results: bumped whenever a change to the code moves the
/// equilibria it finds for the same inputs and [`SimParams`] (2: friction's tangent
/// plane from the body field's unit normal; 3: the body field fades to "far" as the
/// last facet leaves its kernel; 4: self-contact pairs a vertex with the triangles
/// that hold its neighbours too; 5: a carried prediction may not bring a vertex much
/// closer to a triangle, as a Newton step may not; 6: two edges are a self-contact pair
/// too; 7: [`SimParams::self_contact_parallel`]'s default is IPC's 1e-3, not 1e-5,
/// and records leave a default value out, so the old default would read as the new;
/// 8: a vertex's crossing of a triangle is placed by bisection, not by interpolating
/// its height linearly), so that what is cached from its
/// results, the default database and kept ground truths, is simulated afresh.
pub const REVISION: u32 = 8;

#[cfg(test)]
mod drape_tests;
#[cfg(test)]
mod tests;
