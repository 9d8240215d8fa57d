//! The turn pipeline through the library API: one test per rule of
//! LANGUAGE.md sections 3, 4, 5, 7 and 9, on inline `.flow` programs and a
//! scripted provider (and the offline one where natural).

mod answers;
mod chain;
mod claims;
mod example;
mod fused;
mod fused_stream;
mod grounding;
mod harness;
mod history;
pub(crate) mod limits;
mod merge;
mod phases;
mod picture;
mod routing;
mod runs;
mod shown_values;
mod signals;
mod stages;
mod steps;
mod writes;

/// The `examples/` program, compiled into the tests so that it cannot rot.
#[allow(dead_code)] // its `main` is the example's, not the tests'
#[path = "../../../examples/step_by_step.rs"]
mod step_by_step;
