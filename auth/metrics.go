package auth

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The reasons a token is refused: the label set of playhead_auth_refusals_total, bounded.
const (
	reasonMissing      = "missing"       // no bearer token
	reasonTooLong      = "too_long"      // longer than MaxTokenBytes
	reasonMalformed    = "malformed"     // not a compact JWS, or its header is not JSON
	reasonAlgorithm    = "algorithm"     // an alg not allowed (none, HS* without the secret, …)
	reasonExpired      = "expired"       // exp passed
	reasonMissingClaim = "missing_claim" // exp, or a provider token's iss or aud, missing
	reasonNotYetValid  = "not_yet_valid" // nbf or iat ahead beyond the leeway
	reasonIssuer       = "issuer"        // iss is not the issuer
	reasonAudience     = "audience"      // aud does not contain the audience
	reasonUnknownKey   = "unknown_key"   // the kid is in no key read
	reasonNoKeys       = "no_keys"       // the keys were never read (provider down since start)
	reasonBadSignature = "bad_signature" // the signature does not verify with the key
	reasonSubject      = "subject"       // sub missing, too long, not a member id, or refused
	reasonErased       = "erased"        // the member is erased
)

var reasons = []string{reasonMissing, reasonTooLong, reasonMalformed, reasonAlgorithm, reasonExpired, reasonMissingClaim,
	reasonNotYetValid, reasonIssuer, reasonAudience, reasonUnknownKey, reasonNoKeys, reasonBadSignature,
	reasonSubject, reasonErased}

// Metrics counts refused tokens and the reads of a KeySet.
type Metrics struct {
	refusals        *prometheus.CounterVec
	refreshes       *prometheus.CounterVec
	refreshFailures *prometheus.CounterVec
	reg             prometheus.Registerer
}

// NewMetrics creates the token metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "playhead", Subsystem: "auth", Name: "refusals_total",
			Help: "Bearer tokens refused with 401, by reason.",
		}, []string{"reason"}),
		refreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "playhead", Subsystem: "jwks", Name: "refresh_attempts_total",
			Help: "Reads of the identity provider's keys, by trigger (schedule, unknown_kid).",
		}, []string{"trigger"}),
		refreshFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "playhead", Subsystem: "jwks", Name: "refresh_failures_total",
			Help: "Reads of the identity provider's keys that failed, by trigger.",
		}, []string{"trigger"}),
		reg: reg,
	}
	// Every reason from zero, so a rate() sees the first refusal.
	for _, r := range reasons {
		m.refusals.WithLabelValues(r)
	}
	for _, t := range []string{"schedule", "unknown_kid"} {
		m.refreshes.WithLabelValues(t)
		m.refreshFailures.WithLabelValues(t)
	}
	reg.MustRegister(m.refusals, m.refreshes, m.refreshFailures)
	return m
}

func (m *Metrics) refuse(reason string) {
	if m != nil {
		m.refusals.WithLabelValues(reason).Inc()
	}
}

// watch registers the gauges of k: seconds since its last successful read and keys held.
func (m *Metrics) watch(k *KeySet) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "playhead", Subsystem: "jwks", Name: "seconds_since_refresh",
			Help: "Seconds since the identity provider's keys were last read successfully; since the process started when never.",
		}, func() float64 {
			last := k.lastOK.Load()
			if last == 0 {
				return time.Since(processStart).Seconds()
			}
			return time.Since(time.Unix(0, last)).Seconds()
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "playhead", Subsystem: "jwks", Name: "keys",
			Help: "Keys of the identity provider held.",
		}, func() float64 { return float64(k.keys.Load()) }),
	)
}

// processStart stands for the last read of a key set never read: its age grows from the start.
var processStart = time.Now()
