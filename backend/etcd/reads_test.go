package etcd

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// No read of the package is keys-only: etcd v3.7 leaves a keys-only
// range's leases at 0, and the queue's checks compare them (layout.go).
// The real-server suite shows what such a read breaks on v3.7; this check
// names the line at once.
func TestNoKeysOnlyReads(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	seen := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		seen++
		ast.Inspect(f, func(n ast.Node) bool {
			// clientv3's option, or the field of a request built as
			// etcd's message (wire.go).
			switch x := n.(type) {
			case *ast.SelectorExpr:
				if x.Sel.Name == "WithKeysOnly" || x.Sel.Name == "KeysOnly" {
					t.Errorf("%s: a keys-only read: etcd v3.7 answers it without the keys' leases", fset.Position(x.Pos()))
				}
			case *ast.KeyValueExpr:
				if k, ok := x.Key.(*ast.Ident); ok && k.Name == "KeysOnly" {
					t.Errorf("%s: a keys-only read: etcd v3.7 answers it without the keys' leases", fset.Position(x.Pos()))
				}
			}
			return true
		})
	}
	if seen == 0 {
		t.Fatal("no source file read")
	}
}
