// The upload form's resumable upload in a real browser: Debian's Chromium driven by
// playwright-core, headless. Run by cmd/api/upload_page_e2e_test.go.
//
//   PLAYHEAD_URL    the server, http://127.0.0.1:port
//   PLAYHEAD_TOKEN  a member's token
//   PLAYHEAD_VIDEO  the file to upload (more than two of the page's 8 MiB requests)
//   CHROMIUM        the browser, /usr/bin/chromium unless set
//
// The page's first PATCH goes through; every later one is held, never answered, as on a
// network that went away mid-upload. The script pauses the upload and resumes it (held again),
// then reloads the page: the page says how far the upload got; the file chosen again, the
// upload goes on from the server's offset and ends READY.
//
// Events: interrupted (PATCHes held, the page paused and resumed), done (the page's note after
// the reload, the PATCHes after it with their offsets, the final status, axe-core's
// violations, console errors). Any failure: an "error" event, and exit status 1.
//
// Timeouts only bound how long a step may wait before the script gives up.

import { accessibility, emit, env, run, withBrowser } from './harness.mjs';

const BASE = env('PLAYHEAD_URL');
const TOKEN = env('PLAYHEAD_TOKEN');
const VIDEO = env('PLAYHEAD_VIDEO');
const TITLE = 'Lecture on a train';

const STEP_WAIT = 60_000;
const ENCODE_WAIT = 120_000;

const statusOf = (page) => page.$eval('#upload-status', (n) => ({ status: n.dataset.status, text: n.textContent }));

async function waitStatus(page, wanted, timeout = STEP_WAIT) {
  await page.waitForFunction((w) => w.includes(document.getElementById('upload-status').dataset.status), wanted, { timeout, polling: 50 });
  return statusOf(page);
}

// until polls cond (in this process) until it holds.
async function until(what, cond) {
  const deadline = Date.now() + STEP_WAIT;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function main() {
  const problems = [];
  let watching = true; // console errors count, except while the network is made to fail
  await withBrowser({}, async (context) => {
    const page = await context.newPage();
    page.on('console', (msg) => {
      if (watching && msg.type() === 'error') problems.push(`console error: ${msg.text()}`);
    });
    page.on('pageerror', (err) => problems.push(`uncaught exception: ${err.message}`));
    const patches = []; // every PATCH the page sends: its Upload-Offset, and whether after the reload
    let reloaded = false; // set once the reloaded page is up; until then every PATCH after the first is held
    page.on('request', (req) => {
      if (req.method() === 'PATCH' && new URL(req.url()).pathname.startsWith('/v1/uploads/')) {
        patches.push({ offset: Number(req.headers()['upload-offset']), afterReload: reloaded });
      }
    });

    await page.goto(`${BASE}/#token=${encodeURIComponent(TOKEN)}`);
    await page.waitForSelector('#main:not([hidden])');

    // 1. The network goes away after the first 8 MiB: later PATCHes are held, never answered,
    // until the page has been reloaded (a retry the old page makes meanwhile is held too).
    const held = [];
    let passed = 0;
    await page.route('**/v1/uploads/*', (route) => {
      if (route.request().method() !== 'PATCH' || reloaded) return route.continue();
      if (passed === 0) {
        passed++;
        return route.continue();
      }
      held.push(route);
      return undefined;
    });
    await page.setInputFiles('#file', VIDEO);
    await page.fill('#title', TITLE);
    await page.click('#upload-button');
    await until('a second PATCH', () => held.length >= 1);
    watching = false;

    // 2. Pause (the held request is given up), then resume: held again.
    await page.waitForSelector('#upload-pause:not([hidden])');
    await page.click('#upload-pause');
    const paused = await waitStatus(page, ['PAUSED']);
    const pauseLabel = await page.$eval('#upload-pause', (b) => b.textContent.trim());
    const violations = await accessibility(page, 'home page, upload paused');
    await page.click('#upload-pause');
    await until('the resumed upload\'s PATCH', () => held.length >= 2);
    emit('interrupted', { held: held.length, paused: paused.text, pauseLabel });

    // 3. Reload the page, its PATCHes still held: the reload cancels them, and not one byte of
    // them reaches the server. (Aborting them first would let the page retry before the
    // reload, and that retry's bytes would go out.)
    await page.reload();
    await page.waitForSelector('#main:not([hidden])');
    reloaded = true;
    for (const r of held) await r.abort('connectionreset').catch(() => {});
    await page.waitForSelector('#upload-unfinished:not([hidden])', { timeout: STEP_WAIT });
    const note = await page.$eval('#upload-unfinished', (n) => n.textContent.trim());
    watching = true;
    violations.push(...await accessibility(page, 'home page after the reload, an upload unfinished'));

    // 4. The same file again: the upload goes on from the server's offset, to READY.
    await page.setInputFiles('#file', VIDEO);
    await page.fill('#title', TITLE);
    await page.click('#upload-button');
    const final = await waitStatus(page, ['READY', 'FAILED', 'ERROR'], ENCODE_WAIT);
    const watchHref = await page.$eval('#upload-watch', (a) => a.getAttribute('href'));
    const noteAfter = await page.$eval('#upload-unfinished', (n) => n.hidden);
    violations.push(...await accessibility(page, 'home page, upload READY'));
    emit('done', {
      note, noteHiddenAfter: noteAfter, status: final.status, statusText: final.text, watchHref,
      patchesAfterReload: patches.filter((p) => p.afterReload).map((p) => p.offset),
      patchesBefore: patches.filter((p) => !p.afterReload).map((p) => p.offset),
      violations, problems,
    });
  });
}

run('upload.mjs', main);
