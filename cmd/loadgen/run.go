package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// op is a kind of request the scenario sends.
type op int

const (
	opOpen       op = iota // POST /v1/playback/{media}: the player opened the media
	opPut                  // PUT /v1/playback/{media}: a position report
	opList                 // GET /v1/playback: the continue-watching list
	opCollection           // GET /v1/collections/{name}: a collection with the player's progress
	opCount
)

var opNames = [opCount]string{"POST open", "PUT position", "GET list", "GET collection"}

// player is one virtual player. Only the dispatcher goroutine touches it.
type player struct {
	token string
	// next is the token of the rotated key, sent from the rotation on ("" without one).
	next     string
	rotated  bool
	target   int
	media    int64
	opened   bool
	position int32
	reports  int
}

type request struct {
	op      op
	target  int
	token   string
	rotated bool // the token is of the rotated key
	path    string
	body    []byte
	created time.Time // when the schedule said to send it
}

// slot is the dispatcher's resolution: players are spread evenly over the slots of one period.
// At 1 ms a slot of 100 000 players holds 20 requests, so arrivals are nearly smooth rather than
// bursts that queue behind each other.
const slot = time.Millisecond

func run(ctx context.Context, o options) (*report, error) {
	clients := make([]*fasthttp.HostClient, len(o.targets))
	for i, t := range o.targets {
		addr, isTLS, err := hostOf(t)
		if err != nil {
			return nil, err
		}
		clients[i] = &fasthttp.HostClient{Addr: addr, IsTLS: isTLS, MaxConns: o.conns,
			ReadTimeout: o.timeout, WriteTimeout: o.timeout, MaxConnWaitTimeout: o.timeout,
			MaxIdemponentCallAttempts: 1}
	}
	media, err := setupMedia(o, clients[0])
	if err != nil {
		return nil, err
	}
	players, err := makePlayers(o, media)
	if err != nil {
		return nil, err
	}

	rep := newReport(o)
	scraper := newScraper(o)
	if err := scraper.before(ctx); err != nil {
		return nil, err
	}

	jobs := make(chan request, o.inflight)
	var wg sync.WaitGroup
	for range o.inflight {
		wg.Go(func() {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for r := range jobs {
				rep.record(r, send(clients[r.target], o.targets[r.target], r, req, resp, o.timeout), resp)
			}
		})
	}

	sampleCtx, stopSampling := context.WithCancel(ctx)
	samplerDone := make(chan struct{})
	go func() { defer close(samplerDone); scraper.sample(sampleCtx) }()

	start := time.Now()
	rep.Start = start
	rep.measureFrom = start.Add(o.warmup)
	go scraper.sampleRamped(ctx, rep.measureFrom)
	dispatch(ctx, o, players, start, func(r request) {
		r.created = time.Now()
		select {
		case jobs <- r:
		default: // every worker busy and the queue full: the client, not the server, is the limit
			rep.clientDrop(r.op, r.created)
		}
	})
	close(jobs)
	wg.Wait()
	rep.Elapsed = time.Since(start)
	rep.Measured = time.Since(rep.measureFrom)
	stopSampling()
	<-samplerDone
	if err := scraper.after(context.Background(), rep); err != nil {
		return nil, err
	}
	rep.finish()
	return rep, nil
}

// dispatch walks the schedule slot by slot until the last stage ends. A slot that is late is
// still sent in full (catching up), so the offered rate does not sag when the machine is busy.
func dispatch(ctx context.Context, o options, players []player, start time.Time, fire func(request)) {
	slotsPerPeriod := int(o.period / slot)
	if slotsPerPeriod < 1 {
		slotsPerPeriod = 1
	}
	buckets := make([][]int, slotsPerPeriod)
	for i := range players {
		b := rand.IntN(slotsPerPeriod) // the player's phase: its jitter within the period
		buckets[b] = append(buckets[b], i)
	}
	var total time.Duration
	for _, s := range o.stages {
		total += s.dur
	}
	ticker := time.NewTicker(slot)
	defer ticker.Stop()
	next := 0 // the next slot to send
	for {
		now := time.Since(start)
		if now >= total {
			return
		}
		for ; time.Duration(next)*slot <= now; next++ {
			at := time.Duration(next) * slot
			active := activePlayers(o.stages, at)
			for _, i := range buckets[next%slotsPerPeriod] {
				if i >= active {
					continue
				}
				p := &players[i]
				if p.next != "" && at >= o.rotateAt {
					p.token, p.next, p.rotated = p.next, "", true
				}
				path := "/v1/playback/" + strconv.FormatInt(p.media, 10)
				if !p.opened {
					p.opened = true
					fire(request{op: opOpen, target: p.target, token: p.token, rotated: p.rotated, path: path})
					continue
				}
				p.reports++
				p.position += int32(o.period / time.Millisecond)
				fire(request{op: opPut, target: p.target, token: p.token, rotated: p.rotated, path: path,
					body: fmt.Appendf(nil, `{"position_ms":%d}`, p.position)})
				if o.listEvery > 0 && p.reports%o.listEvery == 0 {
					fire(request{op: opList, target: p.target, token: p.token, rotated: p.rotated, path: "/v1/playback?limit=20"})
					if o.collection != "" {
						fire(request{op: opCollection, target: p.target, token: p.token, rotated: p.rotated, path: "/v1/collections/" + url.PathEscape(o.collection)})
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// activePlayers interpolates the stages: how many players are active at time at.
func activePlayers(stages []stage, at time.Duration) int {
	from := 0
	for _, s := range stages {
		if at < s.dur {
			return from + int(float64(s.target-from)*float64(at)/float64(s.dur))
		}
		at -= s.dur
		from = s.target
	}
	return from
}

func send(c *fasthttp.HostClient, base string, r request, req *fasthttp.Request, resp *fasthttp.Response, timeout time.Duration) error {
	req.Reset()
	resp.Reset()
	req.SetRequestURI(base + r.path)
	req.Header.Set("Authorization", "Bearer "+r.token)
	switch r.op {
	case opOpen:
		req.Header.SetMethod(fasthttp.MethodPost)
	case opPut:
		req.Header.SetMethod(fasthttp.MethodPut)
		req.Header.SetContentType("application/json")
		req.SetBodyRaw(r.body)
	case opList, opCollection:
		req.Header.SetMethod(fasthttp.MethodGet)
	}
	return c.DoTimeout(req, resp, timeout)
}

func hostOf(base string) (addr string, isTLS bool, err error) {
	u := fasthttp.AcquireURI()
	defer fasthttp.ReleaseURI(u)
	if err := u.Parse(nil, []byte(base)); err != nil {
		return "", false, err
	}
	isTLS = string(u.Scheme()) == "https"
	addr = string(u.Host())
	if !hasPort(addr) {
		addr += map[bool]string{true: ":443", false: ":80"}[isTLS]
	}
	return addr, isTLS, nil
}

func hasPort(host string) bool {
	for i := len(host) - 1; i >= 0; i-- {
		switch host[i] {
		case ':':
			return true
		case ']':
			return false
		}
	}
	return false
}

// setupMedia registers the media players watch, through the admin API of the first target.
func setupMedia(o options, c *fasthttp.HostClient) ([]int64, error) {
	admin, err := o.tokens.admin(time.Hour)
	if err != nil {
		return nil, err
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	var ids []int64
	for i := range o.mediaCount {
		req.Reset()
		req.SetRequestURI(o.targets[0] + "/v1/admin/media")
		req.Header.SetMethod(fasthttp.MethodPost)
		req.Header.Set("Authorization", "Bearer "+admin)
		req.Header.SetContentType("application/json")
		req.SetBodyString(fmt.Sprintf(`{"title":"loadgen %d","duration_ms":%d}`, i, 24*3600*1000))
		if err := c.DoTimeout(req, resp, o.timeout); err != nil {
			return nil, fmt.Errorf("register media: %w (is Playhead running at %s?)", err, o.targets[0])
		}
		if resp.StatusCode() != fasthttp.StatusCreated {
			return nil, fmt.Errorf("register media: %d %s (does PLAYHEAD_JWT_SECRET, or -signing-key's public half, match the server's?)", resp.StatusCode(), resp.Body())
		}
		var m struct{ ID int64 }
		if err := json.Unmarshal(resp.Body(), &m); err != nil {
			return nil, err
		}
		ids = append(ids, m.ID)
	}
	return ids, nil
}

func makePlayers(o options, media []int64) ([]player, error) {
	players := make([]player, o.players)
	for i := range players {
		tok, err := o.tokens.player(o.memberStart+int64(i), o.tokenTTL)
		if err != nil {
			return nil, err
		}
		players[i] = player{token: tok, target: i % len(o.targets), media: media[i%len(media)]}
		if o.rotate != nil {
			// Minted now, valid for -token-ttl from the rotation, as if issued then.
			if players[i].next, err = o.rotate.player(o.memberStart+int64(i), o.rotateAt+o.tokenTTL); err != nil {
				return nil, err
			}
		}
	}
	return players, nil
}
