//! What an operator meets running flowc for months, through the binary: a
//! message over the size bound is refused before anything is stored.

use crate::support::{flowc_env, root, stderr, stdout, temp_dir, unique};
use std::time::Duration;

#[test]
fn a_50_mb_message_is_refused_before_anything_is_stored() {
    let dir = temp_dir(&format!("ops-big-{}", unique()));
    let script = dir.join("big.txt");
    assert!(std::fs::write(&script, format!("hello\n{}\n", "word ".repeat(10 * 1024 * 1024))).is_ok());
    let store = format!("sqlite:{}", dir.join("flowc.db").display());
    let booking = root().join("flows/booking.flow");
    let booking = booking.to_string_lossy();
    let script = script.to_string_lossy();
    let args = ["run", booking.as_ref(), "--script", script.as_ref(), "--session", "big", "--store", &store, "--json"];
    let output = flowc_env(&dir, &args, &[], Duration::from_secs(120));
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert_eq!(stdout(&output), "", "not even the first line ran");
    assert!(
        stderr(&output).contains("line 2 of `")
            && stderr(&output).contains("is 50.0 MB long, over the maximum message size of 256 KB"),
        "{}",
        stderr(&output)
    );
    let shown = flowc_env(&dir, &["sessions", "show", "big", "--store", &store], &[], Duration::from_secs(60));
    assert_ne!(shown.status.code(), Some(0), "no session was stored: {}", stdout(&shown));

    // Linux caps one argument at 128 KB, below the default bound: the
    // same check under a smaller one.
    let data = format!("{{\"hotel\": \"{}\"}}", "x".repeat(3 * 1024));
    let args = ["run", booking.as_ref(), "--data", &data, "--max-message-bytes", "2048"];
    let output = flowc_env(&dir, &args, &[], Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("--data is 3 KB long, over the maximum message size of 2 KB"),
        "{}",
        stderr(&output)
    );
    let smaller = flowc_env(
        &dir,
        &["run", booking.as_ref(), "--script", script.as_ref(), "--max-message-bytes", "100"],
        &[],
        Duration::from_secs(60),
    );
    assert!(stderr(&smaller).contains("maximum message size of 100 bytes"), "{}", stderr(&smaller));
    let _ = std::fs::remove_dir_all(&dir);
}

const ENV_TOOL: &str = r#"
import sys, json, os
sys.stdin.read()
open("toolenv.json", "w").write(json.dumps(dict(os.environ)))
print(json.dumps({"ok": True}))
"#;

/// An exec tool sees PATH, the locale, the run's ids and what it declares;
/// never the model keys or the store's URL, even when it names them.
fn tool_environment(name: &str, program: &str) {
    let dir = temp_dir(&format!("ops-env-{}", unique()));
    assert!(std::fs::write(dir.join("dump.py"), ENV_TOOL).is_ok());
    assert!(std::fs::write(dir.join(name), program).is_ok());
    let store = format!("sqlite:{}", dir.join("flowc.db").display());
    let env = [
        ("OPENAI_API_KEY", "sk-secret"),
        ("ANTHROPIC_API_KEY", "sk-ant-secret"),
        ("FLOWC_STORE", store.as_str()),
        ("MY_TOKEN", "declared"),
        ("UNDECLARED", "hidden"),
        ("LC_ALL", "C.UTF-8"),
    ];
    let output = flowc_env(&dir, &["run", name], &env, Duration::from_secs(60));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let seen: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("toolenv.json")).unwrap_or_default())
            .unwrap_or_default();
    assert_eq!(seen["MY_TOKEN"], "declared");
    assert_eq!(seen["LC_ALL"], "C.UTF-8");
    assert!(seen["PATH"].is_string());
    assert!(seen["FLOWC_RUN_ID"].is_string() && seen["FLOWC_STEP_ID"] == "dump.1", "{seen}");
    for hidden in ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "FLOWC_STORE", "UNDECLARED"] {
        assert!(seen.get(hidden).is_none(), "{hidden} reached the tool");
    }
    let compiled = flowc_env(&dir, &["compile", name], &[], Duration::from_secs(60));
    let ir: serde_json::Value = serde_json::from_str(&stdout(&compiled)).unwrap_or_default();
    assert_eq!(ir["tools"][0]["implementation"]["env"], serde_json::json!(["MY_TOKEN", "OPENAI_API_KEY"]));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_exec_tool_gets_a_clean_environment_in_both_syntaxes() {
    tool_environment(
        "env.flow",
        r#"
schema { ok: bool "ok" }
tool dump() -> { ok: bool } {
  exec "python3" "dump.py"
  env MY_TOKEN, OPENAI_API_KEY
}
flow w "W" {
  auto step dump { call dump() -> ok }
}
"#,
    );
    tool_environment(
        "env.yaml",
        r#"
schema:
  ok: { type: bool, description: ok }
tools:
  dump:
    returns: { ok: bool }
    exec: { command: [python3, dump.py], env: [MY_TOKEN, OPENAI_API_KEY] }
flows:
  w:
    steps:
      - id: dump
        auto: true
        do:
          - call: { tool: dump, save: ok }
"#,
    );
}

/// The new operator's trip: a workflow run from the project root with its
/// program in `flows/` is found by `runs list` and `resume` from the root
/// and from `flows/`; in a folder with no project, `runs list` says there
/// is no store and creates none.
#[test]
fn every_command_finds_the_one_store_of_the_project() {
    let project = temp_dir(&format!("ops-project-{}", unique()));
    let flows = project.join("flows");
    assert!(std::fs::create_dir_all(&flows).is_ok());
    assert!(std::fs::write(flows.join("wait.flow"), crate::workflows::PAUSING).is_ok());
    let no_store = [("FLOWC_STORE", "")];
    let started = flowc_env(&project, &["run", "flows/wait.flow"], &no_store, Duration::from_secs(60));
    assert_eq!(started.status.code(), Some(0), "{}", stderr(&started));
    let id =
        stdout(&started).strip_prefix("run ").and_then(|rest| rest.split(':').next()).unwrap_or_default().to_string();
    assert!(project.join(".flowc/flowc.db").exists(), "the store is the project's, in the working folder");
    assert!(!flows.join(".flowc").exists());
    for cwd in [&project, &flows] {
        let listed = flowc_env(cwd, &["runs", "list"], &no_store, Duration::from_secs(60));
        assert!(stdout(&listed).starts_with(&id), "from {}: {}", cwd.display(), stdout(&listed));
    }

    let empty = temp_dir(&format!("ops-empty-{}", unique()));
    for args in [&["runs", "list"][..], &["sessions", "list"], &["resume", "x"]] {
        let output = flowc_env(&empty, args, &no_store, Duration::from_secs(60));
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(stderr(&output).contains("there is no store sqlite:"), "{args:?}: {}", stderr(&output));
    }
    assert!(!empty.join(".flowc").exists(), "a reading command created no store");
    let _ = std::fs::remove_dir_all(&project);
    let _ = std::fs::remove_dir_all(&empty);
}
