//! The runtime: sessions, the turn pipeline, the directive bus, the auto
//! chain, workflows and tools. It executes the IR and never re-parses.

pub mod clock;
pub mod tools;
pub mod validate;
