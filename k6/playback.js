// Playhead's continue-watching scenario for k6 (https://k6.io), after seed 003: every virtual
// user is a player that opens its media (POST), reports its position every 5 s with jitter
// (PUT), and now and then reads its continue-watching list (GET). See k6/README.md.
//
// Environment:
//   BASE_URL     Playhead's public address            (default http://127.0.0.1:8080)
//   TOKENS       file of member tokens, one per line  (default ./tokens.txt; `playhead token --count N`)
//   ADMIN_TOKEN  an admin token, to register the media the players watch (required)
//   PLAYERS      virtual users at the plateau         (default 2000)
//   RAMP, HOLD   ramp-up and plateau durations        (default 1m and 3m)
//   MEDIA        media items to register              (default 20)
import http from 'k6/http';
import { check, sleep, fail } from 'k6';
import { SharedArray } from 'k6/data';
import exec from 'k6/execution';

const BASE = __ENV.BASE_URL || 'http://127.0.0.1:8080';
const PLAYERS = parseInt(__ENV.PLAYERS || '2000', 10);
const MEDIA = parseInt(__ENV.MEDIA || '20', 10);
const PERIOD_S = 5;
const LIST_EVERY = 60; // one list read per 5 minutes of watching (a player reads it on its home screen)

const tokens = new SharedArray('tokens', function () {
  return open(__ENV.TOKENS || './tokens.txt').split('\n').filter((line) => line.length > 0);
});

export const options = {
  scenarios: {
    players: {
      executor: 'ramping-vus',
      startVUs: 0,
      stages: [
        { duration: __ENV.RAMP || '1m', target: PLAYERS },
        { duration: __ENV.HOLD || '3m', target: PLAYERS },
        { duration: '15s', target: 0 },
      ],
      gracefulRampDown: '10s',
    },
  },
  thresholds: {
    http_req_failed: ['rate<0.001'],
    'http_req_duration{op:put}': ['p(95)<25', 'p(99)<50'],
    'http_req_duration{op:open}': ['p(99)<200'],
    'http_req_duration{op:list}': ['p(99)<200'],
  },
};

// setup registers the media every player watches and hands their ids to the VUs.
export function setup() {
  if (!__ENV.ADMIN_TOKEN) {
    fail('ADMIN_TOKEN is required: playhead token --member 1 --admin');
  }
  if (tokens.length < PLAYERS) {
    fail(`TOKENS has ${tokens.length} tokens, PLAYERS needs ${PLAYERS}`);
  }
  const admin = { headers: { Authorization: `Bearer ${__ENV.ADMIN_TOKEN}`, 'Content-Type': 'application/json' } };
  const ids = [];
  for (let i = 0; i < MEDIA; i++) {
    const body = JSON.stringify({ title: `k6 media ${i}`, duration_ms: 24 * 3600 * 1000 });
    const res = http.post(`${BASE}/v1/admin/media`, body, admin);
    if (res.status !== 201) {
      fail(`register media: ${res.status} ${res.body}`);
    }
    ids.push(res.json('id'));
  }
  return { media: ids };
}

// Per-VU state: each VU runs its own copy of this module.
let opened = false;
let position = 0;
let reports = 0;

export default function (data) {
  const vu = exec.vu.idInTest - 1;
  const mediaID = data.media[vu % data.media.length];
  const params = (op) => ({
    headers: { Authorization: `Bearer ${tokens[vu]}`, 'Content-Type': 'application/json' },
    tags: { op: op, name: `/v1/playback/${op === 'list' ? '' : '{mediaID}'}` },
  });

  if (!opened) {
    const res = http.post(`${BASE}/v1/playback/${mediaID}`, null, params('open'));
    check(res, { 'open: 200': (r) => r.status === 200 });
    if (res.status === 200) {
      position = res.json('position_ms');
      opened = true;
    }
    // Start reporting at a random point of the period, as real players do.
    sleep(Math.random() * PERIOD_S);
    return;
  }

  position += PERIOD_S * 1000;
  reports++;
  const put = http.put(`${BASE}/v1/playback/${mediaID}`, JSON.stringify({ position_ms: position }), params('put'));
  check(put, { 'put: 204': (r) => r.status === 204 });

  if (reports % LIST_EVERY === 0) {
    const list = http.get(`${BASE}/v1/playback?limit=20`, params('list'));
    check(list, { 'list: 200': (r) => r.status === 200 });
  }
  // Every 5 s, with ±0.5 s of jitter.
  sleep(PERIOD_S + (Math.random() - 0.5));
}
