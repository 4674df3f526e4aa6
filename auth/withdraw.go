package auth

import (
	"slices"
	"strings"

	"github.com/MicahParks/jwkset"
)

// keyIDs is the kids of the keys a KeySet holds, each with its key's fingerprint, and the
// count of the reads that withdrew a key: a verified token in the cache is checked against
// it, so a withdrawn key's tokens stop at the read that withdraws it rather than when their
// cache entry lapses (up to cacheTTL). A key replaced under the same kid (an operator
// regenerating a leaked key and keeping its name) is withdrawn too.
type keyIDs struct {
	// withdrawals counts the reads that dropped a key held before. A cache entry remembers the
	// count at its verification; an entry with the current count needs no look-up.
	withdrawals uint64
	kids        map[string]string // kid → fingerprint
}

// current reports whether a token verified when withdrawals was w, with kid, by the key of
// fingerprint fp, still has its key. A token without a kid matched some key of its alg,
// unknown which: any withdrawal since its verification retires it.
func (s *keyIDs) current(w uint64, kid, fp string) bool {
	if s == nil || s.withdrawals == w {
		return true
	}
	if kid == "" {
		return false
	}
	got, ok := s.kids[kid]
	return ok && got == fp
}

// fingerprint names a key by its public parameters.
func fingerprint(key jwkset.JWK) string {
	m := key.Marshal()
	return strings.Join([]string{string(m.KTY), string(m.CRV), m.N, m.E, m.X, m.Y}, "|")
}

// noteKeys records the kids of a read and logs what it added and withdrew. Called under mu.
func (k *KeySet) noteKeys(all []jwkset.JWK) {
	next := &keyIDs{kids: make(map[string]string, len(all))}
	for _, key := range all {
		next.kids[key.Marshal().KID] = fingerprint(key)
	}
	prev := k.kids.Load()
	var added, withdrawn []string
	// A kid whose key changed is both: its old key is withdrawn, its new one added.
	for kid, fp := range next.kids {
		if prev == nil || !holds(prev.kids, kid, fp) {
			added = append(added, kid)
		}
	}
	if prev != nil {
		next.withdrawals = prev.withdrawals
		for kid, fp := range prev.kids {
			if !holds(next.kids, kid, fp) {
				withdrawn = append(withdrawn, kid)
			}
		}
		if len(withdrawn) > 0 {
			next.withdrawals++
		}
	}
	k.kids.Store(next)
	if len(added) > 0 || len(withdrawn) > 0 {
		slices.Sort(added)
		slices.Sort(withdrawn)
		k.cfg.Logger.Info("identity provider's keys changed", "added", added, "withdrawn", withdrawn, "keys", len(next.kids))
	}
}

// holds reports whether m has kid with the key of fingerprint fp.
func holds(m map[string]string, kid, fp string) bool {
	got, ok := m[kid]
	return ok && got == fp
}
