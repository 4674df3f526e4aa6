package captions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/media"
)

// MaxTracks bounds the caption tracks of one media item: each is an EXT-X-MEDIA line of its
// master playlist and an entry of a player's menu.
const MaxTracks = 20

// folderPrefix starts the name of a track's folder under hls/{media}/, beside the encodes'
// folders, which are named by their claim token (a UUID): "captions-" and 32 hex digits.
const folderPrefix = "captions-"

// Folder is the storage folder of a new caption track of media id: hls/{id}/captions-{random}/.
// Under the media's own prefix, so that the object server serves it with the media's access
// check and a playlist can name only its media's files; the folder is new for every upload, so
// a track's files never change once its row exists.
func Folder(mediaID int64) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("hls/%d/%s%s/", mediaID, folderPrefix, hex.EncodeToString(b[:]))
}

// IsFolder reports whether name, a child of hls/{media}/, is a caption track's folder rather
// than an encode's (which the encode job replaces when it encodes again: encodejobs keeps
// these).
func IsFolder(name string) bool { return strings.HasPrefix(name, folderPrefix) }

// Caption is one caption track as the API shows it.
type Caption struct {
	ID       int64  `json:"id"`
	MediaID  int64  `json:"media_id"`
	Language string `json:"language"`
	Label    string `json:"label"`
	// Cues is how many cues it has, after the ones left without text were dropped.
	Cues      int       `json:"cues"`
	CreatedAt time.Time `json:"created_at"`

	folder string
}

// Store reads and writes the captions table.
type Store struct {
	pool *pgxpool.Pool
}

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// labelKey is the unique constraint on (media_id, label): NAME must differ within a rendition
// group (RFC 8216 4.3.4.1.1).
const labelKey = "captions_label_key"

// insert records a track whose files are stored under c.folder, for media that is still READY,
// within MaxTracks. The media row is locked (FOR NO KEY UPDATE: playback rows referencing it
// are not held up) so that two uploads at once cannot both take the last place.
func (s *Store) insert(ctx context.Context, c Caption, by int64) (Caption, error) {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var status media.Status
		err := tx.QueryRow(ctx, `SELECT status FROM media WHERE id = $1 FOR NO KEY UPDATE`, c.MediaID).Scan(&status)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && status == media.StatusDeleted {
			return apperr.Errorf(apperr.NotFound, "media %d not found", c.MediaID)
		}
		if err != nil {
			return err
		}
		if status != media.StatusReady {
			return notReady(c.MediaID, status)
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM captions WHERE media_id = $1`, c.MediaID).Scan(&n); err != nil {
			return err
		}
		if n >= MaxTracks {
			return apperr.Errorf(apperr.Conflict, "media %d has %d captions, the most it may have: delete one first", c.MediaID, n)
		}
		err = tx.QueryRow(ctx, `
			INSERT INTO captions (media_id, language, label, folder, cues, created_by)
			VALUES ($1, $2, $3, $4, $5, $6) RETURNING id, created_at`,
			c.MediaID, c.Language, c.Label, c.folder, c.Cues, by).Scan(&c.ID, &c.CreatedAt)
		if pe, ok := errors.AsType[*pgconn.PgError](err); ok && pe.ConstraintName == labelKey {
			return apperr.Errorf(apperr.Conflict, "media %d already has captions labelled %q: choose another label or delete those", c.MediaID, c.Label)
		}
		return err
	})
	if err != nil {
		return Caption{}, fmt.Errorf("insert caption: %w", err)
	}
	return c, nil
}

func notReady(id int64, status media.Status) error {
	return apperr.Errorf(apperr.Conflict, "media %d is %s: captions can be added once it is READY", id, status)
}

// recorded reports whether a row holds folder: after an insert that failed, whether its commit
// happened all the same (the answer to a COMMIT can be lost while the server commits).
func (s *Store) recorded(ctx context.Context, folder string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM captions WHERE folder = $1)`, folder).Scan(&ok)
	return ok, err
}

// List returns the tracks of media id, oldest first (the master playlist's order).
func (s *Store) List(ctx context.Context, mediaID int64) ([]Caption, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT id, media_id, language, label, cues, created_at, folder FROM captions WHERE media_id = $1 ORDER BY id`, mediaID)
	if err != nil {
		return nil, fmt.Errorf("list captions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Caption, error) {
		var c Caption
		err := row.Scan(&c.ID, &c.MediaID, &c.Language, &c.Label, &c.Cues, &c.CreatedAt, &c.folder)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("list captions: %w", err)
	}
	return out, nil
}

// remove deletes track id of media mediaID and returns its folder, whose files the caller
// removes after the commit.
func (s *Store) remove(ctx context.Context, mediaID, id int64) (string, error) {
	var folder string
	err := s.pool.QueryRow(ctx, `DELETE FROM captions WHERE id = $1 AND media_id = $2 RETURNING folder`, id, mediaID).Scan(&folder)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", apperr.Errorf(apperr.NotFound, "media %d has no caption %d", mediaID, id)
	}
	if err != nil {
		return "", fmt.Errorf("delete caption: %w", err)
	}
	return folder, nil
}

// SubtitleTracks lists the tracks of media id for its master playlist (media.Subtitles).
func (s *Store) SubtitleTracks(ctx context.Context, mediaID int64) ([]media.SubtitleTrack, error) {
	list, err := s.List(ctx, mediaID)
	if err != nil {
		return nil, err
	}
	out := make([]media.SubtitleTrack, len(list))
	for i, c := range list {
		out[i] = media.SubtitleTrack{Name: c.Label, Language: c.Language, Playlist: c.folder + PlaylistName}
	}
	return out, nil
}
