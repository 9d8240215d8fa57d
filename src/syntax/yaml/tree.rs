//! Reads YAML text into a span-carrying node tree (scalars, sequences and
//! mappings that keep every entry in order, duplicates included), refusing
//! with one `syntax` diagnostic what a program file must not hold: a
//! malformed document, tab indentation, a second document, nesting deeper
//! than [`MAX_DEPTH`], or aliases that expand past [`MAX_ALIAS_EXPANSION`].
//!
//! The tree is built from saphyr-parser events without recursion. Aliases
//! are not copied: an alias becomes a second reference to its anchor's node,
//! so the tree is a DAG whose expanded size is tracked and bounded while it
//! is read. Tags: `!!str` forces a string; the other core-schema tags
//! (`!!int`, `!!float`, `!!bool`, `!!null`, `!!seq`, `!!map`) are accepted and
//! ignored, since the value's own form decides its type; any other tag is
//! refused, because flowc gives it no meaning and silently dropping it could
//! change what the author meant.

use crate::diag::Diagnostic;
use crate::source::Span;
use crate::syntax::error::YamlError;
use saphyr_parser::{Event, Parser, ScalarStyle, ScanError, Tag};
use std::borrow::Cow;

/// How deep sequences and mappings may nest, aliases expanded. Every later
/// pass walks the tree recursively; this keeps them far from the stack limit.
pub const MAX_DEPTH: usize = 128;

/// How many nodes aliases may add once expanded, over the whole file. A
/// "billion laughs" document reaches this within a few lines and is refused.
/// A long scalar counts as one node per [`BYTES_PER_NODE`] bytes, so an
/// alias to a large text cannot multiply memory either.
pub const MAX_ALIAS_EXPANSION: u64 = 100_000;

const BYTES_PER_NODE: usize = 64;

/// An index into [`Tree`]'s nodes.
pub type NodeId = u32;

/// A read YAML document.
#[derive(Debug)]
pub struct Tree<'input> {
    nodes: Vec<Node<'input>>,
    /// Children of every collection, each collection's run contiguous:
    /// sequence items, or mapping keys and values interleaved.
    children: Vec<NodeId>,
    root: NodeId,
}

#[derive(Clone, Debug)]
pub struct Node<'input> {
    pub kind: NodeKind<'input>,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum NodeKind<'input> {
    Scalar(Scalar<'input>),
    Sequence(ChildRange),
    Mapping(ChildRange),
    /// A flow's body, handed to the [`FlowSink`] as soon as it was complete
    /// and then dropped from the tree; the number is what the sink returned.
    Taken(u32),
}

/// Receives each flow body of the top-level `flows` mapping the moment its
/// last event is read, and returns a number to remember it by. The reader
/// then drops the body's nodes, so the tree holds one flow at a time and
/// memory stays proportional to the largest flow, not to the file.
///
/// A body stays in the tree, and is not passed here, when an anchor is
/// defined in it or on it (a later alias may refer to it), when its key is
/// not a scalar, or when it is not a mapping.
pub type FlowSink<'sink, 'input> = &'sink mut dyn FnMut(FlowBody<'_, 'input>) -> u32;

/// A complete flow body, as the reader hands it to a [`FlowSink`].
pub struct FlowBody<'tree, 'input> {
    /// The tree as it is when the body ends: `key` and `value` are valid in it.
    pub tree: &'tree mut Tree<'input>,
    pub key: NodeId,
    pub value: NodeId,
    /// Where the body's own nodes and child runs start in `tree`.
    first_node: usize,
    first_child: usize,
    /// No alias in the body: it refers to no node outside itself.
    self_contained: bool,
}

impl<'input> FlowBody<'_, 'input> {
    /// Moves the body out of the tree being read into `into` (emptied
    /// first, its buffers reused), with the body as root and a copy of the
    /// key, so that it can be built on another thread while reading goes
    /// on; returns the key's id in it. Hands `into` back unchanged when an
    /// alias in the body refers to a node outside it.
    pub fn detach(&mut self, mut into: Tree<'input>) -> Result<(Tree<'input>, NodeId), Tree<'input>> {
        let offsets = u32::try_from(self.first_node).ok().zip(u32::try_from(self.first_child).ok());
        let key = self.tree.nodes.get(self.key as usize).cloned();
        let (Some((first_node, first_child)), Some(key), true) = (offsets, key, self.self_contained) else {
            return Err(into);
        };
        let rebase = |range: ChildRange| ChildRange { start: range.start - first_child, len: range.len };
        into.nodes.clear();
        into.children.clear();
        into.nodes.extend(self.tree.nodes.drain(self.first_node..).map(|node| match node.kind {
            NodeKind::Sequence(range) => Node { kind: NodeKind::Sequence(rebase(range)), span: node.span },
            NodeKind::Mapping(range) => Node { kind: NodeKind::Mapping(rebase(range)), span: node.span },
            _ => node,
        }));
        into.children.extend(self.tree.children.drain(self.first_child..).map(|id| id - first_node));
        into.root = self.value - first_node;
        let key_id = u32::try_from(into.nodes.len()).unwrap_or(u32::MAX);
        into.nodes.push(key);
        Ok((into, key_id))
    }
}

impl Tree<'_> {
    /// A tree with no nodes, for [`FlowBody::detach`] to fill.
    pub fn empty() -> Self {
        Tree { nodes: Vec::new(), children: Vec::new(), root: 0 }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct ChildRange {
    start: u32,
    len: u32,
}

#[derive(Clone, Debug)]
pub struct Scalar<'input> {
    pub value: Cow<'input, str>,
    pub style: ScalarStyle,
    /// Where `value` appears byte for byte in the file (between the quotes
    /// for a quoted scalar), when it does; `None` when escapes, folding or
    /// block indentation make the value differ from its source text.
    pub verbatim: Option<Span>,
    /// Tagged `!!str`: a string whatever its form.
    pub tagged_string: bool,
}

/// A scalar's value under the YAML 1.2 core schema.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Resolved<'a> {
    Null,
    Bool(bool),
    Int(i64),
    /// An integer that does not fit in 64 bits.
    BigInt,
    Float(f64),
    Str(&'a str),
}

impl Scalar<'_> {
    /// Quoted, block and `!!str` scalars are strings; a plain scalar is
    /// null, a boolean or a number when it is written as one.
    pub fn resolve(&self) -> Resolved<'_> {
        if self.style != ScalarStyle::Plain || self.tagged_string {
            return Resolved::Str(&self.value);
        }
        resolve_plain(&self.value)
    }

    /// An empty plain scalar: a key with no value (`if:`), or an empty item.
    pub fn is_empty_plain(&self) -> bool {
        self.style == ScalarStyle::Plain && !self.tagged_string && self.value.is_empty()
    }
}

/// What [`Tree::node`] returns for an id it does not hold; ids come from the
/// tree itself, so this is never reached, but it keeps lookups total.
static MISSING_NODE: Node<'static> = Node {
    kind: NodeKind::Scalar(Scalar {
        value: Cow::Borrowed(""),
        style: ScalarStyle::Plain,
        verbatim: None,
        tagged_string: false,
    }),
    span: Span::new(0, 0),
};

impl<'input> Tree<'input> {
    pub fn root(&self) -> NodeId {
        self.root
    }

    pub fn node(&self, id: NodeId) -> &Node<'input> {
        self.nodes.get(id as usize).unwrap_or(&MISSING_NODE)
    }

    fn run(&self, range: ChildRange) -> &[NodeId] {
        let start = range.start as usize;
        self.children.get(start..start + range.len as usize).unwrap_or(&[])
    }

    /// The items of a sequence (empty for any other node).
    pub fn items(&self, id: NodeId) -> &[NodeId] {
        match self.node(id).kind {
            NodeKind::Sequence(range) => self.run(range),
            _ => &[],
        }
    }

    /// The `(key, value)` entries of a mapping in source order (none for any
    /// other node).
    pub fn entries(&self, id: NodeId) -> impl Iterator<Item = (NodeId, NodeId)> + '_ {
        let run = match self.node(id).kind {
            NodeKind::Mapping(range) => self.run(range),
            _ => &[],
        };
        run.chunks_exact(2).filter_map(|pair| match pair {
            [key, value] => Some((*key, *value)),
            _ => None,
        })
    }

    /// The number of entries of a mapping.
    pub fn entry_count(&self, id: NodeId) -> usize {
        match self.node(id).kind {
            NodeKind::Mapping(range) => range.len as usize / 2,
            _ => 0,
        }
    }
}

/// Reads one YAML document. `None` when it cannot be read; the reason is in
/// `diagnostics`. A tree may also come with diagnostics (a refused tag, tab
/// indentation the YAML reader tolerated).
pub fn read<'input>(
    text: &'input str,
    diagnostics: &mut Vec<Diagnostic>,
    flow_sink: Option<FlowSink<'_, 'input>>,
) -> Option<Tree<'input>> {
    let mut reader = Reader::new(text);
    let outcome = reader.run(diagnostics, flow_sink);
    let tab_reported = reader.report_tab_indentation(outcome.as_ref().err(), diagnostics);
    match outcome {
        Ok(root) => Some(Tree { nodes: reader.nodes, children: reader.children, root }),
        Err(ReadError::Scan(error)) => {
            // A tab on the failing line is the cause; saphyr's wording for
            // it ("found a tab", "did not find expected key") is less clear.
            if !tab_reported {
                diagnostics.push(reader.scan_error_diagnostic(&error));
            }
            None
        }
        Err(ReadError::Refused(diagnostic)) => {
            diagnostics.push(*diagnostic);
            None
        }
    }
}

enum ReadError {
    Scan(ScanError),
    Refused(Box<Diagnostic>),
}

/// A sequence or mapping whose end event has not arrived yet.
struct OpenCollection {
    is_mapping: bool,
    start: u32,
    /// A flow collection (`[...]`, `{...}`) ends at its closing bracket; a
    /// block one at its last child.
    is_flow: bool,
    anchor: usize,
    /// Where this collection's children start in `Reader::pending`.
    first_pending: usize,
    /// `Reader::nodes` and `Reader::children` when it opened: its subtree
    /// is everything after.
    first_node: usize,
    first_child: usize,
    /// `Reader::anchors_defined` and `Reader::aliases_used` when it opened.
    anchors_before: usize,
    aliases_before: usize,
    /// Nodes in the collection with aliases expanded, itself included.
    expanded_size: u64,
    /// Levels below it, aliases expanded.
    height: usize,
    end: u32,
}

/// What an anchor refers to, once its node is complete.
#[derive(Clone, Copy)]
struct AnchoredNode {
    id: NodeId,
    expanded_size: u64,
    height: usize,
}

struct Reader<'input> {
    text: &'input str,
    offsets: CharOffsets<'input>,
    nodes: Vec<Node<'input>>,
    children: Vec<NodeId>,
    pending: Vec<NodeId>,
    open: Vec<OpenCollection>,
    /// Indexed by saphyr's anchor id; `None` while the anchored node is open.
    anchors: Vec<Option<AnchoredNode>>,
    /// How many anchors have been defined, and aliases used, so far.
    anchors_defined: usize,
    aliases_used: usize,
    alias_expansion: u64,
    /// Scalars spanning several lines: a tab at the start of one of their
    /// lines is content, not indentation. Collected only when the text has
    /// a tab.
    multiline_scalars: Vec<Span>,
    has_tab: bool,
}

impl<'input> Reader<'input> {
    fn new(text: &'input str) -> Reader<'input> {
        Reader {
            text,
            offsets: CharOffsets::new(text),
            nodes: Vec::new(),
            children: Vec::new(),
            pending: Vec::new(),
            open: Vec::new(),
            anchors: Vec::new(),
            anchors_defined: 0,
            aliases_used: 0,
            alias_expansion: 0,
            multiline_scalars: Vec::new(),
            has_tab: text.contains('\t'),
        }
    }

    fn run(
        &mut self,
        diagnostics: &mut Vec<Diagnostic>,
        mut flow_sink: Option<FlowSink<'_, 'input>>,
    ) -> Result<NodeId, ReadError> {
        let mut parser = Parser::new_from_str(self.text);
        let mut root: Option<NodeId> = None;
        let mut documents = 0usize;
        let mut second_document_start: Option<Span> = None;
        while let Some(next) = parser.next_event() {
            let (event, yaml_span) = next.map_err(ReadError::Scan)?;
            let span = self.offsets.span(yaml_span);
            match event {
                Event::StreamEnd => break,
                Event::Nothing | Event::StreamStart | Event::DocumentEnd => {}
                Event::DocumentStart(_) => {
                    documents += 1;
                    if documents > 1 {
                        second_document_start = Some(span);
                    }
                }
                Event::Scalar(value, style, anchor, tag) => {
                    let top_level_empty = self.open.is_empty()
                        && style == ScalarStyle::Plain
                        && value.is_empty()
                        && anchor == 0
                        && tag.is_none();
                    if let Some(start) = second_document_start {
                        // `a: 1\n---\n` holds a second, empty document: nothing to lose.
                        if top_level_empty {
                            continue;
                        }
                        return Err(second_document(start, span));
                    }
                    let tagged_string = self.check_tag(tag.as_deref(), span, diagnostics);
                    let weight = scalar_weight(&value);
                    let id = self.push_scalar(value, style, span, tagged_string);
                    self.complete(id, anchor, weight, 0, &mut root);
                }
                Event::SequenceStart(anchor, ref tag) | Event::MappingStart(anchor, ref tag) => {
                    if let Some(start) = second_document_start {
                        return Err(second_document(start, span));
                    }
                    self.check_tag(tag.as_deref(), span, diagnostics);
                    let is_mapping = matches!(event, Event::MappingStart(..));
                    self.open_collection(is_mapping, anchor, span)?;
                }
                Event::SequenceEnd | Event::MappingEnd => {
                    self.close_collection(span, &mut root, &mut flow_sink);
                }
                Event::Alias(anchor) => self.alias(anchor, span, &mut root)?,
            }
        }
        root.ok_or_else(|| refused(YamlError::NoDocument))
    }

    fn open_collection(&mut self, is_mapping: bool, anchor: usize, span: Span) -> Result<(), ReadError> {
        if self.open.len() >= MAX_DEPTH {
            return Err(too_deep(span));
        }
        if anchor > 0 {
            self.set_anchor(anchor, None);
        }
        self.open.push(OpenCollection {
            is_mapping,
            start: span.start,
            is_flow: self.text.get(span.range()).is_some_and(|source| source.trim_end().ends_with(['[', '{'])),
            anchor,
            first_pending: self.pending.len(),
            first_node: self.nodes.len(),
            first_child: self.children.len(),
            anchors_before: self.anchors_defined,
            aliases_before: self.aliases_used,
            expanded_size: 1,
            height: 0,
            end: span.end,
        });
        Ok(())
    }

    fn close_collection(
        &mut self,
        end_span: Span,
        root: &mut Option<NodeId>,
        flow_sink: &mut Option<FlowSink<'_, 'input>>,
    ) {
        let Some(collection) = self.open.pop() else {
            return;
        };
        let first_child = u32::try_from(self.children.len()).unwrap_or(u32::MAX);
        let run = self.pending.get(collection.first_pending..).unwrap_or(&[]);
        self.children.extend_from_slice(run);
        let child_count = u32::try_from(run.len()).unwrap_or(u32::MAX);
        self.pending.truncate(collection.first_pending);
        let range = ChildRange { start: first_child, len: child_count };
        // saphyr's span for a closing bracket may run on over the spaces after it.
        let end = if collection.is_flow { end_span.start.saturating_add(1).min(end_span.end) } else { collection.end };
        let kind = if collection.is_mapping { NodeKind::Mapping(range) } else { NodeKind::Sequence(range) };
        let span = Span::new(collection.start, end.max(collection.start));
        let mut id = self.push_node(Node { kind, span });
        if let Some(flow_sink) = flow_sink.as_mut()
            && let Some(key) = self.flow_key(&collection)
        {
            id = self.hand_over(&collection, key, id, flow_sink);
        }
        self.complete(id, collection.anchor, collection.expanded_size, collection.height + 1, root);
    }

    /// The key of `collection` when it has just closed as a flow body that
    /// can be handed to the [`FlowSink`]: a mapping that is the value of a
    /// scalar key in the mapping under the root's first `flows` key, with no
    /// anchor on or in it.
    fn flow_key(&self, collection: &OpenCollection) -> Option<NodeId> {
        let [root, flows] = self.open.as_slice() else {
            return None;
        };
        if !(collection.is_mapping && flows.is_mapping && root.is_mapping)
            || collection.anchor != 0
            || self.anchors_defined != collection.anchors_before
        {
            return None;
        }
        // An open mapping's pending children alternate key, value: an odd
        // count means the last one is the key whose value is being read.
        let root_pending = self.pending.get(root.first_pending..flows.first_pending).unwrap_or(&[]);
        let flows_pending = self.pending.get(flows.first_pending..).unwrap_or(&[]);
        let waiting_key = |pending: &[NodeId]| (pending.len() % 2 == 1).then(|| pending.last().copied()).flatten();
        let is_scalar =
            |id: NodeId| matches!(self.nodes.get(id as usize), Some(Node { kind: NodeKind::Scalar(_), .. }));
        let key_text = |id: NodeId| match self.nodes.get(id as usize).map(|node| &node.kind) {
            Some(NodeKind::Scalar(scalar)) => Some(&*scalar.value),
            _ => None,
        };
        let section = waiting_key(root_pending)?;
        let root_keys = root_pending.iter().step_by(2);
        // The builder reads the first `flows` section; a repeated one is
        // reported there and left unread, so it must not be built here.
        let first_flows_key = root_keys.copied().find(|key| key_text(*key) == Some("flows"));
        if first_flows_key != Some(section) {
            return None;
        }
        let key = waiting_key(flows_pending)?;
        is_scalar(key).then_some(key)
    }

    /// Passes a complete flow body to the sink, then replaces its subtree
    /// with one [`NodeKind::Taken`] node, which is returned.
    fn hand_over(
        &mut self,
        collection: &OpenCollection,
        key: NodeId,
        body: NodeId,
        flow_sink: &mut dyn FnMut(FlowBody<'_, 'input>) -> u32,
    ) -> NodeId {
        let mut tree =
            Tree { nodes: std::mem::take(&mut self.nodes), children: std::mem::take(&mut self.children), root: body };
        let span = tree.node(body).span;
        let taken = flow_sink(FlowBody {
            tree: &mut tree,
            key,
            value: body,
            first_node: collection.first_node,
            first_child: collection.first_child,
            self_contained: self.aliases_used == collection.aliases_before,
        });
        self.nodes = tree.nodes;
        self.children = tree.children;
        self.nodes.truncate(collection.first_node);
        self.children.truncate(collection.first_child);
        self.push_node(Node { kind: NodeKind::Taken(taken), span })
    }

    /// Records a finished node: under its anchor, and as a child of the
    /// innermost open collection (or as the root).
    fn complete(&mut self, id: NodeId, anchor: usize, expanded_size: u64, height: usize, root: &mut Option<NodeId>) {
        if anchor > 0 {
            self.set_anchor(anchor, Some(AnchoredNode { id, expanded_size, height }));
        }
        let end = self.node_end(id);
        self.add_child(id, expanded_size, height, end, root);
    }

    fn add_child(&mut self, id: NodeId, expanded_size: u64, height: usize, end: u32, root: &mut Option<NodeId>) {
        match self.open.last_mut() {
            Some(parent) => {
                self.pending.push(id);
                parent.expanded_size = parent.expanded_size.saturating_add(expanded_size);
                parent.height = parent.height.max(height);
                parent.end = parent.end.max(end);
            }
            None => *root = Some(id),
        }
    }

    fn node_end(&self, id: NodeId) -> u32 {
        self.nodes.get(id as usize).map_or(0, |node| node.span.end)
    }

    fn alias(&mut self, anchor: usize, span: Span, root: &mut Option<NodeId>) -> Result<(), ReadError> {
        let Some(target) = self.anchors.get(anchor).copied().flatten() else {
            return Err(refused(YamlError::AliasInsideAnchor { span }));
        };
        if self.open.len() + target.height > MAX_DEPTH {
            return Err(too_deep(span));
        }
        self.aliases_used += 1;
        self.alias_expansion = self.alias_expansion.saturating_add(target.expanded_size);
        if self.alias_expansion > MAX_ALIAS_EXPANSION {
            return Err(refused(YamlError::AliasExpansion { span, limit: MAX_ALIAS_EXPANSION }));
        }
        // The alias's span is where it is used; the shared node keeps the
        // anchor's span, which is where its content is written.
        self.add_child(target.id, target.expanded_size, target.height, span.end, root);
        Ok(())
    }

    fn set_anchor(&mut self, anchor: usize, node: Option<AnchoredNode>) {
        self.anchors_defined += 1;
        if self.anchors.len() <= anchor {
            self.anchors.resize(anchor + 1, None);
        }
        if let Some(slot) = self.anchors.get_mut(anchor) {
            *slot = node;
        }
    }

    fn push_node(&mut self, node: Node<'input>) -> NodeId {
        let id = u32::try_from(self.nodes.len()).unwrap_or(u32::MAX);
        self.nodes.push(node);
        id
    }

    fn push_scalar(&mut self, value: Cow<'input, str>, style: ScalarStyle, span: Span, tagged_string: bool) -> NodeId {
        let verbatim = verbatim_span(self.text, &value, style, span);
        // The span starts at the scalar itself, not at an anchor or tag before it.
        let span = match (verbatim, style) {
            (Some(inner), ScalarStyle::Plain) => inner,
            (Some(inner), ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted) => {
                Span::new(inner.start.saturating_sub(1), span.end)
            }
            _ => span,
        };
        if self.has_tab && self.text.get(span.range()).is_some_and(|source| source.contains('\n')) {
            self.multiline_scalars.push(span);
        }
        self.push_node(Node { kind: NodeKind::Scalar(Scalar { value, style, verbatim, tagged_string }), span })
    }

    /// Reports a tag flowc does not accept; returns whether it is `!!str`.
    fn check_tag(&self, tag: Option<&Tag>, span: Span, diagnostics: &mut Vec<Diagnostic>) -> bool {
        let Some(tag) = tag else {
            return false;
        };
        let core_suffix = tag.is_yaml_core_schema().then_some(tag.suffix.as_str());
        match core_suffix {
            Some("str") => true,
            Some("int" | "float" | "bool" | "null" | "seq" | "map") => false,
            _ => {
                diagnostics.push(YamlError::UnsupportedTag { tag: tag.to_string(), span }.into());
                false
            }
        }
    }

    /// Reports the first line indented with a tab, unless the tab is content
    /// of a multi-line scalar. When the YAML reader failed, only a tab up to
    /// the line after the failure counts, as its likely cause. Returns
    /// whether a tab was reported.
    fn report_tab_indentation(&self, failure: Option<&ReadError>, diagnostics: &mut Vec<Diagnostic>) -> bool {
        if !self.has_tab {
            return false;
        }
        let failure_line_end = match failure {
            Some(ReadError::Scan(error)) => {
                let offset = self.offsets.byte_offset(error.marker().index()) as usize;
                Some(end_of_next_line(self.text, offset))
            }
            Some(ReadError::Refused(_)) | None => None,
        };
        // Tabs and multi-line scalars both come in file order: one merge pass.
        let mut scalars = self.multiline_scalars.iter().peekable();
        let tab = leading_tabs(self.text).find(|tab| {
            while scalars.next_if(|scalar| scalar.end <= *tab).is_some() {}
            let in_scalar = scalars.peek().is_some_and(|scalar| scalar.start <= *tab);
            let before_failure = failure_line_end.is_none_or(|line_end| (*tab as usize) < line_end);
            !in_scalar && before_failure
        });
        let Some(tab) = tab else {
            return false;
        };
        diagnostics.push(YamlError::TabIndentation { span: Span::new(tab, tab + 1) }.into());
        true
    }

    fn scan_error_diagnostic(&self, error: &ScanError) -> Diagnostic {
        let mut start = self.offsets.byte_offset(error.marker().index());
        // saphyr reports a misplaced tab at the character after it.
        let after_tab = start > 0 && self.text.get(start as usize - 1..start as usize) == Some("\t");
        if after_tab {
            start -= 1;
        }
        let end = next_char_end(self.text, start);
        let span = Span::new(start, end);
        let at_tab = self.text.get(span.range()) == Some("\t");
        // saphyr scans ahead of the events it has produced, so on deep
        // `[[[[` its own nesting limit can trip before ours.
        if error.info() == "recursion limit exceeded" {
            return YamlError::TooDeep { span, limit: MAX_DEPTH }.into();
        }
        if error.info().contains("unknown anchor") {
            let name = alias_name_at(self.text, start as usize);
            return YamlError::UnknownAnchor { name: name.to_string(), span }.into();
        }
        YamlError::Invalid { info: error.info().to_string(), at_tab, span }.into()
    }
}

/// What a scalar counts for in the alias expansion budget.
fn scalar_weight(value: &str) -> u64 {
    u64::try_from(1 + value.len() / BYTES_PER_NODE).unwrap_or(u64::MAX)
}

fn refused(error: YamlError) -> ReadError {
    ReadError::Refused(Box::new(error.into()))
}

fn too_deep(span: Span) -> ReadError {
    refused(YamlError::TooDeep { span, limit: MAX_DEPTH })
}

fn second_document(document_start: Span, first_node: Span) -> ReadError {
    let span = if document_start.is_empty() { first_node } else { document_start };
    refused(YamlError::SecondDocument { span })
}

/// Where a scalar's value sits verbatim in the file, if it does. Anchors
/// and tags before the scalar are part of saphyr's span, so the value is
/// matched against the end of the span.
fn verbatim_span(text: &str, value: &str, style: ScalarStyle, span: Span) -> Option<Span> {
    let end = span.end as usize;
    let value_end = match style {
        ScalarStyle::Plain => end,
        ScalarStyle::SingleQuoted | ScalarStyle::DoubleQuoted => end.checked_sub(1)?,
        ScalarStyle::Literal | ScalarStyle::Folded => return None,
    };
    let value_start = value_end.checked_sub(value.len())?;
    if value_start < span.start as usize || text.get(value_start..value_end)? != value {
        return None;
    }
    if style != ScalarStyle::Plain {
        let quote = if style == ScalarStyle::SingleQuoted { "'" } else { "\"" };
        let opening = value_start.checked_sub(1)?;
        if text.get(opening..value_start)? != quote || text.get(value_end..end)? != quote {
            return None;
        }
    }
    Some(Span::from_range(value_start..value_end))
}

/// Offsets of the first tab in the leading white space of each line that
/// has content (a comment-only line is not indentation).
fn leading_tabs(text: &str) -> impl Iterator<Item = u32> + '_ {
    let mut line_start = 0usize;
    text.split_inclusive('\n').filter_map(move |line| {
        let start = line_start;
        line_start += line.len();
        let indentation_len = line.len() - line.trim_start_matches([' ', '\t']).len();
        let indentation = line.get(..indentation_len)?;
        let tab = indentation.find('\t')?;
        let content = line.get(indentation_len..)?.trim_end();
        if content.is_empty() || content.starts_with('#') {
            return None;
        }
        u32::try_from(start + tab).ok()
    })
}

/// The end of the line after the one holding `offset`: a tab there explains
/// a failure reported at the end of the line before (a plain scalar that
/// runs into a tab-indented continuation line).
fn end_of_next_line(text: &str, offset: usize) -> usize {
    let rest = text.get(offset..).unwrap_or("");
    let mut lines = rest.match_indices('\n').map(|(index, _)| offset + index);
    lines.nth(1).unwrap_or(text.len())
}

fn next_char_end(text: &str, offset: u32) -> u32 {
    let start = offset as usize;
    let width = text.get(start..).and_then(|rest| rest.chars().next()).map_or(0, char::len_utf8);
    u32::try_from(start + width).unwrap_or(offset)
}

/// The anchor name of the alias at `offset` (saphyr points at its `*`).
fn alias_name_at(text: &str, offset: usize) -> &str {
    let rest = text.get(offset..).unwrap_or("");
    let rest = rest.strip_prefix('*').unwrap_or(rest);
    let end =
        rest.find(|character: char| character.is_whitespace() || ",[]{}".contains(character)).unwrap_or(rest.len());
    rest.get(..end).unwrap_or("")
}

/// Converts saphyr's character indices to byte offsets: the identity for
/// ASCII text, else a walk from a checkpoint kept every
/// [`CHECKPOINT_EVERY`] characters.
struct CharOffsets<'input> {
    text: &'input str,
    is_ascii: bool,
    checkpoints: Vec<u32>,
}

const CHECKPOINT_EVERY: usize = 32;

impl<'input> CharOffsets<'input> {
    fn new(text: &'input str) -> CharOffsets<'input> {
        let is_ascii = text.is_ascii();
        let checkpoints = if is_ascii {
            Vec::new()
        } else {
            text.char_indices()
                .step_by(CHECKPOINT_EVERY)
                .map(|(offset, _)| u32::try_from(offset).unwrap_or(u32::MAX))
                .collect()
        };
        CharOffsets { text, is_ascii, checkpoints }
    }

    fn byte_offset(&self, char_index: usize) -> u32 {
        let text_len = self.text.len();
        let offset = if self.is_ascii {
            char_index.min(text_len)
        } else {
            match self.checkpoints.get(char_index / CHECKPOINT_EVERY) {
                Some(checkpoint) => {
                    let base = *checkpoint as usize;
                    let tail = self.text.get(base..).unwrap_or("");
                    tail.char_indices().nth(char_index % CHECKPOINT_EVERY).map_or(text_len, |(offset, _)| base + offset)
                }
                None => text_len,
            }
        };
        u32::try_from(offset).unwrap_or(u32::MAX)
    }

    fn span(&self, span: saphyr_parser::Span) -> Span {
        let start = self.byte_offset(span.start.index());
        let end = self.byte_offset(span.end.index());
        Span::new(start, end.max(start))
    }
}

/// YAML 1.2 core-schema resolution of a plain scalar.
pub fn resolve_plain(value: &str) -> Resolved<'_> {
    let Some(first) = value.bytes().next() else {
        return Resolved::Null;
    };
    // Most scalars are words; only these first characters can start a
    // null, a boolean or a number.
    if !matches!(first, b'0'..=b'9' | b'+' | b'-' | b'.' | b'~' | b'n' | b'N' | b't' | b'T' | b'f' | b'F') {
        return Resolved::Str(value);
    }
    match value {
        "~" | "null" | "Null" | "NULL" => return Resolved::Null,
        "true" | "True" | "TRUE" => return Resolved::Bool(true),
        "false" | "False" | "FALSE" => return Resolved::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Resolved::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return Resolved::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return Resolved::Float(f64::NAN),
        _ => {}
    }
    if let Some(resolved) = resolve_int(value) {
        return resolved;
    }
    if is_core_float(value) {
        if let Ok(float) = value.parse::<f64>() {
            return Resolved::Float(float);
        }
    }
    Resolved::Str(value)
}

fn resolve_int(value: &str) -> Option<Resolved<'_>> {
    let radix_digits = |prefix: &str, radix: u32| {
        value
            .strip_prefix(prefix)
            .filter(|digits| !digits.is_empty() && digits.chars().all(|digit| digit.is_digit(radix)))
            .map(|digits| i64::from_str_radix(digits, radix).map_or(Resolved::BigInt, Resolved::Int))
    };
    if let Some(resolved) = radix_digits("0x", 16).or_else(|| radix_digits("0o", 8)) {
        return Some(resolved);
    }
    let digits = value.strip_prefix(['-', '+']).unwrap_or(value);
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    Some(value.parse::<i64>().map_or(Resolved::BigInt, Resolved::Int))
}

/// `[-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?`
fn is_core_float(value: &str) -> bool {
    let bytes = value.as_bytes();
    let mut index = usize::from(matches!(bytes.first(), Some(b'-' | b'+')));
    let count_digits = |from: usize| bytes.iter().skip(from).take_while(|byte| byte.is_ascii_digit()).count();
    let integer_digits = count_digits(index);
    index += integer_digits;
    let mut fraction_digits = 0;
    if bytes.get(index) == Some(&b'.') {
        index += 1;
        fraction_digits = count_digits(index);
        index += fraction_digits;
    }
    if integer_digits == 0 && fraction_digits == 0 {
        return false;
    }
    if matches!(bytes.get(index), Some(b'e' | b'E')) {
        index += 1;
        if matches!(bytes.get(index), Some(b'-' | b'+')) {
            index += 1;
        }
        let exponent_digits = count_digits(index);
        if exponent_digits == 0 {
            return false;
        }
        index += exponent_digits;
    }
    index == bytes.len()
}

#[cfg(test)]
mod tests;
