// The player SDK (sdk/js) on an integrator's page served from another origin than Playhead's
// API (PLAYHEAD_PAGE, a second loopback port of the Go test; PLAYHEAD_URL is the API), with the
// player PLAYHEAD_PLAYER (native, hls.js, video.js, shaka). It plays, pauses, seeks while
// paused, plays on and closes the page while playing, printing the positions the SDK saved and
// the element's last currentTime; the Go test then reads the stored position and answers
// "reopen" on stdin, and the script opens the page again and prints where it resumed.
//
// Chromium's policy would stop a page from reading Playhead's answers if the CORS headers were
// wrong, so every saved position here crossed origins; the one sent on pagehide is a keepalive
// PUT with Authorization (a preflighted request), which only the stored position shows.

import { createInterface } from 'node:readline';
import { emit, env, run, withBrowser } from './harness.mjs';

const PAGE = env('PLAYHEAD_PAGE');
const API = env('PLAYHEAD_URL');
const TOKEN = env('PLAYHEAD_TOKEN');
const MEDIA = env('PLAYHEAD_MEDIA');
const PLAYER = env('PLAYHEAD_PLAYER');
const WAIT = { timeout: 120_000 };

const pageURL = `${PAGE}/page.html?${new URLSearchParams({ api: API, token: TOKEN, media: MEDIA, player: PLAYER })}`;

// playing waits until the element plays (it fired 'playing') past `past` seconds, or the page
// failed.
async function playing(page, past) {
  await page.waitForFunction((s) => window.sdk.fatal || (window.sdk.startedAt >= 0 && window.video && !window.video.paused &&
    window.video.readyState >= 3 && window.video.currentTime > s), past, WAIT);
  const fatal = await page.evaluate(() => window.sdk.fatal);
  if (fatal) throw new Error(`${PLAYER}: ${fatal}`);
}

// savedHere waits until the SDK saved the element's current position.
async function savedHere(page) {
  await page.waitForFunction(() => window.sdk.saved.at(-1) === Math.round(window.video.currentTime * 1000), null, WAIT);
}

run('sdk.mjs', () => withBrowser({ args: ['--autoplay-policy=no-user-gesture-required'] }, async (context) => {
  const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  const cors = [];
  context.on('console', (m) => { if (m.type() === 'error') console.error(`[page] ${m.text()}`); });
  let page = await context.newPage();
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') console.error(`[page] ${m.text()}`); });
  // Requests to the API that failed (a CORS refusal among them); a media element cancels its
  // own range requests of files as it plays, which is no failure.
  page.on('requestfailed', (r) => { if (r.url().includes('/v1/')) cors.push(`${r.method()} ${r.url()}: ${r.failure().errorText}`); });
  await page.goto(pageURL);
  await playing(page, 1.5);
  await page.evaluate(() => window.video.pause());
  await savedHere(page);
  const paused = await page.evaluate(() => window.video.currentTime);
  await page.evaluate(() => { window.video.currentTime = 6; });
  await savedHere(page);
  await page.evaluate(() => window.video.play());
  await playing(page, 7);
  // The page closes while playing: only the pagehide report can carry this position.
  const last = await page.evaluate(() => window.video.currentTime);
  const before = await page.evaluate(() => ({ saved: window.sdk.saved, errors: window.sdk.errors, tokenCalls: window.sdk.tokenCalls }));
  await page.close({ runBeforeUnload: true });
  emit('closed', { paused, last, ...before, failed: cors });
  await lines.next(); // "reopen": the Go test read the stored position

  page = await context.newPage();
  await page.goto(pageURL);
  await playing(page, 0);
  const again = await page.evaluate(() => ({ resume: window.sdk.resume, startedAt: window.sdk.startedAt, errors: window.sdk.errors }));
  emit('reopened', again);
  await page.close();
}));
