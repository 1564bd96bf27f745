package etcd

import "github.com/electkit/election/internal/probe"

func init() {
	probe.EtcdReads = func(e any) int64 { return e.(*Elector).reads.Load() }
	probe.EtcdClocks = func(e any) int { return e.(*Elector).terms.Len() }
	probe.EtcdSettled = func(e any) bool {
		el := e.(*Elector)
		el.mu.Lock()
		c := el.cand
		el.mu.Unlock()
		return c != nil && (c.waiting.Load() || c.watched.Load())
	}
	probe.EtcdNextNoted = func(e any) bool {
		el := e.(*Elector)
		el.mu.Lock()
		defer el.mu.Unlock()
		return el.cand != nil && (el.cand.next != nil || el.cand.succ != nil)
	}
}
