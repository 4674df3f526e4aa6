// An upload with the official tus client, tus-js-client (npm, pinned in package-lock.json),
// in Node: what an integrator's uploader does. Run by cmd/api/tus_cluster_test.go, which
// points it at a fault proxy in front of HAProxy and two Playhead nodes and cuts the
// connection under it; the client resumes by itself (HEAD, then PATCH from the offset).
//
//   PLAYHEAD_URL    the endpoint's origin, http://127.0.0.1:port
//   PLAYHEAD_TOKEN  a member's token, sent on every request
//   PLAYHEAD_VIDEO  the file to upload
//   PLAYHEAD_TITLE  its title
//
// It prints one JSON event a line on stdout: "created" (the upload's URL), "retry" (after each
// failed request: its error and status), "done" (the media id, every answer the client got:
// method, status, which node served it). A failure: an "error" event, and exit status 1.

import { createReadStream, statSync } from 'node:fs';
import { basename } from 'node:path';
import tusClient from 'tus-js-client';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};
const BASE = env('PLAYHEAD_URL');
const TOKEN = env('PLAYHEAD_TOKEN');
const VIDEO = env('PLAYHEAD_VIDEO');
const TITLE = env('PLAYHEAD_TITLE');

const emit = (event, data = {}) => process.stdout.write(`${JSON.stringify({ event, ...data })}\n`);

const answers = [];
const upload = new tusClient.Upload(createReadStream(VIDEO), {
  endpoint: `${BASE}/v1/uploads`,
  uploadSize: statSync(VIDEO).size,
  headers: { Authorization: `Bearer ${TOKEN}` },
  metadata: { filename: basename(VIDEO), title: TITLE, visibility: 'PRIVATE' },
  // A retry after a dropped connection comes at once; later ones back off. Each resumed upload
  // that made progress starts the list again.
  retryDelays: [0, 200, 500, 1000, 2000, 3000, 5000],
  onShouldRetry(err, attempt) {
    const status = err.originalResponse ? err.originalResponse.getStatus() : 0;
    emit('retry', { attempt, status, message: err.message.split('\n')[0] });
    return status < 400 || status >= 500 || status === 409 || status === 423;
  },
  onUploadUrlAvailable() {
    emit('created', { url: upload.url });
  },
  onAfterResponse(req, res) {
    answers.push({
      method: req.getMethod(),
      status: res.getStatus(),
      servedBy: res.getHeader('X-Served-By') || '',
      offset: res.getHeader('Upload-Offset') || '',
    });
  },
  onSuccess(payload) {
    const mediaID = Number(payload.lastResponse.getHeader('Playhead-Media-Id'));
    emit('done', { url: upload.url, mediaID, answers });
  },
  onError(err) {
    emit('error', { message: err.message, answers });
    process.exitCode = 1;
  },
});
upload.start();
