// The queue console (admins): how many jobs each kind has in each status, each kind's pause,
// cluster-wide limit, priorities and largest partitions (with pause and resume), the jobs
// themselves with DEAD ones first, a job's attempts and their errors, and retry, cancel or
// discard of one job or of a selection. It refreshes itself every few seconds, so a retried
// job is seen running and then COMPLETED.

import { api, ago, clearNotice, el, fail, initSession } from './common.mjs';

const REFRESH_MS = 3000;
const PAGE = 100;
const MAX_LIMIT = 1000; // the API's; older jobs are reached with "older than job #"
const STATUSES = ['WAITING', 'PENDING', 'PROCESSING', 'COMPLETED', 'DEAD'];
const PRIORITIES = { 1: 'high', 2: 'normal', 3: 'low' };

const $ = (id) => document.getElementById(id);

const state = { kind: '', status: '', before: '', limit: PAGE, jobs: [], selected: new Set(), detail: 0, busy: false, kindsShown: false };

// The actions, each with the statuses it applies to and the request that does it.
const ACTIONS = {
  retry: { label: 'Retry', done: 'Retried', applies: ['DEAD'], call: (id) => api('POST', `/v1/admin/jobs/${id}/retry`) },
  cancel: { label: 'Cancel', done: 'Cancelled', applies: ['WAITING', 'PENDING', 'PROCESSING'], confirm: true,
    call: (id) => api('POST', `/v1/admin/jobs/${id}/cancel`) },
  discard: { label: 'Discard', done: 'Discarded', applies: ['DEAD'], confirm: true, call: (id) => api('DELETE', `/v1/admin/jobs/${id}`) },
};

const query = (params) => {
  const q = new URLSearchParams({ limit: String(state.limit) });
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  return `/v1/admin/jobs?${q}`;
};

// fetchJobs reads the jobs the filters choose: with no status chosen, the DEAD ones first,
// then the newest of the others. The two lists are read at once, so a job whose status
// changed in between may be in both: it is shown once, where the DEAD list has it.
async function fetchJobs() {
  const { kind, before } = state;
  if (state.status) return (await api('GET', query({ kind, before, status: state.status }))).jobs;
  const [dead, all] = await Promise.all([api('GET', query({ kind, before, status: 'DEAD' })), api('GET', query({ kind, before }))]);
  const shown = new Set(dead.jobs.map((j) => j.id));
  return [...dead.jobs, ...all.jobs.filter((j) => !shown.has(j.id) && j.status !== 'DEAD')];
}

// keepFocus runs render, which rebuilds controls, and puts the focus back on the control that
// had it (by its data-focus-key), if it is still there: the page rebuilds its tables every
// few seconds, and a keyboard or screen-reader user must not be thrown back to the top.
function keepFocus(render) {
  const key = document.activeElement?.dataset?.focusKey;
  render();
  if (key) document.querySelector(`[data-focus-key="${CSS.escape(key)}"]`)?.focus();
}

function renderCounts(counts) {
  const kinds = [...new Set(counts.map((c) => c.kind))];
  $('counts-head').replaceChildren(el('th', { scope: 'col' }, 'Kind'), ...STATUSES.map((s) => el('th', { scope: 'col' }, s)));
  $('counts-body').replaceChildren(...kinds.map((kind) => el('tr', { dataset: { kind } },
    el('th', { scope: 'row' }, kind),
    ...STATUSES.map((status) => {
      const n = counts.find((c) => c.kind === kind && c.status === status)?.jobs ?? 0;
      return el('td', {}, el('button', { type: 'button', class: 'ghost count-link', dataset: { status, focusKey: `count-${kind}-${status}` },
        'aria-label': `${n} ${status} ${kind} jobs: list them`, onclick: () => choose(kind, status) }, n));
    }))));
  if (!state.kindsShown) {
    $('filter-kind').append(...kinds.map((k) => el('option', { value: k }, k)));
    state.kindsShown = true;
  }
}

// renderKinds fills the kinds table: one row per kind, with the button that pauses or resumes it.
function renderKinds(kinds) {
  $('kinds-body').replaceChildren(...kinds.map((k) => {
    const running = k.max_running ? `${k.running} of ${k.max_running}` : `${k.running} (no limit)`;
    const partitions = k.partitions.map((p) => `${p.partition === '' ? '(none)' : p.partition}: ${p.pending}`).join(', ');
    const action = k.paused ? 'resume' : 'pause';
    const label = k.paused ? 'Resume' : 'Pause';
    return el('tr', { dataset: { kind: k.kind, paused: String(k.paused) } },
      el('th', { scope: 'row' }, k.kind),
      el('td', {}, k.paused
        ? el('span', { class: 'state', dataset: { state: 'PAUSED' }, title: `since ${k.paused_at}` }, `Paused by ${k.paused_by} ${ago(new Date(k.paused_at))}`)
        : el('span', { class: 'state', dataset: { state: 'ACTIVE' } }, 'Active')),
      el('td', {}, running),
      el('td', {}, k.pending),
      el('td', {}, `${k.priorities.high} · ${k.priorities.normal} · ${k.priorities.low}`),
      el('td', { class: 'reason' }, partitions || '—'),
      el('td', {}, el('button', { type: 'button', class: 'ghost', dataset: { action, focusKey: `${action}-${k.kind}` },
        'aria-label': `${label} ${k.kind} on every node`, onclick: () => toggleKind(k.kind, action) }, label)));
  }));
}

// toggleKind pauses (after a confirmation: it stops the kind on every node) or resumes a kind.
async function toggleKind(kind, action) {
  if (action === 'pause' && !window.confirm(`Pause ${kind} on every node? Running jobs finish; no new one starts until it is resumed.`)) return;
  clearNotice();
  try {
    await api('POST', `/v1/admin/jobs/kinds/${encodeURIComponent(kind)}/${action}`);
    $('kinds-outcome').textContent = `${action === 'pause' ? 'Paused' : 'Resumed'} ${kind}.`;
    $('kinds-outcome').dataset.status = 'READY';
  } catch (err) {
    $('kinds-outcome').textContent = `Refused: ${err.message}${err.status ? ` (HTTP ${err.status})` : ''}.`;
    $('kinds-outcome').dataset.status = 'ERROR';
  }
  await refresh();
}

function actionButton(name, job) {
  const a = ACTIONS[name];
  return el('button', { type: 'button', class: 'ghost', dataset: { action: name, focusKey: `${name}-${job.id}` },
    'aria-label': `${a.label} job ${job.id}`, onclick: () => act(name, [job.id]) }, a.label);
}

function renderJobs() {
  const shown = new Set(state.jobs.map((j) => j.id));
  for (const id of state.selected) if (!shown.has(id)) state.selected.delete(id);
  $('jobs-body').replaceChildren(...state.jobs.map((j) => el('tr', { dataset: { job: j.id, status: j.status, kind: j.kind } },
    el('td', {}, el('input', { type: 'checkbox', 'aria-label': `Select job ${j.id}`, checked: state.selected.has(j.id), dataset: { focusKey: `select-${j.id}` },
      onchange: (ev) => { if (ev.target.checked) state.selected.add(j.id); else state.selected.delete(j.id); updateSelection(); } })),
    el('td', {}, el('button', { type: 'button', class: 'ghost job-link', dataset: { focusKey: `show-${j.id}` },
      'aria-label': `Show job ${j.id}`, onclick: () => showDetail(j.id, true) }, `#${j.id}`)),
    el('td', {}, j.kind),
    el('td', {}, j.subject_id),
    el('td', {}, el('span', { class: 'state', dataset: { state: j.status } }, j.status)),
    el('td', {}, `${j.attempt_count} / ${j.max_attempts}`),
    el('td', { title: j.enqueued_at }, ago(new Date(j.enqueued_at))),
    el('td', { class: 'reason', title: j.last_error || '' }, shorten(j.last_error || '')),
    el('td', {}, el('div', { class: 'row-actions' },
      ...Object.keys(ACTIONS).filter((n) => ACTIONS[n].applies.includes(j.status)).map((n) => actionButton(n, j)))))));
  const what = state.status || 'every status';
  const older = state.before ? ` · older than #${state.before}` : '';
  $('shown').textContent = `${state.jobs.length} shown · ${state.kind || 'every kind'} · ${what}${older}`;
  // A full page may have more behind it.
  $('show-more').hidden = state.jobs.length < state.limit || state.limit >= MAX_LIMIT;
  updateSelection();
}

function shorten(s) {
  return s.length > 120 ? `${s.slice(0, 120)}…` : s;
}

function updateSelection() {
  const n = state.selected.size;
  for (const name of Object.keys(ACTIONS)) {
    const b = $(`${name}-selected`);
    b.disabled = n === 0 || state.busy;
    b.textContent = n ? `${ACTIONS[name].label} ${n} selected` : `${ACTIONS[name].label} selected`;
  }
  $('select-all').checked = n > 0 && n === state.jobs.length;
}

async function showDetail(id, focus) {
  let j;
  try {
    j = await api('GET', `/v1/admin/jobs/${id}`);
  } catch (err) {
    if (err.status === 404) {
      $('detail').hidden = true;
      state.detail = 0;
      return;
    }
    fail(err, `Reading job ${id}`);
    return;
  }
  state.detail = id;
  $('detail-title').textContent = `Job #${j.id}`;
  const facts = [['Kind', j.kind], ['Subject', j.subject_id], ['Status', j.status], ['Attempts', `${j.attempt_count} of ${j.max_attempts}`],
    ['Enqueued', j.enqueued_at], ['Available at', j.available_at], ['Claimed by', j.claimed_by], ['Lease until', j.lease_until],
    ['Ended', j.completed_at], ['Partition', j.partition === '' ? '(none)' : j.partition], ['Priority', PRIORITIES[j.priority] ?? j.priority],
    ['Lost leases', j.lost_count || null], ['Group', j.group_id], ['Waits for', j.parents.length ? j.parents.map((p) => `#${p}`).join(', ') : null],
    ['Waited for by', j.dependants.length ? j.dependants.map((d) => `#${d}`).join(', ') : null],
    ['Arguments', j.args === undefined ? null : JSON.stringify(j.args)]].filter(([, v]) => v !== undefined && v !== null);
  $('detail-facts').replaceChildren(...facts.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]));
  $('detail-errors').replaceChildren(...(j.errors.length ? j.errors.map((e) => el('tr', {},
    el('td', {}, e.attempt), el('td', { title: e.at }, ago(new Date(e.at))), el('td', { class: 'reason' }, e.error)))
    : [el('tr', {}, el('td', { colspan: 3, class: 'muted' }, 'No attempt has failed.'))]));
  $('detail').hidden = false;
  if (focus) {
    $('detail-title').tabIndex = -1;
    $('detail-title').focus();
  }
}

// act runs action on every job of ids, one after the other, and says what came of each.
async function act(name, ids) {
  const a = ACTIONS[name];
  const noun = ids.length === 1 ? `job ${ids[0]}` : `${ids.length} jobs`;
  if (a.confirm && !window.confirm(`${a.label} ${noun}? This cannot be undone.`)) return;
  state.busy = true;
  updateSelection();
  clearNotice();
  const refused = [];
  let done = 0;
  for (const id of ids) {
    try {
      await a.call(id);
      done++;
      state.selected.delete(id);
    } catch (err) {
      refused.push(`job ${id}: ${err.message}${err.status ? ` (HTTP ${err.status})` : ''}`);
    }
  }
  const parts = [];
  if (done) parts.push(`${a.done} ${done === 1 && ids.length === 1 ? `job ${ids[0]}` : `${done} job${done === 1 ? '' : 's'}`}.`);
  if (refused.length) parts.push(`Refused: ${refused.join('; ')}.`);
  $('outcome').textContent = parts.join(' ');
  $('outcome').dataset.status = refused.length ? 'ERROR' : 'READY';
  state.busy = false;
  await refresh();
}

function choose(kind, status, before = '') {
  state.kind = kind;
  state.status = status;
  state.before = before;
  state.limit = PAGE;
  $('filter-kind').value = kind;
  $('filter-status').value = status;
  $('filter-before').value = before;
  refresh();
}

// refresh reads the counts and the jobs again (and the open job), then schedules the next.
let timer = 0;
async function refresh() {
  clearTimeout(timer);
  try {
    const [counts, kinds, jobs] = await Promise.all([api('GET', '/v1/admin/jobs/counts'), api('GET', '/v1/admin/jobs/kinds'), fetchJobs()]);
    state.jobs = jobs;
    keepFocus(() => {
      renderCounts(counts.counts);
      renderKinds(kinds.kinds);
      renderJobs();
    });
    if (state.detail) await showDetail(state.detail, false);
    $('updated').textContent = `Updated ${new Date().toLocaleTimeString()}`;
    clearNotice('error');
  } catch (err) {
    fail(err, 'Reading the queue');
  }
  timer = setTimeout(refresh, REFRESH_MS);
}

function main() {
  if (!initSession()) return;
  $('filters').addEventListener('change', () => {
    const before = $('filter-before');
    if (!before.checkValidity()) return; // the browser says why
    choose($('filter-kind').value, $('filter-status').value, before.value);
  });
  $('show-more').addEventListener('click', () => {
    state.limit = Math.min(state.limit + PAGE, MAX_LIMIT);
    refresh();
  });
  $('filters').addEventListener('submit', (ev) => ev.preventDefault());
  for (const name of Object.keys(ACTIONS)) {
    $(`${name}-selected`).addEventListener('click', () => act(name, [...state.selected]));
  }
  $('select-all').addEventListener('change', (ev) => {
    state.selected = new Set(ev.target.checked ? state.jobs.map((j) => j.id) : []);
    keepFocus(renderJobs);
  });
  $('detail-close').addEventListener('click', () => {
    $('detail').hidden = true;
    state.detail = 0;
  });
  refresh();
}

main();
