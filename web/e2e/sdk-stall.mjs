// A scripted stall for the player SDK's quality reports: the integrator's page of sdk.mjs
// (another origin than the API) plays a Playhead media with hls.js, its buffer kept to 2 s;
// once it plays past 2 s, every request for the media's encoded files is held by request
// interception until the element has waited (a 'waiting' event) and 3 s more have passed on
// the page's clock, then let through. The member pauses past the stall, which sends a report.
// The script prints the report bodies the SDK sent; the Go test reads the stall in the
// audience rollup of that media.

import { emit, env, run, sleep, withBrowser } from './harness.mjs';

const PAGE = env('PLAYHEAD_PAGE');
const API = env('PLAYHEAD_URL');
const TOKEN = env('PLAYHEAD_TOKEN');
const MEDIA = env('PLAYHEAD_MEDIA');
const WAIT = { timeout: 120_000 };
const pageURL = `${PAGE}/page.html?${new URLSearchParams({ api: API, token: TOKEN, media: MEDIA, player: 'hls.js', buffer: '2' })}`;

run('sdk-stall.mjs', () => withBrowser({ args: ['--autoplay-policy=no-user-gesture-required'] }, async (context) => {
  let holding = false;
  const held = [];
  // The encoded files (segments and byte ranges of a rendition's file), not the playlists.
  await context.route((url) => url.href.startsWith(`${API}/objects/hls/`) && !url.pathname.endsWith('.m3u8'), (route) => {
    if (!holding) return route.fallback();
    held.push(route);
  });
  const page = await context.newPage();
  page.on('console', (m) => { if (m.type() === 'error') console.error(`[page] ${m.text()}`); });
  await page.addInitScript(() => {
    window.waited = 0;
    document.addEventListener('waiting', () => { window.waited++; }, true);
  });
  await page.goto(pageURL);
  await page.waitForFunction(() => window.sdk.fatal || (window.video && !window.video.paused && window.video.currentTime > 2), null, WAIT);
  const fatal = await page.evaluate(() => window.sdk.fatal);
  if (fatal) throw new Error(fatal);

  holding = true;
  const before = await page.evaluate(() => window.waited);
  await page.waitForFunction((n) => window.waited > n, before, WAIT);
  const stalledAt = await page.evaluate(() => window.video.currentTime);
  await sleep(3_000);
  holding = false;
  for (const route of held.splice(0)) await route.fallback();
  await page.waitForFunction((t) => window.video.currentTime > t + 1, stalledAt, WAIT);
  await page.evaluate(() => window.video.pause());
  await page.waitForFunction(() => window.sdk.saved.at(-1) === Math.round(window.video.currentTime * 1000), null, WAIT);
  emit('stalled', { stalledAt, bodies: await page.evaluate(() => window.sdk.bodies.filter((b) => b.includes('quality'))) });
}));
