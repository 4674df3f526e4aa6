package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// loadPlayer is one (member, media) pair of a playbackLoad, reporting positions step, 2·step,
// … in order. One worker drives it at a time; its fields are read after the load stopped.
type loadPlayer struct {
	member, media int64
	token         string
	sent          int         // reports sent; the k-th carried position k·positionStep
	ackedAt       []time.Time // ackedAt[k-1]: when the k-th report was answered 204 (zero if not)
	lastAcked     int32       // the newest position answered 204
}

// playbackLoad drives players against a server from a fixed set of workers until stopped,
// counting answers. Statuses other than 204 are counted, not fatal: fault tests decide what
// they allow.
type playbackLoad struct {
	s       *server
	players []*loadPlayer
	client  *http.Client
	pace    time.Duration // pause between a worker's rounds over its players

	sent, accepted atomic.Int64
	mu             sync.Mutex
	statuses       map[int]int
	transportErrs  []string
	latencies      []time.Duration // of 204 answers, for the phase being recorded

	stop atomic.Bool
	done chan struct{}
}

// newPlayers registers mediaCount media and makes n players from firstMember on.
func newPlayers(t *testing.T, s *server, n int, firstMember int64, mediaCount int) []*loadPlayer {
	t.Helper()
	admin := mint(t, 1, true)
	var mediaIDs []int64
	for i := range mediaCount {
		mediaIDs = append(mediaIDs, s.createMedia(t, admin, fmt.Sprintf("load %d", i)))
	}
	ps := make([]*loadPlayer, n)
	for i := range ps {
		m := firstMember + int64(i)
		ps[i] = &loadPlayer{member: m, media: mediaIDs[i%mediaCount], token: mint(t, m, false)}
	}
	return ps
}

func startLoad(s *server, players []*loadPlayer, workers int, pace time.Duration) *playbackLoad {
	transport := &http.Transport{MaxIdleConnsPerHost: workers * 2, MaxConnsPerHost: workers * 2}
	l := &playbackLoad{s: s, players: players, pace: pace, statuses: map[int]int{}, done: make(chan struct{}),
		client: &http.Client{Transport: transport, Timeout: 10 * time.Second}}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for !l.stop.Load() {
				for i := w; i < len(players) && !l.stop.Load(); i += workers {
					l.put(players[i])
				}
				if l.pace > 0 {
					time.Sleep(l.pace)
				}
			}
		})
	}
	go func() { wg.Wait(); transport.CloseIdleConnections(); close(l.done) }()
	return l
}

func (l *playbackLoad) put(p *loadPlayer) {
	const maxReports = 3_600_000 / positionStep // the media's duration
	if p.sent >= maxReports {
		return
	}
	pos := int32((p.sent + 1) * positionStep)
	req, _ := http.NewRequest(http.MethodPut, fmt.Sprintf("%s/v1/playback/%d", l.s.httpURL, p.media),
		strings.NewReader(fmt.Sprintf(`{"position_ms": %d}`, pos)))
	req.Header.Set("Authorization", "Bearer "+p.token)
	req.Header.Set("Content-Type", "application/json")
	p.sent++
	p.ackedAt = append(p.ackedAt, time.Time{})
	l.sent.Add(1)
	start := time.Now()
	resp, err := l.client.Do(req)
	if err != nil {
		l.mu.Lock()
		l.transportErrs = append(l.transportErrs, err.Error())
		l.mu.Unlock()
		time.Sleep(10 * time.Millisecond) // the server is away: do not spin
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	l.mu.Lock()
	l.statuses[resp.StatusCode]++
	if resp.StatusCode == http.StatusNoContent {
		l.latencies = append(l.latencies, took)
	}
	l.mu.Unlock()
	if resp.StatusCode == http.StatusNoContent {
		p.lastAcked = pos
		p.ackedAt[p.sent-1] = time.Now()
		l.accepted.Add(1)
	}
}

// waitAccepted waits until at least n reports were answered 204 in total.
func (l *playbackLoad) waitAccepted(t *testing.T, n int64) {
	t.Helper()
	giveUp := time.Now().Add(2 * time.Minute)
	for l.accepted.Load() < n {
		if time.Now().After(giveUp) {
			t.Fatalf("only %d reports answered 204, waited for %d; statuses %v", l.accepted.Load(), n, l.snapshot())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// takeLatencies returns the 204 latencies recorded since the last call, sorted.
func (l *playbackLoad) takeLatencies() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.latencies
	l.latencies = nil
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (l *playbackLoad) snapshot() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	first := ""
	if len(l.transportErrs) > 0 {
		first = l.transportErrs[0]
	}
	return fmt.Sprintf("statuses %v, %d transport errors (first %q)", l.statuses, len(l.transportErrs), first)
}

func (l *playbackLoad) stopAndWait() {
	l.stop.Store(true)
	<-l.done
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

type playbackKey struct{ member, media int64 }

// storedPositions reads every playback row of the server's database.
func storedPositions(t *testing.T, dbURL string) map[playbackKey]int32 {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	rows, err := pool.Query(context.Background(), `SELECT member_id, media_id, position_ms FROM playback`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[playbackKey]int32{}
	for rows.Next() {
		var k playbackKey
		var pos int32
		if err := rows.Scan(&k.member, &k.media, &pos); err != nil {
			t.Fatal(err)
		}
		out[k] = pos
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// lostReport is an acknowledged report the database does not have.
type lostReport struct {
	player *loadPlayer
	pos    int32
	at     time.Time // when it was answered 204
}

// audit compares what the players were told with what is stored: lost lists acknowledged
// reports newer than the stored row (a violation after a graceful stop, the measured loss
// after kill -9), and bad lists rows that were never sent.
func audit(players []*loadPlayer, stored map[playbackKey]int32) (lost []lostReport, bad []string) {
	for _, p := range players {
		pos, ok := stored[playbackKey{p.member, p.media}]
		switch {
		case ok && (pos%positionStep != 0 || pos < positionStep || int(pos/positionStep) > p.sent):
			bad = append(bad, fmt.Sprintf("member %d: stored %d, never sent", p.member, pos))
			continue
		case !ok:
			pos = 0
		}
		for k := int(pos/positionStep) + 1; k <= p.sent; k++ {
			if at := p.ackedAt[k-1]; !at.IsZero() {
				lost = append(lost, lostReport{player: p, pos: int32(k * positionStep), at: at})
			}
		}
	}
	return lost, bad
}
