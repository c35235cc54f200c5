// The Sluice dashboard: a hand-written page over the JobManager's REST API
// (docs/REST.md). Everything the server sends is put into the page as text
// (textContent, setAttribute), never parsed as HTML: job names, operator
// names and guest stack traces come from tenants' modules.
(() => {
  'use strict';

  const TOKEN_KEY = 'sluice-token';
  const DEFAULT_REFRESH = 2000;

  const state = {
    refresh: DEFAULT_REFRESH,
    timer: 0,
    seq: 0, // render generation: a late answer for an old route is dropped
    version: '',
    // Per job: the last sample of each vertex's counters and when its
    // TaskManager measured them, so rates are diffs between reports.
    samples: new Map(),
    lastRates: new Map(), // per job: the rates shown, kept until a newer report
    // Per job: the last savepoint or stop trigger {kind, rid, status, location, cause}.
    triggers: new Map(),
    confirm: '', // the action awaiting its second click ("cancel", "stop")
  };

  // ---- DOM building: text only ------------------------------------------

  // h builds an element. attrs: plain attributes (set with setAttribute),
  // "class", "dataset" (object) and "on<event>" handlers. Children are
  // nodes or strings (become text nodes); null and false are skipped.
  function h(tag, attrs, ...children) {
    return build(document.createElement(tag), attrs, children);
  }

  const SVGNS = 'http://www.w3.org/2000/svg';
  function s(tag, attrs, ...children) {
    return build(document.createElementNS(SVGNS, tag), attrs, children);
  }

  function build(el, attrs, children) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'dataset') {
        for (const [dk, dv] of Object.entries(v)) el.dataset[dk] = String(dv);
      } else if (k.startsWith('on') && typeof v === 'function') {
        el.addEventListener(k.slice(2), v);
      } else {
        el.setAttribute(k, v === true ? '' : String(v));
      }
    }
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }

  // ---- the API -----------------------------------------------------------

  class APIError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  function token() {
    return sessionStorage.getItem(TOKEN_KEY) || '';
  }

  async function api(path, opts = {}) {
    const headers = { Accept: 'application/json' };
    const t = token();
    if (t) headers.Authorization = 'Bearer ' + t;
    if (opts.body !== undefined) headers['Content-Type'] = 'application/json';
    let resp;
    try {
      resp = await fetch(path, {
        method: opts.method || 'GET',
        headers,
        body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
        cache: 'no-store',
      });
    } catch (e) {
      throw new APIError(0, 'the JobManager does not answer: ' + e.message);
    }
    const text = await resp.text();
    let body = text;
    if ((resp.headers.get('Content-Type') || '').includes('json') && text !== '') {
      try { body = JSON.parse(text); } catch (e) { body = text; }
    }
    if (resp.status === 401) showAuth(true);
    if (!resp.ok) {
      let msg = resp.status + ' ' + resp.statusText;
      if (body && Array.isArray(body.errors) && body.errors.length) msg = body.errors.join('; ');
      throw new APIError(resp.status, msg);
    }
    return body;
  }

  // settle answers {ok, value} or {ok: false, error} for each path, so one
  // missing route spoils only its own section.
  function settle(promises) {
    return Promise.all(promises.map((p) => p.then(
      (value) => ({ ok: true, value }),
      (error) => ({ ok: false, error }))));
  }

  function showAuth(bad) {
    const el = document.getElementById('auth');
    el.hidden = !bad;
    el.textContent = bad ? (token() === ''
      ? 'Token required: this JobManager has tenants. Paste your Bearer token above and press Use.'
      : 'Token invalid: the JobManager refused it. Paste a valid Bearer token above and press Use.') : '';
  }

  function showError(msg) {
    const el = document.getElementById('error');
    el.hidden = !msg;
    el.textContent = msg || '';
  }

  // ---- formatting --------------------------------------------------------

  function num(v) {
    if (v === undefined || v === null || v === '' || Number.isNaN(Number(v))) return '–';
    return Number(v).toLocaleString('en-US');
  }

  function bytes(v) {
    if (v === undefined || v === null || Number(v) < 0 || Number.isNaN(Number(v))) return '–';
    let n = Number(v);
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i === 0 ? String(n) : n.toFixed(1)) + ' ' + units[i];
  }

  function ms(v) {
    if (v === undefined || v === null || Number(v) < 0 || Number.isNaN(Number(v))) return '–';
    const n = Number(v);
    if (n < 1000) return n + ' ms';
    if (n < 60000) return (n / 1000).toFixed(1) + ' s';
    const m = Math.floor(n / 60000);
    if (m < 60) return m + 'm ' + Math.floor((n % 60000) / 1000) + 's';
    return Math.floor(m / 60) + 'h ' + (m % 60) + 'm';
  }

  function time(v) {
    if (!v || Number(v) <= 0) return '–';
    const d = new Date(Number(v));
    const p = (x) => String(x).padStart(2, '0');
    return d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' + p(d.getDate()) + ' ' +
      p(d.getHours()) + ':' + p(d.getMinutes()) + ':' + p(d.getSeconds());
  }

  // heartbeat shows Flink's "timeSinceLastHeartbeat", which despite its
  // name is the time of the last heartbeat (Unix ms); a small value is
  // taken as the age it is named for.
  function heartbeat(v) {
    if (v === undefined || v === null || Number(v) <= 0) return '–';
    const n = Number(v);
    return n > 1e12 ? time(n) + ' (' + ms(Math.max(0, Date.now() - n)) + ' ago)' : ms(n) + ' ago';
  }

  function rate(v) {
    if (v === null || v === undefined) return '–';
    return (v >= 100 ? Math.round(v).toLocaleString('en-US') : v.toFixed(1)) + '/s';
  }

  function badge(st) {
    const v = String(st || 'UNKNOWN');
    const cls = 'state' + (/^[A-Z_]+$/.test(v) ? ' state-' + v : '');
    return h('span', { class: cls }, v);
  }

  function card(label, value, id) {
    return h('div', { class: 'card', id },
      h('div', { class: 'value', dataset: { value } }, num(value)),
      h('div', { class: 'label' }, label));
  }

  function table(headers, rows, attrs) {
    return h('table', attrs,
      h('thead', null, h('tr', null, headers.map((x) => {
        const [label, cls] = Array.isArray(x) ? x : [x, null];
        return h('th', { class: cls }, label);
      }))),
      h('tbody', null, rows));
  }

  function kv(pairs, attrs) {
    return h('dl', Object.assign({ class: 'kv' }, attrs), pairs.map(([k, v]) => [h('dt', null, k), h('dd', null, v)]));
  }

  function sectionError(what, err) {
    return h('p', { class: 'section-error' }, what + ': ' + err.message);
  }

  function link(href, text) {
    return h('a', { href }, text);
  }

  const jobHref = (id) => '#/jobs/' + encodeURIComponent(id);
  const tmHref = (id) => '#/taskmanagers/' + encodeURIComponent(id);

  // ---- pages -------------------------------------------------------------

  async function overviewPage() {
    const [ov, jobs, tms] = await settle([api('/overview'), api('/jobs/overview'), api('/taskmanagers')]);
    const out = [h('h1', null, 'Cluster overview')];
    if (!ov.ok) throw ov.error;
    const o = ov.value;
    out.push(h('div', { class: 'cards', id: 'overview-cards' },
      card('TaskManagers', o.taskmanagers, 'ov-taskmanagers'),
      card('Slots total', o['slots-total'], 'ov-slots-total'),
      card('Slots available', o['slots-available'], 'ov-slots-available'),
      card('Jobs running', o['jobs-running'], 'ov-jobs-running'),
      card('Jobs finished', o['jobs-finished'], 'ov-jobs-finished'),
      card('Jobs cancelled', o['jobs-cancelled'], 'ov-jobs-cancelled'),
      card('Jobs failed', o['jobs-failed'], 'ov-jobs-failed')));
    out.push(h('h2', null, 'Running jobs'));
    if (jobs.ok) {
      const running = (jobs.value.jobs || []).filter((j) => !isTerminal(j.state));
      out.push(running.length ? jobTable(running) : h('p', { class: 'muted' }, 'No running jobs.'));
    } else {
      out.push(sectionError('jobs', jobs.error));
    }
    out.push(h('h2', null, 'TaskManagers'));
    out.push(tms.ok ? tmTable(tms.value.taskmanagers || []) : sectionError('taskmanagers', tms.error));
    return out;
  }

  function isTerminal(st) {
    return ['FINISHED', 'CANCELED', 'FAILED'].includes(st);
  }

  // taskCounts summarises subtasks by state; the job list spells the
  // states in lower case, the job details in upper case (as Flink does).
  function taskCounts(tasks) {
    if (!tasks) return '–';
    const parts = [];
    let total = 0;
    for (const [k, n] of Object.entries(tasks)) {
      if (k === 'total' || !n) continue;
      parts.push(n + ' ' + k.toLowerCase());
      total += Number(n);
    }
    return (tasks.total !== undefined ? tasks.total : total) + ' total' + (parts.length ? ' (' + parts.join(', ') + ')' : '');
  }

  function jobTable(jobs) {
    const sorted = [...jobs].sort((a, b) => (b['start-time'] || 0) - (a['start-time'] || 0));
    return table(['Name', 'Job ID', 'State', 'Started', ['Duration', 'num'], 'Tasks'],
      sorted.map((j) => h('tr', { class: 'job-row', dataset: { jid: j.jid, state: j.state } },
        h('td', null, link(jobHref(j.jid), j.name || '(unnamed)')),
        h('td', null, h('code', null, j.jid)),
        h('td', null, badge(j.state)),
        h('td', null, time(j['start-time'])),
        h('td', { class: 'num' }, ms(j.duration)),
        h('td', null, taskCounts(j.tasks)))),
      { id: 'job-table' });
  }

  async function jobsPage() {
    const jobs = await api('/jobs/overview');
    const list = jobs.jobs || [];
    return [h('h1', null, 'Jobs'), list.length ? jobTable(list) : h('p', { class: 'muted' }, 'No jobs.')];
  }

  function tmTable(tms) {
    return table(['TaskManager', 'Address', ['Data port', 'num'], ['Slots', 'num'], ['Free', 'num'], ['Cores', 'num'], ['Memory', 'num'], ['Last heartbeat', 'num']],
      tms.map((t) => h('tr', { class: 'tm-row', dataset: { tmid: t.id } },
        h('td', null, link(tmHref(t.id), t.id)),
        h('td', null, t.path || '–'),
        h('td', { class: 'num' }, t.dataPort === undefined ? '–' : String(t.dataPort)),
        h('td', { class: 'num' }, num(t.slotsNumber)),
        h('td', { class: 'num' }, num(t.freeSlots)),
        h('td', { class: 'num' }, num(t.hardware && t.hardware.cpuCores)),
        h('td', { class: 'num' }, bytes(t.hardware && t.hardware.physicalMemory)),
        h('td', { class: 'num' }, heartbeat(t.timeSinceLastHeartbeat)))),
      { id: 'tm-table' });
  }

  async function taskManagersPage() {
    const tms = await api('/taskmanagers');
    const list = tms.taskmanagers || [];
    return [h('h1', null, 'TaskManagers'), list.length ? tmTable(list) : h('p', { class: 'muted' }, 'No TaskManagers registered.')];
  }

  // A TaskManager's page: its details, slots, memory and log. A logs route
  // that is missing (404) leaves the details on their own.
  async function taskManagerPage(id) {
    const base = '/taskmanagers/' + encodeURIComponent(id);
    const [det, logs, tasks] = await settle([api(base), api(base + '/logs?limit=' + LOG_LINES), tasksOn(id)]);
    if (!det.ok) throw det.error;
    const t = det.value;
    const here = tasks.ok ? tasks.value : [];
    const out = [h('h1', null, 'TaskManager ', h('code', null, t.id || id))];
    out.push(kv([
      ['ID', t.id || id],
      ['Address', t.path || '–'],
      ['Data port', t.dataPort === undefined ? '–' : String(t.dataPort)],
      ['Last heartbeat', heartbeat(t.timeSinceLastHeartbeat)],
      ['CPU cores', num(t.hardware && t.hardware.cpuCores)],
      ['Physical memory', bytes(t.hardware && t.hardware.physicalMemory)],
    ], { id: 'tm-details' }));

    out.push(h('h2', null, 'Slots'));
    const total = Number(t.slotsNumber || 0);
    const free = Number(t.freeSlots || 0);
    out.push(h('div', { class: 'cards', id: 'tm-slots' },
      card('Slots', t.slotsNumber, 'tm-slots-total'),
      card('Free', t.freeSlots, 'tm-slots-free'),
      card('In use', total - free, 'tm-slots-used')));
    if (Array.isArray(t.slots) && t.slots.length) out.push(slotTable(t.slots));
    if (!tasks.ok) out.push(sectionError('tasks', tasks.error));
    else if (here.length) out.push(taskTable(here));
    else out.push(h('p', { class: 'muted', id: 'tm-tasks' }, 'No tasks of yours run here.'));

    out.push(h('h2', null, 'Memory'));
    out.push(memorySection(t, here));

    out.push(h('h2', null, 'Log'));
    if (logs.ok) {
      out.push(logSection(logs.value, 'tm-log'));
    } else if (logs.error.status === 404) {
      out.push(h('p', { class: 'muted', id: 'tm-logs-missing' }, 'No log for this TaskManager here (the logs route answered 404); its details are above.'));
    } else {
      out.push(sectionError('log', logs.error));
    }
    return out;
  }

  // tasksOn finds the subtasks of the tenant's running jobs deployed on
  // TaskManager tm: what fills its slots, as far as this tenant may see.
  async function tasksOn(tm) {
    const jobs = ((await api('/jobs/overview')).jobs || []).filter((j) => !isTerminal(j.state));
    const out = [];
    await Promise.all(jobs.map(async (j) => {
      const base = '/jobs/' + encodeURIComponent(j.jid);
      const job = await api(base);
      const vs = await settle((job.vertices || []).map((v) => api(base + '/vertices/' + encodeURIComponent(v.id))));
      for (const r of vs) {
        if (!r.ok) continue;
        for (const st of r.value.subtasks || []) {
          if (st['taskmanager-id'] === tm) out.push({ job: j, vertex: r.value, st });
        }
      }
    }));
    out.sort((a, b) => (a.job.jid + a.vertex.id).localeCompare(b.job.jid + b.vertex.id) || a.st.subtask - b.st.subtask);
    return out;
  }

  const PAGE_BYTES = 65536; // a Wasm memory page

  function taskTable(tasks) {
    return table(['Job', 'Task', ['Subtask', 'num'], 'Status', ['Attempt', 'num'], ['Records in', 'num'], ['Records out', 'num'], ['Guest memory', 'num']],
      tasks.map(({ job, vertex, st }) => {
        const m = st.metrics || {};
        const rep = m.reported !== 0;
        return h('tr', { class: 'task-row', dataset: { jid: job.jid, vertexId: vertex.id, subtask: st.subtask } },
          h('td', null, link(jobHref(job.jid), job.name || job.jid)),
          h('td', null, vertex.name),
          h('td', { class: 'num' }, String(st.subtask)),
          h('td', null, badge(st.status)),
          h('td', { class: 'num' }, String(st.attempt ?? '–')),
          h('td', { class: 'num' }, rep ? num(m['read-records']) : '–'),
          h('td', { class: 'num' }, rep ? num(m['write-records']) : '–'),
          h('td', { class: 'num' }, rep && m['memory-pages'] !== undefined ? bytes(m['memory-pages'] * PAGE_BYTES) : '–'));
      }), { id: 'tm-tasks' });
  }

  function slotTable(slots) {
    const keys = [...new Set(slots.flatMap((x) => Object.keys(x)))];
    return table(keys, slots.map((x) => h('tr', { class: 'slot-row' }, keys.map((k) => h('td', null, scalar(x[k]))))), { id: 'slot-table' });
  }

  function scalar(v) {
    if (v === null || v === undefined) return '–';
    if (typeof v === 'object') return JSON.stringify(v);
    return String(v);
  }

  // memorySection shows what the TaskManager reports about memory: the
  // hardware figure and every memory-ish metric, whatever their names.
  function memorySection(t, tasks) {
    const pairs = [['Physical memory', bytes(t.hardware && t.hardware.physicalMemory)]];
    const measured = tasks.filter(({ st }) => st.metrics && st.metrics.reported !== 0 && st.metrics['memory-pages'] !== undefined);
    if (measured.length) {
      const pages = measured.reduce((a, { st }) => a + Number(st.metrics['memory-pages']), 0);
      pairs.push(['Guest memory of your tasks', bytes(pages * PAGE_BYTES) + ' in ' + measured.length + ' instance' + (measured.length === 1 ? '' : 's')]);
    }
    for (const src of [t.memoryConfiguration, t.memory, t.metrics]) {
      if (!src || typeof src !== 'object') continue;
      for (const [k, v] of Object.entries(src)) {
        if ((typeof v === 'object' && v !== null) || !/mem|heap|bytes|pages/i.test(k)) continue;
        if (k === 'physicalMemory') continue; // shown first
        const isBytes = !/pages/i.test(k);
        pairs.push([k, typeof v === 'number' && isBytes ? bytes(v) : (typeof v === 'number' ? num(v) : String(v))]);
      }
    }
    return kv(pairs, { id: 'tm-memory' });
  }

  // LOG_LINES is how many of the newest lines a log section asks for.
  const LOG_LINES = 200;

  // logSection shows the answer of a logs route ({"lines": [...]}), oldest
  // line first, one line of text each.
  function logSection(v, id) {
    if (typeof v === 'string') return h('pre', { id, class: 'log' }, v || '(empty)');
    const lines = (v && (v.lines || v.logs)) || [];
    if (!Array.isArray(lines) || lines.length === 0) return h('p', { class: 'muted', id }, 'No log lines yet.');
    if (typeof lines[0] !== 'object') return h('pre', { id, class: 'log' }, lines.join('\n'));
    const text = lines.map((l) => {
      const task = l.task ? l.task + (l.subtask !== undefined ? '#' + l.subtask : '') : '';
      const dropped = l.dropped ? '(' + l.dropped + ' older lines dropped) ' : '';
      return [time(l.time), (l.level || '').padEnd(5), task, dropped + (l.message || ''), l.attrs || '']
        .filter((x) => x !== '').join('  ');
    });
    return h('pre', { id, class: 'log', dataset: { lines: lines.length } }, text.join('\n'));
  }

  // ---- the job page --------------------------------------------------------

  async function jobPage(id) {
    const base = '/jobs/' + encodeURIComponent(id);
    const job = await api(base);
    const vertices = job.vertices || [];
    const running = job.state === 'RUNNING';
    const perVertex = (suffix) => settle(vertices.map((v) => api(base + '/vertices/' + encodeURIComponent(v.id) + suffix)));
    const [[cps, exc, logs], bps, wms] = await Promise.all([
      settle([api(base + '/checkpoints'), api(base + '/exceptions'), api(base + '/logs?limit=' + LOG_LINES)]),
      running ? perVertex('/backpressure') : Promise.resolve([]),
      perVertex('/watermarks'),
      pollTrigger(id, base),
    ]);
    const rates = sampleRates(id, job);
    const bp = new Map();
    vertices.forEach((v, i) => { bp.set(v.id, backpressureOf(v, running, bps[i])); });

    const out = [h('h1', null, job.name || '(unnamed job)', ' ', badge(job.state))];
    out.push(kv([
      ['Job ID', h('code', { id: 'job-id' }, job.jid)],
      ['Type', (job.plan && job.plan.type) || '–'],
      ['Started', time(job['start-time'])],
      ['Ended', job['end-time'] > 0 ? time(job['end-time']) : '–'],
      ['Duration', ms(job.duration)],
      ['Restarts', job.restarts === undefined ? '–' : num(job.restarts)],
      ['Module', job['module-digest'] ? h('code', null, job['module-digest']) : '–'],
      job.failure ? ['Failure', h('span', { class: 'section-error' }, job.failure)] : null,
    ].filter(Boolean), { id: 'job-summary' }));
    out.push(actions(id, base, job.state));
    out.push(h('h2', null, 'Job graph'));
    out.push(dag(job.plan, vertices, bp));
    out.push(h('h2', null, 'Operators'));
    out.push(vertexTable(vertices, rates, bp));
    out.push(h('h2', null, 'Watermarks'));
    out.push(watermarks(vertices, wms));
    out.push(h('h2', null, 'Checkpoints'));
    out.push(cps.ok ? checkpoints(cps.value) : sectionError('checkpoints', cps.error));
    out.push(h('h2', null, 'Exceptions'));
    out.push(exc.ok ? exceptions(exc.value) : sectionError('exceptions', exc.error));
    out.push(h('h2', null, 'Logs'));
    if (logs.ok) out.push(logSection(logs.value, 'job-log'));
    else if (logs.error.status === 404) out.push(h('p', { class: 'muted', id: 'job-log' }, 'This JobManager serves no task logs (the logs route answered 404).'));
    else out.push(sectionError('logs', logs.error));
    return out;
  }

  // reported says whether a vertex's metrics were measured: the REST API
  // sends zeros with "reported": 0 until a TaskManager's first report, and
  // those zeros mean "not known yet", not "nothing flowed".
  function reported(v) {
    return !!v.metrics && v.metrics.reported !== 0;
  }

  const COUNTERS = [['read-records', 'ri'], ['write-records', 'ro'], ['read-bytes', 'bi'], ['write-bytes', 'bo']];

  // sampleRates keeps this refresh's counters and returns, per vertex, the
  // per-second rates between the last two samples that differ in time.
  // The time of a sample is when the TaskManager measured it ("reported"),
  // or the server's "now" for an API without it: counters move only when
  // a report arrives, so dividing by the time between page refreshes would
  // make the rate jump with how many reports fell between two refreshes.
  // A rate is null before a second sample, and when a counter went down (a
  // restarted attempt counts from zero).
  function sampleRates(jid, job) {
    const prev = state.samples.get(jid) || new Map();
    const shown = state.lastRates.get(jid) || new Map();
    const next = new Map();
    const rates = new Map();
    for (const v of job.vertices || []) {
      if (!reported(v)) continue;
      const m = v.metrics;
      const at = Number(m.reported) || Number(job.now) || Date.now();
      const c = { at };
      for (const [k, short] of COUNTERS) c[short] = Number(m[k] || 0);
      const p = prev.get(v.id);
      if (p && at <= p.at) {
        // No new report since the last refresh: keep the sample and the rate.
        next.set(v.id, p);
        if (shown.has(v.id)) rates.set(v.id, shown.get(v.id));
        continue;
      }
      next.set(v.id, c);
      if (!p) continue;
      const r = {};
      for (const [, short] of COUNTERS) {
        const d = c[short] - p[short];
        r[short] = d < 0 ? null : d * 1000 / (at - p.at);
      }
      rates.set(v.id, r);
    }
    state.samples.set(jid, next);
    state.lastRates.set(jid, rates);
    return rates;
  }

  // Flink's levels: ratio = back-pressured ms per second / 1000; ok ≤ 0.10 < low ≤ 0.5 < high.
  function level(ratio) {
    if (ratio === null || ratio === undefined || Number.isNaN(ratio)) return 'none';
    if (ratio <= 0.10) return 'ok';
    if (ratio <= 0.5) return 'low';
    return 'high';
  }

  // backpressureOf is a vertex's back-pressure from its route, or from its
  // metrics when the route did not answer; only running vertices have one.
  function backpressureOf(v, running, res) {
    if (!running || (v.metrics && !reported(v))) return { level: 'none', ratio: null };
    if (res && res.ok && res.value) {
      const subs = res.value.subtasks || [];
      const ratio = subs.length ? Math.max(...subs.map((x) => Number(x.ratio || 0))) : null;
      const lv = res.value.backpressureLevel || level(ratio);
      return { level: ['ok', 'low', 'high'].includes(lv) ? lv : 'none', ratio };
    }
    const m = v.metrics;
    if (!m || m['backpressured-ms-per-second'] === undefined) return { level: 'none', ratio: null };
    const ratio = Number(m['backpressured-ms-per-second']) / 1000;
    return { level: level(ratio), ratio };
  }

  const FILL = { ok: '#cfead5', low: '#f8dc9c', high: '#f2a59c', none: '#e6eaee' };

  // dag draws the plan left to right, one column per topological depth
  // (the longest path from a source), ordered within a column by the mean
  // row of each node's inputs so edges cross less.
  function dag(plan, vertices, bp) {
    const nodes = (plan && plan.nodes) || [];
    if (!nodes.length) return h('p', { class: 'muted' }, 'No plan.');
    const byId = new Map(nodes.map((n) => [String(n.id), n]));
    const vById = new Map(vertices.map((v) => [String(v.id), v]));
    const depth = new Map();
    const visiting = new Set();
    const depthOf = (id) => {
      if (depth.has(id)) return depth.get(id);
      if (visiting.has(id)) return 0; // a cycle is not a DAG; draw it anyway
      visiting.add(id);
      let d = 0;
      for (const inp of byId.get(id).inputs || []) {
        if (byId.has(String(inp.id))) d = Math.max(d, depthOf(String(inp.id)) + 1);
      }
      visiting.delete(id);
      depth.set(id, d);
      return d;
    };
    nodes.forEach((n) => depthOf(String(n.id)));
    const columns = [];
    for (const n of nodes) {
      const d = depth.get(String(n.id));
      (columns[d] = columns[d] || []).push(n);
    }
    const row = new Map();
    columns.forEach((col, ci) => {
      if (ci > 0) {
        const key = (n) => {
          const rs = (n.inputs || []).map((i) => row.get(String(i.id))).filter((r) => r !== undefined);
          return rs.length ? rs.reduce((a, b) => a + b, 0) / rs.length : 0;
        };
        col.sort((a, b) => key(a) - key(b));
      }
      col.forEach((n, ri) => row.set(String(n.id), ri));
    });
    const W = 190, H = 70, GX = 90, GY = 28, PAD = 16;
    const rows = Math.max(...columns.map((c) => c.length));
    const width = PAD * 2 + columns.length * W + (columns.length - 1) * GX;
    const height = PAD * 2 + rows * H + (rows - 1) * GY;
    const pos = new Map();
    columns.forEach((col, ci) => {
      const offset = (rows - col.length) * (H + GY) / 2; // centre short columns
      col.forEach((n, ri) => pos.set(String(n.id), { x: PAD + ci * (W + GX), y: PAD + offset + ri * (H + GY) }));
    });
    const svg = s('svg', { width, height, viewBox: `0 0 ${width} ${height}`, id: 'dag-svg', role: 'img', 'aria-label': 'job graph' },
      s('defs', null, s('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
        s('path', { d: 'M0,0 L10,5 L0,10 z', fill: '#6b7a88' }))));
    for (const n of nodes) {
      const to = pos.get(String(n.id));
      for (const inp of n.inputs || []) {
        const from = pos.get(String(inp.id));
        if (!from) continue;
        const x1 = from.x + W, y1 = from.y + H / 2, x2 = to.x, y2 = to.y + H / 2;
        const mx = (x1 + x2) / 2;
        svg.append(s('g', { class: 'edge', dataset: { from: inp.id, to: n.id, ship: inp.ship_strategy || '' } },
          s('path', { d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2 - 2},${y2}`, 'marker-end': 'url(#arrow)' }),
          s('text', { x: mx, y: (y1 + y2) / 2 - 5, 'text-anchor': 'middle' }, inp.ship_strategy || '')));
      }
    }
    for (const n of nodes) {
      const id = String(n.id);
      const p = pos.get(id);
      const v = vById.get(id);
      const b = bp.get(id) || { level: 'none', ratio: null };
      const name = (v && v.name) || n.description || n.operator || id;
      const par = (v && v.parallelism) || n.parallelism;
      const bpText = b.ratio === null ? (v ? String(v.status || '') : '') : 'backpressure ' + Math.round(b.ratio * 100) + '% (' + b.level + ')';
      const g = s('g', { class: 'node', transform: `translate(${p.x},${p.y})`, dataset: { vertexId: id, backpressure: b.level } },
        s('title', null, name + (n.operator && n.operator !== name ? '\n' + n.operator : '')),
        s('rect', { width: W, height: H, rx: 5, fill: FILL[b.level] }),
        s('text', { x: 10, y: 20, class: 'name' }, clip(name, 26)),
        s('text', { x: 10, y: 40, class: 'small' }, 'Parallelism: ' + par),
        s('text', { x: 10, y: 58, class: 'small' }, bpText));
      svg.append(g);
    }
    return h('div', null,
      h('div', { class: 'dag', id: 'dag' }, svg),
      h('div', { class: 'legend' },
        h('span', null, h('span', { class: 'swatch ok' }), 'backpressure ok (≤ 10%)'),
        h('span', null, h('span', { class: 'swatch low' }), 'low (≤ 50%)'),
        h('span', null, h('span', { class: 'swatch high' }), 'high'),
        h('span', null, h('span', { class: 'swatch none' }), 'not running')));
  }

  function clip(str, n) {
    return str.length > n ? str.slice(0, n - 1) + '…' : str;
  }

  function vertexTable(vertices, rates, bp) {
    const metricCell = (v, key, fmt) => {
      const val = reported(v) ? v.metrics[key] : undefined;
      return h('td', { class: 'num ' + key, dataset: { value: val === undefined ? '' : val } }, val === undefined ? '–' : fmt(val));
    };
    const rateCell = (r, short, cls) => {
      const val = r ? r[short] : null;
      return h('td', { class: 'num ' + cls, dataset: { value: val === null || val === undefined ? '' : val } },
        val === null || val === undefined ? '–' : (short.startsWith('b') ? bytes(Math.round(val)) + '/s' : rate(val)));
    };
    return table(['Operator', ['Parallelism', 'num'], 'Status', ['Records in', 'num'], ['Records out', 'num'], ['Bytes in', 'num'], ['Bytes out', 'num'],
      ['Records in/s', 'num'], ['Records out/s', 'num'], ['Bytes in/s', 'num'], ['Bytes out/s', 'num'], ['Busy ms/s', 'num'], 'Backpressure'],
    vertices.map((v) => {
      const r = rates.get(v.id);
      const b = bp.get(v.id) || { level: 'none', ratio: null };
      return h('tr', { class: 'vertex-row', dataset: { vertexId: v.id } },
        h('td', { class: 'name' }, v.name),
        h('td', { class: 'num' }, String(v.parallelism)),
        h('td', null, badge(v.status)),
        metricCell(v, 'read-records', num),
        metricCell(v, 'write-records', num),
        metricCell(v, 'read-bytes', bytes),
        metricCell(v, 'write-bytes', bytes),
        rateCell(r, 'ri', 'rate-records-in'),
        rateCell(r, 'ro', 'rate-records-out'),
        rateCell(r, 'bi', 'rate-bytes-in'),
        rateCell(r, 'bo', 'rate-bytes-out'),
        metricCell(v, 'busy-ms-per-second', num),
        h('td', { class: 'backpressure', dataset: { level: b.level } }, b.ratio === null ? '–' : Math.round(b.ratio * 100) + '% ' + b.level));
    }), { id: 'vertex-table' });
  }

  // Flink's "no watermark yet" is Long.MIN_VALUE.
  const NO_WATERMARK = '-9223372036854775808';

  function watermarks(vertices, wms) {
    const rows = [];
    vertices.forEach((v, i) => {
      const res = wms[i];
      if (!res || !res.ok || !Array.isArray(res.value)) return;
      for (const w of res.value) {
        const val = String(w.value);
        const shown = val === NO_WATERMARK ? 'no watermark yet' : (/^\d{12,}$/.test(val) ? val + ' (' + time(Number(val)) + ')' : val);
        rows.push(h('tr', { class: 'watermark-row' }, h('td', null, v.name), h('td', null, String(w.id)), h('td', null, shown)));
      }
    });
    if (!rows.length) return h('p', { class: 'muted', id: 'watermarks' }, 'No watermarks.');
    return table(['Operator', 'Subtask', 'Watermark'], rows, { id: 'watermarks' });
  }

  const HISTORY_ROWS = 10; // Flink's default history size

  function checkpoints(c) {
    const out = [];
    const counts = c.counts || {};
    out.push(h('div', { class: 'cards', id: 'checkpoint-counts' },
      card('Completed', counts.completed, 'cp-completed'),
      card('In progress', counts.in_progress, 'cp-in-progress'),
      card('Failed', counts.failed, 'cp-failed'),
      card('Restored', counts.restored, 'cp-restored')));
    const all = c.history || [];
    // Newest first, as the API sends them; a long-running job has many.
    const hist = all.slice(0, HISTORY_ROWS);
    if (!hist.length) {
      out.push(h('p', { class: 'muted', id: 'checkpoint-history' }, 'No checkpoints yet.'));
      return out;
    }
    out.push(table([['ID', 'num'], 'Status', 'Type', 'Triggered', ['Duration', 'num'], ['Checkpointed size', 'num'], ['State size', 'num'], ['Alignment', 'num'], ['Acknowledged', 'num'], 'Location'],
      hist.map((e) => h('tr', { class: 'checkpoint-row', dataset: { cid: e.id, status: e.status, savepoint: !!e.is_savepoint } },
        h('td', { class: 'num' }, String(e.id)),
        h('td', null, badge(e.status)),
        h('td', null, e.is_savepoint ? 'savepoint' : 'checkpoint'),
        h('td', { class: 'nowrap' }, time(e.trigger_timestamp)),
        h('td', { class: 'num' }, ms(e.end_to_end_duration)),
        h('td', { class: 'num' }, bytes(e.checkpointed_size)),
        h('td', { class: 'num' }, bytes(e.state_size)),
        h('td', { class: 'num' }, e.alignment_duration === undefined ? '–' : ms(e.alignment_duration)),
        h('td', { class: 'num' }, num(e.num_acknowledged_subtasks) + ' / ' + num(e.num_subtasks)),
        h('td', { class: 'path' }, h('code', null, e.external_path || '')))),
      { id: 'checkpoint-history' }));
    if (all.length > hist.length) out.push(h('p', { class: 'muted' }, (all.length - hist.length) + ' older checkpoints not shown.'));
    return out;
  }

  function exceptions(x) {
    const out = [];
    const entries = (x.exceptionHistory && x.exceptionHistory.entries) || [];
    if (!x['root-exception'] && !entries.length) {
      out.push(h('p', { class: 'muted', id: 'exceptions' }, 'No exceptions.'));
      return out;
    }
    // The module the stack frames are from.
    if (x['module-digest']) out.push(kv([['Module digest', h('code', { id: 'module-digest' }, x['module-digest'])]]));
    if (x['root-exception']) {
      out.push(h('p', null, 'Root exception', x.timestamp ? ' at ' + time(x.timestamp) : '', ':'));
      out.push(h('pre', { id: 'root-exception' }, x['root-exception']));
    }
    const list = h('div', { id: 'exceptions' });
    for (const e of entries) {
      list.append(h('div', { class: 'exception' },
        h('p', null, h('strong', null, e.exceptionName || 'exception'), ' ', time(e.timestamp),
          e.taskName ? ' in ' + e.taskName : '', e.taskManagerId ? ' on ' + e.taskManagerId : ''),
        e.stacktrace ? h('pre', { class: 'stacktrace' }, e.stacktrace) : null));
    }
    if (x.exceptionHistory && x.exceptionHistory.truncated) list.append(h('p', { class: 'muted' }, 'Older exceptions were dropped.'));
    out.push(list);
    return out;
  }

  // ---- actions -------------------------------------------------------------

  function actions(jid, base, jobState) {
    const live = jobState === 'RUNNING';
    const twoStep = (name, label, confirmLabel, run) => h('button', {
      id: 'action-' + name, type: 'button', class: state.confirm === name ? 'danger' : null, disabled: !live,
      onclick: () => {
        if (state.confirm !== name) { state.confirm = name; refreshNow(); return; }
        state.confirm = '';
        run();
      },
    }, state.confirm === name ? confirmLabel : label);
    const act = async (fn) => {
      showError('');
      try { await fn(); } catch (e) { showError(e.message); }
      refreshNow();
    };
    const trigger = (kind, path, body) => act(async () => {
      const r = await api(base + path, { method: 'POST', body });
      state.triggers.set(jid, { kind, rid: r['request-id'], status: 'IN_PROGRESS' });
    });
    const t = state.triggers.get(jid);
    let status = null;
    if (t) {
      const what = t.kind === 'stop' ? 'Stop with savepoint' : 'Savepoint';
      let detail = '';
      if (t.status === 'COMPLETED') detail = t.location ? ' → ' + t.location : '';
      else if (t.cause) detail = ': ' + t.cause;
      status = h('span', { id: 'trigger-status', dataset: { status: t.status, rid: t.rid } }, what + ' ', h('code', null, t.rid), ': ', badge(t.status), detail);
    }
    return h('div', { class: 'actions', id: 'actions' },
      twoStep('cancel', 'Cancel job', 'Confirm cancel', () => act(() => api(base + '?mode=cancel', { method: 'PATCH' }))),
      h('button', { id: 'action-savepoint', type: 'button', disabled: !live, onclick: () => trigger('savepoint', '/savepoints', { 'cancel-job': false }) }, 'Trigger savepoint'),
      twoStep('stop', 'Stop with savepoint', 'Confirm stop', () => trigger('stop', '/stop', { drain: false })),
      state.confirm ? h('button', { type: 'button', id: 'action-abort', onclick: () => { state.confirm = ''; refreshNow(); } }, 'Never mind') : null,
      status);
  }

  // pollTrigger asks for the status of the job's last trigger while it is
  // in progress.
  async function pollTrigger(jid, base) {
    const t = state.triggers.get(jid);
    if (!t || t.status !== 'IN_PROGRESS' || !t.rid) return;
    try {
      const r = await api(base + '/savepoints/' + encodeURIComponent(t.rid));
      const st = (r.status && r.status.id) || 'IN_PROGRESS';
      const op = r.operation || {};
      if (op['failure-cause']) {
        t.status = 'FAILED';
        t.cause = op['failure-cause']['stack-trace'] || op['failure-cause'].class || 'failed';
      } else {
        t.status = st;
        t.location = op.location || '';
      }
    } catch (e) {
      t.cause = e.message;
      if (e.status === 404) t.status = 'UNKNOWN';
    }
  }

  // ---- routing and refresh --------------------------------------------------

  function route() {
    const parts = (location.hash.replace(/^#\/?/, '') || '').split('/').filter(Boolean).map(decodeURIComponent);
    if (parts[0] === 'jobs' && parts[1]) return { nav: 'jobs', page: () => jobPage(parts[1]) };
    if (parts[0] === 'jobs') return { nav: 'jobs', page: jobsPage };
    if (parts[0] === 'taskmanagers' && parts[1]) return { nav: 'taskmanagers', page: () => taskManagerPage(parts[1]) };
    if (parts[0] === 'taskmanagers') return { nav: 'taskmanagers', page: taskManagersPage };
    return { nav: 'overview', page: overviewPage };
  }

  async function render() {
    clearTimeout(state.timer);
    const seq = ++state.seq;
    const r = route();
    const hash = location.hash || '#/';
    for (const a of document.querySelectorAll('[data-nav]')) a.classList.toggle('active', a.dataset.nav === r.nav);
    const main = document.getElementById('main');
    try {
      const content = await r.page();
      if (seq !== state.seq) return;
      showAuth(false);
      main.replaceChildren(...content.flat());
      main.dataset.page = r.nav;
      main.dataset.route = hash;
      main.dataset.rendered = String(seq);
      showError('');
      document.getElementById('updated').textContent = 'updated ' + time(Date.now()) + ' · every ' + (state.refresh / 1000) + ' s';
    } catch (e) {
      if (seq !== state.seq) return;
      if (e.status === 401) {
        main.replaceChildren(h('p', { class: 'muted' }, 'Nothing to show without a valid token.'));
      } else if (e.status === 404) {
        main.replaceChildren(h('h1', null, 'Not found'), h('p', { id: 'not-found' }, e.message));
      } else {
        showError(e.message);
      }
      main.dataset.route = hash;
      main.dataset.rendered = String(seq);
    }
    state.timer = setTimeout(render, state.refresh);
  }

  function refreshNow() {
    render();
  }

  async function loadConfig() {
    try {
      const c = await api('/config');
      const ri = Number(c['refresh-interval']);
      state.refresh = ri >= 100 ? ri : DEFAULT_REFRESH;
      state.version = c['sluice-version'] || '';
      document.title = 'Sluice' + (state.version ? ' ' + state.version : '');
    } catch (e) {
      state.refresh = DEFAULT_REFRESH;
    }
  }

  function start() {
    const input = document.getElementById('token');
    input.value = token();
    document.getElementById('token-form').addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const v = input.value.trim();
      if (v) sessionStorage.setItem(TOKEN_KEY, v); else sessionStorage.removeItem(TOKEN_KEY);
      showAuth(false);
      await loadConfig();
      render();
    });
    document.getElementById('token-clear').addEventListener('click', () => {
      sessionStorage.removeItem(TOKEN_KEY);
      input.value = '';
      showAuth(false);
      render();
    });
    window.addEventListener('hashchange', () => { state.confirm = ''; render(); });
    loadConfig().then(render);
  }

  start();
})();
