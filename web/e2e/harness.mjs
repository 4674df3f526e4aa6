// What the test scripts of web/e2e share: their settings from the environment, the JSON
// events they print for the Go test that runs them (cmd/api/browser_script_test.go), a
// headless Chromium of their own (Debian's, driven by playwright-core) and the axe-core check.

import { chromium } from 'playwright-core';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// env is the value of the environment variable name, or fallback; it throws when neither is set.
export const env = (name, fallback) => {
  const v = process.env[name] || fallback;
  if (!v) throw new Error(`${name} is not set`);
  return v;
};

// emit prints one event, a line of JSON, on stdout: what the Go test reads.
export const emit = (event, data = {}) => process.stdout.write(`${JSON.stringify({ event, ...data })}\n`);

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const CHROMIUM = env('CHROMIUM', '/usr/bin/chromium');
const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];

// withBrowser runs use(context) in a new headless Chromium with a profile folder of its own
// (no state from another run), closed and removed afterwards. args are added to Chromium's;
// viewport replaces the default 1280×900.
export async function withBrowser({ args = [], viewport = { width: 1280, height: 900 } } = {}, use) {
  const userDataDir = mkdtempSync(join(tmpdir(), 'playhead-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: [...CHROMIUM_ARGS, ...args],
    viewport,
    deviceScaleFactor: 1,
  });
  try {
    for (const p of context.pages()) await p.close();
    return await use(context);
  } finally {
    await context.close();
    rmSync(userDataDir, { recursive: true, force: true });
  }
}

// axe-core checks the page against WCAG 2.1 A and AA. It is evaluated through the DevTools
// protocol, so the page's Content-Security-Policy needs no change for it.
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

// accessibility returns axe-core's violations on the page, one line each, prefixed with when
// (where the script was) if given.
export async function accessibility(page, when) {
  const violations = await page.evaluate(async (source) => {
    if (!window.axe) (0, eval)(source);
    const r = await window.axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } });
    return r.violations.map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  }, AXE);
  return when ? violations.map((v) => `${when}: ${v}`) : violations;
}

// run runs the script's main and exits: 0 once it is done, 1 after an "error" event (its
// stack on stderr, prefixed with the script's name) when it threw.
export function run(name, main) {
  main().then(() => process.exit(0), (err) => {
    console.error(`[${name}]`, err && err.stack ? err.stack : String(err));
    emit('error', { message: String((err && err.message) || err) });
    process.exit(1);
  });
}
