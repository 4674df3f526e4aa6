package main

import (
	"cmp"
	"strings"
	"time"

	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/notify"
	"github.com/playhead/playhead/xapi"
)

// xapiConfig is the xAPI settings.
type xapiConfig struct {
	Endpoint     string        // PLAYHEAD_XAPI_ENDPOINT; empty: xAPI off
	Username     string        // PLAYHEAD_XAPI_USERNAME
	Password     string        // PLAYHEAD_XAPI_PASSWORD
	ActivityBase string        // PLAYHEAD_XAPI_ACTIVITY_BASE, without a trailing slash
	HomePage     string        // PLAYHEAD_XAPI_ACTOR_HOMEPAGE, the activity base when unset
	MaxAttempts  int           // PLAYHEAD_XAPI_MAX_ATTEMPTS
	Timeout      time.Duration // PLAYHEAD_XAPI_TIMEOUT
	AllowPrivate bool          // PLAYHEAD_XAPI_ALLOW_PRIVATE
}

func readXAPI(e *env) xapiConfig {
	c := xapiConfig{
		Endpoint:     e.str("PLAYHEAD_XAPI_ENDPOINT"),
		Username:     e.str("PLAYHEAD_XAPI_USERNAME"),
		Password:     e.str("PLAYHEAD_XAPI_PASSWORD"),
		ActivityBase: strings.TrimSuffix(e.str("PLAYHEAD_XAPI_ACTIVITY_BASE"), "/"),
		HomePage:     e.str("PLAYHEAD_XAPI_ACTOR_HOMEPAGE"),
		MaxAttempts:  e.int("PLAYHEAD_XAPI_MAX_ATTEMPTS"),
		Timeout:      e.duration("PLAYHEAD_XAPI_TIMEOUT"),
		AllowPrivate: e.bool("PLAYHEAD_XAPI_ALLOW_PRIVATE"),
	}
	c.HomePage = cmp.Or(c.HomePage, c.ActivityBase)
	return c
}

// validate checks the xAPI settings, the URLs only when xAPI is on.
func (c xapiConfig) validate(e *env) {
	e.check(c.MaxAttempts >= 1, "PLAYHEAD_XAPI_MAX_ATTEMPTS: must be at least 1")
	e.check(c.Timeout > 0, "PLAYHEAD_XAPI_TIMEOUT: must be positive")
	if c.Endpoint == "" {
		return
	}
	if err := xapi.CheckURL(c.Endpoint, true, c.AllowPrivate); err != nil {
		e.check(false, "PLAYHEAD_XAPI_ENDPOINT: %v", err)
	}
	if c.ActivityBase == "" {
		e.check(false, "PLAYHEAD_XAPI_ACTIVITY_BASE: required with PLAYHEAD_XAPI_ENDPOINT (the site's public URL, say)")
		return
	}
	if err := xapi.CheckURL(c.ActivityBase, false, true); err != nil {
		e.check(false, "PLAYHEAD_XAPI_ACTIVITY_BASE: %v", err)
	}
	if err := xapi.CheckURL(c.HomePage, false, true); err != nil {
		e.check(false, "PLAYHEAD_XAPI_ACTOR_HOMEPAGE: %v", err)
	}
}

// activities are the IRIs of the node's statements.
func (c xapiConfig) activities() xapi.Activities {
	return xapi.Activities{Base: c.ActivityBase, HomePage: c.HomePage}
}

// addXAPIRelay lists the relay of completions to the LRS when xAPI is on, woken like the
// webhook relay by every outbox notification and every reconnect of the listener.
func (n *node) addXAPIRelay(listener *notify.Listener) {
	cfg := n.cfg.XAPI
	if cfg.Endpoint == "" {
		return
	}
	relay := xapi.NewRelay(n.pool, xapi.RelayConfig{
		Activities:  cfg.activities(),
		Completion:  n.cfg.Completion,
		Interval:    n.cfg.JobPollInterval,
		MaxAttempts: cfg.MaxAttempts,
		KeepDead:    n.cfg.OutboxRetention,
		Logger:      n.logger,
	})
	n.add("xAPI relay", relay)
	listener.Handle(media.ChannelOutbox, func(string) { relay.Wake() }, relay.Wake)
}
