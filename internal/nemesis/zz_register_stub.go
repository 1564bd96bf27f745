package nemesis

// Placeholder of the register and checker API until the real ones land.

import (
	"context"
	"time"
)

type Register struct{}

func NewRegister(fenced bool) (*Register, error) { return &Register{}, nil }
func (r *Register) Addr() string                 { return "" }
func (r *Register) Write(client string, pid int, token uint64, value string, call int64) bool {
	return true
}
func (r *Register) Report(ev Event)                   {}
func (r *Register) Writes() []Write                   { return nil }
func (r *Register) Events() []Event                   { return nil }
func (r *Register) Leader() (Event, bool)             { return Event{}, false }
func (r *Register) Subscribe() (<-chan Event, func()) { return nil, func() {} }
func (r *Register) Close() error                      { return nil }

type RegisterClient struct{}

func DialRegister(addr, client string, pid int) *RegisterClient { return &RegisterClient{} }
func (c *RegisterClient) Write(ctx context.Context, token uint64, value string, call int64) (bool, error) {
	return true, nil
}
func (c *RegisterClient) Report(ctx context.Context, ev Event) error { return nil }

type CheckOptions struct {
	FailoverBound time.Duration
	VisPath       string
}
type Report struct{}

func (Report) OK() bool                         { return true }
func (Report) String() string                   { return "" }
func Check(h *History, o CheckOptions) Report   { return Report{} }
func SaveHistory(path string, h *History) error { return nil }
