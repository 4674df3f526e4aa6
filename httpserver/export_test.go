package httpserver

// Resolved returns how many (method, route, status) combinations m has resolved.
func (m *Metrics) Resolved() int { return len(*m.resolved.Load()) }
