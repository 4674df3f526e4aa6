// The integrator's page of web/e2e/sdk.mjs: plays a Playhead media with the player named in
// ?player= (native, hls.js, video.js, shaka) and reports through the player SDK, served from
// this page's origin, to Playhead's API on another origin (?api=). What happened is kept in
// window.sdk for the script to read.

import { attach } from '/sdk/index.js';

const q = new URLSearchParams(location.search);
const api = q.get('api');
const token = q.get('token');
const mediaId = Number(q.get('media'));
const player = q.get('player');
// startedAt is where the element first played: the resume point applied, or not.
const state = { saved: [], errors: [], tokenCalls: 0, resume: null, engine: player, fatal: '', startedAt: -1 };
window.sdk = state;

// The request bodies the SDK sent (the script reads their quality).
state.bodies = [];

// Every request the SDK sends to the API, timed by the page's own clock.
state.requests = [];
const pageFetch = window.fetch;
window.fetch = async (url, init = {}) => {
  const r = { method: init.method || 'GET', url: String(url), start: performance.now(), end: 0, status: 0 };
  if (r.url.startsWith(api)) state.requests.push(r);
  if (r.url.startsWith(api) && init.body) state.bodies.push(String(init.body));
  try {
    const res = await pageFetch(url, init);
    r.status = res.status;
    return res;
  } finally {
    r.end = performance.now();
  }
};

async function main() {
  const res = await fetch(`${api}/v1/media/${mediaId}`, { headers: { Authorization: `Bearer ${token}` } });
  if (!res.ok) throw new Error(`GET /v1/media/${mediaId}: ${res.status}`);
  const m = await res.json();
  const hlsURL = new URL(m.hls_url, api).href;
  let video = document.getElementById('video');
  const opts = {
    baseUrl: api,
    mediaId,
    durationMs: m.duration_ms,
    getToken: () => {
      state.tokenCalls++;
      return token;
    },
    onSaved: (ms) => state.saved.push(ms),
    onError: (err) => state.errors.push(`${err.status} ${err.message}`),
  };
  let session;
  const attachTo = (element) => {
    element.addEventListener('playing', () => { if (state.startedAt < 0) state.startedAt = element.currentTime; });
    return attach(element, opts);
  };
  switch (player) {
    case 'native': {
      // Chromium plays no HLS natively: the element plays the lowest rendition's fragmented
      // MP4 file itself (the file an fMP4 playlist's byte ranges are read from). The source is
      // set once the open answered, so that the element starts at the resume point.
      session = attachTo(video);
      await session.ready;
      const master = await (await fetch(hlsURL)).text();
      const variant = new URL(master.split('\n').find((l) => l && !l.startsWith('#')), hlsURL).href;
      const playlist = await (await fetch(variant)).text();
      const map = /#EXT-X-MAP:URI="([^"]+)"/.exec(playlist);
      if (!map) throw new Error(`no EXT-X-MAP in ${playlist.slice(0, 200)}`);
      video.src = new URL(map[1], variant).href;
      break;
    }
    case 'hls.js': {
      session = attachTo(video);
      const { positionMs } = await session.ready;
      // ?buffer= keeps hls.js's buffer that short (seconds), so that held segments stall it.
      const buffer = Number(q.get('buffer')) || undefined;
      const hls = new window.Hls({ startPosition: positionMs / 1000, maxBufferLength: buffer, maxMaxBufferLength: buffer });
      hls.on(window.Hls.Events.ERROR, (_e, data) => { if (data.fatal) state.fatal = data.details; });
      hls.loadSource(hlsURL);
      hls.attachMedia(video);
      break;
    }
    case 'video.js': {
      const p = window.videojs(video, { muted: true });
      video = p.tech({ IWillNotUseThisInPlugins: true }).el();
      session = attachTo(video);
      p.on('error', () => { state.fatal = String(p.error() && p.error().message); });
      p.src({ src: hlsURL, type: 'application/x-mpegURL' });
      break;
    }
    case 'shaka': {
      window.shaka.polyfill.installAll();
      session = attachTo(video);
      const { positionMs } = await session.ready;
      const p = new window.shaka.Player();
      await p.attach(video);
      p.addEventListener('error', (e) => { state.fatal = String(e.detail && e.detail.code); });
      await p.load(hlsURL, positionMs / 1000);
      break;
    }
    default:
      throw new Error(`no player ${player}`);
  }
  state.resume = await session.ready;
  window.video = video;
  video.muted = true;
  await video.play();
}

main().catch((err) => { state.fatal = String(err && err.message ? err.message : err); });
