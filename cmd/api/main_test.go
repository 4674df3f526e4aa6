package main

import (
	"testing"

	"github.com/playhead/playhead/internal/binarytest"
)

// binary is the playhead executable the end-to-end tests run.
var binary string

// TestMain builds the real binary once and runs the tests against it (binarytest.Main).
func TestMain(m *testing.M) { binarytest.Main(m, &binary) }
