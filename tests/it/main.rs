//! Integration tests: the real `flowc` binary and the library end to end,
//! as one test binary of modules.

mod compile;
mod generated;
#[cfg(unix)]
mod repl;
mod run;
mod runtime;
mod support;
