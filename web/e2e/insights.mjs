// The Insights page in a real browser: Debian's Chromium (/usr/bin/chromium) driven by
// playwright-core, headless. Run by cmd/api/insights_page_e2e_test.go, which starts the
// server, writes viewers' watched ranges and a course's students, waits for the periodic
// rollup, and reads the events this script prints (one JSON object a line on stdout).
//
//   PLAYHEAD_URL         the server, http://127.0.0.1:port
//   PLAYHEAD_TOKEN       the owner's token (passed to the page once, as #token=…)
//   PLAYHEAD_MEDIA       the media whose audience to show, with its retention curve
//   PLAYHEAD_SMALL_MEDIA a media with too few viewers for a curve
//   PLAYHEAD_COLLECTION  the collection whose funnel to show
//   PLAYHEAD_SHOTS       where to save the screenshot
//   CHROMIUM             the browser, /usr/bin/chromium unless set
//
// Events: media (the figures, the retention table and note, whether the chart was drawn, the
// playback quality and the renditions),
// small (the same for the media without a curve), course (the funnel table and its chart),
// done (axe-core's violations, problems). Any failure: an "error" event, and exit status 1.
// A step waits for what it needs as long as it takes (timeout 0): the Go test's -timeout
// bounds the run.

import { join } from 'node:path';

import { accessibility, emit, env, run, withBrowser } from './harness.mjs';

const BASE = env('PLAYHEAD_URL');
const TOKEN = env('PLAYHEAD_TOKEN');
const MEDIA = env('PLAYHEAD_MEDIA');
const SMALL_MEDIA = env('PLAYHEAD_SMALL_MEDIA');
const COLLECTION = env('PLAYHEAD_COLLECTION');
const SHOTS = env('PLAYHEAD_SHOTS');

const STEP_WAIT = 0;

// drawn reports whether Chart.js drew on the canvas: a chart instance bound to it with data
// (each series' length and values), and pixels that are not all transparent.
const drawn = (page, id) => page.evaluate((canvasID) => {
  const canvas = document.getElementById(canvasID);
  const chart = window.Chart?.getChart(canvas);
  if (!chart) return { chart: false };
  const { data } = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height);
  let painted = 0;
  for (let i = 3; i < data.length; i += 4) if (data[i] > 0) painted++;
  const series = chart.data.datasets.map((d) => d.data);
  return { chart: true, type: chart.config.type, points: series.map((d) => d.length), values: series, painted };
}, id);

// mediaView is what the page shows of a media: its title, figures, retention table and note,
// and whether the chart and the table are on view.
const mediaView = async (page) => ({
  title: await page.textContent('#media-title'),
  figures: await page.$$eval('#media-figures dd', (dds) => Object.fromEntries(dds.map((dd) => [dd.dataset.figure, dd.textContent]))),
  retention: await page.$$eval('#retention-body tr', (trs) => trs.map((tr) => tr.querySelector('td').textContent)),
  note: await page.textContent('#retention-note'),
  curveShown: await page.isVisible('#retention-chart') && await page.isVisible('#retention-table'),
  quality: await page.$$eval('#quality-figures dd', (dds) => Object.fromEntries(dds.map((dd) => [dd.dataset.quality, dd.textContent]))),
  renditions: await page.$$eval('#renditions-body tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('th, td')].map((c) => c.textContent))),
  chart: await drawn(page, 'retention-chart'),
});

async function main() {
  const problems = [];
  await withBrowser({}, async (context) => {
    const result = {};
    const page = await context.newPage();
    page.on('console', (msg) => {
      if (msg.type() === 'error') problems.push(`console error: ${msg.text()}`);
    });
    page.on('pageerror', (err) => problems.push(`uncaught exception: ${err.message}`));

    // 1. A media's audience, from the address.
    await page.goto(`${BASE}/insights?media=${MEDIA}#token=${encodeURIComponent(TOKEN)}`);
    await page.waitForSelector('#media:not([hidden]) #retention-body tr', { state: 'attached', timeout: STEP_WAIT }); // in a closed details
    await page.waitForFunction(() => window.Chart?.getChart(document.getElementById('retention-chart')), null, { timeout: STEP_WAIT });
    emit('media', await mediaView(page));

    // 2. A media with too few viewers for a curve: its figures and the note on why.
    await page.goto(`${BASE}/insights?media=${SMALL_MEDIA}`);
    await page.waitForSelector('#media:not([hidden])', { timeout: STEP_WAIT });
    emit('small', await mediaView(page));
    result.accessibility = await accessibility(page, 'a media without a curve');

    // 3. A collection's funnel, chosen with the form.
    await page.fill('#media-id', '');
    await page.fill('#collection-name', COLLECTION);
    await page.click('#choose button[type="submit"]');
    await page.waitForSelector('#course:not([hidden]) #funnel-body tr', { timeout: STEP_WAIT });
    await page.waitForFunction(() => window.Chart?.getChart(document.getElementById('funnel-chart')), null, { timeout: STEP_WAIT });
    emit('course', {
      title: await page.textContent('#course-title'),
      address: await page.evaluate(() => location.search),
      lessons: await page.$$eval('#funnel-body tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('th, td')].map((c) => c.textContent.trim()))),
      chart: await drawn(page, 'funnel-chart'),
    });
    result.accessibility.push(...await accessibility(page, 'the collection funnel'));

    // Both at once for the screenshot.
    await page.goto(`${BASE}/insights?media=${MEDIA}&collection=${encodeURIComponent(COLLECTION)}`);
    await page.waitForSelector('#course:not([hidden]) #funnel-body tr', { timeout: STEP_WAIT });
    await page.waitForSelector('#media:not([hidden]) #retention-body tr', { state: 'attached', timeout: STEP_WAIT }); // in a closed details
    await page.waitForFunction(() => ['retention-chart', 'funnel-chart'].every((id) => window.Chart?.getChart(document.getElementById(id))),
      null, { timeout: STEP_WAIT });
    result.accessibility.push(...await accessibility(page, 'a media and a collection'));
    await page.screenshot({ path: join(SHOTS, 'insights.png'), fullPage: true });

    result.problems = problems;
    result.notice = await page.evaluate(() => {
      const n = document.getElementById('notice');
      return n.hidden ? '' : n.textContent.trim();
    });
    emit('done', result);
  });
}

run('insights.mjs', main);
