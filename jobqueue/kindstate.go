package jobqueue

import (
	"context"
	"fmt"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/apperr"
)

// TopPartitions is how many partitions KindStates lists per kind: the ones with the most
// PENDING jobs. A kind whose jobs are spread over thousands of members would otherwise make
// the console's answer grow with them.
const TopPartitions = 10

// KindState is one registered kind as the admin API shows it: whether it is paused, its
// cluster-wide limit beside what runs, and where its backlog is.
type KindState struct {
	Kind   string `json:"kind"`
	Paused bool   `json:"paused"`
	// PausedAt and PausedBy say when and by whom the kind was paused; absent when it is not.
	PausedAt *time.Time `json:"paused_at,omitempty"`
	PausedBy *string    `json:"paused_by,omitempty"`
	// MaxRunning is the kind's cluster-wide limit (Kind.MaxRunning), 0 for none.
	MaxRunning int `json:"max_running"`
	// Running is how many of its jobs are PROCESSING with a live lease, on every node: what
	// the limit counts.
	Running int64 `json:"running"`
	// Pending is how many of its jobs are PENDING, due or not.
	Pending int64 `json:"pending"`
	// Priorities are its PENDING jobs by priority.
	Priorities PriorityCounts `json:"priorities"`
	// Partitions are the TopPartitions partitions with the most PENDING jobs, the largest
	// first (ties by partition), an empty list when none is pending.
	Partitions []PartitionBacklog `json:"partitions"`
}

// PriorityCounts are a kind's PENDING jobs by priority.
type PriorityCounts struct {
	High   int64 `json:"high"`
	Normal int64 `json:"normal"`
	Low    int64 `json:"low"`
}

// PartitionBacklog is how many PENDING jobs of a kind one fairness partition has.
type PartitionBacklog struct {
	Partition string `json:"partition"`
	Pending   int64  `json:"pending"`
}

// kindStatesSQL reads every kind of $1 in one statement. The running count uses the
// PROCESSING index led by the kind; the priorities and the partitions read the kind's PENDING
// rows (its claim index), so the answer costs what the backlog costs: an admin route's price,
// which the metrics (queueCollector) do not pay.
const kindStatesSQL = `
SELECT k.kind, p.paused_at, p.paused_by,
       (SELECT count(*) FROM jobs j WHERE j.kind = k.kind AND j.status = 'PROCESSING' AND j.lease_until > statement_timestamp()),
       c.n, c.high, c.normal, c.low,
       coalesce((SELECT json_agg(json_build_object('partition', t.partition_key, 'pending', t.n) ORDER BY t.n DESC, t.partition_key)
                 FROM (SELECT partition_key, count(*) AS n FROM jobs j WHERE j.kind = k.kind AND j.status = 'PENDING'
                       GROUP BY partition_key ORDER BY n DESC, partition_key LIMIT $2) t), '[]'::json)
FROM unnest($1::text[]) WITH ORDINALITY k(kind, ord)
LEFT JOIN job_kind_pauses p ON p.kind = k.kind
CROSS JOIN LATERAL (SELECT count(*) AS n, count(*) FILTER (WHERE j.priority = 1) AS high,
                           count(*) FILTER (WHERE j.priority = 2) AS normal, count(*) FILTER (WHERE j.priority >= 3) AS low
                    FROM jobs j WHERE j.kind = k.kind AND j.status = 'PENDING') c
ORDER BY k.ord`

// KindStates returns every kind this queue knows, by name, with its pause, limit, running
// count and backlog.
func (q *Queue) KindStates(ctx context.Context) ([]KindState, error) {
	rows, err := q.pool.Query(ctx, kindStatesSQL, q.kinds.names, TopPartitions)
	if err != nil {
		return nil, fmt.Errorf("read job kinds: %w", err)
	}
	states, err := pgx.CollectRows(rows, q.scanKindState)
	if err != nil {
		return nil, fmt.Errorf("read job kinds: %w", err)
	}
	return states, nil
}

// kindState reads one kind's state, for the answer of a pause or a resume.
func (q *Queue) kindState(ctx context.Context, kind string) (KindState, error) {
	rows, err := q.pool.Query(ctx, kindStatesSQL, []string{kind}, TopPartitions)
	if err != nil {
		return KindState{}, fmt.Errorf("read job kind %s: %w", kind, err)
	}
	return pgx.CollectExactlyOneRow(rows, q.scanKindState)
}

func (q *Queue) scanKindState(row pgx.CollectableRow) (KindState, error) {
	var s KindState
	err := row.Scan(&s.Kind, &s.PausedAt, &s.PausedBy, &s.Running, &s.Pending,
		&s.Priorities.High, &s.Priorities.Normal, &s.Priorities.Low, &s.Partitions)
	s.Paused = s.PausedAt != nil
	s.MaxRunning = q.kinds.kinds[s.Kind].MaxRunning
	return s, err
}

// knownKind returns the kind named by the route's :kind, or a 404: a kind this node does not
// know is never written to job_kind_pauses, so a pause cannot be left behind for a kind no
// node runs.
func (h *AdminHandler) knownKind(c *fiber.Ctx) (string, error) {
	kind := c.Params("kind")
	if _, ok := h.Queue.kinds.kinds[kind]; !ok {
		return "", apperr.Errorf(apperr.NotFound, "no such job kind: GET /v1/admin/jobs/kinds lists them")
	}
	return kind, nil
}

func (h *AdminHandler) kindStates(c *fiber.Ctx) error {
	states, err := h.Queue.KindStates(c.UserContext())
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"kinds": states})
}

// pause stops every node from claiming jobs of the kind (running jobs finish) and answers the
// kind's state. Pausing a paused kind keeps its first pause.
func (h *AdminHandler) pause(c *fiber.Ctx) error {
	kind, err := h.knownKind(c)
	if err != nil {
		return err
	}
	by := "an administrator"
	if h.Actor != nil {
		by = h.Actor(c)
	}
	if err := h.Queue.Pause(c.UserContext(), kind, by); err != nil {
		return err
	}
	return h.answerKind(c, kind)
}

// resume lets every node claim the kind's jobs again; resuming a kind that is not paused
// changes nothing.
func (h *AdminHandler) resume(c *fiber.Ctx) error {
	kind, err := h.knownKind(c)
	if err != nil {
		return err
	}
	if err := h.Queue.Resume(c.UserContext(), kind); err != nil {
		return err
	}
	return h.answerKind(c, kind)
}

func (h *AdminHandler) answerKind(c *fiber.Ctx, kind string) error {
	s, err := h.Queue.kindState(c.UserContext(), kind)
	if err != nil {
		return err
	}
	return c.JSON(s)
}
