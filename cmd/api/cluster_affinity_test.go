package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
)

// affinityMembers is the members of the affinity test: 1 000 members, two devices each.
const affinityMembers = 1000

// affinityFlushInterval is the api nodes' flush interval in the affinity test: far longer
// than a report-then-read takes, so that a read served by any node but the one holding the
// member's unflushed position is stale every time, not only when it beats a flush.
const affinityFlushInterval = "30s"

// device is one of a member's players: its own connections to the balancer.
type device struct {
	client *http.Client
	lb     string
}

func newDevice(lb string) *device {
	return &device{client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{}}, lb: lb}
}

// report sends position pos for media and returns the status and the node that answered
// (0 on a transport error).
func (d *device) report(token string, media int64, pos int32) (int, string) {
	req, _ := http.NewRequest(http.MethodPut, fmt.Sprintf("%s/v1/playback/%d", d.lb, media),
		strings.NewReader(fmt.Sprintf(`{"position_ms": %d}`, pos)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, ""
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get(binarytest.ServedByHeader)
}

// read returns the member's stored position for media as the balancer's node answers it:
// -1 when it answered 404 (no position yet), the status and the node that answered.
func (d *device) read(token string, media int64) (int32, int, string) {
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/v1/playback/%d", d.lb, media), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, 0, ""
	}
	defer resp.Body.Close()
	var body struct {
		PositionMS int32 `json:"position_ms"`
	}
	pos := int32(-1)
	if resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&body) == nil {
		pos = body.PositionMS
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return pos, resp.StatusCode, resp.Header.Get(binarytest.ServedByHeader)
}

// affinityCounts is what passes of reports and reads found.
type affinityCounts struct {
	mu                          sync.Mutex
	pairs, stale, failed, moved int
	// staleBefore counts the reads of device b before the report that did not see the
	// member's previous accepted position: a device opened later, after the member moved.
	staleBefore int
	// byNode counts the reports each node accepted.
	byNode map[string]int
}

// affinityPass makes every member read its position from device b (it must be the one last
// accepted), report its next position from device a and read it back at once from device b,
// eight members at a time. A read is stale when it is not the position last accepted; moved
// counts the pairs whose read another node answered than the report.
func affinityPass(members []*binarytest.Player, a, b *device, counts *affinityCounts) {
	const workers = 8
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(len(members)) {
					return
				}
				p := members[i]
				before, beforeStatus, _ := b.read(p.Token, p.Media)
				want := p.LastAcked
				if want == 0 {
					want = -1 // nothing accepted yet: 404
				}
				pos := p.Next()
				status, reporter := a.report(p.Token, p.Media, pos)
				ok := status == http.StatusNoContent
				var got int32
				var readStatus int
				var reader string
				if ok {
					p.Acked(reporter)
					got, readStatus, reader = b.read(p.Token, p.Media)
				}
				counts.mu.Lock()
				counts.pairs++
				if before != want {
					counts.staleBefore++
				}
				switch {
				case !ok || (readStatus != http.StatusOK && readStatus != http.StatusNotFound) ||
					(beforeStatus != http.StatusOK && beforeStatus != http.StatusNotFound):
					counts.failed++
				default:
					counts.byNode[reporter]++
					if got != pos {
						counts.stale++
					}
					if reader != reporter {
						counts.moved++
					}
				}
				counts.mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// TestCluster_MemberAffinity: through HAProxy with the affinity of scripts/haproxy.cfg (a
// consistent hash of the token's subject), 1 000 members each report a position from one device
// and read it at once from another. The api nodes flush every 30 s, so a read served by another
// node than the report's would see no position or the one before: with every node up, 0 stale
// reads are allowed, in two passes (no position stored yet, then one stored before). Then the
// api nodes are restarted one by one while passes go on: the stale reads are counted and logged
// (docs/internals/scaling.md says why they happen and for how long), and after a graceful stop every
// member's newest accepted position is stored.
func TestCluster_MemberAffinity(t *testing.T) {
	c := startCluster(t, func(role string, env map[string]string) {
		env["PLAYHEAD_FLUSH_INTERVAL"] = affinityFlushInterval
	})
	members := binarytest.NewPlayers(t, c.lb, affinityMembers, 5000, 4)
	phone, tv := newDevice(c.lb.HTTPURL), newDevice(c.lb.HTTPURL)

	for pass := 1; pass <= 2; pass++ {
		counts := &affinityCounts{byNode: map[string]int{}}
		affinityPass(members, phone, tv, counts)
		t.Logf("all nodes up, pass %d: %d members, %d+%d stale reads (before, after the report), %d failed requests; members per node %v",
			pass, len(members), counts.staleBefore, counts.stale, counts.failed, counts.byNode)
		if counts.failed != 0 || counts.stale != 0 || counts.staleBefore != 0 || counts.moved != 0 {
			t.Errorf("pass %d with every node up: %d+%d stale reads, %d failed requests, %d reads served by another node than the report; want 0",
				pass, counts.staleBefore, counts.stale, counts.failed, counts.moved)
		}
		// Consistent hashing spreads the members: every node holds a share.
		for _, n := range c.apis {
			if counts.byNode[n.name] < len(members)/10 {
				t.Errorf("pass %d: %s accepted %d of %d members' reports, want a share (%v)", pass, n.name, counts.byNode[n.name], len(members), counts.byNode)
			}
		}
	}

	// A rolling restart, passes going on meanwhile. A pass takes at least a second, so that
	// no member reports faster than the production rate limit (1/s) allows.
	rolling := &affinityCounts{byNode: map[string]int{}}
	stop := make(chan struct{})
	passes := make(chan int, 1)
	go func() {
		n := 0
		defer func() { passes <- n }()
		for ; n < 600; n++ {
			began := time.Now()
			affinityPass(members, phone, tv, rolling)
			select {
			case <-stop:
				return
			case <-time.After(time.Second - time.Since(began)):
			}
		}
	}()
	for _, n := range c.apis {
		n.restart(t)
		c.waitBalancer(t, n.name, "UP")
	}
	close(stop)
	t.Logf("rolling restart of %d api nodes: %d passes of %d members, %d stale reads before the report, %d after it, %d failed requests, %d pairs whose read another node answered",
		len(c.apis), <-passes, len(members), rolling.staleBefore, rolling.stale, rolling.failed, rolling.moved)
	if rolling.failed != 0 {
		t.Errorf("%d requests failed during the rolling restart, want 0", rolling.failed)
	}

	c.stop(t)
	lost, bad := binarytest.Audit(members, binarytest.StoredPositions(t, c.dbURL))
	if len(lost) != 0 {
		t.Errorf("after the graceful stop %d positions answered 204 are not stored (first: member %d, position %d), want 0",
			len(lost), lost[0].Player.Member, lost[0].Pos)
	}
	if len(bad) != 0 {
		t.Errorf("stored rows no report explains: %v", bad)
	}
}
