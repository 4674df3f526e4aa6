package binarytest

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

const (
	// PositionStep is the distance in ms between two reports of a Player: its k-th report
	// carries the position k·PositionStep.
	PositionStep = 1000
	// MediaDurationMS is the length of the media CreateMedia registers, which bounds a
	// player's positions.
	MediaDurationMS = 3_600_000
	// ServedByHeader names the node that answered, as scripts/haproxy.cfg sets it.
	ServedByHeader = "X-Served-By"
	// loadTimeout bounds WaitAccepted.
	loadTimeout = 2 * time.Minute
)

// Player is one (member, media) pair reporting strictly increasing positions. One load worker
// drives it at a time; read its fields after the load has stopped.
type Player struct {
	Member, Media int64
	Token         string
	Sent          int         // reports sent
	AckedAt       []time.Time // AckedAt[k-1]: when the k-th report was answered 204 (zero if not)
	LastAcked     int32       // the newest position answered 204, 0 when none
	// AckedBy[k-1] is the ServedByHeader of the k-th report's 204: the node that accepted it
	// behind a balancer that names it (scripts/haproxy.cfg), empty otherwise.
	AckedBy []string
}

// Next counts p's next report as sent and returns its position (PositionStep more than the
// last one sent). A driver other than Load calls Next before it sends, and Acked on its 204,
// so that Audit knows what p was told.
func (p *Player) Next() int32 {
	p.Sent++
	p.AckedAt = append(p.AckedAt, time.Time{})
	p.AckedBy = append(p.AckedBy, "")
	return int32(p.Sent * PositionStep)
}

// Acked records that the report Next last returned was answered 204 by the node servedBy.
func (p *Player) Acked(servedBy string) {
	p.LastAcked = int32(p.Sent * PositionStep)
	p.AckedAt[p.Sent-1] = time.Now()
	p.AckedBy[p.Sent-1] = servedBy
}

// NewPlayers registers mediaCount media through the admin API and returns n players, members
// firstMember, firstMember+1, …, spread over the media in turn.
func NewPlayers(t testing.TB, s *Server, n int, firstMember int64, mediaCount int) []*Player {
	t.Helper()
	admin := Token(t, 1, true)
	var mediaIDs []int64
	for i := range mediaCount {
		mediaIDs = append(mediaIDs, s.CreateMedia(t, admin, fmt.Sprintf("load %d", i)))
	}
	ps := make([]*Player, n)
	for i := range ps {
		m := firstMember + int64(i)
		ps[i] = &Player{Member: m, Media: mediaIDs[i%mediaCount], Token: Token(t, m, false)}
	}
	return ps
}

// LoadConfig shapes a playback load.
type LoadConfig struct {
	// Workers drive the players: worker w sends the next report of players w, w+Workers, …
	// in turn. At least 1.
	Workers int
	// Pace is a worker's pause after each round over its players (0: none).
	Pace time.Duration
	// ReadEvery > 0 reads the position back (GET /v1/playback/{media}) after every
	// ReadEvery-th report of the whole load.
	ReadEvery int
}

// Load is a playback load running against a Server: every player reports its next position
// until Stop, or until every player has reported to the end of its media. Answers are counted,
// never fatal: the test decides what it allows.
type Load struct {
	// Sent counts the reports sent and Accepted those answered 204.
	Sent, Accepted atomic.Int64

	s       *Server
	players []*Player
	cfg     LoadConfig
	client  *http.Client

	rounds []atomic.Int64 // rounds[w]: rounds worker w finished; math.MaxInt64 once its players are done

	mu        sync.Mutex
	counts    LoadCounts
	latencies []time.Duration // of 204 answers since the last TakeLatencies

	stopOnce sync.Once
	stop     chan struct{} // closed by Stop
	done     chan struct{} // closed when every worker has returned
}

// LoadCounts is what a load's requests were answered.
type LoadCounts struct {
	Reports             map[int]int // PUT /v1/playback/{media} answers by status
	Reads               map[int]int // GET /v1/playback/{media} answers by status
	TransportErrors     int         // requests that got no answer
	FirstTransportError string
}

// AllOK reports whether at least one report was sent and every report was answered 204 and
// every read 200.
func (c LoadCounts) AllOK() bool {
	return c.Reports[http.StatusNoContent] > 0 && len(c.Reports) == 1 && c.TransportErrors == 0 &&
		(len(c.Reads) == 0 || (len(c.Reads) == 1 && c.Reads[http.StatusOK] > 0))
}

func (c LoadCounts) String() string {
	return fmt.Sprintf("reports answered %v, reads answered %v, %d transport errors (first %q)",
		c.Reports, c.Reads, c.TransportErrors, c.FirstTransportError)
}

// StartLoad starts driving players against s; the load is stopped when the test ends.
func StartLoad(t testing.TB, s *Server, players []*Player, cfg LoadConfig) *Load {
	cfg.Workers = max(cfg.Workers, 1)
	// Idle connections are closed by the client before any server here closes them (HAProxy's
	// keep-alive timeout is its 15 s http-request timeout; fasthttp's PLAYHEAD_HTTP_IDLE_TIMEOUT
	// 60 s): a PUT sent on a connection the server is closing at that moment fails with EOF,
	// and Go resends only GETs. The rolling-restart test saw one such EOF in 47 000 requests.
	transport := &http.Transport{MaxIdleConnsPerHost: cfg.Workers * 2, MaxConnsPerHost: cfg.Workers * 2,
		IdleConnTimeout: 10 * time.Second}
	l := &Load{s: s, players: players, cfg: cfg, stop: make(chan struct{}), done: make(chan struct{}),
		client: &http.Client{Transport: transport, Timeout: 10 * time.Second},
		counts: LoadCounts{Reports: map[int]int{}, Reads: map[int]int{}}, rounds: make([]atomic.Int64, cfg.Workers)}
	var wg sync.WaitGroup
	for w := range cfg.Workers {
		wg.Go(func() { l.work(w) })
	}
	go func() { wg.Wait(); transport.CloseIdleConnections(); close(l.done) }()
	t.Cleanup(l.Stop)
	return l
}

// work drives players w, w+Workers, … until the load stops or all of them are done.
func (l *Load) work(w int) {
	for !l.stopped() {
		progressed := false
		for i := w; i < len(l.players) && !l.stopped(); i += l.cfg.Workers {
			if l.report(l.players[i]) {
				progressed = true
			}
		}
		if !progressed {
			l.rounds[w].Store(math.MaxInt64) // every player of this worker reached the end of its media
			return
		}
		l.rounds[w].Add(1)
		l.pause(l.cfg.Pace)
	}
}

func (l *Load) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

// pause sleeps d, or less if the load stops.
func (l *Load) pause(d time.Duration) {
	if d <= 0 {
		return
	}
	select {
	case <-l.stop:
	case <-time.After(d):
	}
}

// report sends p's next position; false when p has none left to send.
func (l *Load) report(p *Player) bool {
	if p.Sent >= MediaDurationMS/PositionStep {
		return false
	}
	pos := p.Next()
	url := l.s.URL("/v1/playback/%d", p.Media)
	// NewRequest cannot fail here: the method is valid and the URL is the server's own.
	req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader(fmt.Sprintf(`{"position_ms": %d}`, pos)))
	req.Header.Set("Authorization", "Bearer "+p.Token)
	req.Header.Set("Content-Type", "application/json")
	n := l.Sent.Add(1)
	start := time.Now()
	status, servedBy, ok := l.send(req, l.counts.Reports)
	if ok && status == http.StatusNoContent {
		took := time.Since(start)
		p.Acked(servedBy)
		l.Accepted.Add(1)
		l.mu.Lock()
		l.latencies = append(l.latencies, took)
		l.mu.Unlock()
	}
	if ok && l.cfg.ReadEvery > 0 && n%int64(l.cfg.ReadEvery) == 0 {
		read, _ := http.NewRequest(http.MethodGet, url, nil)
		read.Header.Set("Authorization", "Bearer "+p.Token)
		l.send(read, l.counts.Reads)
	}
	return true
}

// ReportOnce sends p's next position once, counted like the load's own reports, and says
// whether it was answered 204. Use it for a player no worker drives any more (after Stop): a
// player that sends one last position, then nothing.
func (l *Load) ReportOnce(p *Player) (accepted bool) {
	return l.report(p) && !p.AckedAt[p.Sent-1].IsZero()
}

// send sends req and counts its answer's status in byStatus; servedBy is the answer's
// ServedByHeader; ok is false on a transport error.
func (l *Load) send(req *http.Request, byStatus map[int]int) (status int, servedBy string, ok bool) {
	resp, err := l.client.Do(req)
	if err != nil {
		l.mu.Lock()
		if l.counts.TransportErrors++; l.counts.TransportErrors == 1 {
			l.counts.FirstTransportError = err.Error()
		}
		l.mu.Unlock()
		l.pause(10 * time.Millisecond) // the server is away: do not spin
		return 0, "", false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	l.mu.Lock()
	byStatus[resp.StatusCode]++
	l.mu.Unlock()
	return resp.StatusCode, resp.Header.Get(ServedByHeader), true
}

// WaitAccepted waits until at least n reports were answered 204 in all. It fails the test if
// the server exits or every worker stops first, or after two minutes.
func (l *Load) WaitAccepted(t testing.TB, n int64) {
	t.Helper()
	giveUp := time.Now().Add(loadTimeout)
	for l.Accepted.Load() < n {
		if exited, err := l.s.Exited(); exited {
			t.Fatalf("playhead exited (%v) after %d reports answered 204, waiting for %d", err, l.Accepted.Load(), n)
		}
		select {
		case <-l.done:
			t.Fatalf("every load worker stopped after %d reports answered 204, waiting for %d; %s", l.Accepted.Load(), n, l.Counts())
		default:
		}
		if time.Now().After(giveUp) {
			t.Fatalf("only %d reports answered 204 after %s, waiting for %d; %s", l.Accepted.Load(), loadTimeout, n, l.Counts())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WaitRounds waits until every worker has gone n more times over all its players (a player
// whose media has ended counts as done). The first round may have begun before the call, so
// WaitRounds(t, 2) means every player has reported at least once after it. It fails the test
// if the server exits or the load stops first, or after two minutes.
func (l *Load) WaitRounds(t testing.TB, n int64) {
	t.Helper()
	target := make([]int64, len(l.rounds))
	for w := range l.rounds {
		target[w] = l.rounds[w].Load() + n
	}
	giveUp := time.Now().Add(loadTimeout)
	for w := 0; w < len(l.rounds); {
		if l.rounds[w].Load() >= target[w] {
			w++
			continue
		}
		if exited, err := l.s.Exited(); exited {
			t.Fatalf("playhead exited (%v) while waiting for %d more rounds of the load", err, n)
		}
		if l.stopped() {
			t.Fatalf("the load was stopped while waiting for %d more rounds of it", n)
		}
		if time.Now().After(giveUp) {
			t.Fatalf("load worker %d did not go %d more times over its players within %s; %s", w, n, loadTimeout, l.Counts())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop stops the load and waits for its workers; the players' fields may be read after it.
func (l *Load) Stop() {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done
}

// Counts returns a copy of the answers counted so far.
func (l *Load) Counts() LoadCounts {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.counts
	c.Reports, c.Reads = maps.Clone(c.Reports), maps.Clone(c.Reads)
	return c
}

// TakeLatencies returns the latencies of the reports answered 204 since the last call,
// sorted.
func (l *Load) TakeLatencies() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.latencies
	l.latencies = nil
	slices.Sort(out)
	return out
}

// Quantile returns the q-quantile (0..1) of sorted durations, 0 for none.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// PlaybackKey is a playback row's key.
type PlaybackKey struct{ Member, Media int64 }

// StoredPositions reads every playback row of the database at dbURL.
func StoredPositions(t testing.TB, dbURL string) map[PlaybackKey]int32 {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatalf("connect to the test database: %v", err)
	}
	defer pool.Close()
	rows, err := pool.Query(ctx, `SELECT member_id, media_id, position_ms FROM playback`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[PlaybackKey]int32{}
	for rows.Next() {
		var k PlaybackKey
		var pos int32
		if err := rows.Scan(&k.Member, &k.Media, &pos); err != nil {
			t.Fatal(err)
		}
		out[k] = pos
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// LostReport is a report answered 204 that the database does not have.
type LostReport struct {
	Player *Player
	Pos    int32
	At     time.Time // when it was answered 204
}

// Audit compares what the players were told with what is stored. lost lists the reports
// answered 204 that are newer than the stored row (a violation after a graceful stop, the
// measured loss after kill -9); bad lists rows that were never sent, and rows of no player.
func Audit(players []*Player, stored map[PlaybackKey]int32) (lost []LostReport, bad []string) {
	known := map[PlaybackKey]bool{}
	for _, p := range players {
		k := PlaybackKey{p.Member, p.Media}
		known[k] = true
		pos, ok := stored[k]
		switch {
		case ok && (pos%PositionStep != 0 || pos < PositionStep || int(pos/PositionStep) > p.Sent):
			bad = append(bad, fmt.Sprintf("member %d media %d: stored %d, which was never sent (sent %d..%d step %d)",
				p.Member, p.Media, pos, PositionStep, p.Sent*PositionStep, PositionStep))
			continue
		case !ok:
			pos = 0
		}
		for k := int(pos/PositionStep) + 1; k <= p.Sent; k++ {
			if at := p.AckedAt[k-1]; !at.IsZero() {
				lost = append(lost, LostReport{Player: p, Pos: int32(k * PositionStep), At: at})
			}
		}
	}
	for k := range stored {
		if !known[k] {
			bad = append(bad, fmt.Sprintf("member %d media %d: a row no player wrote", k.Member, k.Media))
		}
	}
	return lost, bad
}
