//! Workflow schedules (an error each, `invalid_schedule`):
//!
//! - a cron expression [`crate::schedule`] cannot read, or that names no
//!   time that exists (`0 0 30 2 *`): a worker could never start it;
//! - a time zone that is not in the IANA database (with the nearest name);
//! - a schedule on a conversation flow: nobody would be there to talk to;
//! - a schedule on a workflow with inputs (`requires`): a scheduled run
//!   starts with no data, and such a run refuses to start.

use crate::diag::{Code, Diagnostic};
use crate::ir::Program;
use crate::schedule::{Schedule, ScheduleError, zone_names};
use crate::source::Span;

/// What this pass finds, with the facts its error is written from.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ScheduleProblem {
    /// The expression does not read; `reason` is the cron parser's.
    Cron { flow: String, cron: String, reason: String, span: Span },
    /// The expression reads but never fires.
    Never { flow: String, cron: String, span: Span },
    /// The zone is unknown; `close` is the nearest known one.
    Zone { flow: String, zone: String, close: Option<String>, span: Span },
    /// The flow is a conversation, not a workflow.
    Conversation { flow: String, span: Span },
    /// The workflow needs inputs; `first` is the first it requires.
    Inputs { flow: String, first: String, span: Span, required: Span },
}

pub(crate) fn check(program: &Program, diagnostics: &mut Vec<Diagnostic>) {
    diagnostics.extend(find(program).into_iter().map(ScheduleProblem::into_diagnostic));
}

pub(crate) fn find(program: &Program) -> Vec<ScheduleProblem> {
    let mut found = Vec::new();
    for flow in &program.flows {
        let Some(schedule) = &flow.schedule else {
            continue;
        };
        let name = flow.name.clone();
        match Schedule::parse(&schedule.cron, Some(&schedule.timezone)) {
            Ok(_) => {}
            Err(ScheduleError::Cron { reason }) => found.push(ScheduleProblem::Cron {
                flow: name.clone(),
                cron: schedule.cron.clone(),
                reason,
                span: schedule.cron_span,
            }),
            Err(ScheduleError::Never) => found.push(ScheduleProblem::Never {
                flow: name.clone(),
                cron: schedule.cron.clone(),
                span: schedule.cron_span,
            }),
            Err(ScheduleError::Zone) => found.push(ScheduleProblem::Zone {
                flow: name.clone(),
                zone: schedule.timezone.clone(),
                close: nearest_zone(&schedule.timezone),
                span: schedule.timezone_span,
            }),
        }
        if !flow.workflow && !flow.incomplete && !flow.steps.is_empty() {
            found.push(ScheduleProblem::Conversation { flow: name, span: schedule.cron_span });
        } else if let (Some(field), Some(required)) = (flow.requires.first(), flow.requires_spans.first()) {
            let first = program.fields.get(field.index()).map(|field| field.name.clone()).unwrap_or_default();
            found.push(ScheduleProblem::Inputs { flow: name, first, span: schedule.cron_span, required: *required });
        }
    }
    found
}

/// The known zone `zone` most likely meant: the same name in other
/// capitals, else the closest spelling.
fn nearest_zone(zone: &str) -> Option<String> {
    zone_names()
        .find(|known| known.eq_ignore_ascii_case(zone))
        .or_else(|| crate::diag::did_you_mean(zone, zone_names()))
        .map(str::to_string)
}

impl ScheduleProblem {
    pub(crate) fn into_diagnostic(self) -> Diagnostic {
        match self {
            ScheduleProblem::Cron { flow, cron, reason, span } => {
                Diagnostic::new(Code::InvalidSchedule, format!("the schedule of `{flow}` is not a cron expression"))
                    .at(span, format!("`{cron}`: {}", reason.to_lowercase()))
                    .with_help(
                        "write five fields, `minute hour day-of-month month day-of-week`: \
                         `0 9 * * MON` is Mondays at 9:00",
                    )
            }
            ScheduleProblem::Never { flow, cron, span } => {
                Diagnostic::new(Code::InvalidSchedule, format!("the schedule of `{flow}` never fires"))
                    .at(span, format!("no date matches `{cron}`"))
                    .with_help("check the day of month against the month (`0 0 30 2 *` asks for February 30)")
            }
            ScheduleProblem::Zone { flow, zone, close, span } => {
                Diagnostic::new(Code::InvalidSchedule, format!("the schedule of `{flow}` names an unknown time zone"))
                    .at(span, format!("`{zone}` is not in the IANA time zone database"))
                    .with_help(crate::diag::suggestion(close.as_deref(), || {
                        "name a zone as `Area/City` (`Europe/Paris`, `America/New_York`), or leave it out for UTC"
                            .to_string()
                    }))
            }
            ScheduleProblem::Conversation { flow, span } => {
                Diagnostic::new(Code::InvalidSchedule, format!("`{flow}` is a conversation: it cannot be scheduled"))
                    .at(span, "a worker would start it with nobody to talk to")
                    .with_help("only a workflow (every step `auto`) has a schedule; move the scheduled work into one")
            }
            ScheduleProblem::Inputs { flow, first, span, required } => Diagnostic::new(
                Code::InvalidSchedule,
                format!("the scheduled workflow `{flow}` needs inputs a schedule cannot give"),
            )
            .at(span, "a scheduled run starts with no data")
            .with_label(required, format!("`{first}` is required to start it"))
            .with_help("drop its `requires` (give the field a default step instead), or start it by hand with `flowc run --data`"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ScheduleProblem, find};
    use crate::check::check_findings as check;
    use crate::check::tests::{at, compiled};

    const WORKFLOW: &str = "schema { x: string }\nflow w {\n  SCHEDULE\n  auto step a { set x = \"a\" }\n}\n";

    fn scheduled(schedule: &str) -> String {
        WORKFLOW.replace("SCHEDULE", schedule)
    }

    #[test]
    fn a_schedule_that_reads_in_a_known_zone_checks_clean() {
        check(&scheduled("schedule \"0 9 * * MON\" in \"Europe/Paris\""), &[]);
        check(&scheduled("schedule \"@daily\""), &[]);
    }

    #[test]
    fn a_malformed_expression_is_named_at_its_string() {
        let source = scheduled("schedule \"0 9 * *\"");
        check(&source, &[("invalid_schedule", "\"0 9 * *\"")]);
        let (_, program) = compiled(&source);
        assert!(matches!(&find(&program)[..], [ScheduleProblem::Cron { flow, .. }] if flow == "w"));
    }

    #[test]
    fn an_impossible_date_never_fires() {
        let source = scheduled("schedule \"0 0 30 2 *\"");
        let (file, program) = compiled(&source);
        let span = at(&file, "\"0 0 30 2 *\"", 0);
        assert_eq!(find(&program), [ScheduleProblem::Never { flow: "w".into(), cron: "0 0 30 2 *".into(), span }]);
    }

    #[test]
    fn an_unknown_zone_is_named_with_the_nearest() {
        let source = scheduled("schedule \"0 9 * * MON\" in \"europe/paris\"");
        let (file, program) = compiled(&source);
        let span = at(&file, "\"europe/paris\"", 0);
        assert_eq!(
            find(&program),
            [ScheduleProblem::Zone {
                flow: "w".into(),
                zone: "europe/paris".into(),
                close: Some("Europe/Paris".into()),
                span
            }]
        );
    }

    #[test]
    fn a_conversation_or_a_workflow_with_inputs_cannot_be_scheduled() {
        check(
            "schema { x: string }\nflow talk {\n  when \"hi\"\n  schedule \"0 9 * * *\"\n  step ask { collect x }\n}\n",
            &[("invalid_schedule", "\"0 9 * * *\"")],
        );
        check(
            "schema { x: string }\nflow w {\n  requires x\n  schedule \"0 9 * * *\"\n  auto step a { set x = \"a\" }\n}\n",
            &[("invalid_schedule", "\"0 9 * * *\"")],
        );
    }
}
