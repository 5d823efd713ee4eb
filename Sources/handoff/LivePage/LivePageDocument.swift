/// The live page: one HTML document with its style and script, served from the binary (no build
/// step, no CDN: it works offline). The script listens to `/events` (a ``BusViewSnapshot`` a
/// second, as JSON) and redraws; EventSource reconnects by itself when the process restarts.
enum LivePageDocument {
    static let html = """
    <!doctype html>
    <html lang="en">
    <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>Handoff bus</title>
    <style>
    :root { --fg: #1d2330; --muted: #6b7385; --line: #e3e6ec; --accent: #2f6fde; --bad: #c0392b; --ok: #2e8b57; }
    * { box-sizing: border-box; }
    body { margin: 0; font: 14px/1.4 system-ui, sans-serif; color: var(--fg); background: #f6f7f9; }
    header { padding: 12px 20px; background: #fff; border-bottom: 1px solid var(--line); display: flex; gap: 24px; align-items: baseline; flex-wrap: wrap; }
    header h1 { font-size: 18px; margin: 0; }
    #status { color: var(--muted); }
    #status.down { color: var(--bad); }
    main { padding: 16px 20px; display: grid; gap: 16px; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); }
    section { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 12px 14px; overflow-x: auto; }
    section.wide { grid-column: 1 / -1; }
    h2 { font-size: 13px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); margin: 0 0 8px; }
    .figures { display: flex; gap: 28px; flex-wrap: wrap; }
    .figure b { display: block; font-size: 22px; font-variant-numeric: tabular-nums; }
    .figure span { color: var(--muted); font-size: 12px; }
    table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
    th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); white-space: nowrap; }
    th { font-weight: 600; color: var(--muted); font-size: 12px; cursor: pointer; user-select: none; }
    td.n, th.n { text-align: right; }
    tr.gone td { color: var(--muted); text-decoration: line-through; }
    .empty { color: var(--muted); padding: 6px 8px; }
    .bar { width: 120px; height: 8px; background: var(--line); border-radius: 4px; display: inline-block; vertical-align: middle; }
    .bar i { display: block; height: 100%; background: var(--accent); border-radius: 4px; }
    .failed { color: var(--bad); } .finished { color: var(--ok); }
    svg { width: 100%; height: 120px; display: block; }
    </style>
    </head>
    <body>
    <header>
      <h1>Handoff bus</h1>
      <span id="source"></span>
      <span id="status">connecting…</span>
    </header>
    <main>
      <section class="wide">
        <div class="figures">
          <div class="figure"><b id="rate">–</b><span>messages/s (last 10 s)</span></div>
          <div class="figure"><b id="bytes">–</b><span>bytes/s</span></div>
          <div class="figure"><b id="node-count">–</b><span>nodes</span></div>
          <div class="figure"><b id="activity-count">–</b><span>activities current</span></div>
          <div class="figure"><b id="continuations">–</b><span>continued</span></div>
          <div class="figure"><b id="malformed">–</b><span>malformed</span></div>
        </div>
        <h2 style="margin-top:12px">Messages per second, last minute <span id="chart-max"></span></h2>
        <svg id="chart" viewBox="0 0 600 120" preserveAspectRatio="none" aria-label="messages per second"></svg>
      </section>
      <section class="wide">
        <h2>Nodes</h2>
        <table id="nodes"><thead><tr>
          <th data-key="name">node</th><th data-key="host">host</th><th class="n" data-key="activities">activities</th>
          <th class="n" data-key="inRate">msg/s in</th><th class="n" data-key="outRate">msg/s out</th>
          <th class="n" data-key="bytesIn">bytes in</th><th class="n" data-key="bytesOut">bytes out</th>
          <th class="n" data-key="published">published</th><th class="n" data-key="heard">heard</th>
        </tr></thead><tbody></tbody></table>
      </section>
      <section>
        <h2>Activities by type</h2>
        <table id="types"><thead><tr><th>type</th><th class="n">current</th><th class="n">nodes</th></tr></thead><tbody></tbody></table>
      </section>
      <section>
        <h2>Refusals</h2>
        <table id="refusals"><thead><tr><th>reason</th><th class="n">count</th></tr></thead><tbody></tbody></table>
      </section>
      <section class="wide">
        <h2>Streams</h2>
        <table id="streams"><thead><tr>
          <th>node</th><th>peer</th><th>type</th><th class="n">#</th><th>progress</th><th class="n">sent</th><th class="n">received</th><th>state</th>
        </tr></thead><tbody></tbody></table>
      </section>
    </main>
    <script>
    "use strict";
    const $ = (id) => document.getElementById(id);
    const fmt = (n) => n == null ? "–" : n >= 1e9 ? (n / 1e9).toFixed(1) + " G" : n >= 1e6 ? (n / 1e6).toFixed(1) + " M" : n >= 1e4 ? (n / 1e3).toFixed(1) + " k" : String(Math.round(n * 10) / 10);
    const cell = (text, numeric) => { const td = document.createElement("td"); td.textContent = text; if (numeric) td.className = "n"; return td; };
    let sortKey = "name", sortDown = false, last = null;

    function fill(table, rows, empty) {
      const body = table.tBodies[0];
      body.replaceChildren(...rows);
      if (rows.length === 0) {
        const tr = document.createElement("tr"), td = document.createElement("td");
        td.colSpan = table.tHead.rows[0].cells.length; td.className = "empty"; td.textContent = empty;
        tr.append(td); body.append(tr);
      }
    }

    function nodeRows(nodes) {
      const value = (n) => ({
        name: n.name, host: n.host, activities: n.activities, published: n.publishedMessages, heard: n.lastHeardSecondsAgo,
        inRate: n.traffic?.messagesInPerSecond ?? -1, outRate: n.traffic?.messagesOutPerSecond ?? -1,
        bytesIn: n.traffic?.bytesIn ?? -1, bytesOut: n.traffic?.bytesOut ?? -1 })[sortKey];
      const sorted = [...nodes].sort((a, b) => { const x = value(a), y = value(b); const c = x < y ? -1 : x > y ? 1 : 0; return sortDown ? -c : c; });
      return sorted.map((n) => {
        const tr = document.createElement("tr");
        tr.dataset.node = n.name; if (n.gone) tr.className = "gone";
        tr.title = n.id;
        tr.append(cell(n.name), cell(n.host), cell(n.activities + (n.partial ? "+" : ""), true),
          cell(fmt(n.traffic?.messagesInPerSecond), true), cell(fmt(n.traffic?.messagesOutPerSecond), true),
          cell(fmt(n.traffic?.bytesIn), true), cell(fmt(n.traffic?.bytesOut), true),
          cell(fmt(n.publishedMessages), true), cell(n.gone ? "gone" : n.lastHeardSecondsAgo.toFixed(1) + " s ago", true));
        return tr;
      });
    }

    function chart(rates) {
      const max = Math.max(1, ...rates.map((r) => r.messages)), w = 600 / rates.length;
      const svg = $("chart");
      const bars = rates.map((r, i) => {
        const h = Math.round(110 * r.messages / max);
        return `<rect x="${(i * w).toFixed(1)}" y="${120 - h}" width="${(w - 1).toFixed(1)}" height="${h}" fill="#2f6fde"><title>${r.messages} messages, ${r.bytes} bytes</title></rect>`;
      });
      svg.innerHTML = bars.join("");
      $("chart-max").textContent = `(top of the chart: ${max}/s)`;
      svg.dataset.points = rates.map((r) => r.messages).join(",");
    }

    function draw(view) {
      last = view;
      $("source").textContent = view.source;
      $("rate").textContent = fmt(view.messagesPerSecond);
      $("bytes").textContent = fmt(view.bytesPerSecond);
      $("node-count").textContent = view.nodes.filter((n) => !n.gone).length;
      $("activity-count").textContent = view.types.reduce((s, t) => s + t.activities, 0);
      $("continuations").textContent = view.continuations;
      $("malformed").textContent = view.malformed;
      chart(view.rates);
      fill($("nodes"), nodeRows(view.nodes), "no node heard yet (a node says it is there every 2 s)");
      fill($("types"), view.types.map((t) => { const tr = document.createElement("tr"); tr.dataset.type = t.type; tr.append(cell(t.type), cell(t.activities, true), cell(t.nodes, true)); return tr; }), "no activity current");
      fill($("refusals"), Object.entries(view.refusals).filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1]).map(([reason, n]) => { const tr = document.createElement("tr"); tr.append(cell(reason), cell(n, true)); return tr; }), "none");
      fill($("streams"), view.streams.map((s) => {
        const tr = document.createElement("tr"), bar = document.createElement("td");
        const done = s.expected > 0 ? Math.min(1, Math.max(s.sent, s.received) / s.expected) : (s.state === "finished" ? 1 : 0);
        bar.innerHTML = `<span class="bar"><i style="width:${(done * 100).toFixed(0)}%"></i></span> ${s.expected > 0 ? (done * 100).toFixed(0) + " %" : ""}`;
        const state = cell(s.state + (s.detail ? " (" + s.detail + ")" : "")); state.className = s.state;
        tr.append(cell(s.node), cell(s.peer || "–"), cell(s.type), cell(s.id, true), bar, cell(fmt(s.sent), true), cell(fmt(s.received), true), state);
        return tr;
      }), "no stream in flight");
      document.body.dataset.updated = String(Date.now());
    }

    for (const th of document.querySelectorAll("#nodes th")) {
      th.addEventListener("click", () => { const k = th.dataset.key; sortDown = sortKey === k ? !sortDown : k !== "name" && k !== "host"; sortKey = k; if (last) draw(last); });
    }
    const events = new EventSource("events");
    events.onmessage = (e) => { $("status").textContent = "live"; $("status").className = ""; draw(JSON.parse(e.data)); };
    events.onerror = () => { $("status").textContent = "reconnecting…"; $("status").className = "down"; };
    </script>
    </body>
    </html>
    """
}
