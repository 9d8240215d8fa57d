//! Model steps (`ask_model F: "…"`): one structured call for a value of a
//! field's type, the answer validated against the field (type and
//! constraints) and, when it does not fit, asked once more with what was
//! wrong; a second refusal fails the step, whose `on_error` decides. The
//! provider only carries the request (`llm::model_step`); what counts as a
//! valid answer is decided here, the same for every provider.
//!
//! A step with `tools` runs a bounded tool loop before its answer: each
//! call the model asks for runs through the one tool-call path
//! (`actions::call_tool`, as a `call` action and a reply's loop do), each
//! counts against `agent.limits.max_tool_rounds` (the reply's limit, a call
//! a round as there), and once it is spent the tools are no longer offered
//! and the model must answer. A tool called by a model step gives the model
//! its result; a `directive` in that result joins the step's emissions, so
//! its writes land with the step's phase unit as a `call` action's do.

use super::spec::{field_spec, tool_spec};
use super::validate::validate;
use crate::ir::{Field, Program, Tool};
use crate::llm::{AskAnswer, AskRepair, AskRequest, Provider, ProviderError, ToolLoop, ToolRound, Usage};
use serde_json::Value;
use std::cell::{Cell, RefCell, RefMut};

/// Where model steps send their questions: a run's own [`Model`], or a
/// turn's provider lent to one step's actions ([`Lent`]). Each counts what
/// its steps spent and holds the budget they may still spend.
pub(crate) trait Asks {
    /// One call to the provider, as it is.
    fn call(&self, request: &AskRequest) -> Result<AskAnswer, ProviderError>;
    /// What the steps have spent so far.
    fn tally(&self) -> RefMut<'_, Tally>;
    /// What the steps may still spend.
    fn budget(&self) -> Budget;
}

/// The model a run's steps ask, and what they spent: shared by the steps
/// of one execution through a shared borrow, as actions run by `&self`.
pub struct Model {
    provider: RefCell<Box<dyn Provider>>,
    tally: RefCell<Tally>,
    budget: Cell<Budget>,
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

/// The most model steps may spend from where they start: each limit with
/// the name the program (or operator) gives it, for the error. A call is
/// made only while what was spent is under every limit, so the call that
/// crosses a token limit is the last (its tokens are not known before).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Budget {
    /// Model calls left, and the limit's name.
    pub calls: Option<(u64, &'static str)>,
    /// Tokens left, and the limit's name.
    pub tokens: Option<(u64, &'static str)>,
}

impl Budget {
    /// The limit `spent` has reached, if any, by name.
    fn reached(&self, spent: Usage) -> Option<&'static str> {
        if let Some((left, name)) = self.calls
            && u64::from(spent.calls) >= left
        {
            return Some(name);
        }
        match self.tokens {
            Some((left, name)) if spent.total_tokens() >= left => Some(name),
            _ => None,
        }
    }
}

impl Model {
    /// Model steps asking `provider`.
    pub fn new(provider: Box<dyn Provider>) -> Model {
        Model { provider: RefCell::new(provider), tally: RefCell::new(Tally::default()), budget: Cell::default() }
    }

    /// What the steps have spent so far, and resets it.
    pub fn take_tally(&self) -> Tally {
        std::mem::take(&mut *self.tally.borrow_mut())
    }

    /// What the next steps may spend, counted from the tally's reset.
    pub fn set_budget(&self, budget: Budget) {
        self.budget.set(budget);
    }
}

impl Asks for Model {
    fn call(&self, request: &AskRequest) -> Result<AskAnswer, ProviderError> {
        self.provider.borrow_mut().ask(request)
    }

    fn tally(&self) -> RefMut<'_, Tally> {
        self.tally.borrow_mut()
    }

    fn budget(&self) -> Budget {
        self.budget.get()
    }
}

/// A turn's provider, lent to the actions of one conversation step or
/// hook: its calls join the turn's (each kept for the turn's trace). They
/// are not cut off at the turn's deadline: tools before them in the same
/// actions may have acted, as after any step that acted (the turn stops
/// with `time_limit` at its next resumable point instead).
pub(crate) struct Lent<'p> {
    provider: RefCell<&'p mut dyn Provider>,
    tally: RefCell<Tally>,
    budget: Budget,
    calls: RefCell<Vec<Usage>>,
}

impl<'p> Lent<'p> {
    /// `provider` for one step's actions, within `budget`.
    pub(crate) fn new(provider: &'p mut dyn Provider, budget: Budget) -> Lent<'p> {
        Lent {
            provider: RefCell::new(provider),
            tally: RefCell::new(Tally::default()),
            budget,
            calls: RefCell::new(Vec::new()),
        }
    }

    /// Each call's usage, in order, and what the answers fared.
    pub(crate) fn spent(self) -> (Vec<Usage>, Tally) {
        (self.calls.into_inner(), self.tally.into_inner())
    }
}

impl Asks for Lent<'_> {
    fn call(&self, request: &AskRequest) -> Result<AskAnswer, ProviderError> {
        let answer = self.provider.borrow_mut().ask(request)?;
        self.calls.borrow_mut().push(answer.usage);
        Ok(answer)
    }

    fn tally(&self) -> RefMut<'_, Tally> {
        self.tally.borrow_mut()
    }

    fn budget(&self) -> Budget {
        self.budget
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
    /// No model was given to the actions: a hook after the reply (which
    /// `flowc check` refuses), or a run whose provider could not be built.
    #[error(
        "`ask_model {field}` has no model to ask: model steps run in workflow runs and in a conversation step's actions and hooks before the reply, on a provider that could be built"
    )]
    NoModel {
        /// The field it was to write.
        field: String,
    },
    /// A limit on model calls or tokens was reached: the step was not
    /// asked (again).
    #[error("the model step for `{field}` was not asked: `{limit}` is spent")]
    Limit {
        /// The field it was to write.
        field: String,
        /// The limit's name (`max_turn_tokens`, `max_run_llm_calls`…).
        limit: String,
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

/// The tools one model step offers, within the step's budget; `run` runs
/// one through the one tool-call path (`actions::call_tool`, as a `call`
/// action and a reply's loop do) and keeps what it did for the actions.
pub(crate) struct StepTools<'a, F> {
    offered: Vec<&'a Tool>,
    /// Calls made, against `max_calls`.
    calls: u32,
    max_calls: u32,
    run: F,
}

impl<'a, F> StepTools<'a, F>
where
    F: FnMut(&Tool, &serde_json::Map<String, Value>) -> Result<Value, String>,
{
    /// The `offered` tools, run by `run`, within `max_calls` calls
    /// (`agent.limits.max_tool_rounds`).
    pub(crate) fn new(offered: Vec<&'a Tool>, max_calls: u32, run: F) -> StepTools<'a, F> {
        StepTools { offered, calls: 0, max_calls, run }
    }
}

impl<F> ToolLoop for StepTools<'_, F>
where
    F: FnMut(&Tool, &serde_json::Map<String, Value>) -> Result<Value, String>,
{
    fn call_tool(&mut self, name: &str, arguments: Value) -> Result<Value, String> {
        if !self.may_call() {
            return Err(format!("the limit of {} tool rounds is reached", self.max_calls));
        }
        self.calls += 1;
        let Some(tool) = self.offered.iter().find(|tool| tool.name == name) else {
            return Err(format!("the tool `{name}` is not offered in this model step"));
        };
        let Value::Object(raw) = arguments else {
            return Err("tool arguments must be a JSON object".to_string());
        };
        (self.run)(tool, &raw)
    }

    fn may_call(&self) -> bool {
        self.calls < self.max_calls
    }
}

/// Asks `model` for a value of `field` and returns it validated; the
/// calls it asks for on the way run through `tools`.
pub(crate) fn ask(
    model: Option<&dyn Asks>,
    field: &Field,
    question: Question<'_>,
    tools: &mut dyn ToolLoop,
) -> Result<Value, ModelStepError> {
    let Some(model) = model else {
        return Err(ModelStepError::NoModel { field: field.name.clone() });
    };
    let mut spec = field_spec(field, true);
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
        rounds: Vec::new(),
        tools_spent: false,
        deadline: None,
    };
    loop {
        let spent = model.tally().usage;
        if let Some(limit) = model.budget().reached(spent) {
            return Err(ModelStepError::Limit { field: field.name.clone(), limit: limit.to_string() });
        }
        request.tools_spent = !tools.may_call();
        let answered = model.call(&request);
        let answer =
            answered.map_err(|error| ModelStepError::Call { field: field.name.clone(), message: error.to_string() })?;
        model.tally().usage.add(answer.usage);
        if let Some(asked) = answer.calls {
            if request.rounds.len() >= crate::llm::rounds::MAX_ROUNDS {
                let message = "the model kept asking for tool calls after the tools were spent".to_string();
                return Err(ModelStepError::Call { field: field.name.clone(), message });
            }
            let results = asked
                .calls
                .iter()
                .map(|call| match &call.arguments {
                    Ok(arguments) => tools.call_tool(&call.name, arguments.clone()),
                    Err(reason) => Err(reason.clone()),
                })
                .collect();
            request.rounds.push(ToolRound { asked, results });
            continue;
        }
        let checked = answer.value.clone().and_then(|value| fits(&value, field));
        let reason = match checked {
            Ok(value) => return Ok(value),
            Err(reason) => reason,
        };
        if request.repair.is_some() {
            model.tally().rejected += 1;
            return Err(ModelStepError::Rejected { field: field.name.clone(), reason });
        }
        model.tally().repaired += 1;
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

/// The tools of `program` an `ask_model` names.
pub(crate) fn tools<'p>(program: &'p Program, ids: &[crate::ir::ToolId]) -> Vec<&'p Tool> {
    ids.iter().filter_map(|id| program.tool(*id)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{
        AskAnswer, ModelReply, NoTools, ProviderError, ReplyRequest, ToolRound, UnderstandRequest, Understanding,
    };
    use serde_json::json;

    /// Answers model steps from a list, in order, and keeps what it was asked.
    struct Scripted {
        answers: Vec<Result<Value, String>>,
        asked: std::sync::Arc<std::sync::Mutex<Vec<AskRequest>>>,
    }

    impl Provider for Scripted {
        fn name(&self) -> String {
            "scripted".into()
        }
        fn understand(&mut self, _: &UnderstandRequest) -> Result<Understanding, ProviderError> {
            Ok(Understanding::default())
        }
        fn reply(
            &mut self,
            _: &ReplyRequest,
            _: &[ToolRound],
            _: &mut dyn FnMut(&str),
        ) -> Result<ModelReply, ProviderError> {
            Err(ProviderError::InvalidRequest("no replies here".into()))
        }
        fn ask(&mut self, request: &AskRequest) -> Result<AskAnswer, ProviderError> {
            self.asked.lock().map_err(|_| ProviderError::Cancelled)?.push(request.clone());
            let value = if self.answers.is_empty() { Ok(Value::Null) } else { self.answers.remove(0) };
            Ok(AskAnswer {
                value,
                usage: Usage { calls: 1, prompt: 10, completion: 2, cached: 0, estimated: false },
                calls: None,
            })
        }
    }

    fn rating() -> Field {
        let program = crate::pipeline::compile(&crate::source::SourceFile::new(
            "t.flow",
            "schema { rating: int 1..5 }\nflow w \"W\" {\n  auto step s { ask_model rating: \"Rate it\" }\n}\n"
                .to_string(),
        ))
        .ir;
        program.fields[0].clone()
    }

    fn asking(answers: Vec<Result<Value, String>>) -> (Model, std::sync::Arc<std::sync::Mutex<Vec<AskRequest>>>) {
        let asked = std::sync::Arc::default();
        (Model::new(Box::new(Scripted { answers, asked: std::sync::Arc::clone(&asked) })), asked)
    }

    fn question(examples: &[String]) -> Question<'_> {
        Question {
            step: "w.s",
            instruction: "Rate it".into(),
            inputs: vec![],
            examples,
            tools: vec![],
            today: "2026-01-05".into(),
        }
    }

    #[test]
    fn an_answer_that_fits_is_written_after_one_call() {
        let (model, asked) = asking(vec![Ok(json!(4))]);
        assert_eq!(ask(Some(&model), &rating(), question(&[]), &mut NoTools), Ok(json!(4)));
        assert_eq!(asked.lock().unwrap().len(), 1);
        let tally = model.take_tally();
        assert_eq!((tally.usage.calls, tally.usage.prompt, tally.repaired, tally.rejected), (1, 10, 0, 0));
        assert_eq!(model.take_tally(), Tally::default(), "taking the tally resets it");
    }

    #[test]
    fn an_answer_out_of_range_is_repaired_once_with_the_reason() {
        let (model, asked) = asking(vec![Ok(json!(9)), Ok(json!(5))]);
        let examples = ["3".to_string()];
        assert_eq!(ask(Some(&model), &rating(), question(&examples), &mut NoTools), Ok(json!(5)));
        let asked = asked.lock().unwrap();
        assert_eq!(asked.len(), 2);
        assert!(asked[0].repair.is_none() && asked[0].field.examples == ["3"]);
        let repair = asked[1].repair.as_ref().unwrap();
        assert_eq!(repair.answer, "9");
        assert!(repair.error.contains("maximum"), "{}", repair.error);
        let tally = model.take_tally();
        assert_eq!((tally.usage.calls, tally.repaired, tally.rejected), (2, 1, 0));
    }

    #[test]
    fn an_answer_still_wrong_after_its_repair_fails_the_step() {
        let (model, _) = asking(vec![Err("the answer is not JSON".into()), Ok(Value::Null)]);
        let failed = ask(Some(&model), &rating(), question(&[]), &mut NoTools);
        let Err(ModelStepError::Rejected { field, reason }) = failed else { panic!("rejected: {failed:?}") };
        assert_eq!(field, "rating");
        assert!(reason.contains("empty"), "{reason}");
        let tally = model.take_tally();
        assert_eq!((tally.usage.calls, tally.repaired, tally.rejected), (2, 1, 1));
    }

    #[test]
    fn without_a_model_the_step_says_where_model_steps_run() {
        let failed = ask(None, &rating(), question(&[]), &mut NoTools);
        assert_eq!(failed, Err(ModelStepError::NoModel { field: "rating".into() }));
    }

    #[test]
    fn a_spent_budget_stops_the_next_call_the_repair_included() {
        let (model, asked) = asking(vec![Ok(json!(9)), Ok(json!(5))]);
        model.set_budget(Budget { calls: Some((1, "max_run_llm_calls")), tokens: None });
        let failed = ask(Some(&model), &rating(), question(&[]), &mut NoTools);
        assert_eq!(failed, Err(ModelStepError::Limit { field: "rating".into(), limit: "max_run_llm_calls".into() }));
        assert_eq!(asked.lock().unwrap().len(), 1, "the repair was not asked");
        model.take_tally();
        model.set_budget(Budget { calls: None, tokens: Some((12, "max_run_tokens")) });
        assert_eq!(
            ask(Some(&model), &rating(), question(&[]), &mut NoTools),
            Ok(json!(5)),
            "12 tokens left: one call of 12"
        );
        let spent = ask(Some(&model), &rating(), question(&[]), &mut NoTools);
        assert!(
            matches!(spent, Err(ModelStepError::Limit { ref limit, .. }) if limit == "max_run_tokens"),
            "{spent:?}"
        );
    }

    /// Asks for `clock` (and once for a tool it was not offered) until the
    /// tools are spent, then answers 3.
    struct Caller {
        asked: std::sync::Arc<std::sync::Mutex<Vec<AskRequest>>>,
    }

    impl Provider for Caller {
        fn name(&self) -> String {
            "caller".into()
        }
        fn understand(&mut self, _: &UnderstandRequest) -> Result<Understanding, ProviderError> {
            Ok(Understanding::default())
        }
        fn reply(
            &mut self,
            _: &ReplyRequest,
            _: &[ToolRound],
            _: &mut dyn FnMut(&str),
        ) -> Result<ModelReply, ProviderError> {
            Err(ProviderError::InvalidRequest("no replies here".into()))
        }
        fn ask(&mut self, request: &AskRequest) -> Result<AskAnswer, ProviderError> {
            self.asked.lock().map_err(|_| ProviderError::Cancelled)?.push(request.clone());
            let usage = Usage { calls: 1, prompt: 10, completion: 2, cached: 0, estimated: false };
            if !request.offers_tools() {
                return Ok(AskAnswer { value: Ok(json!(3)), usage, calls: None });
            }
            let call = |id: &str, name: &str| crate::llm::ToolCall {
                id: id.into(),
                name: name.into(),
                arguments: Ok(json!({})),
            };
            let calls = vec![call("a", "clock"), call("b", "shell")];
            let asked = crate::llm::ToolCalls { calls, usage, ..crate::llm::ToolCalls::default() };
            Ok(AskAnswer { value: Ok(Value::Null), usage, calls: Some(asked) })
        }
    }

    #[test]
    fn tool_rounds_run_within_max_tool_rounds_and_their_results_go_back_to_the_model() {
        let program = crate::pipeline::compile(&crate::source::SourceFile::new(
            "t.flow",
            "schema { rating: int 1..5 }\ntool clock() -> { now: datetime } { builtin now }\n\
             flow w \"W\" {\n  auto step s { ask_model rating: \"Rate it\" tools [clock] }\n}\n"
                .to_string(),
        ))
        .ir;
        let asked = std::sync::Arc::default();
        let model = Model::new(Box::new(Caller { asked: std::sync::Arc::clone(&asked) }));
        let mut ran = Vec::new();
        let run = |tool: &Tool, _: &serde_json::Map<String, Value>| {
            ran.push(tool.name.clone());
            Ok(json!({"now": "2026-01-05T10:00:00Z"}))
        };
        let mut tools = StepTools::new(program.tools.iter().collect(), 3, run);
        let offered = Question { tools: program.tools.iter().collect(), ..question(&[]) };
        let value = ask(Some(&model), &program.fields[0], offered, &mut tools);
        assert_eq!(value, Ok(json!(3)));
        // Three calls allowed: the first round's two (the tool not offered
        // is refused without running, but counts), then one of the second's.
        assert_eq!(ran, ["clock", "clock"]);
        assert_eq!(model.take_tally().usage.calls, 3, "two tool rounds and the answer");
        let asked = asked.lock().unwrap();
        assert_eq!(asked.len(), 3);
        assert!(asked[0].rounds.is_empty() && !asked[0].tools_spent && asked[0].tools[0].name == "clock");
        let last = &asked[2];
        assert!(last.tools_spent, "the budget is spent: the model must answer");
        let results: Vec<&Result<Value, String>> = last.rounds.iter().flat_map(|round| &round.results).collect();
        assert_eq!(results.len(), 4);
        assert_eq!(results[0], &Ok(json!({"now": "2026-01-05T10:00:00Z"})));
        assert!(results[1].as_ref().is_err_and(|error| error.contains("not offered")), "{results:?}");
        assert!(results[3].as_ref().is_err_and(|error| error.contains("limit of 3 tool rounds")), "{results:?}");
    }
}
