package audience_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/playhead/playhead/audience"
	"github.com/playhead/playhead/auth"
)

// The finding: an owner with 4 accounts of his own read the one other viewer's watched ranges
// bucket for bucket, the MinViewers threshold notwithstanding (each count was 4 or 5, the 5s
// the victim's). The tests below run that attack, and the same with enough accounts to be
// shown the curve, over many victims, through the flush and the rollup, and score the owner's
// best reconstruction against the best constant guess.

// maxRangeAdvantage is how much better than the best constant guess ("watched all of it" or
// "none of it", whichever is right more often for that victim) the owner's reconstruction of
// the victim's buckets may be, on average over the victims. With exact counts it is about
// 0.3 (100 % right against about 70 %). With the noise, simulated for 5 000 runs of 40 such
// victims behind 99 accounts, the likeliest range averages −0.12 and never passed 0.02; it
// passes 0 when the noise is a third (μ 3: 9 releases averaged), and averages 0.10 at a fifth
// (μ 5: 25 releases).
const maxRangeAdvantage = 0.10

// maxFinishedAdvantage is the same for whether the victim finished (about a third of them
// do): exact, the owner is always right, some 0.3 over the constant guess "not finished";
// with σ 3 on finished, his guess is right about 57 % of the time, below that constant guess
// (the mean over 200 victims has a standard deviation of 0.035).
const maxFinishedAdvantage = 0.15

// attackOutcome is how well the owner did over the victims.
type attackOutcome struct {
	// ranges is, per reconstruction, its mean accuracy over the victims' 100 buckets;
	// constant the mean accuracy of the best constant guess.
	ranges   map[string]float64
	constant float64
	// finished and finishedBase are the accuracy of the guess of whether each victim finished,
	// and of the best constant guess.
	finished, finishedBase float64
	// curves is how many victims' media showed a curve.
	curves int
}

// victimScript appends the reports of member watching mediaID, drawn from seed k: one range
// from the start (half the victims) or from somewhere in the first 60 s, at least 10 s long;
// half of those ending by 80 s skip at least 15 s ahead and watch a second range.
func victimScript(reports []report, member, mediaID int64, k int) []report {
	r := rand.New(rand.NewPCG(uint64(k), 35))
	from := 0
	if r.IntN(2) == 0 {
		from = r.IntN(60)
	}
	to := from + 10 + r.IntN(90-from)
	reports, at := play(reports, member, mediaID, 0, from, to)
	if to <= 80 && r.IntN(2) == 0 {
		from2 := to + 15 + r.IntN(81-to)
		reports, _ = play(reports, member, mediaID, at, from2, from2+5+r.IntN(96-from2))
	}
	return reports
}

// sybilAttack makes trials media of one owner; on each, sybils accounts of the owner's watch
// (the first full of them the whole video, each other one the one second at 2 s × its rank
// past full) and one victim, a different member each time, watches by victimScript. All of
// it goes through the flush and one rollup; then the owner reads each media's audience and
// reconstructs its victim's buckets, knowing exactly what his own accounts did (read from
// their playback rows).
func sybilAttack(t *testing.T, v *viewing, trials, sybils, full int) attackOutcome {
	t.Helper()
	ctx := context.Background()
	const owner = 7
	media := make([]int64, trials)
	var reports []report
	for k := range media {
		media[k] = v.video(t, owner, fmt.Sprintf("niche %d", k))
		for s := range sybils {
			if s < full {
				reports, _ = play(reports, 10_000+int64(s), media[k], 0, 0, 100)
			} else {
				reports, _ = play(reports, 10_000+int64(s), media[k], 0, 2*(s-full), 2*(s-full))
			}
		}
		reports = victimScript(reports, victim(k), media[k], k)
	}
	v.flush(t, reports)
	if _, err := audience.Rollup(ctx, v.pool); err != nil {
		t.Fatal(err)
	}

	out := attackOutcome{ranges: map[string]float64{}}
	finished := 0
	store := audience.NewStore(v.pool)
	for k, id := range media {
		var watched string
		var victimFinished bool
		if err := v.pool.QueryRow(ctx, `SELECT watched::text, watched_at IS NOT NULL FROM playback WHERE member_id = $1 AND media_id = $2`,
			victim(k), id).Scan(&watched, &victimFinished); err != nil {
			t.Fatal(err)
		}
		truth := make([]bool, audience.Buckets)
		p := 0
		for i := range truth {
			if truth[i] = watched[i] == '1'; truth[i] {
				p++
			}
		}
		// What the owner's accounts contributed, which he knows.
		var own []int64
		var ownFinished, ownBuckets int64
		if err := v.pool.QueryRow(ctx, `
			SELECT (SELECT array_agg(n ORDER BY i) FROM (
			            SELECT i, count(*) FILTER (WHERE get_bit(p.watched, i) = 1) AS n
			            FROM playback p CROSS JOIN generate_series(0, 99) AS i
			            WHERE p.media_id = $1 AND p.member_id <> $2 GROUP BY i) c),
			       count(*) FILTER (WHERE watched_at IS NOT NULL), coalesce(sum(bit_count(watched)), 0)
			FROM playback WHERE media_id = $1 AND member_id <> $2`, id, victim(k)).Scan(&own, &ownFinished, &ownBuckets); err != nil {
			t.Fatal(err)
		}

		a, err := store.Media(ctx, id, auth.Identity{MemberID: owner})
		if err != nil {
			t.Fatal(err)
		}
		if a.Viewers != int64(sybils)+1 {
			t.Fatalf("media %d: %d viewers, want %d", id, a.Viewers, sybils+1)
		}
		guesses := map[string][]bool{}
		if a.Retention != nil {
			out.curves++
			est := make([]float64, audience.Buckets)
			for i, share := range a.Retention {
				est[i] = math.Round(share*float64(a.FiguresViewers)) - float64(own[i])
			}
			guesses["each bucket above half a viewer"] = threshold(est)
			guesses["the most likely range"] = bestRange(est)
		}
		if a.WatchTimeMS != nil && a.DurationMS != nil {
			w := int(math.Round(float64(*a.WatchTimeMS)*audience.Buckets/float64(*a.DurationMS))) - int(ownBuckets)
			guesses["a range from the start as long as the watch time"] = prefix(w)
		}
		for _, name := range []string{"each bucket above half a viewer", "the most likely range", "a range from the start as long as the watch time"} {
			g, ok := guesses[name]
			if !ok {
				g = make([]bool, audience.Buckets) // nothing to go on: "none of it"
			}
			out.ranges[name] += accuracy(g, truth) / float64(trials)
		}
		out.constant += float64(max(p, audience.Buckets-p)) / audience.Buckets / float64(trials)

		guess := a.Finished != nil && *a.Finished-ownFinished >= 1
		if guess == victimFinished {
			out.finished += 1 / float64(trials)
		}
		if victimFinished {
			finished++
		}
	}
	out.finishedBase = float64(max(finished, trials-finished)) / float64(trials)
	for name, acc := range out.ranges {
		t.Logf("%-50s %.3f of the buckets right (best constant guess %.3f: advantage %+.3f)", name, acc, out.constant, acc-out.constant)
	}
	t.Logf("%-50s %.3f right (best constant guess %.3f: advantage %+.3f); %d of %d media showed a curve",
		"whether the victim finished", out.finished, out.finishedBase, out.finished-out.finishedBase, out.curves, trials)
	return out
}

// victim is the member who watches the k-th media of an attack.
func victim(k int) int64 { return 50_000 + int64(k) }

// checkRanges fails t if a reconstruction of the ranges beats the best constant guess by more than
// maxRangeAdvantage.
func (o attackOutcome) checkRanges(t *testing.T) {
	t.Helper()
	for name, acc := range o.ranges {
		if acc-o.constant > maxRangeAdvantage {
			t.Errorf("%s: %.3f of the victims' buckets right, the best constant guess %.3f: the owner reads his victims' ranges (advantage %.3f > %.2f)",
				name, acc, o.constant, acc-o.constant, maxRangeAdvantage)
		}
	}
}

// The finding's attack, over 200 victims: 4 accounts of the owner's watch every second of
// the video, then the victim watches one or two ranges. The owner is shown no curve (5 viewers
// at its release, below audience.MinCurveViewers), and the watch time and the finishes are
// noisy: neither his best reconstruction of the victim's ranges nor his guess of whether the
// victim finished does much better than a constant guess.
func TestSybils_FourAccountsDoNotReadTheFifthViewer(t *testing.T) {
	t.Parallel()
	v := setup(t)
	o := sybilAttack(t, v, 200, 4, 4)
	o.checkRanges(t)
	if o.finished-o.finishedBase > maxFinishedAdvantage {
		t.Errorf("whether the victim finished: %.3f right, the best constant guess %.3f: the owner reads it (advantage %.3f > %.2f)",
			o.finished, o.finishedBase, o.finished-o.finishedBase, maxFinishedAdvantage)
	}
}

// The same with audience.MinCurveViewers − 1 accounts, so the owner is shown the curve: 49 of
// them watch the whole video, the other 50 one second each (spread, so no count is near 0 or
// the viewers, where rounding into them would hide the noise), over 40 victims. The curve's
// noise leaves the owner's best reconstruction (the range that most likely explains what is
// left once his accounts' counts are taken off) no better than a constant guess.
func TestSybils_ACurveOverTheOwnersAccountsHidesTheOneOtherViewer(t *testing.T) {
	t.Parallel()
	v := setup(t)
	o := sybilAttack(t, v, 40, audience.MinCurveViewers-1, 49)
	if o.curves != 40 {
		t.Fatalf("%d of 40 media showed a curve at %d viewers, want all", o.curves, audience.MinCurveViewers)
	}
	o.checkRanges(t)
}

// Reading the figures again, or after a rollup that the owner forces by a position of one of
// his accounts, or after the victim watched more, gives the owner nothing new: a release
// happens only when the audience has grown by a step, so there is neither fresh noise to
// average nor an exact difference to take. Then the step's viewers release new figures.
func TestRelease_NothingNewUntilTheAudienceGrowsByAStep(t *testing.T) {
	t.Parallel()
	v := setup(t)
	const owner = 7
	id := v.video(t, owner, "niche")
	var reports []report
	for s := range int64(4) {
		reports, _ = play(reports, 10_000+s, id, 0, 0, 100)
	}
	reports, _ = play(reports, victim(0), id, 0, 0, 30)
	v.flush(t, reports)
	read := func() audience.Media { return v.rolledUp(t, id, owner) }
	first := read()
	if first.Withheld || first.FiguresViewers != 5 {
		t.Fatalf("after the first rollup: %+v; want figures released over 5 viewers", first)
	}
	same := func(what string, a audience.Media) {
		t.Helper()
		if describe(a) != describe(first) {
			t.Errorf("%s: %s; want what the owner read first, %s", what, describe(a), describe(first))
		}
	}
	// The victim comes back, watches 60 s to the end and finishes.
	reports, _ = play(nil, victim(0), id, 200, 60, 100)
	v.flush(t, reports)
	same("after the victim watched more", read())
	// The owner's account reports a position again, five rollups running.
	for i := range 5 {
		reports, _ = play(nil, 10_000, id, 400+10*i, 50, 50)
		v.flush(t, reports)
		same(fmt.Sprintf("after a position of the owner's account, rollup %d", i+1), read())
	}
	// Four more accounts: 9 viewers, the figures still those of 5.
	reports = nil
	for s := range int64(4) {
		reports, _ = play(reports, 10_004+s, id, 600, 0, 100)
	}
	v.flush(t, reports)
	if a := read(); a.Viewers != 9 || a.FiguresViewers != 5 || released(a) != released(first) {
		t.Errorf("at 9 viewers: %s; want the counts moved, the figures those released over 5 (%s)", describe(a), released(first))
	}
	reports, _ = play(nil, 10_008, id, 800, 0, 100)
	v.flush(t, reports)
	if a := read(); a.Viewers != 10 || a.FiguresViewers != 10 {
		t.Errorf("at 10 viewers: %s; want new figures, released over 10", describe(a))
	}
}

// released is what a Media says beyond the counts, pointers followed.
func released(a audience.Media) string {
	return fmt.Sprintf("over %d viewers: finished %s, completion %s, watch time %s ms, curve %v", a.FiguresViewers,
		deref(a.Finished), deref(a.CompletionRate), deref(a.WatchTimeMS), a.Retention)
}

// describe is all a Media says, pointers followed.
func describe(a audience.Media) string {
	return fmt.Sprintf("%d views, %d viewers, withheld %v, computed at %s; %s", a.Views, a.Viewers, a.Withheld, deref(a.ComputedAt), released(a))
}

func deref[T any](p *T) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}

// What the noise costs: 1000 scripted viewers (600 watch the first 30 s and stop, 300 all of
// it, 100 skip the first 40 s). Each point of the curve is off by about audience.CurveNoise
// viewers (their root mean square within half and one and a half times it), none by more than
// five times it (0.05 of the viewers: the drop at 30 s, from 0.9 to 0.3, shows), finished by
// at most five times audience.FinishedNoise, the watch time by at most five times the noise of
// a sum of 100 counts (500 buckets, 5 lengths of the video of some 44 000 watched).
func TestRetention_TheNoiseIsAsStatedAndTheDropShows(t *testing.T) {
	t.Parallel()
	v := setup(t)
	ctx := context.Background()
	const owner = 7
	id := v.video(t, owner, "popular")
	var reports []report
	member := int64(100_000)
	for _, g := range []struct{ n, from, to int }{{600, 0, 30}, {300, 0, 100}, {100, 40, 100}} {
		for range g.n {
			reports, _ = play(reports, member, id, 0, g.from, g.to)
			member++
		}
	}
	v.flush(t, reports)
	a := v.rolledUp(t, id, owner)
	var counts []int64
	var finished, buckets int64
	if err := v.pool.QueryRow(ctx, `
		SELECT (SELECT array_agg(n ORDER BY i) FROM (
		            SELECT i, count(*) FILTER (WHERE get_bit(p.watched, i) = 1) AS n
		            FROM playback p CROSS JOIN generate_series(0, 99) AS i WHERE p.media_id = $1 GROUP BY i) c),
		       count(*) FILTER (WHERE watched_at IS NOT NULL), sum(bit_count(watched))
		FROM playback WHERE media_id = $1`, id).Scan(&counts, &finished, &buckets); err != nil {
		t.Fatal(err)
	}
	if a.Viewers != 1000 || a.FiguresViewers != 1000 || a.Retention == nil || a.Finished == nil || a.WatchTimeMS == nil {
		t.Fatalf("figures %+v; want all of them, over 1000 viewers", a)
	}
	var squares float64
	for i, share := range a.Retention {
		off := share*1000 - float64(counts[i])
		squares += off * off
		if math.Abs(off) > 5*audience.CurveNoise {
			t.Errorf("retention at %d %%: %.3f, the true share %.3f: off by more than %v viewers", i, share, float64(counts[i])/1000, 5*audience.CurveNoise)
		}
	}
	rms := math.Sqrt(squares / audience.Buckets)
	t.Logf("the curve is off by %.1f viewers (root mean square), finished by %d, the watch time by %d buckets", rms, *a.Finished-finished,
		*a.WatchTimeMS*audience.Buckets / *a.DurationMS - buckets)
	if rms < audience.CurveNoise/2 || rms > 1.5*audience.CurveNoise {
		t.Errorf("the curve is off by %.1f viewers (root mean square); want about %v", rms, audience.CurveNoise)
	}
	if off := *a.Finished - finished; math.Abs(float64(off)) > 5*audience.FinishedNoise {
		t.Errorf("finished %d, truly %d: off by more than %v", *a.Finished, finished, 5*audience.FinishedNoise)
	}
	if off := *a.WatchTimeMS*audience.Buckets / *a.DurationMS - buckets; math.Abs(float64(off)) > 5*10*audience.CurveNoise {
		t.Errorf("watch time of %d buckets, truly %d: off by more than %v", *a.WatchTimeMS*audience.Buckets / *a.DurationMS, buckets, 5*10*audience.CurveNoise)
	}
}

// threshold guesses the buckets whose estimated count is above half a viewer.
func threshold(est []float64) []bool {
	g := make([]bool, len(est))
	for i, e := range est {
		g[i] = e > 0.5
	}
	return g
}

// bestRange guesses the one range that best explains est: under Gaussian noise the most
// likely, the one maximizing the sum of est − 0.5 over it (none when no sum is positive).
func bestRange(est []float64) []bool {
	best, from, to := 0.0, 0, -1
	for a := range est {
		sum := 0.0
		for b := a; b < len(est); b++ {
			if sum += est[b] - 0.5; sum > best {
				best, from, to = sum, a, b
			}
		}
	}
	g := make([]bool, len(est))
	for i := from; i <= to; i++ {
		g[i] = true
	}
	return g
}

// prefix guesses the first w buckets.
func prefix(w int) []bool {
	g := make([]bool, audience.Buckets)
	for i := range min(max(w, 0), audience.Buckets) {
		g[i] = true
	}
	return g
}

// accuracy is the share of buckets guess has right.
func accuracy(guess, truth []bool) float64 {
	n := 0
	for i := range truth {
		if guess[i] == truth[i] {
			n++
		}
	}
	return float64(n) / float64(len(truth))
}

// TestRollup_TheNoiseCannotBePredicted: the noise is drawn from a generator seeded afresh from
// crypto/rand for each run. Noise an owner could tell in advance (a seed fixed in the code, or
// one run's draws repeated in the next) he would subtract, reading the exact counts. Two media
// with the same five viewers, each released alone in a run of its own, get different noise.
func TestRollup_TheNoiseCannotBePredicted(t *testing.T) {
	t.Parallel()
	v := setup(t)
	ctx := context.Background()
	const owner = 7
	release := func(title string) string {
		t.Helper()
		id := v.video(t, owner, title)
		var reports []report
		for s := range int64(5) {
			reports, _ = play(reports, 10_000+s, id, 0, 0, 50)
		}
		v.flush(t, reports)
		if n, err := audience.Rollup(ctx, v.pool); err != nil || n != 1 {
			t.Fatalf("rollup of %s: %d rows, %v; want 1", title, n, err)
		}
		var figures string
		if err := v.pool.QueryRow(ctx, `SELECT format('finished %s, buckets %s, retention %s', finished, watched_buckets, retention)
			FROM media_audience WHERE media_id = $1 AND released_viewers = 5`, id).Scan(&figures); err != nil {
			t.Fatal(err)
		}
		return figures
	}
	if first, second := release("first"), release("second"); first == second {
		t.Errorf("two releases, each alone in its run, drew the same noise: %s", first)
	}
}
