//! clothcast: a realtime motion-capture streaming server with example-based garment
//! synthesis by Sensitivity-Optimized Rigging (SOR).
//!
//! Module order follows DESIGN §4: each module imports only from those above it.

// Library code answers bad input with a named error; a panic on something that came
// from outside would take a server down. (Test modules are compiled out here.)
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        reason = "input from outside gets a named error, not a panic"
    )
)]

pub mod bake;
pub mod body;
pub mod cli;
pub mod client;
pub mod codec;
pub mod engine;
pub mod eval;
pub mod garment;
pub mod mesh;
pub mod mocap;
pub mod net;
pub mod protocol;
pub mod sim;
pub mod skeleton;
pub mod sor;
