package main

import (
	"testing"

	"github.com/playhead/playhead/internal/binarytest"
)

// TestMain builds the real binary once and runs the tests against it (binarytest.Main).
func TestMain(m *testing.M) { binarytest.Main(m) }
