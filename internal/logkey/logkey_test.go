package logkey_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gapless-dev/gapless/internal/logkey"
)

// attrCtors are slog's attribute constructors; their first argument is the key.
var attrCtors = map[string]bool{
	"String": true, "Int": true, "Int64": true, "Uint64": true, "Float64": true,
	"Bool": true, "Time": true, "Duration": true, "Any": true, "Group": true,
}

// logMethods are *slog.Logger's methods, each with how many arguments come
// before its key-value pairs.
var logMethods = map[string]int{
	"Debug": 1, "Info": 1, "Warn": 1, "Error": 1,
	"DebugContext": 2, "InfoContext": 2, "WarnContext": 2, "ErrorContext": 2,
	"Log": 3, "LogAttrs": 3, "With": 0,
}

// literalKeys returns, for every log call in the file that spells a key as
// a string literal (or logs a slog.Duration, which JSON renders in
// nanoseconds), where and which.
func literalKeys(fset *token.FileSet, f *ast.File) []string {
	var bad []string
	report := func(n ast.Node, what string) {
		bad = append(bad, fset.Position(n.Pos()).String()+": "+what)
	}
	isSlog := func(call *ast.CallExpr) (string, bool) {
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return "", false
		}
		id, ok := sel.X.(*ast.Ident)
		return sel.Sel.Name, ok && id.Name == "slog" && attrCtors[sel.Sel.Name]
	}
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if name, ok := isSlog(call); ok {
			if name == "Duration" {
				report(call, "slog.Duration (log the duration in a unit its key names, e.g. duration_ms)")
			}
			if len(call.Args) > 0 {
				if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					report(call, "key "+lit.Value+" spelled as a literal, not a logkey constant")
				}
			}
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		skip, ok := logMethods[sel.Sel.Name]
		if !ok || len(call.Args) <= skip {
			return true
		}
		for i := skip; i < len(call.Args); {
			if call.Ellipsis.IsValid() && i == len(call.Args)-1 {
				break
			}
			switch a := call.Args[i].(type) {
			case *ast.BasicLit:
				if a.Kind == token.STRING {
					report(a, "key "+a.Value+" spelled as a literal, not a logkey constant")
				}
				i += 2
			case *ast.CallExpr:
				if _, ok := isSlog(a); ok {
					i++
				} else {
					i += 2
				}
			default:
				i += 2
			}
		}
		return true
	})
	return bad
}

// Scenario: every log call in the module's code (tests aside) names its
// keys with this package's constants: a literal key, which could drift
// from the vocabulary unseen, fails here with its position.
func TestNoLiteralKeys(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	var bad []string
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		files++
		bad = append(bad, literalKeys(fset, f)...)
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, files, 100, "the walk found the module's files")
	require.Empty(t, bad)
}

// Scenario: CheckRecord accepts a record of documented keys and refuses an
// unknown key and a key twice (as a logger With a key then given it again
// writes it).
func TestCheckRecord(t *testing.T) {
	t.Parallel()
	ok := `{"time":"2024-01-01T00:00:00Z","level":"INFO","msg":"m","environment":"prod","plan":"p1","duration_ms":3}`
	require.NoError(t, logkey.CheckRecord([]byte(ok)))
	err := logkey.CheckRecord([]byte(`{"msg":"m","env":"prod"}`))
	require.ErrorContains(t, err, `key "env" is not in logkey.All`)
	err = logkey.CheckRecord([]byte(`{"msg":"m","environment":"prod","environment":"prod"}`))
	require.ErrorContains(t, err, `key "environment" twice in one record`)
	require.Error(t, logkey.CheckRecord([]byte(`not json`)))
}

// Scenario: All lists every key constant of the package, each once.
func TestAllIsEveryConstant(t *testing.T) {
	t.Parallel()
	f, err := parser.ParseFile(token.NewFileSet(), "logkey.go", nil, 0)
	require.NoError(t, err)
	var consts []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			for _, v := range spec.(*ast.ValueSpec).Values {
				k, err := strconv.Unquote(v.(*ast.BasicLit).Value)
				require.NoError(t, err)
				consts = append(consts, k)
			}
		}
	}
	require.Greater(t, len(consts), 50)
	require.ElementsMatch(t, consts, logkey.All)
}
