package auth

import (
	"slices"

	"github.com/MicahParks/jwkset"
)

// keyIDs is the kids of the keys a KeySet holds, with the count of the reads that withdrew a
// kid: a verified token in the cache is checked against it, so a withdrawn key's tokens stop
// at the read that withdraws it rather than when their cache entry lapses (up to cacheTTL).
type keyIDs struct {
	// withdrawals counts the reads that dropped a kid held before. A cache entry remembers the
	// count at its verification; an entry with the current count needs no look-up.
	withdrawals uint64
	kids        map[string]struct{}
}

// current reports whether a token verified when withdrawals was w, with kid, still has its
// key. A token without a kid matched some key of its alg, unknown which: any withdrawal since
// its verification retires it.
func (s *keyIDs) current(w uint64, kid string) bool {
	if s == nil || s.withdrawals == w {
		return true
	}
	if kid == "" {
		return false
	}
	_, ok := s.kids[kid]
	return ok
}

// noteKeys records the kids of a read and logs what it added and withdrew. Called under mu.
func (k *KeySet) noteKeys(all []jwkset.JWK) {
	next := &keyIDs{kids: make(map[string]struct{}, len(all))}
	for _, key := range all {
		next.kids[key.Marshal().KID] = struct{}{}
	}
	prev := k.kids.Load()
	var added, withdrawn []string
	for kid := range next.kids {
		if prev == nil || !has(prev.kids, kid) {
			added = append(added, kid)
		}
	}
	if prev != nil {
		next.withdrawals = prev.withdrawals
		for kid := range prev.kids {
			if !has(next.kids, kid) {
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

func has(m map[string]struct{}, k string) bool {
	_, ok := m[k]
	return ok
}
