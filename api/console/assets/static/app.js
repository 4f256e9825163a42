// stackd console: one page, hash routes, no framework, no build step.
// Every text goes into the page through textContent; the only HTML set is
// the server's rendering of a change set (escaped by the server).
"use strict";
(function () {
  const csrf = document.querySelector('meta[name="stackd-csrf"]').content;
  const main = document.getElementById("main");
  const live = document.getElementById("live");
  const announce = document.getElementById("announce");

  // Statuses: colour AND glyph AND text.
  const STATUS = {
    OPERATION_COMPLETE: { cls: "s-ok", glyph: "\u2713", label: "complete", color: "--ok" },
    OPERATION_IN_PROGRESS: { cls: "s-run", glyph: "\u25B6", label: "in progress", color: "--run" },
    WAIT_IN_PROGRESS: { cls: "s-wait", glyph: "\u2026", label: "waiting", color: "--wait" },
    OPERATION_FAILED: { cls: "s-fail", glyph: "\u2717", label: "failed", color: "--fail" },
    CANCEL_COMPLETE: { cls: "s-cancel", glyph: "\u2298", label: "cancelled", color: "--cancel" },
    SKIPPED_SUSPENDED_ACCOUNT: { cls: "s-skip", glyph: "\u2212", label: "skipped", color: "--skip" },
  };
  const OPSTATUS = {
    SUCCEEDED: "s-ok", RUNNING: "s-run", QUEUED: "s-wait", FAILED: "s-fail", STOPPED: "s-cancel",
    CANCELLED: "s-cancel", ROLLED_BACK: "s-cancel", ROLLBACK_FAILED: "s-fail",
  };
  const statusInfo = (s) => STATUS[s] || { cls: "s-wait", glyph: "?", label: s || "unknown", color: "--wait" };

  // el builds an element: attributes, then children (strings become text).
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const k of kids.flat()) {
      if (k === undefined || k === null || k === false) continue;
      e.append(k instanceof Node ? k : document.createTextNode(String(k)));
    }
    return e;
  }
  const short = (rev) => (rev || "").slice(0, 7);
  const when = (t) => (t ? new Date(t).toLocaleString() : "");
  function revLink(rev, url) {
    if (!rev) return el("span", { class: "muted" }, "—");
    if (url && /^https?:\/\//.test(url)) return el("a", { href: url, class: "mono", rel: "noreferrer noopener", target: "_blank" }, short(rev));
    return el("span", { class: "mono", title: rev }, short(rev));
  }
  function badge(status) {
    const i = statusInfo(status);
    return el("span", { class: "badge " + i.cls }, i.glyph + " " + i.label);
  }
  function opBadge(status) {
    return el("span", { class: "badge " + (OPSTATUS[status] || "s-wait") }, status || "—");
  }
  function say(text) { announce.textContent = text; }

  // api fetches JSON with the session's CSRF token.
  async function api(path, opts) {
    opts = opts || {};
    const headers = { "X-Stackd-CSRF": csrf, "Accept": "application/json" };
    if (opts.version) headers["Stackd-API-Version"] = opts.version;
    const res = await fetch(path, { method: opts.method || "GET", headers, credentials: "same-origin", cache: "no-store" });
    if (res.status === 401) { location.href = "/ui/login"; throw new Error("not logged in"); }
    let body = null;
    try { body = await res.json(); } catch (e) { body = null; }
    if (!res.ok) {
      const msg = body && (body.error || (body.errors && body.errors[0] && body.errors[0].detail)) || res.statusText;
      const err = new Error(msg); err.status = res.status; throw err;
    }
    return body;
  }
  const enc = encodeURIComponent;

  // ---- live events -------------------------------------------------------
  // One EventSource for the page; views subscribe while shown. Refetches
  // are coalesced (at most one per view per 300 ms): no polling storm.
  const listeners = new Set();
  function onLive(fn) { listeners.add(fn); return () => listeners.delete(fn); }
  let es = null;
  function connect() {
    es = new EventSource("/v1/events?csrf=" + enc(csrf));
    es.onopen = () => { live.textContent = "\u25CF live"; live.className = "live s-ok"; };
    es.onerror = () => { live.textContent = "\u25CB reconnecting…"; live.className = "live s-cancel"; };
    for (const t of ["stack_set", "operation", "events", "drift", "reset"]) {
      es.addEventListener(t, (ev) => {
        let data = {};
        try { data = JSON.parse(ev.data); } catch (e) { return; }
        window.__stackdEvents = (window.__stackdEvents || 0) + 1;
        for (const fn of listeners) fn(t, data);
      });
    }
  }
  function coalesce(fn, ms) {
    let timer = null;
    return () => { if (timer) return; timer = setTimeout(() => { timer = null; fn(); }, ms || 300); };
  }

  // ---- router ------------------------------------------------------------
  let cleanup = [];
  function route() {
    for (const f of cleanup) f();
    cleanup = [];
    const h = decodeURI(location.hash.replace(/^#/, "")) || "/";
    const [path, query] = h.split("?");
    const q = new URLSearchParams(query || "");
    const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
    main.replaceChildren(el("p", { class: "muted" }, "Loading…"));
    let view;
    if (parts.length === 0) view = fleet();
    else if (parts[0] === "changes") view = changes(q.get("ref") || "", q.get("stack_set") || "");
    else if (parts[0] === "set" && parts.length === 2) view = grid(parts[1]);
    else if (parts[0] === "set" && parts[2] === "i" && parts.length === 5) view = instance(parts[1], parts[3], parts[4]);
    else if (parts[0] === "set" && parts[2] === "rollout") view = rollout(parts[1]);
    else if (parts[0] === "set" && parts[2] === "history") view = history(parts[1]);
    else view = Promise.resolve(main.replaceChildren(el("h1", {}, "Not found"), el("a", { href: "#/" }, "Back to the fleet")));
    Promise.resolve(view).catch((e) => main.replaceChildren(el("h1", {}, "Cannot show this page"), el("p", { class: "error", role: "alert" }, e.message)));
  }
  function setTabs(name, current) {
    const tab = (href, label, key) => el("a", { href, "aria-current": key === current ? "page" : null }, label);
    return el("nav", { class: "tabs", "aria-label": "Stack set" },
      tab("#/set/" + enc(name), "Instances", "grid"),
      tab("#/set/" + enc(name) + "/rollout", "Rollout", "rollout"),
      tab("#/set/" + enc(name) + "/history", "History", "history"),
      tab("#/changes?stack_set=" + enc(name), "Change sets", "changes"));
  }
  function done(node) { main.replaceChildren(...[].concat(node)); main.setAttribute("data-ready", "1"); }

  // ---- fleet -------------------------------------------------------------
  async function fleet() {
    const render = async () => {
      const doc = await api("/ui/data/fleet");
      const rows = doc.stack_sets.map((s) => {
        const op = s.last_operation;
        const counts = el("div", { class: "counts" }, Object.entries(s.counts).sort().map(([st, n]) => {
          const i = statusInfo(st);
          return el("span", { class: "badge " + i.cls, title: st }, i.glyph + " " + n + " " + i.label);
        }));
        let drift = el("span", { class: "muted" }, "not checked");
        if (s.drift) drift = s.drift.status === "DRIFTED"
          ? el("span", { class: "badge s-drift" }, "\u2248 " + s.drift.drifted_instances + " drifted")
          : el("span", { class: "badge s-ok" }, "\u2713 in sync");
        return el("tr", { "data-stack-set": s.name },
          el("td", {}, el("a", { href: "#/set/" + enc(s.name) }, s.name)),
          el("td", {}, revLink(s.revision, s.revision_url)),
          el("td", {}, op ? [opBadge(op.status), " ", el("span", { class: "muted" }, op.kind + " " + op.counts.succeeded + "/" + op.counts.total)] : el("span", { class: "muted" }, "none")),
          el("td", {}, s.instances + " ", counts),
          el("td", { class: "hide-narrow" }, drift),
          el("td", {}, s.holding ? el("a", { class: "badge s-cancel", href: "#/set/" + enc(s.name) + "/rollout" }, "\u23F8 holding") : el("span", { class: "muted" }, "—")));
      });
      done([el("h1", {}, "Fleet"),
        doc.stack_sets.length === 0 ? el("p", { class: "muted" }, "No stack set is deployed yet.") :
          el("div", { class: "table-wrap" }, el("table", { id: "fleet" },
            el("thead", {}, el("tr", {}, ["Stack set", "Revision", "Last operation", "Instances", "Drift", "Rollout"].map((h, i) => el("th", { class: i === 4 ? "hide-narrow" : null }, h)))),
            el("tbody", {}, rows)))]);
    };
    await render();
    const again = coalesce(() => render().catch(() => {}), 500);
    cleanup.push(onLive((t) => { if (t !== "events") again(); else again(); }));
  }

  // ---- grid --------------------------------------------------------------
  async function grid(name) {
    const doc = await api("/ui/data/grid?stack_set=" + enc(name));
    const regions = doc.regions, accounts = doc.accounts, statuses = doc.statuses;
    const R = regions.length, A = accounts.length;
    // cell[a*R + r] = status index + 1 (0: no instance); drift flags beside.
    const cell = new Uint8Array(A * R), drift = new Uint8Array(A * R);
    const ri = new Map(regions.map((r, i) => [r, i])), ai = new Map(accounts.map((a, i) => [a, i]));
    const sidx = new Map(statuses.map((s, i) => [s, i]));
    const counts = new Array(statuses.length).fill(0);
    // Rows: the accounts in the server's order; with organizational units
    // (doc.ous), a header row before each OU's accounts. rows[i] >= 0 is
    // an account, -1 - k the header of OU k; rowOf[a] is account a's row.
    const ous = doc.ous || [], accountOU = doc.account_ous || [];
    const rows = [], rowOf = new Int32Array(A), ouSize = new Array(ous.length).fill(0);
    for (let a = 0; a < A; a++) {
      if (ous.length && (a === 0 || accountOU[a] !== accountOU[a - 1])) rows.push(-1 - accountOU[a]);
      rowOf[a] = rows.length; rows.push(a);
      if (ous.length) ouSize[accountOU[a]]++;
    }
    const NR = rows.length;
    const ouName = (k) => (ous[k] ? "OU " + ous[k] : "no organizational unit");
    for (let i = 0; i < doc.cells.length; i += 4) {
      const k = doc.cells[i + 1] * R + doc.cells[i];
      cell[k] = doc.cells[i + 2] + 1; drift[k] = doc.cells[i + 3];
      counts[doc.cells[i + 2]]++;
    }
    const css = getComputedStyle(document.documentElement);
    const colors = statuses.map((s) => css.getPropertyValue(statusInfo(s).color).trim() || "#888");
    const fg = css.getPropertyValue("--fg").trim(), line = css.getPropertyValue("--line").trim(), focusColor = css.getPropertyValue("--focus").trim();
    const CW = 22, CH = 18, LABEL = 150, HEAD = 90;
    const wrap = el("div", { class: "grid-wrap" });
    const spacer = el("div", { class: "grid-spacer" });
    const canvas = el("canvas", { id: "grid", tabindex: "0", role: "grid", "aria-label": `${A} accounts${ous.length ? " in " + ous.length + " organizational units" : ""} × ${R} regions. Arrow keys move, Enter opens the instance.`, "aria-rowcount": A, "aria-colcount": R });
    wrap.append(spacer, canvas);
    spacer.style.height = HEAD + NR * CH + "px";
    spacer.style.width = LABEL + R * CW + "px";
    const ctx = canvas.getContext("2d");
    let focus = { a: 0, r: 0 };
    const legend = el("div", { class: "legend" }, statuses.map((s, i) => {
      const info = statusInfo(s);
      return el("span", { class: info.cls }, info.glyph + " " + info.label + " (" + counts[i] + ")");
    }), el("span", { class: "s-drift" }, "\u2248 drifted (corner mark)"));
    const focusText = el("p", { id: "grid-focus", class: "mono" });
    // The OUs, each a button that moves the focus to its first account.
    const ouBar = ous.length ? el("div", { class: "toolbar", id: "grid-ous", role: "group", "aria-label": "Organizational units" },
      ous.map((_, k) => el("button", { type: "button", class: "quiet", "data-ou": ous[k], onclick: () => {
        const a = accountOU.indexOf(k);
        if (a < 0) return;
        focus = { a, r: 0 }; canvas.focus(); scrollTo(); describe(); redraw();
      } }, ouName(k) + " (" + ouSize[k] + ")"))) : "";

    function draw() {
      const dpr = window.devicePixelRatio || 1;
      const w = wrap.clientWidth, h = wrap.clientHeight;
      if (canvas.width !== Math.floor(w * dpr) || canvas.height !== Math.floor(h * dpr)) {
        canvas.width = Math.floor(w * dpr); canvas.height = Math.floor(h * dpr);
        canvas.style.width = w + "px"; canvas.style.height = h + "px";
      }
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, w, h);
      const sx = wrap.scrollLeft, sy = wrap.scrollTop;
      const a0 = Math.max(0, Math.floor(sy / CH)), a1 = Math.min(NR, Math.ceil((sy + h - HEAD) / CH) + 1);
      const r0 = Math.max(0, Math.floor(sx / CW)), r1 = Math.min(R, Math.ceil((sx + w - LABEL) / CW) + 1);
      ctx.font = "12px ui-monospace, monospace";
      ctx.textBaseline = "middle"; ctx.textAlign = "center";
      for (let row = a0; row < a1; row++) {
        const y = HEAD + row * CH - sy, a = rows[row];
        if (a < 0) {
          // An OU's header row: a band across the cells.
          ctx.fillStyle = line; ctx.fillRect(LABEL, y + 1, w - LABEL, CH - 2);
          ctx.fillStyle = fg; ctx.textAlign = "left";
          ctx.fillText(ouName(-1 - a) + " \u00B7 " + ouSize[-1 - a] + (ouSize[-1 - a] === 1 ? " account" : " accounts"), LABEL + 6, y + CH / 2 + 1);
          ctx.textAlign = "center";
          continue;
        }
        for (let r = r0; r < r1; r++) {
          const x = LABEL + r * CW - sx;
          const k = a * R + r, v = cell[k];
          if (!v) { ctx.strokeStyle = line; ctx.strokeRect(x + 1.5, y + 1.5, CW - 3, CH - 3); continue; }
          ctx.fillStyle = colors[v - 1];
          ctx.fillRect(x + 1, y + 1, CW - 2, CH - 2);
          ctx.fillStyle = "#fff";
          ctx.fillText(statusInfo(statuses[v - 1]).glyph, x + CW / 2, y + CH / 2 + 1);
          if (drift[k]) { ctx.fillStyle = css.getPropertyValue("--drift").trim(); ctx.beginPath(); ctx.moveTo(x + CW - 8, y + 1); ctx.lineTo(x + CW - 1, y + 1); ctx.lineTo(x + CW - 1, y + 8); ctx.fill(); }
        }
      }
      // Account labels (left) and region labels (top, rotated) over the cells.
      ctx.fillStyle = getComputedStyle(document.body).backgroundColor;
      ctx.fillRect(0, 0, LABEL, h); ctx.fillRect(0, 0, w, HEAD);
      ctx.fillStyle = fg; ctx.textAlign = "right";
      for (let row = a0; row < a1; row++) {
        const y = HEAD + row * CH - sy + CH / 2, a = rows[row];
        if (y < HEAD) continue;
        if (a < 0) {
          const n = ouName(-1 - a);
          ctx.save(); ctx.font = "bold 12px ui-monospace, monospace"; ctx.textAlign = "left";
          ctx.fillText(n.length > 20 ? n.slice(0, 19) + "…" : n, 4, y); ctx.restore();
          continue;
        }
        ctx.fillText(accounts[a].length > 20 ? accounts[a].slice(0, 19) + "…" : accounts[a], LABEL - 6, y);
      }
      ctx.textAlign = "left";
      for (let r = r0; r < r1; r++) {
        const x = LABEL + r * CW - sx + CW / 2;
        if (x < LABEL) continue;
        ctx.save(); ctx.translate(x, HEAD - 6); ctx.rotate(-Math.PI / 3);
        ctx.fillText(regions[r].length > 14 ? regions[r].slice(0, 13) + "…" : regions[r], 0, 0); ctx.restore();
      }
      if (document.activeElement === canvas) {
        const x = LABEL + focus.r * CW - sx, y = HEAD + rowOf[focus.a] * CH - sy;
        ctx.strokeStyle = focusColor; ctx.lineWidth = 2; ctx.strokeRect(x, y, CW, CH); ctx.lineWidth = 1;
      }
    }
    let pending = false;
    const redraw = () => { if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; draw(); }); } };
    function describe() {
      const k = focus.a * R + focus.r, v = cell[k];
      const st = v ? statusInfo(statuses[v - 1]) : null;
      const text = `${accounts[focus.a]} / ${regions[focus.r]}: ` + (st ? st.label + (drift[k] ? ", drifted" : "") : "no instance") +
        (ous.length ? " · " + ouName(accountOU[focus.a]) : "");
      focusText.textContent = text; say(text);
    }
    function open(a, r) {
      if (!cell[a * R + r]) return;
      location.hash = "#/set/" + enc(name) + "/i/" + enc(regions[r]) + "/" + enc(accounts[a]);
    }
    function scrollTo() {
      const y = rowOf[focus.a] * CH, x = focus.r * CW, h = wrap.clientHeight - HEAD, w = wrap.clientWidth - LABEL;
      if (y < wrap.scrollTop) wrap.scrollTop = y; else if (y + CH > wrap.scrollTop + h) wrap.scrollTop = y + CH - h;
      if (x < wrap.scrollLeft) wrap.scrollLeft = x; else if (x + CW > wrap.scrollLeft + w) wrap.scrollLeft = x + CW - w;
    }
    canvas.addEventListener("keydown", (e) => {
      const mv = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1], PageUp: [-20, 0], PageDown: [20, 0], Home: [-A, 0], End: [A, 0] }[e.key];
      if (mv) {
        e.preventDefault();
        focus = { a: Math.min(A - 1, Math.max(0, focus.a + mv[0])), r: Math.min(R - 1, Math.max(0, focus.r + mv[1])) };
        scrollTo(); describe(); redraw();
      } else if (e.key === "Enter" || e.key === " ") { e.preventDefault(); open(focus.a, focus.r); }
    });
    canvas.addEventListener("focus", () => { describe(); redraw(); });
    canvas.addEventListener("blur", redraw);
    canvas.addEventListener("click", (e) => {
      const b = canvas.getBoundingClientRect();
      const x = e.clientX - b.left + wrap.scrollLeft - LABEL, y = e.clientY - b.top + wrap.scrollTop - HEAD;
      if (x < 0 || y < 0) return;
      const row = Math.floor(y / CH), r = Math.floor(x / CW);
      if (row < NR && rows[row] >= 0 && r < R) { const a = rows[row]; focus = { a, r }; open(a, r); }
    });
    wrap.addEventListener("scroll", redraw, { passive: true });
    const ro = new ResizeObserver(redraw); ro.observe(wrap);
    cleanup.push(() => ro.disconnect());

    const op = doc.last_operation;
    done([el("h1", {}, name), setTabs(name, "grid"),
      el("p", {}, "Revision ", revLink(doc.revision, doc.revision_url), " · ", A + " accounts" + (ous.length ? " in " + ous.length + " OUs" : "") + " × " + R + " regions · " + doc.cells.length / 4 + " instances",
        op ? [" · last operation ", opBadge(op.status), " ", op.kind] : ""),
      legend, ouBar, wrap, focusText]);
    draw();
    canvas.setAttribute("data-ready", "1");
    // Live: instance status changes from the operation's event log.
    cleanup.push(onLive((t, d) => {
      if (t !== "events" || d.stack_set !== name) return;
      for (const ev of d.events) {
        if (ev.resource || !ev.region || !ev.account || !(ev.status in STATUS)) continue;
        const r = ri.get(ev.region), a = ai.get(ev.account);
        if (r === undefined || a === undefined) continue;
        let s = sidx.get(ev.status);
        if (s === undefined) { s = statuses.length; statuses.push(ev.status); sidx.set(ev.status, s); colors.push(css.getPropertyValue(statusInfo(ev.status).color).trim()); }
        cell[a * R + r] = s + 1;
      }
      redraw();
    }));
  }

  // ---- instance ----------------------------------------------------------
  function jsonBlock(v) {
    if (v === undefined || v === null) return el("span", { class: "muted" }, "none");
    return el("pre", {}, JSON.stringify(v, null, 2));
  }
  async function instance(name, region, account) {
    const d = await api("/ui/data/instance?stack_set=" + enc(name) + "&region=" + enc(region) + "&account=" + enc(account));
    const res = el("div", { class: "table-wrap" }, el("table", { id: "resources" },
      el("thead", {}, el("tr", {}, el("th", {}, "Address"), el("th", {}, "Type"), el("th", {}, "Physical id"), el("th", { class: "hide-narrow" }, "Status"))),
      el("tbody", {}, d.resources.map((r) => el("tr", {}, el("td", { class: "mono" }, r.address), el("td", {}, r.type), el("td", { class: "mono" }, r.physical_id || "—"), el("td", { class: "hide-narrow" }, r.status))))));
    const outputs = d.outputs && Object.keys(d.outputs).length ? el("table", { id: "outputs" }, el("tbody", {},
      Object.entries(d.outputs).map(([k, v]) => el("tr", {}, el("td", { class: "mono" }, k), el("td", { class: "mono" }, typeof v === "string" ? v : JSON.stringify(v)))))) : el("p", { class: "muted" }, "No outputs.");
    const events = d.events.length ? el("table", { id: "events" }, el("tbody", {}, d.events.map((e) => el("tr", {},
      el("td", { class: "hide-narrow muted" }, when(e.time)), el("td", { class: "mono" }, e.resource || "instance"), el("td", {}, e.status), el("td", {}, e.message || ""))))) : el("p", { class: "muted" }, "No events.");
    let drift = el("p", { class: "muted" }, "Not checked since the last apply.");
    if (d.drift) drift = el("div", {}, el("p", {}, el("span", { class: "badge " + (d.drift.status === "DRIFTED" ? "s-drift" : "s-ok") }, d.drift.status), " checked " + when(d.drift.checked)), jsonBlock(d.drift.resources));
    done([el("h1", {}, name + " · " + account + " / " + region), setTabs(name, ""),
      el("dl", { class: "kv" },
        d.ou ? [el("dt", {}, "Organizational unit"), el("dd", { id: "instance-ou", class: "mono" }, d.ou)] : "",
        el("dt", {}, "Status"), el("dd", {}, badge(d.status)),
        el("dt", {}, "Reason"), el("dd", {}, d.reason || "—"),
        el("dt", {}, "Revision"), el("dd", {}, revLink(d.revision, d.revision_url)),
        el("dt", {}, "Last operation"), el("dd", {}, d.last_operation ? [opBadge(d.last_operation.status), " " + d.last_operation.kind + " ", el("span", { class: "mono" }, d.last_operation.id)] : "—",
          d.result && d.result.reason ? el("div", { class: "muted" }, d.result.reason) : "")),
      el("h2", {}, "Resources"), res,
      el("h2", {}, "Outputs"), outputs,
      el("h2", {}, "Overrides"), jsonBlock(d.overrides),
      el("h2", {}, "Drift"), drift,
      el("h2", {}, "Events of the last operation"), events]);
  }

  // ---- rollout -----------------------------------------------------------
  async function rollout(name) {
    let opID = null, seq = 0, evs = [];
    const box = el("div", { id: "rollout" });
    const actions = el("div", { class: "toolbar" });
    const evTable = el("tbody", {});
    async function load() {
      const g = await api("/ui/data/grid?stack_set=" + enc(name));
      if (!g.last_operation) { box.replaceChildren(el("p", { class: "muted" }, "No operation yet.")); return; }
      if (g.last_operation.id !== opID) { opID = g.last_operation.id; seq = 0; evs = []; evTable.replaceChildren(); }
      const op = await api("/v1/operations/" + enc(opID), { version: "1.1" });
      const ed = await api("/v1/operations/" + enc(opID) + "/events?since=" + seq, { version: "1.1" });
      addEvents(ed.events);
      render(op);
    }
    function addEvents(list) {
      for (const e of list) {
        if (e.seq <= seq) continue;
        seq = e.seq; evs.push(e);
        evTable.prepend(el("tr", {}, el("td", { class: "hide-narrow muted" }, when(e.time)),
          el("td", { class: "mono" }, e.region ? e.account + "/" + e.region : "rollout"), el("td", { class: "mono hide-narrow" }, e.resource || ""),
          el("td", {}, e.status), el("td", {}, e.message || "")));
      }
      while (evTable.children.length > 300) evTable.lastChild.remove();
    }
    function render(op) {
      const ro = op.rollout;
      const results = new Map((op.results || []).map((r) => [r.account + "/" + r.region, r]));
      const gates = new Map();
      for (const e of evs) if (e.region && /HEALTH|GATE|CHECK/.test(e.status)) gates.set(e.account + "/" + e.region, e);
      const head = el("p", {}, opBadge(op.status), " " + op.kind + " ", revLink(op.revision), " · " + op.counts.succeeded + "/" + op.counts.total + " succeeded",
        op.counts.failed ? ", " + op.counts.failed + " failed" : "", op.reason ? el("div", { class: "muted" }, op.reason) : "");
      let timeline = el("p", { class: "muted" }, "This operation has no rollout block: every instance is deployed under the stack set's preferences.");
      if (ro) {
        timeline = el("ol", { class: "timeline", "aria-label": "Batches" }, (ro.plan || []).map((b, i) => {
          const n = i + 1;
          let cls = "batch", state = "pending";
          if (ro.failed_batch === n) { cls += " failed"; state = "failed"; }
          else if (n < ro.batch || (n === ro.batch && ro.phase === "DONE") || op.status === "SUCCEEDED") { cls += " done"; state = "done"; }
          else if (n === ro.batch) { cls += " current"; state = ro.phase.toLowerCase().replace(/_/g, " "); }
          return el("li", { class: cls, "data-batch": n, "data-state": state },
            el("strong", {}, "Batch " + n + " of " + ro.batches), " · " + b.members.length + " instances · ", el("span", { class: "batch-state" }, state),
            el("div", { class: "members" }, b.members.slice(0, 200).map((m) => {
              const r = results.get(m.account + "/" + m.region), g = gates.get(m.account + "/" + m.region);
              const st = r ? statusInfo(r.status) : null;
              return el("span", { class: st ? st.cls : "muted", title: g ? g.status + ": " + (g.message || "") : null },
                (st ? st.glyph : "\u25CB") + " " + m.account + "/" + m.region + (g ? " (" + g.status.toLowerCase().replace(/_/g, " ") + ")" : ""));
            }), b.members.length > 200 ? el("span", { class: "muted" }, "and " + (b.members.length - 200) + " more") : ""));
        }));
        timeline = el("div", {}, el("p", {}, "Pattern " + ro.pattern + " · batch " + ro.batch + " of " + ro.batches + " · phase ", el("strong", { id: "phase" }, ro.phase)), timeline);
      }
      box.replaceChildren(head, timeline);
      const running = !op.ended;
      actions.replaceChildren();
      if (running && ro) {
        actions.append(
          el("button", { type: "button", class: "primary", id: "promote", disabled: ro.phase !== "WAITING_FOR_PROMOTION", onclick: () => confirmStep("promote") }, "Promote"),
          el("button", { type: "button", class: "danger", id: "abort", onclick: () => confirmStep("abort") }, "Abort"));
      }
    }
    function confirmStep(verb) {
      const text = verb === "abort" ? `Abort the rollout of ${name}? Instances roll back if the rollout says so.` : `Promote the rollout of ${name} to its next batch?`;
      const msg = el("span", { role: "alert" });
      const box2 = el("div", { class: "confirm", id: "confirm" }, el("span", {}, text),
        el("button", { type: "button", class: verb === "abort" ? "danger" : "primary", id: "confirm-" + verb, onclick: async (e) => {
          e.target.disabled = true;
          try {
            await api("/v1/stack_sets/" + enc(name) + "/" + verb, { method: "POST" });
            msg.textContent = verb === "abort" ? "Abort requested." : "Promotion requested.";
            setTimeout(() => box2.remove(), 1500);
          } catch (err) { msg.textContent = err.message; msg.className = "error"; }
        } }, "Yes, " + verb),
        el("button", { type: "button", onclick: () => box2.remove() }, "Cancel"), msg);
      actions.after(box2);
      box2.querySelector("button").focus();
    }
    await load();
    done([el("h1", {}, name + " · rollout"), setTabs(name, "rollout"), actions, box, el("h2", {}, "Events"),
      el("div", { class: "table-wrap" }, el("table", { id: "rollout-events" }, evTable))]);
    const again = coalesce(() => load().catch(() => {}), 300);
    cleanup.push(onLive((t, d) => {
      if (d.stack_set !== name && d.name !== name) return;
      if (t === "events" && d.operation === opID) { addEvents(d.events); again(); }
      else again();
    }));
  }

  // ---- history -----------------------------------------------------------
  async function history(name) {
    const d = await api("/ui/data/history?stack_set=" + enc(name));
    done([el("h1", {}, name + " · history"), setTabs(name, "history"),
      el("p", { class: "muted" }, "Status commits go to the branch ", el("code", {}, d.status_branch), "."),
      el("div", { class: "table-wrap" }, el("table", { id: "history" },
        el("thead", {}, el("tr", {}, ["Operation", "Status", "Revision", "Started", "Ended", "Status commit"].map((h, i) => el("th", { class: i >= 3 && i <= 4 ? "hide-narrow" : null }, h)))),
        el("tbody", {}, d.operations.map((o) => el("tr", {},
          el("td", {}, o.kind, el("div", { class: "mono muted" }, o.id)),
          el("td", {}, opBadge(o.status), " " + o.counts.succeeded + "/" + o.counts.total, o.reason ? el("div", { class: "muted" }, o.reason) : ""),
          el("td", {}, revLink(o.revision, o.revision_url)),
          el("td", { class: "hide-narrow" }, when(o.started)), el("td", { class: "hide-narrow" }, when(o.ended)),
          el("td", { class: "mono" }, o.status_commit || "—")))))) ]);
  }

  // ---- change sets -------------------------------------------------------
  async function changes(ref, only) {
    const input = el("input", { type: "text", id: "ref", value: ref, placeholder: "deploy branch head", "aria-label": "Ref (branch or commit)", spellcheck: "false" });
    const out = el("div", { class: "cs", id: "changeset" });
    const form = el("form", { class: "toolbar", onsubmit: (e) => {
      e.preventDefault();
      location.hash = "#/changes?ref=" + enc(input.value.trim()) + (only ? "&stack_set=" + enc(only) : "");
    } }, el("label", { for: "ref" }, "Ref"), input, el("button", { type: "submit", class: "primary" }, "Plan"));
    done([el("h1", {}, "Change sets" + (only ? " · " + only : "")), only ? setTabs(only, "changes") : "", form,
      el("p", { class: "muted" }, "Empty: the deploy branch's head. A pull-request branch name plans it as its comment shows it."), out]);
    out.replaceChildren(el("p", { class: "muted" }, "Planning…"));
    try {
      const d = await api("/ui/data/changes?ref=" + enc(ref) + (only ? "&stack_set=" + enc(only) : ""));
      const body = el("div", {});
      // The server rendered the engine's Markdown with raw HTML disabled:
      // every value in it is escaped.
      body.innerHTML = d.html;
      out.replaceChildren(el("p", {}, (d.valid ? "" : "\u2717 does not validate · ") + "revision ", revLink(d.revision, d.revision_url)), body);
      out.setAttribute("data-ready", "1");
    } catch (e) {
      out.replaceChildren(el("p", { class: "error", role: "alert" }, e.message));
    }
  }

  // ---- start -------------------------------------------------------------
  const logout = document.getElementById("logout");
  if (logout) logout.addEventListener("click", async () => {
    await fetch("/ui/logout", { method: "POST", headers: { "X-Stackd-CSRF": csrf }, credentials: "same-origin" });
    location.href = "/ui/login";
  });
  window.addEventListener("hashchange", route);
  connect();
  route();
})();
