//! The offline provider's cost per call: one understand call for each
//! message of the booking and support transcripts, with the requests the
//! runtime sends. Prints p50 and p99 in microseconds.
//!
//! `cargo bench --bench offline`

use flowc::llm::offline::Offline;
use flowc::llm::{FieldSpec, FlowChoice, Provider, Question, UnderstandRequest};
use std::hint::black_box;
use std::time::{Duration, Instant};

fn field(name: &str, kind: &str, asked: bool) -> FieldSpec {
    FieldSpec {
        name: name.into(),
        kind: kind.into(),
        schema: serde_json::json!({}),
        description: None,
        values: vec![],
        examples: vec![],
        pattern: None,
        min: None,
        max: None,
        asked,
    }
}

fn booking(message: &str, asked: &str) -> UnderstandRequest {
    let mut hotel = field("hotel", "string", asked == "hotel");
    hotel.examples = vec!["Grand Hotel".into(), "Overlook".into(), "Ritz Paris".into()];
    let mut guests = field("guests", "int", asked == "guests");
    guests.description = Some("Number of guests".into());
    guests.min = Some(1.0);
    guests.max = Some(10.0);
    let mut fields = vec![hotel, field("date", "date", asked == "date"), guests];
    if asked == "confirmed" {
        fields.push(field("confirmed", "bool", true));
    }
    UnderstandRequest {
        message: message.into(),
        active_flow: Some("booking".into()),
        flows: vec![FlowChoice {
            name: "booking".into(),
            title: Some("Book a hotel room".into()),
            when: vec!["the user wants to book a hotel room".into()],
            examples: vec!["Grand Hotel".into(), "Overlook".into(), "Ritz Paris".into()],
        }],
        fields,
        conditions: vec![Question {
            id: "booking.confirm#2".into(),
            when: vec!["the user wants to change the date".into()],
        }],
        today: "2026-01-05".into(),
        ..Default::default()
    }
}

fn support(message: &str) -> UnderstandRequest {
    let mut email = field("email", "string", true);
    email.pattern = Some("^[^@ ]+@[^@ ]+$".into());
    let mut order_id = field("order_id", "string", false);
    order_id.pattern = Some("^ORD-[0-9]{4}$".into());
    UnderstandRequest {
        message: message.into(),
        active_flow: Some("triage".into()),
        flows: vec![FlowChoice {
            name: "billing".into(),
            title: Some("Billing and refunds".into()),
            when: vec!["the user has a billing question or wants a refund".into()],
            examples: vec!["ORD-1234".into()],
        }],
        fields: vec![email, order_id],
        signals: vec![Question {
            id: "wants_human".into(),
            when: vec!["the user asks for a human agent or a real person".into()],
        }],
        today: "2026-01-05".into(),
        ..Default::default()
    }
}

fn main() {
    let requests = [
        booking("Hi, I'd like to book a hotel room", "hotel"),
        booking("The Grand Hotel, please", "hotel"),
        booking("2026-12-04", "date"),
        booking("2 guests", "guests"),
        booking("yes", "confirmed"),
        booking("actually, can we change the date?", "confirmed"),
        booking("Book the Grand Hotel for 2 guests on 2026-12-04", "hotel"),
        support("ann@example.com"),
        support("I want a refund for ORD-1234"),
    ];
    let mut offline = Offline::new();
    let mut samples: Vec<Duration> = Vec::new();
    for _ in 0..2_000 {
        for request in &requests {
            let start = Instant::now();
            let _ = black_box(offline.understand(black_box(request)));
            samples.push(start.elapsed());
        }
    }
    samples.sort();
    let at = |quantile: f64| samples.get((samples.len() as f64 * quantile) as usize).copied().unwrap_or_default();
    println!(
        "offline understand ({} calls): p50 {:.2} µs, p99 {:.2} µs",
        samples.len(),
        at(0.50).as_secs_f64() * 1e6,
        at(0.99).as_secs_f64() * 1e6
    );
}
