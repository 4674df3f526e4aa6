// The page the identity provider sends the browser back to (/signin/callback?code=…&state=…):
// oidc-client-ts checks the state, trades the code and the PKCE verifier for the tokens at the
// provider's token endpoint, and the page keeps the token Playhead takes (pagesToken), then
// returns to the page the member signed in from. The code leaves the address bar at once.

import { describe, keepSignIn, pagesToken, sameOriginURL, showNotice, signInManager } from './common.mjs';

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
    // The way back is on this site only: a page of this origin, never another.
    location.replace(sameOriginURL(user.state && user.state.returnTo));
  } catch (err) {
    history.replaceState(null, '', location.pathname);
    status.textContent = 'The sign-in did not finish.';
    showNotice(describe(err, 'Sign-in failed'));
  }
}

finish();
