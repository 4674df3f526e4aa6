package jobqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/jobqueue"
)

// A claim commits with synchronous_commit off, and only the claim: the setting is local to
// the claim's transaction. Were it to outlive it on the pooled connection, every later write
// on that connection (a completion, a media row, a playback flush) would be acknowledged
// before it is on disk. The connection here has synchronous_commit on for its session (the
// test cluster's default is off), one connection only, so every statement shares it: a
// trigger records the setting the claim's UPDATE ran under (off), and SHOW, after each claim
// (the first prepares its statements, the second uses them), still reads on.
func TestQueue_ClaimsSettingStaysInItsTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	if _, err := b.pool.Exec(ctx, `
		CREATE TABLE claim_settings (setting text NOT NULL);
		CREATE FUNCTION record_claim_setting() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO claim_settings VALUES (current_setting('synchronous_commit'));
			RETURN NEW;
		END $$;
		CREATE TRIGGER record_claim_setting AFTER UPDATE OF claim_token ON jobs
		FOR EACH ROW WHEN (NEW.status = 'PROCESSING') EXECUTE FUNCTION record_claim_setting();`); err != nil {
		t.Fatal(err)
	}
	b.insertJobs(t, "plain", 2)
	cfg, err := pgxpool.ParseConfig(b.url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	q := newQueue(t, pool, time.Minute, jobqueue.Kind{Name: "plain"})

	for claim := 1; claim <= 2; claim++ {
		jobs, err := q.Claim(ctx, "plain", 1, "n")
		if err != nil || len(jobs) != 1 {
			t.Fatalf("claim %d: %d jobs (%v), want 1", claim, len(jobs), err)
		}
		var setting string
		if err := pool.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&setting); err != nil {
			t.Fatal(err)
		}
		if setting != "on" {
			t.Errorf("after claim %d the connection's synchronous_commit is %q, want on (the session's)", claim, setting)
		}
	}
	var during []string
	rows, err := pool.Query(ctx, `SELECT setting FROM claim_settings`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		during = append(during, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(during) != 2 || during[0] != "off" || during[1] != "off" {
		t.Errorf("the claims ran with synchronous_commit %v, want [off off]", during)
	}
}
