// The player SDK (sdk/js) against a hostile or broken Playhead and an integrator's mistakes, in
// Chromium, on a page whose element is a stand-in (it plays nothing: the test sets its
// currentTime, readyState and paused, and fires its events) and whose API answers are the
// test's, by request interception. Each case prints {"event": "case", "name", "problems"}; the
// Go test (TestPlayerSDK_HostileInChromium) fails on any problem.

import { readFileSync } from 'node:fs';
import { emit, run, sleep, withBrowser } from './harness.mjs';

// localhost is a secure context (Web Locks); the API is on the page's origin (CORS is tested
// through the binary).
const ORIGIN = 'http://localhost:9';
const SDK = readFileSync(new URL('../../sdk/js/index.js', import.meta.url), 'utf8');

// The page's stand-ins: a media element that counts its listeners, and counts of the timers
// the page has running.
const PAGE = `<!doctype html><title>sdk hostile</title><script type="module">
class FakeElement extends EventTarget {
  currentTime = 0; paused = true; ended = false; seeking = false; readyState = 0; videoHeight = 0; error = null;
  #live = new Map(); // type and listener: the function registered
  get listeners() { return this.#live.size; }
  addEventListener(type, fn, opts) {
    const key = type + ':' + this.#id(fn);
    if (this.#live.has(key)) return;
    const once = opts && opts.once;
    const registered = once ? (e) => { this.#live.delete(key); fn(e); } : fn;
    this.#live.set(key, registered);
    super.addEventListener(type, registered, opts);
  }
  removeEventListener(type, fn) {
    const key = type + ':' + this.#id(fn);
    if (!this.#live.has(key)) return;
    super.removeEventListener(type, this.#live.get(key));
    this.#live.delete(key);
  }
  #ids = new WeakMap();
  #next = 0;
  #id(fn) { if (!this.#ids.has(fn)) this.#ids.set(fn, ++this.#next); return this.#ids.get(fn); }
  fire(type) { this.dispatchEvent(new Event(type)); }
}
const live = new Set();
const [st, si, ct, ci] = [setTimeout, setInterval, clearTimeout, clearInterval];
window.setTimeout = (fn, ms, ...a) => { const id = st(() => { live.delete(id); fn(...a); }, ms); live.add(id); window.timersSet++; return id; };
window.setInterval = (fn, ms, ...a) => { const id = si(fn, ms, ...a); live.add(id); return id; };
window.clearTimeout = (id) => { live.delete(id); ct(id); };
window.clearInterval = (id) => { live.delete(id); ci(id); };
window.timersSet = 0;
window.liveTimers = () => live.size;
window.FakeElement = FakeElement;
window.puts = [];
const realFetch = window.fetch;
window.fetch = (url, init = {}) => {
  if (init.method === 'PUT') window.puts.push({ ...JSON.parse(init.body), url: String(url) });
  return realFetch(url, init);
};
window.sdk = await import('/sdk/index.js');
window.ready = true;
</script>`;

run('sdk-hostile.mjs', () => withBrowser({}, async (context) => {
  // answer decides the answer to each request (by method, and the request), default 200
  // {"position_ms": 0} to an open and 204 to a PUT. The page logs the PUTs the SDK sends (window.puts).
  let answer = null;
  await context.route(`${ORIGIN}/**`, async (route) => {
    const req = route.request();
    const path = new URL(req.url()).pathname;
    if (path === '/page.html') return route.fulfill({ contentType: 'text/html', body: PAGE });
    if (path === '/sdk/index.js') return route.fulfill({ contentType: 'text/javascript', body: SDK });
    const a = answer && (await answer(req.method(), req));
    if (a) return route.fulfill(a);
    if (req.method() === 'POST') return route.fulfill({ status: 200, contentType: 'application/json', body: '{"position_ms": 0}' });
    return route.fulfill({ status: 204 });
  });

  // each runs one case on a new page: setup(page) attaches, then check returns its problems.
  const each = async (name, use) => {
    answer = null;
    const page = await context.newPage();
    const problems = [];
    page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
    page.on('console', (m) => {
      if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) problems.push(`console: ${m.text()}`);
    });
    await page.goto(`${ORIGIN}/page.html`);
    await page.waitForFunction(() => window.ready);
    await page.evaluate(() => localStorage.clear());
    await page.evaluate(() => {
      window.errors = [];
      window.video = new window.FakeElement();
      window.attachNow = (opts = {}) => window.sdk.attach(window.video, {
        baseUrl: '', mediaId: 7, getToken: () => 'token', onError: (e) => window.errors.push(`${e.name} ${e.status}: ${e.message}`), ...opts });
      // play plays from at, and waits until the session holds the media's lock (it reports).
      window.play = async (at) => {
        const v = window.video;
        v.readyState = 4; v.currentTime = at; v.paused = false; v.fire('play'); v.fire('playing');
        while (!(await navigator.locks.query()).held.length) await new Promise((r) => requestAnimationFrame(r));
      };
    });
    problems.push(...(await use(page)));
    emit('case', { name, problems });
    await page.close();
  };

  // A Retry-After of nothing or 0 (a proxy's), negative, or too large for a timer (536870912 s
  // is 125 × 2^32 ms, which a timer reads as 0), never makes a storm of reports or of timers.
  for (const retryAfter of ['', '0', '-3', '536870912']) {
    await each(`Retry-After "${retryAfter}"`, async (page) => {
      answer = (method) => method === 'PUT' && { status: 429, headers: { 'Retry-After': retryAfter }, body: '' };
      await page.evaluate(async () => {
        window.session = window.attachNow();
        await window.session.ready;
        await window.play(10);
        window.video.paused = true;
        window.video.fire('pause');
      });
      await page.waitForFunction(() => window.timersSet > 0);
      const before = await page.evaluate(() => window.timersSet);
      await sleep(1500); // what a storm would fill
      const after = await page.evaluate(() => window.timersSet);
      const sent = await puts(page);
      await page.evaluate(() => window.session.detach());
      const problems = [];
      // At most one a second: the first, and a retry each second.
      if (sent.length > 3) problems.push(`${sent.length} PUTs in 1.5 s after a 429 with Retry-After "${retryAfter}"`);
      if (after - before > 10) problems.push(`${after - before} timers set in 1.5 s after a 429 with Retry-After "${retryAfter}"`);
      return problems;
    });
  }

  // A Retry-After as an HTTP date, 8 s ahead: the next report waits for it (its own interval,
  // what an unreadable one gets, is 5 s), then goes.
  await each('Retry-After as an HTTP date', async (page) => {
    let refused = 0;
    answer = (method) => method === 'PUT' && !refused++ && {
      status: 429, headers: { 'Retry-After': new Date(Date.now() + 8000).toUTCString() }, body: '' };
    await page.evaluate(async () => {
      window.at = [];
      const realFetch = window.fetch;
      window.fetch = (url, init = {}) => { if (init.method === 'PUT') window.at.push(performance.now()); return realFetch(url, init); };
      window.session = window.attachNow();
      await window.session.ready;
      await window.play(70);
      window.video.paused = true;
      window.video.fire('pause');
    });
    await page.waitForFunction(() => window.at.length >= 2, null, { timeout: 60_000 });
    const at = await page.evaluate(() => window.at);
    await page.evaluate(() => window.session.detach());
    // The date has whole seconds: up to one less than 8 s.
    return at[1] - at[0] < 6500 ? [`the report after a 429 with Retry-After 8 s ahead as a date went ${Math.round(at[1] - at[0])} ms later`] : [];
  });

  // Detached while its open is in flight, the element playing: no report afterwards (not the
  // pending one either), no listener, timer or lock left.
  await each('detach during the open', async (page) => {
    let release;
    const held = new Promise((r) => { release = r; });
    answer = async (method) => {
      if (method !== 'POST') return null;
      await held;
      return { status: 200, contentType: 'application/json', body: '{"position_ms": 4000}' };
    };
    await page.evaluate(() => {
      localStorage.setItem('playhead:pending::7', JSON.stringify({ position_ms: 9000, at: Date.now() }));
      window.video.paused = false;
      window.session = window.attachNow();
      window.detached = window.session.detach();
    });
    release();
    await page.evaluate(() => Promise.all([window.detached, window.session.ready.catch(() => {})]));
    await page.evaluate(() => { window.play(12); window.video.fire('pause'); });
    return [...(await leftovers(page)), ...(await sentAny(page, 'after detach'))];
  });

  // Detached while a report is in flight, which then gets a 429: no retry afterwards.
  await each('detach during a report answered 429', async (page) => {
    let release;
    const held = new Promise((r) => { release = r; });
    await page.evaluate(async () => {
      window.session = window.attachNow();
      await window.session.ready;
      await window.play(20);
    });
    answer = async (method) => {
      if (method !== 'PUT') return null;
      await held;
      return { status: 429, headers: { 'Retry-After': '1' }, body: '' };
    };
    await page.evaluate(() => { window.video.paused = true; window.video.fire('pause'); });
    await page.waitForFunction(() => window.puts.length > 0);
    await page.evaluate(() => { window.detached = window.session.detach(); window.puts = []; });
    release();
    await page.evaluate(() => window.detached);
    await sleep(1500); // past the Retry-After
    return [...(await leftovers(page)), ...(await sentAny(page, 'after detach'))];
  });

  // The element's source replaced (video.src, hls.destroy()) and then detached: its position
  // is 0 with no media loaded, which is not where the member was in the old media.
  await each('source replaced, then detach', async (page) => {
    await page.evaluate(async () => {
      window.session = window.attachNow();
      await window.session.ready;
      await window.play(30);
      // The load algorithm, at once: no pause event, position 0, nothing loaded.
      window.video.currentTime = 0;
      window.video.readyState = 0;
      await window.session.detach();
    });
    return sentAny(page, 'for the old media');
  });

  // The source replaced while playing, and the next media loading: the interval reports stop
  // (its positions are not the old media's).
  await each('source replaced, the next loading', async (page) => {
    await page.evaluate(async () => {
      window.session = window.attachNow({ reportEveryMs: 100 });
      await window.session.ready;
      await window.play(30);
      window.video.currentTime = 0;
      window.video.readyState = 0;
      window.video.fire('emptied');
      window.video.readyState = 1;
      window.video.currentTime = 3;
      window.puts = [];
      await new Promise((r) => setTimeout(r, 500)); // five intervals
    });
    const problems = await sentAny(page, 'of the next media as the old one\'s');
    await page.evaluate(() => window.session.detach());
    return problems;
  });

  // The next media attached to the same element without a detach: the first session ends,
  // and only the next one reports (to its own media).
  await each('attach twice on one element', async (page) => {
    await page.evaluate(async () => {
      const first = window.attachNow({ reportEveryMs: 100 });
      await first.ready;
      await window.play(30);
      window.puts = [];
      const next = window.attachNow({ mediaId: 8, reportEveryMs: 100 });
      await next.ready;
      await window.play(5);
      while (window.puts.filter((p) => p.url.endsWith('/8')).length < 3) await new Promise((r) => setTimeout(r, 50));
      await next.detach();
    });
    return (await puts(page)).filter((p) => !p.url.endsWith('/v1/playback/8') && p.position_ms !== 30000)
      .map((p) => `a report to the first media after the next was attached: ${JSON.stringify(p)}`);
  });

  // A seek storm (scrubbing: 50 seeks in a row, paused): one report, where it settles.
  await each('seek storm', async (page) => {
    await page.evaluate(async () => {
      window.saved = [];
      window.session = window.attachNow({ onSaved: (ms) => window.saved.push(ms) });
      await window.session.ready;
      await window.play(10);
      window.video.paused = true;
      window.video.fire('pause');
      while (!window.saved.length) await new Promise((r) => setTimeout(r, 10));
      window.puts = [];
      for (let i = 1; i <= 50; i++) {
        window.video.currentTime = 10 + i;
        window.video.fire('seeking');
        window.video.fire('seeked');
        await new Promise((r) => setTimeout(r, 5));
      }
      while (!window.saved.includes(60000)) await new Promise((r) => setTimeout(r, 10));
      await window.session.detach();
    });
    const sent = await puts(page);
    return sent.length !== 1 ? [`${sent.length} reports of a seek storm: ${JSON.stringify(sent.map((p) => p.position_ms))}; want one, 60000`] : [];
  });

  // A paused video whose tab is hidden and shown again and again: its position went out at the
  // pause; hiding the tab sends nothing new.
  await each('paused, hidden again and again', async (page) => {
    await page.evaluate(async () => {
      let hidden = false;
      Object.defineProperty(document, 'visibilityState', { get: () => (hidden ? 'hidden' : 'visible') });
      window.saved = [];
      window.session = window.attachNow({ onSaved: (ms) => window.saved.push(ms) });
      await window.session.ready;
      await window.play(40);
      window.video.paused = true;
      window.video.fire('pause');
      while (!window.saved.length) await new Promise((r) => setTimeout(r, 10));
      window.puts = [];
      for (let i = 0; i < 3; i++) {
        hidden = true;
        document.dispatchEvent(new Event('visibilitychange'));
        await new Promise((r) => setTimeout(r, 1100)); // past the one-second merge of reports
        hidden = false;
        document.dispatchEvent(new Event('visibilitychange'));
      }
      await window.session.detach();
    });
    return sentAny(page, 'of a paused video');
  });

  // Stalls: a 'waiting' while seeking is no stall; a real one ends when the member pauses, so
  // the time paused (300 ms here) is not rebuffering, nor a seek out of a stall.
  await each('stalls, seeks and a paused stall', async (page) => {
    const got = await page.evaluate(async () => {
      const v = window.video;
      window.saved = [];
      const savedAt = async (ms) => { while (!window.saved.includes(ms)) await new Promise((r) => setTimeout(r, 10)); };
      window.session = window.attachNow({ onSaved: (ms) => window.saved.push(ms) });
      await window.session.ready;
      await window.play(10);
      v.fire('timeupdate');
      v.currentTime = 10.5; v.fire('timeupdate'); // the first frame
      v.seeking = true; v.fire('seeking'); v.fire('waiting');
      v.currentTime = 30; v.fire('timeupdate');
      v.seeking = false; v.fire('seeked');
      await savedAt(30000);
      const stallFrom = performance.now();
      v.fire('waiting');
      v.paused = true; v.fire('pause');
      const stalled = performance.now() - stallFrom;
      await new Promise((r) => setTimeout(r, 300)); // paused
      v.paused = false; v.fire('play'); v.fire('playing');
      v.currentTime = 30.5; v.fire('timeupdate');
      v.seeking = true; v.fire('seeking'); v.fire('waiting'); // a stall while seeking: none
      v.currentTime = 40; v.fire('timeupdate');
      v.seeking = false; v.fire('seeked');
      v.paused = true; v.fire('pause');
      await savedAt(40000);
      await window.session.detach();
      const sum = (k) => window.puts.reduce((n, p) => n + ((p.quality && p.quality[k]) || 0), 0);
      return { count: sum('rebuffer_count'), ms: sum('rebuffer_ms'), stalled };
    });
    const problems = [];
    if (got.count !== 1) problems.push(`${got.count} stalls reported; want 1 (a seek's 'waiting' is none)`);
    if (got.ms > got.stalled + 2) problems.push(`${got.ms} ms of rebuffering reported for a stall of ${got.stalled.toFixed(1)} ms then paused`);
    return problems;
  });

  // A thousand and one stalls in one interval (a report kept through a flaky network adds them
  // up): the report says 1 000, Playhead's bound, or it and every report after it would be
  // refused (this stand-in answers 422 as Playhead does).
  await each('more stalls than a report may say', async (page) => {
    answer = async (method, req) => method === 'PUT' && (JSON.parse(req.postData()).quality?.rebuffer_count > 1000)
      && { status: 422, contentType: 'application/json', body: '{"error": "quality.rebuffer_count must be an integer from 0 to 1000"}' };
    const got = await page.evaluate(async () => {
      const v = window.video;
      window.saved = [];
      window.session = window.attachNow({ onSaved: (ms) => window.saved.push(ms) });
      await window.session.ready;
      await window.play(10);
      v.fire('timeupdate');
      v.currentTime = 10.5; v.fire('timeupdate');
      for (let i = 0; i < 1001; i++) {
        v.fire('waiting');
        v.currentTime += 0.001; v.fire('timeupdate');
      }
      v.currentTime = 12; v.fire('timeupdate');
      v.paused = true; v.fire('pause');
      while (!window.saved.length && !window.errors.length) await new Promise((r) => setTimeout(r, 10));
      await window.session.detach();
      return { saved: window.saved, errors: window.errors };
    });
    return got.saved.includes(12000) ? [] : [`the report after 1 001 stalls was not accepted: ${JSON.stringify(got)}`];
  });


  // getToken throwing; a report answered by a proxy's HTML 502. Each is a PlayheadError for
  // onError (as index.d.ts types it), the open of JSON without fields resumes at 0, and the
  // refused report's position stays pending.
  await each('broken answers', async (page) => {
    const problems = [];
    answer = (method) => method === 'POST' && { status: 200, contentType: 'text/html', body: '<html>proxy</html>' };
    let got = await page.evaluate(() => window.attachNow().ready.then((r) => `resolved ${JSON.stringify(r)}`, (e) => `${e.name} ${e.status}`));
    if (got !== 'PlayheadError 0') problems.push(`an open answered with HTML: ${got}; want a PlayheadError`);
    answer = (method) => method === 'POST' && { status: 200, contentType: 'application/json', body: '{}' };
    got = await page.evaluate(() => window.attachNow().ready.then((r) => JSON.stringify(r), (e) => `${e.name}: ${e.message}`));
    if (got !== '{"positionMs":0,"finished":false}') problems.push(`an open answered {}: ${got}; want {"positionMs":0,"finished":false}`);
    answer = null;
    got = await page.evaluate(() => window.attachNow({ getToken: () => { throw new Error('no session'); } }).ready
      .then(() => 'resolved', (e) => `${e.name} ${e.status}`));
    if (got !== 'PlayheadError 0') problems.push(`getToken throwing: ${got}; want a PlayheadError`);
    answer = (method) => method === 'PUT' && { status: 502, contentType: 'text/html', body: '<html>Bad gateway</html>' };
    got = await page.evaluate(async () => {
      window.errors = [];
      const session = window.attachNow();
      await session.ready;
      await window.play(60);
      window.video.paused = true;
      window.video.fire('pause');
      while (!window.errors.length) await new Promise((r) => setTimeout(r, 10));
      await session.detach();
      return `${window.errors.join(', ')}; pending ${localStorage.getItem('playhead:pending::7') !== null}`;
    });
    if (!got.startsWith('PlayheadError 502') || !got.endsWith('pending true')) problems.push(`a report answered with an HTML 502: ${got}`);
    return problems;
  });

  // Back online with a position pending while the element has none (NaN: nothing loaded).
  await each('back online, nothing loaded', async (page) => {
    await page.evaluate(async () => {
      window.session = window.attachNow();
      await window.session.ready;
      await window.play(50);
      localStorage.setItem('playhead:pending::7', JSON.stringify({ position_ms: 50000, at: Date.now() }));
      window.video.currentTime = NaN;
      window.video.readyState = 0;
      window.puts = [];
      window.dispatchEvent(new Event('online'));
      await window.session.detach();
    });
    return sentAny(page, 'with nothing loaded');
  });
}));

const puts = (page) => page.evaluate(() => window.puts);

// sentAny is a problem for each PUT the page sent since window.puts was emptied.
async function sentAny(page, when) {
  return (await puts(page)).map((p) => `a report ${when}: ${JSON.stringify(p)}`);
}

// leftovers are the problems of a detached session: listeners on the element, timers, locks.
async function leftovers(page) {
  const left = await page.evaluate(async () => ({ listeners: window.video.listeners, timers: window.liveTimers(),
    locks: (await navigator.locks.query()).held.length }));
  return left.listeners || left.timers || left.locks
    ? [`after detach: ${left.listeners} listeners on the element, ${left.timers} timers, ${left.locks} locks held`] : [];
}
