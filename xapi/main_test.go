package xapi

import (
	"testing"

	"github.com/playhead/playhead/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
