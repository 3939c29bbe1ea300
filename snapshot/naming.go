package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/gapless-dev/gapless/model"
)

// MaxIdentBytes is the longest identifier, in bytes, that gapless generates:
// PostgreSQL's default max_identifier_length (NAMEDATALEN-1).
const MaxIdentBytes = model.MaxIdentBytes

// identHashLen is the number of hex digits of SHA-256 that FitIdent appends:
// 40 bits, so two long names sharing a prefix collide with probability about
// 2^-40.
const identHashLen = 10

// FitIdent returns name when it is at most MaxIdentBytes bytes long, and
// otherwise a readable prefix of it, "_" and the first identHashLen hex
// digits of the SHA-256 of the whole name, MaxIdentBytes bytes or fewer in
// all.
//
// The result depends on name alone, so it is the same on every engine, in
// every process and on every run; names within the limit are unchanged, so
// deployments whose names already fit keep them. Lengths count bytes, as
// PostgreSQL does; the prefix is cut on a UTF-8 character boundary, so the
// result is valid UTF-8 whenever name is.
//
// Every name gapless derives from a model name (physical schemas and tables,
// environment view schemas) goes through FitIdent; names users query (a
// model's own schema and table) are instead refused at load when too long.
func FitIdent(name string) string {
	if len(name) <= MaxIdentBytes {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	suffix := "_" + hex.EncodeToString(sum[:])[:identHashLen]
	n := MaxIdentBytes - len(suffix)
	// Back up to the start of a character (at most UTFMax-1 bytes, so
	// invalid UTF-8 cannot make the prefix vanish).
	for i := 0; i < utf8.UTFMax-1 && n > 0 && !utf8.RuneStart(name[n]); i++ {
		n--
	}
	return name[:n] + suffix
}

// Prod is the production environment: its views are named <schema>.<table>,
// and it never expires.
const Prod = "prod"

// EnvironmentSchema is the schema holding environment env's views of
// models in schema: the schema itself for prod (or ""), <schema>__<env>
// otherwise, through FitIdent (shortened with a hash past MaxIdentBytes).
// CheckEnvironmentName keeps this naming unambiguous.
func EnvironmentSchema(schema, env string) string {
	if env == Prod || env == "" {
		return schema
	}
	return FitIdent(schema + "__" + env)
}

// EnvironmentNameError is a name CheckEnvironmentName refuses.
type EnvironmentNameError struct{ Name string }

func (e *EnvironmentNameError) Error() string {
	return fmt.Sprintf("bad environment name %q: use lower-case letters, digits and single underscores, starting with a letter", e.Name)
}

// CheckEnvironmentName refuses, with an *EnvironmentNameError, a name that
// cannot be served: [a-z][a-z0-9_]* without "__", because environment E is
// served from schemas named <schema>__E (EnvironmentSchema) and a model
// schema never contains "__" (model.ParseFile refuses it).
func CheckEnvironmentName(name string) error {
	ok := name != "" && name[0] >= 'a' && name[0] <= 'z' && !strings.Contains(name, "__")
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
	}
	if !ok {
		return &EnvironmentNameError{Name: name}
	}
	return nil
}
