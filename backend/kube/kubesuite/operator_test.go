package kubesuite_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/kube"
	"github.com/electkit/election/internal/rig/kubetest"
)

// lead makes a candidate of the Lease name and waits until it leads.
func lead(t *testing.T, name string, opts ...election.Option) (*kube.Elector, *election.Term) {
	t.Helper()
	o := newOursOpts(t, name, kubetest.AdminToken, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	term, err := o.Campaign(ctx)
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	return o, term
}

func newOursOpts(t *testing.T, name, token string, opts ...election.Option) *kube.Elector {
	t.Helper()
	cs, _ := candidateClient(t, token)
	e, err := kube.New(cs.CoordinationV1(), ns, name, append([]election.Option{election.WithTTL(ttl)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// edit changes the Lease as kubectl edit does: read, change, update.
func edit(t *testing.T, name string, change func(*coordinationv1.Lease)) {
	t.Helper()
	ctx := context.Background()
	for {
		l, err := admin.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		change(l)
		_, err = admin.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{})
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
}

func waitEnded(t *testing.T, term *election.Term, d time.Duration, want error, mention string) {
	t.Helper()
	select {
	case <-term.Done():
	case <-time.After(d):
		t.Fatalf("Term %v still valid %v after the change", term, d)
	}
	if err := term.Err(); !errors.Is(err, want) || !strings.Contains(err.Error(), mention) {
		t.Errorf("Term ended with %v; want %v naming %q", err, want, mention)
	}
}

// TestOperatorChanges: what an operator's kubectl can do to the Lease of a
// leader. A delete, another holderIdentity, or a leaseDurationSeconds cut
// below the TTL end the Term at once (well before its deadline), with
// ErrSessionLost naming the Lease; an edit of renewTime or a label leaves
// it leading, and its next renewal goes on from the edited version.
func TestOperatorChanges(t *testing.T) {
	server(t)
	long := election.WithTTL(30 * time.Second) // only noticing the change can end the Term in time
	for _, c := range []struct {
		name   string
		change func(t *testing.T, name string)
		why    string
		free   bool // the Lease may be taken at once afterwards
	}{
		{"delete", func(t *testing.T, name string) {
			if err := admin.CoordinationV1().Leases(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, "was deleted", true},
		{"holder", func(t *testing.T, name string) {
			edit(t, name, func(l *coordinationv1.Lease) { h := "intruder"; l.Spec.HolderIdentity = &h })
		}, `is held by "intruder"`, false},
		{"released", func(t *testing.T, name string) {
			edit(t, name, func(l *coordinationv1.Lease) { h := ""; l.Spec.HolderIdentity = &h })
		}, `is held by ""`, true},
		{"duration", func(t *testing.T, name string) {
			edit(t, name, func(l *coordinationv1.Lease) { d := int32(1); l.Spec.LeaseDurationSeconds = &d })
		}, "leaseDurationSeconds cut", true},
		{"annotation", func(t *testing.T, name string) {
			edit(t, name, func(l *coordinationv1.Lease) { l.Annotations[kube.Annotation] = "{}" })
		}, "no longer names this Term", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := leaseName(t)
			_, term := lead(t, name, long)
			c.change(t, name)
			waitEnded(t, term, patience, election.ErrSessionLost, "Lease "+ns+"/"+name)
			if !strings.Contains(term.Err().Error(), c.why) {
				t.Errorf("Term ended with %v; want it to say %q", term.Err(), c.why)
			}
			if c.free { // the election goes on at once, with a larger token
				if _, next := lead(t, name, long); next.Token() <= term.Token() {
					t.Errorf("token %d after %d: not increasing across the change", next.Token(), term.Token())
				}
			}
		})
	}
	t.Run("renewTime", func(t *testing.T) {
		name := leaseName(t)
		renewed := make(chan election.Renewal, 16)
		_, term := lead(t, name, election.WithAfterRenew(func(r election.Renewal) {
			select {
			case renewed <- r:
			default:
			}
		}))
		edit(t, name, func(l *coordinationv1.Lease) {
			at := metav1.NewMicroTime(time.Now().Add(-time.Hour))
			l.Spec.RenewTime = &at
			l.Labels = map[string]string{"edited": "yes"}
		})
		edited := time.Now()
		for ok := 0; ok < 2; {
			select {
			case r := <-renewed:
				if r.Err == nil && r.Sent.After(edited) {
					ok++
				}
			case <-term.Done():
				t.Fatalf("Term ended after an edit of renewTime: %v", term.Err())
			case <-time.After(patience):
				t.Fatalf("no renewal within %v of the edit", patience)
			}
		}
	})
}

// TestNamespaces: Leases of the same name in two namespaces are two
// elections.
func TestNamespaces(t *testing.T) {
	server(t)
	ctx := context.Background()
	other := fmt.Sprintf("other-%d", time.Now().UnixNano())
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	name := leaseName(t)
	_, ta := lead(t, name)
	cs, _ := candidateClient(t, kubetest.AdminToken)
	b, err := kube.New(cs.CoordinationV1(), other, name, election.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cctx, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	tb, err := b.Campaign(cctx)
	if err != nil {
		t.Fatalf("Campaign in namespace %s: %v", other, err)
	}
	if ta.Err() != nil || tb.Err() != nil {
		t.Errorf("both should lead: %v, %v", ta.Err(), tb.Err())
	}
}

// TestPermissionRemoved: a candidate whose RBAC no longer lets it update
// Leases loses its Term at its next renewal, with an error naming the
// Lease and the refusal, not at its deadline; a candidate that may not
// update gets the same from Campaign instead of waiting for ever.
func TestPermissionRemoved(t *testing.T) {
	server(t)
	ctx := context.Background()
	name := leaseName(t)
	rbac := admin.RbacV1()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
			ResourceNames: nil, Verbs: []string{"get", "list", "watch", "create", "update"}}},
	}
	if _, err := rbac.Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rbac.Roles(ns).Delete(context.Background(), name, metav1.DeleteOptions{}) })
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: kubetest.LimitedUser}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
	}
	if _, err := rbac.RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rbac.RoleBindings(ns).Delete(context.Background(), name, metav1.DeleteOptions{}) })

	a := newOursOpts(t, name, kubetest.LimitedToken, election.WithTTL(30*time.Second))
	cctx, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	// RBAC takes effect within moments of the binding: the first
	// Campaigns may be refused.
	var term *election.Term
	for {
		var err error
		if term, err = a.Campaign(cctx); err == nil {
			break
		}
		if cctx.Err() != nil || !strings.Contains(err.Error(), "forbidden") {
			t.Fatalf("Campaign with update permission: %v", err)
		}
	}
	role.Rules[0].Verbs = []string{"get", "list", "watch"}
	if _, err := rbac.Roles(ns).Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	removed := time.Now()
	waitEnded(t, term, patience, election.ErrSessionLost, "Lease "+ns+"/"+name)
	if !strings.Contains(term.Err().Error(), "forbidden") {
		t.Errorf("Term ended with %v; want it to say the update was forbidden", term.Err())
	}
	if d := time.Since(removed); d > 20*time.Second {
		t.Errorf("Term ended %v after the permission went: at its deadline, not at its next renewal", d)
	}
	// Campaign without the permission fails, naming the Lease.
	b := newOursOpts(t, leaseName(t), kubetest.LimitedToken)
	_, err := b.Campaign(cctx)
	if err == nil || !strings.Contains(err.Error(), "forbidden") || !strings.Contains(err.Error(), "Lease "+ns+"/") {
		t.Errorf("Campaign without permission = %v; want a forbidden error naming the Lease", err)
	}
}

// TestCandidateRecordDeleted: another client deletes a waiting candidate's
// record; its waiter registers anew at its next renewal, and leads when
// the leader resigns.
func TestCandidateRecordDeleted(t *testing.T) {
	server(t)
	ctx := context.Background()
	name := leaseName(t)
	a, _ := lead(t, name, election.WithID("a"))
	b := newOursOpts(t, name, kubetest.AdminToken, election.WithID("b"))
	wb := make(chan won, 1)
	go func() { term, err := b.Campaign(ctx); wb <- won{term, err, time.Now()} }()
	waitCandidates(t, a, "b")
	sel := metav1.ListOptions{LabelSelector: kube.CandidateLabel}
	l, err := admin.CoordinationV1().Leases(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	deleted := false
	for _, c := range l.Items {
		if c.Spec.HolderIdentity != nil && *c.Spec.HolderIdentity == "b" && strings.HasPrefix(c.Name, name+"-c-") {
			if err := admin.CoordinationV1().Leases(ns).Delete(ctx, c.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			deleted = true
		}
	}
	if !deleted {
		t.Fatal("no candidate record of b found")
	}
	waitCandidates(t, a)
	waitCandidates(t, a, "b") // registered anew
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	awaitWon(t, wb, patience, "b after a resigned")
}

// waitCandidates waits until e lists exactly ids as waiting.
func waitCandidates(t *testing.T, e election.Elector, ids ...string) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		cs, err := election.Candidates(context.Background(), e)
		var got []string
		for _, c := range cs {
			got = append(got, c.ID)
		}
		if err == nil && fmt.Sprint(got) == fmt.Sprint(ids) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("candidates %v, %v; want %v", got, err, ids)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
