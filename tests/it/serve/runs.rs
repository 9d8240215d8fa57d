//! Workflow runs over the API: started, shown, followed as server-sent
//! events (replayed after, live while running), resumed and cancelled,
//! and visible only to their tenant.

use super::{
    Client, HOLD, HOLD_PY, TOKEN_ACME, TOKEN_GLOBEX, code, follow_held_run, options, read_events, start, tenants,
};
use crate::support::{temp_dir, unique};
use flowc::serve::auth::Auth;
use serde_json::{Value, json};

fn onboarding() -> Value {
    json!({
        "program": "onboarding",
        "data": { "company": "Initech", "contacts": [{ "name": "Ann", "email": "ann@initech.test" }] }
    })
}

fn events_of(client: &Client, id: &str) -> Vec<(String, Value)> {
    let response = client.request(reqwest::Method::GET, &format!("/v1/runs/{id}/events")).send().expect("events");
    assert_eq!(response.status().as_u16(), 200);
    read_events(response)
        .into_iter()
        .map(|(kind, data)| (kind, serde_json::from_str(&data).expect("json data")))
        .collect()
}

#[test]
fn a_run_waits_replays_its_events_and_resumes_now() {
    let server = start(&options(Auth::default()));
    let client = Client::new(server.addr, None);
    let (status, run) = client.post("/v1/runs", &onboarding());
    assert_eq!(status, 201, "{run}");
    assert_eq!((run["status"].as_str(), run["step"].as_str()), (Some("waiting"), Some("wait_a_day")), "{run}");
    let id = run["run"].as_str().expect("a run id").to_string();
    assert!(id.starts_with("open_onboarding_"), "{id}");
    assert_eq!(client.get(&format!("/v1/runs/{id}")), (200, run.clone()));

    let events = events_of(&client, &id);
    let (last_kind, last) = events.last().expect("events");
    assert_eq!((last_kind.as_str(), last), ("waiting", &run));
    let steps: Vec<(String, String)> = events[..events.len() - 1]
        .iter()
        .map(|(kind, event)| {
            assert_eq!(kind, "step");
            (
                event["event"].as_str().unwrap_or_default().to_string(),
                event["progress"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(steps.first(), Some(&("step_started".to_string(), "step 1 of 7".to_string())), "{steps:?}");
    // The wait is step 4: it completes, and the run waits after it.
    assert_eq!(steps.last(), Some(&("step_completed".to_string(), "step 4 of 7".to_string())), "{steps:?}");
    assert_eq!(steps.len(), 8, "each of the four steps started and completed once: {steps:?}");

    let (status, early) = client.post(&format!("/v1/runs/{id}/resume"), &json!({}));
    assert_eq!((status, code(&early)), (409, "not_due"), "{early}");
    let (status, resumed) = client.post(&format!("/v1/runs/{id}/resume"), &json!({ "now": true }));
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(resumed["status"], "completed", "{resumed}");
    let (status, ended) = client.post(&format!("/v1/runs/{id}/cancel"), &json!({}));
    assert_eq!((status, code(&ended)), (409, "run_ended"), "{ended}");
    let replayed = events_of(&client, &id);
    assert_eq!(
        replayed.last().map(|(kind, run)| (kind.as_str(), &run["status"])),
        Some(("finished", &json!("completed")))
    );
}

#[test]
fn a_cancelled_run_is_recorded_so_and_never_resumed() {
    let server = start(&options(Auth::default()));
    let client = Client::new(server.addr, None);
    let (_, run) = client.post("/v1/runs", &onboarding());
    let id = run["run"].as_str().expect("a run id").to_string();
    let (status, cancelled) = client.post(&format!("/v1/runs/{id}/cancel"), &json!({}));
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    let last = cancelled["events"].as_array().and_then(|events| events.last()).map(|event| event["event"].clone());
    assert_eq!(last, Some(json!("run_cancelled")), "{cancelled}");
    let (status, again) = client.post(&format!("/v1/runs/{id}/cancel"), &json!({}));
    assert_eq!((status, code(&again)), (409, "run_ended"), "{again}");
    let events = events_of(&client, &id);
    assert_eq!(
        events.last().map(|(kind, run)| (kind.as_str(), &run["status"])),
        Some(("finished", &json!("cancelled")))
    );
    let (status, refused) = client.post(&format!("/v1/runs/{id}/resume"), &json!({ "now": true }));
    assert_eq!((status, code(&refused)), (409, "run_ended"), "{refused}");
}

#[test]
fn a_run_started_without_waiting_is_followed_live_to_its_wait() {
    let server = start(&options(Auth::default()));
    let client = Client::new(server.addr, None);
    let mut body = onboarding();
    body["wait"] = json!(false);
    let (status, run) = client.post("/v1/runs", &body);
    assert_eq!(status, 202, "{run}");
    let id = run["run"].as_str().expect("a run id").to_string();
    let events = events_of(&client, &id);
    let (kind, last) = events.last().expect("events");
    assert_eq!((kind.as_str(), last["status"].as_str()), ("waiting", Some("waiting")), "{events:?}");
    let started = events.iter().filter(|(_, event)| event["event"] == "step_started").count();
    assert_eq!(started, 4, "every step up to the wait, once: {events:?}");
}

#[test]
fn runs_are_their_tenants_with_their_events_and_bad_bodies_name_the_field() {
    let server = start(&options(tenants()));
    let acme = Client::new(server.addr, Some(TOKEN_ACME));
    let globex = Client::new(server.addr, Some(TOKEN_GLOBEX));
    let (_, run) = acme.post("/v1/runs", &onboarding());
    let id = run["run"].as_str().expect("a run id").to_string();
    for (status, body) in [
        globex.get(&format!("/v1/runs/{id}")),
        globex.post(&format!("/v1/runs/{id}/cancel"), &json!({})),
        globex.post(&format!("/v1/runs/{id}/resume"), &json!({ "now": true })),
        globex.get(&format!("/v1/runs/{id}/events")),
    ] {
        assert_eq!((status, code(&body)), (404, "run_not_found"), "{body}");
    }
    // The owner still follows it: the 404 was the other tenant's only.
    let owner = acme.request(reqwest::Method::GET, &format!("/v1/runs/{id}/events")).send().expect("events");
    assert_eq!(owner.status().as_u16(), 200);
    let (status, unknown) = acme.post("/v1/runs", &json!({ "program": "nope", "data": {} }));
    assert_eq!((status, code(&unknown)), (404, "program_not_found"), "{unknown}");
    assert!(unknown["error"]["message"].as_str().is_some_and(|message| message.contains("`nope`")), "{unknown}");
    let (status, missing) =
        acme.post("/v1/runs", &json!({ "program": "onboarding", "data": { "company": "Initech" } }));
    assert_eq!((status, code(&missing)), (400, "invalid_body"));
    assert!(missing["error"]["message"].as_str().is_some_and(|message| message.contains("contacts")), "{missing}");
    let (status, flow) = acme.post("/v1/runs", &json!({ "program": "onboarding", "flow": "nope" }));
    assert_eq!((status, code(&flow)), (400, "invalid_body"));
}

#[test]
fn a_run_cancelled_while_a_step_runs_stops_after_it_and_says_cancelled() {
    let dir = temp_dir(&format!("serve-cancel-{}", unique()));
    std::fs::write(dir.join("hold.flow"), HOLD).expect("program");
    std::fs::write(dir.join("hold.py"), HOLD_PY).expect("tool");
    let mut options = options(Auth::default());
    options.files = vec![dir.join("hold.flow")];
    let server = start(&options);
    let client = Client::new(server.addr, None);
    let (status, run) = client.post("/v1/runs", &json!({ "program": "hold", "wait": false }));
    assert_eq!(status, 202, "{run}");
    let id = run["run"].as_str().expect("a run id").to_string();
    while !dir.join("started").exists() {
        std::thread::yield_now();
    }
    let (status, cancelled) = client.post(&format!("/v1/runs/{id}/cancel"), &json!({}));
    assert_eq!((status, cancelled["status"].as_str()), (200, Some("cancelled")), "{cancelled}");
    std::fs::write(dir.join("release"), "").expect("release");
    let events = events_of(&client, &id);
    assert_eq!(
        events.last().map(|(kind, run)| (kind.as_str(), &run["status"])),
        Some(("finished", &json!("cancelled")))
    );
    drop(server);
    let (_, after) = Client::new(start(&options).addr, None).get(&format!("/v1/runs/{id}"));
    assert_eq!(after["status"], "cancelled", "the step that finished after the cancel saved nothing: {after}");
}

/// With a poll interval longer than any test, only the news of a save can
/// tell a follower that the step ended: it hears it when it happens.
#[test]
fn a_followed_run_is_pushed_each_save_not_polled() {
    let dir = temp_dir(&format!("serve-push-{}", unique()));
    std::fs::write(dir.join("hold.flow"), HOLD).expect("program");
    std::fs::write(dir.join("hold.py"), HOLD_PY).expect("tool");
    let mut options = options(Auth::default());
    options.files = vec![dir.join("hold.flow")];
    options.run_poll = std::time::Duration::from_secs(3600);
    let server = start(&options);
    let client = Client::new(server.addr, None);
    let (status, run) = client.post("/v1/runs", &json!({ "program": "hold", "wait": false }));
    assert_eq!(status, 202, "{run}");
    let id = run["run"].as_str().expect("a run id").to_string();
    while !dir.join("started").exists() {
        std::thread::yield_now();
    }
    let events = follow_held_run(&client, &id, &dir);
    let kinds: Vec<String> = events
        .iter()
        .map(|(kind, event)| format!("{kind} {}", event["event"].as_str().or(event["status"].as_str()).unwrap_or("?")))
        .collect();
    assert_eq!(kinds, ["step step_completed", "finished completed"], "{events:?}");
}
