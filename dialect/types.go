package dialect

import (
	"strings"
)

// typeWords are the words that continue a multi-word type name after its
// first word.
var typeWords = map[string][]string{
	"DOUBLE":    {"PRECISION"},
	"CHARACTER": {"VARYING"},
	"CHAR":      {"VARYING"},
	"TIMESTAMP": {"WITH", "WITHOUT", "LOCAL", "TIME", "ZONE"},
	"TIME":      {"WITH", "WITHOUT", "TIME", "ZONE"},
	"SIGNED":    {"INTEGER", "INT"},
	"UNSIGNED":  {"INTEGER", "INT"},
}

// canonType maps a source type name (upper case, words single-spaced) to
// the engine-neutral name typeSpelling writes, per source family, when the
// name means something else (or is not spelled) on the engines. An empty
// string refuses the type; a name absent from the map is written as it is.
var canonType = map[string]map[string]string{
	"bigquery": {
		"INT64": "BIGINT", "INT": "BIGINT", "INTEGER": "BIGINT", "SMALLINT": "BIGINT", "TINYINT": "BIGINT",
		"BYTEINT": "BIGINT", "BIGINT": "BIGINT", "FLOAT64": "DOUBLE", "FLOAT": "DOUBLE", "STRING": "VARCHAR",
		"BOOL": "BOOLEAN", "BYTES": "BLOB", "NUMERIC": "DECIMAL(38, 9)", "DECIMAL": "DECIMAL(38, 9)",
		"BIGNUMERIC": "", "BIGDECIMAL": "", "DATETIME": "TIMESTAMP", "TIMESTAMP": "TIMESTAMPTZ",
		"GEOGRAPHY": "", "STRUCT": "", "ARRAY": "", "RANGE": "", "INTERVAL": "",
	},
	"snowflake": {
		"NUMBER": "DECIMAL(38, 0)", "DECIMAL": "DECIMAL(38, 0)", "NUMERIC": "DECIMAL(38, 0)",
		"INT": "BIGINT", "INTEGER": "BIGINT", "BIGINT": "BIGINT", "SMALLINT": "BIGINT", "TINYINT": "BIGINT", "BYTEINT": "BIGINT",
		"FLOAT": "DOUBLE", "FLOAT4": "DOUBLE", "FLOAT8": "DOUBLE", "DOUBLE": "DOUBLE", "DOUBLE PRECISION": "DOUBLE", "REAL": "DOUBLE",
		"STRING": "VARCHAR", "TEXT": "VARCHAR", "BINARY": "BLOB", "VARBINARY": "BLOB",
		"DATETIME": "TIMESTAMP", "TIMESTAMP": "TIMESTAMP", "TIMESTAMP_NTZ": "TIMESTAMP",
		"TIMESTAMP_TZ": "TIMESTAMPTZ", "TIMESTAMP_LTZ": "TIMESTAMPTZ",
		"VARIANT": "", "OBJECT": "", "ARRAY": "", "GEOGRAPHY": "", "GEOMETRY": "", "VECTOR": "",
	},
	"spark": {
		"STRING": "VARCHAR", "BINARY": "BLOB", "FLOAT": "REAL", "REAL": "REAL", "DECIMAL": "DECIMAL(10, 0)",
		"DEC": "DECIMAL(10, 0)", "NUMERIC": "DECIMAL(10, 0)", "LONG": "BIGINT", "SHORT": "SMALLINT", "BYTE": "TINYINT",
		"TIMESTAMP_NTZ": "TIMESTAMP", "TIMESTAMP_LTZ": "TIMESTAMPTZ", "TIMESTAMP": "TIMESTAMPTZ",
		"ARRAY": "", "MAP": "", "STRUCT": "", "VARIANT": "", "INTERVAL": "",
	},
	"mysql": {
		"SIGNED": "BIGINT", "SIGNED INTEGER": "BIGINT", "SIGNED INT": "BIGINT", "UNSIGNED": "", "UNSIGNED INTEGER": "",
		"UNSIGNED INT": "", "CHAR": "VARCHAR", "DATETIME": "TIMESTAMP", "DECIMAL": "DECIMAL(10, 0)", "FLOAT": "REAL",
		"BINARY": "BLOB", "JSON": "",
	},
	"tsql": {
		"NVARCHAR": "VARCHAR", "NCHAR": "VARCHAR", "VARCHAR": "VARCHAR", "CHAR": "VARCHAR", "NTEXT": "VARCHAR", "TEXT": "VARCHAR",
		"BIT": "BOOLEAN", "DATETIME": "TIMESTAMP", "DATETIME2": "TIMESTAMP", "SMALLDATETIME": "TIMESTAMP",
		"DATETIMEOFFSET": "TIMESTAMPTZ", "FLOAT": "DOUBLE", "REAL": "REAL", "MONEY": "DECIMAL(19, 4)",
		"SMALLMONEY": "DECIMAL(10, 4)", "DECIMAL": "DECIMAL(18, 0)", "NUMERIC": "DECIMAL(18, 0)",
		"UNIQUEIDENTIFIER": "", "VARBINARY": "BLOB", "BINARY": "BLOB", "TINYINT": "", "SQL_VARIANT": "",
	},
	"clickhouse": {
		"INT8": "TINYINT", "INT16": "SMALLINT", "INT32": "INTEGER", "INT64": "BIGINT", "FLOAT32": "REAL",
		"FLOAT64": "DOUBLE", "STRING": "VARCHAR", "BOOL": "BOOLEAN", "DATETIME": "TIMESTAMP",
		"UINT8": "", "UINT16": "", "UINT32": "", "UINT64": "", "DATETIME64": "", "NULLABLE": "", "LOWCARDINALITY": "",
	},
	"other": {"NUMBER": "", "VARCHAR2": "VARCHAR", "NVARCHAR2": "VARCHAR", "CLOB": "VARCHAR"},
}

// keepsParams lists the canonical names whose written parameters carry
// over: (p, s) of a decimal, (n) of a string.
var keepsParams = map[string]bool{"VARCHAR": true, "DECIMAL(38, 0)": true, "DECIMAL(10, 0)": true, "DECIMAL(18, 0)": true, "DECIMAL(38, 9)": true}

// typeSpelling is how engine to spells the canonical type name c.
func typeSpelling(c, to string) string {
	switch to {
	case Postgres:
		switch c {
		case "DOUBLE":
			return "DOUBLE PRECISION"
		case "BLOB":
			return "BYTEA"
		case "TINYINT":
			return "SMALLINT"
		}
	case Trino:
		switch c {
		case "BLOB":
			return "VARBINARY"
		case "TIMESTAMPTZ":
			return "TIMESTAMP(6) WITH TIME ZONE"
		}
	}
	return c
}

// typeAt writes the type that starts at the first significant node of ns
// at or after i (after CAST's AS, or after ::), and returns the index of
// the last node it took. whole says the type must take every remaining
// significant node (inside CAST's parentheses).
func (t *transpiler) typeAt(ns []node, i int, whole bool) (int, error) {
	j := significant(ns, i)
	for k := i; k < j; k++ {
		if _, err := t.token(ns, k); err != nil {
			return k, err
		}
	}
	if j >= len(ns) || ns[j].group || (ns[j].tok.Kind != Word && ns[j].tok.Kind != Ident) {
		if j < len(ns) {
			return j, t.refuse(ns[j].tok.Off, ns[j].tok.Text, "a type was expected here")
		}
		return j, nil
	}
	start := ns[j].tok
	if start.Kind == Ident { // a quoted type name: written as is
		t.emit(start.Text, start.Off)
		return j, nil
	}
	name := []string{strings.ToUpper(start.Text)}
	last := j
	for {
		k := significant(ns, last+1)
		if k >= len(ns) || ns[k].group || ns[k].tok.Kind != Word || !containsFold(typeWords[name[0]], ns[k].tok.Text) {
			break
		}
		name = append(name, strings.ToUpper(ns[k].tok.Text))
		last = k
	}
	var params *node
	if k := significant(ns, last+1); k < len(ns) && ns[k].group {
		params = &ns[k]
		last = k
	}
	full := strings.Join(name, " ")
	if k := significant(ns, last+1); k < len(ns) && (isPunct(ns[k], "<") || isPunct(ns[k], "[")) && t.tr.family != "postgres" {
		return k, t.refuse(start.Off, full+string(ns[k].tok.Text), "a parameterized %s type has no common spelling on %s", full, t.to)
	}
	written := full
	if params != nil {
		written += paramsText(*params)
	}
	out := written
	if c, ok := canonType[t.tr.family][full]; ok {
		if c == "" {
			return last, t.refuse(start.Off, written, "type %s of %s has no equivalent on %s", full, t.from, t.to)
		}
		out = c
		if params != nil && keepsParams[c] {
			base, _, _ := strings.Cut(c, "(")
			p := paramsText(*params)
			if strings.EqualFold(p, "(MAX)") {
				p = ""
			}
			out = base + p
		}
	}
	t.emit(typeSpelling(out, t.to), start.Off)
	t.keepLines(ns[j:last+1], start.Off)
	if whole {
		if k := significant(ns, last+1); k < len(ns) {
			return k, t.refuse(ns[k].tok.Off, strings.ToUpper(ns[k].tok.Text), "this clause of a cast (after the type %s) has no common spelling on %s", full, t.to)
		}
		for k := last + 1; k < len(ns); k++ {
			if _, err := t.token(ns, k); err != nil {
				return k, err
			}
		}
		return len(ns) - 1, nil
	}
	return last, nil
}

// paramsText is a type's parameter group as written, white space folded:
// "(10, 2)".
func paramsText(g node) string {
	var b strings.Builder
	b.WriteByte('(')
	for _, k := range g.kids {
		if k.group {
			b.WriteString(paramsText(k))
			continue
		}
		switch k.tok.Kind {
		case Space, Comment:
			continue
		case Punct:
			if k.tok.Text == "," {
				b.WriteString(", ")
				continue
			}
		}
		b.WriteString(strings.ToUpper(k.tok.Text))
	}
	b.WriteByte(')')
	return b.String()
}

func containsFold(list []string, s string) bool {
	for _, w := range list {
		if strings.EqualFold(w, s) {
			return true
		}
	}
	return false
}
