// The queue console in a real browser: Debian's Chromium (/usr/bin/chromium) driven by
// playwright-core, headless. Run by cmd/api/jobs_page_e2e_test.go, which starts the server, makes
// two webhook delivery jobs DEAD (their receiver answered 503), heals one receiver, and reads
// the events this script prints (one JSON object a line on stdout).
//
//   PLAYHEAD_URL      the server, http://127.0.0.1:port
//   PLAYHEAD_TOKEN    an admin's token (passed to the page once, as #token=…)
//   PLAYHEAD_RETRY    the DEAD job to find, look into, select and retry (its receiver now answers 204)
//   PLAYHEAD_DISCARD  the DEAD job to discard with its row's button (the confirmation accepted)
//   PLAYHEAD_CANCEL   a PENDING job to cancel with its row's button (the confirmation accepted)
//   PLAYHEAD_PAUSE    a kind to pause from the kinds table (the confirmation accepted), then resume
//   PLAYHEAD_SHOTS    where to save the screenshot (a temporary folder; docs/img for `make screenshots`)
//   CHROMIUM          the browser, /usr/bin/chromium unless set
//
// Events: listed (the jobs table and the counts as first shown; then the PENDING job is
// cancelled), detail (the retried job's
// facts and errors), completed (the table once the retried job shows COMPLETED and the
// discarded one is gone), focus (the control focused after a refresh), older (the table
// filtered to jobs older than the retried one), paused and resumed (the kinds table once the
// kind shows paused, then active again), done (axe-core's violations, problems). Any failure: an "error"
// event, and exit status 1. Timeouts only bound how long a step may wait.

import { join } from 'node:path';

import { accessibility, emit, env, run, withBrowser } from './harness.mjs';

const BASE = env('PLAYHEAD_URL');
const TOKEN = env('PLAYHEAD_TOKEN');
const RETRY = env('PLAYHEAD_RETRY');
const DISCARD = env('PLAYHEAD_DISCARD');
const CANCEL = env('PLAYHEAD_CANCEL');
const PAUSE = env('PLAYHEAD_PAUSE');
const SHOTS = env('PLAYHEAD_SHOTS');

const STEP_WAIT = 30_000; // a page answer
const RUN_WAIT = 120_000; // the retried delivery sent and its job COMPLETED

// jobRows reads the jobs table as the page shows it, top to bottom.
const jobRows = (page) => page.$$eval('#jobs-body tr', (trs) => trs.map((tr) => {
  const cells = [...tr.querySelectorAll('td')].map((td) => td.textContent.trim());
  return { id: Number(tr.dataset.job), kind: tr.dataset.kind, status: tr.dataset.status, attempts: cells[5], lastError: cells[7],
    actions: [...tr.querySelectorAll('.row-actions button')].map((b) => b.dataset.action) };
}));

// kindRows reads the kinds table: each kind's state, running, pending, priorities, partitions
// and the action its button offers.
const kindRows = (page) => page.$$eval('#kinds-body tr', (trs) => trs.map((tr) => {
  const cells = [...tr.querySelectorAll('td')].map((td) => td.textContent.trim());
  return { kind: tr.dataset.kind, paused: tr.dataset.paused === 'true', state: cells[0], running: cells[1], pending: cells[2],
    priorities: cells[3], partitions: cells[4], action: tr.querySelector('button')?.dataset.action };
}));

const counts = (page) => page.$$eval('#counts-body tr', (trs) => Object.fromEntries(trs.map((tr) => [tr.dataset.kind,
  Object.fromEntries([...tr.querySelectorAll('button')].map((b) => [b.dataset.status, Number(b.textContent)]))])));

// detailFacts reads the open job's facts (dt → dd), run in the page with page.evaluate: the
// query and the reads in one synchronous call. With page.$$eval over the dt elements, a CI run
// once read a 'Status' dt whose nextElementSibling was null: most likely a dt that the page's
// 3 s refresh had replaced (showDetail's replaceChildren) between the query and the read.
const detailFacts = () => Object.fromEntries([...document.querySelectorAll('#detail-facts dt')]
  .map((dt) => [dt.textContent, dt.nextElementSibling.textContent]));

async function main() {
  const problems = [];
  await withBrowser({}, async (context) => {
    const result = {};
    const page = await context.newPage();
    page.on('console', (msg) => {
      if (msg.type() === 'error') problems.push(`console error: ${msg.text()}`);
    });
    page.on('pageerror', (err) => problems.push(`uncaught exception: ${err.message}`));
    const dialogs = [];
    page.on('dialog', async (d) => {
      dialogs.push(d.message());
      await d.accept();
    });

    // 1. The queue as the page first shows it: DEAD jobs on top.
    await page.goto(`${BASE}/jobs#token=${encodeURIComponent(TOKEN)}`);
    await page.waitForSelector(`#jobs-body tr[data-job="${RETRY}"]`, { timeout: STEP_WAIT });
    await page.waitForSelector(`#jobs-body tr[data-job="${DISCARD}"]`, { timeout: STEP_WAIT });
    emit('listed', { rows: await jobRows(page), counts: await counts(page), kinds: await kindRows(page) });
    await page.click(`#jobs-body tr[data-job="${CANCEL}"] button[data-action="cancel"]`);
    await page.waitForSelector(`#jobs-body tr[data-job="${CANCEL}"][data-status="DEAD"]`, { timeout: STEP_WAIT });

    // 2. The job's attempts and errors.
    await page.click(`#jobs-body tr[data-job="${RETRY}"] .job-link`);
    await page.waitForSelector('#detail:not([hidden]) #detail-errors tr', { timeout: STEP_WAIT });
    emit('detail', {
      title: await page.textContent('#detail-title'),
      facts: await page.evaluate(detailFacts),
      errors: await page.$$eval('#detail-errors tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent.trim()))),
      focused: await page.evaluate(() => document.activeElement && document.activeElement.id),
    });
    result.accessibility = await accessibility(page, 'the queue with a job open');

    // 3. Retry through the selection; discard with the row's button. The page refreshes itself.
    await page.check(`#jobs-body tr[data-job="${RETRY}"] input[type="checkbox"]`);
    await page.click('#retry-selected');
    await page.waitForFunction((id) => /Retried job/.test(document.getElementById('outcome').textContent) ||
      document.querySelector(`#jobs-body tr[data-job="${id}"]`)?.dataset.status !== 'DEAD', RETRY, { timeout: STEP_WAIT });
    await page.click(`#jobs-body tr[data-job="${DISCARD}"] button[data-action="discard"]`);
    await page.waitForFunction((id) => !document.querySelector(`#jobs-body tr[data-job="${id}"]`), DISCARD, { timeout: STEP_WAIT });
    await page.selectOption('#filter-status', '');
    await page.waitForSelector(`#jobs-body tr[data-job="${RETRY}"][data-status="COMPLETED"]`, { timeout: RUN_WAIT });
    emit('completed', { rows: await jobRows(page), counts: await counts(page), outcome: await page.textContent('#outcome'),
      detailStatus: (await page.evaluate(detailFacts)).Status,
      dialogs });
    await page.screenshot({ path: join(SHOTS, 'jobs-console.png'), fullPage: true });
    result.accessibility.push(...await accessibility(page, 'the queue after the retry'));

    // 4. The keyboard focus stays where it was through a refresh (which rebuilds the tables);
    // "older than job #" lists only older jobs.
    await page.focus(`#jobs-body tr[data-job="${RETRY}"] input[type="checkbox"]`);
    const updated = await page.textContent('#updated');
    const row = await page.$(`#jobs-body tr[data-job="${RETRY}"]`);
    await page.waitForFunction((old) => !old.isConnected, row, { timeout: STEP_WAIT }); // rebuilt
    await page.waitForFunction((u) => document.getElementById('updated').textContent !== u, updated, { timeout: STEP_WAIT });
    emit('focus', { focused: await page.evaluate(() => document.activeElement?.dataset.focusKey ?? document.activeElement?.tagName) });
    await page.fill('#filter-before', RETRY);
    await page.dispatchEvent('#filter-before', 'change');
    await page.waitForFunction((id) => document.getElementById('shown').textContent.includes(`older than #${id}`) &&
      !document.querySelector(`#jobs-body tr[data-job="${id}"]`), RETRY, { timeout: STEP_WAIT });
    emit('older', { rows: await jobRows(page) });

    // 5. Pause a kind from the kinds table, then resume it.
    await page.click(`#kinds-body tr[data-kind="${PAUSE}"] button[data-action="pause"]`);
    await page.waitForSelector(`#kinds-body tr[data-kind="${PAUSE}"][data-paused="true"]`, { timeout: STEP_WAIT });
    emit('paused', { kinds: await kindRows(page), outcome: await page.textContent('#kinds-outcome'), dialogs });
    result.accessibility.push(...await accessibility(page, 'the queue with a kind paused'));
    await page.click(`#kinds-body tr[data-kind="${PAUSE}"] button[data-action="resume"]`);
    await page.waitForSelector(`#kinds-body tr[data-kind="${PAUSE}"][data-paused="false"]`, { timeout: STEP_WAIT });
    emit('resumed', { kinds: await kindRows(page), outcome: await page.textContent('#kinds-outcome') });

    result.problems = problems;
    result.notice = await page.evaluate(() => {
      const n = document.getElementById('notice');
      return n.hidden ? '' : n.textContent.trim();
    });
    emit('done', result);
  });
}

run('jobs.mjs', main);
