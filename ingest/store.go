package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
)

// KindIngest is the job that downloads an imported row's video.
const KindIngest = "ingest"

// Store reads and writes imports.
type Store struct {
	pool        *pgxpool.Pool
	maxAttempts int
	fifo        bool
}

// NewStore returns a Store; maxAttempts is the ingest job's attempt limit.
func NewStore(pool *pgxpool.Pool, maxAttempts int) *Store {
	return &Store{pool: pool, maxAttempts: maxAttempts}
}

// WithFIFO puts an import's downloads, and so their encodes, in one fairness partition for
// everyone (PLAYHEAD_JOBS_FAIR=false) instead of the importer's (media.JobPartition).
func (s *Store) WithFIFO(fifo bool) *Store {
	s.fifo = fifo
	return s
}

// Create records an import and its rows, and for each accepted row a media row
// (PROCESSING, public, owned by the importer) and an ingest job, all in one transaction: an
// import is created whole or not at all (a failure half-way once left an import whose
// counts named rows it did not have, and a retry imported the first rows twice). It returns
// the import id. The admin's member row is created first, in a transaction of its own: its
// INSERT takes the erasure fence (members_refuse_erased), whose shared side is held until the
// transaction ends, and an erasure waiting for it holds back every writer of every node behind
// it, for as long as a large import takes. The import's transaction then inserts no member;
// the foreign keys from imports and media to members keep the row (an erasure job that deleted
// it meanwhile fails the import, and one that comes after deletes the import's media).
func (s *Store) Create(ctx context.Context, admin int64, filename string, sheet Sheet) (int64, error) {
	rows := sheet.Rows
	var id int64
	accepted := 0
	for _, r := range rows {
		if r.Reject == "" {
			accepted++
		}
	}
	if err := media.EnsureMember(ctx, s.pool, admin); err != nil {
		return 0, fmt.Errorf("create import: %w", err)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO imports (created_by, filename, sheet, total_rows, accepted, rejected)
			VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`, admin, filename, sheet.Name, len(rows), accepted, len(rows)-accepted).Scan(&id); err != nil {
			return err
		}
		for _, r := range rows {
			if r.Reject == "" {
				if err := s.acceptRow(ctx, tx, admin, id, r); err != nil {
					return fmt.Errorf("row %d: %w", r.Number, err)
				}
				continue
			}
			if _, err := tx.Exec(ctx, `INSERT INTO import_rows (import_id, row_number, collection, video_url, label, reject_reason)
				VALUES ($1, $2, $3, $4, $5, $6)`, id, r.Number, r.Collection, r.VideoURL, r.Label, r.Reject); err != nil {
				return fmt.Errorf("row %d: %w", r.Number, err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("create import: %w", err)
	}
	return id, nil
}

func (s *Store) acceptRow(ctx context.Context, tx pgx.Tx, admin, importID int64, r Row) error {
	var mediaID int64
	title := fmt.Sprintf("%s %d-%d", r.Collection, r.Chapter, r.Order)
	if err := tx.QueryRow(ctx, `INSERT INTO media (owner_id, title, status, visibility) VALUES ($1, $2, 'PROCESSING', 'PUBLIC') RETURNING id`,
		admin, title).Scan(&mediaID); err != nil {
		return err
	}
	if err := media.NotifyChanged(ctx, tx, mediaID); err != nil { // evicts a cached "no such media"
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO import_rows (import_id, row_number, collection, chapter, position, video_url, label, media_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, importID, r.Number, r.Collection, r.Chapter, r.Order, r.VideoURL, r.Label, mediaID); err != nil {
		return err
	}
	// The importer's partition: their 500 rows take turns with other members' uploads rather
	// than holding them back.
	_, err := jobqueue.Insert(ctx, tx, jobqueue.Spec{Kind: KindIngest, Subject: mediaID, MaxAttempts: s.maxAttempts,
		Partition: media.JobPartition(admin, s.fifo)})
	return err
}

// RowState is where an imported row is.
type RowState string

// The row states.
const (
	StateRejected  RowState = "REJECTED"  // the row was not accepted
	StateAccepted  RowState = "ACCEPTED"  // a dry run: the row would be imported
	StatePending   RowState = "PENDING"   // waiting for an ingest worker
	StateIngesting RowState = "INGESTING" // downloading
	StateUploaded  RowState = "UPLOADED"  // downloaded, encoding
	StateReady     RowState = "READY"     // playable and placed
	StateFailed    RowState = "FAILED"    // gave up, see reason
)

// RowStatus is one row of an import as GET /v1/admin/imports/{id} shows it.
type RowStatus struct {
	Row        int      `json:"row"`
	Collection string   `json:"collection"`
	Chapter    *int     `json:"chapter,omitempty"`
	Order      *int     `json:"order,omitempty"`
	VideoURL   string   `json:"video_url"`
	Label      string   `json:"label,omitempty"`
	State      RowState `json:"state"`
	Reason     string   `json:"reason,omitempty"`
	MediaID    *int64   `json:"media_id,omitempty"`
}

// Import is an import with its rows.
type Import struct {
	ID        int64       `json:"id"`
	Filename  string      `json:"filename"`
	Sheet     string      `json:"sheet,omitempty"`
	Total     int         `json:"total_rows"`
	Accepted  int         `json:"accepted"`
	Rejected  int         `json:"rejected"`
	CreatedAt time.Time   `json:"created_at"`
	Progress  Progress    `json:"progress"`
	Rows      []RowStatus `json:"rows"`
}

// Progress sums up an import's rows: how many are in each state, how many are still on
// their way (PENDING, INGESTING or UPLOADED), and an estimate of the time they need.
type Progress struct {
	Counts    map[RowState]int `json:"counts"`
	Remaining int              `json:"remaining"`
	// EstimatedSecondsLeft is the remaining rows times the average time a row has taken so
	// far (time since the import began over the rows finished); absent until one row has
	// finished, 0 when none remain.
	EstimatedSecondsLeft *int64 `json:"estimated_seconds_left,omitempty"`
}

// progress sums rows up at now for an import created at created.
func progress(rows []RowStatus, created, now time.Time) Progress {
	p := Progress{Counts: map[RowState]int{}}
	finished := 0
	for _, r := range rows {
		p.Counts[r.State]++
		switch r.State {
		case StatePending, StateIngesting, StateUploaded:
			p.Remaining++
		case StateReady, StateFailed:
			finished++
		}
	}
	switch {
	case p.Remaining == 0:
		p.EstimatedSecondsLeft = new(int64)
	case finished > 0:
		perRow := now.Sub(created) / time.Duration(finished)
		left := int64((perRow * time.Duration(p.Remaining)).Round(time.Second) / time.Second)
		p.EstimatedSecondsLeft = &left
	}
	return p
}

// Get returns import id with the current state of every row.
func (s *Store) Get(ctx context.Context, id int64) (Import, error) {
	var imp Import
	err := s.pool.QueryRow(ctx, `SELECT id, filename, sheet, total_rows, accepted, rejected, created_at FROM imports WHERE id = $1`, id).
		Scan(&imp.ID, &imp.Filename, &imp.Sheet, &imp.Total, &imp.Accepted, &imp.Rejected, &imp.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Import{}, apperr.Errorf(apperr.NotFound, "import %d not found", id)
	}
	if err != nil {
		return Import{}, fmt.Errorf("get import: %w", err)
	}
	rows, err := s.pool.Query(ctx, `
		SELECT r.row_number, r.collection, r.chapter, r.position, r.video_url, r.label, r.reject_reason, r.media_id,
		       CASE WHEN r.media_deleted_at IS NOT NULL THEN 'DELETED' ELSE m.status END, coalesce(m.failure_reason, ''),
		       (SELECT j.status FROM jobs j WHERE j.subject_id = r.media_id AND j.kind = $2 ORDER BY j.id DESC LIMIT 1)
		FROM import_rows r LEFT JOIN media m ON m.id = r.media_id
		WHERE r.import_id = $1 ORDER BY r.row_number`, id, KindIngest)
	if err != nil {
		return Import{}, fmt.Errorf("get import rows: %w", err)
	}
	imp.Rows, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (RowStatus, error) {
		var rs RowStatus
		var reject *string
		var mediaStatus, ingestStatus *string
		var failure string
		if err := row.Scan(&rs.Row, &rs.Collection, &rs.Chapter, &rs.Order, &rs.VideoURL, &rs.Label, &reject, &rs.MediaID,
			&mediaStatus, &failure, &ingestStatus); err != nil {
			return rs, err
		}
		rs.State, rs.Reason = rowState(reject, mediaStatus, ingestStatus, failure)
		return rs, nil
	})
	if err != nil {
		return Import{}, fmt.Errorf("get import rows: %w", err)
	}
	imp.Progress = progress(imp.Rows, imp.CreatedAt, time.Now())
	return imp, nil
}

func rowState(reject, mediaStatus, ingestStatus *string, failure string) (RowState, string) {
	switch {
	case reject != nil:
		return StateRejected, *reject
	case mediaStatus == nil:
		return StateFailed, "media missing"
	}
	switch media.Status(*mediaStatus) {
	case media.StatusDeleted:
		// Its owner or an admin deleted the media: the row stays in the report, out of its
		// collection.
		return StateFailed, "media deleted"
	case media.StatusReady:
		return StateReady, ""
	case media.StatusFailed:
		return StateFailed, failure
	case media.StatusUploaded:
		return StateUploaded, ""
	}
	if ingestStatus != nil && jobqueue.Status(*ingestStatus) == jobqueue.StatusProcessing {
		return StateIngesting, ""
	}
	return StatePending, ""
}

// source returns the video URL of the imported row behind media id.
func (s *Store) source(ctx context.Context, mediaID int64) (string, error) {
	var u string
	err := s.pool.QueryRow(ctx, `SELECT video_url FROM import_rows WHERE media_id = $1`, mediaID).Scan(&u)
	if err != nil {
		return "", fmt.Errorf("imported row of media %d: %w", mediaID, err)
	}
	return u, nil
}
