//! Unit tests of the graph model: edges, labels and node kinds.

use super::*;
use crate::expr::{Expr, ExprKind, Type};
use crate::ir::{Agent, Behavior, Branch, Field, FieldId, ForEach, Next, Phase, Position, Signal, TypeKind, ValueType};
use crate::source::Span;
use crate::syntax::ast::BinaryOp;

fn field(name: &str, kind: TypeKind) -> Field {
    Field {
        name: name.to_string(),
        ty: ValueType { kind, description: None, min: None, max: None, pattern: None, examples: Vec::new() },
        span: Span::default(),
    }
}

fn expr(kind: ExprKind) -> Expr {
    Expr { kind, ty: Type::Bool, span: Span::default() }
}

/// `field == value` over field index `field`.
fn equals(field: u32, value: crate::expr::Literal) -> Expr {
    expr(ExprKind::Binary {
        op: BinaryOp::Eq,
        left: Box::new(expr(ExprKind::Field { field: FieldId(field) })),
        right: Box::new(expr(ExprKind::Literal { value })),
    })
}

fn is_set(field: u32) -> Expr {
    expr(ExprKind::IsSet { operand: Box::new(expr(ExprKind::Field { field: FieldId(field) })), negated: false })
}

fn ask(name: &str, collect: u32) -> Step {
    Step { collect: vec![FieldId(collect)], ..Step::named(name) }
}

fn auto(name: &str) -> Step {
    Step { auto: true, ..Step::named(name) }
}

fn branch(guard: Vec<Expr>, when: &[&str], then: Then) -> Branch {
    Branch { guard, when: when.iter().map(ToString::to_string).collect(), then, label: None, span: Span::default() }
}

fn moving(position: Position) -> Box<Directive> {
    Box::new(Directive { position: Some(position), ..Directive::default() })
}

fn emit(position: Position) -> Action {
    Action { kind: ActionKind::Emit(moving(position)), span: Span::default() }
}

fn flow(name: &str, steps: Vec<Step>) -> Flow {
    let workflow = !steps.is_empty() && steps.iter().all(|step| step.auto);
    Flow {
        name: name.to_string(),
        title: None,
        when: Vec::new(),
        guard: Vec::new(),
        default: false,
        workflow,
        requires: Vec::new(),
        requires_spans: Vec::new(),
        optional: Vec::new(),
        fresh: Vec::new(),
        keep: Vec::new(),
        keep_spans: Vec::new(),
        rules: Vec::new(),
        on_enter: Vec::new(),
        on_complete: Vec::new(),
        complete_next: None,
        steps,
        span: Span::default(),
        incomplete: false,
        schedule: None,
    }
}

fn program(flows: Vec<Flow>) -> Program {
    Program {
        agent: Agent {
            name: None,
            identity: None,
            rules: Vec::new(),
            limits: Default::default(),
            history: Default::default(),
        },
        fields: vec![
            field("hotel", TypeKind::String),
            field("date", TypeKind::Date),
            field("guests", TypeKind::Int),
            field("confirmed", TypeKind::Bool),
        ],
        context: Vec::new(),
        tools: Vec::new(),
        signals: Vec::new(),
        flows,
        default_flow: None,
    }
}

/// A readable name for a node: a step's id, or the kind of a marker
/// with its flow.
fn describe(graph: &Graph, id: &NodeId) -> String {
    let Some(node) = graph.nodes.iter().find(|node| &node.id == id) else {
        return format!("<missing {}>", id.as_str());
    };
    let flow = node.flow.map(|flow| flow.0).unwrap_or_default();
    match node.kind {
        NodeKind::Entry => format!("start{flow}"),
        NodeKind::Complete => format!("complete{flow}"),
        NodeKind::Abort => format!("abort{flow}"),
        NodeKind::Message => "message".to_string(),
        NodeKind::Run => "run".to_string(),
        _ => node.lines.first().cloned().unwrap_or_default(),
    }
}

/// One line per edge: `from -> to: label`, with `(dashed)` for an
/// unreachable edge and `(cross)` for one between flows.
fn edges(graph: &Graph) -> String {
    let mut out = String::new();
    for edge in &graph.edges {
        out.push_str(&describe(graph, &edge.from));
        out.push_str(" -> ");
        out.push_str(&describe(graph, &edge.to));
        if let Some(label) = &edge.label {
            out.push_str(": ");
            out.push_str(label);
        }
        if edge.unreachable {
            out.push_str(" (dashed)");
        }
        if edge.cross_flow {
            out.push_str(" (cross)");
        }
        out.push('\n');
    }
    out
}

fn check(program: &Program, reachability: &Reachability, only: Option<FlowId>, expected: &str) {
    let graph = build(program, reachability, only);
    let actual = edges(&graph);
    assert_eq!(actual.trim(), expected.trim(), "\nactual:\n{actual}");
}

#[test]
fn booking_edges_follow_the_resolution_order() {
    let mut ask_guests = ask("ask_guests", 2);
    ask_guests.skip_if = Some(is_set(2));
    let mut confirm = ask("confirm", 3);
    confirm.requires = vec![FieldId(0), FieldId(1), FieldId(2)];
    let mut change = branch(
        Vec::new(),
        &["the user wants to change the date"],
        Then::Directive(moving(Position::GotoStep { flow: FlowId(0), step: StepId(1) })),
    );
    change.label = Some("change date".to_string());
    confirm.branches = vec![
        branch(vec![equals(3, true.into())], &[], Then::Step(StepId(4))),
        change,
        branch(Vec::new(), &[], Then::Step(StepId(5))),
    ];
    let book = Step { next: Some(Next::End), ..auto("book") };
    let cancelled = Step {
        say: Some(crate::expr::Template { parts: Vec::new(), span: Span::default() }),
        ..Step::named("cancelled")
    };
    let mut booking =
        flow("booking", vec![ask("ask_hotel", 0), ask("ask_date", 1), ask_guests, confirm, book, cancelled]);
    booking.when = vec!["the user wants to book a hotel room".to_string()];
    check(
        &program(vec![booking]),
        &Reachability::default(),
        None,
        r#"
message -> start0: when "the user wants to book a hotel room"
start0 -> ask_hotel
ask_hotel -> ask_date
ask_hotel -> abort0: no answer ×3 → abort
ask_date -> ask_guests: unless guests is set
ask_date -> confirm: skip ask_guests
ask_date -> abort0: no answer ×3 → abort
ask_guests -> confirm
ask_guests -> abort0: no answer ×3 → abort
confirm -> book: confirmed == true
confirm -> ask_date: change date → goto_step ask_date
confirm -> cancelled: else
confirm -> abort0: no answer ×3 → abort
book -> complete0: next end
cancelled -> complete0
"#,
    );
}

#[test]
fn no_matching_branch_falls_through_to_next() {
    let mut choose = ask("choose", 3);
    choose.branches = vec![branch(
        vec![equals(3, true.into())],
        &["the user is sure"],
        Then::Directive(moving(Position::Abort { reason: None })),
    )];
    choose.next = Some(Next::Step(StepId(2)));
    choose.on_no_answer = Some(moving(Position::Reset));
    choose.max_asks = 2;
    let program = program(vec![flow("f", vec![choose, Step::named("skipped"), Step::named("last")])]);
    check(
        &program,
        &Reachability::default(),
        None,
        r#"
start0 -> choose
choose -> abort0: confirmed == true and "the user is sure" → abort
choose -> last: no branch matched → next
choose -> choose: no answer ×2 → reset
skipped -> last
last -> complete0
"#,
    );
}

#[test]
fn positionless_directives_continue_in_place() {
    // A branch directive without a position goes on with the next step
    // in the list (not `next`); `on_no_answer` without one asks again.
    let mut first = ask("first", 0);
    first.skip_if = Some(is_set(0));
    let writes = Box::new(Directive {
        set: vec![crate::ir::Write { field: FieldId(2), value: equals(2, 1.into()) }],
        ..Directive::default()
    });
    first.branches = vec![branch(vec![equals(2, 1.into())], &[], Then::Directive(writes.clone()))];
    first.next = Some(Next::End);
    first.on_no_answer = Some(writes);
    let program = program(vec![flow("f", vec![first, Step::named("second")])]);
    check(
        &program,
        &Reachability::default(),
        None,
        r#"
start0 -> first: unless hotel is set
start0 -> second: skip first
first -> second: guests == 1 → set
first -> complete0: no branch matched → next end
first -> first: no answer ×3 → set → ask again
second -> complete0
"#,
    );
}

#[test]
fn conditional_steps_chain_their_bypasses_up_to_completion() {
    let mut maybe = Step::named("maybe");
    maybe.when = vec!["the user wants extras".to_string()];
    let mut guarded = Step::named("guarded");
    guarded.guard = vec![equals(2, 2.into())];
    let program = program(vec![
        flow("f", vec![maybe.clone(), guarded.clone()]),
        flow("g", vec![Step::named("first"), maybe, guarded]),
    ]);
    check(
        &program,
        &Reachability::default(),
        None,
        r#"
start0 -> maybe: when "the user wants extras"
start0 -> guarded: skip maybe → if guests == 2
start0 -> complete0: skip maybe, guarded
maybe -> guarded: if guests == 2
maybe -> complete0: skip guarded
guarded -> complete0
start1 -> first
first -> maybe: when "the user wants extras"
first -> guarded: skip maybe → if guests == 2
first -> complete1: skip maybe, guarded
maybe -> guarded: if guests == 2
maybe -> complete1: skip guarded
guarded -> complete1
"#,
    );
}

#[test]
fn unreachable_steps_and_branches_are_marked() {
    let mut first = ask("first", 3);
    first.branches = vec![
        branch(Vec::new(), &[], Then::Step(StepId(2))),
        branch(vec![equals(3, true.into())], &[], Then::Step(StepId(1))),
    ];
    let program = program(vec![flow("f", vec![first, Step::named("orphan"), Step::named("last")])]);
    let reachability = Reachability {
        unreachable_steps: [(FlowId(0), StepId(1))].into_iter().collect(),
        unreachable_branches: [(FlowId(0), StepId(0), 1)].into_iter().collect(),
    };
    check(
        &program,
        &reachability,
        None,
        r#"
start0 -> first
first -> last: else
first -> orphan: confirmed == true (dashed)
first -> abort0: no answer ×3 → abort
orphan -> last (dashed)
last -> complete0
"#,
    );
    let graph = build(&program, &reachability, None);
    let orphan = graph.nodes.iter().find(|node| node.lines.first().map(String::as_str) == Some("orphan"));
    assert!(orphan.is_some_and(|node| node.unreachable));
}

#[test]
fn flows_connect_through_directives_signals_and_complete_next() {
    let mut triage_step = ask("pick", 0);
    triage_step.actions = vec![Action {
        kind: ActionKind::ForEach(Box::new(ForEach {
            items: is_set(0),
            binding: "item".to_string(),
            slot: 0,
            filter: None,
            actions: vec![emit(Position::Goto { flow: FlowId(1), data: Vec::new() })],
        })),
        span: Span::default(),
    }];
    let mut triage = flow("triage", vec![triage_step]);
    triage.default = true;
    triage.complete_next = Some(FlowId(1));
    let mut survey = flow("survey", vec![Step::named("rate")]);
    survey.on_enter = vec![emit(Position::Complete { next: None })];
    let mut job = flow("job", vec![Step { wait_ms: Some(60_000), ..auto("pause") }]);
    job.requires = vec![FieldId(0)];
    let mut program = program(vec![triage, survey, job]);
    program.signals = vec![Signal {
        name: "stop".to_string(),
        when: vec!["the user wants to stop".to_string()],
        guard: Vec::new(),
        phase: Phase::Pre,
        behavior: Behavior::Always,
        extract: Vec::new(),
        then: Some(*moving(Position::Abort { reason: None })),
        span: Span::default(),
    }];
    check(
        &program,
        &Reachability::default(),
        None,
        r#"
message -> start0: default
start0 -> pick
pick -> complete0
pick -> abort0: no answer ×3 → abort
pick -> start1: do emit → goto survey (cross)
start1 -> rate
start1 -> complete1: on_enter emit → complete
rate -> complete1
run -> start2: run with hotel
start2 -> pause
pause -> complete2
signal stop -> abort0: abort
signal stop -> abort1: abort
complete0 -> start1: complete.next (cross)
"#,
    );
    check(
        &program,
        &Reachability::default(),
        Some(FlowId(1)),
        r#"
flow triage -> start1: do emit → goto survey (cross)
start1 -> rate
start1 -> complete1: on_enter emit → complete
rate -> complete1
signal stop -> abort1: abort
flow triage -> start1: complete.next (cross)
"#,
    );
    let graph = build(&program, &Reachability::default(), Some(FlowId(1)));
    let stubs: Vec<&str> =
        graph.nodes.iter().filter(|node| node.kind == NodeKind::FlowStub).map(|node| node.id.as_str()).collect();
    assert_eq!(stubs, ["x0"]);
    assert_eq!(graph.clusters.len(), 1);
}

/// Entering another flow runs its `on_enter` and, at its first step,
/// arrives in list order (a first step that can be passed over is asked
/// about), as the runner does: so a `goto_step` to another flow's first
/// step is drawn to that flow's start, one to a later step to the step.
#[test]
fn goto_step_into_another_flow_arrives_as_the_runner_does() {
    let mut jumper = ask("jump", 0);
    jumper.actions = vec![
        emit(Position::GotoStep { flow: FlowId(1), step: StepId(0) }),
        emit(Position::GotoStep { flow: FlowId(1), step: StepId(1) }),
    ];
    let mut first = Step::named("first");
    first.skip_if = Some(is_set(1));
    let program = program(vec![flow("main", vec![jumper]), flow("other", vec![first, Step::named("second")])]);
    let graph = build(&program, &Reachability::default(), None);
    let targets: Vec<String> = graph
        .edges
        .iter()
        .filter(|edge| edge.label.as_deref().is_some_and(|label| label.contains("goto_step")))
        .map(|edge| describe(&graph, &edge.to))
        .collect();
    assert_eq!(targets, ["start1", "second"], "\n{}", edges(&graph));
}

/// A signal's `goto_step` lands where the runtime lands it from the flow
/// the conversation is in: inside the target flow, on the step as named;
/// from any other flow (or none), through the target flow's start, where
/// its `on_enter` runs and a first step that can be passed over is asked
/// about. Drawn straight to the step, the picture hid both.
#[test]
fn a_signals_goto_step_enters_the_flow_from_outside_it() {
    let mut first = Step::named("first");
    first.skip_if = Some(is_set(1));
    let mut other = flow("other", vec![first, Step::named("second")]);
    other.on_enter = vec![emit(Position::Complete { next: None })];
    let mut program = program(vec![flow("main", vec![ask("ask", 0)]), other]);
    program.signals = vec![Signal {
        name: "jump".to_string(),
        when: vec!["the user wants the other thing".to_string()],
        guard: Vec::new(),
        phase: Phase::Pre,
        behavior: Behavior::Always,
        extract: Vec::new(),
        then: Some(*moving(Position::GotoStep { flow: FlowId(1), step: StepId(0) })),
        span: Span::default(),
    }];
    let graph = build(&program, &Reachability::default(), None);
    let from_signal: Vec<String> = graph
        .edges
        .iter()
        .filter(|edge| edge.kind == EdgeKind::Signal)
        .map(|edge| format!("{}: {}", describe(&graph, &edge.to), edge.label.as_deref().unwrap_or_default()))
        .collect();
    assert_eq!(from_signal, ["start1: goto_step other.first", "first: goto_step other.first"], "\n{}", edges(&graph));
}
