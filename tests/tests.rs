//! Integration tests: one test binary, one module per area.

mod cli;
mod limits;
mod server;
