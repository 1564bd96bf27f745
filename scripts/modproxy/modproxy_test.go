package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// A workspace of two modules, the second nested in the first and with an
// upper-case letter in its path: each module's zip holds its own files
// only, and the proxy's directories carry the escaped paths.
func TestWriteModule(t *testing.T) {
	root := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	const gomod = "module github.com/electkit/election\n\ngo 1.26.0\n"
	write("go.work", "go 1.26.0\n\nuse (\n\t.\n\t./Sub\n)\n")
	write("go.mod", gomod)
	write("a.go", "package election\n")
	write("pkg/b.go", "package pkg\n")
	write("pkg/testdata/x.txt", "x\n")
	write("Sub/go.mod", "module github.com/electkit/election/Sub\n\ngo 1.26.0\n")
	write("Sub/c.go", "package sub\n")

	mods, err := workspaceModules(filepath.Join(root, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	want := []workspaceModule{
		{"github.com/electkit/election", root},
		{"github.com/electkit/election/Sub", filepath.Join(root, "Sub")},
	}
	if !slices.Equal(mods, want) {
		t.Fatalf("workspace modules: got %v, want %v", mods, want)
	}

	out := t.TempDir()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		mod       workspaceModule
		escaped   string
		zipFiles  []string
		goModText string
	}{
		{mods[0], "github.com/electkit/election", []string{"a.go", "go.mod", "go.work", "pkg/b.go", "pkg/testdata/x.txt"}, gomod},
		{mods[1], "github.com/electkit/election/!sub", []string{"c.go", "go.mod"}, ""},
	} {
		n, err := writeModule(out, tc.mod, "v0.1.0", now)
		if err != nil {
			t.Fatal(err)
		}
		if n != len(tc.zipFiles) {
			t.Errorf("%s: %d files, want %d", tc.mod.Path, n, len(tc.zipFiles))
		}
		vdir := filepath.Join(out, filepath.FromSlash(tc.escaped), "@v")
		read := func(name string) string {
			t.Helper()
			data, err := os.ReadFile(filepath.Join(vdir, name))
			if err != nil {
				t.Fatal(err)
			}
			return string(data)
		}
		if got := read("list"); got != "v0.1.0\n" {
			t.Errorf("%s: list = %q", tc.mod.Path, got)
		}
		var info struct {
			Version string
			Time    time.Time
		}
		if err := json.Unmarshal([]byte(read("v0.1.0.info")), &info); err != nil || info.Version != "v0.1.0" || !info.Time.Equal(now) {
			t.Errorf("%s: info = %+v (%v)", tc.mod.Path, info, err)
		}
		if got := read("v0.1.0.mod"); !strings.HasPrefix(got, "module "+tc.mod.Path+"\n") || tc.goModText != "" && got != tc.goModText {
			t.Errorf("%s: mod = %q", tc.mod.Path, got)
		}
		mv := module.Version{Path: tc.mod.Path, Version: "v0.1.0"}
		cf, err := zip.CheckZip(mv, filepath.Join(vdir, "v0.1.0.zip"))
		if err != nil {
			t.Fatal(err)
		}
		var files []string
		for _, f := range cf.Valid {
			files = append(files, strings.TrimPrefix(f, mv.Path+"@v0.1.0/"))
		}
		slices.Sort(files)
		if !slices.Equal(files, tc.zipFiles) {
			t.Errorf("%s: zip holds %v, want %v", tc.mod.Path, files, tc.zipFiles)
		}
	}
}

// A version that does not suit the module's path fails, naming the module.
func TestWriteModuleBadVersion(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module github.com/electkit/election\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	_, err := writeModule(t.TempDir(), workspaceModule{"github.com/electkit/election", dir}, "v2.0.0", time.Now())
	if err == nil || !strings.Contains(err.Error(), "module github.com/electkit/election ("+dir+")") {
		t.Fatalf("v2.0.0 of a v0/v1 path: %v", err)
	}
}

// The proxy may not be written inside a module: its zip would take it in.
func TestCheckOut(t *testing.T) {
	dir := t.TempDir()
	mods := []workspaceModule{{"github.com/electkit/election", filepath.Join(dir, "repo")}}
	for out, ok := range map[string]bool{
		filepath.Join(dir, "repo"):          false,
		filepath.Join(dir, "repo", "proxy"): false,
		filepath.Join(dir, "proxy"):         true,
		filepath.Join(dir, "repo-proxy"):    true,
	} {
		if err := checkOut(out, mods); (err == nil) != ok {
			t.Errorf("checkOut(%s): %v", out, err)
		}
	}
}
