// "Sign in" with a real identity provider, in a real browser: Debian's Chromium
// (/usr/bin/chromium) driven by playwright-core, headless. Run by
// cmd/api/signin_page_e2e_test.go, which checks the events this script prints (one JSON object
// a line on stdout).
//
//   PLAYHEAD_URL       the server, http://127.0.0.1:port, configured with the provider
//   PLAYHEAD_ISSUER    the provider, http://localhost:port/ (another origin than the server's)
//   PLAYHEAD_USERNAME, PLAYHEAD_PASSWORD   the member at the provider
//   PLAYHEAD_SHOTS     where the signed-in home page's screenshot goes
//   CHROMIUM           the browser, /usr/bin/chromium unless set
//
// Events: signedOut (the home page without a token: the sign-in card and its buttons),
// login (the provider's form, reached by "Sign in"), signedIn (back on the home page: the
// header, the continue-watching titles, the stored token's claims, axe-core's violations),
// expired (the page once the token's exp has passed: the sign-in card's text; a sign-in is
// then begun and left at the provider's form),
// signOut (where "Sign out" led, whether the tab still holds a token, and the keys left in
// sessionStorage and localStorage), again (the home page after the sign-out, and whether
// "Sign in" asks for the password again, the provider's session being over), returnTo (where
// hostile ways back resolve), hostileReturn (where a whole sign-in asking to return to another
// host lands), done (console errors on Playhead's pages until then, the requests to other
// origins than the server's and the provider's), replay and forgedState (the callback
// replayed, and with a state this tab never made: the page's status, the token kept, the
// address), unreachable
// (the notice of "Sign in" when the browser cannot reach the provider). Any failure: an
// "error" event, and exit status 1.
//
// Timeouts only bound how long a step may wait before the script gives up.

import { join } from 'node:path';
import { accessibility, emit, env, run, withBrowser } from './harness.mjs';

const BASE = env('PLAYHEAD_URL');
const ISSUER = env('PLAYHEAD_ISSUER');
const USERNAME = env('PLAYHEAD_USERNAME');
const PASSWORD = env('PLAYHEAD_PASSWORD');
const SHOTS = env('PLAYHEAD_SHOTS');
const STEP_WAIT = 30_000;

// HOSTILE_RETURNS are ways back that name another host, or a script, in the forms browsers
// accept: scheme-relative, backslashes, tabs and line breaks the URL parser drops, a path the
// parser collapses to //, schemes, encodings.
const HOSTILE_RETURNS = ['//evil.example/', '/\\evil.example/', '\\\\evil.example/', '/\t/evil.example/', '/\n/evil.example/',
  ' //evil.example/', '\t//evil.example/', 'https://evil.example/', 'http:evil.example', 'javascript:alert(1)',
  'JaVaScRiPt:alert(1)', 'data:text/html,<script>alert(1)</script>', '///evil.example/', '/.//evil.example/',
  '%2F%2Fevil.example/', 'https:/evil.example', '//evil.example@127.0.0.1/', 'http://127.0.0.1:1/'];

async function main() {
  const problems = [];
  const strangers = new Set();
  await withBrowser({}, async (context) => {
    const page = await context.newPage();
    // Only Playhead's pages are judged: the provider's own pages are not this project's.
    const ours = () => new URL(page.url()).origin === new URL(BASE).origin;
    page.on('console', (msg) => {
      if (msg.type() === 'error' && ours()) problems.push(`console error: ${msg.text()} (${page.url()})`);
    });
    page.on('pageerror', (err) => problems.push(`uncaught exception: ${err.message}`));
    // The nonce of each authorization request, and the last address the provider sent the
    // browser back to (for the replay).
    const nonces = [];
    let callback = '';
    page.on('request', (req) => {
      const u = new URL(req.url());
      if (u.origin !== new URL(BASE).origin && u.origin !== new URL(ISSUER).origin) strangers.add(u.origin);
      if (u.origin === new URL(ISSUER).origin && u.pathname === '/auth') nonces.push(u.searchParams.get('nonce'));
      if (u.origin === new URL(BASE).origin && u.pathname === '/signin/callback' && u.search) callback = u.href;
    });

    // The card without a token, once the page learnt of the provider.
    await page.goto(`${BASE}/`);
    await page.waitForSelector('#signin-provider', { timeout: STEP_WAIT });
    emit('signedOut', await page.evaluate(() => ({
      heading: document.querySelector('#signin h1').textContent,
      button: document.getElementById('signin-provider').textContent,
      paste: Boolean(document.getElementById('token')),
    })));

    // To the provider's login form, which is the provider's page, not ours.
    await Promise.all([page.waitForURL((u) => u.pathname === '/login/username', { timeout: STEP_WAIT }),
      page.click('#signin-provider')]);
    emit('login', { origin: new URL(page.url()).origin, form: Boolean(await page.$('#username')) });
    await page.fill('#username', USERNAME);
    await page.fill('#password', PASSWORD);
    await Promise.all([page.waitForURL(`${BASE}/`, { timeout: STEP_WAIT }), page.click('button[type=submit]')]);

    // Back home, signed in: the member's list.
    await page.waitForSelector('#items li', { timeout: STEP_WAIT });
    const signedIn = await page.evaluate(() => {
      const token = sessionStorage.getItem('playhead.token') || '';
      let claims = null;
      try {
        claims = JSON.parse(atob(token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/')));
      } catch {
        // not a JWT: claims stays null
      }
      return {
        member: document.getElementById('member').textContent,
        signout: document.getElementById('signout').textContent,
        titles: [...document.querySelectorAll('#items .item-title')].map((a) => a.textContent),
        claims,
        address: location.href,
      };
    });
    signedIn.accessibility = await accessibility(page, 'signed in');
    signedIn.nonce = nonces[0];
    emit('signedIn', signedIn);
    await page.screenshot({ path: join(SHOTS, 'home-signed-in.png'), fullPage: true });

    // An expired sign-in: the page asks to sign in again, with the provider's button.
    const held = await page.evaluate(() => {
      const all = { ...sessionStorage };
      const [head, body, sig] = all['playhead.token'].split('.');
      const claims = JSON.parse(atob(body.replace(/-/g, '+').replace(/_/g, '/')));
      claims.exp = Math.floor(Date.now() / 1000) - 120;
      const expired = btoa(JSON.stringify(claims)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
      sessionStorage.setItem('playhead.token', `${head}.${expired}.${sig}`);
      return all;
    });
    await page.reload();
    await page.waitForSelector('#signin-provider', { timeout: STEP_WAIT });
    emit('expired', { text: await page.evaluate(() => document.getElementById('signin').innerText) });
    // A sign-in begun and left at the provider's form: oidc-client-ts keeps its state in the tab,
    // which the sign-out below must clear with the rest.
    await Promise.all([page.waitForURL((u) => u.pathname === '/login/username', { timeout: STEP_WAIT }),
      page.click('#signin-provider')]);
    await page.goto(`${BASE}/`);
    // The same sign-in back (the token and what oidc-client-ts kept), for the sign-out.
    await page.evaluate((all) => {
      for (const [k, v] of Object.entries(all)) sessionStorage.setItem(k, v);
    }, held);
    await page.reload();
    await page.waitForSelector('#session:not([hidden])', { timeout: STEP_WAIT });

    // "Sign out": the token goes, and the provider ends its session on its own page.
    await Promise.all([page.waitForURL((u) => u.origin === new URL(ISSUER).origin, { timeout: STEP_WAIT }),
      page.click('#signout')]);
    const landed = page.url();
    await page.goto(`${BASE}/`);
    await page.waitForSelector('#signin-provider', { timeout: STEP_WAIT });
    emit('signOut', {
      landed: new URL(landed).pathname,
      stored: await page.evaluate(() => sessionStorage.getItem('playhead.token')),
      keys: await page.evaluate(() => [...Object.keys(sessionStorage), ...Object.keys(localStorage)]),
    });

    // Signing in again asks for the password: the provider's session ended with ours.
    await Promise.all([page.waitForURL((u) => u.origin === new URL(ISSUER).origin, { timeout: STEP_WAIT }),
      page.click('#signin-provider')]);
    await page.waitForLoadState('load');
    emit('again', { path: new URL(page.url()).pathname, form: Boolean(await page.$('#password')) });

    // Where a finished sign-in returns to, judged by the browser's own URL parser: every
    // form that could name another host resolves on this origin.
    await page.goto(`${BASE}/`);
    await page.waitForSelector('#signin-provider', { timeout: STEP_WAIT });
    emit('returnTo', { returns: await page.evaluate(async (forms) => {
      const { sameOriginURL } = await import('/static/js/common.mjs');
      return forms.map((form) => ({ form, to: sameOriginURL(form) }));
    }, HOSTILE_RETURNS) });

    // A whole sign-in whose state asks to return to another host lands on this origin.
    await Promise.all([page.waitForURL((u) => u.pathname === '/login/username', { timeout: STEP_WAIT }),
      page.evaluate(async () => {
        const { signInManager } = await import('/static/js/common.mjs');
        const s = await signInManager();
        // Not awaited: the navigation it starts would end this evaluation.
        setTimeout(() => s.manager.signinRedirect({ state: { returnTo: '/\\evil.example/' } }));
      })]);
    await page.fill('#username', USERNAME);
    await page.fill('#password', PASSWORD);
    await Promise.all([page.waitForURL((u) => u.pathname !== '/login/username', { timeout: STEP_WAIT }),
      page.click('button[type=submit]')]);
    await page.waitForURL((u) => u.pathname !== '/signin/callback' && u.pathname !== '/auth/callback', { timeout: STEP_WAIT })
      .catch(() => {});
    emit('hostileReturn', { address: page.url() });
    // What follows fails on purpose, and the pages log such failures as console errors.
    emit('done', { problems, strangers: [...strangers] });

    // The provider's answer replayed, and one with a state this tab never made: no token is
    // kept, the page says the sign-in did not finish, and the code leaves the address bar.
    for (const [event, address] of [['replay', callback], ['forgedState', `${BASE}/signin/callback?code=forged&state=forged`]]) {
      await page.goto(`${BASE}/`);
      // The token goes, oidc-client-ts's records stay: the replay meets the state as the first
      // answer left it.
      await page.evaluate(() => ['playhead.token', 'playhead.signedIn'].forEach((k) => sessionStorage.removeItem(k)));
      await page.goto(address);
      await page.waitForFunction(() => document.getElementById('signin-status').textContent.includes('did not finish'),
        null, { timeout: STEP_WAIT }).catch(() => {});
      emit(event, await page.evaluate(() => ({
        text: document.getElementById('signin-status').textContent,
        stored: sessionStorage.getItem('playhead.token'),
        address: location.href,
      })));
    }

    // The provider unreachable from the browser: "Sign in" says so on the page.
    await page.route(`${new URL(ISSUER).origin}/**`, (route) => route.abort());
    await page.goto(`${BASE}/`);
    await page.waitForSelector('#signin-provider', { timeout: STEP_WAIT });
    await page.click('#signin-provider');
    await page.waitForSelector('#notice:not([hidden])', { timeout: STEP_WAIT }).catch(() => {});
    emit('unreachable', await page.evaluate(() => ({
      text: document.getElementById('notice').hidden ? '' : document.getElementById('notice-text').textContent,
      address: location.href,
    })));
  });
}

run('signin.mjs', main);
