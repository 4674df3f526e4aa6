// The player page. Its position reports are the player SDK's (sdk/js, @playhead/player, served
// as ./player-sdk.mjs), as on any integrator's page: it opens (POST /v1/playback/{id}
// [?collection=…], the collection the page was opened from: /watch/{id}?collection=…, from an
// up-next item or a course page, which decides what comes next once the video is watched),
// gives the resume point the page starts at, and reports while playing and when the page goes.
// HLS plays through hls.js (Media Source Extensions) where it can, and natively where the
// browser plays HLS itself and has no MSE. A video still encoding plays as soon as its first
// rendition is done (the API's "playable"): its master playlist lists the renditions finished
// so far, and hls.js reads a master once, so the page polls the video and, once it is READY,
// loads the full master again from where the video is (upgrade). Errors from the API or the video are shown, never
// swallowed; hls.js's non-fatal errors (it recovers from them itself) are only logged.
// The media's chapters are listed under the player (a button each, which seeks to its start)
// and marked on the seek bar; during its intro a "Skip intro" button jumps to the intro's end,
// and during its credits, when the page was opened from a course with a lesson after this
// one, a "Next lesson" link leads to it.

import { api, APIError, authHeader, clearNotice, clock, courseHref, describe, fail, initSession, showNotice, watchHref } from './common.mjs';
import { mountControls, parseStoryboard } from './controls.mjs';
import { attach as attachReports } from './player-sdk.mjs';

const STATUS_POLL_MS = 2000;
const HLS_WORKER = '/static/vendor/hls.worker.js';

const video = document.getElementById('video');
const overlay = document.getElementById('overlay');
const overlayText = document.getElementById('overlay-text');
const title = document.getElementById('title');
const facts = document.getElementById('facts');
const saved = document.getElementById('saved');
const controlsRoot = document.getElementById('controls');

const mediaID = Number(location.pathname.split('/')[2]);
// fromCollection is the collection the player was opened from, or null.
const fromCollection = new URLSearchParams(location.search).get('collection');

let durationMS = 0; // the API's duration
let started = false; // the video played from its resume point
let hls = null;
let recoveries = 0;
let renewals = 0; // fresh links asked for since a fragment last loaded
let retrying = false; // a 'Trouble loading' notice is up
let controls = null; // the player's controls (controls.mjs), once the media is ready

function setOverlay(text) {
  overlayText.textContent = text || '';
  overlay.hidden = !text;
}

function videoError() {
  const e = video.error;
  if (!e) return;
  const kinds = { 1: 'aborted', 2: 'network error', 3: 'decoding error', 4: 'format not supported' };
  showNotice(`The video cannot be played: ${kinds[e.code] || 'error'}${e.message ? ` (${e.message})` : ''}`);
}

// hlsError handles hls.js's ERROR event: non-fatal errors (a buffer hole it jumps, a segment it
// re-fetches) are only logged; a fatal media error is recovered from once; any other fatal error
// stops playback and is shown.
function hlsError(_event, data) {
  const status = data.response && data.response.code ? ` (HTTP ${data.response.code})` : '';
  if (!data.fatal) {
    console.debug('hls.js (non-fatal):', data.type, data.details);
    // hls.js aborting its own load (a seek, a track switch) is no trouble.
    if (data.details === window.Hls.ErrorDetails.INTERNAL_ABORTED) return;
    // hls.js retries a segment or playlist that failed to load; say so while it does, since the
    // video may stall meanwhile. Media errors (buffer holes it jumps) are not worth a word.
    if (data.type === window.Hls.ErrorTypes.NETWORK_ERROR) {
      showNotice(`Trouble loading the video: ${data.details}${status}. Retrying…`, 'warn');
      retrying = true;
    }
    return;
  }
  if (data.type === window.Hls.ErrorTypes.MEDIA_ERROR && recoveries === 0) {
    recoveries++;
    console.warn('hls.js: fatal media error, recovering:', data.details);
    hls.recoverMediaError();
    return;
  }
  if (data.type === window.Hls.ErrorTypes.NETWORK_ERROR && data.response && data.response.code === 403 && renewals < 2) {
    renewals++;
    renewLinks();
    return;
  }
  showNotice(`Playback failed: ${data.details}${status}`);
  video.dataset.fatal = data.details;
  hls.destroy();
  hls = null;
}

// attach starts loading url at resumeS seconds.
function attach(url, resumeS) {
  const Hls = window.Hls;
  if (Hls && Hls.isSupported()) {
    video.dataset.engine = 'hls.js';
    hls = new Hls({ startPosition: resumeS, workerPath: HLS_WORKER, capLevelToPlayerSize: true });
    hls.on(Hls.Events.ERROR, hlsError);
    // Captions are the master playlist's SUBTITLES renditions; hls.js renders the chosen one
    // as a text track of the video (the browser draws its cues).
    hls.on(Hls.Events.SUBTITLE_TRACKS_UPDATED, (_event, data) => {
      controls.setCaptionTracks(data.subtitleTracks.map((tr) => ({ name: tr.name, lang: tr.lang })), (i) => {
        hls.subtitleDisplay = i >= 0;
        hls.subtitleTrack = i;
        video.dataset.captions = i >= 0 ? data.subtitleTracks[i].lang || data.subtitleTracks[i].name : 'off';
      });
    });
    // What the page plays, for the end-to-end tests: the heights of the levels hls.js knows and
    // of the fragment on screen.
    hls.on(Hls.Events.MANIFEST_PARSED, (_event, data) => {
      video.dataset.levels = data.levels.map((l) => l.height).join(',');
    });
    hls.on(Hls.Events.FRAG_CHANGED, (_event, data) => {
      const level = hls.levels[data.frag.level];
      if (level) video.dataset.playingHeight = String(level.height);
    });
    hls.on(Hls.Events.FRAG_BUFFERED, () => {
      renewals = 0;
      if (!retrying) return;
      retrying = false;
      clearNotice('warn');
    });
    hls.loadSource(url);
    hls.attachMedia(video);
  } else if (video.canPlayType('application/vnd.apple.mpegurl')) {
    video.dataset.engine = 'native';
    video.addEventListener('loadedmetadata', () => { video.currentTime = resumeS; }, { once: true });
    // Native HLS turns the SUBTITLES renditions into the video's text tracks itself.
    video.textTracks.addEventListener('addtrack', () => {
      const tracks = [...video.textTracks].filter((tr) => tr.kind === 'subtitles' || tr.kind === 'captions');
      controls.setCaptionTracks(tracks.map((tr) => ({ name: tr.label, lang: tr.language })), (i) => {
        tracks.forEach((tr, j) => { tr.mode = j === i ? 'showing' : 'disabled'; });
        video.dataset.captions = i >= 0 ? tracks[i].language || tracks[i].label : 'off';
      });
    });
    video.src = url;
  } else {
    const why = Hls ? 'this browser has neither Media Source Extensions nor native HLS'
      : 'hls.js is missing from this build (run `make web` before building) and this browser has no native HLS';
    showNotice(`The video cannot be played: ${why}.`);
    return;
  }
  video.addEventListener('playing', () => {
    // The resume point is in place once the video first plays (or is seeked there by hand).
    if (started) return;
    started = true;
    video.dataset.resumedAt = String(video.currentTime);
  }, { once: true });
  video.play().catch((err) => {
    if (err.name === 'NotAllowedError') {
      setOverlay('Press play to resume');
      video.addEventListener('play', () => setOverlay(''), { once: true });
    } else if (err.name !== 'AbortError') {
      showNotice(describe(err, 'The video did not start'));
    }
  });
}

// renewLinks starts again from where the video is with fresh links. The API's links to the
// video's files are signed and expire (a few minutes past the point in the video each is for),
// so a player paused for longer than that gets 403s: it asks for new ones, like for a first
// visit, instead of failing.
async function renewLinks() {
  const at = video.currentTime;
  console.warn('hls.js: a link to the video expired; asking for fresh ones');
  hls.destroy();
  hls = null;
  try {
    const m = await api('GET', `/v1/media/${mediaID}`);
    if (!m.playable || !m.hls_url) throw new Error('the video is no longer playable');
    attach(m.hls_url, at);
  } catch (err) {
    fail(err, 'Could not renew the links to the video');
  }
}

// loadStoryboard fetches the storyboard's WebVTT (a signed link, like the playlists: no token)
// for the seek bar's previews. Without it the bar still seeks; it only shows the time.
async function loadStoryboard(url) {
  try {
    const res = await fetch(url);
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    const cues = parseStoryboard(await res.text(), res.url);
    controls.setStoryboard(cues);
    video.dataset.storyboardCues = String(cues.length);
  } catch (err) {
    console.warn('storyboard unavailable:', err);
  }
}

// showChapters lists chapters ([{start_ms, title}], by start) under the player, a button each
// that seeks to its start, marks their starts on the seek bar, and keeps the one playing
// marked as current.
function showChapters(chapters) {
  if (!chapters || chapters.length === 0) return;
  const buttons = chapters.map((ch) => {
    const button = document.createElement('button');
    button.type = 'button';
    button.dataset.startMs = String(ch.start_ms);
    const at = document.createElement('span');
    at.className = 'chapter-time';
    at.textContent = clock(ch.start_ms);
    const name = document.createElement('span');
    name.textContent = ch.title; // text, never markup
    button.append(at, name);
    button.addEventListener('click', () => {
      controls.seekTo(ch.start_ms / 1000);
      if (video.paused) video.play().catch(() => {});
    });
    return button;
  });
  document.getElementById('chapters').replaceChildren(...buttons.map((b) => {
    const item = document.createElement('li');
    item.append(b);
    return item;
  }));
  document.getElementById('chapters-box').hidden = false;
  controls.setChapters(chapters.map((ch) => ch.start_ms / 1000));
  video.addEventListener('timeupdate', () => {
    const ms = video.currentTime * 1000;
    let current = -1;
    chapters.forEach((ch, i) => { if (ch.start_ms <= ms) current = i; });
    buttons.forEach((b, i) => {
      if (i === current) b.setAttribute('aria-current', 'true');
      else b.removeAttribute('aria-current');
    });
  });
}

// nextLesson returns the lesson after this media in the course the page was opened from, or
// null (no course, the last lesson, or the course cannot be read: the button is a courtesy).
async function nextLesson() {
  if (!fromCollection) return null;
  try {
    const course = await api('GET', `/v1/collections/${encodeURIComponent(fromCollection)}`);
    const i = course.items.findIndex((it) => it.media_id === mediaID);
    return i >= 0 && i + 1 < course.items.length ? course.items[i + 1] : null;
  } catch (err) {
    console.warn('could not read the course for its next lesson:', err);
    return null;
  }
}

// showSkips shows "Skip intro" while the video is in its intro and "Next lesson" while it is
// in its credits (and there is a next lesson), from the media's markers.
async function showSkips(m) {
  const skip = document.getElementById('skip-intro');
  const next = document.getElementById('next-lesson');
  const within = (span, ms) => Boolean(span) && ms >= span.start_ms && ms < span.end_ms;
  const lesson = m.credits ? await nextLesson() : null;
  if (lesson) {
    next.href = watchHref(lesson.media_id, fromCollection);
    next.textContent = `Next lesson: ${lesson.title}`;
  }
  if (!m.intro && !lesson) return;
  skip.addEventListener('click', () => {
    controls.seekTo(m.intro.end_ms / 1000);
    skip.hidden = true;
  });
  const update = () => {
    const ms = video.currentTime * 1000;
    skip.hidden = !within(m.intro, ms);
    // The credits run to the end of the video, which may stop just short of the marked end.
    next.hidden = !lesson || !(ms >= m.credits.start_ms);
  };
  for (const e of ['timeupdate', 'seeked']) video.addEventListener(e, update);
  update();
}

// unavailable turns the player into a plain panel: there is nothing to play.
function unavailable() {
  controlsRoot.hidden = true;
  video.removeAttribute('src');
  setOverlay('This video cannot be played.');
  if (title.textContent === 'Loading…') title.textContent = 'Video unavailable';
}

// playableMedia waits until the video can play: READY, or still encoding with its first
// renditions done.
async function playableMedia() {
  for (;;) {
    const m = await api('GET', `/v1/media/${mediaID}`);
    title.textContent = m.title;
    document.title = `${m.title} · Playhead`;
    if (m.playable && m.hls_url) return m;
    if (m.status === 'FAILED') {
      throw new Error(`this video could not be encoded: ${m.failure_reason || 'no reason given'}`);
    }
    setOverlay(`Still ${m.status.toLowerCase()}: this page starts playing when the video is ready.`);
    await new Promise((r) => setTimeout(r, STATUS_POLL_MS));
  }
}

// upgrade waits for a video that plays while it encodes to be READY, then loads its master
// again, now with every rendition, from where the video is, and the storyboard. A failure of
// the rest of the encode is shown; what plays keeps playing.
async function upgrade() {
  video.dataset.encoding = 'true';
  showNotice('Still encoding: playing the qualities done so far; the others are added when they are ready.', 'info');
  for (;;) {
    await new Promise((r) => setTimeout(r, STATUS_POLL_MS));
    let m;
    try {
      m = await api('GET', `/v1/media/${mediaID}`);
    } catch (err) {
      if (err instanceof APIError && err.status === 404) {
        // Failed, or made private, since it started playing: what plays keeps playing.
        showNotice('This video is no longer available to you; what is loaded keeps playing.', 'warn');
        return;
      }
      console.warn('could not check the encode:', err);
      continue;
    }
    if (m.status === 'FAILED') {
      showNotice(`The rest of this video could not be encoded: ${m.failure_reason || 'no reason given'}`, 'warn');
      return;
    }
    if (m.status !== 'READY') continue;
    clearNotice('info');
    video.dataset.encoding = 'false';
    if (m.storyboard_url) loadStoryboard(m.storyboard_url);
    if (!hls) return; // native HLS, or playback failed: the next visit gets the full master
    const at = video.currentTime;
    const paused = video.paused;
    hls.destroy();
    hls = null;
    attach(m.hls_url, at);
    if (paused) video.pause();
    return;
  }
}

// reportPositions starts the SDK's reports of the video and returns its resume point.
function reportPositions() {
  const session = attachReports(video, {
    baseUrl: '',
    mediaId: mediaID,
    collection: fromCollection || undefined,
    durationMs: durationMS,
    getToken: () => authHeader().slice('Bearer '.length),
    onSaved: (ms) => {
      saved.textContent = `Position saved at ${clock(ms)}`;
      saved.dataset.positionMs = String(ms);
    },
    onError: (err) => {
      if (err.status === 0 && document.visibilityState === 'hidden') return; // the page is going away
      fail(err, 'Could not save your position');
    },
  });
  return session.ready;
}

async function open() {
  let m;
  let resume;
  try {
    m = await playableMedia();
    setOverlay('');
    durationMS = m.duration_ms || 0;
    resume = await reportPositions();
  } catch (err) {
    unavailable();
    if (err.status === 404) {
      showNotice(`Video ${mediaID} does not exist, or is not yours to play.`);
    } else {
      fail(err, 'Could not open the video');
    }
    return;
  }
  const resumeS = resume.positionMs / 1000;
  const { finished } = resume;
  facts.textContent = [
    durationMS ? clock(durationMS) : null,
    m.visibility === 'PUBLIC' ? 'Public' : 'Private',
    finished ? 'Watched to the end: starting over' : resume.positionMs > 0 ? `Resuming at ${clock(resume.positionMs)}` : 'Starting from the beginning',
  ].filter(Boolean).join(' · ');
  video.dataset.resumeMs = String(resume.positionMs);
  controls = mountControls(controlsRoot, video, durationMS / 1000);
  controlsRoot.hidden = false;
  if (m.storyboard_url) loadStoryboard(m.storyboard_url);
  showChapters(m.chapters);
  showSkips(m);
  video.addEventListener('error', videoError);
  attach(m.hls_url, resumeS);
  if (m.status !== 'READY') upgrade();
}

if (!Number.isSafeInteger(mediaID) || mediaID <= 0) {
  showNotice('This is not a video address.');
} else if (initSession()) {
  if (fromCollection) {
    const back = document.getElementById('back');
    back.href = courseHref(fromCollection);
    back.textContent = `← ${fromCollection}`;
  }
  open();
}
