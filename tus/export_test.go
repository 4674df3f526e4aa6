package tus

// SetMaxTailPieces sets the bound on an upload's tail pieces of the Handler cfg makes, so
// that a test reaches a merge in a few requests.
func SetMaxTailPieces(cfg *Config, n int) { cfg.maxTailPieces = n }

// BeforeTailWrite has the Handler cfg makes call f before each commit of bytes to a tail.
func BeforeTailWrite(cfg *Config, f func()) { cfg.beforeTailWrite = f }

// MaxRowBytes is the most bytes of a tail piece stored as a row: what a request writes of its
// bytes into PostgreSQL.
const MaxRowBytes = maxRowBytes
