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
// expired (the page once the token's exp has passed: the sign-in card's text),
// signOut (where "Sign out" led and whether the tab still holds a token), again (the home
// page after the sign-out, and whether "Sign in" asks for the password again, the provider's
// session being over), done (console errors on Playhead's pages, the requests to other origins than the server's
// and the provider's). Any failure: an "error" event, and exit status 1.
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
    page.on('request', (req) => {
      const origin = new URL(req.url()).origin;
      if (origin !== new URL(BASE).origin && origin !== new URL(ISSUER).origin) strangers.add(origin);
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
    emit('signedIn', signedIn);
    await page.screenshot({ path: join(SHOTS, 'home-signed-in.png'), fullPage: true });

    // An expired sign-in: the page asks to sign in again, with the provider's button.
    const held = await page.evaluate(() => {
      const real = sessionStorage.getItem('playhead.token');
      const [head, body, sig] = real.split('.');
      const claims = JSON.parse(atob(body.replace(/-/g, '+').replace(/_/g, '/')));
      claims.exp = Math.floor(Date.now() / 1000) - 120;
      const expired = btoa(JSON.stringify(claims)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
      sessionStorage.setItem('playhead.token', `${head}.${expired}.${sig}`);
      return real;
    });
    await page.reload();
    await page.waitForSelector('#signin-provider', { timeout: STEP_WAIT });
    emit('expired', { text: await page.evaluate(() => document.getElementById('signin').innerText) });
    // The same sign-in back, for the sign-out.
    await page.evaluate((real) => {
      sessionStorage.setItem('playhead.token', real);
      sessionStorage.setItem('playhead.signedIn', '1');
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
    });

    // Signing in again asks for the password: the provider's session ended with ours.
    await Promise.all([page.waitForURL((u) => u.origin === new URL(ISSUER).origin, { timeout: STEP_WAIT }),
      page.click('#signin-provider')]);
    await page.waitForLoadState('load');
    emit('again', { path: new URL(page.url()).pathname, form: Boolean(await page.$('#password')) });

    emit('done', { problems, strangers: [...strangers] });
  });
}

run('signin.mjs', main);
