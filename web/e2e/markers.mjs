// The watch page's chapters and markers in a real browser: Debian's Chromium driven by
// playwright-core, headless. Run by cmd/api/markers_page_e2e_test.go, which uploads and encodes
// a video, sets its intro, credits and chapters, places it in a course before another lesson,
// reads the events this script prints (one JSON object a line on stdout) and checks them.
//
//   PLAYHEAD_URL         the server, http://127.0.0.1:port
//   PLAYHEAD_TOKEN       the member's token (passed to the page once, as #token=…)
//   PLAYHEAD_MEDIA       the media id to watch
//   PLAYHEAD_COLLECTION  the course the page is opened from
//   PLAYHEAD_SHOTS       where to save the screenshots (a temporary folder; docs/img for `make screenshots`)
//   CHROMIUM             the browser, /usr/bin/chromium unless set
//
// Events: chapters (the list's buttons and the seek bar's marks), skipped (where "Skip intro"
// took the video), chapter (where Enter on a chapter's button took it), next (the "Next lesson"
// link shown in the credits), done (axe-core's violations, console errors, the notice). Any
// failure: an "error" event, and exit status 1. Timeouts only bound how long a step may wait
// before the script gives up.

import { join } from 'node:path';

import { accessibility, emit, env, run, withBrowser } from './harness.mjs';

const BASE = env('PLAYHEAD_URL');
const TOKEN = env('PLAYHEAD_TOKEN');
const MEDIA = env('PLAYHEAD_MEDIA');
const COLLECTION = env('PLAYHEAD_COLLECTION');
const SHOTS = env('PLAYHEAD_SHOTS');

const STEP_WAIT = 60_000;

const currentTime = (page) => page.evaluate(() => document.getElementById('video').currentTime);

async function main() {
  const problems = [];
  await withBrowser({ args: ['--autoplay-policy=no-user-gesture-required', '--mute-audio'] }, async (context) => {
    const page = await context.newPage();
    page.on('console', (msg) => { if (msg.type() === 'error') problems.push(`console error: ${msg.text()}`); });
    page.on('pageerror', (err) => problems.push(`uncaught exception: ${err.message}`));

    // 1. The page plays from the course; in the intro, "Skip intro" shows, with the chapters.
    await page.goto(`${BASE}/watch/${MEDIA}?${new URLSearchParams({ collection: COLLECTION })}#token=${encodeURIComponent(TOKEN)}`);
    await page.waitForFunction(() => !document.getElementById('skip-intro').hidden && !document.getElementById('chapters-box').hidden,
      null, { timeout: STEP_WAIT, polling: 20 });
    // Paused where it is, so that the intro does not end before the click.
    await page.evaluate(() => document.getElementById('video').pause());
    await page.waitForFunction(() => document.querySelectorAll('#chapter-marks .chapter-mark').length > 0, null, { timeout: STEP_WAIT });
    emit('chapters', await page.evaluate(() => ({
      buttons: [...document.querySelectorAll('#chapters button')].map((b) => ({ text: b.textContent, startMs: Number(b.dataset.startMs) })),
      marks: [...document.querySelectorAll('#chapter-marks .chapter-mark')].map((m) => ({ time: Number(m.dataset.time), left: m.style.left })),
    })));
    const violations = await accessibility(page, 'the watch page in the intro');

    // 2. "Skip intro", found by its role and name, jumps to the intro's end.
    const before = await currentTime(page);
    await page.getByRole('button', { name: 'Skip intro' }).click();
    await page.waitForFunction(() => document.getElementById('skip-intro').hidden, null, { timeout: STEP_WAIT });
    emit('skipped', { before, currentTime: await currentTime(page) });

    // 3. The last chapter's button, focused and pressed with Enter, seeks to its start and plays.
    const last = page.locator('#chapters button').last();
    await last.focus();
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => !document.getElementById('video').paused, null, { timeout: STEP_WAIT });
    // The list marks the current chapter at each timeupdate: read it after the next one, which
    // comes after the seek (the video plays).
    await page.evaluate(() => new Promise((resolve) => document.getElementById('video').addEventListener('timeupdate', resolve, { once: true })));
    emit('chapter', { currentTime: await currentTime(page),
      current: await page.$eval('#chapters button[aria-current="true"]', (b) => b.dataset.startMs).catch(() => '') });

    // 4. Playing on into the credits: "Next lesson" shows, a link to the course's next lesson.
    await page.waitForFunction(() => !document.getElementById('next-lesson').hidden, null, { timeout: STEP_WAIT });
    await page.evaluate(() => document.getElementById('video').pause());
    const next = page.getByRole('link', { name: /^Next lesson/ });
    emit('next', { text: await next.textContent(), href: await next.getAttribute('href'), currentTime: await currentTime(page) });
    await page.screenshot({ path: join(SHOTS, 'watch-chapters.png') });
    violations.push(...await accessibility(page, 'the watch page in the credits'));

    emit('done', { problems, accessibility: violations,
      notice: await page.evaluate(() => (document.getElementById('notice').hidden ? '' : document.getElementById('notice-text').textContent)) });
  });
}

run('markers.mjs', main);
