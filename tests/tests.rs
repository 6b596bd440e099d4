//! Integration tests: one test binary, one module per area.

mod cli;
mod server;
mod turnover;
