//! flowc: a compiler, checker and interpreter for LLM-driven conversations
//! and workflows written as code.
//!
//! The pipeline, as the modules show it: [`syntax`] reads `.flow` and YAML
//! into one AST, [`ir`] lowers it into a resolved, typed IR (with [`expr`]
//! typing every expression), [`check`] proves it sound, [`graph`] draws it,
//! and the runtime executes it. [`diag`] holds the diagnostics every stage
//! reports; [`cli`] is the only module that touches files and the terminal.

pub mod check;
pub mod cli;
pub mod diag;
pub mod duration;
pub mod expr;
pub mod graph;
pub mod ir;
pub mod llm;
pub mod pipeline;
pub mod runtime;
pub mod source;
pub mod store;
pub mod syntax;
#[doc(hidden)]
pub mod testgen;
