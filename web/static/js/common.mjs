// Shared by the pages: the member's token (kept in sessionStorage), the sign-in with the
// identity provider when the server names one, calls to the /v1 API, the error notice and
// small formatting helpers. No framework: plain DOM.

const TOKEN_KEY = 'playhead.token';
// SIGNED_IN_KEY marks a token that came from the provider's sign-in, so that "Sign out" also
// ends the provider's session.
const SIGNED_IN_KEY = 'playhead.signedIn';
// OIDC_ASSET is oidc-client-ts's browser build (the global `oidc`), copied by `make web`.
const OIDC_ASSET = '/static/vendor/oidc-client-ts.min.js';
// OIDC_PREFIX starts every key oidc-client-ts writes to a storage (WebStorageStateStore's
// default prefix).
const OIDC_PREFIX = 'oidc.';

// APIError is a failed API call: status 0 when the request never got an answer.
export class APIError extends Error {
  constructor(status, message) {
    super(message);
    this.name = 'APIError';
    this.status = status;
  }
}

// claims decodes a JWT's payload without checking it (the server does): enough to show who is
// signed in and when the token expires.
function claims(token) {
  const parts = token.split('.');
  if (parts.length !== 3) return null;
  try {
    const json = atob(parts[1].replace(/-/g, '+').replace(/_/g, '/'));
    const c = JSON.parse(json);
    return typeof c === 'object' && c !== null ? c : null;
  } catch {
    return null;
  }
}

// takeTokenFromURL removes a token passed as #token=… from the address bar, so it is neither
// bookmarked nor shared by copying the URL, and keeps it in sessionStorage when the tab holds
// no token yet, or one of the same member and role. Otherwise it returns the link's token
// without keeping it: a link opened over a signed-in page must not switch the member silently,
// or the page would then act, and upload, as whoever made the link (login CSRF).
// initSession asks first.
function takeTokenFromURL() {
  const m = location.hash.match(/^#(?:.*&)?token=([^&]+)/);
  if (!m) return null;
  history.replaceState(null, '', location.pathname + location.search);
  let offered;
  try {
    offered = decodeURIComponent(m[1]).trim();
  } catch {
    return null; // not even a token: ignored
  }
  const current = token();
  if (!current || sameIdentity(claims(current), claims(offered))) {
    sessionStorage.setItem(TOKEN_KEY, offered);
    return null;
  }
  return offered;
}

// sameIdentity reports whether two tokens' claims name the same member in the same role.
function sameIdentity(a, b) {
  return Boolean(a && b && a.sub !== undefined && String(a.sub) === String(b.sub) && a.role === b.role);
}

// who names a token's member for a person: "member 7", "member 7 (admin)".
function who(c) {
  return c && c.sub !== undefined ? `member ${c.sub}${c.role === 'admin' ? ' (admin)' : ''}` : 'an unreadable token';
}

// showSwitchPrompt asks whether to switch from the tab's member to the one of a #token=… link,
// keeping the current one unless the person chooses otherwise.
function showSwitchPrompt(current, offered) {
  document.getElementById('session').hidden = true;
  const main = document.getElementById('main');
  main.hidden = true;
  const now = who(claims(current));
  const link = who(claims(offered));
  const stay = el('button', { type: 'button', class: 'primary', id: 'switch-stay', onclick: () => location.reload() },
    `Stay signed in as ${now}`);
  const card = el('section', { class: 'card signin', id: 'switch', 'aria-labelledby': 'switch-title' },
    el('h1', { id: 'switch-title' }, 'Switch to another member?'),
    el('p', {}, `This tab is signed in as ${now}. The link you opened signs in as ${link}.`),
    el('p', { class: 'muted' }, `If you switch, these pages show, play and upload as ${link}. `
      + 'Only switch if you asked for this link.'),
    el('div', { class: 'actions' }, stay,
      el('button', { type: 'button', class: 'secondary', id: 'switch-accept', onclick: () => {
        sessionStorage.setItem(TOKEN_KEY, offered);
        location.reload();
      } }, `Switch to ${link}`)));
  main.after(card);
  stay.focus();
}

function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

// The browser fetches media files itself (hls.js segments, native HLS, <img> thumbnails) with
// the signed URLs the API gives (GET /v1/media/{id}): they need no token, so no cookie ever
// carries one.
function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
  sessionStorage.removeItem(SIGNED_IN_KEY);
  // oidc-client-ts keeps the provider's answer (ID token, access token, profile) and the state
  // of sign-ins never finished under its prefix; none of it may outlive the sign-out. Both
  // storages: the library's own default for its state is localStorage.
  for (const store of [sessionStorage, localStorage]) {
    for (const key of Object.keys(store)) {
      if (key.startsWith(OIDC_PREFIX)) store.removeItem(key);
    }
  }
}

let signInSettings = null;

// signInConfig is GET /signin.json, fetched once: {enabled: false}, or the provider's issuer,
// the pages' client id and the audience Playhead requires. A failed fetch is "no sign-in":
// pasting a token still works.
function signInConfig() {
  signInSettings ??= fetch('/signin.json', { cache: 'no-cache' })
    .then((res) => (res.ok ? res.json() : { enabled: false }))
    .catch(() => ({ enabled: false }));
  return signInSettings;
}

// loadOIDC loads oidc-client-ts on the pages that need it, from this origin (script-src 'self').
function loadOIDC() {
  if (window.oidc) return Promise.resolve(window.oidc);
  return new Promise((resolve, reject) => {
    document.head.append(el('script', {
      src: OIDC_ASSET,
      onload: () => (window.oidc ? resolve(window.oidc) : reject(new Error('oidc-client-ts did not load'))),
      onerror: () => reject(new Error('oidc-client-ts is missing from this build (make web copies it)')),
    }));
  });
}

// signInManager returns oidc-client-ts's UserManager for the configured provider, or null when
// the server names none. The flow is the authorization code flow with PKCE; its state and the
// provider's answer stay in this tab (sessionStorage), like the token. No silent renew (it needs
// an iframe, which the policy forbids) and no refresh token asked for: an expired token sends
// the member through the provider again, which signs them straight back in while its own
// session lasts.
export async function signInManager() {
  const cfg = await signInConfig();
  if (!cfg.enabled) return null;
  const oidc = await loadOIDC();
  const store = new oidc.WebStorageStateStore({ store: window.sessionStorage });
  const manager = new oidc.UserManager({
    authority: cfg.issuer,
    client_id: cfg.client_id,
    redirect_uri: `${location.origin}/signin/callback`,
    response_type: 'code',
    scope: 'openid profile',
    userStore: store,
    stateStore: store,
    automaticSilentRenew: false,
    monitorSession: false,
    loadUserInfo: false,
  });
  return { manager, cfg };
}

// signIn sends the browser to the provider; it comes back to /signin/callback, then here.
async function signIn() {
  let provider = 'the identity provider';
  try {
    const s = await signInManager();
    provider = `the identity provider at ${new URL(s.cfg.issuer).host}`;
    // The nonce ties the ID token, which the pages may send as their token, to this sign-in:
    // oidc-client-ts keeps it with the state and refuses an ID token that does not carry it.
    const nonce = base64url(crypto.getRandomValues(new Uint8Array(24)));
    await s.manager.signinRedirect({ nonce, state: { returnTo: location.pathname + location.search } });
  } catch (err) {
    // fetch rejects with a TypeError when no answer came at all (the provider down, or out of
    // the browser's reach): say so, rather than the browser's "Failed to fetch".
    showNotice(err instanceof TypeError
      ? `Could not reach ${provider}: try again later, or paste a token.`
      : describe(err, 'Could not sign in with the provider'));
  }
}

// base64url encodes bytes without padding.
function base64url(bytes) {
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

// sameOriginURL resolves where a finished sign-in returns to: the absolute URL of to when it
// resolves on this origin, the home page otherwise. The browser's own parser judges, so the
// forms it reads as another host (//evil, /\evil, a tab or line break inside //, javascript:,
// encoded variants it decodes) cannot lead away; the absolute URL is returned because a path
// alone that starts with // would be read as a host again.
export function sameOriginURL(to) {
  const home = new URL('/', location.origin).href;
  if (typeof to !== 'string') return home;
  let u;
  try {
    u = new URL(to, location.origin);
  } catch {
    return home;
  }
  return u.origin === location.origin ? u.href : home;
}

// pagesToken picks the token the pages send from a provider's answer: the access token when it
// is a JWT for Playhead's audience, otherwise the ID token (an opaque access token, or one for
// another API), which Playhead accepts when its audience is the pages' client id.
export function pagesToken(user, audience) {
  const c = user.access_token ? claims(user.access_token) : null;
  const aud = c ? [].concat(c.aud) : [];
  return aud.includes(audience) ? user.access_token : user.id_token;
}

// keepSignIn stores the token of a finished provider sign-in.
export function keepSignIn(value) {
  sessionStorage.setItem(TOKEN_KEY, value);
  sessionStorage.setItem(SIGNED_IN_KEY, '1');
}

// signOut forgets the token and, for one of the provider's sign-in, ends the provider's session
// too (its end_session_endpoint, when it has one), whose own page then says so.
async function signOut() {
  const viaProvider = sessionStorage.getItem(SIGNED_IN_KEY) === '1';
  // The provider's ID token is read before everything is forgotten: it is the hint of the
  // provider's sign-out.
  let user = null;
  let s = null;
  if (viaProvider) {
    try {
      s = await signInManager();
      user = s ? await s.manager.getUser() : null;
    } catch (err) {
      console.warn('playhead: the provider sign-in could not be read:', err);
    }
  }
  forgetToken();
  if (s) {
    try {
      const meta = await s.manager.metadataService.getMetadata();
      if (meta.end_session_endpoint) {
        await s.manager.signoutRedirect({ id_token_hint: user ? user.id_token : undefined });
        return;
      }
    } catch (err) {
      console.warn('playhead: the provider session could not be ended:', err);
    }
  }
  location.href = '/';
}

// el builds an element: el('a', {href: '/', class: 'x'}, 'text', child…). Text is always set as
// text, never parsed as HTML.
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') node.className = v;
    else if (k === 'dataset') Object.assign(node.dataset, v);
    else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

// showNotice shows a message under the header; kind is 'error', 'warn' or 'info'. It stays
// until dismissed or replaced; errors are also logged to the console.
export function showNotice(message, kind = 'error') {
  const box = document.getElementById('notice');
  document.getElementById('notice-text').textContent = message;
  box.dataset.kind = kind;
  box.hidden = false;
  if (kind === 'error') console.error('playhead:', message);
}

// clearNotice hides the notice; given a kind, only a notice of that kind.
export function clearNotice(kind) {
  const box = document.getElementById('notice');
  if (!kind || box.dataset.kind === kind) box.hidden = true;
}

// describe turns an error into a sentence for the notice.
export function describe(err, what) {
  if (err instanceof APIError) {
    const status = err.status ? ` (HTTP ${err.status})` : '';
    return `${what}: ${err.message}${status}`;
  }
  return `${what}: ${err && err.message ? err.message : String(err)}`;
}

// fail shows err as a notice; a refused token (401) also sends the member back to sign in.
export function fail(err, what) {
  showNotice(describe(err, what));
  if (err instanceof APIError && err.status === 401) {
    forgetToken();
    showSignIn('The server refused the token. Sign in again to go on.');
  }
}

// api calls the /v1 API with the member's token and returns the decoded JSON answer (null for
// 204). keepalive lets a call outlive the page (pagehide).
export async function api(method, path, { body, keepalive = false } = {}) {
  const headers = { Authorization: `Bearer ${token() || ''}` };
  const init = { method, headers, keepalive, cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (err) {
    throw new APIError(0, `the server could not be reached (${err.message})`);
  }
  if (res.status === 204) return null;
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    // not JSON: the message below uses the text
  }
  if (!res.ok) {
    const message = (data && data.error) || text.trim() || res.statusText || 'request failed';
    throw new APIError(res.status, message);
  }
  return data;
}

// MediaEvents follows the member's media events (GET /v1/events, Server-Sent Events). It reads
// the stream with fetch rather than EventSource, which cannot send the Authorization header:
// the token never goes into a URL or a cookie. It does not reconnect: a page that loses the
// stream falls back to polling (wait rejects).
export class MediaEvents {
  constructor() {
    this.abort = new AbortController();
    this.waiters = new Map(); // media id → { types, resolve, reject }
    this.seen = new Map(); // media id → its events so far, for a wait that comes after one
    this.failure = null;
  }

  // open resolves once the server answered 200 (from then on no event of the member is
  // missed) and rejects if it did not within timeoutMS.
  async open(timeoutMS) {
    const timer = setTimeout(() => this.abort.abort(new Error('the event stream did not open in time')), timeoutMS);
    let res;
    try {
      res = await fetch('/v1/events', {
        headers: { Authorization: authHeader(), Accept: 'text/event-stream' }, cache: 'no-store', signal: this.abort.signal,
      });
    } finally {
      clearTimeout(timer);
    }
    if (!res.ok || !res.body) {
      this.abort.abort();
      throw new APIError(res.status, `the event stream was refused (HTTP ${res.status})`);
    }
    this.read(res.body.getReader()).catch((err) => this.fail(err));
  }

  // wait resolves with the first media.ready or media.failed event of media id, and rejects
  // when the stream fails first.
  // wait resolves with the first event of media id whose type is one of types (every type when
  // none is given), seen already or to come.
  wait(id, types = null) {
    const wanted = (e) => !types || types.includes(e.type);
    const seen = (this.seen.get(id) || []).find(wanted);
    if (seen) return Promise.resolve(seen);
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => this.waiters.set(id, { wanted, resolve, reject }));
  }

  close() {
    this.abort.abort();
  }

  // read parses the stream: events are blocks of "field: value" lines ending with a blank line;
  // lines starting with ':' are heartbeats.
  async read(reader) {
    const decoder = new TextDecoder();
    let buffered = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error('the event stream ended');
      buffered += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffered.indexOf('\n\n')) >= 0) {
        const block = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        const data = block.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
        if (data) this.deliver(JSON.parse(data));
      }
    }
  }

  deliver(event) {
    const id = event.data.media_id;
    this.seen.set(id, [...(this.seen.get(id) || []), event]);
    const waiter = this.waiters.get(id);
    if (waiter && waiter.wanted(event)) {
      this.waiters.delete(id);
      waiter.resolve(event);
    }
  }

  fail(err) {
    this.failure = err;
    for (const w of this.waiters.values()) w.reject(err);
    this.waiters.clear();
  }
}

// authHeader is the Authorization header for calls that cannot use api() (XHR uploads).
export function authHeader() {
  return `Bearer ${token() || ''}`;
}

// showSignIn replaces the page's content with a form to paste a token, and the "Sign in"
// button when the server names an identity provider.
export function showSignIn(reason) {
  document.getElementById('session').hidden = true;
  const main = document.getElementById('main');
  main.hidden = true;
  let card = document.getElementById('signin');
  if (card) card.remove();
  const input = el('textarea', { id: 'token', rows: 4, spellcheck: 'false', autocomplete: 'off',
    placeholder: 'eyJhbGciOiJIUzI1NiIs…', required: true });
  card = el('section', { class: 'card signin', id: 'signin' },
    el('h1', {}, 'Sign in with a token'),
    reason ? el('p', { class: 'muted' }, reason)
      : el('p', { class: 'muted' }, 'These pages call the API with a member token. ', el('code', {}, 'make run'),
        ' prints a link that signs you in; or mint one with ', el('code', {}, 'bin/playhead token --member 1'), '.'),
    el('form', { onsubmit: (ev) => {
      ev.preventDefault();
      const value = input.value.trim();
      if (!claims(value)) {
        showNotice('That is not a JWT: paste the whole token, three parts separated by dots.');
        return;
      }
      sessionStorage.setItem(TOKEN_KEY, value);
      location.reload();
    } },
    el('label', { class: 'field' }, 'Token', input),
    el('button', { type: 'submit', class: 'primary' }, 'Continue')),
    el('p', { class: 'muted small' }, 'The token stays in this tab only (sessionStorage) and is sent to this server alone.'));
  main.after(card);
  signInConfig().then((cfg) => {
    // The card's ways to sign in are settled: a page's test waits on this before judging them.
    card.dataset.signin = cfg.enabled ? 'provider' : 'token';
    if (!cfg.enabled) return;
    card.querySelector('h1').textContent = 'Sign in';
    const button = el('button', { type: 'button', class: 'primary', id: 'signin-provider', onclick: signIn },
      `Sign in with ${new URL(cfg.issuer).host}`);
    card.querySelector('h1').after(el('div', { class: 'actions' }, button),
      el('p', { class: 'muted' }, 'Or paste a member token:'));
  });
}

// initSession reads the token (from #token=… once, then sessionStorage), shows who is signed
// in, and returns {member} — or shows the sign-in form, or the question whether to switch to
// a link's member, and returns null.
export function initSession() {
  document.getElementById('notice-close').addEventListener('click', () => clearNotice());
  // A #token=… link opened over this page changes only the hash: start again with it.
  window.addEventListener('hashchange', () => {
    if (/^#(?:.*&)?token=/.test(location.hash)) location.reload();
  });
  const offered = takeTokenFromURL();
  const t = token();
  if (offered) {
    showSwitchPrompt(t, offered);
    return null;
  }
  if (!t) {
    showSignIn();
    return null;
  }
  const c = claims(t);
  if (!c || !c.sub) {
    forgetToken();
    showSignIn('The stored token could not be read. Sign in again.');
    return null;
  }
  if (typeof c.exp === 'number' && c.exp * 1000 <= Date.now()) {
    forgetToken();
    showSignIn(`Your sign-in expired ${ago(new Date(c.exp * 1000))}. Sign in again.`);
    return null;
  }
  // A provider's token names the member by name; Playhead's own by the member id.
  const name = c.preferred_username || c.name || c.email || `Member ${c.sub}`;
  document.getElementById('member').textContent = `${name}${c.role === 'admin' ? ' · admin' : ''}`;
  document.getElementById('session').hidden = false;
  const signout = document.getElementById('signout');
  if (sessionStorage.getItem(SIGNED_IN_KEY) === '1') signout.textContent = 'Sign out';
  signout.addEventListener('click', signOut);
  document.getElementById('main').hidden = false;
  return { member: c.sub };
}

// watchHref is the player's address for a media, opened from collection when given (the player
// passes it on to POST /v1/playback, which then knows what comes next in that collection).
export function watchHref(mediaID, collection) {
  return collection ? `/watch/${mediaID}?${new URLSearchParams({ collection })}` : `/watch/${mediaID}`;
}

// courseHref is a collection's course page.
export function courseHref(collection) {
  return `/course?${new URLSearchParams({ c: collection })}`;
}

// clock formats milliseconds as m:ss or h:mm:ss.
export function clock(ms) {
  const total = Math.max(0, Math.floor(ms / 1000));
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = String(total % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${s}` : `${m}:${s}`;
}

// ago says how long ago a time was, roughly.
export function ago(when) {
  const s = Math.round((Date.now() - when.getTime()) / 1000);
  if (s < 45) return 'just now';
  const m = Math.round(s / 60);
  if (m < 60) return `${m} min ago`;
  const h = Math.round(m / 60);
  if (h < 24) return `${h} h ago`;
  const d = Math.round(h / 24);
  if (d < 31) return d === 1 ? 'yesterday' : `${d} days ago`;
  return when.toLocaleDateString();
}

// bytes formats a size.
export function bytes(n) {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB'];
  let v = n;
  let i = -1;
  do {
    v /= 1024;
    i++;
  } while (v >= 1024 && i < units.length - 1);
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}
