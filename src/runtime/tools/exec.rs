//! Exec tools: a program run with its arguments and no shell, in the
//! program's directory, given the call's arguments as one line of JSON on
//! stdin, answering with one JSON object on stdout.
//!
//! The three pipes are served by their own threads so a child that writes a
//! lot (or never reads stdin) cannot deadlock the call. On Unix the child
//! leads its own process group, and a timeout kills the whole group, so a
//! script that started `sleep` or `curl` leaves nothing behind holding our
//! pipes. The child is always reaped.
//!
//! A relative program path with a separator (`tools/x.py`, `./x.sh`) is
//! resolved against the program's directory; a bare name (`python3`) is
//! looked up on `PATH`. Arguments are passed as written.
//!
//! A step of a workflow run gives its tools `FLOWC_RUN_ID` and
//! `FLOWC_STEP_ID` (the same for every attempt of one execution of the
//! step, also after a crash), so that a tool can make its side effect
//! idempotent. When the operator stops flowc ([`crate::runtime::shutdown`])
//! the child may finish within the grace period; after it, its process
//! group is killed and the call is interrupted.

use super::{ToolEnv, ToolError, excerpt};
use crate::ir::Tool;
use crate::runtime::shutdown;
use serde_json::{Map, Value};
use std::cell::RefCell;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

/// More stdout than this is an error, not an allocation.
const MAX_STDOUT: usize = 16 * 1024 * 1024;
/// How much of stderr the error message keeps (the end, where errors are).
const STDERR_KEPT: usize = 2 * 1024;

thread_local! {
    /// The run and step whose actions this thread executes now. A thread
    /// value rather than a field of the call: the call path through the
    /// actions is the one conversations use too, which have no run.
    static IDENTITY: RefCell<Option<(String, String)>> = const { RefCell::new(None) };
}

/// Runs `work` with the exec tools it calls told `run` and `step` (as
/// `FLOWC_RUN_ID` and `FLOWC_STEP_ID`).
pub fn with_identity<T>(run: &str, step: &str, work: impl FnOnce() -> T) -> T {
    let previous = IDENTITY.with(|identity| identity.replace(Some((run.to_string(), step.to_string()))));
    let result = work();
    IDENTITY.with(|identity| identity.replace(previous));
    result
}

/// The process groups of the children running now, for a stop at once.
static RUNNING: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Forgets a child's group when its call ends, however it ends.
struct Registered(i32);

impl Registered {
    fn new(child: &Child) -> Option<Registered> {
        let group = i32::try_from(child.id()).ok()?;
        RUNNING.lock().ok()?.push(group);
        Some(Registered(group))
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        if let Ok(mut running) = RUNNING.lock() {
            running.retain(|group| *group != self.0);
        }
    }
}

/// Kills the process group of every exec tool running now (the second
/// signal of a stop: nothing is left behind).
pub fn kill_running() {
    let groups = RUNNING.lock().map(|running| running.clone()).unwrap_or_default();
    for group in groups {
        kill_group_id(group);
    }
}

pub(super) fn call(
    tool: &Tool,
    (command, names): (&[String], &[String]),
    timeout_ms: u64,
    args: &Map<String, Value>,
    env: &ToolEnv,
) -> Result<Value, ToolError> {
    let Some((program, program_args)) = command.split_first() else {
        return Err(ToolError::failed(tool, "`exec` names no program"));
    };
    let deadline = Instant::now() + Duration::from_millis(timeout_ms);
    let mut child = spawn(program, program_args, &env.base_dir, names)
        .map_err(|error| ToolError::failed(tool, format!("cannot run `{program}`: {error}")))?;
    let _registered = Registered::new(&child);

    let mut input = serde_json::to_vec(args).unwrap_or_else(|_| b"{}".to_vec());
    input.push(b'\n');
    if let Some(mut stdin) = child.stdin.take() {
        // A child that exits without reading its input closes the pipe; the
        // write error that follows is expected and not the tool's failure.
        thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
    }
    let stdout = child.stdout.take().map(|pipe| read_on_thread(pipe, MAX_STDOUT, Keep::Head));
    let stderr = child.stderr.take().map(|pipe| read_on_thread(pipe, STDERR_KEPT * 4, Keep::Tail));

    let status = match wait_until(&mut child, deadline) {
        Ok(Waited::Exited(status)) => status,
        Ok(Waited::TimedOut) => {
            kill(&mut child);
            return Err(ToolError::timeout(tool, timeout_ms));
        }
        Ok(Waited::Interrupted) => {
            kill(&mut child);
            shutdown::note_interrupted();
            return Err(ToolError::failed(
                tool,
                "interrupted: flowc was stopped and the grace period ended before the tool did",
            ));
        }
        Err(error) => {
            kill(&mut child);
            return Err(ToolError::failed(tool, format!("lost track of `{program}`: {error}")));
        }
    };
    // The child has exited, but a process it left behind may still hold the
    // pipes open: waiting for them is bounded by the same deadline.
    let (Some(stdout), Some(stderr)) = (collect(stdout, deadline), collect(stderr, deadline)) else {
        kill_group(&child);
        return Err(ToolError::timeout(tool, timeout_ms));
    };

    if !status.success() {
        let detail = if stderr.bytes.is_empty() {
            match String::from_utf8_lossy(&stdout.bytes).trim() {
                "" => "no output".to_string(),
                text => format!("stdout: {}", excerpt(text, 200)),
            }
        } else {
            stderr_text(&stderr)
        };
        return Err(ToolError::failed(tool, format!("{}: {detail}", describe_exit(status))));
    }
    if stdout.overflowed {
        return Err(ToolError::invalid(
            tool,
            format!("it printed more than {} MiB on stdout", MAX_STDOUT / (1024 * 1024)),
        ));
    }
    parse_output(tool, &stdout.bytes)
}

/// What a tool is never given, even when it names it: the model keys and
/// the store's URL (which may hold the database password).
const NEVER_GIVEN: &[&str] = &["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "FLOWC_STORE"];

/// Whether flowc passes its variable `name` to a tool declaring `names`:
/// `PATH`, the locale and what the tool declares, never [`NEVER_GIVEN`].
fn given(name: &str, names: &[String]) -> bool {
    if NEVER_GIVEN.contains(&name) {
        return false;
    }
    matches!(name, "PATH" | "LANG" | "LANGUAGE" | "TZ")
        || name.starts_with("LC_")
        || names.iter().any(|declared| declared == name)
}

fn spawn(program: &str, args: &[String], base_dir: &Path, names: &[String]) -> std::io::Result<Child> {
    let mut command = Command::new(resolve(program, base_dir));
    // A clean environment: flowc's holds model keys and the store's URL,
    // which a tool has no business seeing.
    command.env_clear();
    command.envs(std::env::vars_os().filter(|(name, _)| name.to_str().is_some_and(|name| given(name, names))));
    IDENTITY.with(|identity| {
        if let Some((run, step)) = identity.borrow().as_ref() {
            command.env("FLOWC_RUN_ID", run).env("FLOWC_STEP_ID", step);
        }
    });
    command
        .args(args)
        .current_dir(working_dir(base_dir))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        command.process_group(0);
    }
    // A script written a moment ago can still be open for writing in a
    // child another thread is forking ("Text file busy"): that passes in
    // milliseconds, so the start is tried again a few times.
    let mut attempt = 0;
    loop {
        match command.spawn() {
            Err(error) if error.kind() == std::io::ErrorKind::ExecutableFileBusy && attempt < 5 => {
                attempt += 1;
                std::thread::sleep(std::time::Duration::from_millis(10 << attempt));
            }
            started => return started,
        }
    }
}

/// Which program to start: how `Command` resolves a relative path with a
/// changed working directory is platform-specific, so a path with a
/// separator is made absolute against the program's directory (itself made
/// absolute: the child changes directory before it starts the program).
fn resolve(program: &str, base_dir: &Path) -> PathBuf {
    let path = Path::new(program);
    let has_separator = path.components().count() > 1;
    if path.is_relative() && has_separator {
        let base = std::path::absolute(working_dir(base_dir)).unwrap_or_else(|_| base_dir.to_path_buf());
        base.join(path)
    } else {
        path.to_path_buf()
    }
}

/// An empty directory (a program read from stdin) means the current one.
fn working_dir(base_dir: &Path) -> &Path {
    if base_dir.as_os_str().is_empty() { Path::new(".") } else { base_dir }
}

enum Waited {
    Exited(ExitStatus),
    /// The tool's own timeout passed.
    TimedOut,
    /// flowc is stopping and the grace period is over.
    Interrupted,
}

/// Polls for the exit until the tool's deadline or the end of a stop's
/// grace period, whichever comes first.
fn wait_until(child: &mut Child, deadline: Instant) -> std::io::Result<Waited> {
    // Short first polls keep quick tools quick; the cap keeps a long tool
    // from costing a busy loop.
    let mut pause = Duration::from_millis(1);
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Waited::Exited(status));
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(Waited::TimedOut);
        }
        if shutdown::grace_over() {
            return Ok(Waited::Interrupted);
        }
        thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// Kills the child and its process group, then reaps the child.
fn kill(child: &mut Child) {
    // The group first, while the unreaped child still pins its id.
    kill_group(child);
    let _ = child.kill();
    let _ = child.wait();
}

fn kill_group(child: &Child) {
    // `process_group(0)` made the child the leader of a group whose id is
    // its pid. A pid above i32::MAX cannot exist on Unix; skip rather than
    // signal a wrong group.
    if let Ok(group) = i32::try_from(child.id()) {
        kill_group_id(group);
    }
}

#[cfg(unix)]
fn kill_group_id(group: i32) {
    // SAFETY: kill(2) takes plain integers and touches no memory of ours;
    // a group that is already gone yields ESRCH, which is fine.
    unsafe {
        libc::kill(-group, libc::SIGKILL);
    }
}

#[cfg(not(unix))]
fn kill_group_id(_group: i32) {}

fn describe_exit(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exited with code {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("was killed by signal {signal}");
        }
    }
    "exited abnormally".to_string()
}

#[derive(Clone, Copy)]
enum Keep {
    /// The first bytes, up to the limit (stdout: the answer).
    Head,
    /// The last bytes (stderr: the error is at the end).
    Tail,
}

struct Output {
    bytes: Vec<u8>,
    /// More was written than the limit; `bytes` holds what `Keep` says.
    overflowed: bool,
}

/// Drains a pipe to its end on a thread, keeping at most `limit` bytes, so
/// the child never blocks on a full pipe.
fn read_on_thread(mut pipe: impl Read + Send + 'static, limit: usize, keep: Keep) -> mpsc::Receiver<Output> {
    let (sender, receiver) = mpsc::channel();
    thread::spawn(move || {
        let mut output = Output { bytes: Vec::new(), overflowed: false };
        let mut chunk = [0u8; 64 * 1024];
        loop {
            let read = match pipe.read(&mut chunk) {
                Ok(0) => break,
                Ok(read) => read,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            let data = chunk.get(..read).unwrap_or_default();
            match keep {
                Keep::Head => {
                    let room = limit.saturating_sub(output.bytes.len());
                    if data.len() > room {
                        output.overflowed = true;
                    }
                    output.bytes.extend_from_slice(data.get(..room.min(data.len())).unwrap_or_default());
                }
                Keep::Tail => {
                    output.bytes.extend_from_slice(data);
                    if output.bytes.len() > limit {
                        let excess = output.bytes.len() - limit;
                        output.bytes.drain(..excess);
                        output.overflowed = true;
                    }
                }
            }
        }
        // The receiver is gone only when the call gave up; nothing to do.
        let _ = sender.send(output);
    });
    receiver
}

fn collect(receiver: Option<mpsc::Receiver<Output>>, deadline: Instant) -> Option<Output> {
    let Some(receiver) = receiver else {
        return Some(Output { bytes: Vec::new(), overflowed: false });
    };
    let remaining = deadline.saturating_duration_since(Instant::now());
    receiver.recv_timeout(remaining).ok()
}

/// The end of stderr, at most [`STDERR_KEPT`] bytes, cut on a character.
fn stderr_text(stderr: &Output) -> String {
    let text = String::from_utf8_lossy(&stderr.bytes);
    let text = text.trim();
    let mut start = text.len().saturating_sub(STDERR_KEPT);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let tail = text.get(start..).unwrap_or_default();
    if start > 0 || stderr.overflowed { format!("…{tail}") } else { tail.to_string() }
}

fn parse_output(tool: &Tool, bytes: &[u8]) -> Result<Value, ToolError> {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    if text.is_empty() {
        return Err(ToolError::invalid(tool, "it printed nothing on stdout; a JSON object was expected"));
    }
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(other) => {
            Err(ToolError::invalid(tool, format!("{} on stdout is not a JSON object", super::describe_json(&other))))
        }
        Err(error) => Err(ToolError::invalid(
            tool,
            format!("stdout is not JSON ({error}); it starts with `{}`", excerpt(text, 80)),
        )),
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::super::tests::{args, env, tool};
    use super::super::{ToolError, ToolRegistry};
    use crate::ir::{ToolImpl, TypeKind};
    use serde_json::{Value, json};
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};
    use std::time::{Duration, Instant};

    /// A fresh directory for one test's scripts, removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> TempDir {
            let dir = std::env::temp_dir().join(format!("flowc-exec-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            assert!(std::fs::create_dir_all(dir.join("tools")).is_ok());
            TempDir(dir)
        }
    }

    impl std::ops::Deref for TempDir {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Writes an executable `tools/<name>` script.
    fn script(dir: &Path, name: &str, body: &str) {
        let path = dir.join("tools").join(name);
        assert!(std::fs::write(&path, body).is_ok());
        assert!(std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).is_ok());
    }

    fn run(
        dir: &Path,
        command: &[&str],
        timeout_ms: u64,
        returns: Option<&[(&str, TypeKind)]>,
    ) -> Result<Value, ToolError> {
        let tool = tool(
            "lookup",
            &[("email", TypeKind::String)],
            returns,
            Some(ToolImpl::Exec {
                command: command.iter().map(|part| part.to_string()).collect(),
                timeout_ms,
                env: Vec::new(),
            }),
        );
        ToolRegistry::default().call(&tool, &args(json!({"email": "ada@example.com"})), &env(dir.to_path_buf()))
    }

    fn failed(message: &str) -> Result<Value, ToolError> {
        Err(ToolError::Failed { tool: "lookup".to_string(), message: message.to_string() })
    }

    fn invalid(message: &str) -> Result<Value, ToolError> {
        Err(ToolError::InvalidResult { tool: "lookup".to_string(), message: message.to_string() })
    }

    #[test]
    fn arguments_on_stdin_result_on_stdout_in_the_program_directory() {
        let dir = TempDir::new("echo");
        script(
            &dir,
            "echo.sh",
            "#!/bin/sh\nread -r line\nprintf '{\"input\": %s, \"cwd\": \"%s\", \"argv\": \"%s\"}\\n' \"$line\" \"$(pwd)\" \"$1 $2\"\n",
        );
        let result = run(&dir, &["./tools/echo.sh", "a b", "$HOME"], 2_000, Some(&[("input", TypeKind::Unknown)]));
        let cwd = std::fs::canonicalize(&*dir).map(|path| path.display().to_string()).unwrap_or_default();
        assert_eq!(result, Ok(json!({"input": {"email": "ada@example.com"}, "cwd": cwd, "argv": "a b $HOME"})));
        // The same script through a relative path without `./`, and via PATH.
        let result = run(&dir, &["sh", "tools/echo.sh"], 2_000, None);
        assert!(result.is_ok(), "{result:?}");
    }

    #[test]
    fn a_hanging_tool_times_out_and_is_killed() {
        let dir = TempDir::new("hang");
        // `sleep` runs as a grandchild holding stdout: the group kill ends it.
        script(&dir, "hang.sh", "#!/bin/sh\nsleep 30\necho '{}'\n");
        let started = Instant::now();
        let result = run(&dir, &["./tools/hang.sh"], 200, None);
        assert_eq!(result, Err(ToolError::Timeout { tool: "lookup".to_string(), ms: 200 }));
        assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    }

    #[test]
    fn a_background_process_holding_stdout_cannot_hang_the_call() {
        let dir = TempDir::new("background");
        script(&dir, "leak.sh", "#!/bin/sh\necho '{\"ok\": true}'\nsleep 30 &\nexit 0\n");
        let started = Instant::now();
        let result = run(&dir, &["./tools/leak.sh"], 300, None);
        assert!(matches!(result, Err(ToolError::Timeout { .. })), "{result:?}");
        assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    }

    #[test]
    fn a_non_zero_exit_keeps_the_code_and_stderr() {
        let dir = TempDir::new("fail");
        script(&dir, "fail.sh", "#!/bin/sh\necho 'working' \necho 'customer service is down' >&2\nexit 1\n");
        assert_eq!(
            run(&dir, &["./tools/fail.sh"], 2_000, None),
            failed("exited with code 1: customer service is down")
        );
        script(&dir, "quiet.sh", "#!/bin/sh\necho 'partial'\nexit 3\n");
        assert_eq!(run(&dir, &["./tools/quiet.sh"], 2_000, None), failed("exited with code 3: stdout: partial"));
    }

    #[test]
    fn long_stderr_is_cut_to_its_end() {
        let dir = TempDir::new("stderr");
        script(
            &dir,
            "noisy.sh",
            "#!/bin/sh\ni=0\nwhile [ $i -lt 2000 ]; do echo \"line $i of noise\" >&2; i=$((i+1)); done\necho 'the real error' >&2\nexit 2\n",
        );
        let Err(ToolError::Failed { message, .. }) = run(&dir, &["./tools/noisy.sh"], 5_000, None) else {
            panic!("the tool should fail");
        };
        assert!(message.starts_with("exited with code 2: …"), "{message}");
        assert!(message.ends_with("the real error"), "{message}");
        assert!(message.len() < 2_200, "{}", message.len());
    }

    #[test]
    fn invalid_json_is_an_error_naming_the_first_bytes() {
        let dir = TempDir::new("invalid");
        script(&dir, "bad.sh", "#!/bin/sh\necho 'Customer: Ada (not json)'\n");
        let result = run(&dir, &["./tools/bad.sh"], 2_000, None);
        let Err(ToolError::InvalidResult { message, .. }) = &result else {
            panic!("{result:?}");
        };
        assert!(message.starts_with("stdout is not JSON ("), "{message}");
        assert!(message.ends_with("it starts with `Customer: Ada (not json)`"), "{message}");
        script(&dir, "list.sh", "#!/bin/sh\necho '[1, 2]'\n");
        assert_eq!(run(&dir, &["./tools/list.sh"], 2_000, None), invalid("a list on stdout is not a JSON object"));
        script(&dir, "silent.sh", "#!/bin/sh\nexit 0\n");
        assert_eq!(
            run(&dir, &["./tools/silent.sh"], 2_000, None),
            invalid("it printed nothing on stdout; a JSON object was expected")
        );
    }

    #[test]
    fn a_megabyte_of_stdout_does_not_deadlock() {
        let dir = TempDir::new("large");
        // Also a lot of stderr at the same time, and stdin never read.
        script(
            &dir,
            "large.sh",
            "#!/bin/sh\nhead -c 300000 /dev/zero | tr '\\0' 'e' >&2\nprintf '{\"blob\": \"'\nhead -c 1048576 /dev/zero | tr '\\0' 'x'\nprintf '\"}'\n",
        );
        let result = run(&dir, &["./tools/large.sh"], 10_000, Some(&[("blob", TypeKind::String)]));
        let length = result.as_ref().ok().and_then(|value| value.get("blob")).and_then(Value::as_str).map(str::len);
        assert_eq!(length, Some(1_048_576), "{:?}", result.map(|_| ()));
    }

    #[test]
    fn relative_programs_resolve_against_an_absolute_program_directory() {
        let resolved = super::resolve("./tools/x.sh", Path::new("flows"));
        assert!(resolved.is_absolute(), "{}", resolved.display());
        assert!(resolved.ends_with("flows/tools/x.sh"), "{}", resolved.display());
        assert_eq!(super::resolve("python3", Path::new("flows")), PathBuf::from("python3"));
        let from_cwd = super::resolve("tools/x.py", Path::new(""));
        assert!(from_cwd.is_absolute() && from_cwd.ends_with("tools/x.py"), "{}", from_cwd.display());
    }

    #[test]
    fn the_shipped_booking_tool_answers_with_a_booking_id() {
        let flows = Path::new(env!("CARGO_MANIFEST_DIR")).join("flows");
        let tool = tool(
            "book_hotel",
            &[("hotel", TypeKind::String), ("date", TypeKind::Date), ("guests", TypeKind::Int)],
            Some(&[("booking_id", TypeKind::String)]),
            Some(ToolImpl::Exec {
                command: vec!["python3".to_string(), "tools/book_hotel.py".to_string()],
                timeout_ms: 10_000,
                env: Vec::new(),
            }),
        );
        let call_args = args(json!({"hotel": "Grand Hotel", "date": "2026-12-04", "guests": 2}));
        let first = ToolRegistry::default().call(&tool, &call_args, &env(flows.clone()));
        let second = ToolRegistry::default().call(&tool, &call_args, &env(flows));
        let id = first.as_ref().ok().and_then(|result| result.get("booking_id")).and_then(Value::as_str);
        assert!(id.is_some_and(|id| id.starts_with("GH-")), "{first:?}");
        assert_eq!(first, second);
    }

    #[test]
    fn a_missing_program_is_reported() {
        let dir = TempDir::new("missing");
        let result = run(&dir, &["./tools/nope.sh"], 2_000, None);
        let Err(ToolError::Failed { message, .. }) = &result else {
            panic!("{result:?}");
        };
        assert!(message.starts_with("cannot run `./tools/nope.sh`: "), "{message}");
    }
}
