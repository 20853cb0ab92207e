// reckon operator console: the runs views (#project=…&view=runs, and a
// run's page #project=…&view=run&run=…), over GET /v1/runs, GET
// /v1/runs/{run_id} and GET /v1/runs/{run_id}/operations. It uses
// console.js's helpers (el, api, section, link, chip, …) and, like it,
// puts what the API returns on the page as text only.
'use strict';

const RUNS_PAGE = 50, RUNS_MAX = 200; // GET /v1/runs: its default and its maximum limit
const EVENTS_PAGE = 500, EVENTS_MAX = 1000; // GET /v1/runs/{run_id}'s maximum limit
const OPS_MAX = 1000; // GET /v1/runs/{run_id}/operations's maximum limit

const runs = {
  status: '', // the runs list's status filter
  limit: RUNS_PAGE, events: EVENTS_PAGE,
  ops: [], // the run's operations as last loaded; the filters narrow what is shown
  filter: { state: '', tool: '', q: '' },
};

function bootRuns() {
  $('runs-status').addEventListener('change', (e) => { location.hash = '#' + hashOf({ view: 'runs', status: e.target.value }); });
  $('runs-more').addEventListener('click', () => { runs.limit = Math.min(RUNS_MAX, runs.limit + RUNS_PAGE); refresh(); });
  $('run-events-more').addEventListener('click', () => { runs.events = EVENTS_MAX; refresh(); });
  for (const [id, key] of [['run-ops-state', 'state'], ['run-ops-tool', 'tool'], ['run-ops-q', 'q']]) {
    $(id).addEventListener('input', (e) => {
      runs.filter[key] = e.target.value;
      // The filters are part of the page's address (a link keeps them),
      // replaced in place: no hashchange, no reload of the run.
      history.replaceState(null, '', '#' + hashOf(Object.assign({ view: 'run', run: state.run }, runs.filter)));
      renderRunOps();
    });
  }
}

// hashOf is the page address of params in the current project.
function hashOf(params) {
  const q = new URLSearchParams({ project: state.project });
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  return q.toString();
}

function runPageLink(run, text) {
  return el('a', { href: '#' + hashOf({ view: 'run', run }), text: text || run });
}

// showView shows the view the address names (h: readHash's) and keeps
// the navigation's links in the current project.
function showView(h) {
  $('view-ops').href = '#' + hashOf({});
  $('view-runs').href = '#' + hashOf({ view: 'runs' });
  $('view-ops').classList.toggle('active', !state.view);
  $('view-runs').classList.toggle('active', !!state.view);
  $('ops-view').hidden = !!state.view;
  $('runs-view').hidden = state.view !== 'runs';
  $('run-view').hidden = state.view !== 'run';
  $('runs-status').value = h.status;
  runs.status = h.status;
  runs.filter = { state: h.state, tool: h.tool, q: h.q };
  $('run-ops-q').value = h.q;
}

// clearRuns empties both views: nothing of another project, run or
// session may stay on screen.
function clearRuns() {
  for (const id of ['runs', 'run-ops', 'run-children']) $(id).tBodies[0].replaceChildren();
  for (const id of ['run-head', 'run-timeline']) $(id).replaceChildren();
  for (const id of ['runs-error', 'run-error']) show($(id), '');
  runs.ops = [];
  runs.limit = RUNS_PAGE;
  runs.events = EVENTS_PAGE;
}

// runsLoads are the loads of a refresh in the runs views.
function runsLoads(gen) {
  return state.view === 'runs' ? [loadRuns(gen)] : [loadRun(gen)];
}

function statusChip(s) {
  return chip(s || '?', 'status-' + (s || 'unknown'));
}

function opsCell(c) {
  return el('td', { text: c ? c.unresolved + ' unresolved of ' + c.total : '' });
}

function loadRuns(gen) {
  return section(gen, 'runs',
    async () => (await api('/v1/runs', { query: { project: state.project, status: runs.status, limit: String(runs.limit) } })).data,
    (page) => {
      const rows = page.runs.map((r) => el('tr', { 'data-run': r.run_id },
        el('td', null, runPageLink(r.run_id)),
        el('td', { text: r.kind === 'agent' ? 'agent · ' + r.source_id : r.kind }),
        el('td', null, statusChip(r.status)),
        ageCell(r.started_at),
        r.ended_at ? ageCell(r.ended_at) : el('td'),
        opsCell(r.operations),
        el('td', { text: r.child_runs ? String(r.child_runs) : '' }),
        el('td', null, r.parent_run_id ? runPageLink(r.parent_run_id) : '')));
      $('runs').tBodies[0].replaceChildren(...rows);
      $('runs-empty').hidden = rows.length > 0;
      $('runs-count').textContent = page.next_cursor ? rows.length + '+' : String(rows.length);
      $('runs-more').hidden = !page.next_cursor || runs.limit >= RUNS_MAX;
    });
}

// loadRun loads a run's page: the run (its summary and events), its
// operations and its child runs.
function loadRun(gen) {
  const run = state.run;
  const path = '/v1/runs/' + encodeURIComponent(run);
  return section(gen, 'run',
    async () => {
      const [view, ops, children] = await Promise.all([
        api(path, { query: { project: state.project, limit: String(runs.events) } }),
        api(path + '/operations', { query: { project: state.project, limit: String(OPS_MAX) } }),
        api('/v1/runs', { query: { project: state.project, parent_run_id: run, limit: String(RUNS_MAX) } }),
      ]);
      return { view: view.data, ops: ops.data, children: children.data };
    },
    (d) => {
      if (run !== state.run) return;
      renderRunHead(d.view, d.ops);
      runs.ops = d.ops.operations;
      fillOpFilters();
      renderRunOps();
      renderChildren(d.children);
      $('run-timeline').replaceChildren(...eventItems(d.view.events, true));
      $('run-events-more').hidden = !d.view.next_cursor || runs.events >= EVENTS_MAX;
    });
}

function renderRunHead(v, ops) {
  const s = v.summary;
  const facts = [];
  if (s) {
    facts.push(s.kind === 'agent' ? 'reported by the agent ' + s.source_id : s.kind + ' run (source ' + s.source_id + ')');
    facts.push('started ' + clock(s.started_at));
    if (s.ended_at) facts.push('ended ' + clock(s.ended_at));
    const c = s.operations;
    facts.push(c.total + ' operation' + (c.total === 1 ? '' : 's') + ', ' + c.unresolved + ' unresolved, ' + c.settled + ' settled');
  }
  $('run-head').replaceChildren(...[
    el('h2', null, 'Run ', el('code', { text: v.run_id }), ' ', statusChip(v.status)),
    el('p', { class: 'meta', text: facts.join(' · ') }),
    s && s.parent_run_id ? el('p', { id: 'run-parent' }, 'Started by the run ', runPageLink(s.parent_run_id)) : null,
    v.awaiting ? el('p', { class: 'warn' }, 'Waits for the settlement of its operation ', el('code', { text: v.awaiting.operation_id }), ' since ' + clock(v.awaiting.since)) : null,
    ops.degraded ? el('p', { class: 'warn', text: 'Temporal could not be asked about this run: its operations are shown as still running.' }) : null,
    el('p', { class: 'hint' }, link({ project: state.project, run: v.run_id }, 'Its unresolved operations, verdicts and decisions'), ' are in the operations view.'),
  ].filter(Boolean));
}

// fillOpFilters offers the states and tools the run's operations have.
function fillOpFilters() {
  const fill = (id, label, values, chosen) => {
    const opts = Array.from(new Set(values.concat(chosen ? [chosen] : []))).sort();
    $(id).replaceChildren(el('option', { value: '', text: label }), ...opts.map((v) => el('option', { value: v, text: v })));
    $(id).value = chosen;
  };
  const states = runs.ops.map((o) => o.state);
  if (states.some((s) => s !== 'settled')) states.push('unresolved');
  fill('run-ops-state', 'any state', states, runs.filter.state);
  fill('run-ops-tool', 'any tool', runs.ops.map((o) => o.tool), runs.filter.tool);
}

// shownOps is the run's operations the filters keep: a state (unresolved:
// any but settled), a tool, and the search, a part of the operation's id,
// its run's or its child run's, in any case.
function shownOps() {
  const f = runs.filter;
  const q = f.q.trim().toLowerCase();
  return runs.ops.filter((o) => (!f.state || o.state === f.state || (f.state === 'unresolved' && o.state !== 'settled')) &&
    (!f.tool || o.tool === f.tool) &&
    (!q || [o.operation_id, o.run_id, o.child_run_id || ''].some((id) => id.toLowerCase().includes(q))));
}

function renderRunOps() {
  const rows = shownOps().map((o) => {
    const by = o.settled_by;
    return el('tr', { 'data-op': o.operation_id },
      el('td', null, o.state === 'settled' ? [chip('settled', 'ok'), ' ', chip(o.effect)] : chip(o.state),
        o.failure && o.failure.error_type ? el('div', { class: 'hint', text: o.failure.error_type }) : null),
      el('td', null, link({ project: state.project, run: o.run_id, op: o.operation_id }, o.operation_id)),
      el('td', { text: o.tool }),
      el('td', { text: by ? by.type + (by.basis ? ' · ' + by.basis : '') + ' · ' + by.actor : '' }),
      ageCell(o.started_at),
      el('td', null, o.child_run_id ? runPageLink(o.child_run_id) : ''));
  });
  $('run-ops').tBodies[0].replaceChildren(...rows);
  $('run-ops-empty').hidden = rows.length > 0;
  $('run-ops-count').textContent = rows.length === runs.ops.length ? String(rows.length) : rows.length + ' of ' + runs.ops.length;
}

function renderChildren(page) {
  const rows = page.runs.map((r) => el('tr', { 'data-run': r.run_id },
    el('td', null, runPageLink(r.run_id)), el('td', null, statusChip(r.status)), opsCell(r.operations), ageCell(r.started_at)));
  $('run-children').tBodies[0].replaceChildren(...rows);
  $('run-children-empty').hidden = rows.length > 0;
  $('run-children-count').textContent = page.next_cursor ? rows.length + '+' : String(rows.length);
}
