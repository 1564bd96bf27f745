package main

import (
	"bytes"
	"os"
	"testing"
)

// The README's quickstart is this program, byte for byte: the block of Go
// that opens with main.go's first line.
func TestREADMEShowsMain(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := bytes.Cut(src, []byte("\n"))
	open := append([]byte("```go\n"), first...)
	i := bytes.Index(readme, open)
	if i < 0 {
		t.Fatalf("README.md has no ```go block opening with main.go's first line %q", first)
	}
	block := readme[i+len("```go\n"):]
	end := bytes.Index(block, []byte("\n```\n"))
	if end < 0 {
		t.Fatal("README.md: the quickstart's ```go block is not closed")
	}
	block = block[:end+1]
	if bytes.Equal(block, src) {
		return
	}
	got, want := bytes.Split(block, []byte("\n")), bytes.Split(src, []byte("\n"))
	for n := 0; n < len(got) || n < len(want); n++ {
		var g, w []byte
		if n < len(got) {
			g = got[n]
		}
		if n < len(want) {
			w = want[n]
		}
		if !bytes.Equal(g, w) {
			t.Fatalf("README.md's quickstart differs from main.go at line %d:\nREADME:  %q\nmain.go: %q\n(copy main.go into the block)", n+1, g, w)
		}
	}
	t.Fatal("README.md's quickstart differs from main.go") // not reached: the lines differ somewhere
}
