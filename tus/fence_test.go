package tus_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/playhead/playhead/erasure"
	"github.com/playhead/playhead/tus"
)

// startGated is the store with a StartParts that waits for gate: an object store slow to
// answer an upload's creation.
type startGated struct {
	tus.Objects
	entered, gate chan struct{}
}

func (g *startGated) StartParts(ctx context.Context, key string) (string, error) {
	close(g.entered)
	<-g.gate
	return g.Objects.StartParts(ctx, key)
}

// An upload's creation does not hold the erasure fence while the object store starts its
// write: the fence's shared side is held until the transaction ends, and an erasure waiting
// for it holds back every writer of every node (each flush, open, hide) behind it, for as long
// as the store takes to answer. Here an erasure of another member completes while the store
// has not answered; the creation then succeeds.
func TestNewUpload_HoldsNoFenceWhileTheStoreAnswers(t *testing.T) {
	t.Parallel()
	c := backends()["Local"](t)
	gated := &startGated{Objects: c.objects, entered: make(chan struct{}), gate: make(chan struct{})}
	n := c.start(t, func(cfg *tus.Config) { cfg.Objects = gated })
	created := make(chan answer, 1)
	go func() {
		created <- n.do(t, 15, http.MethodPost, "/v1/uploads", map[string]string{"Upload-Length": strconv.Itoa(1000)}, nil)
	}()
	<-gated.entered
	erased := make(chan error, 1)
	go func() {
		_, err := erasure.Erase(context.Background(), c.pool, 4_700_000_601, erasure.MaxAttempts)
		erased <- err
	}()
	// Either the erasure ends, or it waits for the advisory lock the creation holds.
	waiting := func() bool {
		var n int
		if err := c.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	for {
		select {
		case err := <-erased:
			if err != nil {
				t.Fatal(err)
			}
		default:
			if !waiting() {
				time.Sleep(time.Millisecond)
				continue
			}
			close(gated.gate)
			<-erased
			<-created
			t.Fatal("the erasure waited for an upload's creation while the object store had not answered: every writer waits behind it")
		}
		break
	}
	close(gated.gate)
	if a := <-created; a.status != http.StatusCreated {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
}
