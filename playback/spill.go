package playback

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/buffer"
)

// SpillCodec writes buffered positions into the buffer's spill files and reads them back: a
// record is the member and media ids (int64), the position (int32) and the event time in Unix
// microseconds (int64, PostgreSQL's precision), big-endian, 28 bytes.
type SpillCodec struct{}

const spillRecordBytes = 8 + 8 + 4 + 8

// AppendEntry appends the record of e to dst.
func (SpillCodec) AppendEntry(dst []byte, e buffer.Entry[Key, Position]) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.Key.Member))
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.Key.Media))
	dst = binary.BigEndian.AppendUint32(dst, uint32(e.Value.PositionMS))
	return binary.BigEndian.AppendUint64(dst, uint64(e.Value.EventTime.UnixMicro()))
}

// DecodeEntry reads one record, refusing values the API could never have accepted.
func (SpillCodec) DecodeEntry(rec []byte) (buffer.Entry[Key, Position], error) {
	if len(rec) != spillRecordBytes {
		return buffer.Entry[Key, Position]{}, fmt.Errorf("playback record of %d bytes, want %d", len(rec), spillRecordBytes)
	}
	e := buffer.Entry[Key, Position]{
		Key: Key{Member: int64(binary.BigEndian.Uint64(rec[0:])), Media: int64(binary.BigEndian.Uint64(rec[8:]))},
		Value: Position{
			PositionMS: int32(binary.BigEndian.Uint32(rec[16:])),
			EventTime:  time.UnixMicro(int64(binary.BigEndian.Uint64(rec[20:]))).UTC(),
		},
	}
	if e.Key.Member <= 0 || e.Key.Media <= 0 || e.Value.PositionMS < 0 || e.Value.EventTime.Unix() <= 0 {
		return buffer.Entry[Key, Position]{}, fmt.Errorf("playback record out of range: %+v", e)
	}
	return e, nil
}

// MaxReplayClockSkew is how far past this node's clock a replayed position's event time may
// be: the node that spilled it may have had a clock a little ahead. A position further ahead
// would win the flush's event-time guard against every later report and freeze the member's
// position for good, so it is refused.
const MaxReplayClockSkew = time.Minute

// ReplayCheck returns the buffer's CheckReplayed for positions: a record read back from a
// spill file passes what PUT /v1/playback/{id} checked when it first arrived (the media is
// playable by the member, the position is within the media) and has an event time no more
// than MaxReplayClockSkew ahead of now. A file with a valid checksum may still have been
// written by someone else (unchecked, a planted position far past the media's end would be
// served as watched). A refusal is buffer.Rejected; a database that does not answer is
// transient.
func ReplayCheck(access AccessChecker, now func() time.Time) func(context.Context, buffer.Entry[Key, Position]) error {
	return func(ctx context.Context, e buffer.Entry[Key, Position]) error {
		if ahead := e.Value.EventTime.Sub(now()); ahead > MaxReplayClockSkew {
			return buffer.Rejected(fmt.Errorf("event time %s is %s ahead of this node's clock", e.Value.EventTime.Format(time.RFC3339), ahead.Round(time.Second)))
		}
		a, err := access.Playable(ctx, e.Key.Member, e.Key.Media)
		if err != nil {
			if apperr.CodeOf(err) == apperr.NotFound {
				return buffer.Rejected(err)
			}
			return err
		}
		if _, err := CheckRange(int64(e.Value.PositionMS), a.DurationMS); err != nil {
			return buffer.Rejected(err)
		}
		return nil
	}
}
