//! Runs one case: a conversation turn by turn, or a workflow run and its
//! resumes, on the case's model, stubs and clock, comparing what happened
//! with what the case expects ([`super::expect`]) and noting which steps,
//! branch entries and transitions it reached ([`Covered`]).

use super::expect::{self, Failure, TurnFacts};
use super::file::{Case, CaseBody, ProviderChoice, TestFile, Turn, WorkflowCase};
use super::stubs::{CallLog, TestClock, registry};
use crate::graph::coverage::Covered;
use crate::ir::Program;
use crate::llm::Provider;
use crate::runtime::clock::{FixedClock, SeededIds};
use crate::runtime::engine::{Runtime, RuntimeOptions};
use crate::runtime::session::{Data, Session};
use crate::runtime::tools::ToolEnv;
use crate::runtime::validate::validate;
use crate::runtime::workflow::{RunLimits, WorkflowRun, WorkflowRunner};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The time a case starts at unless its file says `now:`.
pub const DEFAULT_NOW: &str = "2026-01-05T10:00:00Z";

/// What running a case gave.
#[derive(Clone, Debug)]
pub struct CaseResult {
    pub name: String,
    pub failures: Vec<Failure>,
    pub covered: Covered,
    /// Every turn's result (conversations) or the run after each stop
    /// (workflows), for `--format json`.
    pub transcript: Vec<Value>,
}

/// How the cases of a run reach a model.
#[derive(Clone, Debug, Default)]
pub struct ModelChoice {
    /// `--provider` (with `--model`, `--base-url`): every case talks to
    /// this model instead of its own.
    pub provider: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    /// `--record DIR`: each case's model calls go to DIR/<case>.json.
    pub record: Option<PathBuf>,
}

pub fn run_case(file: &TestFile, program: &Arc<Program>, case: &Case, choice: &ModelChoice) -> CaseResult {
    let mut result = CaseResult {
        name: case.name.clone(),
        failures: Vec::new(),
        covered: Covered::default(),
        transcript: Vec::new(),
    };
    let now = file.now.as_ref().map_or(DEFAULT_NOW, |now| now.value.as_str());
    let start = FixedClock::parse(now).map(|clock| clock.0).unwrap_or_default();
    let clock = Arc::new(TestClock::new(start));
    let log = CallLog::default();
    let tool_env = ToolEnv {
        base_dir: file.program.parent().map_or_else(PathBuf::new, Path::to_path_buf),
        clock: clock.clone(),
        ids: Arc::new(SeededIds::new(7)),
    };
    let tools = registry(program, &file.tools, &case.tools, &log);
    match &case.body {
        CaseBody::Conversation(turns) => {
            let provider = match provider(file, case, choice) {
                Ok(provider) => provider,
                Err(message) => {
                    result.failures.push(Failure::setup(message));
                    return result;
                }
            };
            let options = RuntimeOptions { tool_env, tools, limits: Default::default() };
            let mut runtime = Runtime::new(Arc::clone(program), provider, options);
            let mut session = runtime.new_session("test");
            if let Err(message) = initialize(program, &mut session, &case.data, &case.context) {
                result.failures.push(Failure::setup(message));
                return result;
            }
            converse(&mut runtime, &mut session, case, turns, &log, &mut result);
        }
        CaseBody::Workflow(workflow) => {
            let model = match provider(file, case, choice) {
                Ok(provider) => crate::runtime::model_step::Model::new(provider),
                Err(message) => {
                    result.failures.push(Failure::setup(message));
                    return result;
                }
            };
            let services = WorkflowServices { tool_env: &tool_env, tools: &tools, clock: &clock, model: &model };
            run_workflow(program, case, workflow, &services, &mut result);
            if result.failures.is_empty() {
                result.failures.extend(expect::check_rules(case, &[("", log.since(0))]));
            }
        }
    }
    result
}

/// The model a case talks to: `--provider` when given, else the case's,
/// else the file's; recorded under `--record`.
fn provider(file: &TestFile, case: &Case, choice: &ModelChoice) -> Result<Box<dyn Provider>, String> {
    let name = match &choice.provider {
        Some(provider) => provider.clone(),
        None => match case.provider.as_ref().unwrap_or(&file.provider) {
            ProviderChoice::Offline => "offline".to_string(),
            ProviderChoice::Replay(path) => format!("replay:{}", path.display()),
        },
    };
    let record = choice.record.as_ref().map(|directory| directory.join(recording_name(&file.path, &case.name)));
    let flags = crate::llm::ProviderFlags {
        provider: Some(name),
        model: choice.model.clone(),
        base_url: choice.base_url.clone(),
        record,
        ..crate::llm::ProviderFlags::default()
    };
    let config = crate::config::Config::load(Some(&file.program)).map_err(|error| error.to_string())?;
    let config = crate::llm::config::load(&config, &flags).map_err(|error| error.to_string())?;
    crate::llm::build_provider(&config).map_err(|error| error.to_string())
}

/// `booking.test.yaml`, case "books after a yes" → `booking-books-after-a-yes.json`.
pub fn recording_name(test_file: &Path, case: &str) -> String {
    let stem = test_file.file_name().and_then(|name| name.to_str()).unwrap_or("test");
    let stem = stem.strip_suffix(".test.yaml").unwrap_or(stem);
    let slug: String =
        case.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    let slug = slug.split('-').filter(|part| !part.is_empty()).collect::<Vec<_>>().join("-");
    format!("{stem}-{slug}.json")
}

fn initialize(
    program: &Program,
    session: &mut Session,
    data: &Map<String, Value>,
    context: &Map<String, Value>,
) -> Result<(), String> {
    for (name, value) in data {
        let field = program.fields.iter().find(|field| field.name == *name).ok_or(format!("unknown field `{name}`"))?;
        let value = validate(value, &field.ty).map_err(|reason| format!("invalid `{name}` in `data`: {reason}"))?;
        session.data.insert(name.clone(), value);
    }
    for (name, value) in context {
        let key = program.context.iter().find(|key| key.name == *name).ok_or(format!("unknown context `{name}`"))?;
        let value = validate(value, &key.ty).map_err(|reason| format!("invalid `{name}` in `context`: {reason}"))?;
        session.context.insert(name.clone(), value);
    }
    Ok(())
}

fn converse(
    runtime: &mut Runtime,
    session: &mut Session,
    case: &Case,
    turns: &[Turn],
    log: &CallLog,
    result: &mut CaseResult,
) {
    let mut tools_by_turn = Vec::new();
    for (index, turn) in turns.iter().enumerate() {
        let calls_before = log.len();
        let where_ = format!("turn {} (`{}`)", index + 1, turn.user);
        let outcome = runtime.run_turn(session, &turn.user);
        let calls = log.since(calls_before);
        tools_by_turn.push((turn.user.as_str(), calls.clone()));
        let turn_result = match outcome {
            Ok(turn_result) => turn_result,
            Err(error) => {
                result.failures.push(Failure::at(
                    &where_,
                    "turn",
                    turn.span,
                    "the turn to run",
                    format!("it failed: {error}"),
                ));
                break;
            }
        };
        result.covered.add_events(&turn_result.events);
        let mut json = turn_result.to_json_line();
        if let Value::Object(object) = &mut json {
            object.insert("tools".to_string(), expect::calls_json(&calls));
        }
        result.transcript.push(json);
        let facts = TurnFacts { result: &turn_result, calls: &calls };
        let failed = expect::check_turn(&where_, turn, &facts);
        if !failed.is_empty() {
            result.failures.extend(failed);
            // Later turns build on this one: what they report would
            // follow from the first difference, not add to it.
            break;
        }
    }
    // The rules hold over the turns that ran, the failing one included: a
    // booking made without consent is the first thing to report.
    let mut rules = expect::check_rules(case, &tools_by_turn);
    rules.append(&mut result.failures);
    result.failures = rules;
}

/// What a workflow case runs with.
struct WorkflowServices<'a> {
    tool_env: &'a ToolEnv,
    tools: &'a crate::runtime::tools::ToolRegistry,
    clock: &'a Arc<TestClock>,
    /// What its model steps ask: the case's provider.
    model: &'a crate::runtime::model_step::Model,
}

fn run_workflow(
    program: &Arc<Program>,
    case: &Case,
    workflow: &WorkflowCase,
    services: &WorkflowServices<'_>,
    result: &mut CaseResult,
) {
    let WorkflowServices { tool_env, tools, clock, model } = *services;
    let Some(flow) = program.flow_by_name(&workflow.flow.value) else {
        result.failures.push(Failure::setup(format!("the program has no flow `{}`", workflow.flow.value)));
        return;
    };
    let context: Data = case.context.clone().into_iter().collect();
    let mut run = match crate::runtime::workflow::start(program, tool_env, flow, &case.data, context) {
        Ok(run) => run,
        Err(error) => {
            result.failures.push(Failure::setup(format!("the run could not start: {error}")));
            return;
        }
    };
    // Retries wait by the clock the test moves, never by sleeping.
    let sleep = |duration: std::time::Duration| {
        clock.advance(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX));
    };
    let advance = |run: &mut WorkflowRun| -> Result<(), String> {
        let mut on_progress = |_: &crate::runtime::workflow::StepProgress| {};
        let mut checkpoint = |_: &WorkflowRun| Ok(());
        let mut runner = WorkflowRunner {
            program,
            tools,
            tool_env,
            sleep: &sleep,
            on_progress: &mut on_progress,
            checkpoint: &mut checkpoint,
            model: Some(model),
        };
        runner.run_within(run, RunLimits::default())
    };
    if let Err(error) = advance(&mut run) {
        result.failures.push(Failure::setup(format!("the run stopped: {error}")));
        return;
    }
    result.covered.add_run(program, &run);
    result.transcript.push(run.to_json(program));
    result.failures.extend(expect::check_run("the run", &workflow.expects, &run));
    if !result.failures.is_empty() {
        return;
    }
    for (index, resume) in workflow.resumes.iter().enumerate() {
        clock.advance(resume.after_ms);
        let where_ = format!("resume {}", index + 1);
        let due = run.resume_at.as_deref().and_then(|at| chrono::DateTime::parse_from_rfc3339(at).ok());
        let now = crate::runtime::clock::Clock::now(clock.as_ref());
        if let Some(due) = due
            && due > now
        {
            result.failures.push(Failure::at(
                &where_,
                "after",
                resume.span,
                format!("the run to be due (it resumes at {})", due.to_rfc3339()),
                format!("the clock is at {}", now.to_rfc3339()),
            ));
            return;
        }
        if let Err(error) = advance(&mut run) {
            result.failures.push(Failure::setup(format!("the run stopped: {error}")));
            return;
        }
        result.covered.add_run(program, &run);
        result.transcript.push(run.to_json(program));
        let failed = expect::check_run(&where_, &resume.expects, &run);
        if !failed.is_empty() {
            result.failures.extend(failed);
            return;
        }
    }
}
