//! Tests of reading YAML text into the tree: what it keeps, and what it
//! refuses with a `syntax` diagnostic.

use super::*;

fn read_ok(text: &str) -> Tree<'_> {
    let mut diagnostics = Vec::new();
    let tree = read(text, &mut diagnostics, None);
    assert!(diagnostics.is_empty(), "{diagnostics:#?}");
    tree.expect("a tree")
}

fn read_error(text: &str) -> Diagnostic {
    let mut diagnostics = Vec::new();
    assert!(read(text, &mut diagnostics, None).is_none());
    assert_eq!(diagnostics.len(), 1, "{diagnostics:#?}");
    diagnostics.remove(0)
}

#[test]
fn plain_scalars_resolve_by_the_core_schema() {
    let cases = [
        ("", Resolved::Null),
        ("~", Resolved::Null),
        ("null", Resolved::Null),
        ("NULL", Resolved::Null),
        ("true", Resolved::Bool(true)),
        ("False", Resolved::Bool(false)),
        ("42", Resolved::Int(42)),
        ("-7", Resolved::Int(-7)),
        ("+7", Resolved::Int(7)),
        ("0x1F", Resolved::Int(31)),
        ("0o17", Resolved::Int(15)),
        ("99999999999999999999", Resolved::BigInt),
        ("1.5", Resolved::Float(1.5)),
        ("-.5", Resolved::Float(-0.5)),
        ("1e3", Resolved::Float(1000.0)),
        ("1.", Resolved::Float(1.0)),
        ("-.inf", Resolved::Float(f64::NEG_INFINITY)),
    ];
    for (text, expected) in cases {
        assert_eq!(resolve_plain(text), expected, "{text:?}");
    }
    for text in ["yes", "no", "on", "60s", "1:30", "0x", "0xG", "1e", ".", "-", "nulls", "2024-01-05", "1_000"] {
        assert_eq!(resolve_plain(text), Resolved::Str(text), "{text:?}");
    }
    assert!(matches!(resolve_plain(".nan"), Resolved::Float(value) if value.is_nan()));
}

#[test]
fn quoted_and_tagged_scalars_are_strings() {
    let tree = read_ok("[\"true\", '42', !!str null, 42]");
    let kinds: Vec<Resolved<'_>> = tree
        .items(tree.root())
        .iter()
        .map(|item| match &tree.node(*item).kind {
            NodeKind::Scalar(scalar) => scalar.resolve(),
            _ => panic!("a scalar"),
        })
        .collect();
    assert_eq!(kinds, [Resolved::Str("true"), Resolved::Str("42"), Resolved::Str("null"), Resolved::Int(42)]);
}

#[test]
fn scalar_spans_cover_quotes_and_verbatim_spans_the_value() {
    let text = "a: \"x y\"\nb: &anchor plain\nc: 'it''s'\nd: |\n  block\n";
    let tree = read_ok(text);
    let values: Vec<(Span, Option<Span>)> = tree
        .entries(tree.root())
        .map(|(_, value)| match &tree.node(value).kind {
            NodeKind::Scalar(scalar) => (tree.node(value).span, scalar.verbatim),
            _ => panic!("a scalar"),
        })
        .collect();
    assert_eq!(values[0], (Span::new(3, 8), Some(Span::new(4, 7))));
    // The anchor is not part of the value's span.
    assert_eq!(values[1], (Span::new(20, 25), Some(Span::new(20, 25))));
    // `''` is an escape: the value is not a copy of the source.
    assert_eq!(values[2].1, None);
    assert_eq!(values[3].1, None);
}

#[test]
fn collections_keep_every_entry_in_order() {
    let text = "k: 1\nk: 2\nlist: [a, {b: c}]\n";
    let tree = read_ok(text);
    let keys: Vec<&str> = tree
        .entries(tree.root())
        .map(|(key, _)| match &tree.node(key).kind {
            NodeKind::Scalar(scalar) => &*scalar.value,
            _ => panic!("a scalar key"),
        })
        .collect();
    assert_eq!(keys, ["k", "k", "list"]);
    let (_, list) = tree.entries(tree.root()).nth(2).expect("list entry");
    assert_eq!(tree.node(list).span, Span::new(16, 27));
    assert_eq!(tree.items(list).len(), 2);
    assert_eq!(tree.node(tree.root()).span, Span::new(0, 27));
}

#[test]
fn character_indices_become_byte_offsets() {
    let text = "é: ü\n".repeat(40) + "last: ok\n";
    let tree = read_ok(&text);
    let (key, value) = tree.entries(tree.root()).last().expect("an entry");
    assert_eq!(tree.node(key).span.range(), text.find("last").map(|start| start..start + 4).expect("last"));
    assert_eq!(&text[tree.node(value).span.range()], "ok");
}

#[test]
fn an_alias_to_a_long_text_counts_its_length() {
    let long = "x".repeat(100_000);
    let aliases = vec!["*a"; 100].join(", ");
    let text = format!("a: &a {long}\nb: [{aliases}]\n");
    let diagnostic = read_error(&text);
    assert_eq!(diagnostic.message, "aliases expand to more than 100000 nodes");
}

/// The flow names the sink received, in order, and what became of each
/// body in the finished tree.
fn handed_over(text: &str) -> (Vec<String>, Vec<bool>) {
    let mut names = Vec::new();
    let mut sink = |body: FlowBody<'_, '_>| {
        let NodeKind::Scalar(key) = &body.tree.node(body.key).kind else { panic!("a scalar key") };
        assert!(matches!(body.tree.node(body.value).kind, NodeKind::Mapping(_)), "a mapping body");
        names.push(key.value.to_string());
        u32::try_from(names.len() - 1).expect("few flows")
    };
    let mut diagnostics = Vec::new();
    let tree = read(text, &mut diagnostics, Some(&mut sink)).expect("a tree");
    assert!(diagnostics.is_empty(), "{diagnostics:#?}");
    let (_, flows) = tree
        .entries(tree.root())
        .find(|(key, _)| matches!(&tree.node(*key).kind, NodeKind::Scalar(s) if s.value == "flows"))
        .expect("flows");
    let taken = tree.entries(flows).map(|(_, body)| matches!(tree.node(body).kind, NodeKind::Taken(_))).collect();
    (names, taken)
}

#[test]
fn flow_bodies_are_handed_over_unless_an_anchor_may_need_them() {
    let text = "agent: { name: A }\nflows:\n  a: { steps: [] }\n  b: &kept { steps: [] }\n  c: { steps: [&inner x] }\n  d: *kept\n  e: 3\n  f:\n    steps: [*inner]\n";
    let (names, taken) = handed_over(text);
    assert_eq!(names, ["a", "f"]);
    assert_eq!(taken, [true, false, false, false, false, true]);
    // Only the root's first `flows` section, and only mappings under it.
    let (names, _) = handed_over("flows:\n  a: {}\nsignals:\n  s: { when: x }\nflows:\n  b: {}\n");
    assert_eq!(names, ["a"]);
    let (names, _) = handed_over("agent:\n  flows:\n    a: {}\nflows: {}\n");
    assert!(names.is_empty());
}

#[test]
fn aliases_share_their_anchor_node() {
    let tree = read_ok("a: &x [1, 2]\nb: *x\n");
    let values: Vec<NodeId> = tree.entries(tree.root()).map(|(_, value)| value).collect();
    assert_eq!(values[0], values[1]);
}

#[test]
fn alias_depth_counts_toward_the_limit() {
    let deep = format!("{}1{}", "[".repeat(100), "]".repeat(100));
    let text = format!("a: &deep {deep}\nb: {}*deep{}\n", "[".repeat(40), "]".repeat(40));
    assert_eq!(read_error(&text).message, "YAML nesting is deeper than 128 levels");
}

#[test]
fn a_tab_after_a_colon_is_explained() {
    let diagnostic = read_error("a:\t1\n");
    assert_eq!(diagnostic.help.as_deref(), Some("YAML separates values with spaces: replace this tab with a space"));
    assert_eq!(diagnostic.primary_span(), Some(Span::new(2, 3)));
}

#[test]
fn a_tab_indented_continuation_line_is_the_cause() {
    let text = "a:\n  b: 1\n\tc: 2\n";
    let diagnostic = read_error(text);
    assert_eq!(diagnostic.message, "YAML indentation must use spaces, not tabs");
    assert_eq!(diagnostic.primary_span(), Some(Span::new(10, 11)));
}

#[test]
fn tab_lines_of_comments_are_not_indentation() {
    read_ok("a: 1\n\t# a comment\nb: 2\n");
}
