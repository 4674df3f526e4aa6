// The player SDK (sdk/js) against faults, on the integrator's page of sdk.mjs (another origin
// than the API) with hls.js, by request interception: a 401 (a new token, the report retried
// once), a 429 with Retry-After: 3 (no report before 3 s, by the page's own clock), the network
// cut for 30 s (the last position arrives once it is back), a position kept across a reload
// while offline, and two tabs on one media (one reports). Each part prints an event; the Go
// test checks them and the stored positions.

import { emit, env, run, sleep, withBrowser } from './harness.mjs';

const PAGE = env('PLAYHEAD_PAGE');
const API = env('PLAYHEAD_URL');
const TOKEN = env('PLAYHEAD_TOKEN');
const MEDIA = env('PLAYHEAD_MEDIA');
const WAIT = { timeout: 120_000 };
const pageURL = `${PAGE}/page.html?${new URLSearchParams({ api: API, token: TOKEN, media: MEDIA, player: 'hls.js' })}`;
const playbackURL = `${API}/v1/playback/${MEDIA}`;

// refuse answers the next PUT of the position with status and headers, as Playhead would
// (CORS headers included, so that the page may read it), and lets the others through.
async function refuseNextPut(context, status, headers = {}) {
  let done = false;
  await context.route(playbackURL, async (route) => {
    if (done || route.request().method() !== 'PUT') return route.fallback();
    done = true;
    await route.fulfill({ status, contentType: 'application/json', body: JSON.stringify({ error: `refused with ${status}` }),
      headers: { 'Access-Control-Allow-Origin': PAGE, 'Access-Control-Expose-Headers': 'Retry-After', Vary: 'Origin', ...headers } });
  });
}

async function open(context, page = null) {
  if (!page) {
    page = await context.newPage();
    page.on('console', (m) => { if (m.type() === 'error') console.error(`[page] ${m.text()}`); });
  }
  await page.goto(pageURL);
  await playing(page, 0.5);
  return page;
}

async function playing(page, past) {
  await page.waitForFunction((s) => window.sdk.fatal || (window.sdk.startedAt >= 0 && !window.video.paused &&
    window.video.readyState >= 3 && window.video.currentTime > s), past, WAIT);
  const fatal = await page.evaluate(() => window.sdk.fatal);
  if (fatal) throw new Error(fatal);
}

const puts = (page) => page.evaluate(() => window.sdk.requests.filter((r) => r.method === 'PUT'));

run('sdk-faults.mjs', () => withBrowser({ args: ['--autoplay-policy=no-user-gesture-required'] }, async (context) => {
  // A 401: getToken once more, and the same report again.
  let page = await open(context);
  await refuseNextPut(context, 401);
  await page.evaluate(() => window.video.pause());
  await page.waitForFunction(() => window.sdk.saved.at(-1) === Math.round(window.video.currentTime * 1000), null, WAIT);
  emit('unauthorized', { tokenCalls: await page.evaluate(() => window.sdk.tokenCalls), puts: await puts(page) });
  await context.unrouteAll();

  // A 429 with Retry-After: 3 on the seek's report; the next report waits, then goes.
  await refuseNextPut(context, 429, { 'Retry-After': '3' });
  await page.evaluate(() => { window.video.currentTime = 4; });
  await page.waitForFunction(() => window.sdk.saved.at(-1) === 4000, null, WAIT);
  emit('rate_limited', { puts: await puts(page) });
  await context.unrouteAll();

  // The network cut for 30 s while playing; the member pauses meanwhile. Back online, the
  // paused position arrives.
  await page.evaluate(() => window.video.play());
  await playing(page, 5);
  await context.setOffline(true);
  await sleep(2_000);
  await page.evaluate(() => window.video.pause());
  const pausedOffline = await page.evaluate(() => Math.round(window.video.currentTime * 1000));
  await sleep(28_000);
  const savedOffline = await page.evaluate(() => window.sdk.saved.length);
  await context.setOffline(false);
  await page.waitForFunction((n) => window.sdk.saved.length > n, savedOffline, WAIT);
  emit('offline', { pausedOffline, saved: await page.evaluate(() => window.sdk.saved) });

  // Playhead out of reach again (every request to it cut): a seek's report fails, the tab
  // leaves the page (its keepalive report fails too); the page opened again in the tab, with
  // Playhead back, sends the kept position before it opens. (Closing the tab instead, with
  // its requests cut, ended the whole headless Chromium in some runs.)
  await context.route(`${API}/**`, (route) => route.abort('internetdisconnected'));
  const failed = await page.evaluate(() => window.sdk.errors.length);
  await page.evaluate(() => { window.video.currentTime = 9; });
  await page.waitForFunction((n) => window.sdk.errors.length > n, failed, WAIT);
  const kept = await page.evaluate((k) => localStorage.getItem(k), `playhead:pending:${API}:${MEDIA}`);
  await page.goto('about:blank');
  await context.unrouteAll();
  page = await open(context, page);
  emit('reloaded', { kept, resume: await page.evaluate(() => window.sdk.resume) });
  await page.evaluate(() => window.video.pause());

  // Two tabs on the media: the one that last started playing reports, the other stops.
  const other = await open(context);
  await page.evaluate(() => window.video.play());
  await playing(page, 10);
  const since = await other.evaluate(() => performance.now());
  const from = (await puts(page)).length;
  await page.waitForFunction((n) => window.sdk.requests.filter((r) => r.method === 'PUT').length >= n + 2, from, WAIT);
  const otherPuts = (await puts(other)).filter((r) => r.start > since);
  emit('two_tabs', { reporterPuts: (await puts(page)).length - from, otherPuts: otherPuts.length, otherPlaying: await other.evaluate(() => !window.video.paused) });
}));
