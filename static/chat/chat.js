// The live chat: one websocket per page, frames in, frames out (motus_web/chat/frames.py).
// Stored records arrive as the dashboard's own HTML fragments, in log order, once each;
// everything else (text as it streams, tools, compaction progress, errors) is transient.
(() => {
  "use strict";
  const root = document.getElementById("chat");
  if (!root) return;
  const $ = (id) => document.getElementById(id);
  const log = $("chat-log");
  const live = $("live");
  const answer = $("live-answer");
  const thinking = $("live-thinking");
  const tools = $("live-tools");
  const notes = $("live-notes");
  const status = $("status");
  const errorBox = $("chat-error");
  const composer = $("composer");
  const text = $("composer-text");
  const modelSelect = $("composer-model");
  const sendButton = $("send");
  const stopButton = $("stop");
  const retryButton = $("retry");
  const replayForm = $("replay-controls");
  const compactForm = $("compact-controls");
  const threshold = Number(root.dataset.threshold) || 0;
  const maxFrameBytes = Number(root.dataset.maxFrameBytes) || 65536;
  const STALL_MS = 30000; // a running turn silent this long: ask the store where it is
  let lastPos = Number(root.dataset.lastPos);
  let socket = null;
  let delay = 500;
  let turnActive = false; // a turn or replay of this session is running (any tab's)
  let awaiting = false; // this tab sent a frame and has had neither its turn nor a refusal yet
  let lastSent = null; // the text of this tab's latest send, until its turn ends
  let closedForGood = false;
  let run = null; // the run (turn, replay, compaction) whose numbered frames this tab follows
  let sn = 0;
  let lastFrameAt = Date.now();
  // The "Compact now" form's one-time token, issued by the server (hello, then each
  // compaction's end): a double click sends the same one twice, and it acts once.
  let compactToken = null;

  const fmt = (n) => (n === null || n === undefined ? "?" : Number(n).toLocaleString("en-US"));
  const say = (message) => { status.textContent = message; };
  const send = (frame) => {
    if (!socket || socket.readyState !== WebSocket.OPEN) return false;
    socket.send(JSON.stringify(frame));
    return true;
  };
  // Nothing new may be sent while a turn runs or this tab waits for the server's answer.
  const busy = () => turnActive || awaiting;

  function setRunning(value) {
    turnActive = value;
    updateControls();
  }

  function updateControls() {
    if (sendButton) sendButton.disabled = busy();
    const compactButton = $("compact-now");
    if (compactButton) compactButton.disabled = busy();
    if (retryButton) retryButton.disabled = busy();
    if (stopButton) stopButton.disabled = !turnActive;
    const replayStop = $("replay-stop");
    const replayStart = $("replay-start");
    if (replayStop) replayStop.disabled = !turnActive;
    if (replayStart) replayStart.disabled = busy();
  }

  // The server refused what this tab sent (rate limit, busy, bad frame...): nothing
  // was stored, so the typed message goes back in the box to send again.
  function refused() {
    if (lastSent !== null && text && !text.value) text.value = lastSent;
    if (lastSent !== null && text) text.focus();
    lastSent = null;
    awaiting = false;
    updateControls();
  }

  function clearLive() {
    answer.textContent = "";
    thinking.textContent = "";
    thinking.hidden = true;
    tools.replaceChildren();
    live.hidden = true;
  }

  function note(message, kind) {
    const p = document.createElement("p");
    p.className = "live-note " + (kind || "");
    p.textContent = message;
    notes.append(p);
    live.hidden = false;
    return p;
  }

  function gauge(tokens) {
    if (tokens === null || tokens === undefined) return;
    $("gauge-meter").value = tokens;
    $("gauge-text").textContent = fmt(tokens) + (threshold ? " / " + fmt(threshold) : "") + " tokens";
  }

  function showError(frame) {
    $("chat-error-text").textContent = frame.message || "Something went wrong (" + (frame.code || "error") + ").";
    errorBox.hidden = false;
    if (retryButton) retryButton.hidden = !frame.retryable || !composer;
  }

  function extendCurve(frame) {
    const svg = $("token-curves");
    const line = $("replay-curve");
    if (!svg || !line) return;
    const maxX = Number(svg.dataset.maxX);
    const maxY = Number(svg.dataset.maxY);
    const box = svg.viewBox.baseVal;
    const x = (frame.seq / maxX) * box.width;
    const y = box.height - (Math.min(frame.context_tokens, maxY) / maxY) * box.height;
    line.setAttribute("points", (line.getAttribute("points") + " " + x.toFixed(1) + "," + y.toFixed(1)).trim());
    line.dataset.lastX = x.toFixed(1);
    line.dataset.lastY = y.toFixed(1);
  }

  function markFire() {
    const line = $("replay-curve");
    const group = $("replay-fires");
    if (!line || !group || line.dataset.lastX === undefined) return;
    const dot = document.createElementNS("http://www.w3.org/2000/svg", "circle");
    dot.setAttribute("class", "replay-fire");
    dot.setAttribute("cx", line.dataset.lastX);
    dot.setAttribute("cy", line.dataset.lastY);
    dot.setAttribute("r", "4");
    group.append(dot);
  }

  const handlers = {
    hello(frame) {
      if (frame.compact_token) compactToken = frame.compact_token;
      say("Connected");
    },
    // The store's word after a resume or a lost frame: what the live frames said may be incomplete.
    sync(frame) {
      if (frame.last_pos < lastPos) { location.reload(); return; } // this page shows another log
      if (!frame.running) {
        clearLive();
        notes.replaceChildren();
        if (turnActive) say("Done (the end of the turn was read from the stored records).");
        lastSent = null;
        setRunning(false);
      } else {
        answer.textContent = "";
        setRunning(true);
        say("The agent is working… (some live text was missed; the stored reply will show it)");
      }
    },
    record(frame) {
      if (frame.pos <= lastPos) return; // already shown: a reconnect never duplicates
      lastPos = frame.pos;
      log.insertAdjacentHTML("beforeend", frame.html);
      if (frame.kind === "message") {
        if (frame.role === "assistant") { answer.textContent = ""; thinking.textContent = ""; thinking.hidden = true; }
        if (root.dataset.replay) extendCurve(frame);
      }
      if (frame.kind === "compaction" && frame.event === "ok" && root.dataset.replay) markFire();
      gauge(frame.context_tokens);
      log.lastElementChild?.scrollIntoView({ block: "nearest" });
    },
    turn_started(frame) {
      // Errors stay up: a refusal of this tab's send may arrive just before another tab's turn.
      clearLive();
      notes.replaceChildren();
      awaiting = false;
      setRunning(true);
      say(frame.kind === "compact" ? "Compacting the context…" : "The agent is working…");
    },
    queued(frame) {
      // The server runs a few turns at once; this one starts when a slot is free.
      setRunning(true);
      say("Waiting for the server: " + frame.ahead + " other run(s) ahead; it starts by itself.");
    },
    delta(frame) { answer.textContent += frame.text; live.hidden = false; },
    thinking(frame) { thinking.hidden = false; thinking.textContent += frame.text; live.hidden = false; },
    tool_call(frame) {
      const li = document.createElement("li");
      li.id = "call-" + frame.call_id;
      li.textContent = "Calling " + frame.name + "(" + frame.arguments + ") …";
      tools.append(li);
      live.hidden = false;
    },
    tool_result(frame) {
      const li = document.getElementById("call-" + frame.call_id);
      if (!li) return;
      li.classList.add(frame.is_error ? "failed" : "done");
      li.textContent = frame.name + " → " + frame.content.slice(0, 300);
    },
    compaction(frame) {
      if (frame.phase === "started" && frame.manual) {
        const keep = frame.instructions ? ", with the instructions “" + frame.instructions + "”" : ", without instructions";
        note("Compacting now, as asked" + keep + ": " + fmt(frame.tokens_before) + " tokens (threshold " + fmt(frame.threshold) + ")…", "compacting");
      } else if (frame.phase === "started") {
        note("Compacting: " + fmt(frame.tokens_before) + " tokens passed the threshold of " + fmt(frame.threshold) + "…", "compacting");
      } else if (frame.phase === "finished") {
        const by = frame.model === "offline" ? ", summary written by the offline summariser" : "";
        const p = note("Compaction " + frame.number + ": " + fmt(frame.tokens_before) + " → " + fmt(frame.tokens_after) + " tokens" + by + ". ", "compacted");
        const a = document.createElement("a");
        a.href = root.dataset.sessionUrl + "#timeline";
        a.textContent = "See it on the session page";
        p.append(a);
      } else {
        note((frame.skipped ? "Compaction skipped: " : "Compaction failed: ") + frame.error, "warn");
      }
    },
    usage(frame) {
      if (frame.input_tokens !== null) say("The provider counted " + fmt(frame.input_tokens) + " input tokens.");
    },
    error(frame) {
      showError(frame);
      if (frame.refused) refused();
    },
    finished(frame) {
      lastSent = null;
      setRunning(false);
      answer.textContent = "";
      thinking.hidden = true;
      if (frame.kind === "compact") {
        if (frame.next_token) compactToken = frame.next_token;
        if (frame.reason === "compacted" && $("compact-instructions")) $("compact-instructions").value = "";
      }
      if (frame.reason === "compacted") say("Compacted.");
      else if (frame.reason === "already_done") say("That compaction was already done.");
      else if (frame.reason === "not_compacted") say("Not compacted: " + frame.why + ". The context is as it was.");
      else if (frame.reason === "interrupted") say("Stopped. The partial answer is kept, marked as interrupted.");
      else if (frame.reason === "answer") say("Done.");
      else if (frame.reason === "max_steps") say("The agent stopped after too many steps.");
      else say("The turn failed.");
      if (!notes.childElementCount) live.hidden = true;
      tools.replaceChildren();
    },
    replay(frame) {
      $("replay-progress").textContent = frame.done + " of " + frame.total + " messages replayed" +
        ({ finished: " — done.", stopped: " — stopped.", failed: " — failed." }[frame.phase] || "…");
      if (frame.phase === "started") awaiting = false;
      setRunning(frame.phase === "started" || frame.phase === "progress");
      // The comparison table beside the curves reloads when a replay ends.
      if (frame.phase !== "started" && frame.phase !== "progress") {
        document.body.dispatchEvent(new Event("replay-ended"));
      }
    },
  };

  function connect() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    socket = new WebSocket(scheme + "//" + location.host + root.dataset.wsPath);
    socket.addEventListener("open", () => {
      delay = 500;
      // What the old socket streamed may be cut short: the store's records replace it.
      clearLive();
      notes.replaceChildren();
      run = null;
      send({ type: "resume", last_pos: lastPos });
    });
    socket.addEventListener("message", (event) => {
      const frame = JSON.parse(event.data);
      lastFrameAt = Date.now();
      if (frame.sn !== undefined) {
        const gap = frame.run === run ? frame.sn !== sn + 1 : frame.sn !== 1;
        run = frame.run;
        sn = frame.sn;
        if (gap) send({ type: "resume", last_pos: lastPos }); // the answer's sync sets the state
      }
      const handle = handlers[frame.type];
      if (handle) handle(frame);
    });
    socket.addEventListener("close", (event) => {
      root.dataset.socket = "closed " + event.code;
      if (awaiting) {
        refused(); // nothing this tab sent was answered: the text goes back in the box
        if (event.code === 1009) showError({ message: "That message is too big to send (over " + fmt(maxFrameBytes) + " bytes); it is still in the box." });
      }
      if (event.code === 4401 || event.code === 4404) {
        closedForGood = true;
        setRunning(false);
        say(event.code === 4401 ? "You are logged out: log in again to follow this chat." : "This session is not available (deleted, or not yours).");
        showError({ message: event.code === 4401 ? "The connection was closed because you are no longer logged in." : "This session is no longer available." });
        return;
      }
      // A turn this connection started stops with it (its records come back on resume):
      // do not keep Send waiting for an answer that cannot come.
      awaiting = false;
      setRunning(false);
      if (closedForGood) return;
      say(event.code === 1013 ? "Live updates are unavailable; reconnecting…" : "Connection lost; reconnecting…");
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 10000);
    });
  }

  // Send a frame that starts work; false (and an error shown) when the socket is down.
  function start(frame) {
    if (busy()) return false;
    if (new TextEncoder().encode(JSON.stringify(frame)).length > maxFrameBytes) {
      showError({ message: "That message is too big to send (over " + fmt(maxFrameBytes) + " bytes); it is still in the box." });
      return false;
    }
    if (!send(frame)) {
      showError({ message: "Not connected, so nothing was sent: the message is still in the box; send it once the page has reconnected." });
      return false;
    }
    errorBox.hidden = true;
    awaiting = true;
    updateControls();
    return true;
  }

  if (composer) {
    composer.addEventListener("submit", (event) => {
      event.preventDefault();
      const value = text.value.trim();
      if (!value || busy()) return; // the message stays in the box
      const frame = { type: "send", text: value };
      if (modelSelect) frame.model = modelSelect.value;
      if (!start(frame)) return;
      lastSent = text.value;
      text.value = "";
    });
    text.addEventListener("keydown", (event) => {
      if (event.key !== "Enter" || !(event.ctrlKey || event.metaKey)) return;
      event.preventDefault();
      if (!busy()) composer.requestSubmit();
    });
    stopButton.addEventListener("click", () => send({ type: "stop" }));
    retryButton.addEventListener("click", () => {
      const frame = { type: "retry" };
      if (modelSelect) frame.model = modelSelect.value;
      lastSent = null;
      start(frame);
    });
  }
  if (replayForm) {
    replayForm.addEventListener("submit", (event) => {
      event.preventDefault();
      start({ type: "replay", speed: Number($("replay-speed").value) });
    });
    $("replay-stop").addEventListener("click", () => send({ type: "stop" }));
  }
  if (compactForm) {
    compactForm.addEventListener("submit", (event) => {
      event.preventDefault();
      const frame = { type: "compact", token: compactToken };
      const instructions = $("compact-instructions").value.trim();
      if (instructions) frame.instructions = instructions;
      start(frame);
    });
  }
  // A turn whose end never arrives: ask the store (the answer's sync says whether it runs).
  setInterval(() => {
    if (turnActive && Date.now() - lastFrameAt > STALL_MS) {
      lastFrameAt = Date.now();
      send({ type: "resume", last_pos: lastPos });
    }
  }, 5000);
  connect();
})();
