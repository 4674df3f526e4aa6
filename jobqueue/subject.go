package jobqueue

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// EnqueueWithArgs is Enqueue for a job that carries parameters of its own (Job.Args): what
// its run needs when the rows it would read them from may be gone by then. args must marshal
// to a JSON object.
func EnqueueWithArgs(ctx context.Context, tx pgx.Tx, kind string, subject int64, maxAttempts int, args any) (int64, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return 0, fmt.Errorf("enqueue %s job: %w", kind, err)
	}
	e, err := Insert(ctx, tx, Spec{Kind: kind, Subject: subject, MaxAttempts: maxAttempts, Args: raw})
	return e.ID, err
}

// cancelSubjectSQL makes DEAD, with the error $3, the jobs of kinds $2 about subject $1 that
// are not running: WAITING or PENDING, and, when $4, PROCESSING ones whose lease has expired
// (their worker is gone; a completion of that claim is then fenced off).
var cancelSubjectSQL = `
UPDATE jobs SET status = 'DEAD', completed_at = statement_timestamp(), last_error = $3, ` + appendError("$3") + `
WHERE subject_id = $1 AND kind = ANY($2)
  AND (status IN ('WAITING', 'PENDING') OR $4 AND status = 'PROCESSING' AND lease_until < statement_timestamp())`

// CancelSubject makes DEAD, in the caller's transaction, the jobs of kinds about subject that
// are not running, with reason as their error, and returns how many it cancelled. Their kinds'
// Fail hooks are not called: the caller cancels them because their subject is going away. A
// running job is left to finish; with expired, one whose lease has expired (its worker is
// gone) is cancelled too. The caller locks the subject's domain rows first (the order
// of every writer).
func CancelSubject(ctx context.Context, tx pgx.Tx, kinds []string, subject int64, reason string, expired bool) (int64, error) {
	tag, err := tx.Exec(ctx, cancelSubjectSQL, subject, kinds, reason, expired)
	if err != nil {
		return 0, fmt.Errorf("cancel the jobs of %d: %w", subject, err)
	}
	return tag.RowsAffected(), nil
}
