package playback

import (
	"encoding/binary"
	"fmt"
	"time"

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
