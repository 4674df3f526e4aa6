// The home page: the member's continue-watching list (GET /v1/playback, whose items carry
// their signed thumbnail URLs, hide with DELETE; an up-next item, standing in for a finished lesson,
// is labelled "Up next" and opens the player from its collection), the courses the member has
// started (GET /v1/me/collections, each linking to its course page) and the upload form: a
// resumable upload (tus, /v1/uploads, with tus-js-client from static/vendor) whose progress
// bar survives a dropped connection and a reload, with pause and resume; then the media's
// status until READY: from the event stream, GET /v1/events, opened before the upload starts;
// polled only when the stream fails. Without tus-js-client (a binary built without `make web`)
// the file goes up in one request, POST /v1/media.

import { api, APIError, MediaEvents, authHeader, bytes, clock, ago, el, fail, initSession, showNotice, describe, watchHref, courseHref } from './common.mjs';

const PAGE = 20;
const STATUS_POLL_MS = 1000; // only when the event stream fails
const EVENTS_OPEN_MS = 5000;

const list = document.getElementById('items');
const empty = document.getElementById('empty');
const more = document.getElementById('more');
const count = document.getElementById('count');

let cursor = '';
let shown = 0;

async function loadPage() {
  more.disabled = true;
  let page;
  try {
    const q = new URLSearchParams({ limit: String(PAGE) });
    if (cursor) q.set('cursor', cursor);
    page = await api('GET', `/v1/playback?${q}`);
  } catch (err) {
    fail(err, 'Could not load your continue-watching list');
    return;
  } finally {
    more.disabled = false;
  }
  // One request per page: the items carry their thumbnail URLs.
  for (const it of page.items) list.append(card(it));
  shown += page.items.length;
  cursor = page.next_cursor || '';
  more.hidden = !cursor;
  updateCount();
}

function updateCount() {
  empty.hidden = shown > 0;
  count.textContent = shown === 0 ? '' : `${shown}${cursor ? '+' : ''} ${shown === 1 ? 'video' : 'videos'}`;
}

function card(item) {
  const next = item.up_next || null;
  const href = watchHref(item.media_id, next && next.collection);
  const duration = item.duration_ms || 0;
  const fraction = duration > 0 ? Math.min(1, item.position_ms / duration) : 0;
  const fill = el('span');
  fill.style.width = `${(fraction * 100).toFixed(2)}%`;
  const thumb = item.thumbnail_url
    ? el('img', { src: item.thumbnail_url, alt: '', loading: 'lazy', decoding: 'async' })
    : el('span', { class: 'placeholder', 'aria-hidden': 'true' }, '▶');
  const left = duration - item.position_ms;
  const facts = [
    duration > 0 ? `${clock(item.position_ms)} of ${clock(duration)}` : clock(item.position_ms),
    duration > 0 ? (left <= 1000 ? 'finished' : `${clock(left)} left`) : null,
    ago(new Date(item.event_time)),
  ].filter(Boolean).join(' · ');
  const dataset = { mediaId: String(item.media_id), progress: fraction.toFixed(4) };
  if (next) dataset.upNext = next.collection;
  const li = el('li', { class: next ? 'item up-next' : 'item', dataset },
    // The thumbnail's name holds the duration its badge shows (WCAG 2.5.3, label in name).
    el('a', { class: 'thumb', href, 'aria-label': [next ? `Play ${item.title}, up next in ${next.collection}` : `Resume ${item.title}`,
      duration > 0 ? clock(duration) : null].filter(Boolean).join(', ') },
      thumb,
      duration > 0 ? el('span', { class: 'badge' }, clock(duration)) : null,
      el('span', { class: 'play', 'aria-hidden': 'true' }, '▶'),
      el('span', { class: 'progress', role: 'progressbar', 'aria-label': 'Watched', 'aria-valuemin': '0',
        'aria-valuemax': '100', 'aria-valuenow': String(Math.round(fraction * 100)) }, fill)),
    el('div', { class: 'item-body' },
      next ? el('p', { class: 'up-next-label' }, 'Up next') : null,
      el('a', { class: 'item-title', href, title: item.title }, item.title),
      next ? el('p', { class: 'muted small' }, 'After ', el('span', { class: 'after' }, next.after_title), ' in ',
        el('a', { href: courseHref(next.collection) }, next.collection)) : null,
      el('p', { class: 'muted small' }, facts)),
    el('button', { type: 'button', class: 'hide', title: 'Hide from continue watching',
      'aria-label': `Hide ${item.title} from continue watching`, onclick: () => hide(item, li) }, '✕'));
  return li;
}

// loadCourses lists the collections the member has started, most recently watched first.
async function loadCourses() {
  let answer;
  try {
    answer = await api('GET', '/v1/me/collections');
  } catch (err) {
    fail(err, 'Could not load your courses');
    return;
  }
  const section = document.getElementById('courses');
  const items = answer.collections || [];
  section.hidden = items.length === 0;
  document.getElementById('courses-count').textContent = items.length ? `${items.length} ${items.length === 1 ? 'course' : 'courses'}` : '';
  document.getElementById('course-list').replaceChildren(...items.map(courseRow));
}

function courseRow(c) {
  const fraction = c.total > 0 ? c.watched / c.total : 0;
  const fill = el('span');
  fill.style.width = `${(fraction * 100).toFixed(2)}%`;
  const resume = c.resume
    ? el('a', { class: 'button secondary', href: watchHref(c.resume.media_id, c.collection),
      'aria-label': `Resume ${c.collection} at ${c.resume.title}` }, 'Resume')
    : el('span', { class: 'muted small' }, 'Finished');
  return el('li', { class: 'course-row', dataset: { collection: c.collection } },
    el('div', { class: 'course-row-body' },
      el('a', { class: 'item-title', href: courseHref(c.collection) }, c.collection),
      el('p', { class: 'muted small totals' }, `${c.watched} of ${c.total} watched · ${clock(c.left_ms)} left`),
      el('span', { class: 'progress', role: 'progressbar', 'aria-label': `${c.collection}: lessons watched`, 'aria-valuemin': '0',
        'aria-valuemax': '100', 'aria-valuenow': String(Math.round(fraction * 100)) }, fill)),
    resume);
}

async function hide(item, li) {
  li.classList.add('leaving');
  try {
    await api('DELETE', `/v1/playback/${item.media_id}`);
  } catch (err) {
    li.classList.remove('leaving');
    fail(err, `Could not hide “${item.title}”`);
    return;
  }
  li.remove();
  shown--;
  updateCount();
}

// The upload form.

const form = document.getElementById('upload-form');
const fileInput = document.getElementById('file');
const fileLabel = document.getElementById('file-label');
const drop = document.getElementById('drop');
const titleInput = document.getElementById('title');
const visibility = document.getElementById('visibility');
const button = document.getElementById('upload-button');
const progress = document.getElementById('upload-progress');
const bar = document.getElementById('upload-bar');
const barFill = document.getElementById('upload-fill');
const status = document.getElementById('upload-status');
const watch = document.getElementById('upload-watch');

function chosen() {
  const f = fileInput.files && fileInput.files[0];
  fileLabel.textContent = f ? `${f.name} · ${bytes(f.size)}` : 'Choose a video file';
  drop.classList.toggle('has-file', Boolean(f));
}

function setBar(fraction, state) {
  barFill.style.width = `${(fraction * 100).toFixed(1)}%`;
  bar.setAttribute('aria-valuenow', String(Math.round(fraction * 100)));
  bar.dataset.state = state;
}

function setStatus(text, state) {
  status.textContent = text;
  status.dataset.status = state;
}

// The resumable upload: 8 MiB a PATCH, so the bar moves with what the server has stored and
// no request is larger than a proxy's body limit; a retry after a drop resumes from the
// server's offset. The upload's URL is kept in localStorage (tus-js-client's fingerprint of
// the file) until it succeeds, so a reloaded page goes on where it stopped.
const CHUNK_BYTES = 8 * 1024 * 1024;
const RETRY_DELAYS = [0, 1000, 3000, 5000, 10000, 20000, 30000];
const pauseButton = document.getElementById('upload-pause');
const unfinishedNote = document.getElementById('upload-unfinished');
let current = null; // the tus upload in progress, for the pause button
let paused = false;

const percent = (fraction) => Math.floor(fraction * 100);
const baseName = (name) => name.replace(/\.[^.]*$/, '');

// tusMessage is what the server said about a refused tus request.
function tusMessage(err) {
  const res = err.originalResponse;
  if (!res) return 'the server could not be reached';
  try {
    return JSON.parse(res.getBody()).error || `status ${res.getStatus()}`;
  } catch {
    return `status ${res.getStatus()}`;
  }
}

async function upload(ev) {
  ev.preventDefault();
  const file = fileInput.files && fileInput.files[0];
  if (!file) {
    showNotice('Choose a video file to upload first.');
    return;
  }
  if (!window.tus || !window.tus.isSupported) {
    console.warn('playhead: tus-js-client is missing (static/vendor/tus.min.js); the file goes up in one request');
    uploadInOneRequest(file);
    return;
  }
  const title = titleInput.value.trim();
  const metadata = { filename: file.name, filetype: file.type || 'application/octet-stream', visibility: visibility.value };
  if (title) metadata.title = title;

  form.classList.add('busy');
  button.disabled = true;
  progress.hidden = false;
  watch.hidden = true;
  unfinishedNote.hidden = true;
  setBar(0, 'uploading');
  setStatus(`Uploading ${file.name}…`, 'UPLOADING');
  delete status.dataset.via;
  const live = await listen();

  let fraction = 0;
  const up = new window.tus.Upload(file, {
    endpoint: '/v1/uploads',
    chunkSize: CHUNK_BYTES,
    retryDelays: RETRY_DELAYS,
    metadata,
    removeFingerprintOnSuccess: true,
    // The token is read at each request: it may be replaced while the upload runs.
    onBeforeRequest(req) {
      req.setHeader('Authorization', authHeader());
    },
    onProgress(sent, total) {
      fraction = sent / total;
      setBar(fraction, 'uploading');
      setStatus(`Uploading… ${percent(fraction)}% · ${bytes(sent)} of ${bytes(total)}`, 'UPLOADING');
    },
    onShouldRetry(err, attempt, options) {
      const code = err.originalResponse ? err.originalResponse.getStatus() : 0;
      // A dropped connection, the server's trouble, a lock another request still holds, a
      // silent body cut (408) or a busy node (429): all worth trying again.
      const retry = code === 0 || code >= 500 || [408, 409, 423, 429].includes(code);
      if (retry) {
        const wait = Math.round(options.retryDelays[attempt] / 1000);
        setBar(fraction, 'uploading');
        setStatus(`Connection lost at ${percent(fraction)}%; trying again${wait ? ` in ${wait} s` : ''}…`, 'RETRYING');
      }
      return retry;
    },
    onSuccess({ lastResponse }) {
      current = null;
      pauseButton.hidden = true;
      const id = Number(lastResponse.getHeader('Playhead-Media-Id'));
      setBar(1, 'processing');
      setStatus('Uploaded. Encoding to HLS…', 'PROCESSING');
      follow(id, title || baseName(file.name), live);
    },
    onError(err) {
      current = null;
      pauseButton.hidden = true;
      if (live) live.close();
      const message = tusMessage(err);
      uploadDone();
      setBar(fraction, 'failed');
      setStatus(`Upload failed: ${message}`, 'ERROR');
      fail(new APIError(err.originalResponse ? err.originalResponse.getStatus() : 0, message), 'Upload failed');
    },
  });
  const previous = await up.findPreviousUploads();
  if (previous.length) {
    up.resumeFromPreviousUpload(previous[0]);
    setStatus(`Going on with ${file.name} where it stopped…`, 'UPLOADING');
  }
  current = up;
  paused = false;
  pauseButton.textContent = 'Pause';
  pauseButton.hidden = false;
  up.start();
}

// pauseOrResume stops the upload (what the server has stays) or starts it again from there.
async function pauseOrResume() {
  if (!current) return;
  if (!paused) {
    paused = true;
    pauseButton.textContent = 'Resume';
    await current.abort();
    setStatus(`Paused at ${bar.getAttribute('aria-valuenow')}%.`, 'PAUSED');
    return;
  }
  paused = false;
  pauseButton.textContent = 'Pause';
  setStatus('Resuming…', 'UPLOADING');
  current.start();
}

// showUnfinished says, when the page opens, which upload of this browser stopped before its
// end (a closed tab, a reload, a lost connection), and how far it got: choosing the same file
// goes on from there. Uploads the server no longer has are forgotten.
async function showUnfinished() {
  if (!window.tus || !window.tus.isSupported) return;
  const storage = window.tus.defaultOptions.urlStorage;
  const all = (await storage.findAllUploads()).sort((a, b) => String(b.creationTime).localeCompare(String(a.creationTime)));
  for (const u of all) {
    let res;
    try {
      res = await fetch(u.uploadUrl, { method: 'HEAD', headers: { Authorization: authHeader(), 'Tus-Resumable': '1.0.0' } });
    } catch {
      return; // offline: say nothing now
    }
    const offset = Number(res.headers.get('Upload-Offset'));
    if (!res.ok || res.headers.get('Playhead-Media-Id') || !(offset < u.size)) {
      await storage.removeUpload(u.urlStorageKey);
      continue;
    }
    const name = (u.metadata && u.metadata.filename) || 'a video';
    unfinishedNote.textContent = `Your upload of “${name}” stopped at ${percent(offset / u.size)}% (${bytes(offset)} of ${bytes(u.size)}): choose the same file to go on from there.`;
    unfinishedNote.hidden = false;
    return;
  }
}

// uploadInOneRequest sends the file with POST /v1/media, the route for simple clients.
async function uploadInOneRequest(file) {
  const body = new FormData();
  if (titleInput.value.trim()) body.append('title', titleInput.value.trim());
  body.append('visibility', visibility.value);
  body.append('file', file); // last: the server streams it to storage as it arrives

  form.classList.add('busy');
  button.disabled = true;
  progress.hidden = false;
  watch.hidden = true;
  setBar(0, 'uploading');
  setStatus(`Uploading ${file.name}…`, 'UPLOADING');
  delete status.dataset.via;
  const live = await listen();

  const xhr = new XMLHttpRequest();
  xhr.open('POST', '/v1/media');
  xhr.setRequestHeader('Authorization', authHeader());
  xhr.responseType = 'json';
  xhr.upload.addEventListener('progress', (e) => {
    if (!e.lengthComputable) return;
    setBar(e.loaded / e.total, 'uploading');
    setStatus(`Uploading… ${Math.floor((e.loaded / e.total) * 100)}% · ${bytes(e.loaded)} of ${bytes(e.total)}`, 'UPLOADING');
  });
  xhr.addEventListener('load', () => {
    const answer = xhr.response;
    if (xhr.status !== 202 || !answer || !answer.id) {
      if (live) live.close();
      const message = (answer && answer.error) || xhr.statusText || 'no answer';
      uploadDone();
      setBar(1, 'failed');
      setStatus(`Upload refused: ${message}`, 'ERROR');
      fail(new APIError(xhr.status, message), 'Upload failed');
      return;
    }
    setBar(1, 'processing');
    setStatus('Uploaded. Encoding to HLS…', answer.status);
    follow(answer.id, answer.title, live);
  });
  xhr.addEventListener('error', () => {
    if (live) live.close();
    uploadDone();
    setBar(0, 'failed');
    setStatus('Upload failed: the server could not be reached.', 'ERROR');
    showNotice('Upload failed: the server could not be reached.');
  });
  xhr.send(body);
}

function uploadDone() {
  form.classList.remove('busy');
  button.disabled = false;
}

// listen opens the event stream before the upload starts, so the media's event cannot come
// before it; null when it cannot be opened (the status is then polled).
async function listen() {
  const live = new MediaEvents();
  try {
    await live.open(EVENTS_OPEN_MS);
    return live;
  } catch (err) {
    console.warn('playhead: no event stream; the upload\'s status will be polled:', err.message);
    return null;
  }
}

// follow waits for the media's status to become READY or FAILED: the event stream says when,
// with no request meanwhile; if the stream fails, the status is polled. A video playable while
// it encodes (its first renditions done) gets its watch link at once.
async function follow(id, title, live) {
  const started = Date.now();
  const waiting = (state) => {
    const waited = Math.round((Date.now() - started) / 1000);
    setStatus(`${state === 'PROCESSING' ? 'Encoding to HLS' : state}… ${waited} s`, state);
  };
  if (live) {
    const tick = setInterval(() => waiting('PROCESSING'), 1000);
    try {
      let event = await live.wait(id);
      if (event.type === 'media.playable') {
        showPlayable(id);
        event = await live.wait(id, ['media.ready', 'media.failed']);
      }
      status.dataset.via = 'events';
      if (event.data.status === 'READY') showReady(id, title);
      else showFailed(title, event.data.reason);
      return;
    } catch (err) {
      console.warn('playhead: the event stream failed; polling the upload\'s status:', err.message);
    } finally {
      clearInterval(tick);
      live.close();
    }
  }
  status.dataset.via = 'poll';
  for (;;) {
    let m;
    try {
      m = await api('GET', `/v1/media/${id}`);
    } catch (err) {
      uploadDone();
      setStatus(describe(err, 'Could not read the video\'s status'), 'ERROR');
      fail(err, 'Could not read the video\'s status');
      return;
    }
    if (m.status === 'READY') {
      showReady(id, m.title, m.duration_ms);
      return;
    }
    if (m.status === 'FAILED') {
      showFailed(m.title, m.failure_reason);
      return;
    }
    if (m.playable) showPlayable(id);
    waiting(m.status);
    await new Promise((r) => setTimeout(r, STATUS_POLL_MS));
  }
}

// showPlayable offers the watch link of a video that can play while it still encodes.
function showPlayable(id) {
  watch.href = `/watch/${id}`;
  watch.hidden = false;
}

function showReady(id, title, durationMS) {
  uploadDone();
  setBar(1, 'ready');
  setStatus(`Ready: “${title}”${durationMS ? `, ${clock(durationMS)}` : ''}.`, 'READY');
  watch.href = `/watch/${id}`;
  watch.hidden = false;
  form.reset();
  chosen();
}

function showFailed(title, reason) {
  uploadDone();
  setBar(1, 'failed');
  setStatus(`Encoding failed: ${reason || 'no reason given'}`, 'FAILED');
  showNotice(`“${title}” could not be encoded: ${reason || 'no reason given'}`);
}

if (initSession()) {
  more.addEventListener('click', loadPage);
  fileInput.addEventListener('change', chosen);
  for (const type of ['dragenter', 'dragover']) {
    drop.addEventListener(type, (e) => {
      e.preventDefault();
      drop.classList.add('over');
    });
  }
  for (const type of ['dragleave', 'drop']) drop.addEventListener(type, () => drop.classList.remove('over'));
  drop.addEventListener('drop', (e) => {
    e.preventDefault();
    if (e.dataTransfer && e.dataTransfer.files.length) {
      fileInput.files = e.dataTransfer.files;
      chosen();
    }
  });
  form.addEventListener('submit', upload);
  pauseButton.addEventListener('click', pauseOrResume);
  showUnfinished();
  loadPage();
  loadCourses();
}
