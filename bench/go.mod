module github.com/electkit/election/bench

go 1.26.0

require golang.org/x/sys v0.49.0

replace github.com/electkit/election => ../
