package classic

import "fmt"

// detail formats the fields of the tree, Chubby and ZooKeeper messages for
// Message.String; ok is false for the other kinds.
func (m Message) detail() (string, bool) {
	switch m.Kind {
	case TreeElection:
		return fmt.Sprintf(" election=%d/N%d", m.Run, m.Initiator), true
	case TreeAck:
		switch m.Seq {
		case treeChild:
			return fmt.Sprintf(" election=%d/N%d best=%v", m.Run, m.Initiator, m.Cand), true
		case treeSuperseded:
			return fmt.Sprintf(" superseded by election=%d/N%d", m.Run, m.Initiator), true
		}
		return fmt.Sprintf(" election=%d/N%d (receipt)", m.Run, m.Initiator), true
	case TreeLeader:
		if m.Cand == (Rank{}) {
			return fmt.Sprintf(" election=%d/N%d no leader", m.Run, m.Initiator), true
		}
		return fmt.Sprintf(" election=%d/N%d leader=%v epoch=%d", m.Run, m.Initiator, m.Cand, m.Epoch), true
	case VoteRequest:
		return fmt.Sprintf(" term=%d cand=%v round=%d", m.Epoch, m.Cand, m.Seq), true
	case Vote:
		return fmt.Sprintf(" term=%d round=%d", m.Epoch, m.Seq), true
	case NewLeader:
		return fmt.Sprintf(" cand=%v epoch=%d", m.Cand, m.Epoch), true
	case LeaderAck:
		switch {
		case m.Seq == 1:
			return fmt.Sprintf(" ACK epoch=%d", m.Epoch), true
		case m.Cand != (Rank{}):
			return fmt.Sprintf(" refused: %v outranks you", m.Cand), true
		}
		return fmt.Sprintf(" refused: epoch %d taken", m.Epoch), true
	case Commit:
		if m.Cand == (Rank{}) {
			return fmt.Sprintf(" resign epoch=%d", m.Epoch), true
		}
		return fmt.Sprintf(" leader=%v epoch=%d", m.Cand, m.Epoch), true
	}
	return "", false
}

func errorf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}
