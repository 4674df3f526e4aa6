// Watch while it encodes, in a real browser: Debian's Chromium driven by
// playwright-core, headless. Run by cmd/api/encoding_page_e2e_test.go, which uploads a video
// whose higher renditions it holds back, so that the page opens it while it still encodes.
//
//   PLAYHEAD_URL    the server, http://127.0.0.1:port
//   PLAYHEAD_TOKEN  the member's token (passed to the page once, as #token=…)
//   PLAYHEAD_MEDIA  the media id to watch
//   CHROMIUM        the browser, /usr/bin/chromium unless set
//
// Events: playing (the page plays the video while it encodes: the levels hls.js read from the
// master, the height on screen, the page's note), then the script waits for a line on its
// standard input (the test lets the rest of the encode go on), upgraded (the video is READY and
// the page plays its best rendition: the levels, the height on screen, where the video was),
// done (axe-core's violations, console errors, the notice). Any failure: an "error" event and
// exit status 1. Timeouts only bound how long a step may wait before the script gives up.

import { createInterface } from 'node:readline';

import { accessibility, emit, env, run, withBrowser } from './harness.mjs';

const BASE = env('PLAYHEAD_URL');
const TOKEN = env('PLAYHEAD_TOKEN');
const MEDIA = env('PLAYHEAD_MEDIA');

const STEP_WAIT = 90_000;

const state = (page) => page.evaluate(() => {
  const v = document.getElementById('video');
  const n = document.getElementById('notice');
  return {
    levels: (v.dataset.levels || '').split(',').filter(Boolean).map(Number),
    playingHeight: Number(v.dataset.playingHeight || 0), currentTime: v.currentTime, paused: v.paused,
    encoding: v.dataset.encoding || '', notice: n.hidden ? '' : n.textContent.trim(), noticeKind: n.dataset.kind || '',
  };
});

async function main() {
  const problems = [];
  const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  await withBrowser({ args: ['--autoplay-policy=no-user-gesture-required', '--mute-audio'] }, async (context) => {
    const page = await context.newPage();
    page.on('console', (msg) => { if (msg.type() === 'error') problems.push(`console error: ${msg.text()}`); });
    page.on('pageerror', (err) => problems.push(`uncaught exception: ${err.message}`));

    // 1. It plays what is encoded so far.
    await page.goto(`${BASE}/watch/${MEDIA}#token=${encodeURIComponent(TOKEN)}`);
    await page.waitForFunction(() => {
      const v = document.getElementById('video');
      return !v.paused && v.currentTime > 1 && Number(v.dataset.playingHeight) > 0;
    }, null, { timeout: STEP_WAIT });
    emit('playing', await state(page));
    const violations = await accessibility(page, 'the watch page while the video encodes');

    // 2. The test lets the other renditions encode; once READY the page plays the best one.
    const { done } = await lines.next();
    if (done) throw new Error('the test closed the script\'s input before letting the encode go on');
    await page.waitForFunction(() => {
      const v = document.getElementById('video');
      const levels = (v.dataset.levels || '').split(',').filter(Boolean).map(Number);
      return v.dataset.encoding === 'false' && levels.length > 1 && !v.paused &&
        Number(v.dataset.playingHeight) === Math.max(...levels);
    }, null, { timeout: STEP_WAIT, polling: 100 });
    emit('upgraded', await state(page));
    violations.push(...await accessibility(page, 'the watch page once the video is READY'));
    emit('done', { problems, accessibility: violations, notice: (await state(page)).notice });
  });
}

run('encoding.mjs', main);
