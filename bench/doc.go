// Package bench holds the side-by-side benchmarks that need code the service must never
// depend on (River, a bare Fiber server). It is its own Go module so that those dependencies
// stay out of the main go.mod; `make bench` runs it (docs/benchmarks/README.md).
package bench
