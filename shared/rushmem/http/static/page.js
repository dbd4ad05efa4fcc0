// The memory page: every call goes to the API's own routes (same origin, relative paths), and every
// text from the API is put in the page with textContent, never parsed as HTML: memories can hold
// hostile text. No dependencies, no build step.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const PAGE = 100; // memories per list request
  const EXPORT_PAGE = 500; // the API's largest page
  const state = { memories: [], cursor: null, selected: null, recalled: false };

  function el(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }

  function say(text, isError) {
    const status = $("status");
    status.textContent = text;
    status.className = isError ? "error" : "";
  }

  const userId = () => $("user").value.trim();
  const projectId = () => $("project").value.trim();
  // The time control: a UTC day, read as its end (what was true by then); empty: now.
  const asOf = () => ($("as-of").value ? `${$("as-of").value}T23:59:59Z` : "");
  // UTC, to the minute: what the API stores, the same on every machine.
  const when = (iso) => (iso ? iso.replace("T", " ").slice(0, 16) : "");

  function params(extra) {
    const query = new URLSearchParams();
    if (userId()) query.set("user_id", userId()); // with a JWT the API takes the token's user
    for (const [key, value] of Object.entries(extra || {})) {
      if (value !== undefined && value !== null && value !== "") query.set(key, String(value));
    }
    return query;
  }

  async function api(method, path, query, body) {
    const url = path + (query && query.toString() ? "?" + query.toString() : "");
    const init = { method, headers: { Accept: "application/json" } };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const answer = await fetch(url, init);
    if (answer.status === 204) return null;
    let data = null;
    try {
      data = await answer.json();
    } catch (_) {
      data = null; // an answer without a JSON body: its status says enough
    }
    if (!answer.ok) {
      const message = data && data.message ? data.message : `${answer.status} ${answer.statusText}`;
      throw new Error(data && data.field ? `${message} (field: ${data.field})` : message);
    }
    return data;
  }

  function guarded(task) {
    return async (event) => {
      if (event) event.preventDefault();
      try {
        await task();
      } catch (error) {
        say(error.message, true);
      }
    };
  }

  function tags(memory, parent) {
    if (memory.is_evergreen) parent.append(el("span", "evergreen", "tag"));
    if (memory.superseded_by) parent.append(el("span", "superseded", "tag"));
    if (memory.stale_at) parent.append(el("span", "stale: may no longer hold", "tag warn"));
    for (const mark of memory.injection || []) parent.append(el("span", `injection: ${mark}`, "tag warn"));
  }

  function openButton(id) {
    const button = el("button", "Open", "link");
    button.type = "button";
    button.dataset.id = id;
    button.addEventListener("click", guarded(() => openMemory(id)));
    return button;
  }

  // ---- recall ------------------------------------------------------------------------
  async function recall() {
    const body = { query: $("query").value, limit: Number($("limit").value) || 5 };
    if (userId()) body.user_id = userId();
    if (projectId()) body.project_id = projectId();
    if (asOf()) body.as_of = asOf();
    const named = $("explain-ids").value.split(/[\s,]+/).filter(Boolean);
    if ($("explain").checked || named.length) body.explain = true;
    if (named.length) body.explain_ids = named;
    const result = await api("POST", "recall", null, body);
    $("prompt-block").textContent = result.prompt_block || "(empty: no memory matched)";
    const list = $("recalled");
    list.replaceChildren();
    for (const memory of result.memories) {
      const item = el("li");
      item.append(el("span", memory.content, "content"), el("span", memory.category, "tag"));
      tags(memory, item);
      item.append(" ", el("span", `score ${memory.score.toFixed(3)}`, "score"), " ", openButton(memory.id));
      list.append(item);
    }
    renderExplanation(result.explanation);
    $("block-title").textContent = asOf() ? `The prompt block as of ${$("as-of").value}` : "The prompt block";
    $("recall-result").hidden = false;
    state.recalled = true;
    say(result.unavailable ? `No memories: ${result.unavailable}` : `Recalled ${result.memories.length} memories.`);
  }

  const num = (value, digits) => (value === null || value === undefined ? "" : Number(value).toFixed(digits));

  function renderExplanation(explanation) {
    $("explanation").hidden = !explanation;
    if (!explanation) return;
    const w = explanation.weights;
    $("explanation-summary").textContent =
      `Evaluated at ${when(explanation.now)}${explanation.as_of ? `, as of ${when(explanation.as_of)}` : ""}; ` +
      `${explanation.candidates.length} candidates (up to ${explanation.candidates_per_leg} per leg), ` +
      `limit ${explanation.limit}, weights vector ${w.vector} / text ${w.text}, MMR λ ${w.mmr_lambda}` +
      (explanation.min_score ? `, minimum score ${explanation.min_score}` : "") +
      (explanation.reranked ? ", reranked" : "");
    const body = $("candidates").tBodies[0];
    body.replaceChildren();
    for (const c of explanation.candidates) {
      const s = c.signals;
      const row = el("tr", null, c.outcome === "kept" ? "" : "dropped");
      row.dataset.id = c.id;
      const memory = el("td", null, "content");
      memory.append(el("span", c.content, "text"), " ", openButton(c.id));
      const outcome = el("td");
      outcome.append(el("span", c.position ? `kept #${c.position}` : c.outcome.replaceAll("_", " "), "outcome"), el("div", c.outcome === "kept" ? "" : c.why, "hint why"));
      row.append(
        memory,
        outcome,
        el("td", num(c.score, 3), "score"),
        el("td", `${num(s.vector_similarity, 3)}${s.vector_position ? ` (#${s.vector_position})` : ""}`, "score"),
        el("td", `${num(s.text_rank, 2)}${s.text_position ? ` (#${s.text_position})` : ""}`, "score"),
        el("td", s.date_window ? "in window" : ""),
        el("td", num(s.decay, 3), "score"),
        el("td", num(s.mmr_penalty, 3), "score"),
        el("td", num(s.reranker_score, 3), "score"),
      );
      body.append(row);
    }
    const list = $("named");
    list.replaceChildren();
    for (const n of explanation.named || []) {
      const item = el("li");
      item.dataset.id = n.id;
      item.append(el("code", n.id), " ", el("span", n.outcome.replaceAll("_", " "), "outcome"), ": ", el("span", n.why, "why"));
      list.append(item);
    }
    $("named-title").hidden = !(explanation.named || []).length;
  }

  // ---- list --------------------------------------------------------------------------
  async function list(more) {
    const day = (id) => ($(id).value ? `${$(id).value}T00:00:00Z` : "");
    const query = params({
      project_id: projectId(),
      categories: $("category").value,
      created_after: day("created-after"),
      created_before: day("created-before"),
      include_inactive: $("inactive").checked ? "true" : "",
      as_of: asOf(),
      limit: PAGE,
      cursor: more ? state.cursor : "",
    });
    const page = await api("GET", "memories", query);
    state.memories = more ? state.memories.concat(page.memories) : page.memories;
    state.cursor = page.next_cursor;
    renderList();
    say(`Listed ${state.memories.length} memories${state.cursor ? " (more to load)" : ""}.`);
  }

  function renderList() {
    const text = $("text").value.trim().toLowerCase();
    const shown = state.memories.filter((m) => !text || m.content.toLowerCase().includes(text));
    const body = $("memories").tBodies[0];
    body.replaceChildren();
    for (const memory of shown) {
      const row = el("tr");
      row.dataset.id = memory.id;
      // Inactive at the time shown (the time control's, else now): replaced or expired by then.
      const at = asOf() ? new Date(asOf()) : new Date();
      const ended = memory.valid_until ? new Date(memory.valid_until) <= at : Boolean(memory.superseded_by);
      if (ended || (memory.expires_at && new Date(memory.expires_at) <= at)) row.className = "inactive";
      if (memory.id === state.selected) row.classList.add("selected");
      const content = el("td", null, "content");
      content.append(el("span", memory.content, "text"));
      tags(memory, content);
      const actions = el("td");
      actions.append(openButton(memory.id));
      row.append(content, el("td", memory.category), el("td", memory.project_id || ""), el("td", when(memory.created_at)), actions);
      body.append(row);
    }
    $("count").textContent = text ? `${shown.length} of ${state.memories.length} listed contain "${text}"` : "";
    $("more").hidden = !state.cursor;
  }

  // ---- one memory --------------------------------------------------------------------
  async function openMemory(id) {
    const [memory, history] = await Promise.all([
      api("GET", `memories/${encodeURIComponent(id)}`, params()),
      api("GET", `memories/${encodeURIComponent(id)}/history`, params()),
    ]);
    state.selected = memory.id;
    $("detail-id").textContent = memory.id;
    const fields = $("detail-fields");
    fields.replaceChildren();
    const rows = [
      ["Content", memory.content],
      ["Category", memory.category],
      ["Project", memory.project_id || "(none)"],
      ["Source", memory.source || ""],
      ["Evergreen", memory.is_evergreen ? "yes" : "no"],
      ["Created", when(memory.created_at)],
      ["Updated", when(memory.updated_at)],
      ["Expires", memory.expires_at ? when(memory.expires_at) : "never"],
      ["Valid", memory.valid_from ? `from ${when(memory.valid_from)}${memory.valid_until ? ` until ${when(memory.valid_until)}` : ""}` : ""],
      ["Metadata", Object.keys(memory.metadata || {}).length ? JSON.stringify(memory.metadata) : ""],
      ["Injection marks", (memory.injection || []).join(", ")],
      ["Stale", memory.stale_at ? `since ${when(memory.stale_at)}: depends on ${memory.stale_because} which was ${memory.stale_reason}` : ""],
    ];
    for (const [name, value] of rows) {
      if (value === "") continue;
      fields.append(el("dt", name), el("dd", value));
    }
    const superseded = Boolean(memory.superseded_by);
    $("edit-form").hidden = superseded;
    $("read-only").hidden = !superseded;
    $("edit-content").value = memory.content;
    $("edit-category").value = memory.category;
    $("edit-evergreen").checked = memory.is_evergreen;
    const body = $("history").tBodies[0];
    body.replaceChildren();
    for (const event of history.events) {
      const row = el("tr");
      row.append(el("td", when(event.at)), el("td", event.event), el("td", event.source || ""), el("td", event.content, "content"));
      body.append(row);
    }
    await renderChain(memory);
    $("detail").hidden = false;
    $("detail").dataset.memory = JSON.stringify({ content: memory.content, category: memory.category, is_evergreen: memory.is_evergreen });
    renderList();
    $("detail").scrollIntoView({ block: "nearest" });
  }

  // The versions of one fact, oldest first: those it replaced (from the user's memories, superseded
  // ones too) and those that replaced it (following superseded_by), each a link with its text.
  async function renderChain(memory) {
    const chain = [memory];
    const seen = new Set([memory.id]);
    for (let next = memory.superseded_by; next && !seen.has(next) && chain.length < 20; ) {
      const later = await api("GET", `memories/${encodeURIComponent(next)}`, params());
      chain.push(later);
      seen.add(later.id);
      next = later.superseded_by;
    }
    const everything = await api("GET", "memories", params({ include_inactive: "true", limit: 500 }));
    await renderDependencies(memory, everything.memories);
    for (let current = memory; chain.length < 40; ) {
      const earlier = everything.memories.find((m) => m.superseded_by === current.id && !seen.has(m.id));
      if (!earlier) break;
      chain.unshift(earlier);
      seen.add(earlier.id);
      current = earlier;
    }
    const list = $("chain-list");
    list.replaceChildren();
    for (const version of chain) {
      const item = el("li");
      item.dataset.id = version.id;
      const link = el("button", version.content, "link chain-link");
      link.type = "button";
      link.disabled = version.id === memory.id;
      link.addEventListener("click", guarded(() => openMemory(version.id)));
      const validity = `${when(version.valid_from || version.created_at)} → ${version.valid_until ? when(version.valid_until) : "now"}`;
      item.append(link, " ", el("span", version.id === memory.id ? `${validity} (this one)` : validity, "hint"));
      list.append(item);
    }
    $("chain").hidden = chain.length < 2;
  }

  // What the memory follows from (depends_on: each with its state, a deleted one named by its id)
  // and what follows from it, each a link: the chain a change makes stale.
  async function renderDependencies(memory, everything) {
    const list = $("depends-list");
    list.replaceChildren();
    const byId = new Map(everything.map((m) => [m.id, m]));
    const line = (label, id, found) => {
      const item = el("li");
      item.dataset.id = id;
      if (found) {
        const link = el("button", found.content, "link chain-link");
        link.type = "button";
        link.addEventListener("click", guarded(() => openMemory(id)));
        const state = found.superseded_by ? "superseded" : found.stale_at ? "stale" : "current";
        item.append(`${label}: `, link, " ", el("span", state, "hint"));
      } else {
        item.append(`${label}: `, el("span", `${id} (deleted)`, "hint"));
      }
      list.append(item);
    };
    for (const id of memory.depends_on || []) line("follows from", id, byId.get(id));
    for (const other of everything) {
      if ((other.depends_on || []).includes(memory.id)) line("followed by", other.id, other);
    }
    $("depends").hidden = list.children.length === 0;
  }

  // After any change: the list, what waits for review, the users' counts and the last recall's block.
  async function refresh() {
    await list(false);
    await loadPending();
    await loadUsers();
    if (state.recalled && $("query").value.trim()) await recall();
  }

  async function create() {
    const memory = { content: $("new-content").value, category: $("new-category").value };
    if ($("new-evergreen").checked) memory.is_evergreen = true;
    const body = { memories: [memory] };
    if (userId()) body.user_id = userId();
    if (projectId()) body.project_id = projectId();
    const stored = await api("POST", "memories", null, body);
    $("new-content").value = "";
    await refresh();
    const fact = stored.facts[0];
    say(
      stored.pending.length
        ? "Held for review: it is recalled once approved."
        : fact && fact.action === "refreshed"
          ? "Already known: the stored memory was refreshed."
          : `Remembered${fact && fact.superseded.length ? ` (it supersedes ${fact.superseded.length})` : ""}.`,
    );
  }

  // ---- review -----------------------------------------------------------------------
  async function loadPending() {
    let found;
    try {
      found = await api("GET", "memories/pending", params({ project_id: projectId() }));
    } catch (_) {
      $("pending-section").hidden = true; // an API without the route: nothing to review here
      return;
    }
    const body = $("pending").tBodies[0];
    body.replaceChildren();
    for (const held of found.memories) {
      const row = el("tr");
      row.dataset.id = held.id;
      const actions = el("td", null, "actions");
      for (const [label, decision, style] of [["Approve", "approve", ""], ["Reject", "reject", "danger"]]) {
        const button = el("button", label, style);
        button.type = "button";
        button.dataset.decision = decision;
        button.addEventListener("click", guarded(() => decide(held.id, decision, held.proposal ? held : null)));
        actions.append(button, " ");
      }
      // A consolidation proposal's content says what approving does (both texts, hidden characters
      // shown as <U+200B> by the API); one whose memories changed since cannot be approved.
      const stale = held.proposal && !held.proposal.still_applies ? " (a memory changed since: approving is refused)" : "";
      if (held.kind && held.kind !== "write") row.dataset.proposal = held.kind;
      row.append(el("td", held.content + stale, "content"), el("td", held.reasons.join(", ")), el("td", held.source || ""), actions);
      body.append(row);
    }
    $("pending-section").hidden = !found.memories.length;
  }

  async function decide(id, decision, proposal) {
    const body = { decision };
    if (userId()) body.user_id = userId();
    const outcome = await api("POST", `memories/${encodeURIComponent(id)}/review`, null, body);
    await refresh();
    if (proposal) {
      say(decision === "approve" ? `Approved: ${proposal.content}.` : "Rejected: the memories stay as they are.");
      return;
    }
    say(decision === "approve" ? `Approved: stored as memory ${outcome.memory_id}.` : "Rejected: nothing was stored.");
  }

  // ---- users ------------------------------------------------------------------------
  async function loadUsers() {
    let found;
    try {
      found = await api("GET", "users", null);
    } catch (_) {
      $("picker").hidden = true; // a JWT caller: the token's user only
      return;
    }
    const picker = $("user-picker");
    const chosen = userId();
    picker.replaceChildren(el("option", "choose a user"));
    picker.options[0].value = "";
    for (const user of found.users) {
      const pending = user.pending ? `, ${user.pending} waiting` : "";
      const option = el("option", `${user.user_id} (${user.memories} memories${pending})`);
      option.value = user.user_id;
      option.selected = user.user_id === chosen;
      picker.append(option);
    }
    $("picker").hidden = false;
    $("who-hint").textContent = `${found.users.length} users; or type another id.`;
  }

  async function save() {
    const before = JSON.parse($("detail").dataset.memory);
    const after = { content: $("edit-content").value, category: $("edit-category").value, is_evergreen: $("edit-evergreen").checked };
    const changes = {};
    for (const key of Object.keys(after)) if (after[key] !== before[key]) changes[key] = after[key];
    if (!Object.keys(changes).length) {
      say("Nothing changed.");
      return;
    }
    const id = state.selected;
    await api("PATCH", `memories/${encodeURIComponent(id)}`, params(), changes);
    await openMemory(id);
    await refresh();
    say("Saved.");
  }

  async function remove() {
    const id = state.selected;
    if (!window.confirm("Delete this memory? Its content is deleted everywhere.")) return;
    await api("DELETE", `memories/${encodeURIComponent(id)}`, params());
    state.selected = null;
    $("detail").hidden = true;
    await refresh();
    say("Deleted.");
  }

  // ---- export ------------------------------------------------------------------------
  async function exportJsonl() {
    const lines = [];
    let cursor = "";
    do {
      const page = await api("GET", "memories/export", params({ history: "true", limit: EXPORT_PAGE, cursor }));
      for (const line of page.lines) lines.push(JSON.stringify(line));
      cursor = page.next_cursor || "";
    } while (cursor);
    const file = new Blob(lines.map((line) => line + "\n"), { type: "application/x-ndjson" });
    const link = el("a");
    link.href = URL.createObjectURL(file);
    link.download = `memories-${(userId() || "me").replace(/[^\w.-]+/g, "_")}.jsonl`;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 60000);
    say(`Exported ${lines.length} memories to ${link.download} (with their history; rushmem import reads it).`);
  }

  // ---- wiring ------------------------------------------------------------------------
  document.addEventListener("DOMContentLoaded", () => {
    $("user").value = localStorage.getItem("agent-memory.user") || "";
    $("project").value = localStorage.getItem("agent-memory.project") || "";
    const reload = guarded(async () => {
      localStorage.setItem("agent-memory.user", userId());
      localStorage.setItem("agent-memory.project", projectId());
      $("detail").hidden = true;
      state.selected = null;
      $("recall-result").hidden = true;
      state.recalled = false;
      await list(false);
      await loadPending();
    });
    $("who").addEventListener("submit", reload);
    $("user-picker").addEventListener("change", (event) => {
      if (!$("user-picker").value) return;
      $("user").value = $("user-picker").value;
      reload(event);
    });
    const travel = guarded(async () => {
      $("as-of-note").textContent = asOf() ? `Showing what was true at the end of ${$("as-of").value} (UTC).` : "Showing what is true now.";
      await list(false);
      if (state.recalled && $("query").value.trim()) await recall();
    });
    $("as-of").addEventListener("change", travel);
    $("now").addEventListener("click", (event) => {
      $("as-of").value = "";
      travel(event);
    });
    $("when").addEventListener("submit", (event) => event.preventDefault());
    $("create-form").addEventListener("submit", guarded(create));
    $("recall-form").addEventListener("submit", guarded(recall));
    $("list-form").addEventListener("submit", guarded(() => list(false)));
    $("text").addEventListener("input", renderList);
    $("more").addEventListener("click", guarded(() => list(true)));
    $("edit-form").addEventListener("submit", guarded(save));
    $("delete").addEventListener("click", guarded(remove));
    $("close").addEventListener("click", () => {
      $("detail").hidden = true;
      state.selected = null;
      renderList();
    });
    $("export").addEventListener("click", guarded(exportJsonl));
    guarded(loadUsers)();
    if (userId()) reload();
    else say("Choose a user (or type an id; with a JWT leave it empty) and press Enter.");
  });
})();
