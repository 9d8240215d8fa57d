// The playground: picks a program, holds a conversation through the
// session API (the reply streamed as server-sent events), and shows where
// the conversation stands on the program's graph, the last turn's trace and
// the session data; for workflows, starts a run and follows its event
// stream. Only the server's public API is used.
"use strict";

(function () {
  const $ = (selector) => document.querySelector(selector);
  const state = {
    programs: [],
    program: null,
    graph: null,
    session: null,
    current: null,
    data: {},
    busy: false,
    idleWaiters: [],
    run: null,
    runStream: null,
    runFollow: null,
    coverage: null,
  };

  // ---- small helpers -------------------------------------------------------

  function text(tag, content, className) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (content !== undefined && content !== null) node.textContent = content;
    return node;
  }

  function show(value) {
    if (typeof value === "string") return value;
    return JSON.stringify(value);
  }

  function setStatus(message, isError) {
    const status = $("#status");
    status.textContent = message || "";
    status.classList.toggle("error", Boolean(isError));
  }

  function setBusy(busy) {
    state.busy = busy;
    document.body.dataset.state = busy ? "busy" : "idle";
    $("#send").disabled = busy || !state.session;
    $("#message").disabled = busy || !state.session;
    $("#new-session").disabled = busy;
    $("#program").disabled = busy;
    if (!busy) {
      const waiters = state.idleWaiters.splice(0);
      waiters.forEach((resolve) => resolve());
      if (state.session) $("#message").focus();
    }
  }

  // A server with tokens answers 401 without one: the page then asks for
  // it once and keeps it for the tab (sessionStorage, never a cookie).
  function headers(extra) {
    const token = sessionStorage.getItem("flowc-token");
    return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
  }

  async function authorized(path, init) {
    let response = await fetch(path, { ...init, headers: headers(init.headers || {}) });
    if (response.status === 401) {
      const token = window.prompt("This server needs a token (Authorization: Bearer TOKEN):", "");
      if (token) {
        sessionStorage.setItem("flowc-token", token.trim());
        response = await fetch(path, { ...init, headers: headers(init.headers || {}) });
      }
    }
    return response;
  }

  async function api(method, path, body) {
    const init = { method, headers: { Accept: "application/json" } };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await authorized(path, init);
    return decode(response);
  }

  async function decode(response) {
    const raw = await response.text();
    let value = null;
    try { value = raw ? JSON.parse(raw) : null; } catch (_) { value = null; }
    if (!response.ok) {
      const error = value && value.error ? value.error : { code: String(response.status), message: raw || response.statusText };
      throw new Error(`${error.message} (${error.code})`);
    }
    return value;
  }

  // Server-sent events from a fetch body (POST streams too, which
  // EventSource cannot do): calls onEvent(name, data) for each event.
  async function readEvents(response, onEvent) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let name = "message";
    let data = [];
    const dispatch = () => {
      if (data.length) onEvent(name, data.join("\n"));
      name = "message";
      data = [];
    };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let newline;
      while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(buffer[newline] === "\r" && buffer[newline + 1] === "\n" ? newline + 2 : newline + 1);
        if (line === "") dispatch();
        else if (line.startsWith(":")) continue;
        else {
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          let content = colon < 0 ? "" : line.slice(colon + 1);
          if (content.startsWith(" ")) content = content.slice(1);
          if (field === "event") name = content;
          else if (field === "data") data.push(content);
        }
      }
    }
    dispatch();
  }

  function parse(data) {
    try { return JSON.parse(data); } catch (_) { return data; }
  }

  // ---- programs and the graph ---------------------------------------------

  async function loadPrograms() {
    const value = await api("GET", "/v1/programs");
    // A program is served under its file's stem and its agent's name: one
    // entry per file, by stem, with the other names beside it.
    const byFile = new Map();
    for (const program of value.programs || []) {
      const file = program.file || program.name;
      if (!byFile.has(file)) byFile.set(file, []);
      byFile.get(file).push(program.name);
    }
    state.programs = [...byFile].map(([file, names]) => {
      const stem = file.split("/").pop().replace(/\.[^.]*$/, "");
      const name = names.includes(stem) ? stem : names[0];
      return { name, aliases: names.filter((other) => other !== name) };
    });
    const select = $("#program");
    select.textContent = "";
    for (const program of state.programs) {
      const option = text("option", program.aliases.length ? `${program.name} (${program.aliases.join(", ")})` : program.name);
      option.value = program.name;
      select.appendChild(option);
    }
    const wanted = new URLSearchParams(location.hash.slice(1)).get("program");
    const known = state.programs.find((program) => program.name === wanted || program.aliases.includes(wanted));
    if (known) select.value = known.name;
    if (!state.programs.length) {
      setStatus("The server holds no program.", true);
      setBusy(false);
      return;
    }
    await choose(select.value);
  }

  async function choose(name) {
    history.replaceState(null, "", `#program=${encodeURIComponent(name)}`);
    // The graph route also says what the page needs of the program: its
    // agent, its flows, and what a run of each workflow requires.
    // The list is read again for the program's `reload_error`: an edit on
    // disk that does not compile, while the version before it is served.
    const [graph, listed] = await Promise.all([
      api("GET", `/v1/programs/${encodeURIComponent(name)}/graph`),
      api("GET", "/v1/programs"),
    ]);
    const program = { name, agent: graph.agent, conversation: graph.conversation, flows: graph.flows };
    state.program = program;
    const flows = program.flows.map((flow) => flow.name + (flow.workflow ? " (workflow)" : ""));
    const agent = program.agent ? `${program.agent} · ` : "";
    const info = $("#program-info");
    info.textContent = `${agent}${flows.length ? "flows: " + flows.join(", ") : "no flows"}`;
    const served = (listed.programs || []).find((candidate) => candidate.name === name);
    info.classList.toggle("warning", Boolean(served && served.reload_error));
    if (served && served.reload_error) {
      info.appendChild(text("span", ` · the file on disk has errors; the version before it is served: ${served.reload_error}`));
    }
    state.graph = FlowGraph.render($("#graph"), graph);
    state.coverage = $("#show-coverage").checked ? showCoverage() : null;
    const workflows = program.flows.filter((flow) => flow.workflow);
    $("#run-form").hidden = workflows.length === 0;
    $("#composer").hidden = !program.conversation;
    $("#chat").hidden = !program.conversation;
    $("#new-session").hidden = !program.conversation;
    $("#turn-card").hidden = !program.conversation;
    $("#chat-title-text").textContent = program.conversation ? "Conversation" : "Workflow runs";
    $("#data-title").textContent = program.conversation ? "Session data" : "Run data";
    if (workflows.length) prepareRunForm(workflows);
    resetRun();
    if (program.conversation) {
      if (!(await restoreSession())) await newSession();
    } else {
      state.session = null;
      $("#session-id").textContent = "";
      clearChat("This program has only workflows: start a run below.");
      renderData({});
      setBusy(false);
    }
  }

  // ---- the conversation ----------------------------------------------------

  function clearChat(note) {
    const chat = $("#chat");
    chat.textContent = "";
    if (note) chat.appendChild(text("li", note, "msg note"));
  }

  // The tab's session of each program outlives a reload: the page reads
  // it back from the server (GET /v1/sessions/ID) rather than keeping a copy.
  const sessionKey = () => `flowc-session:${state.program.name}`;

  async function restoreSession() {
    const id = sessionStorage.getItem(sessionKey());
    if (!id) return false;
    setBusy(true);
    try {
      const session = await api("GET", `/v1/sessions/${encodeURIComponent(id)}`);
      state.session = session.id;
      $("#session-id").textContent = session.id;
      clearChat(`Reopened: ${session.turns} earlier turn${session.turns === 1 ? "" : "s"}, shown without their traces.`);
      for (const message of session.history || []) {
        $("#chat").appendChild(text("li", message.text, `msg ${message.role === "user" ? "user" : "assistant"}`));
      }
      $("#chat").scrollTop = $("#chat").scrollHeight;
      state.data = session.data || {};
      renderData(state.data);
      renderTrace(null, []);
      state.current = session.flow && session.step ? state.graph.nodeId(session.flow, session.step) : null;
      highlight(state.current ? [state.current] : [], state.current);
      $("#position").textContent = session.flow ? `· ${session.flow}${session.step ? " / " + session.step : ""}` : "";
      setStatus("");
      await listSessions();
      setBusy(false);
      return true;
    } catch (_) {
      // Deleted, expired or from another server: start afresh (still busy,
      // so `idle()` waits for the new session).
      sessionStorage.removeItem(sessionKey());
      return false;
    }
  }

  async function newSession() {
    setBusy(true);
    try {
      const created = await api("POST", "/v1/sessions", { program: state.program.name });
      state.session = created.id;
      sessionStorage.setItem(sessionKey(), created.id);
      $("#position").textContent = "";
      state.current = null;
      state.data = {};
      $("#session-id").textContent = created.id;
      clearChat(`New session with ${state.program.agent || state.program.name}. Say hello.`);
      renderData({});
      renderTrace(null, []);
      highlight([], null);
      setStatus("");
      await listSessions();
    } catch (error) {
      state.session = null;
      setStatus(`Could not start a session: ${error.message}`, true);
    } finally {
      setBusy(false);
    }
  }

  // The tenant's other sessions of this program (a page of them, newest
  // first), to open one again; read when the tab's session changes.
  async function listSessions() {
    const pick = $("#session-pick");
    let sessions = [];
    try {
      const page = await api("GET", `/v1/sessions?program=${encodeURIComponent(state.program.name)}&limit=100`);
      sessions = (page.sessions || []).filter((session) => session.id !== state.session);
    } catch (_) {
      sessions = [];
    }
    sessions.sort((a, b) => String(b.updated_at).localeCompare(String(a.updated_at)));
    pick.textContent = "";
    const here = text("option", "—");
    here.value = "";
    pick.appendChild(here);
    for (const session of sessions) {
      const where = session.flow ? `${session.flow}${session.step ? "/" + session.step : ""}` : "no flow";
      const label = `…${session.id.slice(-8)} · ${session.turns} turn${session.turns === 1 ? "" : "s"} · ${where}`;
      const option = text("option", label);
      option.value = session.id;
      pick.appendChild(option);
    }
    $("#session-pick-label").hidden = sessions.length === 0;
  }

  async function send(message) {
    const chat = $("#chat");
    chat.appendChild(text("li", message, "msg user"));
    const bubble = text("li", "", "msg assistant streaming");
    chat.appendChild(bubble);
    chat.scrollTop = chat.scrollHeight;
    setBusy(true);
    setStatus("Thinking…");
    const events = [];
    let turn = null;
    let failure = null;
    try {
      const response = await authorized(`/v1/sessions/${encodeURIComponent(state.session)}/messages`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
        body: JSON.stringify({ text: message }),
      });
      const type = response.headers.get("Content-Type") || "";
      if (!response.ok || !type.includes("text/event-stream")) {
        turn = await decode(response);
      } else {
        await readEvents(response, (name, data) => {
          const value = parse(data);
          if (name === "error" || (value && value.error)) {
            failure = value && value.error ? `${value.error.message} (${value.error.code})` : String(value);
          } else if (name === "turn" || (value && typeof value === "object" && "reply" in value && "stopped_reason" in value)) {
            turn = value;
          } else if (value && typeof value === "object" && typeof value.event === "string") {
            events.push(value);
          } else if (value && typeof value === "object" && Array.isArray(value.events)) {
            events.push(...value.events);
          } else {
            const piece = value && typeof value === "object" ? (value.text ?? value.delta ?? "") : String(value);
            bubble.textContent += piece;
            chat.scrollTop = chat.scrollHeight;
          }
        });
      }
      if (failure) throw new Error(failure);
      if (!turn) throw new Error("the server closed the stream before the turn ended");
      bubble.classList.remove("streaming");
      bubble.textContent = turn.reply || "";
      const allEvents = events.length ? events : (turn.events || []);
      bubble.appendChild(text("span", traceLine(turn), "trace"));
      showTurn(turn, allEvents);
      setStatus("");
    } catch (error) {
      bubble.remove();
      chat.appendChild(text("li", `The turn failed: ${error.message}`, "msg error"));
      setStatus("The last turn failed.", true);
    } finally {
      chat.scrollTop = chat.scrollHeight;
      setBusy(false);
    }
  }

  function traceLine(turn) {
    const where = turn.flow ? (turn.step ? `${turn.flow}/${turn.step}` : turn.flow) : "no flow";
    const ran = turn.executed_steps && turn.executed_steps.length ? turn.executed_steps.join(", ") : "-";
    const calls = `${turn.llm_calls} model call${turn.llm_calls === 1 ? "" : "s"}`;
    return `${where} · ran ${ran} · ${turn.stopped_reason} · ${calls}`;
  }

  function showTurn(turn, events) {
    const path = pathOf(turn, events);
    let current = turn.flow && turn.step ? state.graph.nodeId(turn.flow, turn.step) : null;
    // A turn that ends a flow stands at its end marker.
    if (!current && path.length) {
      const last = path[path.length - 1];
      const kind = document.querySelector(`[data-id="${CSS.escape(last)}"]`);
      if (kind && (kind.dataset.kind === "complete" || kind.dataset.kind === "abort")) current = last;
    }
    state.current = current;
    highlight(path, current);
    const ended = current && !turn.flow ? document.querySelector(`[data-id="${CSS.escape(current)}"]`) : null;
    $("#position").textContent = turn.flow
      ? `· ${turn.flow}${turn.step ? " / " + turn.step : ""}`
      : ended ? `· ${ended.dataset.flow} ${ended.dataset.kind === "abort" ? "aborted" : "completed"}` : "· no flow";
    renderData(turn.data || {});
    renderTrace(turn, events);
  }

  // The nodes the turn went through, in order, from the events (they name
  // flows and steps), starting where the previous turn stood.
  function pathOf(turn, events) {
    const graph = state.graph;
    const path = [];
    const push = (id) => { if (id && path[path.length - 1] !== id) path.push(id); };
    if (state.current) push(state.current);
    for (const event of events) {
      switch (event.event) {
        case "routed":
          if (graph.hasEdge("msg_in", graph.terminal(event.flow, "entry"))) push("msg_in");
          push(graph.terminal(event.flow, "entry"));
          break;
        case "flow_entered":
          push(graph.terminal(event.flow, "entry"));
          break;
        case "step_entered":
        case "step_executed":
          push(graph.nodeId(event.flow, event.step));
          break;
        case "flow_completed":
          push(graph.terminal(event.flow, "complete"));
          break;
        case "flow_left":
          if (/abort/.test(event.reason || "")) push(graph.terminal(event.flow, "abort"));
          break;
        default:
          break;
      }
    }
    // Without events (a server that sent only the turn object), the steps
    // the turn ran are still known by name within its flow.
    if (!events.length && turn.flow) for (const step of turn.executed_steps || []) push(graph.nodeId(turn.flow, step));
    return path;
  }

  function highlight(path, current) {
    const taken = [];
    for (let i = 1; i < path.length; i++) {
      if (state.graph.hasEdge(path[i - 1], path[i])) taken.push([path[i - 1], path[i]]);
    }
    state.graph.highlight({ current, visited: path, taken });
  }

  function renderData(data) {
    const list = $("#data");
    list.textContent = "";
    const keys = Object.keys(data).filter((key) => data[key] !== null);
    if (!keys.length) list.appendChild(text("dd", "No data yet.", "none"));
    for (const key of keys) {
      list.appendChild(text("dt", key));
      const changed = JSON.stringify(state.data[key]) !== JSON.stringify(data[key]);
      const value = text("dd", show(data[key]), changed ? "changed" : "");
      value.dataset.key = key;
      list.appendChild(value);
    }
    state.data = data;
  }

  function fill(list, items, render, empty) {
    list.textContent = "";
    if (!items.length && empty) list.appendChild(text("li", empty, "none"));
    for (const item of items) list.appendChild(render(item));
  }

  function renderTrace(turn, events) {
    $("#turn-summary").textContent = turn ? `Turn ${turn.turn}: ${traceLine(turn)}` : "No turn yet.";
    const calls = events.filter((event) => event.event === "model_called");
    fill($("#model-calls"), calls, (call) => {
      const usage = call.usage || {};
      return text("li", `${call.purpose} · ${call.provider} · ${usage.prompt ?? 0} prompt + ${usage.completion ?? 0} completion tokens`);
    }, turn ? "No model call." : "");
    const rejected = events.filter((event) => event.event === "ungrounded" || event.event === "extraction_rejected");
    fill($("#rejections"), rejected, (event) => {
      const item = text("li", "", "rejected");
      const name = event.name || event.field;
      item.appendChild(text("code", `${name} = ${show(event.value)}`));
      item.appendChild(document.createTextNode(` — ${event.reason}`));
      if (event.evidence) item.appendChild(text("div", `cited: “${event.evidence}”`, "muted"));
      return item;
    }, turn ? "Nothing: every value the model proposed was backed by the message." : "");
    fill($("#directives"), turn ? turn.directives || [] : [], (record) => {
      const item = text("li", "", record.applied ? "" : "ignored");
      item.appendChild(text("code", show(record.directive)));
      item.appendChild(document.createTextNode(` from ${record.source}${record.applied ? "" : " (not applied)"}`));
      return item;
    }, turn ? "No directive." : "");
    fill($("#events"), events, (event) => {
      const item = text("li", "");
      item.appendChild(text("span", event.event, "kind"));
      const rest = Object.entries(event)
        .filter(([key, value]) => key !== "event" && value !== null)
        .map(([key, value]) => `${key}: ${show(value)}`);
      if (rest.length) item.appendChild(document.createTextNode(" " + rest.join(", ")));
      return item;
    }, turn ? "The server sent no events for this turn." : "");
  }

  // ---- workflow runs -------------------------------------------------------

  function prepareRunForm(workflows) {
    const select = $("#run-flow");
    select.textContent = "";
    for (const flow of workflows) {
      const option = text("option", flow.title ? `${flow.name} — ${flow.title}` : flow.name);
      option.value = flow.name;
      select.appendChild(option);
    }
    const template = {};
    for (const field of workflows[0].requires) template[field] = "";
    $("#run-data").value = JSON.stringify(template, null, 2);
  }

  function resetRun() {
    if (state.runStream) state.runStream.abort();
    state.run = null;
    state.runStream = null;
    $("#run-panel").hidden = true;
  }

  async function startRun() {
    let data;
    try {
      data = JSON.parse($("#run-data").value || "{}");
    } catch (error) {
      setStatus(`The run's data is not JSON: ${error.message}`, true);
      return;
    }
    resetRun();
    try {
      // `wait: false`: the server answers at once and runs the workflow in
      // the background, so its steps fill in here as they run.
      const run = await api("POST", "/v1/runs", { program: state.program.name, flow: $("#run-flow").value, data, wait: false });
      renderRun(run);
      state.runFollow = followRun(run.run);
      setStatus("");
    } catch (error) {
      setStatus(`Could not start the run: ${error.message}`, true);
    }
  }

  function renderRun(run) {
    state.run = run;
    $("#run-panel").hidden = false;
    $("#run-id").textContent = run.run;
    const status = $("#run-status");
    status.className = `run-status ${run.status}`;
    status.textContent = run.status === "waiting" && run.resume_at
      ? `waiting until ${run.resume_at}`
      : run.status === "running" && run.progress ? `running · ${run.progress}` : run.status;
    if (run.error) status.appendChild(text("span", ` — ${run.error}`, "muted"));
    const steps = run.steps || [];
    fill($("#run-steps"), steps, (step) => {
      const item = text("li", `${step.id} — ${step.status}${step.duration_ms != null ? ` (${step.duration_ms} ms)` : ""}`, step.status === "completed" ? "done" : step.status);
      if (step.error) item.appendChild(text("div", step.error, "muted"));
      return item;
    }, "No step has run yet.");
    $("#resume-run").hidden = run.status !== "waiting" && run.status !== "paused";
    $("#cancel-run").hidden = !["waiting", "running", "paused"].includes(run.status);
    renderData(run.data || {});
    const ran = steps.filter((step) => step.status !== "pending").map((step) => state.graph.nodeId(run.flow, step.id));
    const entry = state.graph.terminal(run.flow, "entry");
    const path = [state.graph.hasEdge("run_in", entry) ? "run_in" : null, entry, ...ran];
    let current = run.step ? state.graph.nodeId(run.flow, run.step) : null;
    if (run.status === "completed") path.push((current = state.graph.terminal(run.flow, "complete")));
    if (run.status === "aborted") path.push((current = state.graph.terminal(run.flow, "abort")));
    highlight(path.filter(Boolean), current || ran[ran.length - 1] || null);
  }

  // Follows GET /v1/runs/ID/events; each event either carries the run
  // object or names a step, and the run is read again when the stream ends.
  async function followRun(id) {
    const controller = new AbortController();
    state.runStream = controller;
    try {
      const response = await authorized(`/v1/runs/${encodeURIComponent(id)}/events`, {
        headers: { Accept: "text/event-stream" },
        signal: controller.signal,
      });
      if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
      await readEvents(response, (name, data) => {
        const value = parse(data);
        if (value && typeof value === "object" && value.run === id && Array.isArray(value.steps)) renderRun(value);
        else if (value && typeof value === "object" && state.run) applyRunEvent(name, value);
      });
      if (state.runStream === controller) renderRun(await api("GET", `/v1/runs/${encodeURIComponent(id)}`));
    } catch (error) {
      if (error.name !== "AbortError") setStatus(`The run's event stream failed: ${error.message}`, true);
    }
  }

  function applyRunEvent(name, event) {
    const run = { ...state.run, steps: [...(state.run.steps || [])] };
    const kind = event.event || name;
    const step = event.step;
    if (step) {
      let record = run.steps.find((candidate) => candidate.id === step);
      if (!record) run.steps.push((record = { id: step, status: "pending" }));
      if (/start/.test(kind)) { record.status = "running"; run.step = step; }
      else if (/complet/.test(kind)) record.status = "completed";
      else if (/fail/.test(kind)) record.status = "failed";
      else if (/skip/.test(kind)) record.status = "skipped";
      else if (/wait/.test(kind)) { record.status = "waiting"; run.step = step; }
    }
    if (event.progress) run.progress = event.progress;
    if (event.status) run.status = event.status;
    if (event.resume_at) run.resume_at = event.resume_at;
    if (event.data) run.data = event.data;
    renderRun(run);
  }

  async function runAction(action) {
    if (!state.run) return;
    try {
      // "Resume now" means now: a waiting run is not due yet.
      const body = action === "resume" ? { now: true } : {};
      const run = await api("POST", `/v1/runs/${encodeURIComponent(state.run.run)}/${action}`, body);
      renderRun(run);
      if (action === "resume") state.runFollow = followRun(run.run);
    } catch (error) {
      setStatus(`Could not ${action} the run: ${error.message}`, true);
    }
  }

  // ---- test coverage -------------------------------------------------------

  // Runs the program's test files on the server (GET .../coverage) and
  // lays what they reach on the graph; the summary says which files ran
  // and, per flow, `flowc test --coverage`'s counts.
  async function showCoverage() {
    const name = state.program && state.program.name;
    if (!name) return;
    const summary = $("#coverage-summary");
    summary.hidden = false;
    summary.textContent = "Running the program's tests…";
    try {
      const coverage = await api("GET", `/v1/programs/${encodeURIComponent(name)}/coverage`);
      if (!state.program || state.program.name !== name || !$("#show-coverage").checked) return;
      state.graph.coverage(coverage);
      $("#graph").classList.add("show-coverage");
      if (!coverage.files.length) {
        summary.textContent = "No test file (*.test.yaml beside the program) names this program.";
      } else {
        const cases = `${coverage.cases} case${coverage.cases === 1 ? "" : "s"}${coverage.failed ? `, ${coverage.failed} failing` : ""}`;
        const flows = coverage.flows.map((flow) => `${flow.flow}: steps ${flow.steps.reached}/${flow.steps.total}, transitions ${flow.transitions.reached}/${flow.transitions.total}`);
        summary.textContent = `Tests ${coverage.files.join(", ")} (${cases}) reach ${flows.join("; ")}`;
      }
      for (const broken of coverage.broken || []) {
        summary.appendChild(text("span", ` · ${broken.file} cannot run: ${broken.reason}`));
      }
    } catch (error) {
      summary.textContent = `Could not run the tests: ${error.message}`;
    }
  }

  // ---- wiring --------------------------------------------------------------

  function wire() {
    $("#program").addEventListener("change", (event) => { choose(event.target.value).catch(fail); });
    // Drawn again too: a program edited on disk is served in its new
    // version to new sessions, and its graph should match.
    $("#new-session").addEventListener("click", () => {
      sessionStorage.removeItem(sessionKey());
      setBusy(true);
      choose(state.program.name).catch(fail);
    });
    $("#session-pick").addEventListener("change", (event) => {
      if (!event.target.value) return;
      sessionStorage.setItem(sessionKey(), event.target.value);
      restoreSession().then((restored) => (restored ? undefined : newSession())).catch(fail);
    });
    $("#composer").addEventListener("submit", (event) => {
      event.preventDefault();
      const input = $("#message");
      const message = input.value.trim();
      if (!message || state.busy || !state.session) return;
      input.value = "";
      send(message);
    });
    for (const how of ["in", "out", "fit"]) {
      $(`#zoom-${how}`).addEventListener("click", () => state.graph && state.graph.zoom(how));
    }
    $("#show-failure").addEventListener("change", (event) => {
      $("#graph").classList.toggle("hide-failure", !event.target.checked);
    });
    $("#show-coverage").addEventListener("change", (event) => {
      if (event.target.checked) {
        state.coverage = showCoverage();
      } else {
        state.coverage = null;
        $("#graph").classList.remove("show-coverage");
        $("#coverage-summary").hidden = true;
      }
    });
    $("#run-form").addEventListener("submit", (event) => {
      event.preventDefault();
      following(startRun());
    });
    $("#resume-run").addEventListener("click", () => following(runAction("resume")));
    $("#cancel-run").addEventListener("click", () => following(runAction("cancel")));
  }

  // `runStopped()` right after a click must wait for the run the click
  // starts: the promise covers the request, then the stream it opens.
  function following(started) {
    const outer = started.then(() => (state.runFollow === outer ? undefined : state.runFollow));
    state.runFollow = outer;
  }

  function fail(error) {
    setStatus(error.message, true);
    setBusy(false);
  }

  // For tests and for people at the console: `await playground.idle()`
  // resolves when no turn is in flight (an event, not a timer).
  window.playground = {
    idle: () => (state.busy || document.body.dataset.state === "loading" ? new Promise((resolve) => state.idleWaiters.push(resolve)) : Promise.resolve()),
    get session() { return state.session; },
    get run() { return state.run; },
    // Resolves when the run's event stream has ended (the run stopped:
    // waiting, paused or finished) and the run was read again.
    runStopped: () => state.runFollow || Promise.resolve(),
    // Resolves when the test coverage asked for is on the graph.
    coverageShown: () => state.coverage || Promise.resolve(),
  };

  wire();
  setBusy(true);
  loadPrograms().catch(fail);
})();
