//! The `clothcast` command-line tool.
fn main() {}
