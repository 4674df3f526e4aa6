package events_test

import (
	"net/http"
	"testing"
	"time"
)

// A stream request whose token passed auth before its member's erasure reached the node, and
// which subscribes after Hub.End ran for them, is refused (401) rather than left open until its
// token expires: the hub checks the erased ids under the lock End takes. Another member's
// stream still opens.
func TestStream_RefusedForAMemberErasedAfterAuth(t *testing.T) {
	s := start(t, options{})
	const erased = 7
	s.hub.Refuse(func(m int64) bool { return m == erased }) // the verifier here refuses no one
	resp := s.get(t, token(t, erased, time.Hour), "")
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a stream of an erased member = %d, want 401", resp.StatusCode)
	}
	s.open(t, token(t, 8, time.Hour), "") // fails the test unless it opens
}
