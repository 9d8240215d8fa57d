//! Model steps (`ask_model F: "…"`): one structured call for a value of a
//! field's type, the answer validated against the field (type and
//! constraints) and, when it does not fit, asked once more with what was
//! wrong; a second refusal fails the step, whose `on_error` decides. The
//! provider only carries the request (`llm::model_step`); what counts as a
//! valid answer is decided here, the same for every provider.

use super::validate::validate;
use crate::ir::{Field, Program, Tool, TypeKind};
use crate::llm::{AskRepair, AskRequest, FieldSpec, Provider, ToolSpec, Usage};
use serde_json::Value;
use std::cell::RefCell;

/// The model a run's steps ask, and what they spent: shared by the steps
/// of one execution through a shared borrow, as actions run by `&self`.
pub struct Model {
    provider: RefCell<Box<dyn Provider>>,
    tally: RefCell<Tally>,
}

/// What the model steps of an execution cost and how their answers fared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Calls and tokens, repair calls included.
    pub usage: Usage,
    /// Answers that did not fit and were asked again.
    pub repaired: u32,
    /// Answers that still did not fit after the repair: the step failed.
    pub rejected: u32,
}

impl Model {
    /// Model steps asking `provider`.
    pub fn new(provider: Box<dyn Provider>) -> Model {
        Model { provider: RefCell::new(provider), tally: RefCell::new(Tally::default()) }
    }

    /// What the steps have spent so far, and resets it.
    pub fn take_tally(&self) -> Tally {
        std::mem::take(&mut *self.tally.borrow_mut())
    }
}

/// Why a model step wrote nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModelStepError {
    /// The call itself failed (network, refusal, no recording…).
    #[error("the model step for `{field}` failed: {message}")]
    Call {
        /// The field it was to write.
        field: String,
        /// The provider's error.
        message: String,
    },
    /// The answer did not fit the field, before and after its repair.
    #[error("the model's answer for `{field}` does not fit it, after one repair: {reason}")]
    Rejected {
        /// The field it was to write.
        field: String,
        /// Why the repaired answer does not fit.
        reason: String,
    },
    /// No model was given to the actions (a conversation's step).
    #[error("`ask_model {field}` cannot run here: model steps run in workflows")]
    NoModel {
        /// The field it was to write.
        field: String,
    },
}

/// One model step's question, rendered.
pub(crate) struct Question<'q> {
    /// `flow.step`.
    pub step: &'q str,
    /// The instruction as rendered against the data.
    pub instruction: String,
    /// The values the instruction's interpolations read.
    pub inputs: Vec<Value>,
    /// The step's own examples.
    pub examples: &'q [String],
    /// The tools offered.
    pub tools: Vec<&'q Tool>,
    /// Today (ISO).
    pub today: String,
}

/// Asks `model` for a value of `field` and returns it validated.
pub(crate) fn ask(model: Option<&Model>, field: &Field, question: Question<'_>) -> Result<Value, ModelStepError> {
    let Some(model) = model else {
        return Err(ModelStepError::NoModel { field: field.name.clone() });
    };
    let mut spec = field_spec(field);
    for example in question.examples {
        if !spec.examples.contains(example) {
            spec.examples.push(example.clone());
        }
    }
    let mut request = AskRequest {
        step: question.step.to_string(),
        instruction: question.instruction,
        field: spec,
        inputs: question.inputs,
        tools: question.tools.iter().map(|tool| tool_spec(tool)).collect(),
        today: question.today,
        repair: None,
        deadline: None,
    };
    loop {
        let answered = model.provider.borrow_mut().ask(&request);
        let answer =
            answered.map_err(|error| ModelStepError::Call { field: field.name.clone(), message: error.to_string() })?;
        model.tally.borrow_mut().usage.add(answer.usage);
        let checked = answer.value.clone().and_then(|value| fits(&value, field));
        let reason = match checked {
            Ok(value) => return Ok(value),
            Err(reason) => reason,
        };
        if request.repair.is_some() {
            model.tally.borrow_mut().rejected += 1;
            return Err(ModelStepError::Rejected { field: field.name.clone(), reason });
        }
        model.tally.borrow_mut().repaired += 1;
        let shown = match &answer.value {
            Ok(value) => value.to_string(),
            Err(text) => text.clone(),
        };
        request.repair = Some(AskRepair { answer: shown, error: reason });
    }
}

/// The answer validated against the field; an empty answer (null) is not
/// one, though it is a valid write elsewhere (it unsets).
fn fits(value: &Value, field: &Field) -> Result<Value, String> {
    if value.is_null() {
        return Err(format!("the answer is empty: `{}` needs a {}", field.name, field.ty.kind_name()));
    }
    validate(value, &field.ty)
}

fn field_spec(field: &Field) -> FieldSpec {
    let values = match &field.ty.kind {
        TypeKind::Enum { values } => values.clone(),
        _ => Vec::new(),
    };
    FieldSpec {
        name: field.name.clone(),
        kind: field.ty.kind_name().to_string(),
        schema: field.ty.json_schema(),
        description: field.ty.description.clone(),
        values,
        examples: field.ty.examples.clone(),
        pattern: field.ty.pattern.clone(),
        min: field.ty.min,
        max: field.ty.max,
        asked: true,
    }
}

fn tool_spec(tool: &Tool) -> ToolSpec {
    ToolSpec {
        name: tool.name.clone(),
        description: tool.description.clone(),
        parameters: crate::ir::object_schema(&tool.params),
    }
}

/// The tools of `program` an `ask_model` names.
pub(crate) fn tools<'p>(program: &'p Program, ids: &[crate::ir::ToolId]) -> Vec<&'p Tool> {
    ids.iter().filter_map(|id| program.tool(*id)).collect()
}
