//! What the offline provider remembers between calls: the analysis of the
//! program's own texts (flow descriptions, questions, field examples, enum
//! values, unit words) and compiled patterns. These texts come from the
//! compiled program and repeat on every turn, so each is tokenized and
//! stemmed once; the cache grows with the program, never with messages.
//! Values are shared (`Arc`) so a call can hold several at once.

use crate::llm::FieldSpec;
use crate::read::patterns::Patterns;
use crate::read::text::{stem, terms, word_sequence};
use std::collections::HashMap;
use std::sync::Arc;

/// A phrase of the program (an example, an enum value) as words.
pub(crate) struct Phrase {
    /// Lowercase words, symbols dropped.
    pub(crate) words: Vec<String>,
    /// The same words stemmed.
    pub(crate) stems: Vec<String>,
}

/// A field's unit words (see `numbers`), remembered with the description
/// they were computed from.
struct Units {
    description: Option<String>,
    units: Arc<[(String, u8)]>,
}

#[derive(Default)]
pub(crate) struct Cache {
    pub(crate) patterns: Patterns,
    terms: HashMap<String, Arc<[String]>>,
    phrases: HashMap<String, Arc<Phrase>>,
    units: HashMap<String, Units>,
}

impl Cache {
    /// The terms of a description (`when`, `title`, example).
    pub(crate) fn terms(&mut self, text: &str) -> Arc<[String]> {
        if let Some(found) = self.terms.get(text) {
            return found.clone();
        }
        let computed: Arc<[String]> = terms(text).into();
        self.terms.insert(text.to_string(), computed.clone());
        computed
    }

    pub(crate) fn phrase(&mut self, text: &str) -> Arc<Phrase> {
        if let Some(found) = self.phrases.get(text) {
            return found.clone();
        }
        let words = word_sequence(text);
        let stems = words.iter().map(|word| stem(word)).collect();
        let computed = Arc::new(Phrase { words, stems });
        self.phrases.insert(text.to_string(), computed.clone());
        computed
    }

    /// A numeric field's unit stems, computed by `compute` when the field
    /// is new or its description changed.
    pub(crate) fn units(
        &mut self,
        field: &FieldSpec,
        compute: impl FnOnce(&FieldSpec) -> Vec<(String, u8)>,
    ) -> Arc<[(String, u8)]> {
        match self.units.get(&field.name) {
            Some(known) if known.description == field.description => known.units.clone(),
            _ => {
                let units: Arc<[(String, u8)]> = compute(field).into();
                let entry = Units { description: field.description.clone(), units: units.clone() };
                self.units.insert(field.name.clone(), entry);
                units
            }
        }
    }
}
