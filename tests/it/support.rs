//! Helpers shared by the integration tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every example program under flows/, sorted.
pub fn examples() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("flows"))
        .expect("flows/ exists")
        .map(|entry| entry.expect("readable entry").path())
        .filter(|path| matches!(path.extension().and_then(|ext| ext.to_str()), Some("flow" | "yaml" | "yml")))
        // Test files (`flowc test`) sit beside the programs they test.
        .filter(|path| !flowc::source::is_test_file(path))
        .collect();
    files.sort();
    files
}

/// Runs the real binary from the repository root with a frozen clock and
/// seeded ids, so outputs are stable.
pub fn flowc(args: &[&str]) -> Output {
    flowc_in(root(), args, None)
}

pub fn flowc_in(dir: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    use std::io::Write;
    let mut command = Command::new(env!("CARGO_BIN_EXE_flowc"));
    command
        .args(args)
        .current_dir(dir)
        .env("FLOWC_NOW", "2026-01-05T10:00:00Z")
        .env("FLOWC_SEED", "7")
        .env("NO_COLOR", "1")
        .env("FLOWC_STORE", fresh_store())
        .env_remove("FLOWC_PROVIDER")
        .env_remove("FLOWC_MODEL")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().expect("flowc starts");
    if let Some(mut child_stdin) = child.stdin.take() {
        if let Some(text) = stdin {
            // A run that stops early (a program with errors) may exit
            // before reading its input: a broken pipe here is not a failure.
            if let Err(error) = child_stdin.write_all(text.as_bytes()) {
                assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe, "stdin is writable");
            }
        }
    }
    child.wait_with_output().expect("flowc finishes")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A fresh temporary directory for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("flowc-it-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Snapshots go to the top-level snapshots/ directory.
#[macro_export]
macro_rules! snapshot {
    ($name:expr, $value:expr) => {
        insta::with_settings!({
            snapshot_path => concat!(env!("CARGO_MANIFEST_DIR"), "/snapshots"),
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            insta::assert_snapshot!($name, $value);
        });
    };
}

/// Runs the real binary in `dir` with `env` set on top of a clean model
/// environment (no provider, model, key or base URL inherited), stdin
/// closed, and a bounded wait: a run still going after `timeout` is killed
/// and the test fails.
pub fn flowc_env(dir: &Path, args: &[&str], env: &[(&str, &str)], timeout: std::time::Duration) -> Output {
    use std::process::Stdio;
    let scratch = temp_dir(&format!("run-{}", unique()));
    let out_path = scratch.join("stdout");
    let err_path = scratch.join("stderr");
    let mut command = Command::new(env!("CARGO_BIN_EXE_flowc"));
    command
        .args(args)
        .current_dir(dir)
        .env("FLOWC_NOW", "2026-01-05T10:00:00Z")
        .env("FLOWC_SEED", "7")
        .env("NO_COLOR", "1")
        .env("FLOWC_STORE", fresh_store());
    for variable in ["FLOWC_PROVIDER", "FLOWC_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"] {
        command.env_remove(variable);
    }
    command.envs(env.iter().copied());
    command
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).expect("stdout file"))
        .stderr(std::fs::File::create(&err_path).expect("stderr file"));
    let mut child = command.spawn().expect("flowc starts");
    let deadline = std::time::Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("flowc is waitable") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("flowc {args:?} did not finish within {timeout:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    let output = Output {
        status,
        stdout: std::fs::read(&out_path).expect("stdout"),
        stderr: std::fs::read(&err_path).expect("stderr"),
    };
    let _ = std::fs::remove_dir_all(&scratch);
    output
}

/// A number unique within this test process.
pub fn unique() -> usize {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
}

/// A store no other run has used: a test's runs never see each other's
/// sessions and workflow runs (seeded ids repeat), and nothing is written
/// beside the programs in the repository. A test that needs one store
/// across runs passes `--store`.
pub fn fresh_store() -> String {
    let path = std::env::temp_dir().join(format!("flowc-it-store-{}-{}.db", std::process::id(), unique()));
    format!("sqlite:{}", path.display())
}
