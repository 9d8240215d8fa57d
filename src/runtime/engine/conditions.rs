//! The conditions that decide where a step goes, as the turn evaluates
//! them: a branch entry's `if`s and `when`s, whether a step reached in
//! list order is passed over, and the ids under which the understand call
//! asks the AI conditions.

use super::services::Services;
use super::state::TurnState;
use crate::expr::eval::is_true;
use crate::expr::{Expr, ExprKind};
use crate::ir::{FieldId, Flow, Step};
use crate::llm::Question;
use std::collections::BTreeSet;

/// Whether branch entry `index` matches: its `if`s hold, then its `when`s.
pub(super) fn branch_matches(st: &mut TurnState, sv: &Services, flow: &Flow, step: &Step, index: usize) -> bool {
    let Some(entry) = step.branches.get(index) else {
        return false;
    };
    if !st.holds(sv, &entry.guard) {
        return false;
    }
    let base = format!("{}.{}#{}", flow.name, step.name, index + 1);
    whens_hold(st, &base, &entry.when)
}

pub(super) fn skip_reason(st: &mut TurnState, sv: &Services, flow: &Flow, step: &Step) -> Option<String> {
    if let Some(skip_if) = &step.skip_if
        && is_true(&st.eval(sv, skip_if))
    {
        return Some("skip_if holds".to_string());
    }
    if !st.holds(sv, &step.guard) {
        return Some("its `if` does not hold".to_string());
    }
    let base = format!("{}.{}", flow.name, step.name);
    if !step.when.is_empty() && !whens_hold(st, &base, &step.when) {
        return Some("its `when` does not hold".to_string());
    }
    None
}

/// Whether every `when` of a list holds, by the understanding's answers.
pub(super) fn whens_hold(st: &mut TurnState, base: &str, whens: &[String]) -> bool {
    for index in 0..whens.len() {
        let id = question_id(base, whens.len(), index);
        match st.reading.understanding.conditions.get(&id).map(|answer| answer.yes) {
            Some(true) => {}
            Some(false) => return false,
            None => {
                st.warn(format!("the condition `{id}` was not asked this turn; it counts as not holding"));
                return false;
            }
        }
    }
    true
}

pub(super) fn question_id(base: &str, count: usize, index: usize) -> String {
    if count == 1 { base.to_string() } else { format!("{base}.{}", index + 1) }
}

pub(super) fn push_questions(questions: &mut Vec<Question>, base: &str, whens: &[String]) {
    for (index, when) in whens.iter().enumerate() {
        questions.push(Question { id: question_id(base, whens.len(), index), when: vec![when.clone()] });
    }
}

/// Whether any of the expressions reads one of the fields.
pub(super) fn reads_any(exprs: &[Expr], fields: &BTreeSet<FieldId>) -> bool {
    let mut found = false;
    for expr in exprs {
        expr.walk(&mut |node| {
            if let ExprKind::Field { field } = node.kind
                && fields.contains(&field)
            {
                found = true;
            }
        });
    }
    found
}
