//! The words on the picture: IR expressions, templates, directives and
//! durations written back as source-like text for node and edge labels.
//!
//! This works on the resolved IR, never on the source text, so a label shows
//! what the runtime evaluates (names as resolved, minimal parentheses by the
//! language's precedence) and a program written in `.flow` or YAML draws the
//! same. The text is plain: escaping for Mermaid or DOT is the emitters' job.

use crate::expr::{Expr, ExprKind, Literal, Template, TemplatePart};
use crate::ir::{Directive, Position, Program};
use crate::syntax::ast::{BinaryOp, UnaryOp};

/// Longest template excerpt shown on an edge (an abort reason): longer
/// text is cut with an ellipsis, so one chatty reason cannot flatten the
/// layout. Conditions are never cut: they decide which edge is taken.
const MAX_TEMPLATE_CHARS: usize = 40;

/// Binding strength, loosest first, as grammar/flow.pest nests the rules:
/// `or`, `and`, `not`, comparisons (`is set` included), `+ -`, `* / %`,
/// unary minus, primaries.
const OR: u8 = 1;
const AND: u8 = 2;
const NOT: u8 = 3;
const COMPARE: u8 = 4;
const SUM: u8 = 5;
const PRODUCT: u8 = 6;
const NEGATE: u8 = 7;
const PRIMARY: u8 = 8;

/// An expression as source-like text: `confirmed == true and guests > 2`.
pub fn expr_text(program: &Program, expr: &Expr) -> String {
    let mut out = String::new();
    write_expr(program, expr, 0, &mut out);
    out
}

/// Several conditions that must all hold, joined with `and` (each wrapped
/// when it would otherwise bind differently).
pub fn all_of(program: &Program, exprs: &[Expr]) -> String {
    let parts: Vec<String> = exprs
        .iter()
        .map(|expr| {
            let mut out = String::new();
            write_expr(program, expr, AND + 1, &mut out);
            out
        })
        .collect();
    parts.join(" and ")
}

/// An AI condition, quoted so it reads as the model's question rather than
/// code: `"the user wants to change the date"`.
pub fn quoted(text: &str) -> String {
    format!("\"{text}\"")
}

fn precedence(expr: &Expr) -> u8 {
    match &expr.kind {
        ExprKind::Binary { op, .. } => binary_precedence(*op),
        ExprKind::Unary { op: UnaryOp::Not, .. } => NOT,
        ExprKind::Unary { op: UnaryOp::Neg, .. } => NEGATE,
        ExprKind::IsSet { .. } => COMPARE,
        _ => PRIMARY,
    }
}

fn binary_precedence(op: BinaryOp) -> u8 {
    match op {
        BinaryOp::Or => OR,
        BinaryOp::And => AND,
        BinaryOp::Eq
        | BinaryOp::Ne
        | BinaryOp::Lt
        | BinaryOp::Le
        | BinaryOp::Gt
        | BinaryOp::Ge
        | BinaryOp::In
        | BinaryOp::NotIn => COMPARE,
        BinaryOp::Add | BinaryOp::Sub => SUM,
        BinaryOp::Mul | BinaryOp::Div | BinaryOp::Rem => PRODUCT,
    }
}

/// Writes `expr`, parenthesized when it binds looser than `min` requires.
fn write_expr(program: &Program, expr: &Expr, min: u8, out: &mut String) {
    let own = precedence(expr);
    let wrap = own < min;
    if wrap {
        out.push('(');
    }
    match &expr.kind {
        ExprKind::Literal { value } => write_literal(value, out),
        ExprKind::List { items } => {
            out.push('[');
            write_list(program, items, out);
            out.push(']');
        }
        ExprKind::Field { field } => {
            out.push_str(program.field(*field).map_or("?", |field| field.name.as_str()));
        }
        ExprKind::Context { key } => {
            out.push_str("context.");
            out.push_str(program.context.get(key.index()).map_or("?", |key| key.name.as_str()));
        }
        ExprKind::Local { name, .. } => out.push_str(name),
        ExprKind::Env { name } => {
            out.push_str("env.");
            out.push_str(name);
        }
        ExprKind::StepOutput { name, .. } => {
            out.push_str("steps.");
            out.push_str(name);
            out.push_str(".output");
        }
        ExprKind::Member { object, member } => {
            write_expr(program, object, PRIMARY, out);
            out.push('.');
            out.push_str(member);
        }
        ExprKind::Unary { op: UnaryOp::Not, operand } => {
            out.push_str("not ");
            write_expr(program, operand, NOT, out);
        }
        ExprKind::Unary { op: UnaryOp::Neg, operand } => {
            // A primary operand only: `-(-x)` rather than `--x`.
            out.push('-');
            write_expr(program, operand, PRIMARY, out);
        }
        ExprKind::Binary { op, left, right } => {
            // Comparisons do not chain (one optional tail in the grammar), so
            // both sides of one sit a level higher; the other operators are
            // left-associative, so only the right side does.
            let left_min = if own == COMPARE { own + 1 } else { own };
            write_expr(program, left, left_min, out);
            out.push(' ');
            out.push_str(op.as_str());
            out.push(' ');
            write_expr(program, right, own + 1, out);
        }
        ExprKind::IsSet { operand, negated } => {
            write_expr(program, operand, SUM, out);
            out.push_str(if *negated { " is not set" } else { " is set" });
        }
        ExprKind::Call { function, args } => {
            out.push_str(function.name());
            out.push('(');
            write_list(program, args, out);
            out.push(')');
        }
        ExprKind::Error => out.push('?'),
    }
    if wrap {
        out.push(')');
    }
}

fn write_list(program: &Program, items: &[Expr], out: &mut String) {
    for (position, item) in items.iter().enumerate() {
        if position > 0 {
            out.push_str(", ");
        }
        write_expr(program, item, 0, out);
    }
}

fn write_literal(value: &Literal, out: &mut String) {
    match value {
        Literal::String(text) => write_string(text, out),
        other => out.push_str(&other.to_value().to_string()),
    }
}

/// A string literal as the language spells it: double quotes, with `"` and
/// `\` escaped and control characters written as escapes.
fn write_string(text: &str, out: &mut String) {
    out.push('"');
    for character in text.chars() {
        match character {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            other => out.push(other),
        }
    }
    out.push('"');
}

/// A template as written, `{{ expr }}` included, cut to a readable length.
pub fn template_text(program: &Program, template: &Template) -> String {
    let mut out = String::new();
    for part in &template.parts {
        match part {
            TemplatePart::Text(text) => out.push_str(text),
            TemplatePart::Expr(expr) => {
                out.push_str("{{ ");
                out.push_str(&expr_text(program, expr));
                out.push_str(" }}");
            }
        }
    }
    truncate(&out, MAX_TEMPLATE_CHARS)
}

fn truncate(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max_chars.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// What a position field does, as an edge label: `goto support`,
/// `goto_step booking.confirm`, `complete`, `abort "too many tries"`.
/// A directive's position as written: `ask_again S` for one written so
/// (its clearing writes are its own, not shown), else [`position_text`].
pub fn move_text(program: &Program, current_flow: Option<crate::ir::FlowId>, directive: &Directive) -> Option<String> {
    let text = position_text(program, current_flow, directive.position.as_ref()?);
    Some(match text.strip_prefix("goto_step ") {
        Some(step) if directive.ask_again => format!("ask_again {step}"),
        _ => text,
    })
}

pub fn position_text(program: &Program, current_flow: Option<crate::ir::FlowId>, position: &Position) -> String {
    let flow_name = |flow| program.flow(flow).map_or("?", |flow| flow.name.as_str());
    match position {
        Position::Goto { flow, .. } => format!("goto {}", flow_name(*flow)),
        Position::GotoStep { flow, step } => {
            let step_name =
                program.flow(*flow).and_then(|target| target.step(*step)).map_or("?", |step| step.name.as_str());
            if current_flow == Some(*flow) {
                format!("goto_step {step_name}")
            } else {
                format!("goto_step {}.{step_name}", flow_name(*flow))
            }
        }
        Position::Complete { next: None } => "complete".to_string(),
        Position::Complete { next: Some(next) } => format!("complete, next {}", flow_name(*next)),
        Position::Abort { reason: None } => "abort".to_string(),
        Position::Abort { reason: Some(reason) } => {
            format!("abort {}", quoted(&template_text(program, reason)))
        }
        Position::Reset => "reset".to_string(),
    }
}

/// A directive that does not move the conversation, as a short summary of
/// what it does (`set`, `reply`, …), for edges that continue on the linear
/// successor after applying it.
pub fn effects_text(directive: &Directive) -> String {
    let mut effects = Vec::new();
    if !directive.set.is_empty() {
        effects.push("set");
    }
    if !directive.set_context.is_empty() {
        effects.push("set_context");
    }
    if directive.reply.is_some() {
        effects.push("reply");
    }
    if !directive.append_prompt.is_empty() {
        effects.push("append_prompt");
    }
    if !directive.inject_tools.is_empty() {
        effects.push("inject_tools");
    }
    if directive.halt {
        effects.push("halt");
    }
    effects.join(", ")
}

/// `2d`, `90m`, `30s`, `1500ms`: the largest unit that divides evenly, as
/// the language writes durations.
pub fn duration_text(ms: u64) -> String {
    const UNITS: [(u64, &str); 4] = [(86_400_000, "d"), (3_600_000, "h"), (60_000, "m"), (1_000, "s")];
    for (unit_ms, suffix) in UNITS {
        if ms >= unit_ms && ms % unit_ms == 0 {
            return format!("{}{suffix}", ms / unit_ms);
        }
    }
    format!("{ms}ms")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::{Function, Type};
    use crate::ir::{Agent, Field, FieldId, TypeKind, ValueType};
    use crate::source::Span;

    fn program() -> Program {
        let field = |name: &str| Field {
            name: name.to_string(),
            ty: ValueType {
                kind: TypeKind::Int,
                description: None,
                min: None,
                max: None,
                pattern: None,
                examples: Vec::new(),
            },
            span: Span::default(),
        };
        Program {
            agent: Agent {
                name: None,
                identity: None,
                rules: Vec::new(),
                limits: Default::default(),
                history: Default::default(),
            },
            fields: vec![field("a"), field("b"), field("c")],
            context: vec![field("tier")],
            tools: Vec::new(),
            signals: Vec::new(),
            flows: Vec::new(),
            default_flow: None,
        }
    }

    fn node(kind: ExprKind) -> Expr {
        Expr { kind, ty: Type::Unknown, span: Span::default() }
    }

    fn field(index: u32) -> Expr {
        node(ExprKind::Field { field: FieldId(index) })
    }

    fn int(value: i64) -> Expr {
        node(ExprKind::Literal { value: value.into() })
    }

    fn binary(op: BinaryOp, left: Expr, right: Expr) -> Expr {
        node(ExprKind::Binary { op, left: Box::new(left), right: Box::new(right) })
    }

    fn check(expr: Expr, expected: &str) {
        assert_eq!(expr_text(&program(), &expr), expected);
    }

    #[test]
    fn parentheses_only_where_precedence_needs_them() {
        check(binary(BinaryOp::Mul, binary(BinaryOp::Add, field(0), int(1)), field(1)), "(a + 1) * b");
        check(binary(BinaryOp::Add, field(0), binary(BinaryOp::Mul, int(1), field(1))), "a + 1 * b");
        check(binary(BinaryOp::Sub, field(0), binary(BinaryOp::Sub, field(1), field(2))), "a - (b - c)");
        check(binary(BinaryOp::Sub, binary(BinaryOp::Sub, field(0), field(1)), field(2)), "a - b - c");
        check(
            binary(
                BinaryOp::And,
                binary(BinaryOp::Or, field(0), field(1)),
                node(ExprKind::Unary { op: UnaryOp::Not, operand: Box::new(binary(BinaryOp::Eq, field(2), int(3))) }),
            ),
            "(a or b) and not c == 3",
        );
    }

    #[test]
    fn names_literals_and_calls_read_like_source() {
        check(
            node(ExprKind::IsSet {
                operand: Box::new(node(ExprKind::Context { key: crate::ir::ContextId(0) })),
                negated: true,
            }),
            "context.tier is not set",
        );
        check(
            binary(
                BinaryOp::In,
                node(ExprKind::Literal { value: "say \"hi\"\n".into() }),
                node(ExprKind::List { items: vec![int(1), node(ExprKind::Literal { value: 2.5.into() })] }),
            ),
            "\"say \\\"hi\\\"\\n\" in [1, 2.5]",
        );
        check(node(ExprKind::Call { function: Function::Len, args: vec![field(0)] }), "len(a)");
        check(
            node(ExprKind::Unary { op: UnaryOp::Neg, operand: Box::new(binary(BinaryOp::Add, field(0), int(1))) }),
            "-(a + 1)",
        );
    }

    #[test]
    fn durations_use_the_largest_even_unit() {
        assert_eq!(duration_text(172_800_000), "2d");
        assert_eq!(duration_text(5_400_000), "90m");
        assert_eq!(duration_text(30_000), "30s");
        assert_eq!(duration_text(1_500), "1500ms");
    }

    #[test]
    fn long_templates_are_cut() {
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(truncate("abcd", 4), "abcd");
    }
}
