module github.com/electkit/election/classic/sim/simtest

go 1.26.0

require (
	github.com/cockroachdb/datadriven v1.0.3
	github.com/electkit/election v0.1.0
)

require github.com/pmezard/go-difflib v1.0.0 // indirect
