package members

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/erasure"
)

// Errors of Link.
var (
	ErrLinkErased = errors.New("the member is erased")
	ErrLinked     = errors.New("already linked")
)

// Link maps subject at issuer to member, an id of the shared-secret mode (below FirstID), so
// that a platform moving to a provider keeps its members' data: the provider's tokens of that
// subject name member from then on. It refuses an erased member (ErrLinkErased) and a subject
// or a member that is linked already (ErrLinked).
func Link(ctx context.Context, pool *pgxpool.Pool, issuer, subject string, member int64) error {
	if member <= 0 || member >= FirstID {
		return fmt.Errorf("member %d: a member of the shared-secret mode is between 1 and %d", member, FirstID-1)
	}
	if err := checkSubject(issuer, subject); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// After the fence, an erasure of member has committed (read next) or waits for this
		// transaction, whose mapping it then deletes.
		if _, err := tx.Exec(ctx, erasure.FenceSQL); err != nil {
			return err
		}
		var erased bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM member_erasures WHERE member_id = $1)`, member).Scan(&erased); err != nil {
			return err
		}
		if erased {
			return ErrLinkErased
		}
		// A member has a row once they own media; one who only played has none yet.
		if _, err := tx.Exec(ctx, `INSERT INTO members (id) VALUES ($1) ON CONFLICT (id) DO NOTHING`, member); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO member_subjects (issuer, subject, member_id) VALUES ($1, $2, $3)`, issuer, subject, member)
		var pgErr *pgconn.PgError
		switch {
		case !errors.As(err, &pgErr) || pgErr.Code != "23505":
		case pgErr.ConstraintName == "member_subjects_member_id_key":
			return fmt.Errorf("%w: the member has another subject", ErrLinked)
		default:
			return fmt.Errorf("%w: the subject is another member's", ErrLinked)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("link member %d: %w", member, err)
	}
	return nil
}
