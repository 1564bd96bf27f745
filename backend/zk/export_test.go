package zk

// Clocks returns how many Term clocks e holds for Close to wait on.
func Clocks(e *Elector) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.clocks)
}
