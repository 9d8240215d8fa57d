//! Diagnostics as data: every front end, lowering and check pass pushes
//! [`Diagnostic`]s; rendering (miette for people, JSON for tools) is separate
//! and lives in [`render`], which writes to the writer its caller passes
//! and does no other I/O.

#![warn(missing_docs)]

pub mod render;

use crate::source::Span;
use serde::Serialize;

/// Every diagnostic code flowc has shipped. A code keeps its name and meaning
/// forever; a retired code stays here so it is never reused. This enum is the
/// registry the README's code table is checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Code {
    // Errors.
    /// The file cannot be read as a program (a grammar or YAML error).
    Syntax,
    /// A YAML key the format does not know.
    UnknownKey,
    /// A key given twice in one YAML mapping.
    DuplicateKey,
    /// Two flows, steps, fields, keys, tools or params with one id.
    DuplicateId,
    /// An id that is not letters, digits and `_`.
    InvalidId,
    /// A field type that does not exist.
    UnknownType,
    /// A type declaration that contradicts itself.
    InvalidSchema,
    /// A setting whose value is out of range or not one of its choices.
    InvalidValue,
    /// A step or flow a jump names that does not exist.
    UnknownTarget,
    /// A bare `then`/`next` naming a step of another flow.
    CrossFlowStep,
    /// A branch entry that is never evaluated or can never match.
    UnreachableBranch,
    /// A step no path reaches.
    UnreachableStep,
    /// A name in an expression or template that is no field or key.
    UnknownField,
    /// A call to a function that does not exist.
    UnknownFunction,
    /// A function called with the wrong number of arguments.
    WrongArity,
    /// Types that do not fit.
    TypeMismatch,
    /// A tool named that is not declared.
    UnknownTool,
    /// A tool declared wrongly.
    InvalidTool,
    /// An http tool's url whose scheme is not `http` or `https`.
    InvalidUrl,
    /// A tool call whose arguments do not match the tool's params.
    WrongArguments,
    /// A cycle of steps none of which waits.
    AutoCycle,
    /// A step declared wrongly (an auto step that collects, a `wait` misplaced…).
    InvalidStep,
    /// A directive declared wrongly (two position fields, …).
    InvalidDirective,
    /// A duration that is not a whole number with a unit.
    InvalidDuration,
    /// More than one flow marked `default`.
    DuplicateDefault,
    /// `reply` and `abort` in one directive.
    ReplyWithAbort,
    /// A flow with no steps.
    MissingEntry,
    /// A `schedule` that does not read, never fires, or is not on a workflow.
    InvalidSchedule,
    // Warnings.
    /// A field read where it may not be set yet.
    MaybeUnset,
    /// A directive field that cannot act where it is.
    DroppedField,
    /// A flow requires a field no step of it collects.
    UncollectedRequired,
    /// A step with the same id as a flow.
    ShadowedStep,
    /// A conversation flow nothing routes to.
    UnroutedFlow,
    /// A tool-calling flow entered again with a consent kept.
    KeptConsent,
    /// `keep` names a field no step of the flow collects.
    KeptUncollected,
    /// One turn can pass two confirmations with one yes.
    SharedConfirmation,
    /// A step requires a field no step of its flow asks for.
    UnaskedRequired,
    /// A pre-extracted list of strings read from free text.
    FreeTextList,
    /// A branch entry covered by earlier entries.
    CoveredBranch,
    /// A turn whose prompts alone can spend more than `max_turn_tokens`.
    TurnTokenBudget,
    /// A workflow run whose model steps can make more calls than
    /// `max_run_llm_calls`, or whose prompts alone can spend more than
    /// `max_run_tokens`.
    RunBudget,
}

impl Code {
    /// Every code, in declaration order.
    pub const ALL: &'static [Code] = &[
        Code::Syntax,
        Code::UnknownKey,
        Code::DuplicateKey,
        Code::DuplicateId,
        Code::InvalidId,
        Code::UnknownType,
        Code::InvalidSchema,
        Code::InvalidValue,
        Code::UnknownTarget,
        Code::CrossFlowStep,
        Code::UnreachableBranch,
        Code::UnreachableStep,
        Code::UnknownField,
        Code::UnknownFunction,
        Code::WrongArity,
        Code::TypeMismatch,
        Code::UnknownTool,
        Code::InvalidTool,
        Code::InvalidUrl,
        Code::WrongArguments,
        Code::AutoCycle,
        Code::InvalidStep,
        Code::InvalidDirective,
        Code::InvalidDuration,
        Code::DuplicateDefault,
        Code::ReplyWithAbort,
        Code::MissingEntry,
        Code::InvalidSchedule,
        Code::MaybeUnset,
        Code::DroppedField,
        Code::UncollectedRequired,
        Code::ShadowedStep,
        Code::UnroutedFlow,
        Code::KeptConsent,
        Code::KeptUncollected,
        Code::SharedConfirmation,
        Code::UnaskedRequired,
        Code::FreeTextList,
        Code::CoveredBranch,
        Code::TurnTokenBudget,
        Code::RunBudget,
    ];

    /// The code's stable name (`unreachable_step`).
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Syntax => "syntax",
            Code::UnknownKey => "unknown_key",
            Code::DuplicateKey => "duplicate_key",
            Code::DuplicateId => "duplicate_id",
            Code::InvalidId => "invalid_id",
            Code::UnknownType => "unknown_type",
            Code::InvalidSchema => "invalid_schema",
            Code::InvalidValue => "invalid_value",
            Code::UnknownTarget => "unknown_target",
            Code::CrossFlowStep => "cross_flow_step",
            Code::UnreachableBranch => "unreachable_branch",
            Code::UnreachableStep => "unreachable_step",
            Code::UnknownField => "unknown_field",
            Code::UnknownFunction => "unknown_function",
            Code::WrongArity => "wrong_arity",
            Code::TypeMismatch => "type_mismatch",
            Code::UnknownTool => "unknown_tool",
            Code::InvalidTool => "invalid_tool",
            Code::InvalidUrl => "invalid_url",
            Code::WrongArguments => "wrong_arguments",
            Code::AutoCycle => "auto_cycle",
            Code::InvalidStep => "invalid_step",
            Code::InvalidDirective => "invalid_directive",
            Code::InvalidDuration => "invalid_duration",
            Code::DuplicateDefault => "duplicate_default",
            Code::ReplyWithAbort => "reply_with_abort",
            Code::MissingEntry => "missing_entry",
            Code::InvalidSchedule => "invalid_schedule",
            Code::MaybeUnset => "maybe_unset",
            Code::DroppedField => "dropped_field",
            Code::UncollectedRequired => "uncollected_required",
            Code::ShadowedStep => "shadowed_step",
            Code::UnroutedFlow => "unrouted_flow",
            Code::KeptConsent => "kept_consent",
            Code::KeptUncollected => "kept_uncollected",
            Code::SharedConfirmation => "shared_confirmation",
            Code::UnaskedRequired => "unasked_required",
            Code::FreeTextList => "free_text_list",
            Code::CoveredBranch => "covered_branch",
            Code::TurnTokenBudget => "turn_token_budget",
            Code::RunBudget => "run_budget",
        }
    }

    /// Whether the code is an error or a warning unless configured.
    pub fn default_severity(self) -> Severity {
        match self {
            Code::MaybeUnset
            | Code::DroppedField
            | Code::UncollectedRequired
            | Code::ShadowedStep
            | Code::UnroutedFlow
            | Code::KeptConsent
            | Code::KeptUncollected
            | Code::SharedConfirmation
            | Code::UnaskedRequired
            | Code::FreeTextList
            | Code::CoveredBranch
            | Code::TurnTokenBudget
            | Code::RunBudget => Severity::Warning,
            _ => Severity::Error,
        }
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.as_str())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
/// How serious a diagnostic is: an error fails the check.
pub enum Severity {
    /// The program cannot run.
    Error,
    /// The program runs, but probably not as meant.
    Warning,
}

impl Severity {
    /// The severity's name (`error`, `warning`).
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// A span with what it is, in the diagnostic's terms ("this step is never
/// reached"). The first label of a diagnostic is its primary one.
#[derive(Clone, Debug, PartialEq)]
pub struct Label {
    /// Where.
    pub span: Span,
    /// What is there.
    pub text: String,
}

/// One problem found in a program: what is wrong (`message`, lower case, no
/// final period), where (`labels`, primary first) and what to do (`help`).
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    /// Which check found it.
    pub code: Code,
    /// Error or warning.
    pub severity: Severity,
    /// What is wrong: lower case, no final period.
    pub message: String,
    /// Where, the primary label first.
    pub labels: Vec<Label>,
    /// What to do, if there is something to say.
    pub help: Option<String>,
}

impl Diagnostic {
    /// A diagnostic with the code's default severity and no labels.
    pub fn new(code: Code, message: impl Into<String>) -> Diagnostic {
        Diagnostic { code, severity: code.default_severity(), message: message.into(), labels: Vec::new(), help: None }
    }

    /// The primary label: the exact span the diagnostic is about.
    pub fn at(mut self, span: Span, text: impl Into<String>) -> Diagnostic {
        self.labels.insert(0, Label { span, text: text.into() });
        self
    }

    /// A secondary label ("flow `billing` is declared here").
    pub fn with_label(mut self, span: Span, text: impl Into<String>) -> Diagnostic {
        self.labels.push(Label { span, text: text.into() });
        self
    }

    /// Says what to do.
    pub fn with_help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }

    /// The span the diagnostic is about (its first label), if it has one.
    pub fn primary_span(&self) -> Option<Span> {
        self.labels.first().map(|label| label.span)
    }

    /// Whether it fails the check.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Sorts diagnostics by position, then code, so output is stable whatever
/// order the passes ran in, and drops exact duplicates (two passes that
/// reach the same fact through different routes).
pub fn sort_diagnostics(diagnostics: &mut Vec<Diagnostic>) {
    diagnostics.sort_by(|left, right| {
        let left_span = left.primary_span().unwrap_or_default();
        let right_span = right.primary_span().unwrap_or_default();
        (left_span.start, left_span.end, left.code, &left.message).cmp(&(
            right_span.start,
            right_span.end,
            right.code,
            &right.message,
        ))
    });
    diagnostics.dedup();
}

/// How many diagnostics of one program are shown unless asked otherwise
/// (`flowc check --max-diagnostics`): past the first hundred, a program's
/// diagnostics are nearly always one mistake repeated (a stray quote run,
/// a misspelt field used everywhere), and printing every one costs time
/// and output in proportion to their number times the program's size.
pub const DEFAULT_MAX_SHOWN: usize = 100;

/// The diagnostics to show of one program's sorted list, at most `limit`
/// of them (0: no limit), and how many are left out. The first ones are
/// kept: in source order, the later ones are most often the cascade.
pub fn shown(diagnostics: &[Diagnostic], limit: usize) -> (&[Diagnostic], usize) {
    if limit == 0 || diagnostics.len() <= limit {
        return (diagnostics, 0);
    }
    let (kept, left_out) = diagnostics.split_at(limit);
    (kept, left_out.len())
}

/// The line that stands for the diagnostics [`shown`] left out.
pub fn left_out_note(file_name: &str, left_out: usize, limit: usize) -> String {
    let plural = if left_out == 1 { "" } else { "s" };
    format!(
        "note: {left_out} more diagnostic{plural} in {file_name} not shown (only the first {limit} of a program are); \
         fix these and check again, or pass `--max-diagnostics 0` to `flowc check` to see them all"
    )
}

/// Edit distance, for did-you-mean suggestions: insertions, deletions,
/// substitutions and transpositions of two neighbours (optimal string
/// alignment), so that `plcae` is one edit from `place`, as a typo is.
pub fn edit_distance(left: &str, right: &str) -> usize {
    let left: Vec<char> = left.chars().collect();
    let right: Vec<char> = right.chars().collect();
    // Three rows of the matrix: two back, one back, and the current one.
    let mut before: Vec<usize> = vec![0; right.len() + 1];
    let mut previous: Vec<usize> = (0..=right.len()).collect();
    let mut current = vec![0; right.len() + 1];
    for (i, left_char) in left.iter().enumerate() {
        current[0] = i + 1;
        for (j, right_char) in right.iter().enumerate() {
            let substitution = previous[j] + usize::from(left_char != right_char);
            let mut best = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
            let swapped = i > 0
                && j > 0
                && left.get(i - 1) == Some(right_char)
                && right.get(j - 1) == Some(left_char)
                && left_char != right_char;
            if swapped {
                best = best.min(before[j - 1] + 1);
            }
            current[j + 1] = best;
        }
        std::mem::swap(&mut before, &mut previous);
        std::mem::swap(&mut previous, &mut current);
    }
    previous[right.len()]
}

/// The candidate closest to `name`, if it is close enough to be a likely
/// misspelling (a third of the name's length, at least one edit).
pub fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let budget = (name.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .filter(|candidate| *candidate != name)
        .map(|candidate| (edit_distance(name, candidate), candidate))
        .filter(|(distance, _)| *distance <= budget)
        .min_by_key(|(distance, candidate)| (*distance, *candidate))
        .map(|(_, candidate)| candidate)
}

/// [`did_you_mean`], owned: what an error value keeps of its candidates
/// (the nearest name, not the whole list), so its words can be written
/// later.
pub fn nearest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    did_you_mean(name, candidates).map(str::to_string)
}

/// The help of an error that may have a nearest name: "did you mean
/// `close`?", else the help `otherwise` writes.
pub fn suggestion(close: Option<&str>, otherwise: impl FnOnce() -> String) -> String {
    match close {
        Some(close) => format!("did you mean `{close}`?"),
        None => otherwise(),
    }
}

/// The span of the `occurrence`th (from 0) `needle` in `text`: where a
/// test expects a diagnostic, or the value it is written from, to point.
#[cfg(test)]
pub(crate) fn span_of(text: &str, needle: &str, occurrence: usize) -> Span {
    let start = text
        .match_indices(needle)
        .nth(occurrence)
        .map(|(start, _)| start)
        .unwrap_or_else(|| panic!("`{needle}` occurs fewer than {} times", occurrence + 1));
    let offset = |index: usize| u32::try_from(index).expect("a small test file");
    Span::new(offset(start), offset(start + needle.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_its_name() {
        let names: std::collections::BTreeSet<&str> = Code::ALL.iter().map(|code| code.as_str()).collect();
        assert_eq!(names.len(), Code::ALL.len());
    }

    #[test]
    fn shown_keeps_the_first_diagnostics_up_to_the_limit() {
        let diagnostics: Vec<Diagnostic> =
            (0..5).map(|index| Diagnostic::new(Code::Syntax, format!("problem {index}"))).collect();
        let (kept, left_out) = shown(&diagnostics, 3);
        assert_eq!(
            kept.iter().map(|diagnostic| diagnostic.message.as_str()).collect::<Vec<_>>(),
            ["problem 0", "problem 1", "problem 2"]
        );
        assert_eq!(left_out, 2);
        assert_eq!(shown(&diagnostics, 0), (diagnostics.as_slice(), 0));
        assert_eq!(shown(&diagnostics, 5), (diagnostics.as_slice(), 0));
    }

    #[test]
    fn did_you_mean_finds_close_names_only() {
        assert_eq!(did_you_mean("bokking", ["booking", "support"]), Some("booking"));
        assert_eq!(did_you_mean("xyz", ["booking", "support"]), None);
    }

    #[test]
    fn a_transposition_is_one_edit() {
        assert_eq!(edit_distance("plcae", "place"), 1);
        assert_eq!(edit_distance("ab", "ba"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(did_you_mean("plcae", ["place", "review"]), Some("place"));
    }
}
