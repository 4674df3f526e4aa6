package events_test

// The retention's mark is the highest id pruned of the member's and never goes down, or a
// stream resuming between pruned rows would get a silent gap. Each property has a test of its
// own here: the package's other tests still pass when either is broken.

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/events"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/webhooks"
)

func ageRows(t *testing.T, s *server, relayed bool, ids ...int64) {
	t.Helper()
	relay := "NULL"
	if relayed {
		relay = "statement_timestamp()"
	}
	if _, err := s.pool.Exec(context.Background(), `UPDATE notification_outbox SET relayed_at = `+relay+`,
		created_at = statement_timestamp() - interval '8 days' WHERE id = ANY($1)`, ids); err != nil {
		t.Fatal(err)
	}
}

// Two of the member's rows pruned in one batch; a stream resuming between them (it had the
// first, not the second) must resync: the mark is the highest id pruned, not the lowest.
func TestStream_ResumeBetweenTwoPrunedRowsResyncs(t *testing.T) {
	s := start(t, options{})
	tok := token(t, 1, time.Hour)
	first := s.announce(t, 1, 10, media.OutboxReady, nil)
	second := s.announce(t, 1, 11, media.OutboxReady, nil)
	ageRows(t, s, true, first, second)
	retention, err := webhooks.NewRetention(s.pool, webhooks.RetentionConfig{Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if _, n, err := retention.Prune(context.Background()); err != nil || n != 2 {
		t.Fatalf("Prune removed %d (%v), want 2", n, err)
	}
	newest := s.announce(t, 1, 12, media.OutboxReady, nil)
	stream := s.open(t, tok, strconv.FormatInt(first, 10))
	if e := stream.Next(t); e.Name != events.EventResync {
		t.Fatalf("resumed after %d with %d pruned: got %q id %s, want %s (event %d is lost silently)", first, second, e.Name, e.ID, events.EventResync, second)
	}
	_ = newest
}

// A later prune that deletes a lower id of the member's (a row relayed late: prunes go by
// created_at, not id) must not move the mark down.
func TestRetention_TheMarkNeverGoesDown(t *testing.T) {
	s := start(t, options{})
	tok := token(t, 1, time.Hour)
	low := s.announce(t, 1, 10, media.OutboxReady, nil)
	high := s.announce(t, 1, 11, media.OutboxReady, nil)
	ageRows(t, s, false, low) // old but not relayed yet: kept
	ageRows(t, s, true, high)
	retention, err := webhooks.NewRetention(s.pool, webhooks.RetentionConfig{Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if _, n, err := retention.Prune(context.Background()); err != nil || n != 1 {
		t.Fatalf("first Prune removed %d (%v), want the relayed one", n, err)
	}
	ageRows(t, s, true, low)
	if _, n, err := retention.Prune(context.Background()); err != nil || n != 1 {
		t.Fatalf("second Prune removed %d (%v), want the late one", n, err)
	}
	s.announce(t, 1, 12, media.OutboxReady, nil)
	stream := s.open(t, tok, strconv.FormatInt(low, 10))
	if e := stream.Next(t); e.Name != events.EventResync {
		t.Fatalf("resumed after %d with %d pruned: got %q id %s, want %s", low, high, e.Name, e.ID, events.EventResync)
	}
}
