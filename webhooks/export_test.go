package webhooks

// PruneDeliveriesSQL and PruneOutboxSQL let the plan test explain the retention's batches.
const (
	PruneDeliveriesSQL = pruneDeliveriesSQL
	PruneOutboxSQL     = pruneOutboxSQL
)
