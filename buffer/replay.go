package buffer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/playhead/playhead/backoff"
)

// replayAttempts is how often Start tries one batch of a spill file against a failing database
// before it gives up and keeps the file for the next start: with the default backoff about
// 10 s in all, after the node has already waited for the database to answer a ping.
const replayAttempts = 5

// replay writes every spill file through the flush function, the same guarded write as any
// flush (so replaying a file twice, or after newer positions were written, changes nothing),
// and deletes each file once all of it is settled. A corrupt file is moved aside and counted;
// a transient failure returns an error and keeps the file.
func (b *Buffer[K, V]) replay(ctx context.Context) error {
	d := b.cfg.Spill
	files, err := d.Files()
	if err != nil {
		return err
	}
	for _, path := range files {
		entries, err := ReadSpillFile(path, d.codec)
		if errors.Is(err, ErrCorruptSpill) {
			b.corruptSpills.Add(1)
			aside, mvErr := d.moveAside(path)
			b.cfg.Logger.Error("spill file is corrupt; moved aside, not replayed", "file", path, "moved_to", aside,
				"err", err, "move_err", mvErr)
			continue
		}
		if errors.Is(err, os.ErrNotExist) { // another node sharing the directory replayed it meanwhile
			b.cfg.Logger.Info("spill file gone before its replay; another node sharing the directory replayed it", "file", path)
			continue
		}
		if err != nil { // unreadable (permissions, I/O): leave it where it is for a human
			b.cfg.Logger.Error("spill file unreadable; left in place, not replayed", "file", path, "err", err)
			continue
		}
		if err := b.replayFile(ctx, path, entries); err != nil {
			return err
		}
	}
	return nil
}

func (b *Buffer[K, V]) replayFile(ctx context.Context, path string, entries []Entry[K, V]) error {
	start := time.Now()
	entries = b.coalesce(entries)
	var written int
	var rejected rejections[K]
	defer rejected.log(b.cfg.Logger, rejectedByDatabase, "spill replay")
	settle := func(e Entry[K, V], rejectErr error) {
		if rejectErr != nil {
			rejected.add(e.Key, rejectErr)
			b.lost[lostBadRow].Add(1)
			return
		}
		written++
		b.replayed.Add(1)
	}
	var refused rejections[K]
	defer refused.log(b.cfg.Logger, "spill records refused by the replay check; dropped", "spill replay")
	refuse := func(e Entry[K, V], reason error) {
		refused.add(e.Key, reason)
		b.lost[lostBadRow].Add(1)
	}
	for first := 0; first < len(entries); first += b.cfg.FlushBatch {
		rest := entries[first:min(first+b.cfg.FlushBatch, len(entries))]
		checked := b.cfg.CheckReplayed == nil
		for attempt := 1; len(rest) > 0; attempt++ {
			var err error
			if !checked {
				rest, err = b.checkReplayed(ctx, rest, refuse)
				checked = err == nil
			}
			if err == nil {
				var n int
				n, err = b.write(ctx, rest, settle)
				rest = rest[n:]
				if err == nil {
					break
				}
			}
			if attempt == replayAttempts || ctx.Err() != nil {
				return fmt.Errorf("replay spill file %s: %d of %d rows written, the rest kept in the file for the next start: %w",
					path, written, len(entries), err)
			}
			wait := backoff.FullJitter(attempt, b.cfg.RetryBase, b.cfg.RetryCap)
			b.cfg.Logger.Warn("spill replay failed; retrying", "file", path, "attempt", attempt, "retry_in", wait.Round(time.Millisecond).String(), "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
	}
	if err := b.cfg.Spill.remove(path); err != nil {
		return fmt.Errorf("remove replayed spill file: %w", err)
	}
	b.cfg.Logger.Info("spill file replayed and removed", "file", path, "rows", len(entries), "written", written,
		"rejected", rejected.n, "refused", refused.n, "took", time.Since(start).Round(time.Millisecond).String())
	return nil
}

// checkReplayed returns the entries of batch that pass Config.CheckReplayed, in order, and
// hands each refused one to refuse. A transient error of the check is returned with batch
// unchanged and nothing refused, so a retry checks the batch again from its start.
func (b *Buffer[K, V]) checkReplayed(ctx context.Context, batch []Entry[K, V], refuse func(Entry[K, V], error)) ([]Entry[K, V], error) {
	kept := make([]Entry[K, V], 0, len(batch))
	var refused []Entry[K, V]
	var reasons []error
	for _, e := range batch {
		switch err := b.cfg.CheckReplayed(ctx, e); {
		case err == nil:
			kept = append(kept, e)
		case errors.Is(err, ErrRejected):
			refused, reasons = append(refused, e), append(reasons, err)
		default:
			return batch, fmt.Errorf("check a replayed entry: %w", err)
		}
	}
	for i, e := range refused {
		refuse(e, reasons[i])
	}
	return kept, nil
}

// coalesce keeps the newest entry of each key, sorted by key. A file holds one entry per key
// when this buffer wrote it, but a batch with a key twice would be refused by an upsert as a
// whole (and not as a rejected row), so it is not taken on trust.
func (b *Buffer[K, V]) coalesce(entries []Entry[K, V]) []Entry[K, V] {
	newest := make(map[K]V, len(entries))
	for _, e := range entries {
		if old, ok := newest[e.Key]; !ok || b.cfg.Newer(e.Value, old) {
			newest[e.Key] = e.Value
		}
	}
	out := make([]Entry[K, V], 0, len(newest))
	for k, v := range newest {
		out = append(out, Entry[K, V]{Key: k, Value: v})
	}
	slices.SortFunc(out, func(x, y Entry[K, V]) int { return b.cfg.Compare(x.Key, y.Key) })
	return out
}
