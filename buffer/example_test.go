package buffer_test

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"time"

	"github.com/playhead/playhead/buffer"
)

// Positions of members in videos, offered as players report them and written in batches: one
// entry per key, the newest value of each, sorted by key. The flush function here prints what
// it would write; Playhead's writes the batch to PostgreSQL in one statement.
func Example() {
	type key struct{ Member, Media int64 }
	type position struct {
		Seconds int
		At      time.Time // when the player reported it
	}
	b, err := buffer.New(buffer.Config[key, position]{
		// Nothing is flushed before Stop here: a long interval, and more keys than offered.
		FlushInterval: time.Hour,
		FlushAt:       100,
		Flush: func(ctx context.Context, batch []buffer.Entry[key, position]) error {
			fmt.Printf("flush of %d positions:\n", len(batch))
			for _, e := range batch {
				fmt.Printf("  member %d, media %d: %d s\n", e.Key.Member, e.Key.Media, e.Value.Seconds)
			}
			return nil // an error wrapped with buffer.Rejected splits the batch; any other retries it
		},
		// Sorted batches take row locks in one order on every node, so flushes cannot deadlock.
		Compare: func(a, b key) int {
			return cmp.Or(cmp.Compare(a.Member, b.Member), cmp.Compare(a.Media, b.Media))
		},
		// A report that arrives late does not replace a newer one.
		Newer: func(a, b position) bool { return a.At.After(b.At) },
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := b.Start(ctx); err != nil {
		log.Fatal(err)
	}

	t0 := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, report := range []struct {
		key key
		pos position
	}{
		{key{2, 7}, position{40, t0}},
		{key{1, 9}, position{12, t0}},
		{key{1, 7}, position{90, t0}},
		{key{1, 7}, position{95, t0.Add(5 * time.Second)}},  // newer: replaces 90 s in place
		{key{1, 7}, position{85, t0.Add(-5 * time.Second)}}, // older, arriving late: ignored
	} {
		// Offer never blocks: false means dropped (a new key while the buffer is full).
		if ok, err := b.Offer(report.key, report.pos); err != nil || !ok {
			log.Fatal("offer refused: ", err)
		}
	}
	held, _ := b.Pending(key{1, 7})
	fmt.Println("held for member 1, media 7:", held.Seconds, "s")

	// Stop writes everything held; with a deadline, what it cannot write in time is spilled
	// to Config.Spill, which the next Start replays.
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := b.Stop(stopCtx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// held for member 1, media 7: 95 s
	// flush of 3 positions:
	//   member 1, media 7: 95 s
	//   member 1, media 9: 12 s
	//   member 2, media 7: 40 s
}
