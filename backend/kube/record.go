package kube

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
)

// Annotation is the key of the annotation that carries a leadership's
// token, priority and value on the Lease. client-go's LeaseLock writes the
// spec and keeps the annotations it read, so a leadership won by client-go
// leaves the previous holder's annotation behind: it counts only while its
// holder and acquire time are the spec's.
const Annotation = "election.electkit.io/term"

// termNote is the JSON of the Annotation.
type termNote struct {
	Holder   string `json:"holder"`
	Acquired string `json:"acquired"` // spec.acquireTime, RFC 3339 with microseconds
	Token    uint64 `json:"token,string"`
	Priority int64  `json:"priority,string,omitempty"`
	Value    []byte `json:"value,omitempty"`
}

// microFormat is the format of a MicroTime on the wire.
const microFormat = "2006-01-02T15:04:05.000000Z07:00"

// record is what one Lease says, read the way client-go reads it
// (resourcelock.LeaseSpecToLeaderElectionRecord): absent fields are zero.
type record struct {
	holder      string
	duration    time.Duration // leaseDurationSeconds
	acquired    string        // acquireTime in microFormat, or ""
	renewed     string        // renewTime in microFormat, or ""
	transitions int32
	version     uint64 // metadata.resourceVersion
	note        *termNote
	noteErr     error // the Annotation is there but does not parse
}

// readLease decodes l. A resourceVersion that is not a number is an error:
// the tokens are made from it, so such a Lease is never written (P8).
func readLease(l *coordinationv1.Lease) (record, error) {
	var r record
	v, err := strconv.ParseUint(l.ResourceVersion, 10, 64)
	if err != nil {
		return r, fmt.Errorf("kube election: Lease %s/%s has resourceVersion %q, not a number: tokens cannot be made from it", l.Namespace, l.Name, l.ResourceVersion)
	}
	r.version = v
	s := l.Spec
	if s.HolderIdentity != nil {
		r.holder = *s.HolderIdentity
	}
	if s.LeaseDurationSeconds != nil {
		r.duration = time.Duration(*s.LeaseDurationSeconds) * time.Second
	}
	if s.AcquireTime != nil {
		r.acquired = s.AcquireTime.UTC().Format(microFormat)
	}
	if s.RenewTime != nil {
		r.renewed = s.RenewTime.UTC().Format(microFormat)
	}
	if s.LeaseTransitions != nil {
		r.transitions = *s.LeaseTransitions
	}
	if raw, ok := l.Annotations[Annotation]; ok {
		var n termNote
		if err := json.Unmarshal([]byte(raw), &n); err != nil {
			r.noteErr = fmt.Errorf("annotation %s: %w", Annotation, err)
		} else {
			r.note = &n
		}
	}
	return r, nil
}

// sameRecord reports whether a and b are the same leader election record,
// what client-go compares to decide that the Lease changed (renewTime
// included, so every renewal is a change).
func sameRecord(a, b record) bool {
	return a.holder == b.holder && a.duration == b.duration && a.acquired == b.acquired &&
		a.renewed == b.renewed && a.transitions == b.transitions
}

// ours reports whether r's Annotation belongs to its current holder: a
// leadership of this backend's, with a token. A token no smaller than the
// resourceVersion cannot be genuine (the token is the resourceVersion read
// before the winning write, plus one): it is refused.
func (r record) ours() (*termNote, bool) {
	n := r.note
	if n == nil || r.holder == "" || n.Holder != r.holder || n.Acquired != r.acquired || n.Token == 0 || n.Token > r.version {
		return nil, false
	}
	return n, true
}

// leader is what r says of the leadership: the zero Leader when nobody
// holds the Lease. A holder that is not one of this backend's (client-go's
// leaderelection, say) is reported with its holderIdentity and Token 0: it
// has no token of ours. A holder whose identity is not a valid candidate
// ID is reported as no leader, with the reason.
func (r record) leader() (election.Leader, error) {
	if r.holder == "" {
		return election.Leader{}, nil
	}
	if err := backend.ValidateID(r.holder); err != nil {
		return election.Leader{}, fmt.Errorf("holderIdentity %s is not a valid candidate ID: %w", backend.QuoteValue(r.holder), err)
	}
	n, ok := r.ours()
	if !ok {
		return election.Leader{ID: r.holder}, nil
	}
	return election.Leader{ID: r.holder, Token: n.Token, Priority: n.Priority, Value: n.Value}, nil
}

// microNow is now as a Lease's MicroTime, in UTC and cut to microseconds
// as the API server stores it, so that what is written is what is read.
func microNow(now time.Time) *metav1.MicroTime {
	return &metav1.MicroTime{Time: now.UTC().Truncate(time.Microsecond)}
}

// HandOverAnnotation names, on a released Lease, the candidate a transfer
// or a preemption handed it to: {"to": ID, "at": renewTime of the
// release}. It counts only on the release it was written with (no holder,
// the same renewTime). Not spec.preferredHolder: the API server keeps
// that field only with the CoordinatedLeaderElection feature on.
const HandOverAnnotation = "election.electkit.io/handover"

type handOverNote struct {
	To string `json:"to"`
	At string `json:"at"`
}

// withRecord returns a copy of l with its spec set to the record of holder
// (Strategy and preferredHolder kept), its Annotation set to note (removed
// for a nil note) and its HandOverAnnotation naming pref (removed for "").
func withRecord(l *coordinationv1.Lease, holder string, seconds int32, acquired, renewed *metav1.MicroTime, transitions int32, note *termNote, pref string) (*coordinationv1.Lease, error) {
	c := l.DeepCopy()
	delete(c.Annotations, HandOverAnnotation)
	delete(c.Annotations, RequestAnnotation) // honoured or dropped by this write
	if pref != "" && renewed != nil {
		raw, err := json.Marshal(handOverNote{To: pref, At: renewed.UTC().Format(microFormat)})
		if err != nil {
			return nil, err
		}
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[HandOverAnnotation] = string(raw)
	}
	c.Spec.HolderIdentity = &holder
	c.Spec.LeaseDurationSeconds = &seconds
	c.Spec.AcquireTime = acquired
	c.Spec.RenewTime = renewed
	c.Spec.LeaseTransitions = &transitions
	if note == nil {
		delete(c.Annotations, Annotation)
		return c, nil
	}
	raw, err := json.Marshal(note)
	if err != nil {
		return nil, err
	}
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[Annotation] = string(raw)
	return c, nil
}
