package main

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/playhead/playhead/internal/binarytest"
)

// hostileErased is the member the admin route's generic cases name; hostileErasure erases it.
const hostileErased = 4_700_000_209

// hostileErasure sends the erasure's own cases, after every other case (they use members A
// and B, whom nothing here erases): a member erasing another, tokens too old for DELETE
// /v1/me, forgetting another member's item, an erasure during the member's resumable upload,
// and a double erasure. It returns the number of cases.
func (f *hostileFixture) hostileErasure(t *testing.T) int {
	t.Helper()
	n := 0
	expect := func(want int, method, target, tok string, body any) []byte {
		t.Helper()
		n++
		status, out, err := f.s.Do(method, f.s.URL("%s", target), tok, body)
		if err != nil || status != want {
			t.Errorf("erasure: %s %s = %d %s (%v), want %d", method, target, status, out, err, want)
		}
		return out
	}
	pool := f.s.Pool(t)
	rows := func(member int64) int {
		var c int
		if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM playback WHERE member_id = $1`, member).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	// A member erasing another: the admin route is refused, and DELETE /v1/me names no one else.
	expect(http.StatusForbidden, http.MethodDelete, "/v1/admin/members/201", f.b, nil)
	// Forgetting another member's item forgets only the caller's own (none): A's row stays.
	expect(http.StatusOK, http.MethodPost, fmt.Sprintf("/v1/playback/%d", f.mine), f.a, nil)
	before := rows(201)
	expect(http.StatusNoContent, http.MethodDelete, fmt.Sprintf("/v1/playback/%d?forget=true", f.mine), f.b, nil)
	if rows(201) != before || before == 0 {
		t.Errorf("erasure: B's forget of A's item changed A's rows (%d before, %d after)", before, rows(201))
	}
	// Stale tokens: issued an hour ago, and without iat.
	film := f.s.CreateMedia(t, f.adm, "a film everyone plays")
	const member = 4_700_000_210
	old := signedToken(t, jwt.MapClaims{"sub": strconv.Itoa(member), "iat": time.Now().Add(-time.Hour).Unix(), "exp": time.Now().Add(time.Hour).Unix()})
	expect(http.StatusUnauthorized, http.MethodDelete, "/v1/me", old, nil)
	noIAT := signedToken(t, jwt.MapClaims{"sub": strconv.Itoa(member), "exp": time.Now().Add(time.Hour).Unix()})
	expect(http.StatusUnauthorized, http.MethodDelete, "/v1/me", noIAT, nil)
	// An iat in the future (an issuer's clock ahead) would pass the age check for as long.
	ahead := signedToken(t, jwt.MapClaims{"sub": strconv.Itoa(member), "iat": time.Now().Add(24 * time.Hour).Unix(), "exp": time.Now().Add(48 * time.Hour).Unix()})
	expect(http.StatusUnauthorized, http.MethodDelete, "/v1/me", ahead, nil)
	expect(http.StatusNoContent, http.MethodPut, fmt.Sprintf("/v1/playback/%d", film), old, map[string]any{"position_ms": 1}) // not erased
	// Erasure during an upload: the member's resumable upload answers 401 from then on.
	tok := binarytest.Token(t, member, false)
	upload := f.s.TusUpload(t, tok, 1000, "", []byte("bytes of an upload its member erases"))
	expect(http.StatusAccepted, http.MethodDelete, "/v1/me", tok, nil)
	n++
	status, _, out := f.s.Tus(t, http.MethodPatch, f.s.URL("%s", upload), tok,
		map[string]string{"Upload-Offset": "36", "Content-Type": "application/offset+octet-stream"}, []byte("more"))
	if status != http.StatusUnauthorized {
		t.Errorf("erasure: PATCH of the erased member's upload = %d %s, want 401", status, out)
	}
	expect(http.StatusUnauthorized, http.MethodPut, fmt.Sprintf("/v1/playback/%d", film), old, map[string]any{"position_ms": 2})
	// Double erasure: the member's own token is refused; an admin's is accepted again.
	expect(http.StatusUnauthorized, http.MethodDelete, "/v1/me", binarytest.Token(t, member, false), nil)
	expect(http.StatusAccepted, http.MethodDelete, fmt.Sprintf("/v1/admin/members/%d", member), f.adm, nil)
	expect(http.StatusAccepted, http.MethodDelete, fmt.Sprintf("/v1/admin/members/%d", hostileErased), f.adm, nil)
	expect(http.StatusAccepted, http.MethodDelete, fmt.Sprintf("/v1/admin/members/%d", hostileErased), f.adm, nil)
	return n
}

// signedToken signs claims with the suite's secret.
func signedToken(t *testing.T, claims jwt.MapClaims) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(binarytest.Secret))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
