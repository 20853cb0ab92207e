// reckon operator console: a page over the public JSON API.
//
// Everything the API returns that an agent, a model or a person wrote —
// ids, args, errors, notes, lessons, evidence — is untrusted. It reaches the
// page only as text (textContent, text nodes) or inside a '#…' link this file
// builds with URLSearchParams; nothing is ever parsed as HTML. The
// Content-Security-Policy the server sends forbids inline scripts and
// styles and every origin but this one.
'use strict';

const TOKEN_KEY = 'reckon.console.token';
const POLL_MS = 5000;
// STREAM_POLL_MS is the poll while the verdict stream is open: it carries
// settlements and attention changes at once; the poll keeps ages and
// operations the stream does not carry (in flight, growing stale) current.
const STREAM_POLL_MS = 30000;
const NOTE_LIMIT = 2000; // kernel.MaxNoteBytes: bytes of UTF-8, not characters

const state = {
  token: null, me: null,
  session: 0,    // counts sign-ins and sign-outs: an answer is for the session that asked (api)
  project: '', run: '', op: '', listRun: '',
  view: '',      // '' (the operations lists), 'runs' or 'run' (runs.js)
  timer: null, busy: false, gen: 0,
  ticks: 0,      // light polls since the last full refresh (schedule)
  stream: null,  // the verdict stream of the project shown ({key, ctl, open, last})
  streamTimer: null,
  seen: {},      // section → JSON of what it last rendered (no re-render, no flicker, when unchanged)
  detailFor: '', // run/op the detail panel was built for
  draftKey: '',  // Idempotency-Key of the decision being drafted
};

const $ = (id) => document.getElementById(id);

// INVISIBLE matches what changes how text reads without showing itself:
// format characters (bidirectional overrides and isolates, zero-width
// spaces and joiners, the BOM) and control characters but tab and
// newline. An agent's operation "op-1\u202Eenon" would read "op-1none".
const INVISIBLE = /[\p{Cf}\u0000-\u0008\u000B-\u001F\u007F-\u009F]/gu;

// visible shows each such character as ‹U+XXXX›, as the CLI quotes text
// holding one (kernel.Printable): an operator sees what was written, not
// what it was made to look like.
function visible(s) {
  return String(s).replace(INVISIBLE,
    (c) => '‹U+' + c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0') + '›');
}

// el builds an element. attrs: class, text, or attributes set with
// setAttribute; children: nodes or strings (text nodes, never HTML). Text
// goes through visible; attributes (ids a row is found by) do not.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = visible(v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : visible(c));
  }
  return e;
}

function show(node, text) {
  node.textContent = visible(text || '');
  node.hidden = !text;
}

// ---- the API --------------------------------------------------------------

class APIError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// StaleAnswer is what api throws instead of an answer, or a refusal,
// that arrives after the session that asked ended (a sign-out, perhaps
// followed by another sign-in, with another token or the same one): it is
// about that session's token and decision, and acted on it would show the
// old identity, clear the new session's draft or, a 401, sign the new
// session out. Callers stop on it (authLost says so).
class StaleAnswer extends Error {
  constructor() {
    super('the answer came after its session ended');
  }
}

async function api(path, options = {}) {
  const session = state.session;
  let out, err;
  try {
    out = await request(path, options);
  } catch (e) {
    err = e;
  }
  if (state.session !== session) throw new StaleAnswer();
  if (err) throw err;
  return out;
}

async function request(path, { method = 'GET', query, body, headers, token } = {}) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(query || {})) if (v) url.searchParams.set(k, v);
  const h = { Authorization: 'Bearer ' + (token || state.token), Accept: 'application/json' };
  if (body !== undefined) h['Content-Type'] = 'application/json';
  let resp;
  try {
    resp = await fetch(url, {
      method, headers: Object.assign(h, headers || {}), cache: 'no-store', credentials: 'omit',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    throw new APIError(0, 'cannot reach the API (' + e.message + ')');
  }
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
  if (!resp.ok) {
    const msg = data && typeof data.error === 'string' ? data.error : 'HTTP ' + resp.status + ' ' + resp.statusText;
    throw new APIError(resp.status, msg);
  }
  return { data, headers: resp.headers };
}

function errorText(e) {
  return e instanceof APIError && e.status ? e.message + ' (HTTP ' + e.status + ')' : String(e.message || e);
}

// ---- formatting -----------------------------------------------------------

const nf = new Intl.NumberFormat('en');

function age(ts) {
  const s = Math.max(0, (Date.now() - Date.parse(ts)) / 1000);
  if (s < 60) return Math.floor(s) + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm';
  if (s < 86400) return Math.floor(s / 3600) + 'h ' + Math.floor((s % 3600) / 60) + 'm';
  return Math.floor(s / 86400) + 'd ' + Math.floor((s % 86400) / 3600) + 'h';
}

function ageCell(ts) {
  return el('td', { class: 'age', 'data-ts': ts, title: ts, text: ts ? age(ts) : '' });
}

function clock(ts) {
  const d = new Date(ts);
  return isNaN(d) ? String(ts) : d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

function keyText(k) {
  return k ? k.source_id + ':' + k.event_id : '';
}

function json(v) {
  return JSON.stringify(v, null, 2);
}

function chip(text, kind) {
  return el('span', { class: 'chip ' + (kind || text), text });
}

function link(params, text) {
  const q = new URLSearchParams();
  for (const k of ['project', 'view', 'run', 'op']) if (params[k]) q.set(k, params[k]);
  return el('a', { href: '#' + q.toString(), text });
}

function runLink(run) {
  return link({ project: state.project, run }, run);
}

function opLink(run, op) {
  return link({ project: state.project, run, op }, op);
}

function utf8Bytes(s) {
  return new TextEncoder().encode(s).length;
}

// newKey names one drafted decision: a retry after a lost answer repeats
// it (the API answers with the first event), a new decision gets a new key.
// getRandomValues works on plain http too, where randomUUID does not.
function newKey() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return 'console-' + Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

// ---- sign-in --------------------------------------------------------------

async function signIn(ev) {
  ev.preventDefault();
  const input = $('token');
  const token = input.value.trim();
  const err = $('signin-error');
  show(err, '');
  if (!token) {
    show(err, 'Paste a token first.');
    return;
  }
  $('signin-button').disabled = true;
  try {
    const { data: me } = await api('/v1/whoami', { token });
    if (me.role === 'agent') {
      show(err, '"' + me.name + '" is an agent token. Agents may only ingest events; the console is for people: sign in with a reader or an operator token.');
      return;
    }
    input.value = '';
    sessionStorage.setItem(TOKEN_KEY, token);
    state.token = token;
    start(me);
  } catch (e) {
    if (e.status === 401) {
      show(err, 'This server does not accept that token (' + e.message + '). Check it against RECKON_TOKENS, or ask whoever runs reckon for one.');
    } else {
      show(err, 'Could not sign in: ' + errorText(e));
    }
  } finally {
    $('signin-button').disabled = false;
  }
}

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  state.token = null;
  state.me = null;
  state.session++;
  state.gen++;
  clearTimeout(state.timer);
  state.timer = null;
  stopStream();
  state.seen = {};
  state.detailFor = '';
  for (const id of ['queue', 'ops']) $(id).tBodies[0].replaceChildren();
  clearRuns();
  for (const id of ['queue-error', 'ops-error', 'projects-error', 'filter']) show($(id), '');
  $('detail').replaceChildren(el('p', { class: 'empty', text: 'Select an operation to see its verdict, its history and, with an operator token, decide it.' }));
  $('project').replaceChildren();
  $('app').hidden = true;
  $('session').hidden = true;
  $('signin').hidden = false;
  show($('signin-error'), message || '');
  $('token').focus();
}

async function boot() {
  $('signin-form').addEventListener('submit', signIn);
  bootRuns();
  $('triage-now').addEventListener('click', triageNow);
  $('signout').addEventListener('click', () => signOut(''));
  $('project').addEventListener('change', (e) => { location.hash = '#' + new URLSearchParams({ project: e.target.value }); });
  let typing = null;
  $('project-q').addEventListener('input', () => {
    clearTimeout(typing);
    typing = setTimeout(() => loadProjects().catch((e) => { if (!authLost(e)) show($('projects-error'), e.message); }), 250);
  });
  window.addEventListener('hashchange', route);
  document.addEventListener('visibilitychange', () => {
    if (!state.token) return;
    if (document.hidden) {
      clearTimeout(state.timer);
      state.timer = null;
      $('freshness').textContent = 'paused while this tab is hidden';
    } else if (state.me) {
      refresh();
    } else {
      resume();
    }
  });
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (!token) {
    signOut('');
    return;
  }
  state.token = token;
  resume();
}

// resume signs the tab back in with its stored token (a reload). A server
// that cannot be reached keeps the token and is asked again; only a token
// it refuses is forgotten.
async function resume() {
  if (!state.token || state.me) return;
  // A retry still on its way when the user signed in with another token
  // (the form is offered while the stored one cannot be checked) answers
  // for the old token: api drops it (StaleAnswer), start() having begun
  // another session.
  try {
    const { data: me } = await api('/v1/whoami');
    if (me.role === 'agent') {
      signOut('"' + me.name + '" is an agent token; the console needs a reader or an operator token.');
      return;
    }
    start(me);
  } catch (e) {
    if (e instanceof StaleAnswer) return;
    if (e.status === 401) {
      signOut('Your token is no longer accepted (' + e.message + '); sign in again.');
      return;
    }
    $('signin').hidden = false;
    show($('signin-error'), 'Could not sign in with the token of this tab: ' + errorText(e) + '. Trying again every ' + POLL_MS / 1000 + ' s.');
    state.timer = setTimeout(resume, POLL_MS);
  }
}

function start(me) {
  clearTimeout(state.timer);
  state.session++;
  state.me = me;
  show($('signin-error'), '');
  $('signin').hidden = true;
  $('app').hidden = false;
  $('session').hidden = false;
  showWho(me);
  route();
}

function showWho(me) {
  $('who').replaceChildren(el('span', { text: me.name }), ' ', chip(me.role, 'role'));
  $('readonly').hidden = me.role === 'operator';
  $('triage-actions').hidden = me.role !== 'operator';
}

// checkWho asks the server who the token is on every poll: a token
// reload (SIGHUP with RECKON_TOKENS_FILE) can change its role while the
// tab is open, and the page must not keep offering an operator's
// decision form the server now refuses, nor hide it from a token that
// became an operator. It says whether the role changed; the caller then
// loads again, the detail panel rebuilt for the new role. The answer is
// about the session that asked: if it ended (and perhaps another began)
// while the request was on its way, api drops the answer, or the refusal
// (StaleAnswer, which refresh stops on), so that it neither shows the old
// identity again nor signs the new session out.
async function checkWho() {
  const { data: me } = await api('/v1/whoami');
  if (!state.me) return false;
  if (me.role === 'agent') {
    signOut('"' + me.name + '" is now an agent token; the console needs a reader or an operator token.');
    return;
  }
  if (me.role === state.me.role && me.name === state.me.name) return false;
  state.me = me;
  showWho(me);
  state.detailFor = null; // not '' (no selection) nor a target: rebuilt by the next load
  return true;
}

// loadProjects keeps the picker current (new projects appear without a
// reload) and, while none is chosen, picks the first one there is. The
// picker holds one page of the projects the token may see, narrowed by the
// search box (a prefix); when more follow, its last entry says so.
async function loadProjects() {
  const { data } = await api('/v1/projects', { query: { q: $('project-q').value.trim(), limit: '200' } });
  const sel = $('project');
  const names = data.next_cursor ? data.projects.concat([MORE]) : data.projects;
  if (document.activeElement !== sel && changed('projects', names)) fillPicker(names, state.project);
  if (!state.project && data.projects.length) {
    history.replaceState(null, '', '#' + new URLSearchParams({ project: data.projects[0] }));
    route();
  }
}

// MORE stands in the picker for the projects past its page.
const MORE = '\u2026 more: type the start of a name';

function fillPicker(projects, chosen) {
  const sel = $('project');
  const names = projects.slice();
  if (chosen && !names.includes(chosen)) names.unshift(chosen);
  if (!names.length) {
    sel.replaceChildren(el('option', { value: '', text: '(no project has events yet)' }));
    return;
  }
  if (!chosen) names.unshift('');
  sel.replaceChildren(...names.map((p) => p === MORE
    ? el('option', { value: '', text: p, disabled: '' })
    : el('option', { value: p, text: p || '(choose a project)' })));
  sel.value = chosen;
}

// authLost says whether the caller must stop on e: a 401 (the token is
// refused: signed out) or an answer for a session that ended meanwhile.
function authLost(e) {
  if (e instanceof StaleAnswer) return true;
  if (e instanceof APIError && e.status === 401) {
    signOut('Your token is no longer accepted (' + e.message + '); sign in again.');
    return true;
  }
  return false;
}

// ---- navigation: #project=…&run=…&op=…, #project=…&view=runs&status=…,
// #project=…&view=run&run=…&state=…&tool=…&q=… (ids and filters only,
// never the token) -----------------------------------------------------------

function readHash() {
  const q = new URLSearchParams(location.hash.slice(1));
  const h = {};
  for (const k of ['project', 'view', 'run', 'op', 'status', 'state', 'tool', 'q']) h[k] = q.get(k) || '';
  return h;
}

function route() {
  if (!state.token || !state.me) return;
  const h = readHash();
  const view = h.view === 'runs' || (h.view === 'run' && h.run) ? h.view : '';
  // A run alone narrows the lists to it; an operation keeps the whole
  // project in view, its row marked, so the queue can be worked through.
  const listRun = h.op || view ? '' : h.run;
  if (h.project !== state.project || listRun !== state.listRun || view !== state.view || (view && h.run !== state.run)) {
    // Another project or run: nothing of the old one may stay on screen
    // under the new name, not even while the new lists load.
    state.seen = {};
    for (const id of ['queue', 'ops']) {
      $(id).tBodies[0].replaceChildren();
      $(id + '-count').textContent = '';
      $(id + '-empty').hidden = true;
    }
    clearRuns();
  }
  state.project = h.project;
  state.run = h.run;
  state.op = h.run && !view ? h.op : '';
  state.listRun = listRun;
  state.view = view;
  showView(h);
  if ($('project').value !== h.project) fillPicker(Array.from($('project').options, (o) => (o.disabled ? o.textContent : o.value)).filter(Boolean), h.project);
  const f = $('filter');
  if (state.listRun) {
    f.replaceChildren('Showing run ', el('code', { text: state.listRun }), ' only · ', link({ project: state.project }, 'show every run'),
      ' · ', link({ project: state.project, view: 'run', run: state.listRun }, 'its run page'));
    f.hidden = false;
  } else {
    f.hidden = true;
  }
  markSelected();
  refresh();
}

// ---- the polling loop -----------------------------------------------------

async function refresh() {
  clearTimeout(state.timer);
  state.timer = null;
  if (!state.token || !state.me) return;
  ensureStream();
  state.ticks = 0;
  const gen = ++state.gen;
  // The loads start before any await: a navigation rebuilds the detail
  // panel at once, and no card of the operation left behind stays on
  // screen while the role is asked for.
  const loads = [loadProjects()];
  if (state.project) loads.push(...(state.view ? runsLoads(gen) : [loadQueue(gen), loadOps(gen), loadDetail(gen)]));
  const [who, ...results] = await Promise.allSettled([checkWho(), ...loads]);
  if (who.status === 'rejected' && authLost(who.reason)) return;
  if (gen !== state.gen || !state.token || !state.me) return; // signed out or navigated meanwhile
  for (const r of results) if (r.status === 'rejected' && authLost(r.reason)) return;
  if (who.status === 'fulfilled' && who.value) {
    // The role changed while this round loaded under the old one: load
    // again at once, the detail panel rebuilt for the new role.
    refresh();
    return;
  }
  for (const c of document.querySelectorAll('td.age')) c.textContent = age(c.getAttribute('data-ts'));
  const failed = results.filter((r) => r.status === 'rejected');
  show($('projects-error'), results[0].status === 'rejected' ? 'Could not list projects: ' + errorText(results[0].reason) : '');
  $('freshness').textContent = !state.project ? 'no project yet' :
    (failed.length ? 'refresh failed at ' : 'live · updated ') + new Date().toLocaleTimeString();
  schedule();
}

// schedule plans the next poll: a full refresh every POLL_MS while the
// verdict stream is not open; while it is, a light one every POLL_MS (the
// projects and the token's role, which the stream does not carry) and a
// full one every STREAM_POLL_MS.
function schedule() {
  if (document.hidden) return;
  const streaming = state.stream && state.stream.open;
  state.timer = setTimeout(streaming ? lightTick : refresh, POLL_MS);
}

async function lightTick() {
  state.timer = null;
  if (!state.token || !state.me) return;
  state.ticks++;
  if (state.ticks * POLL_MS >= STREAM_POLL_MS || !(state.stream && state.stream.open)) {
    refresh();
    return;
  }
  const gen = state.gen;
  const [who, projects] = await Promise.allSettled([checkWho(), loadProjects()]);
  if (gen !== state.gen || !state.token || !state.me || state.timer) return; // a refresh began meanwhile
  for (const r of [who, projects]) if (r.status === 'rejected' && authLost(r.reason)) return;
  if (who.status === 'fulfilled' && who.value) {
    refresh();
    return;
  }
  schedule();
}

// ---- the verdict stream ---------------------------------------------------

// ensureStream keeps one verdict stream open (GET
// /v1/agent/operations/watch) for the project shown, where the browser
// reads a streamed response body: fetch, because EventSource cannot send
// the bearer token. Its events refresh the page at once; until it is open,
// and after it fails for good, the page polls every POLL_MS.
function ensureStream() {
  const usable = typeof ReadableStream !== 'undefined' && typeof TextDecoder !== 'undefined' && 'body' in Response.prototype;
  const key = usable && state.token && state.me && state.project ? state.project + '\n' + state.token : '';
  if (state.stream && state.stream.key === key) return;
  stopStream();
  if (!key) return;
  const s = { key, ctl: new AbortController(), open: false, last: '' };
  state.stream = s;
  watchLoop(s);
}

function stopStream() {
  if (state.stream) state.stream.ctl.abort();
  state.stream = null;
}

// watchLoop reads the stream s, resuming after its last event id when the
// server ends it, until s is replaced or five attempts in a row fail.
async function watchLoop(s) {
  for (let failures = 0; state.stream === s && failures < 5;) {
    try {
      const url = new URL('/v1/agent/operations/watch', location.origin);
      url.searchParams.set('project', state.project);
      const headers = { Authorization: 'Bearer ' + state.token, Accept: 'text/event-stream' };
      if (s.last) headers['Last-Event-ID'] = s.last;
      const resp = await fetch(url, { headers, cache: 'no-store', credentials: 'omit', signal: s.ctl.signal });
      if (!resp.ok || !resp.body) throw new Error('HTTP ' + resp.status);
      const reader = resp.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        for (let i = buf.indexOf('\n\n'); i >= 0; i = buf.indexOf('\n\n')) {
          const name = streamEvent(s, buf.slice(0, i));
          buf = buf.slice(i + 2);
          if (name === 'ready') { s.open = true; failures = 0; } else if (name) streamed();
        }
      }
    } catch (e) {
      if (s.ctl.signal.aborted) return;
      failures++;
    }
    s.open = false;
    await new Promise((r) => setTimeout(r, 1000));
  }
}

// streamEvent reads one event's id (kept to resume after it) and name.
function streamEvent(s, block) {
  let name = '';
  for (const line of block.split('\n')) {
    if (line.startsWith('id: ')) s.last = line.slice(4);
    else if (line.startsWith('event: ')) name = line.slice(7);
  }
  return name;
}

// streamed refreshes the page once for a burst of the stream's events.
function streamed() {
  if (state.streamTimer || document.hidden) return;
  state.streamTimer = setTimeout(() => { state.streamTimer = null; refresh(); }, 200);
}

// changed remembers what a section last rendered and says whether v differs.
function changed(section, v) {
  const s = JSON.stringify(v);
  if (state.seen[section] === s) return false;
  state.seen[section] = s;
  return true;
}

async function section(gen, name, load, render) {
  const errNode = $(name + '-error');
  try {
    const v = await load();
    if (gen !== state.gen) return;
    show(errNode, '');
    if (changed(name, v)) render(v);
  } catch (e) {
    if (gen === state.gen) {
      show(errNode, 'Could not load: ' + errorText(e));
      state.seen[name] = '';
    }
    throw e;
  }
}

function markSelected() {
  for (const tr of document.querySelectorAll('table.grid tbody tr')) {
    tr.classList.toggle('selected', tr.getAttribute('data-run') === state.run && tr.getAttribute('data-op') === state.op);
  }
}

function loadQueue(gen) {
  return section(gen, 'queue',
    async () => (await api('/v1/agent/operations/attention', { query: { project: state.project, run_id: state.listRun } })).data,
    (page) => {
      const rows = page.operations.map((it) => {
        const said = [chip(it.effect)];
        if (it.proposed_effect) said.push(' ', el('span', { class: 'proposed', text: 'proposed ' + it.proposed_effect }));
        said.push(' ', el('span', { class: 'basis', text: it.basis }));
        const why = it.reason === 'unknown' ? 'effect unknown' : 'verdict asked for attention';
        return el('tr', { 'data-run': it.run_id, 'data-op': it.operation_id },
          el('td', null, runLink(it.run_id)),
          el('td', null, opLink(it.run_id, it.operation_id)),
          el('td', { text: it.tool }),
          el('td', null, said),
          el('td', { text: why }),
          ageCell(it.decided_at),
          el('td', { text: it.supervisor ? it.supervisor + (it.model ? ' · ' + it.model : '') : 'supervisor' }));
      });
      $('queue').tBodies[0].replaceChildren(...rows);
      $('queue').hidden = rows.length === 0;
      $('queue-empty').hidden = rows.length > 0;
      $('queue-count').textContent = page.next_cursor ? rows.length + '+' : String(rows.length);
      $('queue-count').classList.toggle('zero', rows.length === 0);
      show($('queue-more'), page.next_cursor ? 'Only the oldest ' + rows.length + ' are shown; decide those first, or pick a run.' : '');
      markSelected();
    });
}

function loadOps(gen) {
  return section(gen, 'ops',
    async () => (await api('/v1/agent/operations', { query: { project: state.project, run_id: state.listRun } })).data,
    (page) => {
      const rows = page.operations.map((it) => {
        const child = it.child_run_id
          ? [link({ project: state.project, run: it.child_run_id }, it.child_run_id),
            it.child_summary ? el('span', { class: 'hint', text: ' ' + it.child_summary.unresolved + ' of ' + it.child_summary.total + ' unresolved' }) : null]
          : [];
        const reporter = (it.failure_key || it.started_key || {}).source_id || '';
        return el('tr', { 'data-run': it.run_id, 'data-op': it.operation_id },
          el('td', null, chip(it.state),
            it.failure && it.failure.error_type ? el('div', { class: 'hint', text: it.failure.error_type }) : null,
            it.liveness_unknown ? el('div', { class: 'hint', text: 'liveness unknown' }) : null),
          el('td', null, runLink(it.run_id)),
          el('td', null, opLink(it.run_id, it.operation_id)),
          el('td', { text: it.tool }),
          ageCell(it.started_at),
          el('td', { text: reporter }),
          el('td', null, child));
      });
      $('ops').tBodies[0].replaceChildren(...rows);
      $('ops').hidden = rows.length === 0;
      $('ops-empty').hidden = rows.length > 0;
      $('ops-degraded').hidden = !page.degraded;
      $('ops-count').textContent = page.next_cursor ? rows.length + '+' : String(rows.length);
      $('ops-count').classList.toggle('zero', rows.length === 0);
      show($('ops-more'), page.next_cursor ? 'Only the oldest ' + rows.length + ' are shown; pick a run to see the rest.' : '');
      markSelected();
    });
}

// ---- the detail panel: verdict cards, history, the decision form -------

async function loadDetail(gen) {
  const d = $('detail');
  // The project is part of the operation: the same run and operation ids
  // in another project are another operation, whose panel (history, the
  // drafted decision and its Idempotency-Key) must not carry over.
  const target = state.project + '\u0000' + state.run + '\u0000' + state.op;
  if (!state.run) {
    if (state.detailFor !== '') {
      state.detailFor = '';
      d.replaceChildren(el('p', { class: 'empty', text: 'Select an operation to see its verdict, its history and, with an operator token, decide it.' }));
    }
    return;
  }
  if (state.detailFor !== target) {
    state.detailFor = target;
    state.draftKey = newKey();
    state.seen.cards = state.seen.history = '';
    d.replaceChildren(...[
      el('h2', null, state.op ? [link({ project: state.project, run: state.run }, state.run), ' / ', el('span', { text: state.op })] : ['Run ', el('code', { text: state.run })]),
      el('p', { id: 'detail-error', class: 'error', role: 'alert', hidden: true }),
      el('section', { id: 'cards' }),
      state.op ? el('section', { id: 'history' }) : null,
      state.op && state.me.role === 'operator' ? decideForm() : null,
    ].filter(Boolean));
  }
  const run = state.run, op = state.op;
  try {
    const [verdicts, runView, hist] = await Promise.all([
      api('/v1/supervisor/verdicts', { query: { project: state.project, run_id: run, limit: '50' } }).then((r) => r.data),
      api('/v1/runs/' + encodeURIComponent(run), { query: { project: state.project } }).then((r) => r.data),
      op ? api('/v1/agent/operations/history', { query: { project: state.project, run_id: run, operation_id: op } }).then((r) => r.data.events) : null,
    ]);
    if (gen !== state.gen || state.detailFor !== target) return;
    show($('detail-error'), '');
    if (changed('cards', [verdicts, runView])) renderCards(verdicts, runView, op);
    if (op && changed('history', hist)) renderHistory(hist);
    if (op && state.me.role === 'operator') renderOverrideNotice(hist);
  } catch (e) {
    if (gen === state.gen && $('detail-error')) {
      show($('detail-error'), 'Could not load: ' + errorText(e));
      state.seen.cards = state.seen.history = '';
    }
    throw e;
  }
}

function supervisorRecs(events) {
  return events.filter((e) => e.type === 'operation.reconciled' && e.actor === 'supervisor');
}

function renderCards(page, runView, op) {
  const recs = supervisorRecs(runView.events || []);
  const cards = [];
  page.verdicts.forEach((v, i) => {
    const d = v.data || {};
    if (op && !(d.operation_ids || []).includes(op)) return;
    cards.push(verdictCard(v, page.resolutions[i] || {}, recs));
  });
  const waits = runView.awaiting ? ' on ' + runView.awaiting.operation_id + ' since ' + clock(runView.awaiting.since) : '';
  const head = el('h3', null, 'Supervisor verdict' + (cards.length === 1 ? '' : 's'),
    el('span', { class: 'hint', text: ' · run ' + (runView.status || '?') + waits }));
  if (!cards.length) {
    $('cards').replaceChildren(head, el('p', { class: 'empty', text: op ? 'No supervisor verdict names this operation yet: the triage sweep has not reached it.' : 'No supervisor verdict for this run yet.' }));
    return;
  }
  $('cards').replaceChildren(head, ...cards);
}

function verdictCard(v, res, recs) {
  const d = v.data || {};
  const vk = keyText(v);
  const decided = {};
  for (const x of res.decided_by_operator || []) decided[x.operation_id] = x;
  const byOp = {};
  for (const r of recs) {
    const ev = (r.data && r.data.evidence) || {};
    const mine = ev.verdict ? keyText(ev.verdict) === vk : r.ts === v.ts;
    if (mine) byOp[r.data.operation_id] = r;
  }
  const attention = d.needs_attention
    ? chip(res.resolved ? 'needed attention · resolved' : 'needs attention', res.resolved ? 'ok' : 'attention')
    : chip('no attention needed', 'ok');
  const ids = d.operation_ids || [];
  const progress = d.needs_attention && ids.length && !res.resolved
    ? el('span', { class: 'hint', text: ' ' + (res.decided_by_operator || []).length + ' of ' + ids.length + ' decided by an operator since' })
    : null;
  const meta = [
    'supervisor ' + (d.supervisor || '?'), 'model ' + (d.model || '-'), 'prompt ' + (d.prompt_version || '?'),
    'policy ' + (d.settle_policy || 'inference (before the policy)'),
  ];
  if (d.parts > 1) meta.push('part ' + d.part + ' of ' + d.parts);
  const rows = ids.map((id) => {
    const r = byOp[id];
    const data = (r && r.data) || {};
    const cells = [
      el('td', null, state.op === id ? el('strong', { text: id }) : link({ project: state.project, run: v.run_id, op: id }, id)),
      el('td', null, r ? chip(data.effect) : '?'),
      el('td', { text: r ? data.basis : 'not in the journal yet' }),
      el('td', null, data.proposed_effect ? el('span', { class: 'proposed', text: data.proposed_effect + ', held by the policy' }) : ''),
    ];
    const later = decided[id];
    const below = el('td', { colspan: '4', class: 'sub' },
      data.note ? el('p', { class: 'note', text: data.note }) : null,
      evidenceList((data.evidence || {}).probes),
      later ? el('p', { class: 'since' }, 'since decided by ', el('b', { text: later.actor || 'an operator' }), ': ', chip(later.effect)) : null);
    return [el('tr', null, cells), el('tr', { class: 'subrow' }, below)];
  });
  return el('article', { class: 'card' + (d.needs_attention && !res.resolved ? ' attention' : '') },
    el('header', null, attention, progress, el('div', { class: 'meta', text: meta.join(' · ') }),
      el('div', { class: 'meta', text: clock(v.ts) + ' · ' + vk + (d.wall_digest ? ' · wall ' + d.wall_digest.slice(0, 12) : '') })),
    el('table', { class: 'ops' },
      el('thead', null, el('tr', null, el('th', { text: 'Operation' }), el('th', { text: 'Effect' }), el('th', { text: 'Basis' }), el('th', { text: 'Proposed' }))),
      el('tbody', null, rows)),
    listBlock('Causes', d.causes), listBlock('Remedies', d.remedies),
    d.lesson ? el('div', { class: 'lesson' }, el('h4', { text: 'Lesson' }), el('p', { text: d.lesson })) : null);
}

function listBlock(title, items) {
  if (!items || !items.length) return null;
  return el('div', null, el('h4', { text: title }), el('ul', null, items.map((s) => el('li', { text: s }))));
}

// evidenceList shows each probe finding with its provenance: what was
// looked at, where, when.
function evidenceList(probes) {
  if (!probes || !probes.length) return el('p', { class: 'hint', text: 'No probe evidence: nothing downstream could be checked.' });
  return el('ul', { class: 'evidence' }, probes.map((p) => el('li', null,
    el('span', { class: 'probe', text: p.probe }), ' ', chip(p.finding || '?'), ' ', el('span', { text: p.detail || '' }),
    p.observed_at ? el('span', { class: 'hint', text: ' · observed ' + clock(p.observed_at) }) : null,
    p.recheck_after ? el('span', { class: 'hint', text: ' · recheck after ' + clock(p.recheck_after) }) : null,
    p.provenance ? el('details', null, el('summary', { text: 'provenance' }), el('pre', { text: json(p.provenance) })) : null)));
}

function renderHistory(events) {
  $('history').replaceChildren(el('h3', { text: 'History' }),
    el('p', { class: 'hint', text: 'Who decided what, on which basis, and what each decision supersedes; oldest first. What an agent reports about its own call is its claim, not evidence.' }),
    el('ol', { class: 'timeline' }, eventItems(events, false)));
}

// eventItems are events as the entries of a timeline: an operation's
// history, or (withOp: each names its operation) a run's.
function eventItems(events, withOp) {
  const index = {};
  events.forEach((e, i) => { index[keyText(e)] = i; });
  const current = {}; // each operation's newest reconciliation
  events.forEach((e, i) => { if (e.type === 'operation.reconciled') current[(e.data || {}).operation_id] = i; });
  const runLink = (run) => (withOp ? runPageLink(run) : link({ project: state.project, run }, run));
  return events.map((e, i) => {
    const d = e.data || {};
    const body = [];
    switch (e.type) {
      case 'run.started':
        if (d.parent_run_id) body.push(el('div', null, 'started by the run ', runLink(d.parent_run_id)));
        if (d.plan_summary) body.push(el('div', { class: 'hint', text: d.plan_summary }));
        break;
      case 'run.failed':
        if (d.error) body.push(el('pre', { class: 'untrusted', text: d.error }));
        break;
      case 'run.completed':
        if (d.final_answer) {
          body.push(el('div', null, 'final answer ', chip('claim of the ' + (d.answer_author || 'agent') + ', not evidence', 'claim')));
          body.push(el('pre', { class: 'untrusted agent-answer', text: d.final_answer }));
        }
        break;
      case 'agent.turn':
        body.push(...agentTurn(d, e.run_id, withOp));
        break;
      case 'run.awaiting':
      case 'run.resumed':
        body.push(el('div', null, 'operation ', el('code', { text: d.operation_id || '' }), d.effect ? [' · ', chip(d.effect)] : null));
        break;
      case 'tool.started':
        body.push(el('div', null, 'tool ', el('code', { text: d.tool || '' }), d.reissue_of ? ' · re-issue of ' + d.reissue_of : ''));
        if (d.args !== undefined) body.push(el('pre', { class: 'untrusted', text: json(d.args) }));
        if (d.postcondition) body.push(el('div', { class: 'hint' }, 'postcondition ', el('code', { text: JSON.stringify(d.postcondition) })));
        break;
      case 'tool.completed':
        body.push(el('div', { text: d.result_summary || '' }, d.child_run_id && withOp ? [' · child run ', runLink(d.child_run_id)] : null));
        break;
      case 'tool.failed':
        body.push(el('div', null, 'effect ', chip(d.effect || 'uncertain'), ' · ', el('code', { text: d.error_type || '' }),
          d.child_run_id ? [' · child run ', runLink(d.child_run_id)] : null));
        if (d.error) body.push(el('pre', { class: 'untrusted', text: d.error }));
        break;
      case 'tool.blocked':
        body.push(el('div', { text: d.reason || '' }));
        break;
      case 'operation.reconciled': {
        body.push(el('div', null, chip(d.effect), ' basis ', el('b', { text: d.basis || '' }),
          d.proposed_effect ? el('span', { class: 'proposed', text: ' · proposed ' + d.proposed_effect + ', held by the policy' }) : null,
          i === current[d.operation_id] ? chip('current decision', 'current') : null));
        if (d.supersedes) {
          const j = index[keyText(d.supersedes)];
          const prev = j === undefined ? null : events[j];
          body.push(el('div', { class: 'supersedes', 'data-supersedes': keyText(d.supersedes) }, 'supersedes ',
            prev ? el('b', { text: '#' + (j + 1) + ' ' + prev.actor + ': ' + ((prev.data || {}).effect || '') }) : null,
            ' ', el('code', { text: keyText(d.supersedes) })));
        }
        if (d.note) body.push(el('p', { class: 'note', text: d.note }));
        if (d.evidence !== undefined && d.evidence !== null) {
          const ev = d.evidence;
          if (e.actor === 'supervisor' && ev && ev.probes !== undefined) body.push(evidenceList(ev.probes));
          else if (e.actor === 'supervisor' && ev && ev.verdict) body.push(evidenceList([]));
          else body.push(el('details', { open: true }, el('summary', { text: 'evidence' }), el('pre', { class: 'untrusted', text: json(ev) })));
        }
        break;
      }
      case 'supervisor.verdict':
        body.push(el('div', null, d.needs_attention ? chip('needs attention', 'attention') : chip('no attention needed', 'ok'),
          ' ' + (d.supervisor || '') + (d.model ? ' · ' + d.model : '') + ' · prompt ' + (d.prompt_version || '')));
        break;
      default:
        break;
    }
    return el('li', { class: 'ev ' + e.type.replace('.', '-'), 'data-key': keyText(e) },
      el('div', { class: 'evhead' }, el('span', { class: 'n', text: '#' + (i + 1) }), ' ', el('b', { text: e.type }), ' by ',
        el('span', { class: 'actor', text: e.actor }),
        withOp && d.operation_id ? [' · ', link({ project: state.project, run: e.run_id, op: d.operation_id }, d.operation_id)] : null,
        e.source_id !== 'kernel' ? [' ', chip('claim of ' + e.source_id, 'claim')] : null,
        el('span', { class: 'hint', text: ' · ' + clock(e.ts) + ' · ' + keyText(e) })),
      body);
  });
}

// agentTurn shows one model turn of an agent run: what it was sent that
// it had not seen, and its answer (a text, or tool calls each linked to
// its operation; refused calls with why). All of it is the model's or
// the tools' text: shown as text, never run.
function agentTurn(d, run, withOp) {
  const out = [el('div', { class: 'hint', text: 'model turn ' + (d.turn || '?') + (d.model ? ' · ' + d.model : '') })];
  for (const m of d.sent || []) {
    out.push(el('div', { class: 'agent-sent' }, el('b', { text: m.role + (m.tool_call_id ? ' (' + m.tool_call_id + ')' : '') + ': ' }),
      el('pre', { class: 'untrusted', text: m.content || '' })));
  }
  const a = d.answer || {};
  if (a.content) out.push(el('div', { class: 'agent-answer' }, el('b', { text: 'answer: ' }), el('pre', { class: 'untrusted', text: a.content })));
  const refused = {};
  for (const r of d.refused || []) refused[r.id] = r.reason;
  const calls = (a.tool_calls || []).map((c) => el('li', { class: 'agent-call', 'data-call': c.id },
    el('code', { text: c.name }), ' ', el('span', { class: 'hint', text: c.id }),
    c.operation_id ? [' → ', withOp ? link({ project: state.project, run, op: c.operation_id }, c.operation_id) : el('code', { text: c.operation_id })] : null,
    refused[c.id] ? [' ', chip('refused', 'claim'), el('span', { class: 'hint', text: ' ' + refused[c.id] })] : null,
    c.arguments ? el('pre', { class: 'untrusted', text: c.arguments }) : null));
  if (calls.length) out.push(el('ol', { class: 'agent-calls' }, calls));
  return out;
}

// ---- deciding -------------------------------------------------------------

function decideForm() {
  const effects = [
    ['occurred', 'occurred', 'the effect happened: do not re-issue'],
    ['none', 'none', 'nothing happened: safe to re-issue'],
    ['unknown', 'unknown', 'cannot tell: keep it in front of people'],
  ];
  const counter = el('output', { id: 'note-bytes', for: 'note', class: 'counter', 'aria-live': 'polite' });
  const note = el('textarea', { id: 'note', name: 'note', rows: '4', spellcheck: 'true', placeholder: 'What you checked and what you found' });
  note.addEventListener('input', countNote);
  const form = el('form', { id: 'decide', class: 'decide', novalidate: true },
    el('h3', { text: 'Decide' }),
    el('p', { id: 'override', class: 'notice' }),
    el('fieldset', null, el('legend', { text: 'Effect' }), effects.map(([v, label, help]) =>
      el('label', { class: 'effect' }, el('input', { type: 'radio', name: 'effect', value: v }), ' ', chip(label), ' ', el('span', { class: 'hint', text: help })))),
    el('label', { for: 'note', text: 'Note' }), note, counter,
    el('label', { for: 'evidence', text: 'Evidence (JSON, optional)' }),
    el('textarea', { id: 'evidence', name: 'evidence', rows: '3', spellcheck: 'false', placeholder: '{"path": "release.txt", "sha256": "…"}' }),
    el('div', { class: 'actions' }, el('button', { type: 'submit', id: 'decide-button', text: 'Record decision' })),
    el('p', { id: 'decide-error', class: 'error', role: 'alert', hidden: true }),
    el('p', { id: 'decide-done', class: 'done', role: 'status', hidden: true }));
  form.addEventListener('submit', decide);
  queueMicrotask(countNote);
  return form;
}

function countNote() {
  const note = $('note');
  if (!note) return;
  const n = utf8Bytes(note.value);
  const chars = Array.from(note.value).length;
  const out = $('note-bytes');
  let text = nf.format(n) + ' / ' + nf.format(NOTE_LIMIT) + ' bytes';
  if (chars !== n) text += ' (' + nf.format(chars) + ' characters)';
  if (n > NOTE_LIMIT) text += ' — ' + nf.format(n - NOTE_LIMIT) + ' over the limit';
  out.textContent = text;
  out.classList.toggle('over', n > NOTE_LIMIT);
}

// renderOverrideNotice says what a decision will do to the record: settle
// the operation, or supersede the supervisor's (or an operator's) decision.
function renderOverrideNotice(events) {
  const n = $('override');
  if (!n) return;
  let latest = null;
  for (const e of events || []) if (e.type === 'operation.reconciled') latest = e;
  if (!latest) {
    n.textContent = 'No decision yet: yours settles the operation.';
    n.className = 'notice';
    return;
  }
  const who = latest.actor === 'supervisor' ? 'the supervisor' : latest.actor;
  n.replaceChildren('A decision exists: ', el('b', { text: who }), ' said ', chip(latest.data.effect),
    ' (', el('code', { text: keyText(latest) }), '). Yours is recorded as ',
    el('b', { text: latest.actor === 'supervisor' ? 'an override' : 'a new decision' }), ' and will supersede it.');
  n.className = 'notice override';
}

async function decide(ev) {
  ev.preventDefault();
  const err = $('decide-error');
  const done = $('decide-done');
  show(err, '');
  show(done, '');
  const picked = document.querySelector('#decide input[name=effect]:checked');
  const body = {
    project: state.project, run_id: state.run, operation_id: state.op,
    effect: picked ? picked.value : '', note: $('note').value,
  };
  const raw = $('evidence').value.trim();
  if (raw) {
    try {
      body.evidence = JSON.parse(raw);
    } catch (e) {
      show(err, 'Evidence is not valid JSON: ' + e.message);
      return;
    }
  }
  const button = $('decide-button');
  button.disabled = true;
  const target = state.detailFor;
  // An answer that comes after this session ended (a sign-out, perhaps a
  // sign-in again, the panel rebuilt for the same operation) is dropped by
  // api (StaleAnswer, authLost below): it must neither clear the new
  // session's draft nor, refused, sign the new session out.
  try {
    const { data: rec, headers } = await api('/v1/agent/operations/reconcile', {
      method: 'POST', body, headers: { 'Idempotency-Key': state.draftKey },
    });
    if (state.detailFor !== target) return;
    state.draftKey = newKey();
    const d = rec.data || {};
    done.replaceChildren(el('span', null, headers.get('Idempotent-Replayed') === 'true' ? 'Already recorded: ' : 'Recorded ',
      el('code', { text: keyText(rec) }), ': ', chip(d.effect), ' by ', el('b', { text: rec.actor }),
      d.supersedes ? [' · supersedes ', el('code', { text: keyText(d.supersedes) })] : null));
    done.hidden = false;
    $('note').value = '';
    $('evidence').value = '';
    countNote();
    for (const r of document.querySelectorAll('#decide input[name=effect]')) r.checked = false;
    refresh();
  } catch (e) {
    if (authLost(e)) return;
    show(err, 'Not recorded: ' + errorText(e));
  } finally {
    button.disabled = false;
  }
}

// triageNow asks the server for a triage sweep of the project (or of the
// run the lists are narrowed to) now, rather than at the next scheduled
// sweep, and says what it did; the lists then load again.
async function triageNow() {
  const button = $('triage-now');
  const out = $('triage-result');
  if (!state.project) return;
  button.disabled = true;
  out.textContent = 'triaging…';
  const body = { project: state.project };
  if (state.listRun) body.run_id = state.listRun;
  try {
    const { data } = await api('/v1/triage', { method: 'POST', body });
    const walls = data.walls.filter((w) => w.outcome === 'journaled').length;
    out.textContent = walls + ' wall(s) decided, ' + data.settled.length + ' settled, ' +
      data.attention.length + ' for a person · ' + new Date().toLocaleTimeString();
    refresh();
  } catch (e) {
    if (authLost(e)) return;
    out.textContent = 'Triage failed: ' + errorText(e);
  } finally {
    button.disabled = false;
  }
}

document.addEventListener('DOMContentLoaded', boot);
