//! Where tokens end: skipping white space and `#` comments, and which
//! grammar rules pest matches as one token.

use crate::syntax::grammar::Rule;

/// The offset of the first character at or after `offset` that is neither
/// white space nor inside a `#` comment.
pub(super) fn skip_trivia(text: &str, offset: usize) -> usize {
    let mut position = offset;
    let bytes = text.as_bytes();
    while let Some(&byte) = bytes.get(position) {
        match byte {
            b' ' | b'\t' | b'\r' | b'\n' => position += 1,
            b'#' => {
                while let Some(&skipped) = bytes.get(position) {
                    if skipped == b'\n' {
                        break;
                    }
                    position += 1;
                }
            }
            _ => break,
        }
    }
    position
}

/// The end of the last character in `text[from..to]` that is neither white
/// space nor part of a `#` comment, or `from` when there is none. The range
/// must hold no string literal.
pub(super) fn last_token_end(text: &str, from: usize, to: usize) -> usize {
    let bytes = text.as_bytes();
    let mut position = from;
    let mut end = from;
    while position < to {
        match bytes.get(position) {
            Some(b' ' | b'\t' | b'\r' | b'\n') => position += 1,
            Some(b'#') => {
                while position < to && bytes.get(position) != Some(&b'\n') {
                    position += 1;
                }
            }
            Some(_) => {
                position += 1;
                end = position;
            }
            None => break,
        }
    }
    // Multi-byte characters are never trivia, so `end` only stops short of
    // a character boundary if `to` does; step forward to the boundary.
    while end < text.len() && !text.is_char_boundary(end) {
        end += 1;
    }
    end
}

/// Rules pest matches as one token (`@` and `$` rules): their spans hold no
/// skipped trivia, and their white space and `#` are content.
pub(super) fn is_atomic(rule: Rule) -> bool {
    is_keyword(rule)
        || matches!(
            rule,
            Rule::name
                | Rule::ident
                | Rule::int_lit
                | Rule::float_lit
                | Rule::number
                | Rule::duration
                | Rule::bool_lit
                | Rule::null_lit
                | Rule::string
                | Rule::dq_text
                | Rule::sq_text
                | Rule::escape
                | Rule::bare_text
                | Rule::text
                | Rule::plain_dq
                | Rule::plain_sq
                | Rule::quoted
                | Rule::path
                | Rule::or_op
                | Rule::and_op
                | Rule::not_op
                | Rule::cmp_op
                | Rule::limit_key
                | Rule::http_method
                | Rule::default_kw
                | Rule::auto_kw
                | Rule::else_kw
                | Rule::reset
                | Rule::halt
        )
}

/// Keyword pairs (`kw_*`) carry no value; the walk skips them.
pub(super) fn is_keyword(rule: Rule) -> bool {
    matches!(
        rule,
        Rule::kw_agent
            | Rule::kw_schema
            | Rule::kw_context
            | Rule::kw_tool
            | Rule::kw_signal
            | Rule::kw_flow
            | Rule::kw_step
            | Rule::kw_identity
            | Rule::kw_rule
            | Rule::kw_limits
            | Rule::kw_history
            | Rule::kw_keep_last
            | Rule::kw_summarize
            | Rule::kw_pattern
            | Rule::kw_examples
            | Rule::kw_description
            | Rule::kw_http
            | Rule::kw_header
            | Rule::kw_body
            | Rule::kw_exec
            | Rule::kw_builtin
            | Rule::kw_timeout
            | Rule::kw_phase
            | Rule::kw_behavior
            | Rule::kw_extract
            | Rule::kw_then
            | Rule::kw_when
            | Rule::kw_if
            | Rule::kw_requires
            | Rule::kw_optional
            | Rule::kw_keep
            | Rule::kw_fresh
            | Rule::kw_on_enter
            | Rule::kw_on_complete
            | Rule::kw_complete
            | Rule::kw_schedule
            | Rule::kw_next
            | Rule::kw_prompt
            | Rule::kw_say
            | Rule::kw_collect
            | Rule::kw_skip_if
            | Rule::kw_branch
            | Rule::kw_do
            | Rule::kw_prepare
            | Rule::kw_finalize
            | Rule::kw_tools
            | Rule::kw_max_asks
            | Rule::kw_on_no_answer
            | Rule::kw_on_error
            | Rule::kw_retry
            | Rule::kw_backoff
            | Rule::kw_wait
            | Rule::kw_set
            | Rule::kw_call
            | Rule::kw_emit
            | Rule::kw_for
            | Rule::kw_ask_model
            | Rule::kw_in
            | Rule::kw_where
            | Rule::kw_goto
            | Rule::kw_with
            | Rule::kw_goto_step
            | Rule::kw_ask_again
            | Rule::kw_abort
            | Rule::kw_reply
            | Rule::kw_set_context
            | Rule::kw_append_prompt
            | Rule::kw_inject_tools
            | Rule::kw_enum
            | Rule::kw_list
            | Rule::kw_object
            | Rule::kw_is
    )
}
