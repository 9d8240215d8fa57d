//! Keeping every request inside the model's context window.
//!
//! The runtime sends the recent history with each call. With a small local
//! model (2,048 tokens), that history does not fit beside the program's
//! prompt for long. A rambling reply or two, and the server refuses the
//! request. [`Windowed`] wraps a provider that talks to a server. Before
//! each call it leaves out the oldest history messages until the request's
//! estimated size fits the window, keeping room for the answer. It never
//! cuts the message, the instructions or this turn's tool rounds.
//!
//! The window is `context_window` in `flowc.toml`. Without it, flowc learns
//! the window from the server's own refusal of a request that was too long
//! (llama.cpp, llama-cpp-python, vLLM, OpenAI and Anthropic all name it),
//! then trims and sends again. The learned window is reported through
//! [`Provider::modes`], so the CLI can say what to put in `flowc.toml`.
//!
//! Sizes are counted in bytes of prompt text and turned into tokens with a
//! tokens-per-byte ratio. The ratio starts conservative and is then
//! calibrated from the token counts the server reports, both in the usage of
//! answered calls and in refusals.

use crate::llm::prompt::{self, AnswerFormat};
use crate::llm::rounds::result_text;
use crate::llm::schema::{answer_token_budget, understanding_schema};
use crate::llm::{
    Message, ModelReply, Provider, ProviderError, ReplyRequest, ToolRound, UnderstandRequest, Understanding, Understood,
};
use regex::Regex;
use std::borrow::Cow;
use std::sync::LazyLock;

/// Tokens per byte of prompt text before the server has reported a count.
/// English runs near 0.25 on most tokenizers and JSON near 0.35, so this
/// overestimates rather than overflows.
const UNCALIBRATED_TOKENS_PER_BYTE: f64 = 0.35;
/// Headroom on every estimate. The ratio varies with the text, and chat
/// templates add tokens of their own.
const ESTIMATE_MARGIN: f64 = 1.1;
/// Without `max_tokens`, the share of the window kept for the answer, up to
/// [`MAX_ANSWER_RESERVE`]. A server without a completion budget fills what
/// is left, and an understand answer cut short is invalid JSON.
const ANSWER_SHARE: u32 = 4;
const MAX_ANSWER_RESERVE: u32 = 1024;

/// What is known of one model's context window and tokenizer.
#[derive(Clone, Debug)]
pub struct ContextWindow {
    /// `context_window` from the configuration.
    configured: Option<u32>,
    /// The window a server's refusal named.
    learned: Option<u32>,
    /// The completion budget each call asks for (`max_tokens`).
    max_tokens: Option<u32>,
    /// The highest tokens-per-byte ratio the server's counts have shown.
    calibrated: Option<f64>,
}

impl ContextWindow {
    pub fn new(configured: Option<u32>, max_tokens: Option<u32>) -> ContextWindow {
        ContextWindow { configured, learned: None, max_tokens, calibrated: None }
    }

    /// The window in force: the smaller of the configured and the learned.
    pub fn window(&self) -> Option<u32> {
        match (self.configured, self.learned) {
            (Some(configured), Some(learned)) => Some(configured.min(learned)),
            (window, None) | (None, window) => window,
        }
    }

    /// The window learned from a refusal, when it is tighter than the
    /// configured one (what `flowc.toml` should then say).
    pub fn learned(&self) -> Option<u32> {
        self.learned.filter(|learned| self.configured.is_none_or(|configured| *learned < configured))
    }

    /// Tokens the prompt may take: the window less the answer's room, which
    /// is `max_tokens`, else the call's own cap (`answer`), else a share.
    fn prompt_budget(&self, answer: Option<u32>) -> Option<u64> {
        let window = self.window()?;
        let reserve = self.max_tokens.or(answer).unwrap_or((window / ANSWER_SHARE).min(MAX_ANSWER_RESERVE));
        // A completion budget as large as the window leaves the prompt half
        // of it: the server clamps the answer, not the prompt.
        let reserve = if reserve >= window { window / 2 } else { reserve };
        Some(u64::from(window - reserve))
    }

    /// Whether a prompt of `bytes` fits the window as far as it is known,
    /// with room for the answer (`answer`, as for [`Self::oldest_to_leave_out`]).
    pub fn fits(&self, answer: Option<u32>, bytes: usize) -> bool {
        self.prompt_budget(answer).is_none_or(|budget| self.estimate(bytes) <= budget)
    }

    /// The estimated tokens of `bytes` of prompt text.
    pub fn estimate(&self, bytes: usize) -> u64 {
        let ratio = self.calibrated.unwrap_or(UNCALIBRATED_TOKENS_PER_BYTE);
        (bytes as f64 * ratio * ESTIMATE_MARGIN).round() as u64
    }

    /// How many of the oldest of `history` messages to leave out, at least
    /// `at_least`. The result is the fewest that make the estimated request
    /// fit, or all of them. `size(n)` is the request's prompt bytes with the
    /// oldest `n` left out; `answer` the call's completion cap, if it has
    /// one. Nothing is left out while the window is unknown.
    pub fn oldest_to_leave_out(
        &self,
        history: usize,
        at_least: usize,
        answer: Option<u32>,
        size: impl Fn(usize) -> usize,
    ) -> usize {
        let at_least = at_least.min(history);
        let Some(budget) = self.prompt_budget(answer) else {
            return at_least;
        };
        (at_least..=history).find(|&left_out| self.estimate(size(left_out)) <= budget).unwrap_or(history)
    }

    /// The server counted `prompt_tokens` for a request of `bytes`.
    pub fn observe(&mut self, bytes: usize, prompt_tokens: u64) {
        if bytes == 0 || prompt_tokens == 0 {
            return;
        }
        let ratio = prompt_tokens as f64 / bytes as f64;
        self.calibrated = Some(self.calibrated.map_or(ratio, |known| known.max(ratio)));
    }

    /// Reads a refusal of a request of `bytes` that was too long: the window
    /// and the prompt's token count, where the message names them. Whether
    /// it taught anything: a refusal that did not calls for a bigger cut.
    pub fn learn(&mut self, refusal: &str, bytes: usize) -> bool {
        let before = (self.learned, self.calibrated);
        let (window, prompt_tokens) = overflow_figures(refusal);
        // A window smaller than any model's is a misread figure.
        if let Some(window) = window.filter(|window| *window >= MIN_CONTEXT_WINDOW) {
            self.learned = Some(self.learned.map_or(window, |known| known.min(window)));
        }
        if let Some(tokens) = prompt_tokens {
            self.observe(bytes, tokens);
        }
        (self.learned, self.calibrated) != before
    }

    /// The completion budget alone fills the window: no trimming of the
    /// prompt can make a request fit.
    fn answer_fills_window(&self) -> Option<(u32, u32)> {
        let (max_tokens, window) = (self.max_tokens?, self.window()?);
        (max_tokens >= window).then_some((max_tokens, window))
    }
}

/// Below this no prompt of flowc's fits: a smaller window, configured or
/// read from a refusal, is a mistake (a missing digit, a misread figure).
pub const MIN_CONTEXT_WINDOW: u32 = 256;

/// Whether a server's error message says the request is longer than the
/// model's context window.
pub fn is_overflow(message: &str) -> bool {
    let lower = message.to_lowercase();
    OVERFLOW_WORDS.iter().any(|words| lower.contains(words))
}

/// How servers say a request is too long: llama-cpp-python ("exceed context
/// window of 2048"), llama.cpp ("exceeds the available context size"),
/// OpenAI and vLLM ("maximum context length is 8192 tokens",
/// `context_length_exceeded`), Anthropic ("prompt is too long", "exceed
/// context limit").
const OVERFLOW_WORDS: &[&str] = &[
    "context window",
    "context length",
    "context size",
    "context limit",
    "context_length_exceeded",
    "prompt is too long",
];

/// A figure, with its thousands separators ("128,000").
const FIGURE: &str = r"\s*(\d[\d,_]*)";

static WINDOW_FIGURE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    let before =
        r"context window of|context length is|context length of|context size \(|context limit:[^>]*>|tokens\s*>";
    Regex::new(&format!("(?i)(?:{before}){FIGURE}")).ok()
});
/// The prompt's own tokens. OpenAI's "you requested 5000 tokens" counts the
/// completion too, so its "4000 in the messages" is read instead, or
/// nothing: calibrating on the completion would overestimate every prompt
/// after.
static PROMPT_FIGURE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    let before = r"requested tokens \(|resulted in|prompt is too long:|request \(|request has|context limit:";
    Regex::new(&format!(r"(?i)(?:(?:{before}){FIGURE}|\((\d[\d,_]*) in the messages)")).ok()
});

/// The window and the prompt's size in tokens, as far as a refusal names
/// them.
fn overflow_figures(message: &str) -> (Option<u32>, Option<u64>) {
    let figure = |pattern: &Option<Regex>| {
        let captures = pattern.as_ref()?.captures(message)?;
        let digits: String =
            captures.iter().skip(1).flatten().next()?.as_str().chars().filter(char::is_ascii_digit).collect();
        digits.parse::<u64>().ok()
    };
    let window = figure(&WINDOW_FIGURE).and_then(|window| u32::try_from(window).ok());
    (window, figure(&PROMPT_FIGURE))
}

/// The understand request's prompt bytes: what every provider sends of it,
/// the instructions, the history, the fields and the answer's schema.
pub(crate) fn understand_bytes(request: &UnderstandRequest) -> usize {
    let prompt = prompt::understand(request, AnswerFormat::Described);
    prompt.stable.len() + prompt.dynamic.len() + understanding_schema(request).to_string().len()
}

/// A reply round's prompt bytes: the system prompt, the conversation, the
/// tools offered and the earlier rounds with their results.
pub(crate) fn reply_bytes(request: &ReplyRequest, rounds: &[ToolRound]) -> usize {
    let prompt = prompt::reply_prompt(request);
    let conversation: usize = prompt::conversation(request).iter().map(|message| message.text.len()).sum();
    let tools: usize = request.tools.iter().map(|tool| tool.parameters.to_string().len() + tool.name.len()).sum();
    let rounds: usize = rounds
        .iter()
        .map(|round| {
            let results: usize = round.answered().map(|(_, result)| result_text(result).len()).sum();
            round.asked.echo.to_string().len() + round.asked.text.len() + results
        })
        .sum();
    prompt.stable.len() + prompt.dynamic.len() + conversation + tools + rounds
}

/// A request that carries history.
trait WithHistory: Clone {
    fn history(&self) -> &[Message];
    fn history_mut(&mut self) -> &mut Vec<Message>;
}

impl WithHistory for UnderstandRequest {
    fn history(&self) -> &[Message] {
        &self.history
    }

    fn history_mut(&mut self) -> &mut Vec<Message> {
        &mut self.history
    }
}

impl WithHistory for ReplyRequest {
    fn history(&self) -> &[Message] {
        &self.history
    }

    fn history_mut(&mut self) -> &mut Vec<Message> {
        &mut self.history
    }
}

/// `request` with its oldest `count` history messages left out.
fn leaving_out<R: WithHistory>(request: &R, count: usize) -> Cow<'_, R> {
    if count == 0 {
        return Cow::Borrowed(request);
    }
    let mut trimmed = request.clone();
    let history = trimmed.history_mut();
    history.drain(..count.min(history.len()));
    Cow::Owned(trimmed)
}

/// `request` with no history at all.
fn without_history(request: &UnderstandRequest) -> UnderstandRequest {
    UnderstandRequest { history: Vec::new(), ..request.clone() }
}

/// A provider whose requests are trimmed to the model's context window.
pub struct Windowed {
    inner: Box<dyn Provider>,
    window: ContextWindow,
}

impl Windowed {
    pub fn new(inner: Box<dyn Provider>, window: ContextWindow) -> Windowed {
        Windowed { inner, window }
    }

    /// Calls `call` with `request` trimmed to the window. Each refusal for
    /// length teaches the window and leaves out more, until the request
    /// fits or there is no history left to leave out.
    fn within_window<R: WithHistory, T>(
        &mut self,
        request: &R,
        answer: Option<u32>,
        size: impl Fn(&R) -> usize,
        prompt_tokens: impl Fn(&T) -> Option<u64>,
        mut call: impl FnMut(&mut dyn Provider, &R) -> Result<T, ProviderError>,
    ) -> Result<T, ProviderError> {
        let history = request.history().len();
        let mut at_least = 0;
        loop {
            let left_out =
                self.window.oldest_to_leave_out(history, at_least, answer, |count| size(&leaving_out(request, count)));
            let fitted = leaving_out(request, left_out);
            let bytes = size(&fitted);
            match call(self.inner.as_mut(), &fitted) {
                Ok(answer) => {
                    if let Some(tokens) = prompt_tokens(&answer) {
                        self.window.observe(bytes, tokens);
                    }
                    return Ok(answer);
                }
                Err(ProviderError::ContextOverflow(refusal)) => {
                    let taught = self.window.learn(&refusal, bytes);
                    if let Some((max_tokens, window)) = self.window.answer_fills_window() {
                        return Err(ProviderError::ContextOverflow(format!(
                            "{refusal} (`max_tokens = {max_tokens}` leaves no room in the {window}-token window: \
                             lower it in flowc.toml)"
                        )));
                    }
                    if left_out >= history {
                        return Err(ProviderError::ContextOverflow(self.too_long(&refusal, bytes)));
                    }
                    // New figures let the estimate choose how many more to
                    // leave out; a refusal that taught nothing halves what
                    // is left, so a server that names no figure costs a few
                    // refusals, not one per message.
                    let step = if taught { 1 } else { (history - left_out).div_ceil(2) };
                    at_least = left_out + step;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// The refusal of a request that still overflows with no history.
    fn too_long(&self, refusal: &str, bytes: usize) -> String {
        let size = format!("about {} tokens", self.window.estimate(bytes));
        match self.window.window() {
            Some(window) => {
                format!("with no history left, the prompt takes {size} of the {window}-token window: {refusal}")
            }
            None => format!("with no history left, the prompt takes {size}: {refusal}"),
        }
    }
}

impl Windowed {
    /// The request as sent: the fused reply saves a call but is not
    /// needed, so a request that would not fit with it even with no
    /// history goes without it (the runtime then asks for the reply in a
    /// call of its own), and without the reply's task in its prefix.
    fn fused_if_it_fits<'r>(&self, request: &'r UnderstandRequest) -> Cow<'r, UnderstandRequest> {
        let fits = || self.window.fits(Some(answer_token_budget(request)), understand_bytes(&without_history(request)));
        if (request.reply.is_some() || request.prefix.writer.is_some()) && !fits() {
            let mut lean = request.clone();
            lean.reply = None;
            lean.prefix.writer = None;
            return Cow::Owned(lean);
        }
        Cow::Borrowed(request)
    }
}

impl Provider for Windowed {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn modes(&self) -> Option<String> {
        let learned = self.window.learned().map(|window| format!("context_window = {window}"));
        match (self.inner.modes(), learned) {
            (Some(modes), Some(learned)) => Some(format!("{modes}, {learned}")),
            (modes, None) => modes,
            (None, learned) => learned,
        }
    }

    /// A model step has no history to trim: it goes through as it is.
    fn ask(&mut self, request: &crate::llm::AskRequest) -> Result<crate::llm::AskAnswer, ProviderError> {
        self.inner.ask(request)
    }

    fn understand_left_out(&self, request: &UnderstandRequest) -> usize {
        self.window.oldest_to_leave_out(request.history.len(), 0, Some(answer_token_budget(request)), |count| {
            understand_bytes(&leaving_out(request, count))
        })
    }

    fn reply_left_out(&self, request: &ReplyRequest) -> usize {
        self.window
            .oldest_to_leave_out(request.history.len(), 0, None, |count| reply_bytes(&leaving_out(request, count), &[]))
    }

    fn understand(&mut self, request: &UnderstandRequest) -> Result<Understanding, ProviderError> {
        let request = self.fused_if_it_fits(request);
        let request: &UnderstandRequest = &request;
        self.within_window(
            request,
            Some(answer_token_budget(request)),
            understand_bytes,
            // A repaired answer's usage covers two prompts: no calibration.
            |understanding: &Understanding| (understanding.usage.calls == 1).then_some(understanding.usage.prompt),
            |inner, request| inner.understand(request),
        )
    }

    fn understand_streamed(&mut self, request: &UnderstandRequest) -> Result<Understood, ProviderError> {
        let request = self.fused_if_it_fits(request);
        let request: &UnderstandRequest = &request;
        self.within_window(
            request,
            Some(answer_token_budget(request)),
            understand_bytes,
            // A streamed answer reports its prompt tokens at the end, if at
            // all: a count of 0 is no count.
            |understood: &Understood| {
                let usage = understood.understanding.usage;
                (usage.calls == 1 && usage.prompt > 0).then_some(usage.prompt)
            },
            |inner, request| inner.understand_streamed(request),
        )
    }

    fn reply(
        &mut self,
        request: &ReplyRequest,
        rounds: &[ToolRound],
        on_text: &mut dyn FnMut(&str),
    ) -> Result<ModelReply, ProviderError> {
        self.within_window(
            request,
            None,
            |request| reply_bytes(request, rounds),
            |reply: &ModelReply| {
                let usage = match reply {
                    ModelReply::Done(response) => response.usage,
                    ModelReply::ToolCalls(calls) => calls.usage,
                };
                (usage.calls == 1).then_some(usage.prompt)
            },
            |inner, request| inner.reply(request, rounds, on_text),
        )
    }
}

pub mod summary;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
