//! Integration tests: one test binary, one module per area.

mod cli;
mod clients;
mod frames;
mod hostile_server;
mod idle;
mod limits;
mod load;
mod outfit;
mod prometheus;
mod proxy;
mod record;
mod resync;
mod server;
mod service;
