// Command modproxy writes the modules of this repository's workspace as a
// module proxy on disk, so that a program outside the workspace can fetch
// them at a version that no public proxy serves yet:
//
//	go run ./scripts/modproxy -version v0.1.0 -out /tmp/proxy
//	GOPROXY=file:///tmp/proxy,https://proxy.golang.org GONOSUMDB=github.com/electkit go get github.com/electkit/election@v0.1.0
//
// It reads the go.work in use (go env GOWORK) and, for every module listed
// there whose path is github.com/electkit/election or below it, writes the
// GOPROXY layout: <escaped module path>/@v/list, <version>.info,
// <version>.mod (the module's go.mod) and <version>.zip (the module's
// directory, zipped as the go command would: without nested modules,
// vendored packages, symbolic links or VCS directories).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

// prefix selects the workspace's modules to publish: this path and those
// below it.
const prefix = "github.com/electkit/election"

func main() {
	version := flag.String("version", "", "version to publish the modules at (e.g. v0.1.0)")
	out := flag.String("out", "", "directory to write the proxy to")
	flag.Parse()
	if *version == "" || *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: modproxy -version vX.Y.Z -out DIR")
		os.Exit(2)
	}
	if err := run(*version, *out); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

// run writes the proxy of the workspace's modules at version to out.
func run(version, out string) error {
	gowork, err := exec.Command("go", "env", "GOWORK").Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return fmt.Errorf("go env GOWORK: %w: %s", err, ee.Stderr)
	} else if err != nil {
		return fmt.Errorf("go env GOWORK: %w", err)
	}
	work := strings.TrimSpace(string(gowork))
	if work == "" || work == "off" {
		return errors.New("not in a workspace (go env GOWORK is empty): run from the repository")
	}
	mods, err := workspaceModules(work)
	if err != nil {
		return err
	}
	var pub []workspaceModule
	for _, m := range mods {
		if m.Path == prefix || strings.HasPrefix(m.Path, prefix+"/") {
			pub = append(pub, m)
		}
	}
	if len(pub) == 0 {
		return fmt.Errorf("%s uses no module %s or below it", work, prefix)
	}
	if err := checkOut(out, pub); err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Second)
	for _, m := range pub {
		n, err := writeModule(out, m, version, now)
		if err != nil {
			return err
		}
		fmt.Printf("%s@%s: %d files\n", m.Path, version, n)
	}
	return nil
}

// checkOut refuses an output directory inside a module's directory: the
// module's zip would take in the proxy, itself included.
func checkOut(out string, mods []workspaceModule) error {
	abs, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	for _, m := range mods {
		rel, err := filepath.Rel(m.Dir, abs)
		if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("-out %s is inside the directory of module %s (%s): choose a directory outside the modules", out, m.Path, m.Dir)
		}
	}
	return nil
}

// A workspaceModule is one module of a go.work's use list.
type workspaceModule struct {
	Path string // module path, from its go.mod
	Dir  string // absolute directory
}

// workspaceModules reads the go.work file work and the go.mod of each
// module it uses.
func workspaceModules(work string) ([]workspaceModule, error) {
	data, err := os.ReadFile(work)
	if err != nil {
		return nil, err
	}
	wf, err := modfile.ParseWork(work, data, nil)
	if err != nil {
		return nil, err
	}
	var mods []workspaceModule
	for _, u := range wf.Use {
		dir := u.Path
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(filepath.Dir(work), dir)
		}
		gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err != nil {
			return nil, fmt.Errorf("%s: use %s: %w", work, u.Path, err)
		}
		p := modfile.ModulePath(gomod)
		if p == "" {
			return nil, fmt.Errorf("%s: no module line", filepath.Join(dir, "go.mod"))
		}
		mods = append(mods, workspaceModule{Path: p, Dir: dir})
	}
	return mods, nil
}

// writeModule writes module m at version under the proxy directory out and
// returns the number of files in its zip. Files the zip leaves out other
// than nested modules and VCS directories (symbolic links, vendored
// packages, irregular files) are reported on stderr, since a consumer will
// not see them.
func writeModule(out string, m workspaceModule, version string, t time.Time) (int, error) {
	fail := func(err error) (int, error) {
		return 0, fmt.Errorf("module %s (%s): %w", m.Path, m.Dir, err)
	}
	if err := module.Check(m.Path, version); err != nil {
		return fail(err)
	}
	if semver.Canonical(version) != version {
		return fail(fmt.Errorf("version %s is not canonical (want %s)", version, semver.Canonical(version)))
	}
	escPath, err := module.EscapePath(m.Path)
	if err != nil {
		return fail(err)
	}
	escVersion, err := module.EscapeVersion(version)
	if err != nil {
		return fail(err)
	}

	// What the zip will hold: invalid files (bad names, case collisions,
	// files too large) fail the module, naming each file.
	cf, err := zip.CheckDir(m.Dir)
	if err != nil {
		return fail(err)
	}
	for _, o := range cf.Omitted {
		if isNestedModule(o.Path) {
			continue
		}
		switch filepath.Base(o.Path) {
		case ".git", ".hg", ".bzr", ".svn":
			continue
		}
		fmt.Fprintf(os.Stderr, "modproxy: warning: module %s leaves out %s: %v\n", m.Path, o.Path, o.Err)
	}

	vdir := filepath.Join(out, escPath, "@v")
	if err := os.MkdirAll(vdir, 0o777); err != nil {
		return fail(err)
	}
	base := filepath.Join(vdir, escVersion)
	gomod, err := os.ReadFile(filepath.Join(m.Dir, "go.mod"))
	if err != nil {
		return fail(err)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, t})
	if err != nil {
		return fail(err)
	}
	for name, data := range map[string][]byte{
		filepath.Join(vdir, "list"): []byte(version + "\n"),
		base + ".info":              info,
		base + ".mod":               gomod,
	} {
		if err := os.WriteFile(name, data, 0o666); err != nil {
			return fail(err)
		}
	}

	f, err := os.Create(base + ".zip")
	if err != nil {
		return fail(err)
	}
	mv := module.Version{Path: m.Path, Version: version}
	err = zip.CreateFromDir(f, mv, m.Dir)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(err)
	}
	// Read it back as the go command will.
	zcf, err := zip.CheckZip(mv, base+".zip")
	if err != nil {
		return fail(err)
	}
	return len(zcf.Valid), nil
}

// isNestedModule reports whether dir is the directory of a module of its
// own, which a zip always leaves out.
func isNestedModule(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, "go.mod"))
	return err == nil && fi.Mode().IsRegular()
}
