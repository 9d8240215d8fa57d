//! What a message says to a yes/no question, above all to a confirmation
//! ("Shall I book Grand Hotel on 2026-12-04 for 2 guests?"), whose yes lets
//! a side effect happen. One lexicon, three readings:
//!
//! - [`certain`]: the answer code takes before any model is asked, only
//!   from a message that is nothing but an answer, from a short closed set
//!   of forms ("yes", "yes please", "no thanks", "go ahead", "cancel", …,
//!   case and punctuation aside). Anything else is left to the model.
//! - [`read`]: the fuller reading the offline model answers with, and the
//!   rule every model's yes to a confirmation must pass: a yes counts only
//!   when nothing in the message takes it back — no question, hesitation,
//!   condition, correction or "but", no refusal beside it. Otherwise the
//!   answer is [`Consent::Unclear`], with the words that made it so.
//! - [`polarity`]: the yes or no a span of words says at all (a model's
//!   evidence for a `bool`), `None` for neither or both.
//!
//! Words are matched whole, longest phrase first, so "changed my mind" is
//! a refusal and not a correction, and "that's correct" an assent while
//! "let me correct something" is a correction.

use super::text::{Kind, Token, tokenize};

/// What a message says to a yes/no question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Consent {
    /// An unqualified yes.
    Yes,
    /// A no.
    No,
    /// Neither a yes nor a no that can be acted on, and why.
    Unclear(Doubt),
    /// Nothing about the question at all (a value, a greeting).
    Silent,
}

/// Why an answer is not a clear yes or no: the kind of words, and the
/// words themselves as the message wrote them (lowercase).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Doubt {
    /// What kind of words made the answer unclear.
    pub kind: DoubtKind,
    /// Those words, as the message wrote them (lowercase).
    pub words: String,
}

/// The kinds of words that keep an answer from being a clear yes or no.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DoubtKind {
    /// A question mark, or a message that starts as a question.
    Question,
    /// "hang on", "not sure", "I don't know", "let me check", "maybe".
    Hesitation,
    /// "if", "unless", "as long as", "once", "when", "after".
    Condition,
    /// "wrong", "instead", "actually", "I meant", "correct something".
    Correction,
    /// "but", "although", "however" beside a yes.
    Contrast,
    /// A yes and a no in one message.
    Mixed,
    /// A yes with more than a yes beside it: a number, a name, a request
    /// ("yes, for 3 people", "yes, the Ritz", "yes, and add breakfast").
    /// What it adds may change what was asked; code cannot tell.
    MoreThanYes,
    /// A model said yes, but the message holds no assent.
    NoAssent,
    /// A model said no, but the message holds no refusal.
    NoRefusal,
}

impl Doubt {
    fn new(kind: DoubtKind, words: &str) -> Doubt {
        Doubt { kind, words: words.to_string() }
    }

    /// A model's yes with nothing in the message that says yes.
    pub fn no_assent() -> Doubt {
        Doubt::new(DoubtKind::NoAssent, "")
    }

    /// A model's no with nothing in the message that says no.
    pub fn no_refusal() -> Doubt {
        Doubt::new(DoubtKind::NoRefusal, "")
    }

    /// Why, for the trace: `"but" qualifies the answer`.
    pub fn reason(&self) -> String {
        let words = &self.words;
        match self.kind {
            DoubtKind::Question => match words.as_str() {
                "?" => "the message asks a question".to_string(),
                _ => format!("the message asks a question (\"{words}\")"),
            },
            DoubtKind::Hesitation => format!("\"{words}\" is a hesitation, not an answer"),
            DoubtKind::Condition => format!("\"{words}\" makes the answer conditional"),
            DoubtKind::Correction => format!("\"{words}\" corrects something"),
            DoubtKind::Contrast => format!("\"{words}\" qualifies the yes"),
            DoubtKind::Mixed => format!("the message says both yes and no (\"{words}\")"),
            DoubtKind::MoreThanYes => format!("\"{words}\" is more than a yes"),
            DoubtKind::NoAssent => "no words of the message say yes".to_string(),
            DoubtKind::NoRefusal => "no words of the message say no".to_string(),
        }
    }

    /// Why, for the user, as one short clause: "you asked a question".
    pub fn clause(&self) -> &'static str {
        match self.kind {
            DoubtKind::Question => "you asked a question",
            DoubtKind::Hesitation => "you did not sound sure",
            DoubtKind::Condition => "your answer came with a condition",
            DoubtKind::Correction => "you mentioned a correction",
            DoubtKind::Contrast => "your yes came with a \"but\"",
            DoubtKind::Mixed => "I read both a yes and a no",
            DoubtKind::MoreThanYes => "your yes came with more than a yes",
            DoubtKind::NoAssent => "I did not read a clear yes",
            DoubtKind::NoRefusal => "I did not read a clear no",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Assent,
    Refusal,
    Polite,
    Hesitation,
    Condition,
    Correction,
    Contrast,
}

/// The lexicon, every phrase in lowercase words as the tokenizer cuts them
/// (apostrophes stay inside words). Longest match wins; on equal length the
/// first listed.
const PHRASES: &[(Class, &[&str])] = &[
    // Refusal idioms that hold words of other classes.
    (Class::Refusal, &["changed", "my", "mind"]),
    (Class::Refusal, &["change", "my", "mind"]),
    (Class::Refusal, &["changed", "mind"]),
    (Class::Refusal, &["not", "interested"]),
    (Class::Refusal, &["no", "longer"]),
    (Class::Refusal, &["forget", "it"]),
    (Class::Refusal, &["never", "mind"]),
    (Class::Refusal, &["no", "way"]),
    (Class::Refusal, &["do", "not"]),
    (Class::Refusal, &["please", "don't"]),
    // Hesitations that hold refusal words.
    (Class::Hesitation, &["don't", "know"]),
    (Class::Hesitation, &["dont", "know"]),
    (Class::Hesitation, &["do", "not", "know"]),
    (Class::Hesitation, &["didn't", "know"]),
    (Class::Hesitation, &["don't", "understand"]),
    (Class::Hesitation, &["didn't", "understand"]),
    (Class::Hesitation, &["no", "idea"]),
    (Class::Hesitation, &["not", "sure"]),
    (Class::Hesitation, &["not", "yet"]),
    (Class::Hesitation, &["not", "now"]),
    (Class::Hesitation, &["rather", "not"]),
    (Class::Hesitation, &["i'd", "rather"]),
    (Class::Hesitation, &["hang", "on"]),
    (Class::Hesitation, &["hold", "on"]),
    (Class::Hesitation, &["let", "me"]),
    (Class::Hesitation, &["i", "have", "to"]),
    (Class::Hesitation, &["i", "need", "to"]),
    (Class::Hesitation, &["i", "should"]),
    (Class::Hesitation, &["i", "must"]),
    (Class::Hesitation, &["one", "moment"]),
    (Class::Hesitation, &["a", "moment"]),
    (Class::Hesitation, &["a", "sec"]),
    (Class::Hesitation, &["a", "second"]),
    (Class::Hesitation, &["second", "thoughts"]),
    (Class::Hesitation, &["wait"]),
    (Class::Hesitation, &["hmm"]),
    (Class::Hesitation, &["hmmm"]),
    (Class::Hesitation, &["hm"]),
    (Class::Hesitation, &["um"]),
    (Class::Hesitation, &["umm"]),
    (Class::Hesitation, &["uh"]),
    (Class::Hesitation, &["er"]),
    (Class::Hesitation, &["maybe"]),
    (Class::Hesitation, &["perhaps"]),
    (Class::Hesitation, &["possibly"]),
    (Class::Hesitation, &["probably"]),
    (Class::Hesitation, &["unsure"]),
    (Class::Hesitation, &["undecided"]),
    (Class::Hesitation, &["dunno"]),
    (Class::Hesitation, &["idk"]),
    (Class::Hesitation, &["yet"]),
    (Class::Hesitation, &["later"]),
    (Class::Hesitation, &["first"]),
    (Class::Hesitation, &["think"]),
    (Class::Hesitation, &["thinking"]),
    (Class::Hesitation, &["confused"]),
    (Class::Hesitation, &["confusing"]),
    (Class::Hesitation, &["check"]),
    (Class::Hesitation, &["ask"]),
    (Class::Hesitation, &["depends"]),
    (Class::Hesitation, &["repeat"]),
    // Conditions.
    (Class::Condition, &["as", "long", "as"]),
    (Class::Condition, &["only", "if"]),
    (Class::Condition, &["provided"]),
    (Class::Condition, &["assuming"]),
    (Class::Condition, &["depending"]),
    (Class::Condition, &["as", "soon", "as"]),
    (Class::Condition, &["so", "long", "as"]),
    (Class::Condition, &["on", "condition"]),
    (Class::Condition, &["if"]),
    (Class::Condition, &["unless"]),
    // A yes for later is a yes under a condition: "once you confirm the
    // price", "when it drops", "after I check".
    (Class::Condition, &["once"]),
    (Class::Condition, &["when"]),
    (Class::Condition, &["after"]),
    (Class::Condition, &["before"]),
    (Class::Condition, &["until"]),
    // Assents. "correct" is one only where it describes what was asked
    // ("that's correct", "all correct", or the first word); elsewhere it is
    // the verb of a correction ("I need to correct the date").
    (Class::Assent, &["that's", "all", "correct"]),
    (Class::Assent, &["that", "is", "correct"]),
    (Class::Assent, &["that's", "correct"]),
    (Class::Assent, &["thats", "correct"]),
    (Class::Assent, &["it's", "correct"]),
    (Class::Assent, &["is", "correct"]),
    (Class::Assent, &["all", "correct"]),
    (Class::Assent, &["that", "is", "right"]),
    (Class::Assent, &["that's", "right"]),
    (Class::Assent, &["thats", "right"]),
    (Class::Assent, &["all", "right"]),
    (Class::Assent, &["go", "for", "it"]),
    (Class::Assent, &["go", "ahead"]),
    (Class::Assent, &["do", "it"]),
    (Class::Assent, &["please", "do"]),
    (Class::Assent, &["book", "it"]),
    (Class::Assent, &["book", "that"]),
    (Class::Assent, &["all", "good"]),
    (Class::Assent, &["fine", "by", "me"]),
    (Class::Assent, &["works", "for", "me"]),
    (Class::Assent, &["book"]),
    (Class::Assent, &["right"]),
    (Class::Assent, &["fine"]),
    (Class::Assent, &["of", "course"]),
    (Class::Assent, &["sounds", "good"]),
    (Class::Assent, &["sounds", "great"]),
    (Class::Assent, &["looks", "good"]),
    (Class::Assent, &["looks", "great"]),
    (Class::Assent, &["looks", "right"]),
    (Class::Assent, &["i", "confirm"]),
    (Class::Assent, &["yes"]),
    (Class::Assent, &["y"]),
    (Class::Assent, &["yeah"]),
    (Class::Assent, &["yea"]),
    (Class::Assent, &["yep"]),
    (Class::Assent, &["yup"]),
    (Class::Assent, &["sure"]),
    (Class::Assent, &["ok"]),
    (Class::Assent, &["okay"]),
    (Class::Assent, &["alright"]),
    (Class::Assent, &["confirm"]),
    (Class::Assent, &["confirmed"]),
    (Class::Assent, &["absolutely"]),
    (Class::Assent, &["definitely"]),
    (Class::Assent, &["certainly"]),
    (Class::Assent, &["exactly"]),
    (Class::Assent, &["perfect"]),
    (Class::Assent, &["great"]),
    (Class::Assent, &["agreed"]),
    (Class::Assent, &["proceed"]),
    (Class::Assent, &["affirmative"]),
    (Class::Assent, &["true"]),
    // Refusals.
    (Class::Refusal, &["no"]),
    (Class::Refusal, &["n"]),
    (Class::Refusal, &["nope"]),
    (Class::Refusal, &["nah"]),
    (Class::Refusal, &["cancel", "it"]),
    (Class::Refusal, &["cancel", "that"]),
    (Class::Refusal, &["cancel"]),
    (Class::Refusal, &["not"]),
    (Class::Refusal, &["stop"]),
    (Class::Refusal, &["dont"]),
    (Class::Refusal, &["nevermind"]),
    (Class::Refusal, &["negative"]),
    (Class::Refusal, &["false"]),
    (Class::Refusal, &["decline"]),
    (Class::Refusal, &["never"]),
    // Corrections.
    (Class::Correction, &["doesn't", "look", "right"]),
    (Class::Correction, &["isn't", "right"]),
    (Class::Correction, &["not", "right"]),
    (Class::Correction, &["that's", "not"]),
    (Class::Correction, &["not", "what"]),
    (Class::Correction, &["i", "mean"]),
    (Class::Correction, &["rather", "than"]),
    (Class::Correction, &["make", "it"]),
    (Class::Correction, &["correct"]),
    (Class::Correction, &["correction"]),
    (Class::Correction, &["incorrect"]),
    (Class::Correction, &["wrong"]),
    (Class::Correction, &["mistake"]),
    (Class::Correction, &["mistaken"]),
    (Class::Correction, &["meant"]),
    (Class::Correction, &["instead"]),
    (Class::Correction, &["actually"]),
    (Class::Correction, &["change"]),
    (Class::Correction, &["changed"]),
    (Class::Correction, &["modify"]),
    (Class::Correction, &["fix"]),
    (Class::Correction, &["typo"]),
    (Class::Correction, &["different"]),
    (Class::Correction, &["update"]),
    (Class::Correction, &["switch"]),
    // Contrast.
    (Class::Contrast, &["but"]),
    (Class::Contrast, &["although"]),
    (Class::Contrast, &["though"]),
    (Class::Contrast, &["however"]),
    (Class::Contrast, &["except"]),
    (Class::Contrast, &["whereas"]),
    // Courtesy around an answer.
    (Class::Polite, &["thank", "you"]),
    (Class::Polite, &["please"]),
    (Class::Polite, &["thanks"]),
    (Class::Polite, &["thx"]),
];

/// Words that may stand beside an assent without adding to it ("yes, go
/// ahead and do it for me", "sounds good to me").
const FILLER: &[&str] = &[
    "a", "an", "the", "i", "me", "my", "we", "us", "you", "it", "that", "this", "to", "for", "and", "so", "then",
    "just", "now", "be", "is", "am", "are", "very", "much", "really", "oh", "well", "all",
];

/// Words that open a question when they open the message.
const QUESTION_OPENERS: &[&str] = &[
    "how", "what", "what's", "whats", "why", "when", "where", "which", "who", "whose", "is", "isn't", "are", "aren't",
    "can", "could", "would", "will", "won't", "does", "doesn't", "did", "didn't", "should", "shall", "may", "might",
];

/// "do" opens a question before these ("do you have …"), an assent before
/// others ("do it").
const DO_QUESTION_SUBJECTS: &[&str] = &["you", "i", "we", "they", "it's"];

/// One phrase of the lexicon found in the message.
struct Found {
    class: Class,
    /// Index of its first word among the message's words.
    at: usize,
    text: String,
}

/// The words of a message and the phrases found among them.
struct Reading {
    words: Vec<String>,
    /// The digit runs of the message.
    numbers: Vec<String>,
    found: Vec<Found>,
    /// The message holds a symbol other than `.`, `,`, `!` or an
    /// apostrophe, or a number: something besides an answer.
    other_symbols: bool,
    question_mark: bool,
    /// Words of what the question showed (its values, the names of their
    /// fields): a yes may repeat them ("yes, the Grand") without adding.
    shown: Vec<String>,
}

fn scan(tokens: &[Token]) -> Reading {
    let words: Vec<String> = tokens.iter().filter(|token| token.kind == Kind::Word).map(|t| t.lower.clone()).collect();
    let other_symbols = tokens.iter().any(|token| match token.kind {
        Kind::Word => false,
        Kind::Number => true,
        Kind::Symbol => ![".", ",", "!", "?", "…"].contains(&token.lower.as_str()),
    });
    let question_mark = tokens.iter().any(|token| token.is_symbol('?'));
    let numbers = tokens.iter().filter(|token| token.kind == Kind::Number).map(|token| token.lower.clone()).collect();
    let mut found = Vec::new();
    let mut at = 0;
    while at < words.len() {
        let rest = words.get(at..).unwrap_or_default();
        let best = PHRASES
            .iter()
            .filter(|(_, phrase)| rest.len() >= phrase.len() && rest.iter().zip(phrase.iter()).all(|(w, p)| w == p))
            .fold(None::<&(Class, &[&str])>, |best, candidate| match best {
                Some(kept) if kept.1.len() >= candidate.1.len() => Some(kept),
                _ => Some(candidate),
            });
        match best {
            Some((class, phrase)) => {
                let class = class_in_place(*class, phrase, at);
                found.push(Found { class, at, text: phrase.join(" ") });
                at += phrase.len();
            }
            None => {
                // Any contraction in `n't` refuses ("I don't want it").
                if rest.first().is_some_and(|word| word.ends_with("n't")) {
                    found.push(Found { class: Class::Refusal, at, text: rest.first().cloned().unwrap_or_default() });
                }
                at += 1;
            }
        }
    }
    negate_assents(&words, &mut found);
    Reading { words, numbers, found, other_symbols, question_mark, shown: Vec::new() }
}

/// "correct" opening a message is an assent ("Correct, book it").
fn class_in_place(class: Class, phrase: &[&str], at: usize) -> Class {
    if class == Class::Correction && phrase == ["correct"] && at == 0 { Class::Assent } else { class }
}

/// "not" right before an assent takes it back: "not correct", "isn't
/// right", "doesn't look good" say that what was asked is wrong, a
/// correction rather than a refusal.
fn negate_assents(words: &[String], found: &mut [Found]) {
    for phrase in found.iter_mut().filter(|found| found.class == Class::Assent) {
        let before = phrase.at.checked_sub(1).and_then(|index| words.get(index));
        if let Some(negation) = before.filter(|word| *word == "not" || word.ends_with("n't")) {
            phrase.class = Class::Correction;
            phrase.text = format!("{negation} {}", phrase.text);
        }
    }
}

impl Reading {
    fn first(&self, class: Class) -> Option<&Found> {
        self.found.iter().find(|found| found.class == class)
    }

    fn has(&self, class: Class) -> bool {
        self.first(class).is_some()
    }

    fn opens_question(&self) -> Option<String> {
        let first = self.words.first()?;
        if QUESTION_OPENERS.contains(&first.as_str()) {
            return Some(first.clone());
        }
        let second = self.words.get(1)?;
        (first == "do" && DO_QUESTION_SUBJECTS.contains(&second.as_str())).then(|| format!("{first} {second}"))
    }

    fn doubt(&self, kind: DoubtKind, class: Class) -> Option<Doubt> {
        self.first(class).map(|found| Doubt::new(kind, &found.text))
    }

    fn consent(&self) -> Consent {
        if self.question_mark {
            return Consent::Unclear(Doubt::new(DoubtKind::Question, "?"));
        }
        if let Some(opener) = self.opens_question() {
            return Consent::Unclear(Doubt::new(DoubtKind::Question, &opener));
        }
        let doubts = [
            (DoubtKind::Hesitation, Class::Hesitation),
            (DoubtKind::Condition, Class::Condition),
            (DoubtKind::Correction, Class::Correction),
        ];
        if let Some(doubt) = doubts.iter().find_map(|(kind, class)| self.doubt(*kind, *class)) {
            return Consent::Unclear(doubt);
        }
        match (self.first(Class::Assent), self.first(Class::Refusal)) {
            (Some(assent), Some(refusal)) => {
                Consent::Unclear(Doubt::new(DoubtKind::Mixed, &format!("{}\" and \"{}", assent.text, refusal.text)))
            }
            (None, Some(_)) => Consent::No,
            (Some(_), None) => {
                match self.doubt(DoubtKind::Contrast, Class::Contrast).or_else(|| self.more_than_yes()) {
                    Some(doubt) => Consent::Unclear(doubt),
                    None => Consent::Yes,
                }
            }
            (None, None) => Consent::Silent,
        }
    }

    /// What a yes says besides yes: a number, or a word that is neither in
    /// a phrase of the lexicon nor filler.
    fn more_than_yes(&self) -> Option<Doubt> {
        let mut covered = vec![false; self.words.len()];
        for found in &self.found {
            let length = found.text.split(' ').count();
            for flag in covered.iter_mut().skip(found.at).take(length) {
                *flag = true;
            }
        }
        let adds = |word: &String| !FILLER.contains(&word.as_str()) && !self.shown.contains(word);
        let extra = self.words.iter().zip(&covered).find(|(word, covered)| !**covered && adds(word));
        let number = self.numbers.iter().find(|number| adds(number));
        extra.map(|(word, _)| word).or(number).map(|word| Doubt::new(DoubtKind::MoreThanYes, word))
    }

    /// Whether every word belongs to an assent or a refusal phrase (or
    /// courtesy around them), with at least one of them, and nothing else
    /// is written but `.`, `,` and `!`.
    fn only_answer_words(&self) -> bool {
        self.only(&[Class::Assent, Class::Refusal, Class::Polite])
    }

    /// Whether every word belongs to a phrase of `classes`, at least one
    /// of them an assent, a refusal or a hesitation, with no number and no
    /// symbol but `.`, `,` and `!`.
    fn only(&self, classes: &[Class]) -> bool {
        let covered: usize = self.found.iter().map(|found| found.text.split(' ').count()).sum();
        covered == self.words.len()
            && !self.other_symbols
            && self.found.iter().all(|found| classes.contains(&found.class))
            && self.found.iter().any(|found| matches!(found.class, Class::Assent | Class::Refusal | Class::Hesitation))
    }
}

/// The fuller reading of a message as an answer to a yes/no question.
pub fn read(message: &str) -> Consent {
    read_tokens(&tokenize(message))
}

pub(crate) fn read_tokens(tokens: &[Token]) -> Consent {
    scan(tokens).consent()
}

/// [`read`], for a question that showed `shown` (its values and the names
/// of their fields, as text): a yes that only repeats them ("yes, the
/// Grand", "yes, 2 guests" to "… for 2 guests?") adds nothing.
pub fn read_answering(message: &str, shown: &[String]) -> Consent {
    let mut reading = scan(&tokenize(message));
    reading.shown =
        shown.iter().flat_map(|text| tokenize(text)).filter(|t| t.is_alphanumeric()).map(|t| t.lower).collect();
    reading.consent()
}

/// The answer of a message that is nothing but an answer from the closed
/// set of forms: "yes", "Yes please!", "ok, go ahead", "no thanks",
/// "cancel", "never mind". Anything more, a question mark, a number, a
/// doubt, or a yes beside a no, is not certain: `None`.
pub fn certain(message: &str) -> Option<bool> {
    certain_tokens(&tokenize(message))
}

pub(crate) fn certain_tokens(tokens: &[Token]) -> Option<bool> {
    let reading = scan(tokens);
    if reading.question_mark || !reading.only_answer_words() {
        return None;
    }
    match reading.consent() {
        Consent::Yes => Some(true),
        Consent::No => Some(false),
        _ => None,
    }
}

/// The yes or no a span of words says, such as a model's evidence for a
/// `bool`: an assent and no refusal, or the other way round; `None` for
/// neither or both.
pub fn polarity(text: &str) -> Option<bool> {
    polarity_tokens(&tokenize(text))
}

pub(crate) fn polarity_tokens(tokens: &[Token]) -> Option<bool> {
    let reading = scan(tokens);
    if reading.has(Class::Hesitation) {
        return None;
    }
    match (reading.has(Class::Assent), reading.has(Class::Refusal)) {
        (true, false) => Some(true),
        (false, true) => Some(false),
        _ => None,
    }
}

/// Whether a span is nothing but yes/no words, hesitations and courtesy
/// ("no", "yes, go ahead", "not sure", "no thanks"): no free-text answer
/// to take whole.
pub(crate) fn only_answer_words(tokens: &[Token]) -> bool {
    if !tokens.iter().any(Token::is_alphanumeric) {
        return true;
    }
    scan(tokens).only(&[Class::Assent, Class::Refusal, Class::Polite, Class::Hesitation])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unclear(message: &str) -> DoubtKind {
        match read(message) {
            Consent::Unclear(doubt) => doubt.kind,
            other => panic!("{message:?} read as {other:?}"),
        }
    }

    #[test]
    fn certain_answers_are_a_closed_set_of_whole_messages() {
        for message in
            ["yes", "Yes.", "yes please!", "Yep", "OK, go ahead", "sure, thanks", "Confirmed", "y", "of course"]
        {
            assert_eq!(certain(message), Some(true), "{message}");
        }
        for message in ["no", "No thanks.", "nope", "cancel", "never mind", "n", "don't", "no, cancel it"] {
            assert_eq!(certain(message), Some(false), "{message}");
        }
        for message in [
            "yes?",
            "yes please, but wait",
            "I need to correct the date",
            "is that correct?",
            "yes, 3 guests",
            "yes for 2026-12-05",
            "yeah I guess",
            "no idea",
            "sure thing",
            "hmm",
            "no, go ahead",
            "",
        ] {
            assert_eq!(certain(message), None, "{message}");
        }
    }

    #[test]
    fn a_yes_counts_only_when_nothing_takes_it_back() {
        for message in [
            "that's all correct",
            "looks good",
            "exactly, book it please",
            "yes thank you",
            "Correct.",
            "sounds good to me",
        ] {
            assert_eq!(read(message), Consent::Yes, "{message}");
        }
        assert_eq!(unclear("yes please, but wait"), DoubtKind::Hesitation);
        assert_eq!(unclear("yes, but for 3 guests"), DoubtKind::Contrast);
        assert_eq!(unclear("is that correct?"), DoubtKind::Question);
        assert_eq!(unclear("is this right"), DoubtKind::Question);
        assert_eq!(unclear("I need to correct the date"), DoubtKind::Hesitation);
        assert_eq!(unclear("let me correct something"), DoubtKind::Hesitation);
        assert_eq!(unclear("the date is wrong"), DoubtKind::Correction);
        assert_eq!(unclear("yes if it has a sea view"), DoubtKind::Condition);
        assert_eq!(unclear("no, go ahead"), DoubtKind::Mixed);
        assert_eq!(unclear("do you have parking"), DoubtKind::Question);
        assert_eq!(unclear("yes, for 3 people"), DoubtKind::MoreThanYes);
        assert_eq!(unclear("yes, the Ritz"), DoubtKind::MoreThanYes);
        assert_eq!(unclear("yes, and add breakfast"), DoubtKind::MoreThanYes);
        let shown = ["Grand Hotel".to_string(), "guests".to_string(), "2".to_string()];
        assert_eq!(read_answering("yes, the Grand", &shown), Consent::Yes, "a yes may repeat what was shown");
        assert_eq!(read_answering("yes, 2 guests", &shown), Consent::Yes);
        assert!(matches!(read_answering("yes, 3 guests", &shown), Consent::Unclear(_)));
    }

    #[test]
    fn refusals_and_what_only_looks_like_one() {
        for message in
            ["no, please don't", "stop, I don't want it anymore", "no, I changed my mind", "please cancel that"]
        {
            assert_eq!(read(message), Consent::No, "{message}");
        }
        for message in ["I don't know", "no idea", "not yet", "I'd rather not say yet", "not sure"] {
            assert_eq!(unclear(message), DoubtKind::Hesitation, "{message}");
        }
        assert_eq!(unclear("that's not what I said"), DoubtKind::Correction);
        assert_eq!(unclear("not correct"), DoubtKind::Correction);
        assert_eq!(unclear("that isn't right"), DoubtKind::Correction);
        assert_eq!(read("The Grand Hotel, please"), Consent::Silent);
        assert_eq!(read("do it"), Consent::Yes, "`do` opens a question only before a subject");
    }

    #[test]
    fn polarity_of_a_span() {
        assert_eq!(polarity("yes please"), Some(true));
        assert_eq!(polarity("no thanks"), Some(false));
        assert_eq!(polarity("no, not sure"), None, "a hesitation says neither");
        assert_eq!(polarity("no, go ahead"), None, "both");
        assert_eq!(polarity("Hi"), None);
        assert_eq!(polarity("I need to correct the date"), None, "a correction says neither");
    }

    #[test]
    fn doubts_say_why() {
        let Consent::Unclear(doubt) = read("yes, although I should ask my wife") else { panic!() };
        assert_eq!(doubt.reason(), "\"i should\" is a hesitation, not an answer");
        assert_eq!(doubt.clause(), "you did not sound sure");
    }
}
