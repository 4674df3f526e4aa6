// A course page, /course?c={collection}: the collection's lessons in order (chapter, then
// order) with the member's state of each (GET /v1/collections/{collection}): a watched mark, the
// position of a lesson in progress, the totals (watched of total, time left) and a button that
// resumes at the first lesson not watched yet. States are written out, never shown by colour
// alone. Every lesson links to the player opened from this collection.

import { api, APIError, clock, el, fail, initSession, showNotice, watchHref } from './common.mjs';

const collection = new URLSearchParams(location.search).get('c');

const heading = document.getElementById('course-title');
const totals = document.getElementById('totals');
const bar = document.getElementById('course-bar');
const barFill = document.getElementById('course-fill');
const resume = document.getElementById('resume');
const finished = document.getElementById('finished');
const lessons = document.getElementById('lessons');

// stateText says where the member is in a lesson, in words.
function stateText(item) {
  switch (item.state) {
    case 'watched':
      return 'Watched';
    case 'in_progress':
      return item.duration_ms ? `In progress · ${clock(item.position_ms)} of ${clock(item.duration_ms)}` : `In progress · ${clock(item.position_ms)}`;
    default:
      return 'Not started';
  }
}

function lesson(item, resumeID) {
  const href = watchHref(item.media_id, collection);
  const isResume = item.media_id === resumeID;
  const mark = { watched: '✓', in_progress: '◐' }[item.state] || '○';
  return el('li', { class: `lesson ${item.state}`, dataset: { mediaId: String(item.media_id), state: item.state } },
    el('span', { class: 'lesson-mark', 'aria-hidden': 'true' }, mark),
    el('div', { class: 'lesson-body' },
      el('p', { class: 'muted small' }, `Chapter ${item.chapter} · Lesson ${item.order}`),
      el('a', { class: 'item-title', href }, item.title),
      el('p', { class: 'small lesson-state' }, stateText(item), isResume ? ' · ' : null,
        isResume ? el('strong', {}, 'Resume here') : null)),
    item.duration_ms ? el('span', { class: 'muted small lesson-length' }, clock(item.duration_ms)) : null);
}

async function load() {
  let p;
  try {
    p = await api('GET', `/v1/collections/${encodeURIComponent(collection)}`);
  } catch (err) {
    heading.textContent = collection;
    if (err instanceof APIError && err.status === 404) {
      showNotice(`There is no course called “${collection}”.`);
    } else {
      fail(err, 'Could not load the course');
    }
    return;
  }
  heading.textContent = p.collection;
  document.title = `${p.collection} · Playhead`;
  totals.textContent = `${p.watched} of ${p.total} watched · ${clock(p.left_ms)} left`;
  const fraction = p.total > 0 ? p.watched / p.total : 0;
  barFill.style.width = `${(fraction * 100).toFixed(2)}%`;
  bar.setAttribute('aria-valuenow', String(Math.round(fraction * 100)));
  if (p.resume) {
    resume.href = watchHref(p.resume.media_id, p.collection);
    resume.textContent = p.resume.position_ms > 0
      ? `Resume: ${p.resume.title} at ${clock(p.resume.position_ms)}`
      : `Resume: ${p.resume.title}`;
    resume.dataset.mediaId = String(p.resume.media_id);
  }
  resume.hidden = !p.resume;
  // An unknown collection reads as an empty one (the API answers 200 with no items).
  if (p.total === 0) finished.textContent = 'This course has no lessons.';
  finished.hidden = Boolean(p.resume);
  lessons.replaceChildren(...p.items.map((it) => lesson(it, p.resume ? p.resume.media_id : 0)));
}

if (!collection) {
  showNotice('This is not a course address: it needs ?c= and the name of a collection.');
} else if (initSession()) {
  load();
}
