// Up next and the course page in a real browser: Debian's Chromium (/usr/bin/chromium) driven
// by playwright-core, headless. Run by cmd/api/course_page_e2e_test.go, which seeds a course,
// reports positions through the API, reads the events this script prints (one JSON object a
// line on stdout) and checks the database.
//
//   PLAYHEAD_URL    the server, http://127.0.0.1:port
//   PLAYHEAD_TOKEN  the member's token (passed to the page once, as #token=…)
//   PLAYHEAD_SHOTS  where to save the screenshots (a temporary folder; docs/img for `make screenshots`)
//   CHROMIUM        the browser, /usr/bin/chromium unless set
//
// Events: home (the continue-watching cards and the "Your courses" rows as the home page shows
// them), course (the course page reached from the home page: title, totals, resume button,
// lessons), opened (the player opened from the resume button: its address, and the POST
// /v1/playback request it sent with the answer's status), empty (the page of a course that
// does not exist), done (axe-core's violations on both pages, console errors,
// the notice). Any failure: an "error" event, and exit status 1.
//
// Timeouts only bound how long a step may wait before the script gives up.

import { chromium } from 'playwright-core';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const env = (name, fallback) => {
  const v = process.env[name] || fallback;
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const BASE = env('PLAYHEAD_URL');
const TOKEN = env('PLAYHEAD_TOKEN');
const SHOTS = env('PLAYHEAD_SHOTS');
const CHROMIUM = env('CHROMIUM', '/usr/bin/chromium');

const STEP_WAIT = 30_000;

const emit = (event, data = {}) => process.stdout.write(`${JSON.stringify({ event, ...data })}\n`);
const log = (...args) => console.error('[course.mjs]', ...args);

// axe-core checks the page against WCAG 2.1 A and AA, evaluated through the DevTools protocol
// (as in imports.mjs), so the page's Content-Security-Policy needs no change.
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

async function accessibility(page, when) {
  const violations = await page.evaluate(async (source) => {
    if (!window.axe) (0, eval)(source);
    const r = await window.axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } });
    return r.violations.map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  }, AXE);
  return violations.map((v) => `${when}: ${v}`);
}

// visibleText is what a reader sees of a node: its rendered text (hidden parts left out).
const visibleText = (page, selector) => page.$eval(selector, (n) => n.innerText.trim());

async function main() {
  const problems = [];
  let watching = true; // console errors count on the home and course pages
  const userDataDir = mkdtempSync(join(tmpdir(), 'playhead-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
    viewport: { width: 1280, height: 900 },
    deviceScaleFactor: 1,
  });
  try {
    const result = { browser: context.browser() ? context.browser().version() : '' };
    for (const p of context.pages()) await p.close();
    const page = await context.newPage();
    page.on('console', (msg) => {
      if (watching && msg.type() === 'error') problems.push(`console error: ${msg.text()}`);
    });
    page.on('pageerror', (err) => {
      if (watching) problems.push(`uncaught exception: ${err.message}`);
    });

    // 1. The home page: continue watching with its up-next card, and "Your courses".
    await page.goto(`${BASE}/#token=${encodeURIComponent(TOKEN)}`);
    await page.waitForSelector('#items li', { timeout: STEP_WAIT });
    await page.waitForSelector('#course-list li', { timeout: STEP_WAIT });
    const items = await page.$$eval('#items li', (lis) => lis.map((li) => ({
      mediaId: Number(li.dataset.mediaId),
      text: li.querySelector('.item-body').innerText.trim(),
      href: li.querySelector('.item-title').getAttribute('href'),
    })));
    const courses = await page.$$eval('#course-list li', (lis) => lis.map((li) => ({
      collection: li.dataset.collection,
      text: li.innerText.trim(),
      href: li.querySelector('.item-title').getAttribute('href'),
      resumeHref: li.querySelector('a.button') ? li.querySelector('a.button').getAttribute('href') : '',
    })));
    emit('home', { items, courses });
    await page.screenshot({ path: join(SHOTS, 'home-up-next.png'), fullPage: true });
    result.accessibility = await accessibility(page, 'the home page');

    // 2. The course page, reached from the home page.
    await page.click('#course-list li .item-title');
    await page.waitForSelector('#lessons li', { timeout: STEP_WAIT });
    const lessons = await page.$$eval('#lessons li', (lis) => lis.map((li) => ({
      mediaId: Number(li.dataset.mediaId),
      text: li.innerText.replace(/\s+/g, ' ').trim(),
    })));
    emit('course', {
      url: page.url(),
      title: await visibleText(page, '#course-title'),
      totals: await visibleText(page, '#totals'),
      resume: await page.$eval('#resume', (a) => (a.hidden ? '' : a.innerText.trim())),
      resumeHref: await page.$eval('#resume', (a) => a.getAttribute('href') || ''),
      lessons,
    });
    await page.screenshot({ path: join(SHOTS, 'course.png'), fullPage: true });
    result.accessibility.push(...await accessibility(page, 'the course page'));
    result.problems = problems;
    result.notice = await page.evaluate(() => {
      const n = document.getElementById('notice');
      return n.hidden ? '' : n.textContent.trim();
    });

    // 3. Resume: the player opens the lesson from this collection. The seeded lessons have no
    // video files, so only the open is looked at, not playback.
    watching = false;
    const opened = page.waitForResponse((r) => r.request().method() === 'POST' && new URL(r.url()).pathname.startsWith('/v1/playback/'),
      { timeout: STEP_WAIT });
    await page.click('#resume');
    const response = await opened;
    emit('opened', { url: page.url().slice(BASE.length), request: response.url().slice(BASE.length), status: response.status() });

    // 4. A course that does not exist reads as one without lessons.
    await page.goto(`${BASE}/course?${new URLSearchParams({ c: 'no such course' })}`);
    await page.waitForSelector('#finished:not([hidden])', { timeout: STEP_WAIT });
    emit('empty', { totals: await visibleText(page, '#totals'), resume: await page.$eval('#resume', (a) => (a.hidden ? '' : a.innerText.trim())),
      title: await visibleText(page, '#finished') });

    emit('done', result);
  } finally {
    await context.close();
    rmSync(userDataDir, { recursive: true, force: true });
  }
}

main().then(() => process.exit(0), (err) => {
  log(err.stack || String(err));
  emit('error', { message: String(err.message || err) });
  process.exit(1);
});
