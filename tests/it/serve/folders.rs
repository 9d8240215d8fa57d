//! The binary serving a folder, as the README's third set-up line starts
//! it (`flowc serve flows/`): every program of the folder is served by its
//! file's stem (the second syntax of a program as `stem-ext`), and by its
//! `agent` name when that is a valid name no file took; a conversation and
//! a workflow run go by the agent name as well as by the stem.

use super::processes::Server;
use super::{Client, code};
use crate::support::{root, temp_dir, unique};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const BOOK: &str = "Book the Grand Hotel for 2 guests on 2026-12-04";

/// Every program file below `folder`, in the order `flowc serve` reads
/// them (sorted, test files left out).
fn program_files(folder: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(folder).expect("the folder").map(|entry| entry.expect("an entry").path()).collect();
    entries.sort();
    let mut files = Vec::new();
    for entry in entries {
        if entry.is_dir() {
            files.extend(program_files(&entry));
            continue;
        }
        let name = entry.file_name().and_then(|name| name.to_str()).unwrap_or_default().to_string();
        let program = [".flow", ".yaml", ".yml"].iter().any(|extension| name.ends_with(extension));
        if program && !name.contains(".test.") {
            files.push(entry);
        }
    }
    files
}

/// The names the folder's programs should be served under, each with its
/// file: stems first, then the agent names no stem took (the first file
/// declaring an agent name has it).
fn expected_names(folder: &Path) -> BTreeMap<String, PathBuf> {
    let mut names = BTreeMap::new();
    let mut agents = Vec::new();
    for file in program_files(folder) {
        let stem = file.file_stem().and_then(|stem| stem.to_str()).expect("a stem").to_string();
        let name = if names.contains_key(&stem) {
            format!("{stem}-{}", file.extension().and_then(|ext| ext.to_str()).expect("an extension"))
        } else {
            stem
        };
        let text = std::fs::read_to_string(&file).expect("the program");
        let source = flowc::source::SourceFile::new(file.display().to_string(), text);
        let compiled = flowc::pipeline::compile(&source);
        assert!(!compiled.has_errors(), "{} compiles", file.display());
        if let Some(agent) = compiled.ir.agent.name.clone() {
            agents.push((agent, file.clone()));
        }
        names.insert(name, file);
    }
    for (agent, file) in agents {
        let valid = agent.chars().all(|character| character.is_ascii_alphanumeric() || "_-".contains(character));
        if valid && !names.contains_key(&agent) {
            names.insert(agent, file);
        }
    }
    names
}

#[test]
fn serving_the_examples_folder_names_every_program_by_stem_and_agent_and_runs_one_by_its_agent_name() {
    let folder = root().join("flows");
    let expected = expected_names(&folder);
    assert!(expected.contains_key("Concierge") && expected.contains_key("booking-yaml"), "{expected:?}");
    let dir = temp_dir(&format!("serve-folder-{}", unique()));
    let store = format!("sqlite:{}", dir.join("flowc.db").display());
    let server = Server::start(root(), &["flows/", "--store", &store], &[]);
    let client = Client::new(server.addr, None);

    let (status, listed) = client.get("/v1/programs");
    assert_eq!(status, 200, "{listed}");
    let served: BTreeMap<String, PathBuf> = listed["programs"]
        .as_array()
        .expect("programs")
        .iter()
        .map(|program| {
            let file = PathBuf::from(program["file"].as_str().expect("a file"));
            (program["name"].as_str().expect("a name").to_string(), file)
        })
        .collect();
    let canonical = |files: &BTreeMap<String, PathBuf>| -> BTreeMap<String, PathBuf> {
        files.iter().map(|(name, file)| (name.clone(), std::fs::canonicalize(file).expect("a program file"))).collect()
    };
    assert_eq!(canonical(&served), canonical(&expected), "every program of flows/, by stem and by agent name");

    // A conversation by the booking example's agent name, as by its stem.
    let (status, created) = client.post("/v1/sessions", &json!({ "program": "Concierge" }));
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().expect("an id").to_string();
    let (status, first) = client.say(&id, BOOK);
    assert_eq!((status, first["step"].as_str()), (200, Some("confirm")), "{first}");
    let (status, second) = client.say(&id, "yes");
    assert_eq!((status, second["stopped_reason"].as_str()), (200, Some("flow_complete")), "{second}");
    let (_, shown) = client.get(&format!("/v1/sessions/{id}"));
    assert_eq!((shown["program"].as_str(), shown["turns"].as_u64()), (Some("Concierge"), Some(2)), "{shown}");
    let (_, page) = client.get("/v1/sessions?program=Concierge");
    let ids: Vec<&Value> =
        page["sessions"].as_array().expect("sessions").iter().map(|session| &session["id"]).collect();
    assert_eq!(ids, vec![&json!(id)], "{page}");

    // A workflow run by its agent name.
    let data = json!({ "company": "Initech", "contacts": [{ "name": "Ann", "email": "ann@initech.test" }] });
    let (status, run) = client.post("/v1/runs", &json!({ "program": "Onboarding", "data": data }));
    assert_eq!(status, 201, "{run}");
    assert!(run["status"].is_string() && run["error"].is_null(), "{run}");
    let (status, missing) = client.post("/v1/sessions", &json!({ "program": "concierge" }));
    assert_eq!((status, code(&missing)), (404, "program_not_found"), "names are case-sensitive: {missing}");
}
