package audience

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// RollupWithoutNoise is Rollup releasing exact figures, for the tests that check the counting
// against figures worked out by hand.
func RollupWithoutNoise(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	return rollup(ctx, pool, func([]float64) {})
}

// CurveNoise and FinishedNoise are the noise's standard deviations, for the test that checks
// the released figures are off by about that much and no more.
const CurveNoise, FinishedNoise = curveNoise, finishedNoise
