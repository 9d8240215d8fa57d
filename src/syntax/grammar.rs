//! The pest parser generated from grammar/flow.pest. One grammar serves the
//! `.flow` front end and the expressions and templates inside YAML strings.

#[derive(pest_derive::Parser)]
#[grammar = "../grammar/flow.pest"]
pub struct FlowParser;
