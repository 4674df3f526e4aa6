package jobqueue_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/jobqueue"
)

// Insert with a partition and a unique key: a second enqueue of the same work while the first
// waits returns the first, and the partitions of a kind take turns, so one member's upload
// does not wait behind another member's whole import.
func ExampleInsert() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, databaseURL())
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	insert := func(spec jobqueue.Spec) jobqueue.Enqueued {
		var e jobqueue.Enqueued
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			e, err = jobqueue.Insert(ctx, tx, spec)
			return err
		})
		if err != nil {
			log.Fatal(err)
		}
		return e
	}

	// Member 7 imports three videos; then member 9 uploads one.
	for subject := int64(1); subject <= 3; subject++ {
		insert(jobqueue.Spec{Kind: "example_encode", Subject: subject, MaxAttempts: 3, Partition: "member 7"})
	}
	key, err := jobqueue.UniqueKeyOf(10, nil, "member 9", 0, time.Time{})
	if err != nil {
		log.Fatal(err)
	}
	upload := jobqueue.Spec{Kind: "example_encode", Subject: 10, MaxAttempts: 3, Partition: "member 9", UniqueKey: key}
	first := insert(upload)
	again := insert(upload) // the same encode, enqueued twice
	fmt.Println("duplicate:", again.Existing, again.ID == first.ID)

	q, err := jobqueue.NewQueue(pool, time.Minute, jobqueue.Kind{Name: "example_encode"})
	if err != nil {
		log.Fatal(err)
	}
	// One claim at a time, to show their order: the upload second, though it came last.
	for range 4 {
		jobs, err := q.Claim(ctx, "example_encode", 1, "example-node")
		if err != nil || len(jobs) != 1 {
			log.Fatal(jobs, err)
		}
		fmt.Println(jobs[0].Partition, jobs[0].Subject)
	}
	// Output:
	// duplicate: true true
	// member 7 1
	// member 9 10
	// member 7 2
	// member 7 3
}
