//! Ids: the first declaration of each name is kept, later ones are
//! `duplicate_id`; a name that is not an id, or is a reserved word, is
//! `invalid_id`.

use super::*;

impl Lowerer {
    /// Keeps the first declaration of each name, reporting later ones as
    /// `duplicate_id` and bad names as `invalid_id`.
    pub(super) fn unique<'a, T>(
        &mut self,
        decls: &'a [T],
        name_of: impl Fn(&T) -> &ast::Name,
        kind: IdKind,
    ) -> Vec<&'a T> {
        self.unique_indices(decls, name_of, kind).into_iter().filter_map(|index| decls.get(index)).collect()
    }

    /// [`Self::unique`], as the indices of the declarations kept.
    pub(super) fn unique_indices<T>(
        &mut self,
        decls: &[T],
        name_of: impl Fn(&T) -> &ast::Name,
        kind: IdKind,
    ) -> Vec<usize> {
        let mut seen: HashMap<&str, Span> = HashMap::with_capacity(decls.len());
        let mut kept = Vec::with_capacity(decls.len());
        for (index, decl) in decls.iter().enumerate() {
            let name = name_of(decl);
            self.check_id(name, kind);
            if let Some(first) = seen.get(name.value.as_str()) {
                self.report(IdError::DuplicateId { kind, name: name.value.clone(), span: name.span, first: *first });
                continue;
            }
            seen.insert(&name.value, name.span);
            kept.push(index);
        }
        kept
    }

    pub(super) fn check_id(&mut self, name: &ast::Name, kind: IdKind) {
        let text = name.value.as_str();
        let well_formed = text.chars().next().is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
            && text.chars().all(|character| character.is_ascii_alphanumeric() || character == '_');
        if !well_formed {
            self.report(IdError::MalformedId { kind, name: text.to_string(), span: name.span });
        } else if RESERVED_WORDS.contains(&text) {
            self.report(IdError::ReservedWord { kind, name: text.to_string(), span: name.span });
        }
    }

    /// Steps that get an id, by index: the first of each name, reporting the
    /// rest.
    pub(super) fn step_indices(&mut self, flow: &ast::FlowDecl) -> Vec<usize> {
        let mut seen: HashMap<&str, Span> = HashMap::with_capacity(flow.steps.len());
        let mut kept = Vec::with_capacity(flow.steps.len());
        for (index, step) in flow.steps.iter().enumerate() {
            let Some(id) = &step.id else {
                continue;
            };
            self.check_id(id, IdKind::Step);
            if let Some(first) = seen.get(id.value.as_str()) {
                self.report(IdError::DuplicateStep {
                    flow: flow.name.value.clone(),
                    name: id.value.clone(),
                    span: id.span,
                    first: *first,
                });
                continue;
            }
            seen.insert(&id.value, id.span);
            kept.push(index);
        }
        kept
    }
}
