// Package xapi sends the completions of the outbox (playback.completed, collection.completed)
// to a Learning Record Store as xAPI statements: a finished media as the ADL Video Profile's
// completed statement (https://w3id.org/xapi/video), with the played segments read from the
// member's watched ranges; a finished collection as a completed course.
//
// It is off unless an LRS endpoint is configured. The relay (relay.go) works like the webhook
// relay, with a mark of its own on the outbox rows (xapi_relayed_at): in one transaction under
// an advisory lock it marks a batch of completion rows, builds their statements, stores them
// (xapi_statements) and enqueues one job each (kind KindSend). The job POSTs the stored
// statement, so every attempt sends the same content under the same id, derived from the
// outbox row: an LRS keeps the first statement of an id and answers the next with 204 or
// 409, so a retried POST stores nothing twice. Retries with backoff, DEAD after its attempts
// or at once on a refusal (a 4xx other than 409 and 429), visible in the admin job list.
package xapi

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"

	"github.com/playhead/playhead/egress"
)

// CheckURL reports why raw cannot be the LRS endpoint, an actor home page or an activity base
// (what names the variable is the caller's): it must be an absolute http or https URL without
// credentials, query or fragment. When endpoint is true and allowPrivate false, a host given
// as an address must be public (egress.Public); a name is checked on every connection, after
// DNS resolution, by the sender's dialer.
func CheckURL(raw string, endpoint, allowPrivate bool) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a URL")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return errors.New("must be an absolute http:// or https:// URL")
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return errors.New("must have no user, query or fragment (the LRS's key and secret are PLAYHEAD_XAPI_USERNAME and PLAYHEAD_XAPI_PASSWORD)")
	}
	if endpoint && !allowPrivate {
		if ip, err := netip.ParseAddr(u.Hostname()); err == nil && !egress.Public(ip) {
			return fmt.Errorf("%w: %s (PLAYHEAD_XAPI_ALLOW_PRIVATE allows it)", egress.ErrForbiddenAddress, ip)
		}
	}
	return nil
}
