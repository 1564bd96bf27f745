package zk

// Clocks returns how many Term clocks e holds for Close to wait on.
func Clocks(e *Elector) int {
	return e.terms.Len()
}

// EncodePriority and DecodePriority expose the priority field of the
// candidate nodes' names.
var (
	EncodePriority = encodePriority
	DecodePriority = decodePriority
)
