//! The playground page in a real browser: `flowc serve` on 127.0.0.1 with
//! the offline model, headless Chromium (Debian's package, installed by
//! scripts/install-test-deps.sh) driven through the DevTools protocol over
//! a pipe (`--remote-debugging-pipe`: no port, no websocket crate), and the
//! booking conversation held by typing into the page as a person would.
//!
//! Under scripts/test.sh Chromium must be there (the script exports
//! `FLOWC_TEST_CHROMIUM`), and a missing browser fails the test; elsewhere
//! a machine without `chromium` skips it with a loud note on stderr.
//!
//! `FLOWC_UPDATE_SCREENSHOT=1` also writes the final screenshot to
//! docs/serve-playground.png (the picture the README shows); it is always
//! written to the test's temporary folder.

use crate::fake::{self, Facts, FakeServer};
use crate::support::{root, temp_dir};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A hung browser or server must not hang the suite: past this, the
/// watchdog kills both and the test fails on the closed pipe.
const WATCHDOG: Duration = Duration::from_secs(180);

fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("FLOWC_TEST_CHROMIUM") {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "FLOWC_TEST_CHROMIUM names `{}`, which is not a file: run scripts/install-test-deps.sh",
            path.display()
        );
        return Some(path);
    }
    let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("chromium"))
        .find(|path| path.is_file());
    if found.is_none() {
        eprintln!(
            "\n*** SKIPPED the playground browser tests: no `chromium` on PATH. \
             scripts/test.sh installs it (Debian's chromium) and then never skips. ***\n"
        );
    }
    found
}

/// A pipe whose ends are not inherited (the child gets copies at 3 and 4).
fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    let result = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(result, 0, "pipe2: {}", std::io::Error::last_os_error());
    // SAFETY: pipe2 succeeded, so both descriptors are open and ours alone.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// Headless Chromium and the DevTools protocol on its pipe: messages are
/// JSON, each ended by a NUL byte; fd 3 is what it reads, fd 4 what it writes.
struct Browser {
    child: Child,
    to: File,
    from: BufReader<File>,
    next_id: u64,
    /// Events read while waiting for a reply, oldest first.
    pending: VecDeque<Value>,
    profile: PathBuf,
}

impl Browser {
    fn start(binary: &PathBuf, profile: PathBuf) -> Browser {
        let (browser_reads, we_write) = pipe();
        let (we_read, browser_writes) = pipe();
        let (read_fd, write_fd) = (browser_reads.into_raw_fd(), browser_writes.into_raw_fd());
        let mut command = Command::new(binary);
        command
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                // A small /dev/shm (containers) crashes tabs; /tmp has room.
                "--disable-dev-shm-usage",
                "--remote-debugging-pipe",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                "--font-render-hinting=none",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: between fork and exec only async-signal-safe calls
        // (fcntl, dup2) run. The two ends are first moved above 10 so that
        // neither dup2 can overwrite the other, then placed at 3 and 4
        // without close-on-exec.
        unsafe {
            command.pre_exec(move || {
                let high_read = libc::fcntl(read_fd, libc::F_DUPFD, 10);
                let high_write = libc::fcntl(write_fd, libc::F_DUPFD, 10);
                if high_read < 0 || high_write < 0 || libc::dup2(high_read, 3) < 0 || libc::dup2(high_write, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().expect("chromium starts");
        // SAFETY: the raw ends were taken from OwnedFds above and are closed
        // here once, now that the child holds its copies.
        unsafe {
            libc::close(read_fd);
            libc::close(write_fd);
        }
        Browser {
            child,
            to: File::from(we_write),
            from: BufReader::new(File::from(we_read)),
            next_id: 0,
            pending: VecDeque::new(),
            profile,
        }
    }

    fn read_message(&mut self) -> Value {
        let mut bytes = Vec::new();
        let read = self.from.read_until(0, &mut bytes).expect("reading the DevTools pipe");
        assert!(
            read > 0 && bytes.last() == Some(&0),
            "Chromium closed the DevTools pipe (crashed, or the watchdog stopped it)"
        );
        bytes.pop();
        serde_json::from_slice(&bytes).expect("DevTools sends JSON")
    }

    /// Sends one command (to a page's session when given) and returns its
    /// result; a protocol error fails the test with Chromium's message.
    fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        let mut bytes = serde_json::to_vec(&message).expect("serializable");
        bytes.push(0);
        self.to.write_all(&bytes).expect("writing the DevTools pipe");
        loop {
            let reply = self.read_message();
            if reply["id"] == json!(id) {
                assert!(reply.get("error").is_none(), "{method} failed: {}", reply["error"]);
                return reply["result"].clone();
            }
            if reply.get("method").is_some() {
                self.pending.push_back(reply);
            }
        }
    }

    /// Waits for the next event named `method` (of any session).
    fn event(&mut self, method: &str) -> Value {
        if let Some(index) = self.pending.iter().position(|event| event["method"] == method) {
            return self.pending.remove(index).unwrap_or_default();
        }
        loop {
            let message = self.read_message();
            if message["method"] == method {
                return message;
            }
            if message.get("method").is_some() {
                self.pending.push_back(message);
            }
        }
    }

    /// Every event read so far that is named `method`, taken out of the queue.
    fn take_events(&mut self, method: &str) -> Vec<Value> {
        let (taken, kept): (Vec<Value>, Vec<Value>) =
            self.pending.drain(..).partition(|event| event["method"] == method);
        self.pending = kept.into();
        taken
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Tens of megabytes of cache and state per run.
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// One tab of the browser.
struct Page<'a> {
    browser: &'a mut Browser,
    session: String,
}

impl Page<'_> {
    fn call(&mut self, method: &str, params: Value) -> Value {
        let session = self.session.clone();
        self.browser.call(Some(&session), method, params)
    }

    /// Evaluates JavaScript in the page, awaiting a promise, and returns
    /// its value; a thrown error fails the test with its text.
    fn eval(&mut self, expression: &str) -> Value {
        let result = self
            .call("Runtime.evaluate", json!({ "expression": expression, "awaitPromise": true, "returnByValue": true }));
        assert!(result.get("exceptionDetails").is_none(), "`{expression}` threw: {}", result["exceptionDetails"]);
        result["result"]["value"].clone()
    }

    /// Types a message into the chat box and presses Enter, then waits
    /// until the page says the turn is over (its `idle()` promise).
    fn say(&mut self, message: &str) {
        self.eval("document.querySelector('#message').focus()");
        self.call("Input.insertText", json!({ "text": message }));
        for kind in ["keyDown", "keyUp"] {
            let mut key = json!({ "type": kind, "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13 });
            if kind == "keyDown" {
                key["text"] = json!("\r");
            }
            self.call("Input.dispatchKeyEvent", key);
        }
        self.eval("playground.idle()");
    }

    /// What a person sees, read from the page.
    fn seen(&mut self) -> Value {
        self.eval(SEEN)
    }

    fn screenshot(&mut self) -> Vec<u8> {
        let shot = self.call("Page.captureScreenshot", json!({ "format": "png" }));
        base64_decode(shot["data"].as_str().expect("base64 PNG"))
    }
}

/// Reads the page into one object: the last reply (without its trace
/// line), the highlighted node, the steps that ran and the edges marked, the
/// data panel, the trace panel.
const SEEN: &str = r#"(() => {
  const texts = (selector) => [...document.querySelectorAll(selector)].map((node) => node.textContent.trim());
  const replies = [...document.querySelectorAll('#chat .msg.assistant')];
  const last = replies[replies.length - 1];
  const current = document.querySelector('#graph .g-node.current');
  const stepOf = (id) => {
    const node = document.querySelector(`#graph .g-node[data-id="${id}"]`);
    return node ? (node.dataset.step || node.dataset.kind) : id;
  };
  const data = {};
  for (const dd of document.querySelectorAll('#data dd[data-key]')) data[dd.dataset.key] = dd.textContent;
  return {
    state: document.body.dataset.state,
    status: document.querySelector('#status').textContent,
    program: document.querySelector('#program').value,
    session: document.querySelector('#session-id').textContent,
    messages: document.querySelectorAll('#chat .msg.user, #chat .msg.assistant').length,
    reply: last ? last.firstChild.textContent : null,
    trace: last && last.querySelector('.trace') ? last.querySelector('.trace').textContent : null,
    errors: texts('#chat .msg.error'),
    current: current ? (current.dataset.step || current.dataset.kind) : null,
    current_flow: current ? current.dataset.flow : null,
    visited: [...document.querySelectorAll('#graph .g-node.visited')].map((node) => node.dataset.step || node.dataset.kind),
    taken: [...document.querySelectorAll('#graph .g-edge.taken')].map((edge) => stepOf(edge.dataset.from) + '>' + stepOf(edge.dataset.to)),
    steps_drawn: texts('#graph .g-node[data-step]').length,
    data,
    model_calls: texts('#model-calls li:not(.none)'),
    rejections: texts('#rejections li:not(.none)'),
    directives: texts('#directives li:not(.none)'),
    events: texts('#events .kind'),
    summary: document.querySelector('#turn-summary').textContent,
    run_status: document.querySelector('#run-panel').hidden ? null : document.querySelector('#run-status').textContent,
    run_steps: texts('#run-steps li'),
    resume_shown: !document.querySelector('#resume-run').hidden,
  };
})()"#;

fn base64_decode(text: &str) -> Vec<u8> {
    let value = |byte: u8| -> u32 {
        match byte {
            b'A'..=b'Z' => u32::from(byte - b'A'),
            b'a'..=b'z' => u32::from(byte - b'a') + 26,
            b'0'..=b'9' => u32::from(byte - b'0') + 52,
            b'+' => 62,
            b'/' => 63,
            other => panic!("not base64: {other}"),
        }
    };
    let digits: Vec<u8> = text.bytes().filter(|byte| *byte != b'=' && !byte.is_ascii_whitespace()).collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let mut group = 0u32;
        for (index, byte) in chunk.iter().enumerate() {
            group |= value(*byte) << (18 - 6 * index);
        }
        let bytes = group.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    out
}

/// `flowc serve` on a port of the system's choosing on 127.0.0.1, with the
/// offline model, a frozen clock and seeded ids, its own SQLite store.
struct Server {
    child: Child,
    url: String,
    /// What the server wrote to stderr after its first line, for a failure.
    said: mpsc::Receiver<String>,
}

impl Server {
    fn start(dir: &std::path::Path, programs: &[&str]) -> Server {
        Server::start_with(dir, programs, &[], &[])
    }

    fn start_with(dir: &std::path::Path, programs: &[&str], flags: &[&str], env: &[(&str, &str)]) -> Server {
        let store = format!("sqlite:{}", dir.join("flowc.db").display());
        let mut command = Command::new(env!("CARGO_BIN_EXE_flowc"));
        command
            .arg("serve")
            .args(programs.iter().map(|program| root().join("flows").join(program)))
            .args(["--addr", "127.0.0.1:0", "--store", &store])
            .args(flags)
            .current_dir(dir)
            .env("FLOWC_NOW", "2026-01-05T10:00:00Z")
            .env("FLOWC_SEED", "7")
            .env("NO_COLOR", "1")
            .env_remove("FLOWC_PROVIDER")
            .env_remove("FLOWC_MODEL")
            .env_remove("FLOWC_SERVE_TOKENS")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("flowc serve starts");
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr is piped"));
        // The one line the server writes once it listens names the address.
        let mut first = String::new();
        stderr.read_line(&mut first).expect("reading flowc serve's stderr");
        let url = first
            .split_whitespace()
            .find(|word| word.starts_with("http://127.0.0.1:"))
            .unwrap_or_else(|| panic!("flowc serve did not say where it listens: {first:?}"))
            .to_string();
        let (tell, said) = mpsc::channel();
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = stderr.read_to_string(&mut rest);
            let _ = tell.send(rest);
        });
        Server { child, url, said }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            if let Ok(said) = self.said.recv() {
                eprintln!("flowc serve said:\n{said}");
            }
        }
    }
}

/// Kills the browser and the server if the test outlives [`WATCHDOG`].
/// Dropped (the test ended, passing or not), its sender disconnects the
/// channel and the watchdog stands down, so it never signals a process id
/// that may have been reused.
struct Watchdog {
    _alive: mpsc::Sender<()>,
}

impl Watchdog {
    fn start(pids: Vec<u32>) -> Watchdog {
        let (alive, wait) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            if wait.recv_timeout(WATCHDOG) == Err(mpsc::RecvTimeoutError::Timeout) {
                for pid in pids {
                    // SAFETY: kill(2) on a child of this test that is still
                    // unreaped (its owner waits only after this guard drops).
                    unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
                }
            }
        });
        Watchdog { _alive: alive }
    }
}

fn open_page<'a>(browser: &'a mut Browser, url: &str) -> Page<'a> {
    let mut page = new_tab(browser);
    page.call("Page.navigate", json!({ "url": url }));
    page.browser.event("Page.loadEventFired");
    page.eval("playground.idle()");
    page
}

fn new_tab(browser: &mut Browser) -> Page<'_> {
    let target = browser.call(None, "Target.createTarget", json!({ "url": "about:blank" }));
    let attached =
        browser.call(None, "Target.attachToTarget", json!({ "targetId": target["targetId"], "flatten": true }));
    let session = attached["sessionId"].as_str().expect("a session id").to_string();
    let mut page = Page { browser, session };
    page.call("Page.enable", json!({}));
    page.call("Runtime.enable", json!({}));
    // Chromium's own complaints: a refused load, a blocked script or style
    // (the Content-Security-Policy), a failed request.
    page.call("Log.enable", json!({}));
    page.call(
        "Emulation.setDeviceMetricsOverride",
        json!({ "width": 1440, "height": 900, "deviceScaleFactor": 1, "mobile": false }),
    );
    page
}

/// Asserts the drawn graph is whole: no `NaN` in it, and no two nodes on
/// top of each other.
fn assert_graph_drawn_cleanly(page: &mut Page) {
    let found = page.eval(
        r#"(() => {
          const svg = document.querySelector('#graph svg');
          const nodes = [...svg.querySelectorAll('.g-node')].map((node) => [node.dataset.id, node.getBoundingClientRect()]);
          const overlaps = [];
          nodes.forEach(([a, r], i) => nodes.slice(i + 1).forEach(([b, q]) => {
            if (r.left < q.right && q.left < r.right && r.top < q.bottom && q.top < r.bottom) overlaps.push(a + '/' + b);
          }));
          return { nan: svg.outerHTML.includes('NaN'), overlaps, nodes: nodes.length };
        })()"#,
    );
    assert_eq!(found["nan"], false, "{found}");
    assert_eq!(found["overlaps"], json!([]), "{found}");
    assert!(found["nodes"].as_u64().is_some_and(|count| count > 0), "{found}");
}

/// The width the graph is drawn at, in pixels.
fn page_width(page: &mut Page) -> f64 {
    page.eval("Number(document.querySelector('#graph svg').getAttribute('width'))").as_f64().expect("a width")
}

/// Exceptions thrown and errors logged by the page or by Chromium about
/// it: there must be none.
fn page_errors(browser: &mut Browser) -> Vec<String> {
    let mut errors: Vec<String> = browser
        .take_events("Runtime.exceptionThrown")
        .iter()
        .map(|event| event["params"]["exceptionDetails"].to_string())
        .collect();
    errors.extend(
        browser
            .take_events("Runtime.consoleAPICalled")
            .iter()
            .filter(|event| event["params"]["type"] == "error")
            .map(|event| event["params"]["args"].to_string()),
    );
    errors.extend(
        browser
            .take_events("Log.entryAdded")
            .iter()
            .filter(|event| event["params"]["entry"]["level"] == "error")
            .map(|event| event["params"]["entry"].to_string()),
    );
    errors
}

#[test]
fn the_booking_conversation_in_the_browser() {
    let Some(binary) = chromium() else { return };
    let dir = temp_dir("serve-page");
    let server = Server::start(&dir, &["booking.flow"]);
    let mut browser = Browser::start(&binary, dir.join("profile"));
    let _watchdog = Watchdog::start(vec![browser.child.id(), server.child.id()]);
    let version = browser.call(None, "Browser.getVersion", json!({}));
    assert!(version["product"].as_str().unwrap_or_default().contains("Chrome"), "{version}");

    let mut page = open_page(&mut browser, &format!("{}/", server.url));
    assert_eq!(page.eval("document.querySelector('#run-form').hidden"), true, "booking has no workflow");
    let seen = page.seen();
    assert_eq!(seen["program"], "booking", "{seen:#}");
    assert_eq!(seen["state"], "idle", "{seen:#}");
    assert!(!seen["session"].as_str().unwrap_or_default().is_empty(), "a session was opened: {seen:#}");
    assert_eq!(seen["steps_drawn"], 6, "every step of booking is drawn: {seen:#}");
    assert_graph_drawn_cleanly(&mut page);
    // Every control has a name a screen reader can say.
    let unnamed = page.eval(
        "[...document.querySelectorAll('input, select, textarea, button')]\
         .filter((control) => !(control.labels && control.labels.length) && !control.getAttribute('aria-label') \
           && !control.textContent.trim()).map((control) => control.id)",
    );
    assert_eq!(unnamed, json!([]), "controls without a name");
    assert_eq!(page.eval("document.querySelector('#graph svg').getAttribute('role')"), "img");
    let before = page_width(&mut page);
    page.eval("document.querySelector('#zoom-in').click()");
    assert!(page_width(&mut page) > before, "zoomed in");
    page.eval("document.querySelector('#zoom-fit').click()");
    assert_eq!(page_width(&mut page), before, "fit is the picture as first drawn");
    assert_eq!(seen["current"], Value::Null, "{seen:#}");

    page.say("Book the Grand Hotel for 2 guests on 2026-12-04");
    let seen = page.seen();
    assert_eq!(seen["errors"], json!([]), "{seen:#}");
    assert_eq!(seen["reply"], "Shall I book Grand Hotel on 2026-12-04 for 2 guests?", "{seen:#}");
    assert_eq!(seen["current"], "confirm", "{seen:#}");
    assert_eq!(seen["current_flow"], "booking", "{seen:#}");
    assert_eq!(seen["data"], json!({ "hotel": "Grand Hotel", "date": "2026-12-04", "guests": "2" }), "{seen:#}");
    assert_eq!(
        seen["trace"], "booking/confirm · ran ask_hotel, ask_date, confirm · needs_input · 1 model call",
        "{seen:#}"
    );
    assert_eq!(seen["model_calls"].as_array().map(Vec::len), Some(1), "{seen:#}");
    for edge in ["message>entry", "entry>ask_hotel", "ask_hotel>ask_date", "ask_date>confirm"] {
        assert!(seen["taken"].as_array().is_some_and(|taken| taken.contains(&json!(edge))), "{edge} marked: {seen:#}");
    }
    assert!(seen["events"].as_array().is_some_and(|events| events.contains(&json!("step_skipped"))), "{seen:#}");

    page.say("yes");
    let seen = page.seen();
    assert_eq!(seen["errors"], json!([]), "{seen:#}");
    let reply = seen["reply"].as_str().unwrap_or_default();
    assert!(reply.starts_with("Booked! Your confirmation number is GH-"), "{seen:#}");
    assert_eq!(seen["current"], "complete", "the booking flow ended: {seen:#}");
    assert!(seen["taken"].as_array().is_some_and(|taken| taken.contains(&json!("confirm>book"))), "{seen:#}");
    assert!(seen["taken"].as_array().is_some_and(|taken| taken.contains(&json!("book>complete"))), "{seen:#}");
    assert_eq!(seen["data"]["confirmed"], "true", "{seen:#}");
    assert!(reply.ends_with(&format!("{}.", seen["data"]["booking_id"].as_str().unwrap_or("?"))), "{seen:#}");
    assert_eq!(seen["messages"], 4, "{seen:#}");

    let png = page.screenshot();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    std::fs::write(dir.join("serve-playground.png"), &png).expect("screenshot written");
    if std::env::var_os("FLOWC_UPDATE_SCREENSHOT").is_some() {
        std::fs::write(root().join("docs/serve-playground.png"), &png).expect("docs screenshot written");
    }

    // A reload keeps the conversation: the page reads the session back,
    // and it goes on (a second booking).
    let before = seen;
    page.call("Page.reload", json!({}));
    page.browser.event("Page.loadEventFired");
    page.eval("playground.idle()");
    let seen = page.seen();
    assert_eq!(seen["session"], before["session"], "{seen:#}");
    assert_eq!(seen["messages"], 4, "{seen:#}");
    assert_eq!(seen["reply"], before["reply"], "{seen:#}");
    assert_eq!(seen["data"], before["data"], "{seen:#}");
    page.say("Book the Ritz Paris for 3 guests on 2026-12-10");
    let seen = page.seen();
    assert_eq!(seen["reply"], "Shall I book Ritz Paris on 2026-12-10 for 3 guests?", "{seen:#}");
    assert_eq!(seen["current"], "confirm", "{seen:#}");
    assert_eq!(seen["messages"], 6, "{seen:#}");

    // A new session, then the first one opened again from the list.
    let finished = seen;
    page.eval("document.querySelector('#new-session').click()");
    page.eval("playground.idle()");
    let seen = page.seen();
    assert_ne!(seen["session"], finished["session"], "{seen:#}");
    assert_eq!(seen["messages"], 0, "{seen:#}");
    assert_eq!(seen["data"], json!({}), "{seen:#}");
    let listed = page.eval("[...document.querySelectorAll('#session-pick option')].map((option) => option.value)");
    assert_eq!(listed, json!(["", finished["session"]]), "the finished session is listed");
    page.eval(&format!(
        "(() => {{ const pick = document.querySelector('#session-pick'); pick.value = {}; \
         pick.dispatchEvent(new Event('change')); }})()",
        finished["session"]
    ));
    page.eval("playground.idle()");
    let seen = page.seen();
    assert_eq!(seen["session"], finished["session"], "{seen:#}");
    assert_eq!(seen["messages"], 6, "{seen:#}");
    assert_eq!(seen["current"], "confirm", "{seen:#}");
    assert_eq!(seen["reply"], finished["reply"], "{seen:#}");
    assert_eq!(seen["data"], finished["data"], "{seen:#}");

    let errors = page_errors(&mut browser);
    assert!(errors.is_empty(), "the page reported errors: {errors:#?}");
}

#[test]
fn a_workflow_run_fills_in_and_resumes_in_the_browser() {
    let Some(binary) = chromium() else { return };
    let dir = temp_dir("serve-page-run");
    let server = Server::start(&dir, &["booking.flow", "onboarding.flow"]);
    let mut browser = Browser::start(&binary, dir.join("profile"));
    let _watchdog = Watchdog::start(vec![browser.child.id(), server.child.id()]);

    let mut page = open_page(&mut browser, &format!("{}/#program=onboarding", server.url));
    let seen = page.seen();
    assert_eq!(seen["program"], "onboarding", "{seen:#}");
    assert_eq!(seen["run_status"], Value::Null, "{seen:#}");
    assert_eq!(page.eval("document.querySelector('#composer').hidden"), true, "a workflow is not chatted with");
    assert_eq!(page.eval("document.querySelector('#new-session').hidden"), true);
    assert_graph_drawn_cleanly(&mut page);
    assert_eq!(page.eval("document.querySelector('#run-flow').value"), "onboarding");

    let data = json!({ "company": "Initech", "contacts": [{ "name": "Ann", "email": "ann@initech.test" }] });
    page.eval(&format!("document.querySelector('#run-data').value = {}", json!(data.to_string())));
    page.eval("document.querySelector('#start-run').click()");
    page.eval("playground.runStopped()");
    let seen = page.seen();
    assert_eq!(seen["run_status"], "waiting until 2026-01-06T10:00:00Z", "{seen:#}");
    let steps: Vec<&str> = seen["run_steps"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(steps[0].starts_with("start — completed"), "{seen:#}");
    assert!(steps[1].starts_with("create_account — completed"), "{seen:#}");
    assert!(steps[2].starts_with("welcome_contacts — completed"), "{seen:#}");
    assert!(steps[3].starts_with("wait_a_day — waiting"), "{seen:#}");
    assert_eq!(seen["current"], "wait_a_day", "{seen:#}");
    assert!(
        seen["taken"].as_array().is_some_and(|taken| taken.contains(&json!("create_account>welcome_contacts"))),
        "{seen:#}"
    );
    assert!(seen["data"]["account_id"].as_str().is_some_and(|id| id.starts_with("ACC-")), "{seen:#}");
    assert_eq!(seen["resume_shown"], true, "{seen:#}");

    page.eval("document.querySelector('#resume-run').click()");
    page.eval("playground.runStopped()");
    let seen = page.seen();
    assert_eq!(seen["run_status"], "completed", "{seen:#}");
    assert_eq!(seen["current"], "complete", "{seen:#}");
    assert_eq!(seen["resume_shown"], false, "{seen:#}");
    let steps: Vec<&str> = seen["run_steps"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(steps[3].starts_with("wait_a_day — completed"), "{seen:#}");
    assert!(steps[4].starts_with("check — completed"), "{seen:#}");
    assert_eq!(seen["errors"], json!([]), "{seen:#}");

    // A second run, cancelled while it waits: never resumed.
    page.eval("document.querySelector('#start-run').click()");
    page.eval("playground.runStopped()");
    let seen = page.seen();
    assert_eq!(seen["run_status"], "waiting until 2026-01-06T10:00:00Z", "{seen:#}");
    page.eval("document.querySelector('#cancel-run').click()");
    page.eval("playground.runStopped()");
    let seen = page.seen();
    assert_eq!(seen["run_status"], "cancelled", "{seen:#}");
    assert_eq!(seen["resume_shown"], false, "{seen:#}");
    // onboarding draws no abort marker (nothing in it aborts): the run is
    // shown where it stopped.
    assert_eq!(seen["current"], "wait_a_day", "{seen:#}");
    let steps: Vec<&str> = seen["run_steps"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(steps[4].starts_with("check — pending"), "{seen:#}");
    let errors = page_errors(&mut browser);
    assert!(errors.is_empty(), "the page reported errors: {errors:#?}");
}

#[test]
fn with_tokens_the_page_asks_for_one_and_the_graph_route_needs_it() {
    const TOKEN: &str = "acme-secret-0123456789";
    let dir = temp_dir("serve-page-token");
    let server = Server::start_with(&dir, &["booking.flow"], &["--token", &format!("acme={TOKEN}")], &[]);

    // The page and its files hold no data: no token needed. The graph does.
    let client = reqwest::blocking::Client::new();
    let get = |path: &str, token: Option<&str>| {
        let mut request = client.get(format!("{}{path}", server.url));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().expect("the server answers");
        let status = response.status().as_u16();
        (status, response.text().unwrap_or_default())
    };
    assert_eq!(get("/", None).0, 200);
    assert_eq!(get("/playground/app.js", None).0, 200);
    let (status, body) = get("/v1/programs/booking/graph", None);
    assert_eq!(status, 401, "{body}");
    let (status, body) = get("/v1/programs/booking/graph", Some(TOKEN));
    assert_eq!(status, 200, "{body}");
    let graph: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(graph["agent"], "Concierge");
    let (status, body) = get("/v1/programs/nope/graph", Some(TOKEN));
    assert_eq!(status, 404, "{body}");
    let error: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(error["error"]["code"], "program_not_found");

    let Some(binary) = chromium() else { return };
    let mut browser = Browser::start(&binary, dir.join("profile"));
    let _watchdog = Watchdog::start(vec![browser.child.id(), server.child.id()]);
    let mut page = new_tab(&mut browser);
    page.call("Page.navigate", json!({ "url": format!("{}/", server.url) }));
    // The first API request is refused; the page asks, as a person would be asked.
    let dialog = page.browser.event("Page.javascriptDialogOpening");
    assert_eq!(dialog["params"]["type"], "prompt", "{dialog}");
    page.call("Page.handleJavaScriptDialog", json!({ "accept": true, "promptText": TOKEN }));
    page.browser.event("Page.loadEventFired");
    page.eval("playground.idle()");
    let seen = page.seen();
    assert!(seen["session"].as_str().is_some_and(|id| id.starts_with("acme_")), "a session of tenant acme: {seen:#}");
    page.say("Book the Grand Hotel for 2 guests on 2026-12-04");
    let seen = page.seen();
    assert_eq!(seen["reply"], "Shall I book Grand Hotel on 2026-12-04 for 2 guests?", "{seen:#}");
    assert_eq!(seen["current"], "confirm", "{seen:#}");
    // Chromium logs the one refused request, the one that made the page ask.
    let errors = page_errors(&mut browser);
    assert_eq!(errors.len(), 1, "the page reported errors: {errors:#?}");
    assert!(errors[0].contains("status of 401") && errors[0].contains("/v1/programs\""), "{errors:#?}");
}

/// A weak model behind a fake OpenAI-compatible server (as in
/// tests/it/grounding.rs): asked which hotel, it also invents a date,
/// citing "please", and a number of guests, citing nothing. The page lists
/// both as set aside, with grounding's reasons, and the data holds only
/// the hotel.
#[test]
fn what_grounding_set_aside_is_listed_with_its_reasons() {
    let Some(binary) = chromium() else { return };
    let cited = |evidence: Value, value: Value| json!({ "evidence": evidence, "value": value });
    let model = FakeServer::start(fake::openai(Facts::new(&[
        ("Hi, I'd like to book a hotel room", json!({ "flow": "booking" })),
        (
            "The Grand Hotel, please",
            json!({ "fields": {
                "hotel": cited(json!("The Grand Hotel"), json!("Grand Hotel")),
                "date": cited(json!("please"), json!("2026-01-05")),
                "guests": cited(Value::Null, json!(3)),
            }}),
        ),
    ])));
    let base_url = format!("{}/v1", model.url);
    let dir = temp_dir("serve-page-grounding");
    let server = Server::start_with(
        &dir,
        &["booking.flow"],
        &["--provider", "openai", "--model", "weak", "--base-url", &base_url],
        &[("OPENAI_API_KEY", "test-key")],
    );
    let mut browser = Browser::start(&binary, dir.join("profile"));
    let _watchdog = Watchdog::start(vec![browser.child.id(), server.child.id()]);
    let mut page = open_page(&mut browser, &format!("{}/", server.url));

    page.say("Hi, I'd like to book a hotel room");
    let seen = page.seen();
    assert_eq!(seen["current"], "ask_hotel", "{seen:#}");
    assert_eq!(seen["rejections"], json!([]), "{seen:#}");

    page.say("The Grand Hotel, please");
    let seen = page.seen();
    assert_eq!(seen["errors"], json!([]), "{seen:#}");
    assert_eq!(seen["data"], json!({ "hotel": "Grand Hotel" }), "nothing invented is written: {seen:#}");
    let rejections: Vec<&str> = seen["rejections"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(rejections.len(), 2, "{seen:#}");
    assert!(
        rejections.iter().any(|text| text.starts_with("date = 2026-01-05 — ") && text.contains("cited: “please”")),
        "{seen:#}"
    );
    assert!(rejections.iter().any(|text| text.starts_with("guests = 3 — ")), "{seen:#}");
    assert!(
        seen["model_calls"]
            .as_array()
            .is_some_and(|calls| calls.iter().all(|call| call.as_str().unwrap_or("").contains("openai"))),
        "{seen:#}"
    );
    let errors = page_errors(&mut browser);
    assert!(errors.is_empty(), "the page reported errors: {errors:#?}");
}

/// Support's frustrated user: one turn, two directives to the handoff flow
/// (the branch's, applied, and the signal's, which lost the merge). The
/// page lists both with their sources, marks the jump from triage into
/// handoff, and the conversation stands at the end of the handoff flow.
#[test]
fn directives_are_listed_with_their_sources() {
    let Some(binary) = chromium() else { return };
    let dir = temp_dir("serve-page-support");
    let server = Server::start(&dir, &["support.yaml"]);
    let mut browser = Browser::start(&binary, dir.join("profile"));
    let _watchdog = Watchdog::start(vec![browser.child.id(), server.child.id()]);
    let mut page = open_page(&mut browser, &format!("{}/", server.url));
    assert_graph_drawn_cleanly(&mut page);
    page.eval("document.querySelector('#show-failure').click()");
    assert_graph_drawn_cleanly(&mut page);
    page.say("Hi, I need help");
    page.say("ann@example.com");
    let seen = page.seen();
    assert_eq!(seen["current"], "ask_issue", "{seen:#}");
    assert_eq!(seen["directives"], json!([]), "{seen:#}");

    page.say("this is terrible, I want to talk to a person");
    let seen = page.seen();
    assert_eq!(seen["errors"], json!([]), "{seen:#}");
    assert_eq!(
        seen["directives"],
        json!([
            r#"{"goto":"handoff"} from branch:triage.ask_issue#3"#,
            r#"{"goto":{"flow":"handoff","data":{"handoff_reason":"frustrated"}}} from signal:frustrated (not applied)"#,
        ]),
        "{seen:#}"
    );
    assert_eq!(seen["current"], "complete", "{seen:#}");
    assert_eq!(seen["current_flow"], "handoff", "{seen:#}");
    // The signal's data lost with it: only the branch's jump was applied.
    assert_eq!(seen["data"].get("handoff_reason"), None, "{seen:#}");
    assert_eq!(seen["taken"], json!(["ask_issue>entry", "entry>connect", "connect>complete"]), "{seen:#}");
    let errors = page_errors(&mut browser);
    assert!(errors.is_empty(), "the page reported errors: {errors:#?}");
}

/// The graph is of the program's current version: an edit on disk shows
/// on the next request (and the page draws it again for a new session).
#[test]
fn the_graph_follows_an_edit_on_disk() {
    let dir = temp_dir("serve-page-edit");
    let program = dir.join("booking.flow");
    let text = std::fs::read_to_string(root().join("flows/booking.flow")).expect("booking.flow");
    std::fs::write(&program, &text).expect("copy written");
    // An absolute path: `join` keeps it as it is.
    let server = Server::start(&dir, &[program.to_str().expect("a UTF-8 path")]);
    let steps = || {
        let body = reqwest::blocking::get(format!("{}/v1/programs/booking/graph", server.url))
            .and_then(|response| response.text())
            .expect("the graph");
        let graph: Value = serde_json::from_str(&body).expect("JSON");
        graph["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .filter_map(|node| node["step"].as_str().map(str::to_string))
            .collect::<Vec<_>>()
    };
    assert!(steps().contains(&"ask_guests".to_string()));
    std::fs::write(&program, text.replace("ask_guests", "ask_party")).expect("edit written");
    let after = steps();
    assert!(after.contains(&"ask_party".to_string()) && !after.contains(&"ask_guests".to_string()), "{after:?}");

    // An edit that does not compile: the version before it goes on, and
    // the page says why beside the program's name.
    std::fs::write(&program, text.replace("step ask_guests {", "step ask_guests {{")).expect("broken edit written");
    assert!(steps().contains(&"ask_party".to_string()), "the last good version is served");
    let Some(binary) = chromium() else { return };
    let mut browser = Browser::start(&binary, dir.join("profile"));
    let _watchdog = Watchdog::start(vec![browser.child.id(), server.child.id()]);
    let mut page = open_page(&mut browser, &format!("{}/", server.url));
    let info = page.eval("document.querySelector('#program-info').textContent");
    assert!(info.as_str().is_some_and(|info| info.contains("the file on disk has errors")), "{info}");
    assert_eq!(page.eval("document.querySelector('#program-info').classList.contains('warning')"), true);
    let seen = page.seen();
    assert!(seen["steps_drawn"] == 6 && seen["errors"] == json!([]), "{seen:#}");
}

/// The *test coverage* box lays on the graph what booking's test file
/// reaches (every step, per its own comment), and says which file ran;
/// unticked, the graph is as before.
#[test]
fn the_test_coverage_is_laid_on_the_graph() {
    let Some(binary) = chromium() else { return };
    let dir = temp_dir("serve-page-coverage");
    let server = Server::start(&dir, &["booking.flow"]);
    let mut browser = Browser::start(&binary, dir.join("profile"));
    let _watchdog = Watchdog::start(vec![browser.child.id(), server.child.id()]);
    let mut page = open_page(&mut browser, &format!("{}/", server.url));
    assert_eq!(page.eval("document.querySelectorAll('#graph .g-node.covered').length"), 0);

    page.eval("document.querySelector('#show-coverage').click()");
    page.eval("playground.coverageShown()");
    let shown = page.eval(
        "({ on: document.querySelector('#graph').classList.contains('show-coverage'), \
            steps: document.querySelectorAll('#graph .g-node[data-step]').length, \
            covered: [...document.querySelectorAll('#graph .g-node.covered[data-step]')].map((node) => node.dataset.step), \
            uncovered: document.querySelectorAll('#graph .g-node.uncovered').length, \
            edges: document.querySelectorAll('#graph .g-edge.covered').length, \
            summary: document.querySelector('#coverage-summary').textContent })",
    );
    assert_eq!(shown["on"], true, "{shown:#}");
    assert_eq!(shown["steps"], 6, "{shown:#}");
    let mut covered: Vec<&str> =
        shown["covered"].as_array().expect("a list").iter().filter_map(Value::as_str).collect();
    covered.sort_unstable();
    assert_eq!(covered, ["ask_date", "ask_guests", "ask_hotel", "book", "cancelled", "confirm"], "{shown:#}");
    assert_eq!(shown["uncovered"], 0, "{shown:#}");
    assert!(shown["edges"].as_u64().is_some_and(|edges| edges >= 6), "{shown:#}");
    let summary = shown["summary"].as_str().unwrap_or_default();
    assert!(summary.starts_with("Tests booking.test.yaml ("), "{summary}");
    assert!(summary.contains("booking: steps 6/6"), "{summary}");

    page.eval("document.querySelector('#show-coverage').click()");
    assert_eq!(page.eval("document.querySelector('#graph').classList.contains('show-coverage')"), false);
    assert_eq!(page.eval("document.querySelector('#coverage-summary').hidden"), true);
    let errors = page_errors(&mut browser);
    assert!(errors.is_empty(), "the page reported errors: {errors:#?}");
}
