// A #token=… link opened over a signed-in tab, in a real browser: Debian's Chromium
// (/usr/bin/chromium) driven by playwright-core, headless. Run by
// cmd/api/session_page_e2e_test.go, which checks the events this script prints (one JSON object
// a line on stdout).
//
//   PLAYHEAD_URL      the server, http://127.0.0.1:port
//   PLAYHEAD_TOKEN    member A's token: the tab signs in with it first (#token=…)
//   PLAYHEAD_OTHER    member B's token: the link opened over the signed-in tab
//   PLAYHEAD_OTHER2   another token of member B: a link of the member already signed in
//   PLAYHEAD_OTHER_ADMIN  a token of member B with the admin role: the same member, another role
//   CHROMIUM          the browser, /usr/bin/chromium unless set
//
// Events, each with what the page shows (the header's member, the question if asked), the
// token the tab holds, the address and which tokens the page's API calls carried since the
// step before: signedOut (the home page without a token: the card's heading, whether it has
// the provider's button and the paste form), first (#token=A in a new tab), prompt (#token=B over it), stayed (after
// "Stay"), switched (#token=B again, then "Switch"), same (#token=B2 over B), role (#token=BA,
// B's admin token, over B2), done (axe-core's violations on the question, console errors). Any failure: an "error" event, and exit status 1.
//
// Timeouts only bound how long a step may wait before the script gives up.

import { accessibility, emit, env, run, withBrowser } from './harness.mjs';

const BASE = env('PLAYHEAD_URL');
const TOKENS = { A: env('PLAYHEAD_TOKEN'), B: env('PLAYHEAD_OTHER'), B2: env('PLAYHEAD_OTHER2'), BA: env('PLAYHEAD_OTHER_ADMIN') };
const STEP_WAIT = 30_000;

// nameOf says which of the test's tokens a header or stored value is.
const nameOf = (value) => {
  for (const [name, tok] of Object.entries(TOKENS)) if (value === tok || value === `Bearer ${tok}`) return name;
  return value ? 'other' : 'none';
};

async function main() {
  const problems = [];
  await withBrowser({}, async (context) => {
    const page = await context.newPage();
    page.on('console', (msg) => {
      if (msg.type() === 'error') problems.push(`console error: ${msg.text()}`);
    });
    page.on('pageerror', (err) => problems.push(`uncaught exception: ${err.message}`));
    let sent = new Set();
    page.on('request', (req) => {
      const auth = req.headers().authorization;
      if (auth) sent.add(nameOf(auth));
    });

    // state reads what the tab shows and holds once the page settled on the session or the
    // question, and the tokens its API calls carried since the last state.
    const state = async () => {
      await page.waitForSelector('#session:not([hidden]), #switch', { timeout: STEP_WAIT });
      const s = await page.evaluate(() => ({
        member: document.getElementById('session').hidden ? '' : document.getElementById('member').textContent,
        question: document.getElementById('switch') ? document.getElementById('switch').innerText : '',
        focused: document.activeElement ? document.activeElement.id : '',
        stored: sessionStorage.getItem('playhead.token'),
        hash: location.hash,
      }));
      s.stored = nameOf(s.stored);
      s.sent = [...sent].sort();
      sent = new Set();
      return s;
    };
    // open follows a link to the home page with a token, as from another site: a new document
    // (from about:blank, so the address differs by more than its hash).
    const open = async (name) => {
      await page.goto('about:blank');
      await page.goto(`${BASE}/#token=${encodeURIComponent(TOKENS[name])}`, { waitUntil: 'load' });
    };

    // No token, on a server without an identity provider: the card to paste one, and no
    // "Sign in" button, once the page has read /signin.json.
    await page.goto(`${BASE}/`);
    await page.waitForSelector('#signin[data-signin]', { timeout: STEP_WAIT });
    emit('signedOut', await page.evaluate(() => ({
      signin: document.getElementById('signin').dataset.signin,
      heading: document.querySelector('#signin h1').textContent,
      button: Boolean(document.getElementById('signin-provider')),
      paste: Boolean(document.getElementById('token')),
    })));

    await open('A');
    emit('first', await state());

    await open('B');
    const prompt = await state();
    emit('prompt', { ...prompt, accessibility: await accessibility(page) });
    if (!prompt.question) throw new Error(`no question asked: the link switched the tab to token ${prompt.stored}`);

    await Promise.all([page.waitForEvent('load'), page.click('#switch-stay')]);
    emit('stayed', await state());

    await open('B');
    await state();
    await Promise.all([page.waitForEvent('load'), page.click('#switch-accept')]);
    emit('switched', await state());

    await open('B2');
    emit('same', await state());

    await open('BA');
    emit('role', await state());

    emit('done', { problems });
  });
}

run('session.mjs', main);
