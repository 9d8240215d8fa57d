//! The reader against whole answers fed in every split: the oracle is
//! serde_json's reading of the same answer.

use super::*;
use serde_json::json;

/// Answers a model may send, each with the JSON object it holds.
fn samples() -> Vec<String> {
    vec![
        json!({
            "flow": "booking",
            "fields": {"hotel": {"evidence": "the {Grand} \"Hotel\"", "value": "Grand Hotel"}, "guests": {"evidence": "2 guests", "value": 2}},
            "conditions": {"booking.confirm#2": {"evidence": null, "yes": false}},
            "signals": {},
            "step": "ask_date",
            "reply": "For which date? \"Tab\"\there, a backslash \\ and a slash /.",
        })
        .to_string(),
        // Pretty-printed, with escapes the model may write itself.
        "```json\n{\n  \"fields\" : { \"date\": {\"evidence\": \"le 3 d\\u00e9cembre\", \"value\": \"2026-12-03\"} },\n  \"n\": -1.5e3 ,\n  \"ok\": true,\n  \"none\":null,\n  \"list\": [1, [2, {\"a\": \"]}\"}], \"x\"],\n  \"reply\" : \"Caf\\u00e9 \\ud83d\\ude00 ok\\n\\u00e9t\\u00E9 \\\"q\\\" \\/ \\b\\f\\r\"\n}\n```\n".to_string(),
        // UTF-8 written raw: two-, three- and four-byte characters.
        "{\"flow\":null,\"reply\":\"Très bien — 日本 😀!\"}".to_string(),
        // No reply: the prefix is the whole object when it closes.
        json!({"flow": "support", "signals": {"wants_human": {"evidence": "a person", "yes": true}}}).to_string(),
        // A reply that is not text.
        "{\"fields\":{},\"reply\":null}".to_string(),
        // Members after the reply are read for their syntax only.
        "{\"a\":1,\"reply\":\"x\",\"b\":{\"c\":[\"}\"]}} trailing prose".to_string(),
        "{}".to_string(),
        "{\"reply\":\"\"}".to_string(),
    ]
}

/// The object a sample holds, as serde_json reads it.
fn oracle(sample: &str) -> Map<String, Value> {
    let start = sample.find('{').unwrap();
    let mut stream = serde_json::Deserializer::from_str(&sample[start..]).into_iter::<Value>();
    match stream.next().unwrap().unwrap() {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// What the reader should report for a sample, pieces of the reply joined.
fn expected(sample: &str) -> (Map<String, Value>, Option<String>) {
    let object = oracle(sample);
    let mut prefix = Map::new();
    for (key, value) in &object {
        if key == REPLY_MEMBER {
            break;
        }
        prefix.insert(key.clone(), value.clone());
    }
    (prefix, object.get(REPLY_MEMBER).and_then(Value::as_str).map(str::to_string))
}

/// Feeds `pieces` and checks the order of what comes back: the prefix
/// once and first, then reply pieces, then at most one end.
fn read(pieces: &[&[u8]]) -> (Map<String, Value>, Option<String>) {
    let mut reader = PartialReader::default();
    let mut progress = Vec::new();
    for piece in pieces {
        reader.push(piece, &mut progress).unwrap();
    }
    assert!(reader.is_done(), "the object was read to its end");
    let mut events = progress.into_iter();
    let Some(Progress::Prefix(prefix)) = events.next() else { panic!("the prefix comes first") };
    let mut reply: Option<String> = None;
    let mut ended = false;
    for event in events {
        assert!(!ended, "nothing follows the end of the reply");
        match event {
            Progress::Reply(piece) => {
                assert!(!piece.is_empty());
                reply.get_or_insert_with(String::new).push_str(&piece);
            }
            Progress::ReplyEnd => ended = true,
            Progress::Prefix(_) => panic!("a second prefix"),
        }
    }
    if ended {
        reply.get_or_insert_with(String::new);
    } else {
        assert_eq!(reply, None, "reply pieces come with an end");
    }
    (prefix, reply)
}

#[test]
fn whole_answers_are_read() {
    for sample in samples() {
        assert_eq!(read(&[sample.as_bytes()]), expected(&sample), "{sample}");
    }
}

#[test]
fn every_split_point_gives_the_same_reading() {
    for sample in samples() {
        let bytes = sample.as_bytes();
        let want = expected(&sample);
        for cut in 0..=bytes.len() {
            let (head, tail) = bytes.split_at(cut);
            assert_eq!(read(&[head, tail]), want, "{sample} cut at byte {cut}");
        }
    }
}

#[test]
fn byte_by_byte_gives_the_same_reading() {
    for sample in samples() {
        let pieces: Vec<&[u8]> = sample.as_bytes().chunks(1).collect();
        assert_eq!(read(&pieces), expected(&sample), "{sample}");
    }
}

#[test]
fn random_pieces_give_the_same_reading() {
    // A fixed linear congruential generator: varied, and the same each run.
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |bound: usize| {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) as usize % bound
    };
    for sample in samples() {
        let want = expected(&sample);
        for _ in 0..200 {
            let mut rest = sample.as_bytes();
            let mut pieces = Vec::new();
            while !rest.is_empty() {
                let (piece, tail) = rest.split_at(1 + next(rest.len().min(7)));
                pieces.push(piece);
                rest = tail;
            }
            assert_eq!(read(&pieces), want, "{sample}");
        }
    }
}

#[test]
fn the_prefix_is_handed_over_before_the_reply_is_written() {
    let mut reader = PartialReader::default();
    let mut progress = Vec::new();
    reader
        .push(br#"{"flow": "booking", "fields": {"guests": {"evidence": "two", "value": 2}}, "rep"#, &mut progress)
        .unwrap();
    assert!(progress.is_empty(), "a key not yet complete could still be another member's");
    reader.push(br#"ly": "#, &mut progress).unwrap();
    assert!(progress.is_empty());
    reader.push(br#""For wh"#, &mut progress).unwrap();
    let mut prefix = Map::new();
    prefix.insert("flow".into(), json!("booking"));
    prefix.insert("fields".into(), json!({"guests": {"evidence": "two", "value": 2}}));
    assert_eq!(progress, vec![Progress::Prefix(prefix), Progress::Reply("For wh".into())]);
    assert!(reader.has_prefix() && !reader.is_done());
}

#[test]
fn split_surrogate_pairs_and_characters_wait_for_their_other_half() {
    let mut reader = PartialReader::default();
    let mut progress = Vec::new();
    reader.push(b"{\"reply\":\"a\\ud83d", &mut progress).unwrap();
    reader.push(b"\\ude00b\xc3", &mut progress).unwrap();
    reader.push(b"\xa9\\ud83d\"}", &mut progress).unwrap();
    let pieces: Vec<Progress> = progress.into_iter().skip(1).collect();
    assert_eq!(
        pieces,
        vec![
            Progress::Reply("a".into()),
            Progress::Reply("😀b".into()),
            Progress::Reply("é\u{fffd}".into()),
            Progress::ReplyEnd
        ]
    );
}

#[test]
fn broken_answers_are_errors_with_their_offset() {
    let cases: [(&[u8], usize); 5] = [
        (b"{\"a\" 1}", 5),
        (b"{\"a\": 1 2}", 8),
        (b"{\"a\": tru }", 9),
        (b"{\"reply\": \"\\q\"}", 12),
        (b"{\"reply\": \"\\u12G4\"}", 15),
    ];
    for (answer, at) in cases {
        let mut reader = PartialReader::default();
        let mut progress = Vec::new();
        let error = reader.push(answer, &mut progress).unwrap_err();
        assert_eq!(error.at, at, "{}: {error}", String::from_utf8_lossy(answer));
        assert_eq!(reader.push(b"}", &mut progress), Err(error), "the reader stays failed");
    }
}

#[test]
fn text_before_the_object_is_skipped_and_nothing_is_reported_until_it_opens() {
    let mut reader = PartialReader::default();
    let mut progress = Vec::new();
    reader.push(b"Sure! Here it is: ", &mut progress).unwrap();
    assert!(progress.is_empty() && !reader.is_done());
    reader.push(b"{\"reply\":\"ok\"}", &mut progress).unwrap();
    assert_eq!(progress, vec![Progress::Prefix(Map::new()), Progress::Reply("ok".into()), Progress::ReplyEnd]);
}
