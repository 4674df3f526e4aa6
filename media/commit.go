package media

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/jobqueue"
)

// An upload ends the same way whichever route brought its bytes: POST /v1/media's multipart
// body or the last PATCH of a resumable (tus) upload. Both validate what the member said about
// the file with ParseUploadDetails when the upload starts, and both end in CommitUpload inside
// a transaction of their own, so that the media row, its encode job and the notification that
// evicts a cached "no such media" exist together or not at all, by one code path.

// UploadDetails is what a member says about an upload besides its bytes.
type UploadDetails struct {
	Title      string
	Visibility Visibility
}

// ParseUploadDetails validates an upload's title and visibility as a member gave them. An empty
// title is made from fileName (see titleFromFileName), and "untitled" when that leaves nothing;
// an empty visibility is PRIVATE. A title or visibility that cannot be stored is an
// apperr.Unprocessable error naming it (422).
func ParseUploadDetails(title, fileName, visibility string) (UploadDetails, error) {
	d := UploadDetails{Title: strings.TrimSpace(title), Visibility: Visibility(strings.ToUpper(strings.TrimSpace(visibility)))}
	if d.Visibility == "" {
		d.Visibility = VisibilityPrivate
	}
	if !d.Visibility.Valid() {
		return UploadDetails{}, apperr.Errorf(apperr.Unprocessable, "visibility must be PUBLIC or PRIVATE")
	}
	if utf8.RuneCountInString(d.Title) > MaxTitleRunes {
		return UploadDetails{}, apperr.Errorf(apperr.Unprocessable, "title must be at most %d characters", MaxTitleRunes)
	}
	if err := httpserver.CheckText("title", d.Title); err != nil {
		return UploadDetails{}, err
	}
	if d.Title == "" {
		d.Title = titleFromFileName(fileName)
	}
	if d.Title == "" {
		d.Title = "untitled"
	}
	return d, nil
}

// titleFromFileName makes a title of an uploaded file's name when the member gave none: the
// name without its extension, with what cannot be a title (invalid UTF-8, control characters)
// dropped, and at most MaxTitleRunes long. A file name is the client's to choose, so it never
// fails the upload.
func titleFromFileName(name string) string {
	name = strings.ToValidUTF8(strings.TrimSuffix(name, filepath.Ext(name)), "")
	name = strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, name))
	if runes := []rune(name); len(runes) > MaxTitleRunes {
		name = string(runes[:MaxTitleRunes])
	}
	return name
}

// Upload is a file stored in full under SourceKey, ready to become media.
type Upload struct {
	Owner     int64
	Details   UploadDetails
	SourceKey string
}

// Committer ends uploads: it turns a stored file into media and enqueues its encode.
type Committer struct {
	// JobKind is the kind of the job enqueued for each upload (encodejobs.KindEncode, wired by
	// cmd/api: the catalogue does not know how media is encoded).
	JobKind string
	// MaxAttempts is that job's attempt limit.
	MaxAttempts int
	// FIFO puts every encode in one fairness partition (PLAYHEAD_JOBS_FAIR=false) instead of
	// its owner's (JobPartition).
	FIFO bool
}

// JobPartition is the fairness partition of the jobs of a media owned by owner: the owner, so
// that one member's backlog (an import of 500 rows) delays another member's upload by about
// one job of each busy member, not by the whole backlog. With fifo, every media's jobs share
// the partition "": first in, first out.
func JobPartition(owner int64, fifo bool) string {
	if fifo {
		return ""
	}
	return strconv.FormatInt(owner, 10)
}

// EncodeSpec is the encode job of media id, in partition, at high priority: nothing of the
// media plays before its probe has planned the renditions. It is unique per media: a second
// encode enqueued while one waits or runs (a download completed twice, a retried commit)
// would encode the same source again, so Insert answers the first one's id instead.
func EncodeSpec(kind string, id int64, maxAttempts int, partition string) (jobqueue.Spec, error) {
	// The partition stays out of the key: one encode per media at a time, whichever
	// partition enqueued it.
	key, err := jobqueue.UniqueKeyOf(id, nil, "", 0, time.Time{})
	if err != nil {
		return jobqueue.Spec{}, err
	}
	return jobqueue.Spec{Kind: kind, Subject: id, MaxAttempts: maxAttempts, Partition: partition,
		Priority: jobqueue.PriorityHigh, UniqueKey: key}, nil
}

// Commit inserts u's media row (PROCESSING) and its encode job in tx, and notifies every node
// of the new media when tx commits. The caller owns tx: what else it writes there (a resumable
// upload records which media it became) commits or rolls back with the media.
func (c Committer) Commit(ctx context.Context, tx pgx.Tx, u Upload) (int64, error) {
	if err := EnsureMember(ctx, tx, u.Owner); err != nil {
		return 0, err
	}
	var id int64
	err := tx.QueryRow(ctx, `
		INSERT INTO media (owner_id, title, status, visibility, source_key)
		VALUES ($1, $2, 'PROCESSING', $3, $4) RETURNING id`, u.Owner, u.Details.Title, u.Details.Visibility, u.SourceKey).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("create uploaded media: %w", err)
	}
	if err := NotifyChanged(ctx, tx, id); err != nil { // evicts a cached "no such media"
		return 0, err
	}
	spec, err := EncodeSpec(c.JobKind, id, c.MaxAttempts, JobPartition(u.Owner, c.FIFO))
	if err != nil {
		return 0, err
	}
	if _, err := jobqueue.Insert(ctx, tx, spec); err != nil {
		return 0, fmt.Errorf("enqueue the upload's encode: %w", err)
	}
	return id, nil
}
