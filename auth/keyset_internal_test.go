package auth

import (
	"net/http"
	"testing"
	"time"
)

func TestLifetime(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		header http.Header
		want   time.Duration
	}{
		{http.Header{}, DefaultKeysRefresh},
		{http.Header{"Cache-Control": {"public, max-age=600"}}, 10 * time.Minute},
		{http.Header{"Cache-Control": {"no-cache, max-age=0"}}, MinKeysRefresh},
		{http.Header{"Cache-Control": {"max-age=604800"}}, MaxKeysRefresh},
		{http.Header{"Expires": {now.Add(20 * time.Minute).Format(http.TimeFormat)}}, 20 * time.Minute},
		{http.Header{"Expires": {now.Add(-time.Hour).Format(http.TimeFormat)}}, MinKeysRefresh},
	} {
		if got := lifetime(c.header, now); got != c.want {
			t.Errorf("lifetime(%v) = %v, want %v", c.header, got, c.want)
		}
	}
}
