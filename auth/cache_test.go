package auth

import (
	"fmt"
	"testing"
	"time"
)

func TestTokenCache_BoundedAndExpiring(t *testing.T) {
	c := newTokenCache(640) // 10 per shard
	now := time.Unix(1_800_000_000, 0)
	for i := range 5000 {
		c.put(fmt.Sprint("token-", i), verified{id: Identity{MemberID: int64(i + 1)}, expires: now.Add(time.Minute)}, now)
	}
	total := 0
	for i := range c.shards {
		total += len(c.shards[i].m)
	}
	if total > 640 {
		t.Fatalf("%d entries held, want at most 640", total)
	}
	c.put("fresh", verified{id: Identity{MemberID: 7}, expires: now.Add(time.Minute)}, now)
	if e, ok := c.get("fresh", now); !ok || e.id.MemberID != 7 {
		t.Fatalf("get(fresh) = %v, %v", e, ok)
	}
	if _, ok := c.get("fresh", now.Add(time.Minute)); ok {
		t.Fatal("an expired entry was returned")
	}
	if _, ok := c.get("never-put", now); ok {
		t.Fatal("a token never verified was returned")
	}
}
