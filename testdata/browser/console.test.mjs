// The operator console in headless Chromium (Debian's /usr/bin/chromium,
// driven by playwright-core). Started by internal/app's browser-tagged Go
// test, which runs a real dev stack with drilled runs and passes:
//   RECKON_CONSOLE_URL    the API (and console) base URL
//   RECKON_CONTROL_URL    the test's own endpoint: POST /role changes ann's role
//   RECKON_OPERATOR_TOKEN, RECKON_READER_TOKEN, RECKON_AGENT_TOKEN
//   RECKON_PROJECT        the drilled project
//   RECKON_SCREENSHOTS    where to write docs/console-*.png
//   RECKON_CHROMIUM       the browser binary
// The steps run in order, in one tab, as one on-call person would.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { chromium } from 'playwright-core';

const env = (k) => {
  const v = process.env[k];
  if (!v) throw new Error(`${k} is not set: run this through \`make test-browser\``);
  return v;
};
const base = env('RECKON_CONSOLE_URL');
const control = env('RECKON_CONTROL_URL');
const operator = env('RECKON_OPERATOR_TOKEN');
const reader = env('RECKON_READER_TOKEN');
const agent = env('RECKON_AGENT_TOKEN');
const project = env('RECKON_PROJECT');
const shots = env('RECKON_SCREENSHOTS');
const origin = new URL(base).origin;

// The flags Chromium needs on a closed network: without the background
// networking ones it keeps trying to reach Google's hosts.
const FLAGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

const TOKEN_KEY = 'reckon.console.token';
const REFRESH = 15000; // the page polls every 5 s; allow three polls

test('operator console', async (t) => {
  const browser = await chromium.launch({ executablePath: env('RECKON_CHROMIUM'), args: FLAGS });
  t.after(() => browser.close());
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const page = await context.newPage();

  const offOrigin = [];
  const tokenInURL = [];
  const cspViolations = [];
  const pageErrors = [];
  const apiCalls = [];
  page.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith(origin + '/') && !u.startsWith('data:')) offOrigin.push(u);
    if ([operator, reader, agent].some((tok) => u.includes(tok))) tokenInURL.push(u);
    if (u.startsWith(origin + '/v1/')) apiCalls.push(u);
  });
  page.on('console', (m) => {
    if (/Content.Security.Policy/i.test(m.text())) cspViolations.push(m.text());
  });
  page.on('pageerror', (e) => pageErrors.push(e.message));

  const shot = (name) => page.screenshot({ path: path.join(shots, `console-${name}.png`), fullPage: true });
  const text = async (sel) => (await page.locator(sel).first().textContent()) || '';
  const waitText = async (sel, want, timeout = REFRESH) => {
    await page.waitForFunction(([s, w]) => {
      const n = document.querySelector(s);
      return n && !n.hidden && n.textContent.includes(w);
    }, [sel, want], { timeout });
  };
  const row = (table, run, op) => page.locator(`#${table} tbody tr[data-run="${run}"][data-op="${op}"]`);
  const stored = () => page.evaluate((k) => sessionStorage.getItem(k), TOKEN_KEY);
  const signIn = async (token) => {
    await page.locator('#token').fill(token);
    await page.locator('#signin-button').click();
  };

  await t.test('the page comes with its security headers and asks for a token', async () => {
    const resp = await page.goto(base + '/');
    const h = resp.headers();
    assert.equal(resp.status(), 200);
    assert.equal(h['content-security-policy'], "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'");
    assert.equal(h['x-content-type-options'], 'nosniff');
    assert.equal(h['referrer-policy'], 'no-referrer');
    await page.locator('#signin-form').waitFor();
    assert.equal(await page.locator('#app').isHidden(), true);
  });

  await t.test('a bad token shows a clear error', async () => {
    await signIn('not-a-token-anyone-has');
    await waitText('#signin-error', 'does not accept that token');
    assert.match(await text('#signin-error'), /unknown token/);
    assert.equal(await stored(), null);
    assert.equal(await page.locator('#app').isHidden(), true);
    await shot('signin');
  });

  await t.test('an agent token is refused', async () => {
    await signIn(agent);
    await waitText('#signin-error', 'is an agent token');
    assert.match(await text('#signin-error'), /reader or an operator token/);
    assert.equal(await stored(), null);
    assert.equal(await page.locator('#app').isHidden(), true);
  });

  await t.test('the operator sees the drilled uncertain operations', async () => {
    await signIn(operator);
    await page.locator('#app').waitFor();
    await waitText('#who', 'operator');
    assert.equal(await stored(), operator, 'the token is kept in sessionStorage');
    assert.equal(await page.evaluate(() => localStorage.length), 0, 'nothing in localStorage');
    assert.equal(await page.locator('#token').inputValue(), '', 'the token input is cleared');
    // The picker fills once the projects are listed, which may come after
    // the sign-in shows (a busy machine made the bare read flaky).
    await page.waitForFunction((p) => document.querySelector('#project').value === p, project, { timeout: REFRESH });
    assert.ok(!page.url().includes(operator), 'the token is not in the URL');
    const deploy = row('ops', 'deploy-42', 'op-1');
    await deploy.waitFor({ timeout: REFRESH });
    assert.match(await deploy.textContent(), /failed_uncertain/);
    assert.match(await deploy.textContent(), /run_command/);
    assert.match(await deploy.textContent(), /injected_fault/);
    // A delegation names its child run, with a link that shows it.
    const parent = row('ops', 'nightly-3', 'op-1');
    await parent.waitFor();
    assert.match(await parent.textContent(), /nightly-3\.op-1/);
    assert.equal(await page.locator('#queue-empty').isVisible(), true, 'nothing waits for a person before the sweep');
    await parent.locator('a', { hasText: 'nightly-3.op-1' }).click();
    await waitText('#filter', 'nightly-3.op-1');
    await page.waitForFunction(() => document.querySelectorAll('#ops tbody tr').length === 1);
    assert.equal(await row('ops', 'nightly-3.op-1', 'op-1').count(), 1);
    assert.equal(await page.locator('#filter a', { hasText: 'its run page' }).getAttribute('href'), '#' + new URLSearchParams({ project, view: 'run', run: 'nightly-3.op-1' }));
    await page.locator('#filter a', { hasText: 'show every run' }).click();
    await page.waitForFunction(() => document.querySelectorAll('#ops tbody tr').length === 5);
  });

  await t.test('a new project appears in the picker without a reload', async () => {
    const ts = new Date().toISOString();
    const ev = (id, type, data) => ({ source_id: 'bot', event_id: 'side-1/' + id, project: 'zeta', run_id: 'side-1', type, ts, actor: 'agent', data });
    const resp = await fetch(base + '/v1/events', {
      method: 'POST', headers: { Authorization: 'Bearer ' + agent, 'Content-Type': 'application/json' },
      body: JSON.stringify({ events: [ev('run/started', 'run.started', {}), ev('op-1/started', 'tool.started', { operation_id: 'op-1', tool: 'noop' })] }),
    });
    assert.equal(resp.status, 200, await resp.text());
    await page.waitForFunction(() => Array.from(document.querySelectorAll('#project option'), (o) => o.value).join(',') === 'acme,zeta', null, { timeout: REFRESH });
    await page.locator('#project').selectOption('zeta');
    await page.waitForFunction(() => location.hash === '#project=zeta');
    await page.locator('#queue-empty').waitFor();
    await page.waitForFunction(() => document.querySelectorAll('#ops tbody tr').length === 0 || document.querySelector('#ops tbody tr[data-run="side-1"]'));
    assert.equal(await row('ops', 'deploy-42', 'op-1').count(), 0, "another project's operations are not shown");
    await page.locator('#project').selectOption(project);
    await row('ops', 'deploy-42', 'op-1').waitFor();
  });

  await t.test('the project search narrows the picker to names that start with it', async () => {
    const options = () => page.evaluate(() => Array.from(document.querySelectorAll('#project option'), (o) => o.value).filter(Boolean).join(','));
    // The chosen project stays in the picker whatever the search.
    await page.locator('#project-q').fill('x');
    await page.waitForFunction((p) => Array.from(document.querySelectorAll('#project option'), (o) => o.value).filter(Boolean).join(',') === p, project, { timeout: REFRESH });
    await page.locator('#project-q').fill('ze');
    await page.waitForFunction((p) => Array.from(document.querySelectorAll('#project option'), (o) => o.value).filter(Boolean).join(',') === p + ',zeta', project, { timeout: REFRESH });
    await page.locator('#project-q').fill('');
    await page.waitForFunction(() => Array.from(document.querySelectorAll('#project option'), (o) => o.value).join(',') === 'acme,zeta', null, { timeout: REFRESH });
    assert.equal(await options(), 'acme,zeta');
  });

  await t.test("an agent's text is shown as text, never run", async () => {
    await row('ops', 'agent-7', 'op-1').locator('a', { hasText: 'op-1' }).click();
    await waitText('#history', '<script>window.pwned=2</script>upstream timed out');
    assert.ok((await text('#history')).includes('"body": "<img src=x onerror=\\"window.pwned=1\\"> charge 42 EUR"'), 'the args, as JSON');
    assert.equal(await page.evaluate(() => document.querySelectorAll('img, #detail script').length), 0);
    assert.equal(await page.evaluate(() => window.pwned), undefined);
    // A bidirectional override in the error is shown, not obeyed.
    assert.ok((await text('#history')).includes('30s ‹U+202E›gnirts'), 'the override is shown as ‹U+202E›');
    assert.ok(!(await text('#history')).includes('\u202e'), 'no override reaches the page');
    // Choosing an operation keeps the whole project in view, its row marked.
    assert.equal(await page.locator('#ops tbody tr').count(), 5);
    assert.equal(await page.locator('#ops tbody tr.selected[data-run="agent-7"]').count(), 1);
    await shot('unresolved');
  });

  await t.test('Triage now sweeps the project, and the verdict card is shown without a reload', async () => {
    await page.locator('#triage-now').click();
    await waitText('#triage-result', 'for a person', REFRESH);
    // report-7's postcondition is proved; deploy-42's effect is left for
    // a person (the queue, below).
    const said = (await text('#triage-result')).match(/(\d+) wall\(s\) decided, (\d+) settled, (\d+) for a person/);
    assert.ok(said && Number(said[1]) >= 2 && Number(said[2]) >= 1 && Number(said[3]) >= 1, `the button says what the sweep did: ${await text('#triage-result')}`);
    // The page picks the sweep up on its own: deploy-42/op-1 leaves the
    // listing for the queue.
    const queued = row('queue', 'deploy-42', 'op-1');
    await queued.waitFor({ timeout: REFRESH });
    await row('ops', 'deploy-42', 'op-1').waitFor({ state: 'detached', timeout: REFRESH });
    assert.match(await queued.textContent(), /unknown/);
    assert.match(await queued.textContent(), /inference/);
    assert.equal(await row('queue', 'report-7', 'op-1').count(), 0, 'a probe-proven operation needs nobody');
    await queued.locator('a', { hasText: 'op-1' }).click();
    // The operation selected before (agent-7's op-1) has a verdict card
    // of its own after the sweep, still shown until the click's history
    // arrives: waiting for any card read that one (CI, once).
    await waitText('#cards', 'deploy-42/verdict/');
    const card = page.locator('#cards article.card').first();
    const c = await card.textContent();
    for (const want of ['needs attention', 'supervisor builtin', 'policy evidence', 'Causes', 'Remedies', 'Lesson', 'unknown', 'inference', 'workspace.diff', 'inconclusive']) {
      assert.ok(c.includes(want), `the card says ${want}: ${c}`);
    }
    await waitText('#override', 'will supersede');
    assert.match(await text('#override'), /the supervisor/);
    await shot('verdict');
  });

  await t.test('a probe-proven verdict shows its evidence and provenance', async () => {
    await page.evaluate((p) => { location.hash = '#' + new URLSearchParams({ project: p, run: 'report-7', op: 'op-1' }); }, project);
    const card = page.locator('#cards article.card').first();
    await waitText('#cards', 'workspace.postcondition');
    const c = await card.textContent();
    for (const want of ['no attention needed', 'occurred', 'probe', 'report.txt exists in the workspace with the declared sha256', 'provenance']) {
      assert.ok(c.includes(want), `the card says ${want}: ${c}`);
    }
  });

  await t.test('an unchanged refresh leaves the page alone; a hidden tab stops polling', async () => {
    await page.evaluate((p) => { location.hash = '#' + new URLSearchParams({ project: p }); }, project);
    const first = row('queue', 'deploy-42', 'op-1');
    await first.waitFor();
    const handle = await first.elementHandle();
    const before = apiCalls.length;
    await page.waitForTimeout(6000);
    assert.ok(apiCalls.length > before, 'the page polled');
    assert.equal(await handle.evaluate((n) => n.isConnected), true, 'an unchanged row is not rebuilt');
    await page.evaluate(() => {
      Object.defineProperty(document, 'hidden', { configurable: true, get: () => true });
      document.dispatchEvent(new Event('visibilitychange'));
    });
    await waitText('#freshness', 'paused');
    await page.waitForTimeout(1000); // a request already on its way may land
    const paused = apiCalls.length;
    await page.waitForTimeout(6000);
    assert.equal(apiCalls.length, paused, 'no request while the tab is hidden');
    await page.evaluate(() => {
      Object.defineProperty(document, 'hidden', { configurable: true, get: () => false });
      document.dispatchEvent(new Event('visibilitychange'));
    });
    await waitText('#freshness', 'live', 5000);
    assert.ok(apiCalls.length > paused, 'polling resumes at once when the tab is shown');
  });

  await t.test('an oversized note is refused with the message shown', async () => {
    await page.evaluate((p) => { location.hash = '#' + new URLSearchParams({ project: p, run: 'deploy-42', op: 'op-1' }); }, project);
    await page.locator('#decide').waitFor();
    await page.locator('#decide input[value=occurred]').check();
    // 1,001 characters, 2,002 bytes of UTF-8: the limit is in bytes.
    await page.locator('#note').fill('é'.repeat(1001));
    assert.equal(await text('#note-bytes'), '2,002 / 2,000 bytes (1,001 characters) — 2 over the limit');
    assert.equal(await page.locator('#note-bytes.over').count(), 1);
    await page.locator('#decide-button').click();
    await waitText('#decide-error', 'is 2002 bytes; at most 2000 are allowed');
    assert.match(await text('#decide-error'), /HTTP 400/);
    await page.locator('#note').fill('é'.repeat(1000));
    assert.equal(await text('#note-bytes'), '2,000 / 2,000 bytes (1,000 characters)');
    // Evidence that is not JSON is caught before anything is sent.
    await page.locator('#evidence').fill('{"path": release.txt}');
    await page.locator('#decide-button').click();
    await waitText('#decide-error', 'Evidence is not valid JSON');
    assert.equal(await row('queue', 'deploy-42', 'op-1').count(), 1, 'nothing was recorded');
  });

  await t.test('the operator reconciles: it leaves the queue, the history shows the chain', async () => {
    await page.locator('#note').fill('release.txt in the run workspace holds v2.4.1: the deploy step ran before the worker died.');
    await page.locator('#evidence').fill('{"path": "release.txt", "content": "v2.4.1"}');
    await page.locator('#decide-button').click();
    await waitText('#decide-done', 'supersedes');
    assert.match(await text('#decide-done'), /operator:ann/);
    await row('queue', 'deploy-42', 'op-1').waitFor({ state: 'detached', timeout: REFRESH });
    await waitText('#history', 'operator:ann');
    const events = page.locator('#history ol.timeline > li');
    const n = await events.count();
    const last = await events.nth(n - 1).textContent();
    assert.match(last, /operation\.reconciled by operator:ann/);
    assert.match(last, /occurred/);
    assert.match(last, /current decision/);
    assert.match(last, /release\.txt in the run workspace holds v2\.4\.1/);
    assert.match(last, /"content": "v2\.4\.1"/);
    // supersedes names the supervisor's unknown, which is an earlier entry.
    const sup = await events.nth(n - 2).textContent();
    assert.match(sup, /operation\.reconciled by supervisor/);
    assert.match(sup, /unknown/);
    assert.match(last, new RegExp(`supersedes #${n - 1} supervisor: unknown`));
    const supKey = await events.nth(n - 2).getAttribute('data-key');
    assert.equal(await events.nth(n - 1).locator('.supersedes').getAttribute('data-supersedes'), supKey);
    await shot('history');
  });

  await t.test('the same run and operation in another project is another operation: nothing carries over', async () => {
    await page.locator('#note').fill('drafted for ' + project);
    await page.evaluate(() => { location.hash = '#' + new URLSearchParams({ project: 'zeta', run: 'deploy-42', op: 'op-1' }); });
    await page.waitForFunction(() => document.querySelector('#note')?.value === '', null, { timeout: REFRESH });
    assert.ok(!(await text('#history')).includes('operator:ann'), "the other project's history is not shown");
    await page.evaluate((p) => { location.hash = '#' + new URLSearchParams({ project: p, run: 'deploy-42', op: 'op-1' }); }, project);
    await waitText('#history', 'operator:ann');
  });

  await t.test('a reload keeps the tab signed in, on the same operation', async () => {
    const url = page.url();
    await page.reload();
    await waitText('#who', 'operator');
    assert.equal(page.url(), url);
    await waitText('#history', 'operator:ann');
  });

  await t.test("a token reload that changes the token's role shows without a page reload", async () => {
    const role = async (r) => {
      const res = await fetch(control + '/role?ann=' + r, { method: 'POST' });
      assert.equal(res.status, 204, await res.text());
    };
    await page.locator('#decide').waitFor();
    await role('reader');
    await waitText('#who', 'reader', REFRESH);
    await page.locator('#decide').waitFor({ state: 'detached', timeout: REFRESH });
    assert.equal(await page.locator('#readonly').isVisible(), true);
    await waitText('#history', 'operator:ann');
    await role('operator');
    await waitText('#who', 'operator', REFRESH);
    await page.locator('#decide').waitFor({ timeout: REFRESH });
    assert.equal(await page.locator('#readonly').isVisible(), false);
  });

  await t.test('sign-out forgets the token', async () => {
    await page.locator('#signout').click();
    await page.locator('#signin-form').waitFor();
    assert.equal(await stored(), null);
    assert.equal(await page.locator('#queue tbody tr').count(), 0, 'no data is left on the page');
    await page.reload();
    await page.locator('#signin-form').waitFor();
    assert.equal(await page.locator('#app').isHidden(), true, 'a reload does not sign back in');
  });

  await t.test('a reader sees no write controls', async () => {
    await signIn(reader);
    await waitText('#who', 'reader');
    await page.evaluate((p) => { location.hash = '#' + new URLSearchParams({ project: p, run: 'nightly-3.op-1', op: 'op-1' }); }, project);
    await page.locator('#cards article.card').first().waitFor({ timeout: REFRESH });
    await waitText('#history', 'operation.reconciled');
    assert.equal(await page.locator('#readonly').isVisible(), true);
    assert.equal(await page.locator('#decide, textarea, input[type=radio]').count(), 0);
    assert.equal(await page.locator('button:visible').count(), 1, 'the only button signs out');
    await shot('reader');
  });

  await t.test("a late whoami of a token signed out meanwhile is ignored", async () => {
    // The page asks /v1/whoami on every poll. Here the poll's request of
    // one token is held until that token was signed out and another
    // signed in; its answer then comes, and must change nothing.
    let hold = null;
    await page.route('**/v1/whoami', async (route) => {
      const auth = (await route.request().allHeaders()).authorization;
      if (hold && auth === 'Bearer ' + hold.token) {
        const h = hold;
        hold = null;
        h.resolve(route);
        return;
      }
      await route.continue();
    });
    const held = (token) => new Promise((resolve, reject) => {
      hold = { token, resolve };
      setTimeout(() => reject(new Error('no whoami poll with the token within ' + REFRESH + ' ms')), REFRESH).unref();
    });
    const watchWho = () => page.evaluate(() => {
      window.whoShown = [];
      new MutationObserver(() => window.whoShown.push(document.querySelector('#who').textContent))
        .observe(document.querySelector('#who'), { childList: true, subtree: true, characterData: true });
    });

    // The reader's answer, as the server gives it, after the operator
    // signed in: the page must not show the reader again.
    const readers = await held(reader);
    await page.locator('#signout').click();
    await page.locator('#signin-form').waitFor();
    await signIn(operator);
    await waitText('#who', 'operator');
    await watchWho();
    await readers.continue();
    await page.waitForTimeout(1500);
    assert.deepEqual(await page.evaluate(() => window.whoShown), [], "the old token's identity was shown again");
    assert.match(await text('#who'), /ann/);

    // The operator's token refused, after the reader signed in: the page
    // must not sign the reader out.
    const operators = await held(operator);
    await page.locator('#signout').click();
    await page.locator('#signin-form').waitFor();
    await signIn(reader);
    await waitText('#who', 'reader');
    await operators.fulfill({ status: 401, contentType: 'application/json', body: JSON.stringify({ error: 'unknown token' }) });
    await page.waitForTimeout(1500);
    assert.equal(await stored(), reader, "the new session was signed out by the old token's refusal");
    assert.equal(await page.locator('#app').isVisible(), true);
    assert.match(await text('#who'), /rita/);
    await page.unroute('**/v1/whoami');
  });

  await t.test("a late answer to a reload's sign-in of a token replaced meanwhile is ignored", async () => {
    // A reloaded tab signs back in with its stored token (resume). The
    // server fails that first whoami, so the page offers the form and asks
    // again every poll; the retry is held until the user signed in with
    // another token, and its answer (the stored token's identity) must
    // then change nothing.
    assert.equal(await stored(), reader);
    let failed = false;
    let release;
    const retried = new Promise((resolve, reject) => {
      release = resolve;
      setTimeout(() => reject(new Error('no retried whoami with the stored token within ' + REFRESH + ' ms')), REFRESH).unref();
    });
    let heldRoute = null;
    await page.route('**/v1/whoami', async (route) => {
      const auth = (await route.request().allHeaders()).authorization;
      if (auth === 'Bearer ' + reader && !failed) {
        failed = true;
        await route.fulfill({ status: 503, contentType: 'application/json', body: JSON.stringify({ error: 'unavailable' }) });
        return;
      }
      if (auth === 'Bearer ' + reader && !heldRoute) {
        heldRoute = route;
        release(route);
        return;
      }
      await route.continue();
    });
    await page.reload();
    await page.locator('#signin-form').waitFor();
    const held = await retried;
    await signIn(operator);
    await waitText('#who', 'operator');
    // The page corrects #who at its next whoami, so what it showed in
    // between is watched, not only what it shows at the end.
    await page.evaluate(() => {
      window.whoShown = [];
      new MutationObserver(() => window.whoShown.push(document.querySelector('#who').textContent))
        .observe(document.querySelector('#who'), { childList: true, subtree: true, characterData: true });
    });
    await held.continue();
    await page.waitForTimeout(1500);
    assert.deepEqual(await page.evaluate(() => window.whoShown.filter((w) => /rita/.test(w))), [], "the replaced token's identity was shown");
    assert.match(await text('#who'), /ann/);
    assert.equal(await stored(), operator);
    await page.unroute('**/v1/whoami');
    // Back to the reader, as the subtests before left the page.
    await page.locator('#signout').click();
    await page.locator('#signin-form').waitFor();
    await signIn(reader);
    await waitText('#who', 'reader');
  });

  await t.test("a late answer to a decision of a session signed out meanwhile is ignored", async () => {
    // A decision is held on its way until its session was signed out and
    // the same operator signed in again (the panel rebuilt for the same
    // operation, a new note drafted); its answer then comes, and must
    // neither clear the new draft nor, refused, sign the new session out.
    let hold = null;
    await page.route('**/v1/agent/operations/reconcile', async (route) => {
      if (hold) {
        const h = hold;
        hold = null;
        h.resolve(route);
        return;
      }
      await route.continue();
    });
    const held = () => new Promise((resolve, reject) => {
      hold = { resolve };
      setTimeout(() => reject(new Error('no decision posted within ' + REFRESH + ' ms')), REFRESH).unref();
    });
    const draft = 'drafted in the new session';
    const decideThenSignInAgain = async () => {
      const posted = held();
      await page.locator('#decide input[value=occurred]').check();
      await page.locator('#note').fill('drafted in the old session');
      await page.locator('#decide-button').click();
      const route = await posted;
      await page.locator('#signout').click();
      await page.locator('#signin-form').waitFor();
      await signIn(operator);
      await waitText('#who', 'operator');
      await page.locator('#decide').waitFor({ timeout: REFRESH });
      await page.locator('#note').fill(draft);
      return route;
    };

    await page.locator('#signout').click();
    await page.locator('#signin-form').waitFor();
    await signIn(operator);
    await waitText('#who', 'operator');
    await page.evaluate((p) => { location.hash = '#' + new URLSearchParams({ project: p, run: 'deploy-42', op: 'op-1' }); }, project);
    await page.locator('#decide').waitFor({ timeout: REFRESH });

    // Recorded, as far as the old session's answer says.
    let route = await decideThenSignInAgain();
    await route.fulfill({ status: 200, contentType: 'application/json',
      body: JSON.stringify({ source_id: 'kernel', event_id: 'late-decision', actor: 'operator:ann', data: { effect: 'occurred' } }) });
    await page.waitForTimeout(1500);
    assert.equal(await page.locator('#note').inputValue(), draft, "the old session's answer cleared the new draft");
    assert.equal(await page.locator('#decide-done').isVisible(), false, "the old session's answer was shown");

    // Refused: the old session's token as the server no longer takes it.
    route = await decideThenSignInAgain();
    await route.fulfill({ status: 401, contentType: 'application/json', body: JSON.stringify({ error: 'unknown token' }) });
    await page.waitForTimeout(1500);
    assert.equal(await stored(), operator, "the new session was signed out by the old session's refusal");
    assert.equal(await page.locator('#app').isVisible(), true);
    assert.equal(await page.locator('#note').inputValue(), draft);
    await page.unroute('**/v1/agent/operations/reconcile');
    // Back to the reader, as the subtests before left the page.
    await page.locator('#signout').click();
    await page.locator('#signin-form').waitFor();
    await signIn(reader);
    await waitText('#who', 'reader');
  });

  await t.test("the runs view: every run, a run's timeline, its child and parent, its operations filtered and searched", async () => {
    // An agent's run with operations of two tools in three states.
    const ts = new Date().toISOString();
    const ev = (id, type, data) => ({ source_id: 'bot', event_id: 'multi-9/' + id, project, run_id: 'multi-9', type, ts, actor: 'agent', data });
    const resp = await fetch(base + '/v1/events', {
      method: 'POST', headers: { Authorization: 'Bearer ' + agent, 'Content-Type': 'application/json' },
      body: JSON.stringify({ events: [ev('run/started', 'run.started', {}),
        ev('op-1/started', 'tool.started', { operation_id: 'op-1', tool: 'http_post' }),
        ev('op-1/completed', 'tool.completed', { operation_id: 'op-1' }),
        ev('op-2/started', 'tool.started', { operation_id: 'op-2', tool: 'http_post' }),
        ev('op-2/failed', 'tool.failed', { operation_id: 'op-2', error_type: 'timeout', error: 'upstream timed out', effect: 'uncertain' }),
        ev('op-3/started', 'tool.started', { operation_id: 'op-3', tool: 'send_email' }),
        ev('op-4/started', 'tool.started', { operation_id: 'op-4', tool: 'send_email' }),
        ev('op-4/blocked', 'tool.blocked', { operation_id: 'op-4', reason: 'quota' })] }),
    });
    assert.equal(resp.status, 200, await resp.text());

    await page.locator('#view-runs').click();
    await page.waitForFunction((p) => location.hash === '#' + new URLSearchParams({ project: p, view: 'runs' }), project);
    const runRow = (id) => page.locator(`#runs tbody tr[data-run="${id}"]`);
    await runRow('multi-9').waitFor({ timeout: REFRESH });
    const listed = await page.locator('#runs tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-run')));
    assert.deepEqual(listed.slice().sort(), ['agent-7', 'agent-turns-1', 'deploy-42', 'multi-9', 'nightly-3', 'nightly-3.op-1', 'report-7']);
    assert.equal(listed[0], 'multi-9', 'newest first');
    assert.match(await runRow('agent-7').textContent(), /agent · bot.*failed/);
    assert.match(await runRow('nightly-3.op-1').textContent(), /kernel.*nightly-3$/, 'a child run names its parent');
    assert.equal(await page.locator('#ops-view').isHidden(), true);
    await page.waitForTimeout(5500); // a refresh re-ages the table's times in place
    assert.doesNotMatch(await text('#runs'), /NaN|null|undefined/);
    await page.locator('#runs-status').selectOption('failed');
    await page.waitForFunction(() => location.hash.includes('status=failed'));
    await runRow('multi-9').waitFor({ state: 'detached', timeout: REFRESH });
    for (const r of await page.locator('#runs tbody tr').all()) assert.match(await r.textContent(), /failed/);
    await page.locator('#runs-status').selectOption('');
    await runRow('multi-9').waitFor({ timeout: REFRESH });
    await shot('runs');

    // A run's page: its status, its events in order, its child run.
    await runRow('nightly-3').locator('td').first().locator('a').click();
    await waitText('#run-head', 'nightly-3');
    assert.match(await text('#run-head'), /kernel run \(source kernel\).*1 operation, 0 unresolved, 1 settled/);
    assert.doesNotMatch(await text('#run-head'), /NaN|null|undefined/);
    const types = () => page.locator('#run-timeline > li .evhead > b').allTextContents();
    await page.waitForFunction(() => document.querySelectorAll('#run-timeline > li').length >= 3, null, { timeout: REFRESH });
    const seen = await types();
    assert.equal(seen[0], 'run.started');
    assert.ok(seen.indexOf('tool.started') > 0 && seen.indexOf('tool.failed') > seen.indexOf('tool.started'), `events in order: ${seen}`);
    const childRow = page.locator('#run-children tbody tr[data-run="nightly-3.op-1"]');
    await childRow.waitFor({ timeout: REFRESH });
    assert.equal(await page.locator('#run-ops tbody tr[data-op="op-1"] a', { hasText: 'nightly-3.op-1' }).count(), 1, 'the delegation links its child run');
    await shot('run');
    await childRow.locator('a').click();
    await waitText('#run-head', 'nightly-3.op-1');
    await waitText('#run-parent', 'nightly-3');
    await page.locator('#run-ops tbody tr[data-op="op-1"]').waitFor({ timeout: REFRESH });
    assert.match(await text('#run-ops tbody tr[data-op="op-1"]'), /run_command/);
    await page.locator('#run-parent a').click();
    await page.waitForFunction(() => new URLSearchParams(location.hash.slice(1)).get('run') === 'nightly-3');
    await childRow.waitFor({ timeout: REFRESH });

    // Filters by state and tool, a search by id; all three in the address.
    await page.evaluate((p) => { location.hash = '#' + new URLSearchParams({ project: p, view: 'run', run: 'multi-9' }); }, project);
    const shown = () => page.locator('#run-ops tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-op')).join(','));
    await page.waitForFunction(() => document.querySelectorAll('#run-ops tbody tr').length === 4, null, { timeout: REFRESH });
    assert.match(await text('#run-ops tbody tr[data-op="op-2"]'), /failed_uncertain/);
    assert.match(await text('#run-ops tbody tr[data-op="op-4"]'), /settled.*none.*tool\.blocked/);
    await page.locator('#run-ops-state').selectOption('settled');
    assert.equal(await shown(), 'op-1,op-4');
    await page.locator('#run-ops-tool').selectOption('http_post');
    assert.equal(await shown(), 'op-1');
    assert.equal(await text('#run-ops-count'), '1 of 4');
    await page.locator('#run-ops-state').selectOption('unresolved');
    assert.equal(await shown(), 'op-2');
    await page.locator('#run-ops-state').selectOption('');
    await page.locator('#run-ops-tool').selectOption('');
    await page.locator('#run-ops-q').fill('OP-3');
    assert.equal(await shown(), 'op-3');
    await page.locator('#run-ops-q').fill('multi-9');
    assert.equal(await shown(), 'op-1,op-2,op-3,op-4', 'the search matches the run id too');
    await page.locator('#run-ops-q').fill('nope');
    assert.equal(await shown(), '');
    assert.equal(await page.locator('#run-ops-empty').isVisible(), true);
    await page.locator('#run-ops-tool').selectOption('send_email');
    await page.locator('#run-ops-q').fill('op-4');
    // Deep link: a reload comes back to the same filtered table.
    await page.waitForFunction(() => /view=run&run=multi-9.*tool=send_email.*q=op-4/.test(location.hash));
    await page.reload();
    await page.waitForFunction(() => document.querySelectorAll('#run-ops tbody tr').length === 1, null, { timeout: REFRESH });
    assert.equal(await shown(), 'op-4');
    assert.equal(await page.locator('#run-ops-q').inputValue(), 'op-4');
    assert.equal(await page.locator('#run-ops-tool').inputValue(), 'send_email');
    // The operation's link opens its history in the operations view.
    await page.locator('#run-ops tbody tr[data-op="op-4"] a', { hasText: 'op-4' }).click();
    await waitText('#history', 'tool.blocked');
    assert.equal(await page.locator('#run-view').isHidden(), true);
  });

  await t.test("an agent run's page shows its model turns and tool calls in order, its final answer as a claim", async () => {
    // A kernel agent run the Go side journaled (seedAgentRun).
    await page.evaluate((p) => { location.hash = '#' + new URLSearchParams({ project: p, view: 'run', run: 'agent-turns-1' }); }, project);
    await page.waitForFunction(() => document.querySelectorAll('#run-timeline > li').length === 6, null, { timeout: REFRESH });
    const seen = await page.locator('#run-timeline > li .evhead > b').allTextContents();
    assert.deepEqual(seen, ['run.started', 'agent.turn', 'tool.started', 'tool.completed', 'agent.turn', 'run.completed']);
    const first = page.locator('#run-timeline > li').nth(1);
    assert.match(await first.textContent(), /model turn 1 · scripted/);
    assert.equal(await first.locator('.agent-call[data-call="c1"] a', { hasText: 'op-1-c1' }).count(), 1, 'the call links its operation');
    assert.match(await first.locator('.agent-call[data-call="c2"]').textContent(), /refused.*nothing ran/);
    const last = page.locator('#run-timeline > li').nth(5);
    assert.match(await last.textContent(), /final answer.*claim of the agent, not evidence.*NOTES\.md written <img/);
    assert.equal(await page.evaluate(() => window.pwned), undefined);
  });

  await t.test('nothing left this origin, and the policy was never violated', async () => {
    assert.deepEqual(offOrigin, []);
    assert.deepEqual(tokenInURL, []);
    assert.deepEqual(cspViolations, []);
    assert.deepEqual(pageErrors, []);
    assert.equal(await page.evaluate(() => window.pwned), undefined);
  });
});
