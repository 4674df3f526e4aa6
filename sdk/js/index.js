// @playhead/player: reports a <video> element's position to Playhead, as the API expects a
// player to (docs/api/quickstart.md, "The rules a player keeps"). Any player that plays into a
// media element (the native element, hls.js, video.js, Shaka Player) needs nothing else:
//
//   import { attach } from '@playhead/player';
//   const session = attach(video, { baseUrl, mediaId, getToken });
//   // later: await session.detach();
//
// What it does: opens (POST /v1/playback/{id}) and seeks to the resume point unless the member
// finished the media; reports (PUT, {"position_ms"}) every 5 s while playing and on pause,
// on a seek once it settles, at the end, on pagehide and when the page is hidden (the last two
// with fetch's keepalive, so they outlive the page); waits out a 429 or 503's Retry-After and
// then sends the newest position; on a 401 asks getToken for a new token and retries once;
// keeps the last position not yet accepted in localStorage, one per media, and sends it when
// the browser is back online or at the next attach; and lets one tab report a media at a time
// (the Web Locks API: the tab that last started playing it).
//
// Each report also carries the playback quality of the interval ({"quality"}, off with
// quality: false): the session's time to first frame (once), the time played, the stalls
// ('waiting' while not seeking, until it plays, pauses or seeks) and their time, the
// rendition (the element's videoHeight) and a fatal error's MediaError code. Playhead adds
// them up per media for the audience.

const REPORT_EVERY_MS = 5000;
const SEEK_SETTLE_MS = 400;
const PENDING_PREFIX = 'playhead:pending:';
// A Retry-After is kept within these (ms): a proxy's 0 or empty one would otherwise resend at
// once for as long as it refuses, and one past a timer's range (24.8 days) fires at once.
const MIN_RETRY_MS = 1000;
const MAX_RETRY_MS = 3600 * 1000;
const ERRORS = [, 'aborted', 'network', 'decode', 'src_not_supported'];

// sessions holds each element's session: an element reports one media at a time.
const sessions = new WeakMap();

export function attach(video, options) {
  const { baseUrl = '', mediaId, getToken, collection } = options;
  const onSaved = options.onSaved || (() => {});
  const onError = options.onError || ((err) => console.warn('@playhead/player:', err));
  const every = options.reportEveryMs || REPORT_EVERY_MS;
  if (!Number.isSafeInteger(mediaId) || mediaId <= 0) throw new TypeError('mediaId must be a positive integer');
  if (typeof getToken !== 'function') throw new TypeError('getToken must be a function');
  // attach on an element that still reports (the next episode attached without a detach):
  // the earlier session ends first, or it would report the new media's positions as its own.
  if (sessions.has(video)) sessions.get(video).detach();
  const base = baseUrl.replace(/\/+$/, '');
  const playbackURL = `${base}/v1/playback/${mediaId}`;
  const pendingKey = `${PENDING_PREFIX}${base}:${mediaId}`;
  const lockName = `playhead:report:${base}:${mediaId}`;

  let token = null;
  let durationMS = 0;
  let started = false; // the resume point is applied: reports may go out
  let detached = false;
  let timer = 0;
  let seekTimer = 0;
  let retryTimer = 0;
  let backoffUntil = 0; // no report before this (performance.now()), from a Retry-After
  let last = { ms: -1, at: 0, keepalive: false }; // the last report sent
  let savedMS = -1; // the last position Playhead accepted
  let holding = !(typeof navigator !== 'undefined' && navigator.locks); // without Web Locks, every tab reports
  let releaseLock = null;
  let claiming = false; // a lock request is pending: one at a time
  let resumeMS = 0;

  // The quality of the interval since the last report: q the sums to send, asked when play
  // was asked for (0: not yet), stalledAt when a stall began (0: none), lastTime the
  // currentTime played up to.
  const measure = options.quality !== false;
  let q = {};
  let asked = 0;
  let startup = 0; // 0 waiting for the first frame, 1 measured, 2 sent
  let stalledAt = 0;
  let lastTime = -1;

  const storage = safeStorage();

  async function freshToken() {
    token = await getToken();
    return token;
  }

  // request sends one call with the token; a 401 gets a new token and one retry.
  async function request(method, url, body, keepalive) {
    for (let attempt = 0; ; attempt++) {
      if (token === null || attempt > 0) await freshToken();
      const headers = { Authorization: `Bearer ${token}` };
      const init = { method, headers, keepalive, cache: 'no-store', mode: 'cors' };
      if (body !== undefined) {
        headers['Content-Type'] = 'application/json';
        init.body = JSON.stringify(body);
      }
      const res = await fetch(url, init);
      if (res.status === 401 && attempt === 0) continue;
      return res;
    }
  }

  function readPending() {
    try {
      const p = JSON.parse(storage.getItem(pendingKey) || 'null');
      return p && Number.isSafeInteger(p.position_ms) && Number.isFinite(p.at) ? p : null;
    } catch {
      return null;
    }
  }

  function writePending(ms) {
    try {
      storage.setItem(pendingKey, JSON.stringify({ position_ms: ms, at: Date.now() }));
    } catch {
      // storage full or refused: the report still goes out
    }
  }

  function clearPending(ms) {
    const p = readPending();
    if (p && p.position_ms === ms) storage.removeItem(pendingKey);
  }

  function add(name, n) {
    q[name] = (q[name] || 0) + n;
  }

  // endStall ends a stall's time: the element plays again, or the member paused or seeked out
  // of it (a paused or seeking element is not rebuffering, however long it waits).
  function endStall() {
    if (!stalledAt) return;
    add('rebuffer_ms', performance.now() - stalledAt);
    stalledAt = 0;
  }

  // takeQuality hands the interval's quality to a report (none when there is nothing to say),
  // giveBack returns it when the report was not accepted, for the next one.
  function takeQuality() {
    if (!measure) return undefined;
    const now = performance.now();
    if (stalledAt) {
      add('rebuffer_ms', Math.round(now - stalledAt));
      stalledAt = now;
    }
    if (video.videoHeight > 0) q.rendition_height = video.videoHeight;
    const taken = q;
    q = {};
    if (taken.startup_ms !== undefined) startup = 2;
    for (const k of ['played_ms', 'rebuffer_ms', 'startup_ms']) if (k in taken) taken[k] = Math.min(600000, Math.round(taken[k]));
    // Within Playhead's bounds, or every report after it would be refused (422) with them.
    if (taken.rebuffer_count > 1000) taken.rebuffer_count = 1000;
    return Object.keys(taken).length ? taken : undefined;
  }

  function giveBack(taken) {
    if (!taken) return;
    for (const k of ['played_ms', 'rebuffer_count', 'rebuffer_ms']) if (taken[k]) add(k, taken[k]);
    for (const k of ['startup_ms', 'error']) if (k in taken && !(k in q)) q[k] = taken[k];
    if ('startup_ms' in taken) startup = 1;
  }

  // send PUTs ms; it stays pending (localStorage) until a 204 answers it.
  async function send(ms, keepalive) {
    writePending(ms);
    const wait = backoffUntil - performance.now();
    if (wait > 0) {
      scheduleRetry(wait);
      return;
    }
    const quality = takeQuality();
    let res;
    try {
      res = await request('PUT', playbackURL, quality ? { position_ms: ms, quality } : { position_ms: ms }, keepalive);
    } catch (err) {
      // Offline, or the page is going away: the pending position goes out when back online.
      giveBack(quality);
      if (!keepalive) onError(new PlayheadError(0, `the report did not reach Playhead (${err.message})`));
      return;
    }
    if (res.status !== 204) giveBack(quality);
    if (res.status === 204) {
      savedMS = ms;
      clearPending(ms);
      onSaved(ms);
      return;
    }
    if (res.status === 429 || res.status === 503) {
      // Playhead always sends Retry-After; a proxy's answer may not, or send one out of range.
      const wait = retryAfterMs(res.headers.get('Retry-After'), every);
      backoffUntil = performance.now() + wait;
      scheduleRetry(wait);
      return;
    }
    if (res.status >= 400 && res.status < 500) storage.removeItem(pendingKey); // refused: never accepted later
    onError(await errorOf(res));
  }

  // scheduleRetry sends the newest position (the pending one) once the back-off is over.
  function scheduleRetry(ms) {
    clearTimeout(retryTimer);
    if (detached) return;
    retryTimer = setTimeout(() => {
      retryTimer = 0;
      const p = readPending();
      if (p && !detached) send(p.position_ms, false);
    }, ms);
  }

  function position() {
    let ms = Math.max(0, Math.round(video.currentTime * 1000));
    if (durationMS > 0) ms = Math.min(ms, durationMS);
    return ms;
  }

  // loaded: the element has a position of the media. Once its source is replaced (video.src,
  // a player's destroy), it reads 0 with nothing loaded (readyState HAVE_NOTHING), which is
  // not where the member was; a live stream's or an unloaded element's time is not finite.
  function loaded() {
    return video.readyState >= 1 && Number.isFinite(video.currentTime);
  }

  // report sends the current position. None before the resume point is applied (a 0 would
  // overwrite it), and none from a tab that does not hold the media's lock.
  function report(reason, keepalive = false) {
    if (!started || !holding || !loaded()) return;
    const ms = position();
    const now = performance.now();
    // pagehide and visibilitychange come together when a tab closes, a millisecond of playing
    // apart: one report is enough. A paused element whose position Playhead accepted has
    // nothing new to say: hiding its tab, again and again, sends nothing.
    const leaving = keepalive && last.keepalive && now - last.at < 1000;
    const same = (ms === last.ms && now - last.at < 1000) || (video.paused && ms === savedMS && reason !== 'error');
    if (leaving || (reason !== 'interval' && same)) return;
    last = { ms, at: now, keepalive };
    send(ms, keepalive);
  }

  // claim takes the media's lock from any other tab: the tab where the member last played
  // or seeked reports, the others stop (their request ends, stolen). One request at a time, so
  // that the end of an older one never marks a newer one's lock as lost.
  function claim() {
    if (holding || claiming || typeof navigator === 'undefined' || !navigator.locks) return;
    claiming = true;
    // Granted after a detach: let go at once.
    navigator.locks.request(lockName, { steal: true }, () => detached ? undefined : new Promise((resolve) => {
      claiming = false;
      holding = true;
      releaseLock = resolve;
    })).catch(() => {}).finally(() => {
      claiming = false;
      holding = false;
      releaseLock = null;
    });
  }

  function release() {
    if (releaseLock) releaseLock();
  }

  const on = {
    play: () => {
      if (!asked) asked = performance.now();
    },
    waiting: () => {
      if (startup && !video.seeking && !stalledAt) {
        stalledAt = performance.now();
        add('rebuffer_count', 1);
      }
    },
    // The first frame is the first currentTime that moves after play was asked for; a stall
    // ends when it moves again. Only the time moved while playing, not a seek, counts played.
    timeupdate: () => {
      const t = video.currentTime;
      const now = performance.now();
      if (lastTime >= 0 && t > lastTime && t - lastTime < 2 && !video.seeking) {
        add('played_ms', (t - lastTime) * 1000);
        if (!startup && asked) {
          startup = 1;
          q.startup_ms = now - asked;
        }
        endStall();
      }
      lastTime = t;
    },
    // A fatal error goes out at once, with the startup time if the session never played.
    error: () => {
      if (!measure || !video.error) return;
      q.error = ERRORS[video.error.code] || 'other';
      if (!startup) {
        startup = 1;
        q.startup_ms = performance.now() - (asked || attachedAt);
      }
      if (started) report('error');
      else if (holding) send(resumeMS, false);
    },
    playing: () => {
      claim();
      if (!timer) timer = setInterval(() => report('interval'), every);
    },
    pause: () => {
      endStall();
      stopTimer();
      if (!video.ended) report('pause');
    },
    ended: () => {
      endStall();
      stopTimer();
      report('ended');
    },
    seeking: () => {
      endStall();
      if (started) claim();
    },
    // The source is replaced: no interval reports until the element plays again.
    emptied: stopTimer,
    // Scrubbing seeks many times in a row: report where it settles.
    seeked: () => {
      clearTimeout(seekTimer);
      seekTimer = setTimeout(() => report('seek'), SEEK_SETTLE_MS);
    },
  };
  const onPageHide = () => report('pagehide', true);
  const onVisibility = () => {
    if (document.visibilityState === 'hidden') report('hidden', true);
  };
  // Back online: the newest position goes, from the tab that reports; another tab's reports
  // are newer than what this one kept.
  const onOnline = () => {
    if (!readPending() || !started || !loaded()) return;
    if (holding) send(position(), false);
    else storage.removeItem(pendingKey);
  };

  function stopTimer() {
    clearInterval(timer);
    timer = 0;
  }

  // applyResume seeks to the resume point once the element knows its duration, and lets
  // reports start when it is there. Its listeners go at detach if they have not fired.
  const resumeListeners = [];
  function once(name, fn) {
    resumeListeners.push([name, fn]);
    video.addEventListener(name, fn, { once: true });
  }
  function applyResume(seconds) {
    const start = () => { started = true; };
    const go = () => {
      if (seconds > 0 && Math.abs(video.currentTime - seconds) > 0.5) {
        once('seeked', start);
        video.currentTime = seconds;
      } else {
        started = true;
      }
    };
    if (video.readyState >= 1) go();
    else once('loadedmetadata', go);
    // A player that starts at the resume point itself (hls.js's startPosition) plays from it.
    once('playing', start);
  }

  // open flushes a position left pending by an earlier page, unless the server holds a newer
  // one (another device reported since), then opens and applies the resume point.
  async function open() {
    const pending = readPending();
    const from = collection ? `?${new URLSearchParams({ collection })}` : '';
    let res = await request('POST', playbackURL + from, undefined, false);
    if (!res.ok) throw await errorOf(res);
    let resume = await res.json();
    // Detached meanwhile: nothing more is sent or applied.
    if (detached) return { positionMs: 0, finished: Boolean(resume.finished) };
    if (pending && !(Date.parse(resume.event_time) > pending.at)) {
      const put = await request('PUT', playbackURL, { position_ms: pending.position_ms }, false);
      if (put.status === 204 || (put.status >= 400 && put.status < 500 && put.status !== 429)) storage.removeItem(pendingKey);
      if (put.status === 204) {
        res = await request('POST', playbackURL + from, undefined, false);
        if (!res.ok) throw await errorOf(res);
        resume = await res.json();
      }
    } else if (pending) {
      storage.removeItem(pendingKey);
    }
    durationMS = Number.isFinite(options.durationMs) ? options.durationMs : 0;
    const finished = Boolean(resume.finished);
    const positionMs = !finished && Number.isSafeInteger(resume.position_ms) && resume.position_ms > 0 ? resume.position_ms : 0;
    resumeMS = positionMs;
    if (!detached) applyResume(positionMs / 1000);
    return { positionMs, finished };
  }

  const attachedAt = performance.now();
  for (const [name, fn] of Object.entries(on)) video.addEventListener(name, fn);
  window.addEventListener('pagehide', onPageHide);
  window.addEventListener('online', onOnline);
  document.addEventListener('visibilitychange', onVisibility);
  if (!video.paused) {
    asked = attachedAt;
    on.playing();
  }

  // What fails the open is a PlayheadError, as index.d.ts says: getToken's own error, or an
  // answer that is not Playhead's JSON (a proxy's HTML page with a 200), included.
  const ready = open().catch((err) => {
    throw err instanceof PlayheadError ? err : new PlayheadError(0, `the open failed (${err && err.message})`);
  });
  ready.catch(onError);
  const session = {
    ready,
    async detach() {
      if (detached) return;
      report('detach');
      detached = true;
      if (sessions.get(video) === session) sessions.delete(video);
      stopTimer();
      clearTimeout(seekTimer);
      clearTimeout(retryTimer);
      for (const [name, fn] of [...Object.entries(on), ...resumeListeners]) video.removeEventListener(name, fn);
      window.removeEventListener('pagehide', onPageHide);
      window.removeEventListener('online', onOnline);
      document.removeEventListener('visibilitychange', onVisibility);
      release();
    },
  };
  sessions.set(video, session);
  return session;
}

/** An answer of Playhead's that is not a success, or a request that did not reach it (status 0). */
export class PlayheadError extends Error {
  constructor(status, message) {
    super(message);
    this.name = 'PlayheadError';
    this.status = status;
  }
}

// retryAfterMs reads a Retry-After (seconds, or an HTTP date) within MIN_RETRY_MS and
// MAX_RETRY_MS; without one (a proxy's answer), a report's interval.
function retryAfterMs(header, every) {
  const value = (header || '').trim();
  let ms = every;
  if (/^\d+$/.test(value)) ms = Number(value) * 1000;
  else if (/ GMT$/.test(value) && Number.isFinite(Date.parse(value))) ms = Date.parse(value) - Date.now();
  return Math.min(MAX_RETRY_MS, Math.max(MIN_RETRY_MS, ms));
}

async function errorOf(res) {
  let message = res.statusText || 'request failed';
  try {
    const data = await res.json();
    if (data && data.error) message = data.error;
  } catch {
    // not JSON: the status text stands
  }
  return new PlayheadError(res.status, message);
}

// safeStorage is localStorage, or a stand-in where it is refused (private modes, sandboxed
// frames): the pending position then lives only as long as the page.
function safeStorage() {
  try {
    const s = window.localStorage;
    s.getItem(PENDING_PREFIX);
    return s;
  } catch {
    const m = new Map();
    return { getItem: (k) => m.get(k) ?? null, setItem: (k, v) => m.set(k, String(v)), removeItem: (k) => m.delete(k) };
  }
}
