//! The runtime: sessions, the turn pipeline, the directive bus, the auto
//! chain, workflows and tools. It executes the IR and never re-parses.
//!
//! Its I/O is in [`tools`] (`exec` tools start processes, `http` tools make
//! network requests) and [`clock`] (the system time, and the `FLOWC_NOW` and
//! `FLOWC_SEED` environment variables); the model is reached through the
//! [`crate::llm::Provider`] it is given and sessions are saved by its
//! caller.

pub mod actions;
pub mod clock;
pub mod directive;
pub mod engine;
pub mod events;
pub mod grounding;
pub mod session;
pub mod tools;
pub mod turn;
pub mod validate;
pub mod workflow;
pub mod workflow_run;
