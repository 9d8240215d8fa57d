//! `examples/step_by_step.rs` holds its booking conversation stage by
//! stage, and what it prints is what the turns did.

use flowc::runtime::events::StopReason;

#[test]
fn the_step_by_step_example_books_a_room_one_stage_at_a_time() {
    let mut printed = Vec::new();
    let results = match super::step_by_step::run(&mut printed) {
        Ok(results) => results,
        Err(error) => panic!("the example failed: {error}"),
    };
    let printed = String::from_utf8_lossy(&printed);
    let reasons: Vec<StopReason> = results.iter().map(|result| result.stopped_reason).collect();
    assert_eq!(reasons, [StopReason::NeedsInput, StopReason::FlowComplete, StopReason::NeedsInput]);
    assert_eq!(results[0].reply, "Shall I book Grand Hotel on 2026-12-04 for 2 guests?");
    assert!(results[1].reply.starts_with("Booked!"), "{}", results[1].reply);

    // Each turn prints its stages in pipeline order, and every event the
    // observer received: the same events as the turn's result, in order.
    for (turn, result) in printed.split("> ").skip(1).zip(&results) {
        let stages: Vec<&str> =
            turn.lines().filter_map(|line| line.trim().strip_prefix('[')?.strip_suffix(']')).collect();
        assert_eq!(stages.first(), Some(&"Started"), "{turn}");
        let (last, before) = stages.split_last().unwrap_or_else(|| panic!("no stage: {turn}"));
        assert!(before.ends_with(&["Replied", "PostSignals"]), "{turn}");
        assert!(last.starts_with("finished: "), "{turn}");
        let events: Vec<String> =
            turn.lines().filter_map(|line| line.strip_prefix("    ")).map(str::to_string).collect();
        let expected: Vec<String> =
            result.events.iter().map(|event| serde_json::to_string(event).unwrap_or_default()).collect();
        assert_eq!(events, expected);
    }
    assert!(printed.contains(r#"{"event":"tool_called","tool":"book_hotel","ok":true"#), "{printed}");
}
