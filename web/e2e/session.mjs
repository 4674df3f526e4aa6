// A #token=… link opened over a signed-in tab, in a real browser: Debian's Chromium
// (/usr/bin/chromium) driven by playwright-core, headless. Run by
// cmd/api/session_page_e2e_test.go, which checks the events this script prints (one JSON object
// a line on stdout).
//
//   PLAYHEAD_URL      the server, http://127.0.0.1:port
//   PLAYHEAD_TOKEN    member A's token: the tab signs in with it first (#token=…)
//   PLAYHEAD_OTHER    member B's token: the link opened over the signed-in tab
//   PLAYHEAD_OTHER2   another token of member B: a link of the member already signed in
//   PLAYHEAD_OTHER_ADMIN  a token of member B with the admin role: the same member, another role
//   CHROMIUM          the browser, /usr/bin/chromium unless set
//
// Events, each with what the page shows (the header's member, the question if asked), the
// token the tab holds, the address and which tokens the page's API calls carried since the
// step before: first (#token=A in a new tab), prompt (#token=B over it), stayed (after
// "Stay"), switched (#token=B again, then "Switch"), same (#token=B2 over B), role (#token=BA,
// B's admin token, over B2), done (axe-core's violations on the question, console errors). Any failure: an "error" event, and exit status 1.
//
// Timeouts only bound how long a step may wait before the script gives up.

import { chromium } from 'playwright-core';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const BASE = env('PLAYHEAD_URL');
const TOKENS = { A: env('PLAYHEAD_TOKEN'), B: env('PLAYHEAD_OTHER'), B2: env('PLAYHEAD_OTHER2'), BA: env('PLAYHEAD_OTHER_ADMIN') };
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const STEP_WAIT = 30_000;

const emit = (event, data = {}) => process.stdout.write(`${JSON.stringify({ event, ...data })}\n`);

const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

async function accessibility(page) {
  return page.evaluate(async (source) => {
    if (!window.axe) (0, eval)(source);
    const r = await window.axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } });
    return r.violations.map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  }, AXE);
}

// nameOf says which of the test's tokens a header or stored value is.
const nameOf = (value) => {
  for (const [name, tok] of Object.entries(TOKENS)) if (value === tok || value === `Bearer ${tok}`) return name;
  return value ? 'other' : 'none';
};

async function main() {
  const problems = [];
  const userDataDir = mkdtempSync(join(tmpdir(), 'playhead-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  try {
    for (const p of context.pages()) await p.close();
    const page = await context.newPage();
    page.on('console', (msg) => {
      if (msg.type() === 'error') problems.push(`console error: ${msg.text()}`);
    });
    page.on('pageerror', (err) => problems.push(`uncaught exception: ${err.message}`));
    let sent = new Set();
    page.on('request', (req) => {
      const auth = req.headers().authorization;
      if (auth) sent.add(nameOf(auth));
    });

    // state reads what the tab shows and holds once the page settled on the session or the
    // question, and the tokens its API calls carried since the last state.
    const state = async () => {
      await page.waitForSelector('#session:not([hidden]), #switch', { timeout: STEP_WAIT });
      const s = await page.evaluate(() => ({
        member: document.getElementById('session').hidden ? '' : document.getElementById('member').textContent,
        question: document.getElementById('switch') ? document.getElementById('switch').innerText : '',
        focused: document.activeElement ? document.activeElement.id : '',
        stored: sessionStorage.getItem('playhead.token'),
        hash: location.hash,
      }));
      s.stored = nameOf(s.stored);
      s.sent = [...sent].sort();
      sent = new Set();
      return s;
    };
    // open follows a link to the home page with a token, as from another site: a new document
    // (from about:blank, so the address differs by more than its hash).
    const open = async (name) => {
      await page.goto('about:blank');
      await page.goto(`${BASE}/#token=${encodeURIComponent(TOKENS[name])}`, { waitUntil: 'load' });
    };

    await open('A');
    emit('first', await state());

    await open('B');
    const prompt = await state();
    emit('prompt', { ...prompt, accessibility: await accessibility(page) });
    if (!prompt.question) throw new Error(`no question asked: the link switched the tab to token ${prompt.stored}`);

    await Promise.all([page.waitForEvent('load'), page.click('#switch-stay')]);
    emit('stayed', await state());

    await open('B');
    await state();
    await Promise.all([page.waitForEvent('load'), page.click('#switch-accept')]);
    emit('switched', await state());

    await open('B2');
    emit('same', await state());

    await open('BA');
    emit('role', await state());

    emit('done', { problems });
  } finally {
    await context.close();
    rmSync(userDataDir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  emit('error', { message: String(err && err.stack ? err.stack : err) });
  process.exit(1);
});
