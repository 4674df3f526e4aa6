// The player page in a real browser: Debian's Chromium (/usr/bin/chromium) driven by
// playwright-core, headless. Run by cmd/api/player_e2e_test.go, which starts the server, reads
// the events this script prints (one JSON object a line on stdout) and checks the database.
//
//   PLAYHEAD_URL    the server, http://127.0.0.1:port
//   PLAYHEAD_TOKEN  a member's token (passed to the pages once, as #token=…)
//   PLAYHEAD_VIDEO  the MP4 to upload through the page
//   PLAYHEAD_TITLE  its title
//   PLAYHEAD_SHOTS  where to save the screenshots (a temporary folder; docs/img for `make screenshots`)
//   CHROMIUM        the browser, /usr/bin/chromium unless set
//
// Events: uploaded, checkpoint (≥ 10 s played), closed (the page was closed and its pagehide
// report arrived), home (the item as the home page lists it), resumed, done (everything, and
// the second close), polled (a second upload followed by polling while the event stream is
// refused). Any failure: an "error" event, and exit status 1.
//
// Timeouts only bound how long a step may wait before the script gives up.

import { join } from 'node:path';

import { emit, env, run, sleep, withBrowser } from './harness.mjs';

const BASE = env('PLAYHEAD_URL');
const TOKEN = env('PLAYHEAD_TOKEN');
const VIDEO = env('PLAYHEAD_VIDEO');
const TITLE = env('PLAYHEAD_TITLE', 'Test pattern');
const SHOTS = env('PLAYHEAD_SHOTS');

const ENCODE_WAIT = 120_000; // upload → READY
const PLAY_WAIT = 60_000; // a playback milestone
const ARRIVE_WAIT = 10_000; // a pagehide report reaching the server
const QUIET_MS = 2_000; // no report for this long before a page is closed

// mediaFetches records where the browser fetched the video's files from: the origins of its
// playlists, segments and thumbnails, and any answer that was not a success.
const mediaFetches = { playlist: new Set(), segment: new Set(), thumbnail: new Set(), failed: [] };

// watchPage records what a page reports: position PUTs, console errors, uncaught exceptions,
// and the media files it fetched (mediaFetches).
function watchPage(page, problems) {
  const name = () => new URL(page.url()).pathname;
  const puts = [];
  page.on('response', (res) => {
    const u = new URL(res.url());
    const kind = { '.m3u8': 'playlist', '.ts': 'segment', '.mp4': 'segment', '.jpg': 'thumbnail' }[u.pathname.slice(u.pathname.lastIndexOf('.'))];
    if (!kind) return;
    mediaFetches[kind].add(u.origin);
    if (res.status() >= 400) mediaFetches.failed.push(`${res.status()} ${u.origin}${u.pathname}`);
  });
  page.on('request', (req) => {
    if (req.method() === 'PUT' && /\/v1\/playback\/\d+$/.test(req.url())) {
      let ms = null;
      try {
        ms = JSON.parse(req.postData() || '{}').position_ms;
      } catch {
        // recorded as null
      }
      puts.push({ at: Date.now(), ms });
    }
  });
  page.on('console', (msg) => {
    if (msg.type() === 'error') problems.push(`${name()}: console error: ${msg.text()}`);
  });
  page.on('pageerror', (err) => problems.push(`${name()}: uncaught exception: ${err.message}`));
  return puts;
}

// pageState reads what the page shows about the video and its errors. resumedAt is where
// playback first began: the start of the first range the video played, which the browser
// records as it plays. The page's own mark (data-resumed-at, currentTime when "playing" is
// handled) comes later by however long the busy page took to run the handler: 2.2 s once
// under a load average of 12, which failed the 1 s check of the resume point.
const pageState = (page) => page.evaluate(() => {
  const v = document.getElementById('video');
  const notice = document.getElementById('notice');
  let resumedAt = null;
  if (v && v.dataset.resumedAt !== undefined) resumedAt = v.played.length ? v.played.start(0) : Number(v.dataset.resumedAt);
  return {
    currentTime: v ? v.currentTime : null,
    paused: v ? v.paused : null,
    engine: v ? v.dataset.engine || '' : '',
    resumedAt,
    resumeMS: v && v.dataset.resumeMs !== undefined ? Number(v.dataset.resumeMs) : null,
    fatal: v ? v.dataset.fatal || '' : '',
    notice: notice && !notice.hidden ? `${notice.dataset.kind}: ${notice.textContent.trim()}` : '',
  };
});

// failIfBroken throws when the page shows an error or hls.js had a fatal one.
async function failIfBroken(page, what) {
  const s = await pageState(page);
  if (s.fatal || s.notice.startsWith('error')) {
    throw new Error(`${what}: the page shows an error (fatal: ${s.fatal || 'none'}; notice: ${s.notice || 'none'})`);
  }
  return s;
}

// playedFor waits until the video has played seconds past where it first played.
async function playedFor(page, seconds) {
  await page.waitForFunction((s) => {
    const v = document.getElementById('video');
    if (v.dataset.fatal) return true; // failIfBroken reports it
    return v.dataset.resumedAt !== undefined && !v.paused && v.currentTime >= Number(v.dataset.resumedAt) + s;
  }, seconds, { timeout: PLAY_WAIT, polling: 100 });
  return failIfBroken(page, `after ${seconds} s of playback`);
}

// closeQuietly closes the page at least QUIET_MS after its last position report, so the
// position the server holds afterwards can only have come from the page's pagehide report.
async function closeQuietly(page, puts) {
  for (;;) {
    const lastAt = puts.length ? puts[puts.length - 1].at : 0;
    if (Date.now() - lastAt >= QUIET_MS) break;
    await sleep(100);
  }
  const s = await failIfBroken(page, 'before closing the page');
  const lastPut = puts.length ? puts[puts.length - 1].ms : null;
  const reports = puts.length;
  await page.close();
  return { currentTimeMS: Math.round(s.currentTime * 1000), lastPutMS: lastPut, reportsBeforeClose: reports };
}

// arrived polls GET /v1/playback/{id} until the server holds a position past after (the
// closed page's pagehide report), and returns it.
async function arrived(mediaID, afterMS) {
  const deadline = Date.now() + ARRIVE_WAIT;
  let last = null;
  while (Date.now() < deadline) {
    const res = await fetch(`${BASE}/v1/playback/${mediaID}`, { headers: { Authorization: `Bearer ${TOKEN}` } });
    if (res.ok) {
      last = (await res.json()).position_ms;
      if (last > afterMS) return last;
    }
    await sleep(100);
  }
  throw new Error(`no position past ${afterMS} ms reached the server within ${ARRIVE_WAIT} ms of closing the page (it holds ${last})`);
}

async function main() {
  const problems = [];
  await withBrowser({ args: ['--autoplay-policy=no-user-gesture-required', '--mute-audio'], viewport: { width: 1280, height: 800 } }, async (context) => {
    const result = { browser: context.browser() ? context.browser().version() : '' };

    // 1. Upload through the home page, follow it to READY, and watch it.
    let page = await context.newPage();
    let puts = watchPage(page, problems);
    await page.goto(`${BASE}/#token=${encodeURIComponent(TOKEN)}`);
    await page.waitForSelector('#main:not([hidden])');
    result.tokenLeftInURL = page.url().includes('token=');
    await page.waitForSelector('#empty:not([hidden])');
    await page.setInputFiles('#file', VIDEO);
    await page.fill('#title', TITLE);
    // While the video encodes, the page learns its status from the event stream: no request
    // for the media's status is made.
    const uploadRequests = [];
    page.on('request', (req) => {
      const u = new URL(req.url());
      if (req.method() === 'GET' && (u.pathname === '/v1/events' || /^\/v1\/media\/\d+$/.test(u.pathname))) {
        uploadRequests.push({ path: u.pathname, bearer: (req.headers().authorization || '').startsWith('Bearer ') });
      }
    });
    const uploadStart = Date.now();
    await page.click('#upload-button');
    await page.waitForFunction(() => ['READY', 'FAILED', 'ERROR'].includes(document.getElementById('upload-status').dataset.status),
      null, { timeout: ENCODE_WAIT, polling: 100 });
    const upload = await page.evaluate(() => ({
      status: document.getElementById('upload-status').dataset.status,
      text: document.getElementById('upload-status').textContent,
      bar: document.getElementById('upload-bar').getAttribute('aria-valuenow'),
      href: document.getElementById('upload-watch').getAttribute('href'),
      via: document.getElementById('upload-status').dataset.via,
    }));
    if (upload.status !== 'READY') throw new Error(`upload ended ${upload.status}: ${upload.text}`);
    const mediaID = Number(upload.href.split('/').pop());
    result.upload = { ...upload, mediaID, seconds: (Date.now() - uploadStart) / 1000 };
    const streams = uploadRequests.filter((r) => r.path === '/v1/events');
    emit('uploaded', { media_id: mediaID, upload_bar: Number(upload.bar), via: upload.via,
      status_gets: uploadRequests.filter((r) => r.path !== '/v1/events').length,
      event_streams: streams.length, event_streams_with_token: streams.filter((r) => r.bearer).length });

    await Promise.all([page.waitForURL(`**/watch/${mediaID}`), page.click('#upload-watch')]);
    puts.length = 0;
    let s = await playedFor(page, 10);
    result.first = { engine: s.engine, resumedAtMS: Math.round(s.resumedAt * 1000), resumeMS: s.resumeMS };
    emit('checkpoint', { media_id: mediaID, current_time_ms: Math.round(s.currentTime * 1000),
      played_ms: Math.round((s.currentTime - s.resumedAt) * 1000), engine: s.engine });

    // 2. Close the page: its pagehide report is the position the server keeps.
    const firstClose = await closeQuietly(page, puts);
    const stored = await arrived(mediaID, firstClose.lastPutMS ?? -1);
    result.firstClose = { ...firstClose, storedMS: stored };
    emit('closed', { media_id: mediaID, current_time_ms: firstClose.currentTimeMS, last_put_ms: firstClose.lastPutMS, stored_ms: stored });

    // 3. The home page lists it with its progress.
    page = await context.newPage();
    watchPage(page, problems);
    // The list's items carry their thumbnails: the page asks for no media item by id.
    const apiGets = [];
    page.on('request', (req) => {
      const u = new URL(req.url());
      if (req.method() === 'GET' && u.pathname.startsWith('/v1/')) apiGets.push(u.pathname);
    });
    await page.goto(`${BASE}/#token=${encodeURIComponent(TOKEN)}`);
    const card = `.item[data-media-id="${mediaID}"]`;
    await page.waitForSelector(`${card} img`);
    await page.waitForFunction((sel) => {
      const img = document.querySelector(`${sel} img`);
      return img && img.complete && img.naturalWidth > 0;
    }, card, { timeout: 10_000 });
    result.home = await page.evaluate((sel) => {
      const li = document.querySelector(sel);
      return {
        items: document.querySelectorAll('.item').length,
        title: li.querySelector('.item-title').textContent,
        progress: Number(li.dataset.progress),
        barWidth: li.querySelector('.progress span').style.width,
        facts: li.querySelector('.item-body p').textContent,
        thumbnailWidth: li.querySelector('img').naturalWidth,
      };
    }, card);
    result.home.mediaGets = apiGets.filter((p) => /^\/v1\/media\/\d+$/.test(p)).length;
    result.home.playbackGets = apiGets.filter((p) => p === '/v1/playback').length;
    await failIfBroken(page, 'home page');
    await page.setViewportSize({ width: 1280, height: 640 }); // one item: less empty space
    await page.screenshot({ path: join(SHOTS, 'player-home.png') });
    emit('home', { media_id: mediaID, ...result.home });
    await page.close();

    // 4. Reopen the player: it resumes where the server says.
    page = await context.newPage();
    puts = watchPage(page, problems);
    const opened = page.waitForResponse((r) => r.request().method() === 'POST' && r.url().endsWith(`/v1/playback/${mediaID}`));
    await page.goto(`${BASE}/watch/${mediaID}#token=${encodeURIComponent(TOKEN)}`);
    const openAnswer = await (await opened).json();
    s = await playedFor(page, 0.5);
    result.second = { engine: s.engine, resumePointMS: openAnswer.position_ms, resumedAtMS: Math.round(s.resumedAt * 1000) };
    emit('resumed', { media_id: mediaID, stored_ms: stored, resume_point_ms: openAnswer.position_ms,
      resumed_at_ms: result.second.resumedAtMS });
    // The screenshot shows the resumed player once a periodic report (past the seek's) was saved.
    await page.waitForFunction(() => {
      const v = document.getElementById('video');
      const saved = Number(document.getElementById('saved').dataset.positionMs || -1);
      return v.dataset.fatal || saved >= Number(v.dataset.resumedAt) * 1000 + 3000;
    }, null, { timeout: PLAY_WAIT, polling: 100 });
    s = await playedFor(page, 3);
    await page.screenshot({ path: join(SHOTS, 'player-watch.png') });
    result.second.playedMS = Math.round((s.currentTime - s.resumedAt) * 1000);

    // 5. Close it again: the test stops the server gracefully and reads this position.
    const secondClose = await closeQuietly(page, puts);
    result.secondClose = { ...secondClose, storedMS: await arrived(mediaID, secondClose.lastPutMS ?? -1) };

    // 6. When the event stream fails, the page polls the status instead. This page's console
    // is not watched: the refused stream is logged there by the browser.
    page = await context.newPage();
    await page.route('**/v1/events', (route) => route.abort('failed'));
    const statusGets = [];
    page.on('request', (req) => {
      if (req.method() === 'GET' && /\/v1\/media\/\d+$/.test(new URL(req.url()).pathname)) statusGets.push(req.url());
    });
    await page.goto(`${BASE}/#token=${encodeURIComponent(TOKEN)}`);
    await page.waitForSelector('#main:not([hidden])');
    await page.setInputFiles('#file', VIDEO);
    await page.fill('#title', `${TITLE} (polled)`);
    await page.click('#upload-button');
    await page.waitForFunction(() => ['READY', 'FAILED', 'ERROR'].includes(document.getElementById('upload-status').dataset.status),
      null, { timeout: ENCODE_WAIT, polling: 100 });
    const polled = await page.evaluate(() => ({
      status: document.getElementById('upload-status').dataset.status,
      via: document.getElementById('upload-status').dataset.via,
      href: document.getElementById('upload-watch').getAttribute('href'),
    }));
    emit('polled', { media_id: Number((polled.href || '').split('/').pop()), status: polled.status, via: polled.via,
      status_gets: statusGets.length });
    await page.close();

    result.problems = problems;
    result.media = {
      playlistOrigins: [...mediaFetches.playlist], segmentOrigins: [...mediaFetches.segment],
      thumbnailOrigins: [...mediaFetches.thumbnail], failed: mediaFetches.failed,
    };
    result.cookies = (await context.cookies()).map((c) => c.name);
    emit('done', result);
  });
}

run('player.mjs', main);
