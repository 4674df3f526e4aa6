package grafana_test

import "testing"

// TestAlertRules_IdentityProvider runs promtool's rule unit test of
// PlayheadIdentityProviderUnreachable (alerts_identity.test.yml): when it fires, for which
// node, and with which annotations.
func TestAlertRules_IdentityProvider(t *testing.T) {
	runTool(t, requireTool(t, "promtool"), "test", "rules", "alerts_identity.test.yml")
}
