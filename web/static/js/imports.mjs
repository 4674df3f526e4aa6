// The import page (admins): choose a sheet file or paste a Google Sheets link, see the dry run's
// report row by row, confirm, then watch the rows move to READY.

import { api, APIError, authHeader, el, fail, clearNotice, initSession } from './common.mjs';

const POLL_MS = 2000;
const FINISHED = new Set(['READY', 'FAILED', 'REJECTED']);

const $ = (id) => document.getElementById(id);

// send posts the chosen source to POST /v1/admin/imports (dryRun: ?dry_run=true).
async function send(source, dryRun) {
  const path = `/v1/admin/imports${dryRun ? '?dry_run=true' : ''}`;
  if (source.url) return api('POST', path, { body: { sheet_url: source.url } });
  const form = new FormData();
  form.append('file', source.file);
  let res;
  try {
    res = await fetch(path, { method: 'POST', headers: { Authorization: authHeader() }, body: form, cache: 'no-store' });
  } catch (err) {
    throw new APIError(0, `the server could not be reached (${err.message})`);
  }
  const data = await res.json().catch(() => null);
  if (!res.ok) throw new APIError(res.status, (data && data.error) || res.statusText);
  return data;
}

// chosenSource returns the file or the link the form holds, or null with a notice.
function chosenSource() {
  const file = $('sheet-file').files[0];
  const url = $('sheet-url').value.trim();
  if (file && url) return { error: 'Choose a file or paste a link, not both.' };
  if (file) return { file, name: file.name };
  if (url) return { url, name: 'the linked sheet' };
  return { error: 'Choose a spreadsheet file or paste a Google Sheets link.' };
}

// videoCell links a row's video, or shows its text when it is not an http(s) URL: a rejected
// row's cell is whatever the sheet held ("javascript:…" included; the page's CSP would block
// it too, but it is never made a link).
function videoCell(row) {
  const text = row.label || row.video_url;
  if (!row.video_url) return '';
  if (!/^https?:\/\//i.test(row.video_url)) return el('span', { title: row.video_url }, text);
  return el('a', { href: row.video_url, rel: 'noreferrer', target: '_blank', title: row.video_url }, text);
}

function mediaCell(row) {
  if (row.state === 'READY' && row.media_id) return el('a', { href: `/watch/${row.media_id}`, class: 'media-link' }, `Watch #${row.media_id}`);
  return row.state;
}

// render shows the rows of a report (dry run or import).
function render(report, dryRun) {
  const body = $('rows-body');
  body.replaceChildren(...report.rows.map((r) => el('tr', { dataset: { row: r.row, state: r.state } },
    el('td', {}, r.row),
    el('td', {}, r.collection),
    el('td', {}, r.chapter ?? ''),
    el('td', {}, r.order ?? ''),
    el('td', { class: 'video' }, videoCell(r)),
    el('td', {}, el('span', { class: 'state', dataset: { state: r.state } }, dryRun ? r.state : mediaCell(r))),
    el('td', { class: 'reason' }, r.reason || ''))));
  const sheet = report.sheet ? ` · sheet “${report.sheet}”` : '';
  $('summary').textContent = `${report.accepted} accepted · ${report.rejected} rejected${sheet}`;
  $('report').hidden = false;
}

function describeProgress(p) {
  const counts = Object.entries(p.counts).map(([state, n]) => `${n} ${state}`).join(' · ');
  if (p.remaining === 0) return `Done: ${counts}`;
  const left = p.estimated_seconds_left === undefined ? 'estimating…' : `about ${Math.max(1, Math.round(p.estimated_seconds_left / 60))} min left`;
  return `${p.remaining} on their way (${left}) · ${counts}`;
}

// watch polls the import until every row has finished.
async function watch(id) {
  for (;;) {
    let imp;
    try {
      imp = await api('GET', `/v1/admin/imports/${id}`);
    } catch (err) {
      fail(err, 'Reading the import');
      return;
    }
    render(imp, false);
    $('progress').textContent = describeProgress(imp.progress);
    $('progress').dataset.status = imp.progress.remaining === 0 ? 'READY' : '';
    if (imp.rows.every((r) => FINISHED.has(r.state))) {
      $('restart').hidden = false;
      return;
    }
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

function main() {
  if (!initSession()) return;
  let source = null;
  $('import-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearNotice();
    const chosen = chosenSource();
    if (chosen.error) {
      fail(new Error(chosen.error), 'Nothing to check');
      return;
    }
    $('check').disabled = true;
    try {
      const report = await send(chosen, true);
      source = chosen;
      $('report-title').textContent = `Check of ${chosen.name}`;
      $('rows-caption').textContent = 'Nothing is created yet. Rejected rows will be skipped; fix them in the sheet and check again, or import the accepted ones.';
      $('progress').textContent = '';
      render(report, true);
      $('confirm').textContent = `Import ${report.accepted} row${report.accepted === 1 ? '' : 's'}`;
      $('confirm').hidden = report.accepted === 0;
    } catch (err) {
      fail(err, 'Checking the sheet');
    } finally {
      $('check').disabled = false;
    }
  });
  $('confirm').addEventListener('click', async () => {
    $('confirm').disabled = true;
    try {
      const created = await send(source, false);
      $('confirm').hidden = true;
      $('import-form').hidden = true;
      $('report-title').textContent = `Import #${created.id}`;
      $('rows-caption').textContent = 'Rows move to READY as their videos are downloaded and encoded.';
      await watch(created.id);
    } catch (err) {
      fail(err, 'Importing');
    } finally {
      $('confirm').disabled = false;
    }
  });
  $('restart').addEventListener('click', () => location.reload());
}

main();
