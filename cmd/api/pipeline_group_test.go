package main

// An upload's encode group as the pipeline and cluster tests see it (docs/operations/encoding.md,
// "Watch while it encodes"): the encode job probes the source, and its completion enqueues the
// encode_rendition jobs of encoder.SplitLadder (the lowest rung alone first, the others after it),
// and one encode_finish that waits for them all; every job is in the group of the encode job's id
// (jobs.group_id). The media is playable (media_playable) at its first rendition and READY
// (media_ready) at the finish.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/encoder"
	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
)

// defaultRenditionJobs is PLAYHEAD_ENCODE_RENDITION_JOBS's default, which the tests' nodes run
// with.
const defaultRenditionJobs = 2

// renditionSplit is the rungs of each rendition job, in claim order, that the encode of a
// source height pixels high plans.
func renditionSplit(height int) [][]int {
	return encoder.SplitLadder(encoder.PlanLadder(height), defaultRenditionJobs)
}

// mediaJobs reads the encode jobs of media id (every kind of encodejobs.Kinds), in id order.
func mediaJobs(t *testing.T, pool *pgxpool.Pool, id int64) []jobRow {
	t.Helper()
	return readJobs(t, pool, id, encodejobs.Kinds)
}

// encodeGroup is the encode jobs of one media, by kind, each in id order: the renditions
// lowest rung's first. Before the probe's completion only the encode job exists.
type encodeGroup struct {
	all, probe, renditions, finish []jobRow
}

func groupOf(jobs []jobRow) encodeGroup {
	g := encodeGroup{all: jobs}
	for _, j := range jobs {
		switch j.Kind {
		case encodejobs.KindEncode:
			g.probe = append(g.probe, j)
		case encodejobs.KindRendition:
			g.renditions = append(g.renditions, j)
		case encodejobs.KindFinish:
			g.finish = append(g.finish, j)
		}
	}
	return g
}

func (g encodeGroup) String() string {
	var b strings.Builder
	for _, j := range g.all {
		fmt.Fprintf(&b, "\n\t%v", j)
	}
	return b.String()
}

// job returns the group's job id, failing the test if there is none.
func (g encodeGroup) job(t *testing.T, id int64) jobRow {
	t.Helper()
	i := slices.IndexFunc(g.all, func(j jobRow) bool { return j.ID == id })
	if i < 0 {
		t.Fatalf("job %d is not one of the media's encode jobs:%v", id, g)
	}
	return g.all[i]
}

// finished reports whether the group's finish job is COMPLETED (the media READY).
func (g encodeGroup) finished() bool {
	return len(g.finish) > 0 && g.finish[0].Status == string(jobqueue.StatusCompleted)
}

// dead reports whether a job of the group is DEAD: the group can no longer finish by itself.
func (g encodeGroup) dead() bool {
	return slices.ContainsFunc(g.all, func(j jobRow) bool { return j.Status == string(jobqueue.StatusDead) })
}

// over reports whether the group has finished or cannot.
func (g encodeGroup) over() bool { return g.finished() || g.dead() }

// held returns the group's jobs PROCESSING under node's claim.
func (g encodeGroup) held(node string) []jobRow {
	var out []jobRow
	for _, j := range g.all {
		if claimedBy(node)(j) {
			out = append(out, j)
		}
	}
	return out
}

// processing returns the group's jobs PROCESSING, under any claim.
func (g encodeGroup) processing() []jobRow {
	var out []jobRow
	for _, j := range g.all {
		if j.Status == string(jobqueue.StatusProcessing) {
			out = append(out, j)
		}
	}
	return out
}

// renditionArgs are a rendition job's args (encodejobs' renditionArgs).
type renditionArgs struct {
	Rungs    []int `json:"rungs"`
	Heights  []int `json:"heights"`
	Audio    bool  `json:"audio"`
	Pictures bool  `json:"pictures"`
}

func argsOf(j jobRow) (renditionArgs, error) {
	var a renditionArgs
	err := json.Unmarshal([]byte(str(j.Args)), &a)
	return a, err
}

// faults lists what is wrong with a finished encode group of a source whose ladder is split
// into the rendition jobs of split (renditionSplit): not exactly one encode job, a rendition
// job for each part of split, in its order (the lowest rung alone first, with the audio and the
// pictures), and one finish; a job outside the encode
// job's group; a job not COMPLETED (none may be left WAITING, PENDING, PROCESSING or DEAD).
// The attempts are the caller's to check.
func (g encodeGroup) faults(split [][]int) []string {
	var out []string
	if len(g.probe) != 1 || len(g.renditions) != len(split) || len(g.finish) != 1 || len(g.all) != len(split)+2 {
		out = append(out, fmt.Sprintf("%d jobs: %d encode, %d %s, %d %s; want %d: 1, %d, 1",
			len(g.all), len(g.probe), len(g.renditions), encodejobs.KindRendition, len(g.finish), encodejobs.KindFinish,
			len(split)+2, len(split)))
	}
	for _, j := range g.all {
		if len(g.probe) > 0 && (j.GroupID == nil || *j.GroupID != g.probe[0].ID) {
			out = append(out, fmt.Sprintf("job %d (%s) is not in the group of encode job %d", j.ID, j.Kind, g.probe[0].ID))
		}
		if j.Status != string(jobqueue.StatusCompleted) {
			out = append(out, fmt.Sprintf("job %d (%s) is %s, want COMPLETED", j.ID, j.Kind, j.Status))
		}
	}
	for i, j := range g.renditions {
		a, err := argsOf(j)
		lowest := i == 0
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("rendition job %d: args %s: %v", j.ID, str(j.Args), err))
		case i >= len(split):
		case !slices.Equal(a.Rungs, split[i]) || a.Audio != lowest || a.Pictures != lowest:
			out = append(out, fmt.Sprintf("rendition job %d (number %d of %d, lowest first): args %s, want rungs %v with audio and pictures %v",
				j.ID, i+1, len(g.renditions), str(j.Args), split[i], lowest))
		}
	}
	return out
}

// waitGroup polls media id's encode jobs until cond holds. stop, when it holds, fails the
// test at once (the state waited for can no longer come), as does the exit of one of the
// processes in alive.
func waitGroup(t *testing.T, pool *pgxpool.Pool, id int64, what string, cond, stop func(encodeGroup) bool, alive ...*binarytest.Server) encodeGroup {
	t.Helper()
	return waitState(t, fmt.Sprintf("media %d's encode group", id), what, func() encodeGroup { return groupOf(mediaJobs(t, pool, id)) }, cond, stop, alive...)
}

// waitGroupFinished waits until media id's encode group has finished, failing at once if a
// job of it is DEAD.
func waitGroupFinished(t *testing.T, pool *pgxpool.Pool, id int64, alive ...*binarytest.Server) encodeGroup {
	t.Helper()
	return waitGroup(t, pool, id, "finished", encodeGroup.finished, encodeGroup.dead, alive...)
}

// mediaEvents counts media id's notification_outbox rows by kind.
func mediaEvents(t *testing.T, pool *pgxpool.Pool, id int64) map[string]int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT kind, count(*)::int FROM notification_outbox WHERE media_id = $1 GROUP BY kind`, id)
	if err != nil {
		t.Fatalf("count the outbox rows of media %d: %v", id, err)
	}
	counts := map[string]int{}
	var kind string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&kind, &n}, func() error { counts[kind] = n; return nil })
	if err != nil {
		t.Fatalf("count the outbox rows of media %d: %v", id, err)
	}
	return counts
}

// readyEventsFault describes what is wrong with the outbox rows of a media whose encode group
// finished: exactly one media_playable and one media_ready, nothing else; "" when nothing is.
func readyEventsFault(events map[string]int) string {
	if want := map[string]int{media.OutboxPlayable: 1, media.OutboxReady: 1}; !maps.Equal(events, want) {
		return fmt.Sprintf("outbox rows %v, want exactly %v", events, want)
	}
	return ""
}

// renditionFolders reads media id's media_renditions rows: name (v0 the highest rung, …,
// audio) → folder (hls/{media}/{claim}/).
func renditionFolders(t *testing.T, pool *pgxpool.Pool, id int64) map[string]string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT name, folder FROM media_renditions WHERE media_id = $1`, id)
	if err != nil {
		t.Fatalf("read the renditions of media %d: %v", id, err)
	}
	folders := map[string]string{}
	var name, folder string
	_, err = pgx.ForEachRow(rows, []any{&name, &folder}, func() error { folders[name] = folder; return nil })
	if err != nil {
		t.Fatalf("read the renditions of media %d: %v", id, err)
	}
	return folders
}

// outputFaults lists what is wrong with the outputs of media id's finished encode group g:
// each rung's rendition row (v<rung>), and the audio's, must name the folder of the claim
// that completed the job of that rung (the lowest rung's job writes the audio), and storage under
// hls/{id}/ must hold those folders and nothing else (dirs, objectDirs': no losing or dead
// claim's files).
func outputFaults(id int64, g encodeGroup, folders map[string]string, dirs []string, hasAudio bool) []string {
	var out []string
	want := map[string]string{}
	var claims []string
	for i, j := range g.renditions {
		a, err := argsOf(j)
		if err != nil {
			continue // a fault of g.faults
		}
		folder := fmt.Sprintf("hls/%d/%s/", id, str(j.ClaimToken))
		for _, rung := range a.Rungs {
			want["v"+strconv.Itoa(rung)] = folder
		}
		if i == 0 && hasAudio {
			want["audio"] = folder
		}
		claims = append(claims, str(j.ClaimToken))
	}
	if !maps.Equal(folders, want) {
		out = append(out, fmt.Sprintf("rendition rows %v, want each in the folder of the claim that completed its job: %v", folders, want))
	}
	slices.Sort(claims)
	dirs = slices.Sorted(slices.Values(dirs))
	if !slices.Equal(dirs, claims) {
		out = append(out, fmt.Sprintf("storage hls/%d/ holds %v, want only the completed rendition claims' folders %v", id, dirs, claims))
	}
	return out
}

// masterVariants counts the variants (#EXT-X-STREAM-INF) of a master playlist.
func masterVariants(master []byte) int {
	return bytes.Count(master, []byte("#EXT-X-STREAM-INF:"))
}

// attemptFaults lists the group's jobs whose attempt count is not want's (by job id), or 1
// for a job want does not name.
func attemptFaults(g encodeGroup, want map[int64]int) []string {
	var out []string
	for _, j := range g.all {
		w, ok := want[j.ID]
		if !ok {
			w = 1
		}
		if j.AttemptCount != w {
			out = append(out, fmt.Sprintf("job %d (%s %s) is %s at attempt %d, want attempt %d", j.ID, j.Kind, str(j.Args), j.Status, j.AttemptCount, w))
		}
	}
	return out
}

// releasedJobs returns the ids of the jobs a node's log (its JSON lines on stderr) says it
// released on a graceful stop.
func releasedJobs(stderr string) []int64 {
	var ids []int64
	for line := range strings.Lines(stderr) {
		var rec struct {
			Msg string `json:"msg"`
			Job int64  `json:"job"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && strings.HasPrefix(rec.Msg, "job released for another node") {
			ids = append(ids, rec.Job)
		}
	}
	return ids
}
