//! The runtime: sessions, the turn pipeline, the directive bus, the auto
//! chain, workflows and tools. It executes the IR and never re-parses.
//!
//! Its I/O is in [`tools`] (`exec` tools start processes, `http` tools make
//! network requests) and [`clock`] (the system time, and the `FLOWC_NOW` and
//! `FLOWC_SEED` environment variables); the model is reached through the
//! [`crate::llm::Provider`] it is given and sessions are saved by its
//! caller.
//!
//! # Embedding
//!
//! A [`Runtime`] holds conversations on one program. [`Runtime::run_turn`]
//! runs a whole turn; [`Runtime::begin`] starts one to drive a stage at a
//! time, each [`Turn::step`] answering [`Progress::Continue`] with the
//! stage it completed ([`StageDone`]), or [`Progress::ToolCalls`] with the
//! tools the model asks for before they run (the next step runs them and
//! asks the model again), until [`Progress::Finished`] gives the
//! [`StopReason`] and the [`TurnResult`]:
//!
//! ```no_run
//! # fn demo(runtime: &mut flowc::runtime::Runtime) -> Result<(), flowc::runtime::TurnError> {
//! use flowc::runtime::Progress;
//! let mut session = runtime.new_session("id");
//! let mut turn = runtime.begin(&mut session, "Book the Grand Hotel")?;
//! let result = loop {
//!     match turn.step()? {
//!         Progress::Continue(stage) => println!("{stage:?}"),
//!         Progress::ToolCalls(calls) => println!("the model asks for {} tool calls", calls.len()),
//!         Progress::Finished { reason, result } => break result,
//!     }
//! };
//! println!("{}", result.reply);
//! # Ok(())
//! # }
//! ```
//!
//! Every [`Event`] goes through the one [`Observer`] set with
//! [`Runtime::set_observer`] as it happens, and the same events end up in
//! [`TurnResult::events`]. [`ContinuationLimits`] (in [`RuntimeOptions`])
//! adds the embedder's limits to the program's `agent.limits`, each
//! stopping with its own [`StopReason`]. `examples/step_by_step.rs` and
//! `docs/embedding.md` show it all on `flows/booking.flow`. The same limits,
//! with [`workflow::RunLimits`] for workflow runs, are what an operator sets
//! in `flowc.toml` (`[limits]`) or with flags ([`limits_config`]).

#![warn(missing_docs)]

pub mod actions;
pub(crate) mod certain;
pub mod clock;
pub mod directive;
pub mod engine;
pub mod events;
pub(crate) mod grounding;
pub mod limits_config;
pub mod model_step;
pub mod session;
pub(crate) mod shutdown;
pub(crate) mod spec;
pub mod tools;
pub(crate) mod validate;
pub mod workflow;
pub mod workflow_run;
pub mod writes;

pub use engine::{ContinuationLimits, Observer, Progress, Runtime, RuntimeOptions, StageDone, Turn, TurnError};
pub use events::{Event, StopReason, TurnResult};
