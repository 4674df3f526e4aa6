// The page the identity provider sends the browser back to (/signin/callback?code=…&state=…):
// oidc-client-ts checks the state, trades the code and the PKCE verifier for the tokens at the
// provider's token endpoint, and the page keeps the token Playhead takes (pagesToken), then
// returns to the page the member signed in from. The code leaves the address bar at once.

import { describe, keepSignIn, pagesToken, showNotice, signInManager } from './common.mjs';

// returnTo keeps the way back on this site: a path, never another origin.
function returnTo(state) {
  const to = state && typeof state.returnTo === 'string' ? state.returnTo : '/';
  return to.startsWith('/') && !to.startsWith('//') ? to : '/';
}

async function finish() {
  document.getElementById('notice-close').addEventListener('click', () => {
    document.getElementById('notice').hidden = true;
  });
  const status = document.getElementById('signin-status');
  try {
    const s = await signInManager();
    if (!s) throw new Error('this server has no identity provider configured');
    const user = await s.manager.signinRedirectCallback();
    keepSignIn(pagesToken(user, s.cfg.audience));
    location.replace(returnTo(user.state));
  } catch (err) {
    history.replaceState(null, '', location.pathname);
    status.textContent = 'The sign-in did not finish.';
    showNotice(describe(err, 'Sign-in failed'));
  }
}

finish();
