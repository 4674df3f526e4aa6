// The import page in a real browser: Debian's Chromium (/usr/bin/chromium) driven by
// playwright-core, headless. Run by cmd/api/imports_page_e2e_test.go, which starts the server
// and a host for the sheet's videos, reads the events this script prints (one JSON object a
// line on stdout) and checks the database.
//
//   PLAYHEAD_URL    the server, http://127.0.0.1:port
//   PLAYHEAD_TOKEN  an admin's token (passed to the page once, as #token=…)
//   PLAYHEAD_SHEET  the .xlsx to import through the page
//   PLAYHEAD_SHOTS  where to save the screenshots (a temporary folder; docs/img for `make screenshots`)
//   CHROMIUM        the browser, /usr/bin/chromium unless set
//
// The page is checked with axe-core after the check and once the rows are READY (done's
// "accessibility": the violations found).
//
// Events: checked (the dry run's report as the page shows it; the script then waits for a line
// on stdin, so the test can see that the check wrote nothing), imported (every row finished, as
// the page shows it), done. Any failure: an "error" event, and exit status 1.
//
// Timeouts only bound how long a step may wait before the script gives up.

import { createInterface } from 'node:readline';
import { join } from 'node:path';

import { accessibility, emit, env, run, withBrowser } from './harness.mjs';

const BASE = env('PLAYHEAD_URL');
const TOKEN = env('PLAYHEAD_TOKEN');
const SHEET = env('PLAYHEAD_SHEET');
const SHOTS = env('PLAYHEAD_SHOTS');

const STEP_WAIT = 30_000; // a page answer
const READY_WAIT = 300_000; // every row downloaded and encoded

// tableRows reads the report table as the page shows it.
const tableRows = (page) => page.$$eval('#rows-body tr', (trs) => trs.map((tr) => {
  const cells = [...tr.querySelectorAll('td')].map((td) => td.textContent.trim());
  const link = tr.querySelector('.state a');
  return { row: Number(tr.dataset.row), state: tr.dataset.state, collection: cells[1], chapter: cells[2], order: cells[3],
    video: cells[4], reason: cells[6], mediaLink: link ? link.getAttribute('href') : '' };
}));

const stdinLines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

async function main() {
  const problems = [];
  await withBrowser({}, async (context) => {
    const result = { browser: context.browser() ? context.browser().version() : '' };
    const page = await context.newPage();
    page.on('console', (msg) => {
      if (msg.type() === 'error') problems.push(`console error: ${msg.text()}`);
    });
    page.on('pageerror', (err) => problems.push(`uncaught exception: ${err.message}`));

    // 1. Choose the file and check it: the dry run's report, with its rejected rows.
    await page.goto(`${BASE}/imports#token=${encodeURIComponent(TOKEN)}`);
    await page.waitForSelector('#main:not([hidden])', { timeout: STEP_WAIT });
    await page.setInputFiles('#sheet-file', SHEET);
    await page.click('#check');
    await page.waitForSelector('#report:not([hidden]) #rows-body tr', { timeout: STEP_WAIT });
    await page.waitForSelector('#confirm:not([hidden])', { timeout: STEP_WAIT });
    emit('checked', { rows: await tableRows(page), summary: await page.textContent('#summary'),
      confirm: await page.textContent('#confirm') });
    await page.screenshot({ path: join(SHOTS, 'import-check.png'), fullPage: true });
    result.accessibility = await accessibility(page, 'the check');
    await stdinLines.next(); // the test has looked at the database

    // 2. Confirm, and watch the rows reach READY on the page.
    await page.click('#confirm');
    await page.waitForSelector('#restart:not([hidden])', { timeout: READY_WAIT });
    emit('imported', { rows: await tableRows(page), progress: await page.textContent('#progress'),
      title: await page.textContent('#report-title') });
    await page.screenshot({ path: join(SHOTS, 'import-ready.png'), fullPage: true });
    result.accessibility.push(...await accessibility(page, 'the import'));

    result.problems = problems;
    result.notice = await page.evaluate(() => {
      const n = document.getElementById('notice');
      return n.hidden ? '' : n.textContent.trim();
    });
    emit('done', result);
  });
}

run('imports.mjs', main);
