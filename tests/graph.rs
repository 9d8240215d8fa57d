//! `flowc graph`: snapshots of the Mermaid and DOT pictures of every program
//! in flows/ and tests/fixtures/graph/, the command's exit codes, and proof
//! that the real parsers accept what it prints — Mermaid's own parser (run
//! in Node under jsdom by tools/mermaid-check) and Graphviz `dot`.
//!
//! The parsers are installed by scripts/install-test-deps.sh. Under
//! `CI=true` a missing parser fails the test, so CI cannot pass without
//! checking; elsewhere the test prints a note and skips.

use flowc::check::reachability::Reachability;
use flowc::expr::{Expr, ExprKind, Template, TemplatePart, Type};
use flowc::graph::{Format, draw as render};
use flowc::ir::{
    Agent, Behavior, Branch, Directive, Field, FieldId, Flow, FlowId, Next, Phase, Position, Program, Signal, Step,
    StepId, Then, TypeKind, ValueType,
};
use flowc::pipeline::compile;
use flowc::source::Span;
use flowc::syntax::ast::BinaryOp;
use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

// ------------------------------------------------------------------ programs

/// Every program the pictures are checked on: the examples in flows/ and
/// the graph fixtures, sorted.
fn program_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for directory in ["flows", "tests/fixtures/graph"] {
        collect_programs(&Path::new(ROOT).join(directory), &mut files);
    }
    files.sort();
    files
}

fn collect_programs(directory: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(directory) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_programs(&path, files);
        } else if matches!(path.extension().and_then(|ext| ext.to_str()), Some("flow" | "yaml" | "yml"))
            && !flowc::source::is_test_file(&path)
        {
            files.push(path);
        }
    }
}

/// The picture of a program file, drawn as `flowc graph` draws it.
fn draw(path: &Path, format: Format) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
    let compilation = compile(&flowc::source::SourceFile::new(path.display().to_string(), text));
    render(&compilation.ir, None, format)
}

fn snapshot_settings() -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings.set_allow_empty_glob(true);
    settings
}

#[test]
fn example_pictures() {
    snapshot_settings().bind(|| {
        insta::glob!("../flows", "**/*.{flow,yaml,yml}", |path| {
            if flowc::source::is_test_file(path) {
                return;
            }
            insta::assert_snapshot!("graph_mermaid", draw(path, Format::Mermaid));
            insta::assert_snapshot!("graph_dot", draw(path, Format::Dot));
        });
    });
}

#[test]
fn fixture_pictures() {
    snapshot_settings().bind(|| {
        insta::glob!("fixtures/graph", "*.{flow,yaml,yml}", |path| {
            insta::assert_snapshot!("graph_fixture_mermaid", draw(path, Format::Mermaid));
            insta::assert_snapshot!("graph_fixture_dot", draw(path, Format::Dot));
        });
    });
}

// ------------------------------------------------------------- real parsers

/// A parser the tests need, or why it is not there.
fn parser(name: &str, ready: bool, why: &str) -> bool {
    if ready {
        return true;
    }
    let message = format!("{name} is not installed ({why}); run scripts/install-test-deps.sh");
    // scripts/test.sh (the README's test command) sets FLOWC_TEST_STRICT:
    // there a missing parser fails instead of skipping.
    let strict = std::env::var("CI").is_ok_and(|value| value == "true")
        || std::env::var("FLOWC_TEST_STRICT").is_ok_and(|value| value == "1");
    if strict {
        panic!("{message}");
    }
    eprintln!("note: skipping this check: {message}");
    false
}

fn checker_script() -> PathBuf {
    Path::new(ROOT).join("tools/mermaid-check/check.mjs")
}

fn mermaid_ready() -> bool {
    let node = Command::new("node").arg("--version").output().is_ok_and(|output| output.status.success());
    let installed = Path::new(ROOT).join("tools/mermaid-check/node_modules/mermaid/package.json").is_file();
    parser(
        "the Mermaid checker",
        node && installed,
        if node { "tools/mermaid-check/node_modules is missing" } else { "node is not on PATH" },
    )
}

fn dot_ready() -> bool {
    let dot = Command::new("dot").arg("-V").output().is_ok_and(|output| output.status.success());
    parser("Graphviz", dot, "`dot` is not on PATH")
}

/// A fresh directory for one test's files.
fn scratch(test: &str) -> PathBuf {
    let directory = Path::new(env!("CARGO_TARGET_TMPDIR")).join("graph").join(test);
    let _ = std::fs::remove_dir_all(&directory);
    std::fs::create_dir_all(&directory).unwrap_or_else(|error| panic!("{error}"));
    directory
}

/// Runs the Mermaid checker on files; `Err` holds what it printed.
fn mermaid_parse(files: &[PathBuf]) -> Result<(), String> {
    let output = Command::new("node")
        .arg(checker_script())
        .args(files)
        .output()
        .unwrap_or_else(|error| panic!("cannot run node: {error}"));
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "exit {:?}\n{}{}",
            output.status.code(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

fn dot_parse(file: &Path) -> Result<(), String> {
    let output =
        Command::new("dot").arg("-Tsvg").arg(file).output().unwrap_or_else(|error| panic!("cannot run dot: {error}"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Graphviz exits 0 on some syntax problems and only warns: a warning
    // about our text is a failure too.
    if output.status.success() && stderr.trim().is_empty() {
        Ok(())
    } else {
        Err(format!("{}: exit {:?}\n{stderr}", file.display(), output.status.code()))
    }
}

/// Every picture to hand to the real parsers: each program file's, and the
/// hand-built hostile program's (which needs no front end).
fn pictures(format: Format) -> Vec<(String, String)> {
    let mut pictures: Vec<(String, String)> = program_files()
        .iter()
        .map(|path| {
            let name = path.strip_prefix(ROOT).unwrap_or(path).display().to_string();
            (name, draw(path, format))
        })
        .collect();
    let hostile = hostile_program();
    pictures.push(("hostile (built)".to_string(), render(&hostile, None, format)));
    let empty = Program { flows: Vec::new(), signals: Vec::new(), ..hostile_program() };
    pictures.push(("no flows (built)".to_string(), render(&empty, None, format)));
    // Dead code as the checker would find it, so dashed nodes, dotted
    // edges and their classes go through the real parsers too.
    let dead = Reachability {
        unreachable_steps: [(FlowId(0), StepId(1)), (FlowId(1), StepId(4))].into_iter().collect(),
        unreachable_branches: [(FlowId(0), StepId(0), 1), (FlowId(2), StepId(4), 0)].into_iter().collect(),
    };
    let graph = flowc::graph::build(&hostile, &dead, None);
    let text = match format {
        Format::Mermaid => flowc::graph::mermaid::render(&graph),
        Format::Dot => flowc::graph::dot::render(&graph),
    };
    assert!(text.contains("unreachable"), "{text}");
    pictures.push(("hostile (built), with dead code".to_string(), text));
    // Coverage laid on the picture (`flowc graph --coverage`): its classes
    // and link styles go through the real parsers too.
    let mut covered = flowc::graph::coverage::Covered::default();
    if let Some(flow) = hostile.flows.first() {
        for step in &flow.steps {
            covered.steps.insert((flow.name.clone(), step.name.clone()));
        }
        let entry = flowc::graph::coverage::Point::Entry(flow.name.clone());
        covered.transitions.insert((flowc::graph::coverage::Point::Message, entry));
    }
    let text = flowc::graph::draw_covered(&hostile, None, format, &covered);
    assert!(text.contains("#2a7a2a"), "the reached parts are green: {text}");
    pictures.push(("hostile (built), with coverage".to_string(), text));
    for flow in 0..hostile.flows.len() {
        let only = Some(FlowId::from_index(flow));
        pictures.push((format!("hostile (built), flow {flow}"), render(&hostile, only, format)));
    }
    pictures
}

fn write_pictures(directory: &Path, pictures: &[(String, String)], extension: &str) -> Vec<PathBuf> {
    pictures
        .iter()
        .enumerate()
        .map(|(index, (_, text))| {
            let path = directory.join(format!("picture{index}.{extension}"));
            std::fs::write(&path, text).unwrap_or_else(|error| panic!("{error}"));
            path
        })
        .collect()
}

#[test]
fn mermaid_parser_accepts_every_picture() {
    if !mermaid_ready() {
        return;
    }
    let directory = scratch("mermaid");
    let pictures = pictures(Format::Mermaid);
    let files = write_pictures(&directory, &pictures, "mmd");
    if let Err(error) = mermaid_parse(&files) {
        let names: Vec<String> =
            pictures.iter().zip(&files).map(|((name, _), file)| format!("{} = {name}", file.display())).collect();
        panic!("{error}\n{}", names.join("\n"));
    }
}

/// The checker really parses: a broken graph, a keyword as a node id and a
/// stray quote are each rejected.
#[test]
fn mermaid_parser_rejects_broken_pictures() {
    if !mermaid_ready() {
        return;
    }
    let directory = scratch("mermaid-broken");
    let broken = [
        "flowchart TD\n  a[\"open --> b\n",
        "flowchart TD\n  end --> b\n",
        "flowchart TD\n  a[[\"mismatched\"] --> b\n",
        "flowchart TD\n  subgraph x\n  a --> b\n",
    ];
    for (index, text) in broken.iter().enumerate() {
        let path = directory.join(format!("broken{index}.mmd"));
        std::fs::write(&path, text).unwrap_or_else(|error| panic!("{error}"));
        assert!(mermaid_parse(&[path]).is_err(), "the checker accepted:\n{text}");
    }
    let good = directory.join("good.mmd");
    std::fs::write(&good, "flowchart TD\n  a[\"#quot;end#quot;\"] -->|\"x\"| b\n")
        .unwrap_or_else(|error| panic!("{error}"));
    assert_eq!(mermaid_parse(&[good]), Ok(()));
}

#[test]
fn graphviz_accepts_every_picture() {
    if !dot_ready() {
        return;
    }
    let directory = scratch("dot");
    let pictures = pictures(Format::Dot);
    let files = write_pictures(&directory, &pictures, "dot");
    for ((name, _), file) in pictures.iter().zip(&files) {
        if let Err(error) = dot_parse(file) {
            panic!("{name}: {error}");
        }
    }
}

#[test]
fn graphviz_rejects_a_broken_picture() {
    if !dot_ready() {
        return;
    }
    let directory = scratch("dot-broken");
    let path = directory.join("broken.dot");
    std::fs::write(&path, "digraph flowc {\n  a [label=\"open];\n}\n").unwrap_or_else(|error| panic!("{error}"));
    assert!(dot_parse(&path).is_err());
}

// ------------------------------------------------------------ the command

fn flowc(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_flowc"))
        .args(args)
        .current_dir(ROOT)
        .env("NO_COLOR", "1")
        .output()
        .unwrap_or_else(|error| panic!("cannot run flowc: {error}"));
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn clean_program_draws_and_exits_zero() {
    let (code, stdout, stderr) = flowc(&["graph", "tests/fixtures/graph/chain.flow"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("flowchart TD\n"), "{stdout}");
    let (code, stdout, _) = flowc(&["graph", "tests/fixtures/graph/chain.flow", "--format", "dot"]);
    assert_eq!(code, 0);
    assert!(stdout.starts_with("digraph flowc {\n"), "{stdout}");
}

#[test]
fn program_with_errors_still_draws_and_exits_one() {
    let (code, stdout, stderr) = flowc(&["graph", "tests/fixtures/graph/hostile.yaml"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stdout.starts_with("flowchart TD\n"), "{stdout}");
    assert!(stderr.contains("invalid_id"), "{stderr}");
}

#[test]
fn one_flow_with_stubs_for_the_others() {
    let (code, stdout, stderr) = flowc(&["graph", "tests/fixtures/graph/chain.flow", "--flow", "second"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("subgraph f1 "), "{stdout}");
    assert!(!stdout.contains("subgraph f0 "), "{stdout}");
    assert!(stdout.contains("x0[/\"flow first\"/]"), "{stdout}");
}

#[test]
fn unknown_flow_is_a_usage_error() {
    let (code, stdout, stderr) = flowc(&["graph", "tests/fixtures/graph/chain.flow", "--flow", "nope"]);
    assert_eq!(code, 2);
    assert!(stdout.is_empty());
    assert!(stderr.contains("`nope` names no flow"), "{stderr}");
    assert!(stderr.contains("first, second"), "{stderr}");
}

#[test]
fn output_file_instead_of_stdout() {
    let directory = scratch("output");
    let out = directory.join("chain.dot");
    let out_text = out.display().to_string();
    let (code, stdout, stderr) =
        flowc(&["graph", "tests/fixtures/graph/chain.flow", "--format", "dot", "-o", &out_text]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.is_empty());
    let written = std::fs::read_to_string(&out).unwrap_or_default();
    assert!(written.starts_with("digraph flowc {"), "{written}");
}

#[test]
fn missing_file_is_an_io_error() {
    let (code, _, stderr) = flowc(&["graph", "tests/fixtures/graph/no-such-file.flow"]);
    assert_eq!(code, 2, "{stderr}");
}

// ------------------------------------------------------ the hostile program

/// Text that would break a naive emitter: quotes, brackets, `#`, `|`, `;`,
/// `<>`, `&`, a newline, Mermaid and DOT keywords, backslash escapes,
/// Markdown and KaTeX markers, and unicode.
const HOSTILE: &[&str] = &[
    "end",
    "graph",
    "subgraph",
    "class",
    "style",
    "default",
    "digraph",
    "node",
    "say \"hi\" [now] {x} (y)",
    "#1 | a; b: c",
    "<b>bold</b> & <br> &amp;",
    "two\nlines\r\ttab",
    "back\\slash \\N \\l",
    "`markdown` **x** $$k$$",
    "naïve café 🚀 東京 —",
    "#quot; #35; %% ~~~ --> ==> -.->",
    "style: x #fff;",
    "classDef: y #f00;",
];

fn hostile_field(name: &str) -> Field {
    Field {
        name: name.to_string(),
        ty: ValueType {
            kind: TypeKind::Bool,
            description: None,
            min: None,
            max: None,
            pattern: None,
            examples: Vec::new(),
        },
        span: Span::default(),
    }
}

fn literal(text: &str) -> Expr {
    Expr { kind: ExprKind::Literal { value: text.into() }, ty: Type::String, span: Span::default() }
}

/// A program whose every name, title, condition, label and reason is
/// hostile text, using every kind of node and edge.
fn hostile_program() -> Program {
    let fields: Vec<Field> = HOSTILE.iter().map(|name| hostile_field(name)).collect();
    let mut flows = Vec::new();
    for (flow_index, flow_name) in HOSTILE.iter().enumerate().take(4) {
        let other = FlowId::from_index((flow_index + 1) % 4);
        let mut steps: Vec<Step> = Vec::new();
        for (step_index, step_name) in HOSTILE.iter().enumerate() {
            let mut step = Step::named(*step_name);
            let text = HOSTILE.get((step_index + flow_index) % HOSTILE.len()).copied().unwrap_or("x");
            let field = FieldId::from_index(step_index);
            match step_index % 6 {
                0 => step.collect = vec![field],
                1 => {
                    step.say =
                        Some(Template { parts: vec![TemplatePart::Text(text.to_string())], span: Span::default() })
                }
                2 => step.auto = true,
                3 => {
                    step.auto = true;
                    step.wait_ms = Some(172_800_000);
                }
                4 => step.skip_if = Some(equals(field, text)),
                _ => {
                    step.when = vec![text.to_string()];
                    step.guard = vec![equals(field, text)];
                }
            }
            if step_index % 4 == 0 {
                let target = StepId::from_index((step_index + 2) % HOSTILE.len());
                step.branches = vec![
                    Branch {
                        guard: vec![equals(field, text)],
                        when: vec![text.to_string()],
                        then: Then::Step(target),
                        label: None,
                        span: Span::default(),
                    },
                    Branch {
                        guard: Vec::new(),
                        when: vec![text.to_string()],
                        then: Then::Directive(moving(Position::Abort {
                            reason: Some(Template {
                                parts: vec![TemplatePart::Text(text.to_string()), TemplatePart::Expr(literal(text))],
                                span: Span::default(),
                            }),
                        })),
                        label: Some(text.to_string()),
                        span: Span::default(),
                    },
                    Branch {
                        guard: Vec::new(),
                        when: Vec::new(),
                        then: Then::Directive(moving(Position::GotoStep { flow: other, step: StepId::from_index(1) })),
                        label: None,
                        span: Span::default(),
                    },
                ];
            } else if step_index % 4 == 1 {
                step.next = Some(Next::End);
            } else if step_index % 4 == 2 {
                step.on_no_answer = Some(moving(Position::Goto { flow: other, data: Vec::new() }));
                step.collect = vec![field];
                step.auto = false;
                step.wait_ms = None;
            }
            steps.push(step);
        }
        flows.push(Flow {
            name: flow_name.to_string(),
            title: Some(HOSTILE.get(flow_index + 8).copied().unwrap_or("t").to_string()),
            when: vec![HOSTILE.get(flow_index + 10).copied().unwrap_or("w").to_string()],
            guard: vec![equals(FieldId::from_index(flow_index), "x")],
            default: flow_index == 0,
            workflow: false,
            requires: Vec::new(),
            requires_spans: Vec::new(),
            optional: Vec::new(),
            fresh: Vec::new(),
            keep: Vec::new(),
            keep_spans: Vec::new(),
            rules: Vec::new(),
            on_enter: Vec::new(),
            on_complete: Vec::new(),
            complete_next: Some(other),
            steps,
            span: Span::default(),
            incomplete: false,
            schedule: None,
        });
    }
    let signals = HOSTILE
        .iter()
        .take(3)
        .enumerate()
        .map(|(index, name)| Signal {
            name: name.to_string(),
            when: vec![HOSTILE.get(index + 9).copied().unwrap_or("w").to_string()],
            guard: vec![equals(FieldId::from_index(index), "y")],
            phase: [Phase::Pre, Phase::Post, Phase::Both].get(index).copied().unwrap_or(Phase::Pre),
            behavior: Behavior::Always,
            extract: Vec::new(),
            then: Some(*moving(match index {
                0 => Position::Goto { flow: FlowId(1), data: Vec::new() },
                1 => Position::Reset,
                _ => Position::Abort { reason: None },
            })),
            span: Span::default(),
        })
        .collect();
    Program {
        agent: Agent {
            name: Some("end".to_string()),
            identity: None,
            rules: Vec::new(),
            limits: Default::default(),
            history: Default::default(),
        },
        fields,
        context: Vec::new(),
        tools: Vec::new(),
        signals,
        flows,
        default_flow: Some(FlowId(0)),
    }
}

fn equals(field: FieldId, text: &str) -> Expr {
    Expr {
        kind: ExprKind::Binary {
            op: BinaryOp::Eq,
            left: Box::new(Expr { kind: ExprKind::Field { field }, ty: Type::String, span: Span::default() }),
            right: Box::new(literal(text)),
        },
        ty: Type::Bool,
        span: Span::default(),
    }
}

fn moving(position: Position) -> Box<Directive> {
    Box::new(Directive { position: Some(position), ..Directive::default() })
}

/// A line without its double-quoted strings; in DOT a backslash escapes
/// the next character inside one.
fn outside_quotes(line: &str, backslash_escapes: bool) -> String {
    let mut outside = String::new();
    let mut quoted = false;
    let mut characters = line.chars();
    while let Some(character) = characters.next() {
        match character {
            '\\' if quoted && backslash_escapes => {
                characters.next();
            }
            '"' => quoted = !quoted,
            other if !quoted => outside.push(other),
            _ => {}
        }
    }
    outside
}

#[test]
fn hostile_text_never_reaches_the_syntax() {
    let program = hostile_program();
    let mermaid = render(&program, None, Format::Mermaid);
    let dot = render(&program, None, Format::Dot);
    // User text lives only inside quoted labels: outside the quotes a line
    // holds generated ids, arrows and keywords.
    for (format, text) in [("mermaid", &mermaid), ("dot", &dot)] {
        for line in text.lines() {
            let outside = outside_quotes(line, format == "dot");
            for marker in ["bold", "markdown", "naïve", "🚀", "back", "lines", "now"] {
                assert!(!outside.contains(marker), "{format}: `{marker}` outside a label: {line}");
            }
        }
    }
    assert!(!mermaid.contains('\r') && !mermaid.contains('\t'));
    assert!(!dot.contains('\r') && !dot.contains('\t'));
}
