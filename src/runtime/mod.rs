//! The runtime: sessions, the turn pipeline, the directive bus, the auto
//! chain, workflows and tools. It executes the IR and never re-parses.

pub mod actions;
pub mod clock;
pub mod directive;
pub mod engine;
pub mod events;
pub mod grounding;
pub mod session;
pub mod tools;
pub mod validate;
pub mod workflow;
