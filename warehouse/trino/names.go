package trino

import (
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gapless-dev/gapless/warehouse"
)

// Name limits of the Iceberg catalog (checked on Trino 476 with the file
// metastore): a schema, table or view name longer than 128 characters is
// refused by Trino only after the table's folder was made, and the folder
// of a table is its name, a dash and 32 hex digits, within the file
// system's 255 bytes.
const (
	maxNameChars = 128
	maxNameBytes = 222
)

// kind is what a name names, for checkIdent's rules and messages.
type kind string

const (
	kindSchema kind = "schema"
	kindTable  kind = "table"
	kindView   kind = "view"
	kindColumn kind = "column"
)

// metastoreEscaped are the ASCII characters the Hive-style metastore
// escapes (%XX) in the folder of a schema, table or view: Trino then lists
// the object under the escaped name (information_schema shows "it%27s"
// for a table created as "it's") and finds none of its columns, so such a
// name cannot round-trip. Control characters are escaped too.
const metastoreEscaped = "\"#%'*/:=?[\\]^{"

// checkIdent enforces the engine's name rules, before any SQL is sent:
//
//   - every name: non-empty, valid UTF-8, no NUL byte, and neither 'İ'
//     (U+0130) nor 'Σ' (U+03A3), which Trino lower-cases by rules of
//     context (Java's) that this engine does not reproduce, so it could
//     not tell which object such a name folds to;
//   - schema, table and view names: at most 128 characters and 222 bytes,
//     not "." or "..", no control character and none of " # % ' * / : = ?
//     [ \ ] ^ { (the metastore escapes them and then lists the object
//     under another name);
//   - table and view names: no '$' (Trino reads "t$snapshots" as a
//     metadata table of t) and no '@' (Iceberg's table@version), which
//     Iceberg refuses only after the table's folder was made.
//
// Column names may hold any other character.
func checkIdent(k kind, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty %s name", warehouse.ErrInvalidIdentifier, k)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: %s name %q is not valid UTF-8", warehouse.ErrInvalidIdentifier, k, name)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%w: %s name %q contains a NUL byte", warehouse.ErrInvalidIdentifier, k, name)
	case strings.ContainsAny(name, "\u0130\u03a3"):
		return fmt.Errorf("%w: %s name %q holds 'İ' or 'Σ', which Trino lower-cases by context rules this engine cannot reproduce",
			warehouse.ErrInvalidIdentifier, k, name)
	}
	if k == kindColumn {
		return nil
	}
	if n := len(utf16.Encode([]rune(name))); n > maxNameChars || len(name) > maxNameBytes {
		return fmt.Errorf("%w: %s name %q is %d characters (%d bytes); Trino's Iceberg catalog holds at most %d characters and %d bytes",
			warehouse.ErrInvalidIdentifier, k, name, n, len(name), maxNameChars, maxNameBytes)
	}
	if name == "." || name == ".." {
		return fmt.Errorf("%w: %s name %q is a folder's name", warehouse.ErrInvalidIdentifier, k, name)
	}
	for _, r := range name {
		switch {
		case r < 0x20 || r == 0x7f:
			return fmt.Errorf("%w: %s name %q holds a control character, which the Iceberg catalog's metastore escapes (the object would be listed under another name)",
				warehouse.ErrInvalidIdentifier, k, name)
		case strings.ContainsRune(metastoreEscaped, r):
			return fmt.Errorf("%w: %s name %q holds %q, which the Iceberg catalog's metastore escapes (the object would be listed under another name)",
				warehouse.ErrInvalidIdentifier, k, name, r)
		case (k == kindTable || k == kindView) && (r == '$' || r == '@'):
			return fmt.Errorf("%w: %s name %q holds %q, which Trino's Iceberg connector reserves (t$snapshots, t@version)",
				warehouse.ErrInvalidIdentifier, k, name, r)
		}
	}
	return nil
}

// checkQualified validates t, which must name its schema: the engine
// always works on schema-qualified names.
func checkQualified(k kind, t warehouse.Table) error {
	if t.Schema == "" {
		return fmt.Errorf("%w: %s %q has no schema", warehouse.ErrInvalidIdentifier, k, t.Name)
	}
	if err := checkIdent(kindSchema, t.Schema); err != nil {
		return err
	}
	return checkIdent(k, t.Name)
}

// checkColumns validates column names.
func checkColumns(what string, names []string) error {
	for _, n := range names {
		if err := checkIdent(kindColumn, n); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}

// fold is the name Trino stores for name: lower case. checkIdent refuses
// the two letters whose Java lower case depends on context, so Go's
// mapping is Trino's for every name that reaches here.
func fold(name string) string { return strings.ToLower(name) }

// foldTable folds both parts of t.
func foldTable(t warehouse.Table) warehouse.Table {
	return warehouse.Table{Schema: fold(t.Schema), Name: fold(t.Name)}
}

func quoteIdent(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

func quoteTable(t warehouse.Table) string {
	if t.Schema == "" {
		return quoteIdent(t.Name)
	}
	return quoteIdent(t.Schema) + "." + quoteIdent(t.Name)
}

// quoteString renders s as a Trino string literal. Trino has no backslash
// escapes: a doubled quote is the only escape. s must be valid UTF-8.
func quoteString(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// tableKey and schemaKey are the names the engine's locks take turns on.
func tableKey(t warehouse.Table) string {
	f := foldTable(t)
	return "t\x00" + f.Schema + "\x00" + f.Name
}

func schemaKey(schema string) string { return "s\x00" + fold(schema) }
