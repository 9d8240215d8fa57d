//! Test files (`*.test.yaml`) as the library runs them: `file` is a test
//! file as data, `read` reads one against its compiled program, `stubs`
//! stands in for tools and time, `case` runs a case (on the offline model
//! or a recording, with the case's clock), `expect` compares what happened
//! with what the case expects, and `coverage` merges what the cases
//! reached. `flowc test` (the command line) reports on them; `flowc serve`
//! shows a program's coverage on the playground's graph.
//!
//! Its I/O: reading test files and the program files they name; running a
//! case runs what its program runs (tools are stubbed unless a case says
//! otherwise, models are offline or recorded unless asked for).

pub mod case;
pub mod coverage;
pub mod expect;
pub mod file;
pub mod read;
pub mod stubs;

use crate::ir::Program;
use file::TestFile;
use std::sync::Arc;

/// A test file ready to run, with its program.
pub struct Loaded {
    /// The test file, read and checked against `program`.
    pub file: TestFile,
    /// The program it tests, compiled.
    pub program: Arc<Program>,
}
