// The watch page's own controls in a real browser: Debian's Chromium driven by
// playwright-core, headless. Run by cmd/api/watch_page_e2e_test.go, which uploads and encodes a
// video (fMP4) with captions, reads the events this script prints (one JSON object a line on
// stdout) and checks them.
//
//   PLAYHEAD_URL      the server, http://127.0.0.1:port
//   PLAYHEAD_TOKEN    the member's token (passed to the page once, as #token=…)
//   PLAYHEAD_MEDIA    the media id to watch
//   PLAYHEAD_CAPTION  JSON {lang}: the language of the media's captions to switch on
//   PLAYHEAD_SHOTS    where to save the screenshots (a temporary folder; docs/img for `make screenshots`)
//   CHROMIUM          the browser, /usr/bin/chromium unless set
//
// Events: playing (the page started the video: engine, resume point, storyboard cues loaded),
// hover (the preview the seek bar showed under the mouse, and whether its sprite loaded),
// keyboard (the preview after → on the focused seek bar, and where the video went), captions
// (the menu's choices, the cue showing at its time), ended (the video played to its end), done
// (axe-core's violations, console errors, the notice). Any failure: an "error" event, and exit
// status 1. Timeouts only bound how long a step may wait before the script gives up.

import { join } from 'node:path';

import { accessibility, emit, env, run, sleep, withBrowser } from './harness.mjs';

const BASE = env('PLAYHEAD_URL');
const TOKEN = env('PLAYHEAD_TOKEN');
const MEDIA = env('PLAYHEAD_MEDIA');
const CAPTION = JSON.parse(env('PLAYHEAD_CAPTION'));
const SHOTS = env('PLAYHEAD_SHOTS');

const STEP_WAIT = 60_000;

// playButton reads the play button's name and the icon it shows.
const playButton = (page) => page.$eval('#play', (b) => ({
  label: b.getAttribute('aria-label'), icon: [...b.querySelectorAll('svg')].filter((s) => !s.hasAttribute('hidden')).map((s) => s.dataset.icon).join(','),
}));

// preview reads the seek bar's preview as the page shows it.
const preview = (page) => page.evaluate(() => {
  const p = document.getElementById('preview');
  const img = document.getElementById('preview-image');
  const box = img.getBoundingClientRect();
  return {
    visible: !p.hidden, time: Number(p.dataset.time), sprite: p.dataset.sprite || '', tile: p.dataset.tile || '',
    text: document.getElementById('preview-time').textContent, width: Math.round(box.width), height: Math.round(box.height),
    currentTime: document.getElementById('video').currentTime,
  };
});

async function main() {
  const problems = [];
  const sprites = new Map(); // sprite path → status
  await withBrowser({ args: ['--autoplay-policy=no-user-gesture-required', '--mute-audio'] }, async (context) => {
    const page = await context.newPage();
    page.on('console', (msg) => { if (msg.type() === 'error') problems.push(`console error: ${msg.text()}`); });
    page.on('pageerror', (err) => problems.push(`uncaught exception: ${err.message}`));
    page.on('response', (res) => {
      const u = new URL(res.url());
      if (/sprite_\d+\.jpg$/.test(u.pathname)) sprites.set(u.pathname, res.status());
    });

    // 1. The player starts, with its storyboard.
    await page.goto(`${BASE}/watch/${MEDIA}#token=${encodeURIComponent(TOKEN)}`);
    await page.waitForFunction(() => {
      const v = document.getElementById('video');
      return v.dataset.resumedAt !== undefined && !v.paused && Number(v.dataset.storyboardCues) > 0;
    }, null, { timeout: STEP_WAIT });
    emit('playing', { ...await page.evaluate(() => {
      const v = document.getElementById('video');
      return { engine: v.dataset.engine, resumedAt: Number(v.dataset.resumedAt), storyboardCues: Number(v.dataset.storyboardCues),
        controls: !document.getElementById('controls').hidden, duration: v.duration };
    }), playButton: await playButton(page) });

    // 2. Hovering the seek bar at 60 % shows that moment's tile.
    const bar = await page.locator('#seek').boundingBox();
    await page.mouse.move(bar.x + bar.width * 0.6, bar.y + bar.height / 2);
    await page.waitForFunction(() => !document.getElementById('preview').hidden && document.getElementById('preview').dataset.sprite,
      null, { timeout: STEP_WAIT });
    const hover = await preview(page);
    const spritePath = new URL(hover.sprite).pathname;
    for (const giveUp = Date.now() + STEP_WAIT; !sprites.has(spritePath) && Date.now() < giveUp;) await sleep(50);
    hover.spriteStatus = sprites.get(spritePath) || 0;
    emit('hover', { ...hover, fraction: 0.6 });
    await page.screenshot({ path: join(SHOTS, 'watch-storyboard.png') });
    const violations = await accessibility(page, 'the watch page with a preview');

    // 3. The keyboard: → on the focused seek bar jumps 5 s and shows where.
    await page.mouse.move(5, 5);
    await page.waitForFunction(() => document.getElementById('preview').hidden, null, { timeout: STEP_WAIT });
    await page.focus('#seek');
    const before = await page.evaluate(() => document.getElementById('video').currentTime);
    await page.keyboard.press('ArrowRight');
    await page.waitForFunction(() => !document.getElementById('preview').hidden, null, { timeout: STEP_WAIT });
    emit('keyboard', { before, ...(await preview(page)) });

    // 4. Captions: the menu lists the media's captions; chosen, its cue shows at its time.
    await page.waitForSelector('#captions-box:not([hidden])', { timeout: STEP_WAIT });
    const options = await page.$$eval('#captions option', (os) => os.map((o) => ({ value: o.value, label: o.textContent })));
    const choice = options.find((o) => o.label.includes(`(${CAPTION.lang})`));
    if (!choice) throw new Error(`no captions option for ${CAPTION.lang}: ${JSON.stringify(options)}`);
    await page.selectOption('#captions', choice.value);
    await page.focus('#seek');
    await page.keyboard.press('Home'); // back to 0, playing on towards the cue
    const shown = await page.waitForFunction(() => {
      const v = document.getElementById('video');
      for (const tr of v.textTracks) {
        if (tr.mode !== 'showing' || !tr.activeCues) continue;
        // shown: the cue as the browser renders it (its payload's references decoded)
        for (const c of tr.activeCues) {
          return { text: c.text, shown: c.getCueAsHTML().textContent, start: c.startTime, end: c.endTime, at: v.currentTime, lang: tr.language };
        }
      }
      return null;
    }, null, { timeout: STEP_WAIT, polling: 50 });
    emit('captions', { options, chosen: await page.evaluate(() => document.getElementById('video').dataset.captions), cue: await shown.jsonValue() });
    await page.screenshot({ path: join(SHOTS, 'watch-captions.png') });
    violations.push(...await accessibility(page, 'the watch page with captions'));

    // 5. On to the end, playing.
    await page.waitForFunction(() => document.getElementById('video').ended, null, { timeout: STEP_WAIT });
    emit('ended', { ...await page.evaluate(() => {
      const v = document.getElementById('video');
      return { currentTime: v.currentTime, duration: v.duration, fatal: v.dataset.fatal || '' };
    }), playButton: await playButton(page) });

    emit('done', {
      problems, accessibility: violations,
      notice: await page.evaluate(() => {
        const n = document.getElementById('notice');
        return n.hidden ? '' : n.textContent.trim();
      }),
    });
  });
}

run('watch.mjs', main);
