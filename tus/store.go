package tus

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tus/tusd/v2/pkg/handler"

	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/storage"
)

// Objects is the storage a Store writes uploads to: an object store that can build an object
// from parts (storage.Local and storage.S3 both can).
type Objects interface {
	storage.Store
	storage.Parts
}

// store is tusd's data store: the state of every upload in PostgreSQL (the uploads table), its
// bytes in Objects, so that any node can continue any upload.
//
// Why not tusd's own filestore and s3store: their state lives beside the bytes (.info files and
// objects) and their S3 store brings a second S3 client (aws-sdk-go-v2, some thirty modules)
// with its own credentials next to minio-go. Here the offset moves in the same database as the
// media, so the last byte's commit (media row, encode job, the upload's media_id) is one
// transaction, the per-member count of unfinished uploads is a query, and expiry is a
// statement. The bytes of a request are read into one part-sized buffer at a time (PartSize,
// 8 MiB), which is the heap an upload costs, as with POST /v1/media's streamed Put
// (docs/benchmarks/README.md has the measurement). A tail piece object goes up from that
// buffer, its size known: on S3 in one request, with no part buffer of minio-go's beside it
// and no unfinished multipart write a stopped node could leave (storage.S3.Put).
//
// The bytes of an upload: parts of PartSize bytes of one storage.Parts write, and past the last
// whole part its tail, what requests brought that did not fill a part, as append-only pieces
// listed in PostgreSQL (upload_tail_pieces). A request that does not fill a part adds only its
// own bytes as one piece; the one that fills a part reads the pieces once in front of its
// bytes, stores the part and deletes them. So each byte is written once as a piece, read once
// and written once as a part, and a request costs what it carries (≤ 2× its bytes, plus a
// constant on average), on local storage and S3 alike. A tail object rewritten whole by every
// request would cost each request the whole tail instead (100 PATCHes of 1 byte on a tail of
// 8 MiB - 200 B: 800 MiB read and 800 MiB written); appending to a file in place is not safe,
// since a writer that lost the lock would write into the winner's bytes.
//
// A piece of at most maxRowBytes is a row holding its bytes; a larger one is an object of its
// own (tus/{id}/tails/{random}/piece, written once, never overwritten) whose row holds only its
// key and size. Why not every piece a row: each byte of a row goes through PostgreSQL's
// write-ahead log (and its replicas and archive), and a member sending a part less one byte,
// then one byte (or a part), and again, would push almost all of its upload through it at the
// rate its requests are allowed (80 MiB/s and more at 20 requests a second). With the bound a
// request puts at most maxRowBytes of its bytes in the database, merges included. Why not every piece
// an object: the small pieces are the common ones (the end of a body cut short, 1-byte
// PATCHes), and an object costs requests to the store (on S3 a write, a read, a listing and a
// delete) where a row costs one insert in a transaction the request makes anyway.
//
// Every write is committed by a compare-and-set on upload_offset, the piece's row in the same
// transaction, and parts and piece objects are never overwritten, so a writer that lost the
// lock (its session died) cannot corrupt what the winner wrote: its row rolls back with its
// compare-and-set, its part is in no list, its piece object in no row. A piece object is
// written before its transaction and removed when the transaction fails before its commit;
// the objects of deleted pieces are removed after the commit that deleted their rows. What
// such a removal misses (the node stopped, the store failed, a commit whose outcome is
// unknown) is under the upload's folder, which finishing (tus/{id}/tails/), termination and
// expiry remove, and the orphan sweep once the upload's row is gone (OrphanRule).
//
// The tail is bounded: less than a part, in at most maxPieces rows. Why a bound on the rows:
// a piece of 1 byte costs a row (some 100 bytes with its index entry), and 8 Mi PATCHes of 1
// byte would make a part of them. A request that would pass the bound merges the tail and its
// bytes into one piece (an object unless it is within maxRowBytes), which costs at most a
// part's bytes read and written once in maxPieces requests: about 8 KiB each way per request
// on average with the defaults, a constant.
//
// An upload stored by an earlier version may have a tail object (tail_key, tus/{id}/tails/…)
// instead of pieces: the next request reads it once and stores it as a piece or in a part.
type store struct {
	pool      *pgxpool.Pool
	objects   Objects
	partSize  int64
	expiry    time.Duration
	perMember int
	commit    media.Committer
	metrics   *Metrics
	buffers   sync.Pool
	// maxPieces bounds an upload's tail pieces (Config.maxTailPieces).
	maxPieces int
	// beforeTailWrite, when set, is called before a request commits bytes to a tail (tests).
	beforeTailWrite func()
}

// maxRowBytes bounds the bytes of a tail piece stored as a row, and so what a request writes
// into PostgreSQL of its bytes: larger pieces are objects. 64 KiB: at the default request rate
// (PLAYHEAD_UPLOAD_RATE 20/s, burst 100) a member can then put at most 1.25 MiB/s of upload
// bytes into the write-ahead log (6.25 MiB in a burst), where pieces of up to a part (8 MiB)
// let it put 80 to 160 MiB/s; and a piece within it, which a cut body or a client's small
// chunk makes, costs no object (on S3 a write, a read, a listing and a delete). Migration
// 00025 states the same bound as a CHECK on new rows.
const maxRowBytes = 64 << 10

// maxTailPieces is the default bound on an upload's tail pieces: with a merge into one piece,
// a merge comes at most once in 1024 requests.
const maxTailPieces = 1024

// pieceName is the name of a piece object in its own folder, tus/{id}/tails/{random}/: the
// store removes a folder (DeletePrefix), so each piece has one, and removing it touches no
// other piece.
const pieceName = "piece"

// pieceKey is a new, unique key for a tail piece of upload id.
func pieceKey(id string) string { return tailsPrefix(id) + newID() + "/" + pieceName }

// sourceKey is where an upload's file ends up: the source the encoder reads.
func sourceKey(id string) string { return "tus/" + id + "/source" }

func tailsPrefix(id string) string { return "tus/" + id + "/tails/" }

// upload is one row of uploads as a request sees it.
type upload struct {
	s              *store
	id             string
	owner          int64
	length, offset int64
	metadata       map[string]string
	details        media.UploadDetails
	partsID        string
	parts          []storage.Part
	// tailKey is an earlier version's tail object, if any; then tailSize is its size and
	// there are no pieces. Else the tail is tailPieces pieces of tailSize bytes in all.
	tailKey    string
	tailSize   int64
	tailPieces int
	mediaID    int64
	expiresAt  time.Time
	expired    bool
}

var (
	errExpired     = handler.NewError("ERR_UPLOAD_EXPIRED", "the upload expired: nothing was sent to it for too long, and its bytes are removed; start it again", http.StatusGone)
	errOffsetMoved = handler.NewError("ERR_MISMATCHED_OFFSET", "another request moved the upload's offset meanwhile; ask for it again (HEAD)", http.StatusConflict)
)

func errTooManyUnfinished(n int) error {
	return handler.NewError("ERR_TOO_MANY_UPLOADS", fmt.Sprintf("you have %d unfinished uploads, the most a member may have; finish or terminate one first", n), http.StatusTooManyRequests)
}

func errFinished(mediaID int64) error {
	return handler.NewError("ERR_UPLOAD_FINISHED", fmt.Sprintf("the upload is finished: it became media %d, and cannot be terminated", mediaID), http.StatusConflict)
}

// NewUpload creates an upload of the member and details the request carries, unless the
// member has its limit of unfinished uploads.
func (s *store) NewUpload(ctx context.Context, info handler.FileInfo) (handler.Upload, error) {
	st := requestFrom(ctx)
	if st == nil || st.create == nil {
		return nil, errors.New("tus: a creation without its request")
	}
	u := &upload{s: s, id: newID(), owner: st.member, length: info.Size, metadata: st.create.metadata, details: st.create.details}
	metadata, err := json.Marshal(u.metadata)
	if err != nil {
		return nil, err
	}
	// The store's write starts before the transaction: EnsureMember takes the erasure fence
	// (the members trigger), held until the commit, and an erasure waiting for it holds back
	// every writer of every node for as long as the store takes to answer. An upload refused
	// below has its write aborted.
	if u.partsID, err = s.objects.StartParts(ctx, sourceKey(u.id)); err != nil {
		return nil, err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := media.EnsureMember(ctx, tx, u.owner); err != nil {
			return err
		}
		// The member's row serialises its creations, so that two at once cannot both see room.
		if _, err := tx.Exec(ctx, `SELECT FROM members WHERE id = $1 FOR UPDATE`, u.owner); err != nil {
			return err
		}
		var unfinished int
		if err := tx.QueryRow(ctx, `
			SELECT count(*) FROM uploads WHERE owner_id = $1 AND media_id IS NULL AND expires_at > statement_timestamp()`,
			u.owner).Scan(&unfinished); err != nil {
			return err
		}
		if unfinished >= s.perMember {
			return errTooManyUnfinished(unfinished)
		}
		return tx.QueryRow(ctx, `
			INSERT INTO uploads (id, owner_id, upload_length, metadata, title, visibility, source_key, parts_id, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, statement_timestamp() + $9 * interval '1 microsecond')
			RETURNING expires_at`,
			u.id, u.owner, u.length, metadata, u.details.Title, u.details.Visibility, sourceKey(u.id), u.partsID, s.expiry.Microseconds()).Scan(&u.expiresAt)
	})
	if err != nil {
		if u.partsID != "" {
			_ = s.objects.AbortParts(context.WithoutCancel(ctx), sourceKey(u.id), u.partsID)
		}
		return nil, err
	}
	s.metrics.created.Inc()
	st.expiresAt, st.location = u.expiresAt, Base+"/"+u.id
	return u, nil
}

// GetUpload reads upload id. Another member's upload does not exist, nor does one whose media
// was deleted (its row waits for the deletion job); an expired one is gone (410). A complete upload whose media could not be created (the last request's commit failed)
// is committed now: every request for it retries that.
func (s *store) GetUpload(ctx context.Context, id string) (handler.Upload, error) {
	u := &upload{s: s, id: id}
	var metadata, parts []byte
	var tailKey *string
	var mediaID *int64
	err := s.pool.QueryRow(ctx, `
		SELECT owner_id, upload_length, upload_offset, metadata, title, visibility, parts_id, parts,
			tail_key, tail_size, tail_pieces, media_id, expires_at, expires_at <= statement_timestamp()
		FROM uploads u WHERE id = $1
		  AND NOT EXISTS (SELECT 1 FROM media m WHERE m.id = u.media_id AND m.status = 'DELETED')`, id).Scan(&u.owner, &u.length, &u.offset, &metadata, &u.details.Title, &u.details.Visibility,
		&u.partsID, &parts, &tailKey, &u.tailSize, &u.tailPieces, &mediaID, &u.expiresAt, &u.expired)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, handler.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read upload: %w", err)
	}
	st := requestFrom(ctx)
	if st == nil || st.member != u.owner {
		return nil, handler.ErrNotFound
	}
	if err := json.Unmarshal(metadata, &u.metadata); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(parts, &u.parts); err != nil {
		return nil, err
	}
	if tailKey != nil {
		u.tailKey = *tailKey
	}
	if mediaID != nil {
		u.mediaID = *mediaID
	}
	if u.mediaID == 0 && u.expired {
		return nil, errExpired
	}
	if u.mediaID == 0 && u.offset == u.length {
		if err := u.finish(ctx); err != nil {
			return nil, err
		}
	}
	u.report(st)
	return u, nil
}

// report tells the request what the answer should say besides tusd's headers.
func (u *upload) report(st *request) {
	st.mediaID, st.expiresAt, st.offset = u.mediaID, u.expiresAt, u.offset
}

func (u *upload) GetInfo(context.Context) (handler.FileInfo, error) {
	return handler.FileInfo{ID: u.id, Size: u.length, Offset: u.offset, MetaData: u.metadata}, nil
}

func (u *upload) GetReader(context.Context) (io.ReadCloser, error) {
	return nil, handler.ErrNotImplemented // downloads are disabled: the file is read as media
}

// WriteChunk stores what src brings at offset: whole parts as they fill, the rest as pieces of
// the tail. tusd's body reader ends src with io.EOF whatever stopped the body (its end, a
// broken connection, an interruption), so the bytes that arrived are stored in every case.
func (u *upload) WriteChunk(ctx context.Context, offset int64, src io.Reader) (int64, error) {
	if offset != u.offset {
		return 0, handler.ErrMismatchOffset
	}
	if offset > 0 {
		u.s.metrics.resumedWrites.Inc()
	}
	u.s.metrics.writing.Inc()
	defer u.s.metrics.writing.Dec()
	bufp := u.s.buffers.Get().(*[]byte)
	defer u.s.buffers.Put(bufp)
	buf := (*bufp)[:u.s.partSize]
	// buf[:tailSize] is the tail's place: its bytes are read there only when a part is made of
	// them (or the tail is merged), never for a request that only adds to the tail.
	filled := int(u.tailSize)
	start := u.offset
	for u.offset < u.length {
		n, err := io.ReadFull(src, buf[filled:])
		filled += n
		// The buffer holds the tail's place, then bytes past the stored offset.
		complete := u.offset-u.tailSize+int64(filled) == u.length
		if complete && !bodyEnded(ctx, src, u.length-start) {
			return u.offset - start, handler.ErrSizeExceeded // the last bytes are not stored: no media of a cut file
		}
		if filled == len(buf) || complete {
			if err := u.putPart(ctx, buf[:filled]); err != nil {
				return u.offset - start, err
			}
			filled = 0
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break // the body ended
		}
		if err != nil {
			return u.offset - start, err
		}
	}
	if int64(filled) > u.tailSize {
		if err := u.addToTail(ctx, buf[:filled]); err != nil {
			return u.offset - start, err
		}
	}
	return u.offset - start, nil
}

// bodyEnded reports whether the request's body, of which src has given the bytes left of the
// upload (left), ends there. tusd reads the body through a limit of those bytes that hides
// what lies past it, so the answer is in the count of what the body gave below that limit:
// one read more makes the limit look one byte past the end.
func bodyEnded(ctx context.Context, src io.Reader, left int64) bool {
	st := requestFrom(ctx)
	if st == nil {
		return true
	}
	var one [1]byte
	_, _ = src.Read(one[:])
	return st.received <= left
}

// readTail reads the upload's tail into b (its size): the earlier version's tail object, or
// the pieces, rows and objects. Pieces that do not make the tail this request read in the
// upload's row, or whose object is gone (another request changed the tail since: this one lost
// the upload), are errOffsetMoved.
func (u *upload) readTail(ctx context.Context, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if u.tailKey != "" {
		return readObject(ctx, u.s.objects, u.tailKey, b)
	}
	objects, fromRows, err := u.readRows(ctx, b)
	if err != nil {
		return err
	}
	// The objects after the rows: no connection is held while the store is read.
	for _, o := range objects {
		if err := readObject(ctx, u.s.objects, o.key, o.into); err != nil {
			return err
		}
	}
	u.s.metrics.tailRead.Add(float64(fromRows))
	return nil
}

// pieceObject is a tail piece stored as an object, and its place in the tail.
type pieceObject struct {
	key  string
	into []byte
}

// readRows reads the tail's rows: the bytes of those that hold them into their place in b
// (fromRows bytes in all), and the key and place of those that name an object.
func (u *upload) readRows(ctx context.Context, b []byte) (objects []pieceObject, fromRows int, err error) {
	rows, err := u.s.pool.Query(ctx, `
		SELECT start_offset, bytes, object_key, object_size FROM upload_tail_pieces WHERE upload_id = $1 ORDER BY start_offset`, u.id)
	if err != nil {
		return nil, 0, fmt.Errorf("read the upload's tail: %w", err)
	}
	defer rows.Close()
	base := u.offset - u.tailSize
	into := &tailBuffer{b: b}
	for rows.Next() {
		var at int64
		var key *string
		var size *int64
		n := into.n
		if err := rows.Scan(&at, into, &key, &size); err != nil {
			if errors.Is(err, errTailChanged) {
				return nil, 0, errOffsetMoved
			}
			return nil, 0, fmt.Errorf("read the upload's tail: %w", err)
		}
		if at != base+int64(n) {
			return nil, 0, errOffsetMoved
		}
		if key == nil {
			fromRows += into.n - n
			continue
		}
		if size == nil || *size <= 0 || *size > int64(len(b)-n) {
			return nil, 0, errOffsetMoved
		}
		objects = append(objects, pieceObject{key: *key, into: b[n : n+int(*size)]})
		into.n += int(*size)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("read the upload's tail: %w", err)
	}
	if into.n != len(b) {
		return nil, 0, errOffsetMoved
	}
	return objects, fromRows, nil
}

// readObject reads the object at key into b, which is its size. One that is gone was removed
// by a request that moved the upload since (errOffsetMoved).
func readObject(ctx context.Context, objects Objects, key string, b []byte) error {
	r, err := objects.Open(ctx, key)
	if errors.Is(err, fs.ErrNotExist) {
		return errOffsetMoved
	}
	if err != nil {
		return fmt.Errorf("read the upload's tail: %w", err)
	}
	defer r.Close()
	if _, err := io.ReadFull(r, b); err != nil {
		return fmt.Errorf("read the upload's tail: %w", err)
	}
	return nil
}

var errTailChanged = errors.New("the tail's pieces are longer than the upload's row says")

// tailBuffer takes the pieces' bytes one after another into b, straight from the row: no
// copy of a piece on the heap. A row that names an object gives no bytes (NULL).
type tailBuffer struct {
	b []byte
	n int
}

// ScanBytes copies a piece's bytes after those taken before (pgtype.BytesScanner).
func (t *tailBuffer) ScanBytes(v []byte) error {
	if len(v) > len(t.b)-t.n {
		return errTailChanged
	}
	t.n += copy(t.b[t.n:], v)
	return nil
}

// deletePieces deletes the upload's tail pieces in tx and returns the keys of their objects,
// which the caller removes once tx is committed.
func deletePieces(ctx context.Context, tx pgx.Tx, id string) ([]string, error) {
	rows, err := tx.Query(ctx, `
		WITH gone AS (DELETE FROM upload_tail_pieces WHERE upload_id = $1 RETURNING object_key)
		SELECT object_key FROM gone WHERE object_key IS NOT NULL`, id)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// putPart stores b (the tail's place, then what followed it) as the next part and records it:
// the tail is read into its place first, its pieces are deleted in the part's commit and their
// objects after it.
func (u *upload) putPart(ctx context.Context, b []byte) error {
	if err := u.readTail(ctx, b[:u.tailSize]); err != nil {
		return err
	}
	var n int
	// A number of its own for each part written: two writers can never write the same one.
	err := u.s.pool.QueryRow(ctx, `UPDATE uploads SET next_part = next_part + 1 WHERE id = $1 AND media_id IS NULL RETURNING next_part - 1`, u.id).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return handler.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("number the upload's next part: %w", err)
	}
	if n > storage.MaxParts {
		return fmt.Errorf("the upload has used its %d part numbers", storage.MaxParts)
	}
	part, err := u.s.objects.PutPart(ctx, sourceKey(u.id), u.partsID, n, bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return err
	}
	partJSON, err := json.Marshal([]storage.Part{part})
	if err != nil {
		return err
	}
	// A compare-and-set on the offset this request started from: a writer racing with another
	// loses here, not in the stored bytes.
	next := u.offset + int64(len(b)) - u.tailSize
	var expiresAt time.Time
	var gone []string
	err = pgx.BeginFunc(ctx, u.s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `
			UPDATE uploads SET upload_offset = $3, parts = parts || $4::jsonb, tail_key = NULL, tail_size = 0, tail_pieces = 0,
				updated_at = statement_timestamp(), expires_at = statement_timestamp() + $5 * interval '1 microsecond'
			WHERE id = $1 AND upload_offset = $2 AND media_id IS NULL
			RETURNING expires_at`, u.id, u.offset, next, partJSON, u.s.expiry.Microseconds()).Scan(&expiresAt)
		if err != nil || u.tailPieces == 0 {
			return err
		}
		gone, err = deletePieces(ctx, tx, u.id)
		return err
	})
	if err := u.advanced(err, next, expiresAt); err != nil {
		return err
	}
	u.s.removeObjects(ctx, gone)
	u.deleteTail(ctx)
	u.parts, u.tailKey, u.tailSize, u.tailPieces = append(u.parts, part), "", 0, 0
	return nil
}

// addToTail stores b (the tail's place, then what followed it: less than a part) as the new
// tail: its new bytes as one piece after the tail's, or, when that would pass the bound on
// pieces (or the tail is an earlier version's object), the tail and the new bytes merged into
// one piece that replaces the tail's. The piece is a row when it is within maxRowBytes, else
// an object written first and named by its row.
func (u *upload) addToTail(ctx context.Context, b []byte) error {
	added := b[u.tailSize:]
	piece, at, count, merge := added, u.offset, u.tailPieces+1, false
	if u.tailKey != "" || count > u.s.maxPieces {
		if err := u.readTail(ctx, b[:u.tailSize]); err != nil {
			return err
		}
		piece, at, count, merge = b, u.offset-u.tailSize, 1, true
	}
	var key string
	if len(piece) > maxRowBytes {
		key = pieceKey(u.id)
		if _, err := u.s.objects.Put(ctx, key, bytes.NewReader(piece)); err != nil {
			return fmt.Errorf("store the upload's tail: %w", err)
		}
	}
	if u.s.beforeTailWrite != nil {
		u.s.beforeTailWrite()
	}
	next := u.offset + int64(len(added))
	var expiresAt time.Time
	var gone []string
	// committing is set once every statement succeeded: a failure before it rolled the piece's
	// row back for certain, one after it (the commit's) may have committed it.
	committing := false
	err := pgx.BeginFunc(ctx, u.s.pool, func(tx pgx.Tx) error {
		// The compare-and-set first: it locks the upload's row, so that a writer racing with
		// this one finds the offset moved rather than a piece where it would put its own.
		err := tx.QueryRow(ctx, `
			UPDATE uploads SET upload_offset = $3, tail_key = NULL, tail_size = $4, tail_pieces = $5,
				updated_at = statement_timestamp(), expires_at = statement_timestamp() + $6 * interval '1 microsecond'
			WHERE id = $1 AND upload_offset = $2 AND media_id IS NULL
			RETURNING expires_at`, u.id, u.offset, next, len(b), count, u.s.expiry.Microseconds()).Scan(&expiresAt)
		if err != nil {
			return err
		}
		if merge && u.tailPieces > 0 {
			if gone, err = deletePieces(ctx, tx, u.id); err != nil {
				return err
			}
		}
		if key == "" {
			_, err = tx.Exec(ctx, `INSERT INTO upload_tail_pieces (upload_id, start_offset, bytes) VALUES ($1, $2, $3)`, u.id, at, piece)
		} else {
			_, err = tx.Exec(ctx, `INSERT INTO upload_tail_pieces (upload_id, start_offset, object_key, object_size) VALUES ($1, $2, $3, $4)`,
				u.id, at, key, len(piece))
		}
		committing = err == nil
		return err
	})
	if err != nil && key != "" && !committing {
		u.s.removeObjects(ctx, []string{key}) // a piece no row names
	}
	if err := u.advanced(err, next, expiresAt); err != nil {
		return err
	}
	if key == "" {
		u.s.metrics.tailWritten.Add(float64(len(piece)))
	}
	u.s.removeObjects(ctx, gone)
	u.deleteTail(ctx)
	u.tailKey, u.tailSize, u.tailPieces = "", int64(len(b)), count
	return nil
}

// advanced takes the result of a compare-and-set of the offset to next, which gave the
// upload's new expiry: no row means another request moved it first.
func (u *upload) advanced(err error, next int64, expiresAt time.Time) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return errOffsetMoved
	}
	if err != nil {
		return fmt.Errorf("record the upload's offset: %w", err)
	}
	u.s.metrics.bytes.Add(float64(next - u.offset))
	u.offset, u.expiresAt = next, expiresAt
	return nil
}

// removeObjects removes piece objects no row names any more, each with its folder. It does not
// fail: what it leaves is under the upload's folder, which the upload's end removes.
func (s *store) removeObjects(ctx context.Context, keys []string) {
	for _, key := range keys {
		_ = s.objects.DeletePrefix(context.WithoutCancel(ctx), path.Dir(key)+"/")
	}
}

// deleteTail removes the earlier version's tail object that the last advance replaced. Its key
// is no folder: on Local DeletePrefix removes the file, on S3 it is left to the removal of the
// upload's tails when the upload ends.
func (u *upload) deleteTail(ctx context.Context) {
	if u.tailKey != "" {
		_ = u.s.objects.DeletePrefix(context.WithoutCancel(ctx), u.tailKey)
	}
}

// FinishUpload ends a complete upload: the source object, then the media.
func (u *upload) FinishUpload(ctx context.Context) error {
	if err := u.finish(ctx); err != nil {
		return err
	}
	if st := requestFrom(ctx); st != nil {
		u.report(st)
	}
	return nil
}

// finish completes the storage write and, in one transaction, creates the media and its encode
// job (media.Committer, as POST /v1/media does) and records the media in the upload's row. It
// may run again after a failure at any step: a write completed already is found by the size of
// its object, a media created already by the row.
func (u *upload) finish(ctx context.Context) error {
	if u.mediaID != 0 {
		return nil
	}
	key := sourceKey(u.id)
	if err := u.s.objects.CompleteParts(ctx, key, u.partsID, u.parts); err != nil {
		if size, serr := objectSize(ctx, u.s.objects, key); serr != nil || size != u.length {
			return err
		}
	}
	err := pgx.BeginFunc(ctx, u.s.pool, func(tx pgx.Tx) error {
		var mediaID *int64
		if err := tx.QueryRow(ctx, `SELECT media_id FROM uploads WHERE id = $1 FOR UPDATE`, u.id).Scan(&mediaID); err != nil {
			return err
		}
		if mediaID != nil {
			u.mediaID = *mediaID
			return nil
		}
		id, err := u.s.commit.Commit(ctx, tx, media.Upload{Owner: u.owner, Details: u.details, SourceKey: key})
		if err != nil {
			return err
		}
		err = tx.QueryRow(ctx, `
			UPDATE uploads SET media_id = $2, parts = '[]', tail_key = NULL, tail_size = 0, tail_pieces = 0, updated_at = statement_timestamp(),
				expires_at = statement_timestamp() + $3 * interval '1 microsecond'
			WHERE id = $1 RETURNING expires_at`, u.id, id, u.s.expiry.Microseconds()).Scan(&u.expiresAt)
		u.mediaID = id
		return err
	})
	if err != nil {
		u.mediaID = 0
		return fmt.Errorf("finish upload: %w", err)
	}
	u.s.metrics.finished.Inc()
	_ = u.s.objects.DeletePrefix(context.WithoutCancel(ctx), tailsPrefix(u.id))
	return nil
}

// objectSize is the size of the object at key, as the store lists it.
func objectSize(ctx context.Context, st storage.Store, key string) (int64, error) {
	for obj, err := range st.List(ctx, path.Dir(key)+"/", "") {
		if err != nil {
			return 0, err
		}
		if obj.Key == key {
			return obj.Size, nil
		}
	}
	return 0, fs.ErrNotExist
}

func (s *store) AsTerminatableUpload(u handler.Upload) handler.TerminatableUpload { return u.(*upload) }

// Terminate removes an unfinished upload: its row (its tail's pieces with it), then its bytes.
// A finished one is media now and stays (409).
func (u *upload) Terminate(ctx context.Context) error {
	if u.mediaID != 0 {
		return errFinished(u.mediaID)
	}
	tag, err := u.s.pool.Exec(ctx, `DELETE FROM uploads WHERE id = $1 AND media_id IS NULL`, u.id)
	if err != nil {
		return fmt.Errorf("terminate upload: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return handler.ErrNotFound
	}
	u.s.metrics.terminated.Inc()
	u.s.removeBytes(context.WithoutCancel(ctx), u.id, u.partsID)
	return nil
}

// removeBytes removes what an upload whose row is gone had stored. What it cannot remove (the
// store fails now) the orphan sweep removes later: nothing holds the group any more.
func (s *store) removeBytes(ctx context.Context, id, partsID string) {
	_ = RemoveUpload(ctx, s.objects, id, partsID)
}

// RemoveUpload removes every byte upload id stored: the parts of its write partsID and its
// folder (the source, tail pieces, parts written after its finish). Its row is the caller's.
// Removing what is gone already is not an error.
func RemoveUpload(ctx context.Context, objects Objects, id, partsID string) error {
	return errors.Join(objects.AbortParts(ctx, sourceKey(id), partsID), objects.DeletePrefix(ctx, "tus/"+id+"/"))
}

// newID is a new upload id: 128 random bits in hex, so that upload URLs cannot be guessed.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
