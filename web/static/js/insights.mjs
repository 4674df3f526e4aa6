// Insights (owners and admins): what a media's viewers played (views, viewers, completion,
// watch time, the retention curve, and beside it the playback quality) and a collection's funnel (started, finished and the drop
// per lesson), drawn with Chart.js (web/static/vendor/chart.min.js, a classic script that
// defines window.Chart) and given as tables too. The media and collection are in the address
// (?media=, ?collection=), so a view can be linked to. Views and viewers are exact; the other
// figures carry noise and cover the viewers of their release (figures_viewers), and the curve
// comes from MIN_CURVE_VIEWERS of them (the audience package's doc says why).

import { api, clock, el, fail, initSession } from './common.mjs';

const $ = (id) => document.getElementById(id);
const charts = {};

const percent = (share) => `${(share * 100).toFixed(1)} %`;

// MIN_VIEWERS is audience.MinViewers: below it the API withholds all but the counts.
const MIN_VIEWERS = 5;
// MIN_CURVE_VIEWERS is audience.MinCurveViewers: the API gives the retention curve (null
// otherwise) only when its figures cover at least that many viewers. CURVE_NOISE is the
// standard deviation of the noise on each of its points, in viewers.
const MIN_CURVE_VIEWERS = 100;
const CURVE_NOISE = 10;

// pathPart escapes a collection name for a path: encodeURIComponent leaves "." alone, and a
// name "." or ".." would then be resolved away by the URL parser.
const pathPart = (name) => encodeURIComponent(name).replace(/\./g, '%2E');

// draw replaces the chart on canvas id with one of config.
function draw(id, config) {
  charts[id]?.destroy();
  charts[id] = new window.Chart($(id), config);
}

const axisColor = '#9aa0b4';
const gridColor = 'rgba(154, 160, 180, 0.15)';
const scale = (title, extra = {}) => ({ ticks: { color: axisColor }, grid: { color: gridColor }, title: { display: true, text: title, color: axisColor }, ...extra });

// retentionNote says why there is no curve, or how much noise the one shown carries.
function retentionNote(a, hidden) {
  if (a.computed_at === null) return 'The retention curve comes with the first rollup.';
  if (a.withheld) return `The retention curve is ${hidden}.`;
  if (!a.retention) {
    return `The retention curve is shown from ${MIN_CURVE_VIEWERS} viewers; these figures cover ${a.figures_viewers}.`;
  }
  return `Each point carries noise of about ${(CURVE_NOISE * 100 / a.figures_viewers).toFixed(1)} points (one standard deviation).`;
}

function showMedia(a) {
  $('media-title').textContent = `Media #${a.media_id}`;
  $('media-computed').textContent = a.computed_at ? `Rolled up ${new Date(a.computed_at).toLocaleString()}` : 'Not rolled up yet';
  const hidden = a.withheld ? `withheld (fewer than ${MIN_VIEWERS} viewers)` : '—';
  const figures = [['Views', a.views], ['Viewers', a.viewers],
    ['Figures cover', a.withheld || a.computed_at === null ? hidden : `${a.figures_viewers} viewers`], ['Finished', a.finished ?? hidden],
    ['Completion rate', a.completion_rate === null ? hidden : percent(a.completion_rate)],
    ['Watch time', a.watch_time_ms === null ? hidden : clock(a.watch_time_ms)], ['Duration', a.duration_ms ? clock(a.duration_ms) : 'unknown']];
  $('media-figures').replaceChildren(...figures.flatMap(([k, v]) => [el('dt', {}, k), el('dd', { dataset: { figure: k } }, v)]));
  const retention = a.retention ?? [];
  $('retention-body').replaceChildren(...retention.map((share, i) => el('tr', {}, el('th', { scope: 'row' }, `${i} %`), el('td', {}, percent(share)))));
  $('retention-note').textContent = retentionNote(a, hidden);
  // Without a curve, neither an empty chart nor an empty table: the note says why.
  $('retention-chart').parentElement.hidden = !a.retention;
  $('retention-table').hidden = !a.retention;
  showQuality(a.quality);
  $('media').hidden = false;
  charts['retention-chart']?.destroy();
  delete charts['retention-chart'];
  if (!a.retention) return;
  draw('retention-chart', {
    type: 'line',
    data: { labels: retention.map((_, i) => `${i} %`), datasets: [{ label: 'Viewers who watched', data: retention.map((s) => s * 100),
      borderColor: '#8b7cf6', backgroundColor: 'rgba(139, 124, 246, 0.25)', fill: true, pointRadius: 0, tension: 0.2 }] },
    options: { animation: false, maintainAspectRatio: false, plugins: { legend: { labels: { color: axisColor } } },
      scales: { x: scale('Point of the video'), y: scale('Share of viewers (%)', { min: 0, max: 100 }) } },
  });
}

// showQuality gives the playback quality the players measured (exact: it tells how the media
// was delivered, not what anyone watched), from MIN_VIEWERS sessions.
function showQuality(q) {
  const figures = q ? [['Sessions', q.sessions],
    ['Startup time (median)', q.startup_p50_ms === null ? '—' : `${q.startup_p50_ms} ms`],
    ['Startup time (95th percentile)', q.startup_p95_ms === null ? '—' : `${q.startup_p95_ms} ms`],
    ['Rebuffering', q.rebuffer_ratio === null ? '—' : `${percent(q.rebuffer_ratio)} of the time played`],
    ['Stalls', q.rebuffers], ['Sessions ended by an error', percent(q.error_rate)]] : [];
  $('quality-figures').replaceChildren(...figures.flatMap(([k, v]) => [el('dt', {}, k), el('dd', { dataset: { quality: k } }, v)]));
  const renditions = q?.renditions ?? [];
  $('renditions-body').replaceChildren(...renditions.map((r) => el('tr', {},
    el('th', { scope: 'row' }, r.height ? `${r.height}p` : 'unknown'), el('td', {}, percent(r.share)))));
  $('renditions-wrap').hidden = renditions.length === 0;
  $('quality-note').textContent = q ? 'Measured by the players (time to first frame, stalls, the rendition, fatal errors) and exact.'
    : `Shown once players that send it (the player SDK does) have reported ${MIN_VIEWERS} sessions.`;
}

function showCollection(c) {
  $('course-title').textContent = c.collection;
  $('course-computed').textContent = c.computed_at ? `Rolled up ${new Date(c.computed_at).toLocaleString()}` : 'Not every lesson rolled up yet';
  const name = (l, i) => `${i + 1}. ${l.title}`;
  $('funnel-body').replaceChildren(...c.lessons.map((l, i) => el('tr', { dataset: { media: l.media_id } },
    el('th', { scope: 'row' }, String(i + 1)), el('td', {}, l.title), el('td', {}, l.started), el('td', {}, l.finished ?? 'withheld'),
    el('td', {}, l.dropped ?? '—'))));
  $('course').hidden = false;
  draw('funnel-chart', {
    type: 'bar',
    data: { labels: c.lessons.map(name), datasets: [
      { label: 'Started', data: c.lessons.map((l) => l.started), backgroundColor: '#8b7cf6' },
      { label: 'Finished', data: c.lessons.map((l) => l.finished), backgroundColor: '#34d399' }] },
    options: { animation: false, maintainAspectRatio: false, plugins: { legend: { labels: { color: axisColor } } },
      scales: { x: scale('Lesson'), y: scale('Viewers', { beginAtZero: true, ticks: { color: axisColor, precision: 0 } }) } },
  });
}

// show reads and draws what the address asks for.
async function show() {
  const q = new URLSearchParams(location.search);
  const media = q.get('media') || '';
  const collection = q.get('collection') || '';
  $('media-id').value = media;
  $('collection-name').value = collection;
  $('media').hidden = true;
  $('course').hidden = true;
  if (media) {
    try {
      showMedia(await api('GET', `/v1/media/${encodeURIComponent(media)}/audience`));
    } catch (err) {
      fail(err, `Reading the audience of media ${media}`);
    }
  }
  if (collection) {
    try {
      showCollection(await api('GET', `/v1/collections/${pathPart(collection)}/audience`));
    } catch (err) {
      fail(err, `Reading the audience of ${collection}`);
    }
  }
}

function main() {
  if (!initSession()) return;
  $('choose').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    if ($('media-id').value) q.set('media', $('media-id').value);
    if ($('collection-name').value.trim()) q.set('collection', $('collection-name').value.trim());
    history.pushState(null, '', `/insights?${q}`);
    show();
  });
  window.addEventListener('popstate', show);
  show();
}

main();
